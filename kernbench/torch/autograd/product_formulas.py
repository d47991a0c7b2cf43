"""Backward formulas of ``einsum``, ``tensordot``, ``kron``, ``cross``, ``block_diag``,
``meshgrid``, ``cdist``, ``F.instance_norm``, the order statistics
(``median``/``nanmedian``/``kthvalue``/``mode``), ``tensor_split``, ``Tensor.unfold`` and
``broadcast_tensors``.

* ``einsum`` (one node, ``EinsumBackward0``: torch records the pieces it composes it of,
  permutes, ``bmm`` and views): each operand's gradient is an ``einsum`` of the output's
  gradient with the other operands, to that operand's subscripts, expanded over the
  subscripts only it had (summed in the forward); ``...`` is written out as letters.  A
  subscript repeated within one operand (a diagonal) or ``...`` dims that broadcast have
  no formula here.
* ``tensordot`` (``ViewBackward0``, torch's last step): the ``einsum`` formula over the
  equation it is; ``kron`` runs with recording on (its reshapes, product and view
  record, as torch composes it); ``cross``/``linalg.cross`` (``LinalgCrossBackward0``:
  ``b x g`` and ``g x a``); ``block_diag`` (``BlockDiagBackward0``: each block's slice);
  ``meshgrid`` (each result an ``ExpandBackward0``: summed over the other axes).
* ``cdist`` (``CdistBackward0``; ``EuclideanDistBackward0`` where the forward took
  torch's matmul path): for ``p = 2``, ``W = g / d`` (0 where ``d`` is 0) and
  ``x1 * rowsum(W) - W @ x2`` (and its mirror for ``x2``), two matmuls; other ``p`` over
  the ``(..., P, R, M)`` differences, as torch's ``_cdist_backward``.
* ``F.instance_norm`` with the input's statistics (torch's batch norm of the input viewed
  as one sample of ``N * C`` channels; its last step is a view: ``ViewBackward0``): the
  batch-norm formula per (sample, channel), the statistics computed again in backward.
* ``median``/``nanmedian``/``kthvalue``/``mode`` over a dim: the gradient to the index
  they returned; ``median()``/``nanmedian()`` of every element split it evenly among the
  elements equal to the result, as torch's.
* ``quantile`` (``QuantileBackward0``, a name torch does not have: torch records the sort,
  gathers and ``lerp`` it composes it of): each result's gradient to the sorted elements
  it was made of, weighted as its interpolation weighted them, then scattered back to the
  input's order (a sort again in backward).  A line with a NaN sends its gradient to the
  place of the interpolated rank, not to the NaN.
* ``tensor_split`` runs itself with recording on (its pieces are recorded ``narrow``s and
  slices); ``Tensor.unfold`` (``UnfoldBackward0``) adds each window's gradient back at
  the positions it read; ``broadcast_tensors`` gives each input its result summed back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.formulas import (
    Unsupported,
    _dim,
    _is_tensor,
    _needs,
    recorded,
    sum_to,
    untracked,
)
from kernbench.torch.autograd.pointwise_formulas import _via_method
from kernbench.torch.einsum import einsum
from kernbench.torch.factories import arange
from kernbench.torch.logic import where

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "PRODUCT_FUNCTION_RULES",
    "PRODUCT_LINALG_RULES",
    "PRODUCT_NN_RULES",
    "PRODUCT_RULES",
]


# -- einsum ----------------------------------------------------------------------------------
def _einsum(fn: Callable, equation: Any, *operands: Any) -> Any:
    items = (
        list(operands[0])
        if len(operands) == 1 and isinstance(operands[0], list | tuple)
        else list(operands)
    )
    if not isinstance(equation, str) or not items or not all(_is_tensor(t) for t in items):
        raise Unsupported
    subs, rhs = _einsum_subscripts(equation.replace(" ", ""), items)
    out = untracked(fn, equation, *operands)
    backward = _einsum_backward(subs, rhs, items)
    return recorded(out, "EinsumBackward0", items, backward, items)


def _einsum_subscripts(spec: str, items: list[Tensor]) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, with ``...`` written out as letters the
    equation does not use (aligned from the right, as torch broadcasts them); Unsupported
    for a repeated subscript, or ``...`` dims that broadcast (sizes that differ)."""
    lhs, arrow, rhs = spec.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(items):
        raise Unsupported
    spare = [c for c in _LETTERS if c not in spec]
    ranks = [t.ndim - len(s.replace("...", "")) for s, t in zip(subs, items, strict=True)]
    widest = max((r for s, r in zip(subs, ranks, strict=True) if "..." in s), default=0)
    if widest > len(spare) or any(r < 0 for r in ranks):
        raise Unsupported
    ellipsis = "".join(spare[:widest])
    subs = [
        s.replace("...", ellipsis[widest - r :] if r else "")
        for s, r in zip(subs, ranks, strict=True)
    ]
    if any(len(set(s)) != len(s) or len(s) != t.ndim for s, t in zip(subs, items, strict=True)):
        raise Unsupported
    sizes: dict[str, int] = {}
    for s, t in zip(subs, items, strict=True):
        for c, n in zip(s, t.shape, strict=True):
            if sizes.setdefault(c, n) != n:
                raise Unsupported  # (a broadcast size-1 dim)
    if arrow:
        rhs = rhs.replace("...", ellipsis)
    else:
        joined = "".join(subs)
        rest = sorted(c for c in set(joined) if joined.count(c) == 1 and c not in ellipsis)
        rhs = ellipsis + "".join(rest)
    return subs, rhs


