"""``torch.nn.functional``'s ``prelu``, ``rrelu``, ``softmin``, ``hardshrink``,
``softshrink``, ``threshold``, ``alpha_dropout`` and ``feature_alpha_dropout``.

Each is a composition of tensor methods (a comparison and a ``where``, a ``clamp``, a
product with a mask), so autograd records it method by method and a call costs the
few elementwise kernels it makes; torch runs most of these as one fused kernel.  The
random draws (``rrelu``'s slopes in training, the dropouts' masks) come from the
rank's generator on the host and are copied in, as ``torch.rand`` does here.
``inplace=True`` writes the result back into ``input`` (one copy more than torch).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from kernbench.errors import TensorError, TensorValueError, user_stacklevel
from kernbench.torch.dtypes import BOOL
from kernbench.torch.nn.argument_checks import (
    call_name,
    floating_input,
    number_argument,
)
from kernbench.torch.sampling import keep_mask, rand_like
from kernbench.torch.shapes import flag_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "alpha_dropout",
    "feature_alpha_dropout",
    "hardshrink",
    "prelu",
    "rrelu",
    "rrelu_",
    "softmin",
    "softshrink",
    "threshold",
    "threshold_",
]

# torch's SELU alpha times its scale: what a dropped unit is set to in alpha dropout.
_ALPHA_PRIME = 1.7580993408473766


def _written(x: Tensor, out: Tensor, inplace: Any, what: str) -> Tensor:
    if flag_argument(inplace, call_name(what), "inplace"):
        return x.copy_(out)
    return out


def prelu(input: Tensor, weight: Tensor) -> Tensor:  # noqa: A002
    """``x`` where positive, ``weight * x`` elsewhere; ``weight`` has one element or one a
    channel (dim 1).  A product and a ``where``."""
    what = "prelu"
    x = floating_input(input, what)
    w = floating_input(weight, what, "weight")
    if w.ndim > 1:
        raise TensorError(
            f"{call_name(what)}: Expected `weight` to be a scalar or 1D tensor, but got: "
            f"ndim = {w.ndim}"
        )
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.numel() not in (1, channels):
        raise TensorError(
            f"{call_name(what)}: Mismatch of parameter numbers and input channel size. Found "
            f"parameter numbers = {w.numel()} and channel size = {channels}."
        )
    if w.numel() == 1:
        slope = w.reshape(())
    else:
        slope = w.reshape(channels, *([1] * (x.ndim - 2)))
    return x.where(x > 0, x * slope)


def rrelu(
    input: Tensor,  # noqa: A002
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """``x`` where positive, ``a * x`` elsewhere: in training each element's ``a`` drawn
    from ``U(lower, upper)`` (the rank's generator), else the mean slope
    ``(lower + upper) / 2``, as torch."""
    what = "rrelu"
    x = floating_input(input, what)
    low = number_argument(lower, what, "lower")
    high = number_argument(upper, what, "upper")
    if low > high:
        raise TensorError(
            f"{call_name(what)}: Lower bound should be less than or equal to the upper bound "
            f"(got lower={lower}, upper={upper})"
        )
    if flag_argument(training, call_name(what), "training"):
        slopes = rand_like(x).mul_(high - low).add_(low)
        noise = slopes.where(x <= 0, 1.0)
    else:
        noise = x.new_full(tuple(x.shape), (low + high) / 2).where(x <= 0, 1.0)
    return _written(x, x * noise, inplace, what)


def rrelu_(
    input: Tensor,  # noqa: A002
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
) -> Tensor:
    """:func:`rrelu` written into ``input``."""
    return rrelu(input, lower, upper, training, inplace=True)


def softmin(
    input: Tensor,  # noqa: A002
    dim: int | None = None,
    _stacklevel: int = 3,
    dtype: Any = None,
) -> Tensor:
    """``softmax(-input, dim)``; no ``dim``: torch's deprecated implicit choice (0 for 0-,
    1- and 3-D inputs, else 1), with its warning."""
    x = tensor_argument(input, call_name("softmin"))
    if dim is None:
        warnings.warn(
            "Implicit dimension choice for softmin has been deprecated. Change the call to "
            "include dim=X as an argument.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        dim = 0 if x.ndim in (0, 1, 3) else 1
    return (-x).softmax(dim, dtype)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """``x`` where ``|x| > lambd``, else 0 (NaN stays NaN)."""
    what = "hardshrink"
    x = floating_input(input, what)
    lam = number_argument(lambd, what, "lambd")
    inside = (x >= -lam) & (x <= lam)
    return x.where(~inside, 0.0)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between:
    ``x - clamp(x, -lambd, lambd)``."""
    what = "softshrink"
    x = floating_input(input, what)
    lam = number_argument(lambd, what, "lambd")
    if lam < 0:
        raise TensorError(
            f"{call_name(what)}: lambda must be greater or equal to 0, but found to be {lam}."
        )
    return x - x.clamp(-lam, lam)


