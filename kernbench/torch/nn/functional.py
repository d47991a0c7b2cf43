"""``torch.nn.functional`` for KernBench: activations, norms and ``softmax`` on the device.

``relu``, ``sigmoid``, ``tanh``, ``gelu`` (erf or its tanh form), ``silu``,
``softmax``, ``log_softmax``, ``layer_norm``, ``rms_norm``, ``linear``,
``mse_loss``, ``l1_loss``, ``nll_loss``, ``cross_entropy`` and
``scaled_dot_product_attention`` (:mod:`~kernbench.torch.nn.attention`) take PyTorch's
arguments and run as :class:`kernbench.torch.Tensor`'s methods do
(``inplace=True`` writes the input); the norms and the softmaxes are one
kernel each, ``nll_loss`` a gather kernel and a sum, ``cross_entropy``
``log_softmax`` and then ``nll_loss``, as torch's
(:mod:`~kernbench.torch.nn.class_losses`: their targets are class indices of
any integer dtype; torch takes int64).
Further activations are in :mod:`~kernbench.torch.nn.activations` and
:mod:`~kernbench.torch.nn.shrink_activations` (``prelu``, ``rrelu``, the shrinks,
``threshold``, the alpha dropouts), ``bilinear`` and ``embedding_bag`` in
:mod:`~kernbench.torch.nn.bags`, ``local_response_norm`` and ``channel_shuffle`` in
:mod:`~kernbench.torch.nn.channel_ops`, the
elementwise losses and distances in :mod:`~kernbench.torch.nn.losses_more`, the margin
and embedding losses in :mod:`~kernbench.torch.nn.margin_losses`, ``poisson_nll_loss`` and
``gaussian_nll_loss`` in :mod:`~kernbench.torch.nn.likelihood_losses`,
``group_norm``/``batch_norm``/``instance_norm`` in :mod:`~kernbench.torch.nn.norms`.
``normalize`` divides by the norm, ``pad`` (constant) fills and copies.
``conv1d``/``conv2d``/``conv3d`` (an implicit-GEMM kernel,
:mod:`~kernbench.torch.nn.convolution`), ``conv_transpose1d``/``2d``/``3d`` (the same
kernel on the input spread out, :mod:`~kernbench.torch.nn.conv_transpose`)
and the max, average and adaptive pools (one kernel each,
:mod:`~kernbench.torch.nn.pooling`; the fractional max pools in
:mod:`~kernbench.torch.nn.fractional_pooling`) take torch's arguments, as do ``interpolate``
(``upsample``), ``pixel_shuffle``/``pixel_unshuffle``
(:mod:`~kernbench.torch.nn.interpolation`), ``unfold``/``fold``
(:mod:`~kernbench.torch.nn.folding`) and ``affine_grid``/``grid_sample``
(:mod:`~kernbench.torch.nn.sampling_grids`); ``gumbel_softmax`` is
:mod:`~kernbench.torch.nn.gumbel`.
``dropout`` draws its mask on the host from the rank's generator and copies it
in, as ``torch.rand`` does here (``dropout1d``/``2d``/``3d`` one draw per channel,
:mod:`~kernbench.torch.nn.feature_dropout`); ``one_hot`` gives ``int64``, as torch.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from kernbench.errors import TensorAttributeError, TensorError, user_stacklevel
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS
from kernbench.torch.factories import arange
from kernbench.torch.nn.activations import (
    celu,
    elu,
    glu,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    logsigmoid,
    mish,
    relu6,
    selu,
    softplus,
    softsign,
    tanhshrink,
)
from kernbench.torch.nn.attention import scaled_dot_product_attention
from kernbench.torch.nn.bags import bilinear, embedding_bag
from kernbench.torch.nn.channel_ops import (
    channel_shuffle,
    local_response_norm,
    native_channel_shuffle,
)
from kernbench.torch.nn.class_losses import class_loss
from kernbench.torch.nn.conv_transpose import (
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from kernbench.torch.nn.convolution import conv1d, conv2d, conv3d
from kernbench.torch.nn.ctc import ctc_loss
from kernbench.torch.nn.edge_padding import edge_pad
from kernbench.torch.nn.feature_dropout import dropout1d, dropout2d, dropout3d
from kernbench.torch.nn.folding import fold, unfold
from kernbench.torch.nn.fractional_pooling import (
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from kernbench.torch.nn.gumbel import gumbel_softmax
from kernbench.torch.nn.interpolation import (
    interpolate,
    pixel_shuffle,
    pixel_unshuffle,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)
from kernbench.torch.nn.likelihood_losses import gaussian_nll_loss, poisson_nll_loss
from kernbench.torch.nn.losses_more import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_similarity,
    huber_loss,
    kl_div,
    pairwise_distance,
    smooth_l1_loss,
)
from kernbench.torch.nn.margin_losses import (
    cosine_embedding_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from kernbench.torch.nn.norms import batch_norm, group_norm, instance_norm
from kernbench.torch.nn.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)
from kernbench.torch.nn.sampling_grids import affine_grid, grid_sample
from kernbench.torch.nn.shrink_activations import (
    alpha_dropout,
    feature_alpha_dropout,
    hardshrink,
    prelu,
    rrelu,
    rrelu_,
    softmin,
    softshrink,
    threshold,
    threshold_,
)
from kernbench.torch.nn.unpooling import (
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)
from kernbench.torch.pointwise import gelu, layer_norm, rms_norm, silu
from kernbench.torch.sampling import keep_mask
from kernbench.torch.shapes import flag_argument, int_sequence, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cosine_similarity",
    "huber_loss",
    "kl_div",
    "pairwise_distance",
    "smooth_l1_loss",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "soft_margin_loss",
    "cosine_embedding_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "celu",
    "elu",
    "glu",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "leaky_relu",
    "logsigmoid",
    "mish",
    "relu6",
    "selu",
    "softplus",
    "softsign",
    "tanhshrink",
    "prelu",
    "rrelu",
    "rrelu_",
    "softmin",
    "hardshrink",
    "softshrink",
    "threshold",
    "threshold_",
    "alpha_dropout",
    "feature_alpha_dropout",
    "local_response_norm",
    "channel_shuffle",
    "native_channel_shuffle",
    "cross_entropy",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "embedding",
    "embedding_bag",
    "bilinear",
    "gelu",
    "l1_loss",
    "layer_norm",
    "linear",
    "log_softmax",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "relu",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
    "tanh",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
    "ctc_loss",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "interpolate",
    "upsample",
    "upsample_nearest",
    "upsample_bilinear",
    "pixel_shuffle",
    "affine_grid",
    "grid_sample",
    "gumbel_softmax",
    "pixel_unshuffle",
    "unfold",
    "fold",
]


def _input(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.nn.functional.{what}")


def softmax(
    input: Tensor,  # noqa: A002 - torch's name
    dim: Any = None,
    _stacklevel: int = 3,
    dtype: Any = None,
) -> Tensor:
    """``softmax(input, dim)`` along ``dim``, as :meth:`kernbench.torch.Tensor.softmax`
    (no ``dim``: torch's deprecated implicit choice, with its warning)."""
    x = _input(input, "softmax")
    return x.softmax(_softmax_dim("softmax", x, dim), dtype)


def log_softmax(
    input: Tensor,  # noqa: A002 - torch's name
    dim: Any = None,
    _stacklevel: int = 3,
    dtype: Any = None,
) -> Tensor:
    """``log(softmax(input, dim))``, stable and in one kernel, as
    :meth:`kernbench.torch.Tensor.log_softmax` (no ``dim``: torch's deprecated implicit
    choice, with its warning)."""
    x = _input(input, "log_softmax")
    return x.log_softmax(_softmax_dim("log_softmax", x, dim), dtype)


def _softmax_dim(name: str, x: Tensor, dim: Any) -> Any:
    """``dim``, or torch's ``_get_softmax_dim`` when it is None: 0 for 0-, 1- and 3-D
    inputs, else 1, with torch's deprecation warning (the tutorials' ``F.log_softmax(x)``)."""
    if dim is not None:
        return dim
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to "
        "include dim=X as an argument.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return 0 if x.ndim in (0, 1, 3) else 1


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 - torch's name
    x = _input(input, "relu")
    return x.relu_() if flag_argument(inplace, "relu", "inplace") else x.relu()


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    return _input(input, "sigmoid").sigmoid()


def tanh(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    return _input(input, "tanh").tanh()


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """``input @ weight.T + bias``: the product reads ``weight`` through its strides (no
    copy); the bias is added by a second kernel, where torch's GEMM adds it on the way."""
    x = _input(input, "linear")
    w = _input(weight, "linear")
    if w.ndim not in (1, 2):
        raise TensorError(
            f"torch.nn.functional.linear: weight must be 1-D or 2-D (out_features, "
            f"in_features), got shape {tuple(w.shape)}"
        )
    out = x.matmul(w.mT if w.ndim == 2 else w)
    if bias is not None:
        b = _input(bias, "linear")
        if b.dtype is not out.dtype:
            out.free()
            raise TensorError(
                f"torch.nn.functional.linear: bias is {b.dtype!r} and the product "
                f"{out.dtype!r}; give them one dtype"
            )
        try:
            out.add_(b)
        except TensorError as exc:
            out.free()
            raise TensorError(
                f"torch.nn.functional.linear: bias of shape {tuple(b.shape)} does not add to "
                f"the product of shape {tuple(out.shape)} ({exc})"
            ) from None
    return out


_REDUCTIONS = ("mean", "sum", "none")


def _reduction(what: str, size_average: Any, reduce: Any, reduction: str) -> str:
    """``reduction``, or what torch's legacy ``size_average``/``reduce`` ask for."""
    if size_average is not None or reduce is not None:
        reduction = "none" if reduce is False else "sum" if size_average is False else "mean"
    if reduction not in _REDUCTIONS:
        raise TensorError(
            f"torch.nn.functional.{what}: reduction {reduction!r} is not one of "
            f"{', '.join(map(repr, _REDUCTIONS))}"
        )
    return reduction


def _loss(
    what: str, input: Tensor, target: Tensor, size_average: Any, reduce: Any, reduction: str
) -> Tensor:  # noqa: A002
    x, y = _input(input, what), _input(target, what)
    reduction = _reduction(what, size_average, reduce, reduction)
    if not (x.dtype.is_floating_point and y.dtype.is_floating_point):
        raise TensorError(
            f"torch.nn.functional.{what}: input and target must be floating tensors, got "
            f"{x.dtype!r} and {y.dtype!r} (as torch); call .float() first"
        )
    if tuple(x.shape) != tuple(y.shape):
        warnings.warn(
            f"Using a target size ({y.shape}) that is different to the input size "
            f"({x.shape}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    diff = x - y
    if what == "mse_loss":
        diff.mul_(diff)
    else:
        diff.abs_()
    if reduction == "none":
        return diff
    out = diff.mean() if reduction == "mean" else diff.sum()
    diff.free()
    return out


def mse_loss(
    input: Tensor,  # noqa: A002 - torch's name
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``(input - target) ** 2``, its mean (or sum, or each).  float16/bfloat16 round the
    difference before squaring (torch squares it in float32)."""
    return _loss("mse_loss", input, target, size_average, reduce, reduction)


def l1_loss(
    input: Tensor,  # noqa: A002 - torch's name
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``|input - target|``, its mean (or sum, or each)."""
    return _loss("l1_loss", input, target, size_average, reduce, reduction)


def nll_loss(
    input: Tensor,  # noqa: A002 - torch's name
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``-input[n, target[n]] * weight[target[n]]`` of each sample (log-probabilities
    ``input``; classes along dim 1), its weighted mean (over the weights of the targets
    taken), sum or each; ``ignore_index`` targets count for nothing.  Targets are class
    indices of any integer dtype (torch's are int64)."""
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    return class_loss(
        "nll_loss",
        _input(input, "nll_loss"),
        _input(target, "nll_loss"),
        weight,
        ignore_index,
        reduction,
    )


def cross_entropy(
    input: Tensor,  # noqa: A002 - torch's name
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """:func:`nll_loss` of ``log_softmax(input)`` over the classes (dim 1), or against
    class probabilities of ``input``'s shape; ``label_smoothing`` mixes in the uniform
    distribution over the classes, as torch's."""
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    return class_loss(
        "cross_entropy",
        _input(input, "cross_entropy"),
        _input(target, "cross_entropy"),
        weight,
        ignore_index,
        reduction,
        label_smoothing,
    )


def dropout(
    input: Tensor,  # noqa: A002 - torch's name
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
) -> Tensor:
    """Each element zeroed with probability ``p``, the others scaled by ``1 / (1 - p)``:
    ``input * mask * scale`` as torch's (a NaN stays NaN where dropped).  The mask is
    drawn on the host from the rank's generator (``torch.manual_seed`` repeats it) and
    copied in, one byte an element; torch draws it on the device.  ``input`` itself when
    not ``training``, for ``p`` 0 or no elements, as torch."""
    x = _input(input, "dropout")
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise TensorError(
            f"torch.nn.functional.dropout: dropout probability has to be between 0 and 1, "
            f"but got {p}"
        )
    training = flag_argument(training, "dropout", "training")
    inplace = flag_argument(inplace, "dropout", "inplace")
    if not training or p == 0 or x.numel() == 0:
        return x
    if p == 1:
        return x.mul_(0) if inplace else x * 0  # as torch: times zero, NaN stays NaN
    if not x.dtype.is_floating_point:
        raise TensorError(
            f"torch.nn.functional.dropout: input must be a floating tensor, got {x.dtype!r} "
            "(torch cannot scale it either); call .float() first"
        )
    mask = keep_mask(x, 1.0 - p, "dropout")
    # torch's scale: 1 / (1 - p) in float32
    scale = float(np.float32(1.0) / np.float32(1.0 - p))
    out = x.mul_(mask) if inplace else x * mask
    mask.free()
    return out.mul_(scale)


def embedding(
    input: Tensor,  # noqa: A002 - torch's name
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """``torch.nn.functional.embedding``: the rows of ``weight`` at the integer ``input``
    (an ``index_select`` of rows, one device kernel); ``padding_idx`` only shapes the
    gradient in torch, so here it is checked and has no effect."""
    indices = _input(input, "embedding")
    table = _input(weight, "embedding")
    if indices.dtype.name not in ("int32", "int64"):
        raise TensorError(
            "embedding: Expected tensor for argument #1 'indices' to have one of the following "
            f"scalar types: Long, Int; but got {indices.dtype!r} instead (as torch)"
        )
    if table.ndim != 2:
        raise TensorError(f"embedding: 'weight' must be 2-D, got shape {tuple(table.shape)}")
    rows = table.shape[0]
    if padding_idx is not None and not -rows <= padding_idx < rows:
        raise TensorError(
            f"embedding: padding_idx {padding_idx} must be within num_embeddings ({rows})"
        )
    if max_norm is not None:
        raise TensorError(
            "embedding(max_norm=...): renormalizing the weight in place is not supported; "
            "scale the rows of weight before the lookup"
        )
    picked = table.index_select(0, indices.reshape(-1))
    return picked.view(*indices.shape, table.shape[1])


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """``tensor``'s class indices as rows of ``num_classes`` with a 1 at each index, in
    ``int64``, as torch, by comparing an ``arange`` of
    the classes with the indices on the device.  ``num_classes=-1`` is the largest index
    plus one: its ``max()`` is read to the host, as torch reads it."""
    t = _input(tensor, "one_hot")
    if t.dtype.is_floating_point or t.dtype is BOOL:
        raise TensorError(
            f"torch.nn.functional.one_hot is only applicable to index tensor of an integer "
            f"dtype, got {t.dtype!r}"
        )
    if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral):
        raise TensorError(
            f"torch.nn.functional.one_hot: num_classes must be an int, got {num_classes!r}"
        )
    if t.numel() == 0:
        if num_classes <= 0:
            raise TensorError(
                "torch.nn.functional.one_hot: Can not infer total number of classes from empty "
                "tensor (as torch); give num_classes"
            )
        return t.new_zeros((*t.shape, num_classes), dtype=DTYPE_OBJECTS["int64"])
    timing_only = t.storage_device_tensor.context.timing_only
    if num_classes == -1:
        if timing_only:
            raise TensorError(
                "torch.nn.functional.one_hot: num_classes=-1 reads the largest index, and "
                "there are no values in timing-only mode; give num_classes"
            )
        num_classes = int(t.max().item()) + 1
    if not timing_only:  # torch checks on the host (its CUDA kernel asserts on the device)
        values = t.peek()
        if values.min() < 0:
            raise TensorError(
                f"torch.nn.functional.one_hot: Class values must be non-negative (got "
                f"{int(values.min())}, as torch)"
            )
        if values.max() >= num_classes:
            raise TensorError(
                f"torch.nn.functional.one_hot: Class values must be smaller than num_classes "
                f"(got {int(values.max())} for num_classes={num_classes}, as torch)"
            )
    classes = arange(num_classes, device=t.get_device())
    hits = t.unsqueeze(-1) == classes
    classes.free()
    out = hits.long()
    hits.free()
    return out


def normalize(
    input: Tensor,  # noqa: A002 - torch's name
    p: float = 2.0,
    dim: int = 1,
    eps: float = 1e-12,
    out: Tensor | None = None,
) -> Tensor:
    """``input / max(norm_p(input, dim), eps)``: the norm (``p`` 1 or 2) kept as a dim and
    broadcast, as torch's."""
    x = _input(input, "normalize")
    scale = x.norm(p, dim, keepdim=True).clamp_min_(eps)
    result = x / scale
    scale.free()
    if out is not None:
        if not isinstance(out, Tensor):
            result.free()
            raise TensorError(
                f"torch.nn.functional.normalize: out must be a Tensor, got {type(out).__name__}"
            )
        out.copy_(result)
        result.free()
        return out
    return result


def pad(
    input: Tensor,  # noqa: A002 - torch's name
    pad: Any,
    mode: str = "constant",
    value: float | None = None,
) -> Tensor:
    """``input`` with ``pad`` = (left, right) of the last dim, then of the one before, ...
    filled with ``value`` (0); a negative amount crops.  A fill and one copy kernel.
    ``mode="reflect"``/``"replicate"``/``"circular"``: one gather per padded dim
    (``edge_padding``)."""
    x = _input(input, "pad")
    if not isinstance(mode, str) or mode not in ("constant", "reflect", "replicate", "circular"):
        raise TensorError(
            f"torch.nn.functional.pad: mode {mode!r}: Unrecognised padding mode (valid: "
            "'constant', 'reflect', 'replicate', 'circular')"
        )
    amounts = int_sequence(pad, "torch.nn.functional.pad", "pad")
    if mode != "constant":
        if value is not None and value != 0:
            raise TensorError(
                f'torch.nn.functional.pad: Padding mode "{mode}" doesn\'t take in value argument'
            )
        return edge_pad(x, list(amounts), mode)
    if len(amounts) % 2 or len(amounts) // 2 > x.ndim:
        raise TensorError(
            f"torch.nn.functional.pad: Padding length must be divisible by 2 and at most twice "
            f"the input's dims ({x.ndim}), got {len(amounts)}"
        )
    shape = list(x.shape)
    source = [slice(None)] * x.ndim
    target = [slice(None)] * x.ndim
    for i in range(len(amounts) // 2):
        d = x.ndim - 1 - i
        before, after = amounts[2 * i], amounts[2 * i + 1]
        size = shape[d] + before + after
        if size < 0:
            raise TensorError(
                f"torch.nn.functional.pad: the padded size of dim {d} would be {size} "
                f"(input {shape[d]}, pad ({before}, {after}))"
            )
        source[d] = slice(max(-before, 0), shape[d] - max(-after, 0))
        target[d] = slice(max(before, 0), size - max(after, 0))
        shape[d] = size
    out = x.new_full(shape, 0 if value is None else value)
    if all(s.start < s.stop for s in target if s != slice(None)) and out.numel():
        out[tuple(target)] = x[tuple(source)]
    return out


def __getattr__(name: str) -> Any:
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn.functional' has no attribute {name!r}: "
        f"there are {', '.join(__all__)} (as device kernels)"
    )