def _einsum_backward(subs: list[str], rhs: str, items: list[Tensor]) -> Callable[..., Any]:
    """The backward of ``einsum(",".join(subs) + "->" + rhs, *items)``, given the output's
    gradient and the saved operands."""
    sizes = {
        c: n for s, t in zip(subs, items, strict=True) for c, n in zip(s, t.shape, strict=True)
    }
    needs = [_needs(t) for t in items]

    def backward(g: Tensor, *saved: Tensor) -> Sequence[Any]:
        grads: list[Any] = []
        for i, sub in enumerate(subs):
            if not needs[i]:
                grads.append(None)
                continue
            others = [(s, t) for j, (s, t) in enumerate(zip(subs, saved, strict=True)) if j != i]
            seen = set(rhs).union(*(set(s) for s, _ in others))
            kept = "".join(c for c in sub if c in seen)
            terms = ",".join([rhs, *(s for s, _ in others)])
            grad = einsum(f"{terms}->{kept}", g, *(t for _, t in others))
            for pos, c in enumerate(sub):
                if c not in seen:
                    grad = grad.unsqueeze(pos)
            grads.append(grad.expand(*(sizes[c] for c in sub)) if kept != sub else grad)
        return grads

    return backward


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _tensordot(fn: Callable, a: Any, b: Any, dims: Any = 2) -> Any:
    """``tensordot`` as the ``einsum`` it is (torch's last step is a view of a matmul)."""
    if not (_is_tensor(a) and _is_tensor(b)) or a.ndim + b.ndim > len(_LETTERS):
        raise Unsupported
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    elif isinstance(dims, list | tuple) and len(dims) == 2:
        dims_a = list(dims[0]) if isinstance(dims[0], list | tuple) else [dims[0]]
        dims_b = list(dims[1]) if isinstance(dims[1], list | tuple) else [dims[1]]
    else:
        raise Unsupported
    dims_a = [_dim(d, a.ndim) for d in dims_a]
    dims_b = [_dim(d, b.ndim) for d in dims_b]
    if len(dims_a) != len(dims_b):
        raise Unsupported
    out = untracked(fn, a, b, dims)
    sub_a = _LETTERS[: a.ndim]
    sub_b = list(_LETTERS[a.ndim : a.ndim + b.ndim])
    for da, db in zip(dims_a, dims_b, strict=True):
        sub_b[db] = sub_a[da]
    rhs = "".join(c for i, c in enumerate(sub_a) if i not in dims_a) + "".join(
        c for i, c in enumerate(sub_b) if i not in dims_b
    )
    backward = _einsum_backward([sub_a, "".join(sub_b)], rhs, [a, b])
    return recorded(out, "ViewBackward0", (a, b), backward, (a, b))


