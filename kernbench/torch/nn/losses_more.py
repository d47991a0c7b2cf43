"""``torch.nn.functional``'s elementwise losses and distances: ``binary_cross_entropy``,
``binary_cross_entropy_with_logits``, ``kl_div``, ``smooth_l1_loss``, ``huber_loss``,
``cosine_similarity`` and ``pairwise_distance``.

The losses are one kernel each for the elementwise loss (weights and
``pos_weight`` read in place through broadcast strides,
:mod:`~kernbench.torch.nn.pointwise_loss_kernels`), then a sum for ``'sum'``,
``'mean'`` (and ``kl_div``'s ``'batchmean'``), as torch's.  The distances are
compositions of tensor ops (norms, a product and a sum), as torch's are.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from kernbench.errors import TensorError, user_stacklevel
from kernbench.torch.dtypes import get_default_dtype, promote_types
from kernbench.torch.nn.pointwise_loss_kernels import launch_pointwise_loss
from kernbench.torch.shapes import dim_index, flag_argument, tensor_argument
from kernbench.torch.tensor import Tensor
from kernbench.torch.views import broadcast_shapes, same_device

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cosine_similarity",
    "huber_loss",
    "kl_div",
    "pairwise_distance",
    "smooth_l1_loss",
]

_REDUCTIONS = ("mean", "sum", "none")


def _call(what: str) -> str:
    return f"torch.nn.functional.{what}"


def _reduction(what: str, size_average: Any, reduce: Any, reduction: Any, valid=_REDUCTIONS) -> str:
    if size_average is not None or reduce is not None:
        reduction = "none" if reduce is False else "sum" if size_average is False else "mean"
    if not isinstance(reduction, str) or reduction not in valid:
        raise TensorError(
            f"{_call(what)}: reduction {reduction!r} is not one of {', '.join(map(repr, valid))}"
        )
    return reduction


def _number(value: Any, what: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorError(f"{_call(what)}: {name} must be a number, got {value!r}")
    return float(value)


def _operand(t: Tensor, shape: tuple[int, ...]) -> tuple[Any, int, tuple[int, ...]]:
    view = t.expand(shape) if tuple(t.shape) != shape else t
    geo = view.geometry
    return view.storage_device_tensor, geo.offset, geo.strides


def _elementwise_loss(
    what: str,
    op: str,
    x: Tensor,
    y: Tensor,
    reduction: str,
    *,
    weight: Any = None,
    pos_weight: Any = None,
    a: float = 0.0,
    same_shape: bool = False,
    divisor: int | None = None,
) -> Tensor:
    if not (x.dtype.is_floating_point and y.dtype.is_floating_point):
        raise TensorError(
            f"{_call(what)}: input and target must be floating tensors, got {x.dtype!r} and "
            f"{y.dtype!r} (as torch); call .float() first"
        )
    if tuple(x.shape) != tuple(y.shape):
        if same_shape:
            raise TensorError(
                f"{_call(what)}: Using a target size ({tuple(y.shape)}) that is different to "
                f"the input size ({tuple(x.shape)}) is deprecated. Please ensure they have "
                "the same size."
            )
        if op in ("smooth_l1", "huber"):
            warnings.warn(
                f"Using a target size ({y.shape}) that is different to the input size "
                f"({x.shape}). This will likely lead to incorrect results due to "
                "broadcasting. Please ensure they have the same size.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
    shape = broadcast_shapes(x.shape, y.shape, _call(what))
    dtype = promote_types(x.dtype, y.dtype)
    extras = {}
    for name, value in (("weight", weight), ("pos_weight", pos_weight)):
        if value is None:
            continue
        t = tensor_argument(value, f"{_call(what)} {name}")
        same_device(_call(what), x, t)
        if tuple(broadcast_shapes(shape, t.shape, _call(what))) != tuple(shape):
            raise TensorError(
                f"{_call(what)}: {name} of shape {tuple(t.shape)} must broadcast to the "
                f"input's shape {tuple(shape)}"
            )
        extras[name] = _operand(t, tuple(shape))
    same_device(_call(what), x, y)
    out = x.new_empty(shape, dtype=dtype)
    if out.numel():
        launch_pointwise_loss(
            op,
            shape,
            _operand(x, tuple(shape)),
            _operand(y, tuple(shape)),
            out.device_tensor,
            a=a,
            **extras,
        )
    if reduction == "none":
        return out
    if reduction == "sum":
        result = out.sum()
    elif divisor is not None:  # kl_div's batchmean
        result = out.sum().div_(divisor)
    else:
        result = out.mean()
    out.free()
    return result


def binary_cross_entropy(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``-weight * (t * log(x) + (1 - t) * log(1 - x))``, the logs clamped at -100 as
    torch's; one kernel, then the reduction.  ``input`` must be probabilities in
    [0, 1] (read to the host to check when there are values, as torch's CPU kernel
    checks them; timing-only runs skip it)."""
    what = "binary_cross_entropy"
    x = tensor_argument(input, _call(what))
    y = tensor_argument(target, _call(what))
    reduction = _reduction(what, size_average, reduce, reduction)
    if x.dtype.is_floating_point and not x.storage_device_tensor.context.timing_only:
        values = x.peek()
        if values.size and not ((values >= 0) & (values <= 1)).all():
            raise TensorError(
                f"{_call(what)}: all elements of input should be between 0 and 1 (as torch); "
                "pass logits to binary_cross_entropy_with_logits"
            )
    return _elementwise_loss(what, "bce", x, y, reduction, weight=weight, same_shape=True)


