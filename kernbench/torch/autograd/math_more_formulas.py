"""Backward formulas of the NaN-skipping reductions, ``aminmax`` and the further products.

torch's, written with the facade's ops and costing what those cost: ``nansum``
(``NansumBackward0``: the gradient back over the reduced dims, 0 at the NaNs),
``nanmean`` (torch composes it as ``nansum / count``, so its node is ``DivBackward0``:
the gradient over the count, 0 at the NaNs), ``aminmax`` (``AminmaxBackward0``, two
outputs: each output's gradient split evenly among the ties, as ``amin``/``amax``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.formulas import _dims, recorded, untracked
from kernbench.torch.autograd.graph import Node, saved
from kernbench.torch.autograd.pointwise_formulas import _evenly, _kept, _via_method
from kernbench.torch.grad_slots import set_history
from kernbench.torch.logic import where

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["MATH_MORE_FUNCTION_RULES", "MATH_MORE_LINALG_RULES", "MATH_MORE_RULES"]


def _nan_reduction(mean: bool) -> Callable[..., Any]:
    def rule(
        fn: Callable, self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
    ) -> Any:
        out = untracked(fn, self, dim, keepdim, dtype=dtype)
        shape = tuple(self.shape)
        dims = _dims(dim, len(shape))
        all_dims = dims if dims is not None else tuple(range(len(shape)))

        def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
            present = x.isnan().logical_not()
            grad = _kept(g.to(x.dtype), shape, dims, keepdim)
            if mean:
                grad = grad / present.sum(all_dims, keepdim=True)
            return (where(present, grad.expand(shape), 0.0),)

        name = "DivBackward0" if mean else "NansumBackward0"
        return recorded(out, name, (self,), backward, (self,))

    return rule


def _aminmax(fn: Callable, self: Tensor, *, dim: Any = None, keepdim: bool = False) -> Any:
    result = untracked(fn, self, dim=dim, keepdim=keepdim)
    low, high = result
    shape = tuple(self.shape)
    spread = _evenly(shape, _dims(dim, len(shape)), keepdim)

    def backward(g_low: Any, g_high: Any, x: Tensor, y_low: Tensor, y_high: Tensor) -> Any:
        grad = None
        for g, y in ((g_low, y_low), (g_high, y_high)):
            if g is not None:
                part = spread(g, x, y)[0]
                grad = part if grad is None else grad + part
        return (grad,)

    if low.dtype.is_floating_point:
        kept = [saved(t) for t in (self, low, high)]
        node = Node("AminmaxBackward0", (self,), backward, kept, num_outputs=2)
        set_history(low, node, 0)
        set_history(high, node, 1)
    return result


MATH_MORE_RULES: dict[str, Callable[..., Any]] = {
    "nansum": _nan_reduction(False),
    "nanmean": _nan_reduction(True),
    "aminmax": _aminmax,
}

MATH_MORE_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    name: _via_method(name) for name in ("nansum", "nanmean", "aminmax")
}

MATH_MORE_LINALG_RULES: dict[str, Callable[..., Any]] = {}