def threshold(
    input: Tensor,  # noqa: A002
    threshold: float,
    value: float,
    inplace: bool = False,
) -> Tensor:
    """``x`` where ``x > threshold``, else ``value`` (NaN stays NaN); integer tensors too,
    as torch."""
    return _thresholded("threshold", input, threshold, value, inplace)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    """:func:`threshold` written into ``input``."""
    return _thresholded("threshold_", input, threshold, value, True)


def _thresholded(what: str, input: Any, threshold: Any, value: Any, inplace: Any) -> Tensor:  # noqa: A002
    x = tensor_argument(input, call_name(what))
    if x.dtype is BOOL:
        raise TensorError(f"{call_name(what)}: not implemented for 'Bool' (as torch)")
    limit = number_argument(threshold, what, "threshold")
    fill = number_argument(value, what, "value")
    if not x.dtype.is_floating_point:
        fill = int(fill)
    return _written(x, x.where(~(x <= limit), fill), inplace, what)


def _probability(p: Any, what: str) -> float:
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
        raise TensorValueError(
            f"{call_name(what)}: dropout probability has to be between 0 and 1, but got {p}"
        )
    return float(p)


def _alpha_dropout(
    what: str, input: Any, p: Any, training: Any, inplace: Any, feature: bool
) -> Tensor:  # noqa: A002
    x = tensor_argument(input, call_name(what))
    p = _probability(p, what)
    training = flag_argument(training, call_name(what), "training")
    if feature and x.ndim < 2:
        raise TensorError(
            f"{call_name(what)}: Feature dropout requires at least 2 dimensions in the input"
        )
    if p == 0 or not training or x.numel() == 0:
        return x
    if p == 1:
        return _written(x, x * 0.0, inplace, what)
    if not x.dtype.is_floating_point:
        raise TensorError(f"{call_name(what)}: input must be a floating tensor, got {x.dtype!r}")
    shape = (x.shape[0], x.shape[1], *([1] * (x.ndim - 2))) if feature else None
    kept = keep_mask(x, 1.0 - p, what, shape).to(x.dtype)
    a = 1.0 / math.sqrt((_ALPHA_PRIME**2 * p + 1) * (1 - p))
    shift = (kept - 1.0) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p
    return _written(x, x * (kept * a) + shift, inplace, what)


def alpha_dropout(
    input: Tensor,  # noqa: A002
    p: float = 0.5,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """Each element kept with probability ``1 - p`` or set to SELU's negative saturation,
    then an affine map that keeps zero mean and unit variance, as torch's; ``input``
    itself when not ``training``."""
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, feature=False)


def feature_alpha_dropout(
    input: Tensor,  # noqa: A002
    p: float = 0.5,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """:func:`alpha_dropout` with one draw per (sample, channel)."""
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, feature=True)
