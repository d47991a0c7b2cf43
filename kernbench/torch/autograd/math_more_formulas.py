"""Backward formulas of the NaN-skipping reductions, ``aminmax`` and the further products.

torch's, written with the facade's ops and costing what those cost: ``nansum``
(``NansumBackward0``: the gradient back over the reduced dims, 0 at the NaNs),
``nanmean`` (torch composes it as ``nansum / count``, so its node is ``DivBackward0``:
the gradient over the count, 0 at the NaNs), ``aminmax`` (``AminmaxBackward0``, two
outputs: each output's gradient split evenly among the ties, as ``amin``/``amax``);
``addmv``, ``addr``, ``addbmm`` (the scaled input gradient, summed back over broadcast
dims, and the products' gradients scaled by ``alpha``), ``diag_embed`` (the gradient's
diagonal), ``renorm`` (``RenormBackward0``: through the norms of the scaled slices, so
``renorm_`` of a tensor in the graph works).  ``inner``, ``vdot``, ``rot90``, ``dist``,
``chain_matmul`` and ``linalg.multi_dot`` are compositions of recorded ops (torch
composes ``inner``, ``chain_matmul`` and ``multi_dot`` too): they run with recording on,
and their nodes are those ops' (``vdot``'s ``DotBackward0``, ``rot90``'s
``TransposeBackward0`` ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.formulas import (
    Unsupported,
    _dims,
    _is_tensor,
    _needs,
    recorded,
    sum_to,
    untracked,
)
from kernbench.torch.autograd.graph import Node, saved
from kernbench.torch.autograd.more_pointwise_formulas import _recording
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


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _scaled(g: Tensor, factor: Any) -> Tensor:
    return g if factor == 1 else g * factor


def _fused(name: str, product_grads: Callable[..., tuple[Any, Any]]) -> Callable[..., Any]:
    """``beta * input + alpha * product(a, b)``: ``product_grads(g, a, b)`` are the
    product's gradients."""

    def rule(fn: Callable, self: Tensor, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1):
        if not (_is_tensor(a) and _is_tensor(b) and _number(beta) and _number(alpha)):
            raise Unsupported
        out = untracked(fn, self, a, b, beta=beta, alpha=alpha)
        shape = tuple(self.shape)
        need_in, need_a, need_b = _needs(self), _needs(a), _needs(b)

        def backward(g: Tensor, first: Tensor, second: Tensor) -> Sequence[Any]:
            g_in = sum_to(_scaled(g, beta), shape) if need_in and beta != 0 else None
            if need_in and beta == 0:
                g_in = g.new_zeros(shape)
            ga, gb = product_grads(_scaled(g, alpha), first, second, need_a, need_b)
            return g_in, ga, gb

        return recorded(out, name, (self, a, b), backward, (a, b))

    return rule


def _mv_grads(g: Tensor, mat: Tensor, vec: Tensor, need_a: bool, need_b: bool) -> Any:
    return (
        g.unsqueeze(1) * vec.unsqueeze(0) if need_a else None,
        mat.t().mv(g) if need_b else None,
    )


def _outer_grads(g: Tensor, v1: Tensor, v2: Tensor, need_a: bool, need_b: bool) -> Any:
    return (g.mv(v2) if need_a else None, g.t().mv(v1) if need_b else None)


def _bmm_sum_grads(g: Tensor, b1: Tensor, b2: Tensor, need_a: bool, need_b: bool) -> Any:
    batch = b1.shape[0]
    g_batch = g.unsqueeze(0).expand(batch, *g.shape)
    return (
        g_batch.matmul(b2.mT) if need_a else None,
        b1.mT.matmul(g_batch) if need_b else None,
    )


def _diag_embed(fn: Callable, self: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
    out = untracked(fn, self, offset, dim1, dim2)
    a, b = dim1 % out.ndim, dim2 % out.ndim
    return recorded(
        out, "DiagEmbedBackward0", (self,), lambda g: (g.diagonal(offset, a, b).clone(),)
    )


def _norm_direction(x: Tensor, p: Any, norm: Tensor, dims: tuple[int, ...]) -> Tensor:
    """d norm / d x of the ``p``-norm over ``dims`` (``norm`` kept), as torch's
    ``norm_backward``: 0 at a zero element for ``p < 1``, the ties sharing for inf."""
    if p == math.inf:
        hit = x.abs() == norm
        return hit * x.sign() / hit.sum(dims, keepdim=True)
    if p == 1:
        return x.sign()
    if p == 2:
        return x / norm
    power = where(x == 0, 0.0, x.sign() * x.abs().pow(p - 1))
    return power / norm.pow(p - 1)


def _renorm(fn: Callable, self: Tensor, p: Any, dim: Any, maxnorm: Any) -> Any:
    """torch's ``renorm_backward``: where a slice was scaled, ``f * (g - n' * sum(g x) /
    (norm + 1e-7))`` with ``f = maxnorm / (norm + 1e-7)`` and ``n'`` the norm's
    derivative; elsewhere ``g``."""
    if not (_number(p) and _number(maxnorm) and isinstance(dim, int)) or isinstance(dim, bool):
        raise Unsupported
    out = untracked(fn, self, p, dim, maxnorm)
    d = dim % self.ndim
    others = tuple(i for i in range(self.ndim) if i != d)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        g = g.to(x.dtype)
        if p == math.inf:
            norm = x.abs().amax(others, keepdim=True)
        else:
            norm = x.abs().pow(p).sum(others, keepdim=True).pow(1.0 / p)
        inverse = (norm + 1e-7).reciprocal()
        spread = (g * x).sum(others, keepdim=True) * _norm_direction(x, p, norm, others)
        scaled = (g - spread * inverse) * (inverse * maxnorm)
        return (where(norm > maxnorm, scaled, g),)

    return recorded(out, "RenormBackward0", (self,), backward, (self,))


_COMPOSED = ("inner", "vdot", "rot90", "dist")

MATH_MORE_RULES: dict[str, Callable[..., Any]] = {
    "nansum": _nan_reduction(False),
    "nanmean": _nan_reduction(True),
    "aminmax": _aminmax,
    "addmv": _fused("AddmvBackward0", _mv_grads),
    "addr": _fused("AddrBackward0", _outer_grads),
    "addbmm": _fused("AddbmmBackward0", _bmm_sum_grads),
    "diag_embed": _diag_embed,
    "renorm": _renorm,
    **dict.fromkeys(_COMPOSED, _recording),
}

MATH_MORE_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    **{
        name: _via_method(name)
        for name in (
            "nansum",
            "nanmean",
            "aminmax",
            "addmv",
            "addr",
            "addbmm",
            "diag_embed",
            "renorm",
        )
    },
    **dict.fromkeys((*_COMPOSED, "chain_matmul"), _recording),
}

MATH_MORE_LINALG_RULES: dict[str, Callable[..., Any]] = {"multi_dot": _recording}
