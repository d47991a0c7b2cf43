"""Backward formulas of ``torch.nn.functional``: ``linear``, ``gelu``, ``silu``,
``layer_norm``, ``mse_loss``, ``cross_entropy``, ``nll_loss``, ``embedding`` and
``dropout``.

As in :mod:`~kernbench.torch.autograd.formulas`, each rule runs the forward as it always
ran, with recording off, and records one node.  ``dropout`` draws its mask as the forward
does and keeps it for the backward (torch keeps its mask too).  The backward formulas
are written with the facade's ops (``gelu``'s is about ten elementwise kernels where
torch's is one fused kernel), so they cost what those ops cost.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.torch.autograd.formulas import Unsupported, recorded, sum_to, untracked
from kernbench.torch.logic import where
from kernbench.torch.nn import functional as F
from kernbench.torch.sampling import keep_mask

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["NN_RULES"]


def _linear(fn: Callable, input: Tensor, weight: Tensor, bias: Any = None) -> Any:  # noqa: A002
    if getattr(weight, "ndim", 0) != 2:
        raise Unsupported
    out = untracked(fn, input, weight, bias)
    x_shape = tuple(input.shape)
    out_features, in_features = weight.shape
    need_x, need_w = input.requires_grad, weight.requires_grad
    need_b = bias is not None and bias.requires_grad
    b_shape = None if bias is None else tuple(bias.shape)

    def backward(g: Tensor, x: Tensor, w: Tensor) -> Sequence[Any]:
        g2 = g.reshape(-1, out_features)
        gx = g.matmul(w).reshape(x_shape) if need_x else None  # dX = dY @ W
        gw = g2.mT.matmul(x.reshape(-1, in_features)) if need_w else None  # dW = dY^T @ X
        gb = sum_to(g2.sum(0), b_shape) if need_b else None
        return gx, gw, gb

    name = "AddmmBackward0" if bias is not None else "MmBackward0"
    return recorded(out, name, (input, weight, bias), backward, (input, weight))


_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_K = math.sqrt(2.0 / math.pi)


def _gelu(fn: Callable, input: Tensor, approximate: str = "none") -> Any:  # noqa: A002
    out = untracked(fn, input, approximate)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        if approximate == "tanh":
            x2 = x * x
            t = ((x + x2 * x * 0.044715) * _TANH_K).tanh()
            inner = (1 - t * t) * (x2 * (3 * 0.044715) + 1) * _TANH_K
            return (g * ((t + 1) * 0.5 + x * inner * 0.5),)
        cdf = ((x * _SQRT_HALF).erf() + 1) * 0.5
        pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
        return (g * (cdf + x * pdf),)

    return recorded(out, "GeluBackward0", (input,), backward, (input,))


def _silu(fn: Callable, input: Tensor, inplace: bool = False) -> Any:  # noqa: A002
    if inplace:
        raise Unsupported  # recorded as the out-of-place call written back (in_place.py)
    out = untracked(fn, input)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        s = x.sigmoid()
        return (g * s * (x * (1 - s) + 1),)

    return recorded(out, "SiluBackward0", (input,), backward, (input,))


def _layer_norm(
    fn: Callable,
    input: Tensor,  # noqa: A002
    normalized_shape: Any,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
) -> Any:
    out = untracked(fn, input, normalized_shape, weight, bias, eps)
    k = 1 if isinstance(normalized_shape, numbers.Integral) else len(tuple(normalized_shape))
    dims = tuple(range(input.ndim - k, input.ndim))
    need_x = input.requires_grad
    need_w = weight is not None and weight.requires_grad
    need_b = bias is not None and bias.requires_grad
    shape = tuple(input.shape[input.ndim - k :])

    def backward(g: Tensor, x: Tensor, w: Any) -> Sequence[Any]:
        mu = x.mean(dims, keepdim=True)
        xc = x - mu
        rstd = ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
        xhat = xc * rstd
        gx = gw = gb = None
        if need_x:
            gh = g * w if w is not None else g
            gx = gh - gh.mean(dims, keepdim=True) - xhat * (gh * xhat).mean(dims, keepdim=True)
            gx = gx * rstd
        if need_w:
            gw = sum_to(g * xhat, shape)
        if need_b:
            gb = sum_to(g, shape)
        return gx, gw, gb

    return recorded(
        out, "NativeLayerNormBackward0", (input, weight, bias), backward, (input, weight)
    )


def _plain_reduction(size_average: Any, reduce: Any, reduction: Any) -> str:
    if size_average is not None or reduce is not None or reduction not in ("mean", "sum", "none"):
        raise Unsupported
    return reduction


def _mse_loss(
    fn: Callable,
    input: Tensor,  # noqa: A002
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    reduction = _plain_reduction(size_average, reduce, reduction)
    out = untracked(fn, input, target, reduction=reduction)
    x_shape, y_shape = tuple(input.shape), tuple(target.shape)
    count = math.prod(np.broadcast_shapes(x_shape, y_shape))
    need_x, need_y = input.requires_grad, target.requires_grad
    scale = 2.0 / count if reduction == "mean" else 2.0

    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        d = (x - y) * (g * scale)
        gx = sum_to(d, x_shape) if need_x else None
        gy = sum_to(-d, y_shape) if need_y else None
        return gx, gy

    return recorded(out, "MseLossBackward0", (input, target), backward, (input, target))


def _class_grad(
    g: Tensor,
    x: Tensor,
    t: Tensor,
    weight: Tensor | None,
    ignore_index: int,
    reduction: str,
    scores: bool,
    smoothing: float = 0.0,
) -> Tensor:
    """The gradient of cross_entropy or nll_loss with class-index targets ``t`` (classes
    along dim 1, or 0 for one sample).  Each sample's loss is ``-sum(q * logp)`` over the
    classes with ``q = w * ((1 - s) onehot + s / C)`` (``w`` the class weights, 1 without
    them; ``s`` cross_entropy's label_smoothing, as torch mixes its smoothing term), so the
    gradient is ``softmax(x) sum(q) - q`` for cross_entropy and ``-q`` for nll_loss, 0 for
    ignored samples; "mean" divides by the weights of the targets taken, as torch."""
    cdim = 1 if x.ndim >= 2 else 0
    classes = x.shape[cdim]
    valid = t != ignore_index
    index = where(valid, t, 0)
    onehot = F.one_hot(index.reshape(-1), classes).reshape(*t.shape, classes)
    if x.ndim > 2:
        onehot = onehot.permute(0, x.ndim - 1, *range(1, x.ndim - 1))
    keep = valid.unsqueeze(cdim)
    q = onehot
    if smoothing:
        q = onehot.to(x.dtype) * (1.0 - smoothing) + smoothing / classes
    if weight is not None:
        w = weight.reshape(classes, *([1] * (x.ndim - cdim - 1)))
        q = q * w
    if not scores:
        grad = -q.to(x.dtype)
    elif weight is None:  # sum(q) is 1
        grad = x.softmax(cdim) - q
    else:
        grad = x.softmax(cdim) * q.sum(cdim, keepdim=True) - q
    if reduction == "none":
        return grad * keep * g.unsqueeze(cdim)
    if reduction == "sum":
        return grad * keep * g
    taken = valid.sum() if weight is None else (onehot * w * keep).sum()
    # ignored samples get 0 even when every sample is ignored (0 / 0 loss), as torch's
    return where(keep, grad * (g / taken), 0.0)


def _class_loss(scores: bool) -> Callable[..., Any]:
    def rule(
        fn: Callable,
        input: Tensor,  # noqa: A002
        target: Tensor,
        weight: Any = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> Any:
        reduction = _plain_reduction(size_average, reduce, reduction)
        smoothing = label_smoothing if scores else 0.0
        if not scores and label_smoothing != 0.0:
            raise Unsupported
        if weight is not None and (not hasattr(weight, "requires_grad") or weight.requires_grad):
            raise Unsupported  # torch has no weight gradient; the forward checks the rest
        if not isinstance(smoothing, numbers.Real) or not 0.0 <= smoothing <= 1.0:
            raise Unsupported  # the forward says what is wrong with it
        kwargs: dict[str, Any] = {"ignore_index": ignore_index, "reduction": reduction}
        if scores:
            kwargs["label_smoothing"] = label_smoothing
        out = untracked(fn, input, target, weight, **kwargs)
        if scores and target.dtype.is_floating_point:
            return _probability_targets(out, input, target, weight, reduction, smoothing)

        def backward(g: Tensor, x: Tensor, t: Tensor, w: Any) -> Sequence[Any]:
            return _class_grad(g, x, t, w, ignore_index, reduction, scores, smoothing), None

        return recorded(out, "NllLossBackward0", (input, target), backward, (input, target, weight))

    return rule


def _probability_targets(
    out: Tensor,
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None,
    reduction: str,
    smoothing: float,
) -> Tensor:
    """cross_entropy against class probabilities ``target`` (``input``'s shape): the loss
    is ``-sum(w * t' * log_softmax(x))`` over the classes, ``t' = t (1 - s) + s / C`` and
    ``w`` the class weights (1 without them), so the gradient is ``softmax(x) sum(w t') -
    w t'`` for ``x`` and ``-(1 - s) w log_softmax(x)`` for ``t`` (each times the incoming
    gradient, over the samples for "mean", as torch: weights do not change the divisor)."""
    need_x, need_t = input.requires_grad, target.requires_grad

    def scaled(d: Tensor, g: Tensor, cdim: int, samples: int) -> Tensor:
        if reduction == "none":
            return d * g.unsqueeze(cdim)
        return d * (g / samples) if reduction == "mean" else d * g

    def backward(g: Tensor, x: Tensor, t: Tensor, w: Any) -> Sequence[Any]:
        cdim = 1 if x.ndim >= 2 else 0
        classes = x.shape[cdim]
        samples = max(x.numel() // max(classes, 1), 1)
        mixed = t * (1.0 - smoothing) + smoothing / classes if smoothing else t
        wb = None if w is None else w.reshape(classes, *([1] * (x.ndim - cdim - 1)))
        if wb is not None:
            mixed = mixed * wb
        gx = gt = None
        if need_x:
            gx = scaled(x.softmax(cdim) * mixed.sum(cdim, keepdim=True) - mixed, g, cdim, samples)
        if need_t:
            d = x.log_softmax(cdim) * -(1.0 - smoothing)
            gt = scaled(d if wb is None else d * wb, g, cdim, samples)
        return gx, gt

    return recorded(
        out,
        "SoftmaxCrossEntropyBackward0",
        (input, target),
        backward,
        (input, target, weight),
    )


def _embedding(
    fn: Callable,
    input: Tensor,  # noqa: A002
    weight: Tensor,
    padding_idx: Any = None,
    max_norm: Any = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Any:
    if scale_grad_by_freq or sparse:
        raise Unsupported
    out = untracked(fn, input, weight, padding_idx, max_norm)
    rows, width = weight.shape

    def backward(g: Tensor, indices: Tensor) -> Sequence[Any]:
        gw = g.new_zeros(rows, width)
        gw.index_add_(0, indices.reshape(-1), g.reshape(-1, width))
        if padding_idx is not None:
            gw[padding_idx] = 0
        return None, gw

    return recorded(out, "EmbeddingBackward0", (input, weight), backward, (input,))


def _dropout(
    fn: Callable,
    input: Tensor,  # noqa: A002
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
) -> Any:
    if inplace is True:
        raise Unsupported  # recorded as the out-of-place call written back (in_place.py)
    regular = isinstance(p, numbers.Real) and not isinstance(p, bool) and 0 < p < 1
    if not (regular and training is True and input.numel() and input.dtype.is_floating_point):
        out = untracked(fn, input, p, training, inplace)  # identity, times zero, or its error
        return recorded(out, "MulBackward0", (input,), lambda g: (g * 0,))
    # As F.dropout: the mask drawn the same way, x * mask, then the scale in place.
    mask = untracked(keep_mask, input, 1.0 - p, "dropout")
    scale = float(np.float32(1.0) / np.float32(1.0 - p))
    out = untracked(lambda: (input * mask).mul_(scale))

    def backward(g: Tensor, kept: Tensor) -> Sequence[Any]:
        return ((g * kept).mul_(scale),)

    return recorded(out, "NativeDropoutBackward0", (input,), backward, (mask,))


NN_RULES: dict[str, Callable[..., Any]] = {
    "linear": _linear,
    "gelu": _gelu,
    "silu": _silu,
    "layer_norm": _layer_norm,
    "mse_loss": _mse_loss,
    "cross_entropy": _class_loss(scores=True),
    "nll_loss": _class_loss(scores=False),
    "embedding": _embedding,
    "dropout": _dropout,
}
