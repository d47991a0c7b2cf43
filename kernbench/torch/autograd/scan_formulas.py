"""Backward formulas of the running scans ``cumprod`` and ``logcumsumexp`` (``cumsum``'s
is in :mod:`~kernbench.torch.autograd.pointwise_formulas`).

Both are torch's (``cumprod_backward`` and ``logcumsumexp_backward`` in its
``FunctionsManual.cpp``), written with the facade's scans, flips and elementwise ops
and costing what those cost.  ``cumprod``'s gradient of ``x[i]`` is
``sum(g[j] * y[j] for j >= i) / x[i]`` (``y`` the running products) up to a line's
first zero; at that zero it is the same sum over the running products taken with the
zero as 1, and past it 0 (every product there holds the zero), so no division by a
zero.  ``logcumsumexp``'s is ``sum(g[j] * exp(x[i] - y[j]) for j >= i)``, summed in
the log domain for the positive and the negative parts of ``g`` apart (a reversed
``logcumsumexp`` each), so nothing overflows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.formulas import Unsupported, recorded, untracked
from kernbench.torch.logic import where
from kernbench.torch.type_info import finfo

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["SCAN_RULES"]


def _scan_dim(self: Tensor, dim: Any) -> int:
    """``dim`` as a non-negative dim of ``self`` (0 for a 0-d tensor); Unsupported for
    what the forward refuses (it says why)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise Unsupported
    rank = max(self.ndim, 1)
    if not -rank <= dim < rank:
        raise Unsupported
    return dim % rank


def _reverse_cumsum(t: Tensor, d: int) -> Tensor:
    return t.flip(d).cumsum(d).flip(d)


def _cumprod(fn: Callable, self: Tensor, dim: Any = None, *, dtype: Any = None) -> Any:
    d = _scan_dim(self, dim)
    out = untracked(fn, self, dim, dtype=dtype)
    in_dtype = self.dtype

    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        if g.ndim == 0:
            return (g.to(in_dtype),)
        x = x.to(g.dtype)
        zeros = x == 0
        seen = zeros.to(g.dtype).cumsum(d)  # zeros up to and including each element
        before = seen == 0
        first = zeros & (seen == 1)
        # before the first zero: the running sums divided by x (never 0 there)
        grad = _reverse_cumsum(g * y, d) / where(before, x, 1.0)
        # at the first zero: the products with that zero taken as 1
        skipped = where(first, 1.0, x).cumprod(d)
        at_zero = _reverse_cumsum(g * skipped, d)
        grad = where(before, grad, where(first, at_zero, 0.0))
        return (grad.to(in_dtype),)

    return recorded(out, "CumprodBackward0", (self,), backward, (self, out))


def _logcumsumexp(fn: Callable, self: Tensor, dim: Any) -> Any:
    d = _scan_dim(self, dim)
    out = untracked(fn, self, dim)

    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        if g.ndim == 0:
            return (g,)
        lowest = finfo(g.dtype).min
        log_abs = where(g == 0, 1.0, g.abs()).log()

        def part(mask: Tensor) -> Tensor:
            log_g = where(mask, log_abs - y, lowest)
            return (log_g.flip(d).logcumsumexp(d).flip(d) + x).exp()

        return (part(g > 0) - part(g < 0),)

    return recorded(out, "LogcumsumexpBackward0", (self,), backward, (self, out))


SCAN_RULES: dict[str, Callable[..., Any]] = {
    "cumprod": _cumprod,
    "logcumsumexp": _logcumsumexp,
}