def _kron(fn: Callable, self: Tensor, other: Any) -> Any:
    return fn(self, other)  # its reshapes, product and view record, as torch composes it


def _cross(fn: Callable, self: Tensor, other: Any, dim: Any = None) -> Any:
    if not _is_tensor(other):
        raise Unsupported
    out = untracked(fn, self, other, dim)
    if dim is None:
        dim = next(d for d, n in enumerate(self.shape) if n == 3)
    a_shape, b_shape = tuple(self.shape), tuple(other.shape)
    need_a, need_b = _needs(self), _needs(other)

    def backward(g: Tensor, a: Tensor, b: Tensor) -> Sequence[Any]:
        ga = sum_to(b.cross(g, dim), a_shape) if need_a else None
        gb = sum_to(g.cross(a, dim), b_shape) if need_b else None
        return ga, gb

    return recorded(out, "LinalgCrossBackward0", (self, other), backward, (self, other))


def _linalg_cross(fn: Callable, input: Any, other: Any, *, dim: Any = -1) -> Any:  # noqa: A002
    if not (_is_tensor(input) and _is_tensor(other)):
        raise Unsupported
    return _cross(lambda a, b, d: fn(a, b, dim=d), input, other, dim)


def _block_diag(fn: Callable, *tensors: Any) -> Any:
    if not tensors or not all(_is_tensor(t) for t in tensors):
        raise Unsupported
    out = untracked(fn, *tensors)
    shapes = [tuple(t.shape) for t in tensors]
    needs = [_needs(t) for t in tensors]

    def backward(g: Tensor) -> Sequence[Any]:
        grads, row, col = [], 0, 0
        for shape, need in zip(shapes, needs, strict=True):
            rows, cols = (1, shape[0] if shape else 1) if len(shape) < 2 else shape
            block = g.narrow(0, row, rows).narrow(1, col, cols)
            grads.append(block.reshape(shape) if need else None)
            row, col = row + rows, col + cols
        return grads

    return recorded(out, "BlockDiagBackward0", tensors, backward)


def _meshgrid(fn: Callable, *tensors: Any, indexing: Any = None) -> Any:
    items = (
        list(tensors[0])
        if len(tensors) == 1 and isinstance(tensors[0], list | tuple)
        else list(tensors)
    )
    if not items or not all(_is_tensor(t) for t in items):
        raise Unsupported
    outs = untracked(fn, *tensors, indexing=indexing)
    n = len(items)
    results = []
    for i, (t, o) in enumerate(zip(items, outs, strict=True)):
        if not _needs(t):
            results.append(o)
            continue
        axis = (1 - i) if indexing == "xy" and n > 1 and i < 2 else i
        others = tuple(d for d in range(n) if d != axis)
        shape = tuple(t.shape)

        def backward(g: Tensor, others: tuple = others, shape: tuple = shape) -> Sequence[Any]:
            return ((g.sum(others) if others else g).reshape(shape),)

        results.append(recorded(o, "ExpandBackward0", (t,), backward))
    return tuple(results)


# -- cdist -----------------------------------------------------------------------------------
def _cdist(
    fn: Callable,
    x1: Any,
    x2: Any,
    p: Any = 2.0,
    compute_mode: str = "use_mm_for_euclid_dist_if_necessary",
) -> Any:
    if not (_is_tensor(x1) and _is_tensor(x2)) or isinstance(p, bool):
        raise Unsupported
    if not isinstance(p, int | float) or math.isinf(p) or p < 0:
        raise Unsupported
    out = untracked(fn, x1, x2, p, compute_mode)
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    need1, need2 = _needs(x1), _needs(x2)
    mm = compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary" and (s1[-2] > 25 or s2[-2] > 25)
    )
    name = "EuclideanDistBackward0" if p == 2 and mm else "CdistBackward0"

    def backward(g: Tensor, a: Tensor, b: Tensor, d: Tensor) -> Sequence[Any]:
        if p == 0:
            zeros = (g.new_zeros(s1) if need1 else None, g.new_zeros(s2) if need2 else None)
            return zeros
        if p == 2:
            w = where(d == 0, 0.0, g / where(d == 0, 1.0, d))
            g1 = a * w.sum(-1, keepdim=True) - w.matmul(b) if need1 else None
            g2 = b * w.sum(-2).unsqueeze(-1) - w.mT.matmul(a) if need2 else None
        else:
            diff = a.unsqueeze(-2) - b.unsqueeze(-3)  # (..., P, R, M)
            if p == 1:
                t = diff.sign()
            else:
                scale = where(d == 0, 0.0, 1.0 / where(d == 0, 1.0, d) ** (p - 1))
                t = diff.sign() * diff.abs() ** (p - 1) * scale.unsqueeze(-1)
            t = t * g.unsqueeze(-1)
            g1 = t.sum(-2) if need1 else None
            g2 = -t.sum(-3) if need2 else None
        return (sum_to(g1, s1) if g1 is not None else None), (
            sum_to(g2, s2) if g2 is not None else None
        )

    return recorded(out, name, (x1, x2), backward, (x1, x2, out))