def binary_cross_entropy_with_logits(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably from the logits:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * log(1 + exp(-x))``, times ``weight``;
    one kernel, then the reduction."""
    what = "binary_cross_entropy_with_logits"
    x = tensor_argument(input, _call(what))
    y = tensor_argument(target, _call(what))
    reduction = _reduction(what, size_average, reduce, reduction)
    return _elementwise_loss(
        what, "bce_logits", x, y, reduction, weight=weight, pos_weight=pos_weight, same_shape=True
    )


def kl_div(
    input: Tensor,  # noqa: A002
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """``target * (log(target) - input)`` (``input`` log-probabilities; with
    ``log_target``, ``exp(target) * (target - input)``); one kernel, then the reduction.
    ``'mean'`` averages over every element and warns, as torch; ``'batchmean'`` divides
    the sum by the batch size (dim 0)."""
    what = "kl_div"
    x = tensor_argument(input, _call(what))
    y = tensor_argument(target, _call(what))
    reduction = _reduction(
        what, size_average, reduce, reduction, ("mean", "sum", "none", "batchmean")
    )
    if reduction == "mean" and size_average is None and reduce is None:
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    op = "kl_div_log" if flag_argument(log_target, _call(what), "log_target") else "kl_div"
    divisor = None
    if reduction == "batchmean":
        reduction = "sum" if x.ndim == 0 else "batchmean"
        divisor = x.shape[0] if x.ndim else None
    return _elementwise_loss(what, op, x, y, reduction, divisor=divisor)


def smooth_l1_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """``0.5 * d**2 / beta`` where ``d = |x - t| < beta``, else ``d - 0.5 * beta``
    (``beta`` 0: ``l1_loss``); one kernel, then the reduction."""
    what = "smooth_l1_loss"
    x, y = tensor_argument(input, _call(what)), tensor_argument(target, _call(what))
    reduction = _reduction(what, size_average, reduce, reduction)
    beta = _number(beta, what, "beta")
    if beta < 0:
        raise TensorError(f"{_call(what)} does not support negative values for beta (got {beta})")
    return _elementwise_loss(what, "smooth_l1", x, y, reduction, a=beta)


def huber_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Tensor | None = None,
) -> Tensor:
    """``0.5 * d**2`` where ``d = |x - t| < delta``, else ``delta * (d - 0.5 * delta)``,
    times ``weight`` (torch 2.6's argument); one kernel, then the reduction."""
    what = "huber_loss"
    x, y = tensor_argument(input, _call(what)), tensor_argument(target, _call(what))
    reduction = _reduction(what, None, None, reduction)
    delta = _number(delta, what, "delta")
    if delta <= 0:
        raise TensorError(
            f"{_call(what)} does not support non-positive values for delta (got {delta})"
        )
    return _elementwise_loss(what, "huber", x, y, reduction, a=delta, weight=weight)


def _as_float(t: Tensor) -> tuple[Tensor, bool]:
    if t.dtype.is_floating_point:
        return t, False
    return t.to(get_default_dtype()), True


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 * x2, dim) / (max(||x1||, eps) * max(||x2||, eps))``, broadcasting
    ``x1`` and ``x2``; two norms, a product, a sum and a division (integers in the
    default float dtype, as torch)."""
    what = "cosine_similarity"
    a = tensor_argument(x1, _call(what))
    b = tensor_argument(x2, _call(what))
    eps = _number(eps, what, "eps")
    shape = broadcast_shapes(a.shape, b.shape, _call(what))
    d = dim_index(dim, len(shape), _call(what))
    a, made_a = _as_float(a)
    b, made_b = _as_float(b)
    wide_a = a.expand(shape) if tuple(a.shape) != tuple(shape) else a
    wide_b = b.expand(shape) if tuple(b.shape) != tuple(shape) else b
    norm_a = wide_a.norm(2, d, keepdim=True).clamp_min_(eps)
    norm_b = wide_b.norm(2, d, keepdim=True).clamp_min_(eps)
    product = a * b
    dot = product.sum(d)
    scale = norm_a.mul_(norm_b)
    result = dot.div_(scale.squeeze(d))
    temporaries = [product, norm_b, scale, *((a,) if made_a else ()), *((b,) if made_b else ())]
    for t in temporaries:
        t.free()
    return result


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim: a subtraction, an add and one norm, as
    torch's, for ``p`` 1 or 2; ``max |d|`` for ``inf``; ``sum(|d| ** p) ** (1 / p)`` (an
    abs, two powers and a sum) for any other ``p > 0``."""
    what = "pairwise_distance"
    a = tensor_argument(x1, _call(what))
    b = tensor_argument(x2, _call(what))
    eps = _number(eps, what, "eps")
    p = _number(p, what, "p")
    keepdim = flag_argument(keepdim, _call(what), "keepdim")
    if not p > 0:
        raise TensorError(f"{_call(what)}: p must be positive (or inf) here, got {p!r}")
    diff = a - b
    if not diff.dtype.is_floating_point:
        wide = diff.to(get_default_dtype())
        diff.free()
        diff = wide
    diff.add_(eps)
    dim = -1 if diff.ndim else None
    if p in (1, 2):
        out = diff.norm(p, dim, keepdim)
    elif not diff.ndim:
        out = diff.abs()
    elif math.isinf(p):
        out = diff.abs().amax(-1, keepdim)
    else:
        out = diff.abs().pow(p).sum(-1, keepdim).pow(1.0 / p)
    diff.free()
    return out