# -- instance norm ---------------------------------------------------------------------------
def _instance_norm(
    fn: Callable,
    input: Any,  # noqa: A002
    running_mean: Any = None,
    running_var: Any = None,
    weight: Any = None,
    bias: Any = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    if use_input_stats is not True or not _is_tensor(input) or input.ndim < 3:
        raise Unsupported
    out = untracked(
        fn, input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps
    )
    dims = tuple(range(2, input.ndim))
    channel = (1, input.shape[1]) + (1,) * len(dims)
    inputs = (input, weight, bias)
    needs = [t is not None and _needs(t) for t in inputs]

    def backward(g: Tensor, x: Tensor, w: Any) -> Sequence[Any]:
        mean = x.mean(dims, keepdim=True)
        invstd = (x.var(dims, keepdim=True, correction=0) + eps).rsqrt()
        xhat = (x - mean) * invstd
        gx = gw = gb = None
        if needs[0]:
            scale = invstd if w is None else invstd * w.reshape(channel)
            gx = scale * (
                g - g.mean(dims, keepdim=True) - xhat * (g * xhat).mean(dims, keepdim=True)
            )
        if needs[1]:
            gw = (g * xhat).sum((0, *dims))
        if needs[2]:
            gb = g.sum((0, *dims))
        return gx, gw, gb

    return recorded(out, "ViewBackward0", inputs, backward, (input, weight))


# -- order statistics ------------------------------------------------------------------------
def _to_index(name: str, dim_at: int, dim_default: Any) -> Callable[..., Any]:
    """``median``/``kthvalue``/``mode`` over a dim: the gradient to the returned index."""

    def rule(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
        dim = kwargs.get("dim", args[dim_at] if len(args) > dim_at else dim_default)
        if dim is None:
            return _evenly(name, fn, self, *args, **kwargs)
        d = _dim(dim, self.ndim)
        keepdim = kwargs.get("keepdim", args[dim_at + 1] if len(args) > dim_at + 1 else False)
        out = untracked(fn, self, *args, **kwargs)
        shape = tuple(self.shape)

        def backward(g: Tensor, index: Tensor) -> Sequence[Any]:
            if not shape:
                return (g.reshape(shape),)
            if not keepdim:
                g, index = g.unsqueeze(d), index.unsqueeze(d)
            return (g.new_zeros(shape).scatter(d, index, g),)

        return recorded(
            out,
            f"{name}Backward1" if name in ("Median", "Nanmedian") else f"{name}Backward0",
            (self,),
            backward,
            (out[1],),
        )

    return rule


def _evenly(name: str, fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
    if args or kwargs or name not in ("Median", "Nanmedian"):
        raise Unsupported
    out = untracked(fn, self)

    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        hit = x == y
        return (g * hit / hit.sum(),)

    return recorded(out, f"{name}Backward0", (self,), backward, (self, out))


def _quantile(
    fn: Callable,
    self: Tensor,
    q: Any,
    dim: Any = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
) -> Any:
    """``quantile``: each result's gradient to the one or two sorted elements it was made
    of, weighted as the interpolation weighted them (a sort again in backward, then a
    scatter back to the input's order)."""
    tensor_q = _is_tensor(q)
    if tensor_q and (q.requires_grad or q.ndim > 1):
        raise Unsupported
    if not tensor_q and not isinstance(q, int | float) or isinstance(q, bool):
        raise Unsupported
    out = untracked(fn, self, q, dim, keepdim, interpolation=interpolation)
    shape = tuple(self.shape)
    d = 0 if dim is None else _dim(dim, self.ndim)
    line_shape = (self.numel(),) if dim is None else shape
    n = line_shape[d]
    kept = tuple(1 if i == d else m for i, m in enumerate(line_shape))

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        qs = q.to(g.dtype).reshape(-1) if tensor_q else g.new_tensor([float(q)])
        rank = qs * (n - 1)
        below, above = rank.floor(), rank.ceil()
        if interpolation == "lower":
            above = below
        elif interpolation == "higher":
            below = above
        elif interpolation == "nearest":
            below = above = rank.round()
        weight = (rank - below) if interpolation == "linear" else rank * 0 + 0.5
        places = arange(n, device=g.device).to(g.dtype).unsqueeze(0)  # (1, n)
        at_below = (1 - weight).unsqueeze(1) * (places == below.unsqueeze(1))
        share = at_below + weight.unsqueeze(1) * (places == above.unsqueeze(1))  # (Q, n)
        per_q = g.reshape((qs.shape[0], *kept))
        share = share.reshape((qs.shape[0],) + tuple(n if i == d else 1 for i in range(len(kept))))
        sorted_grad = (per_q * share).sum(0)
        line = x.reshape(line_shape)
        order = line.sort(d).indices
        return (g.new_zeros(line_shape).scatter(d, order, sorted_grad).reshape(shape),)

    return recorded(out, "QuantileBackward0", (self,), backward, (self,))


# -- views that pick elements ----------------------------------------------------------------
def _tensor_split(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
    return fn(self, *args, **kwargs)  # its narrows and slices record


def _unfold(fn: Callable, self: Tensor, dimension: Any, size: Any, step: Any) -> Any:
    out = untracked(fn, self, dimension, size, step)
    shape = tuple(self.shape)
    numel = self.numel()

    def backward(g: Tensor) -> Sequence[Any]:
        picked = arange(numel, device=g.device).reshape(shape).unfold(dimension, size, step)
        flat = g.new_zeros((numel,)).index_add(0, picked.reshape(-1), g.reshape(-1))
        return (flat.reshape(shape),)

    return recorded(out, "UnfoldBackward0", (self,), backward)


def _broadcast_tensors(fn: Callable, *tensors: Any) -> Any:
    items = (
        list(tensors[0])
        if len(tensors) == 1 and isinstance(tensors[0], list | tuple)
        else list(tensors)
    )
    if not all(_is_tensor(t) for t in items):
        raise Unsupported
    outs = untracked(fn, *tensors)
    results = []
    for t, o in zip(items, outs, strict=True):
        shape = tuple(t.shape)
        results.append(
            recorded(o, "ExpandBackward0", (t,), lambda g, shape=shape: (sum_to(g, shape),))
            if _needs(t)
            else o
        )
    return type(outs)(results) if isinstance(outs, tuple) else results


PRODUCT_RULES: dict[str, Callable[..., Any]] = {
    "kron": _kron,
    "cross": _cross,
    "median": _to_index("Median", 0, None),
    "nanmedian": _to_index("Nanmedian", 0, None),
    "kthvalue": _to_index("Kthvalue", 1, -1),
    "mode": _to_index("Mode", 0, -1),
    "quantile": _quantile,
    "tensor_split": _tensor_split,
    "unfold": _unfold,
}

PRODUCT_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    **{name: _via_method(name) for name in PRODUCT_RULES if name != "unfold"},
    "einsum": _einsum,
    "tensordot": _tensordot,
    "kron": _kron,
    "cross": _cross,
    "block_diag": _block_diag,
    "meshgrid": _meshgrid,
    "cdist": _cdist,
    "broadcast_tensors": _broadcast_tensors,
}

PRODUCT_NN_RULES: dict[str, Callable[..., Any]] = {"instance_norm": _instance_norm}

PRODUCT_LINALG_RULES: dict[str, Callable[..., Any]] = {"cross": _linalg_cross}
