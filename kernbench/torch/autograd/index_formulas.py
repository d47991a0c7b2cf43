"""Backward formulas of the padding, reordering, repeating and indexing ops.

torch's (``derivatives.yaml``), written with the facade's ops and costing what those
cost: ``F.pad`` in constant mode (``ConstantPadNdBackward0``: the gradient padded by the
negated amounts, a crop) and in ``reflect``/``replicate`` mode
(``ReflectionPad2DBackward0``, ...: the positions each output read, ``index_add``ed
back), ``flip``/``roll`` (the same op undone), ``repeat``/``tile``
(``RepeatBackward0``: the gradient folded into the repeats and summed),
``repeat_interleave`` (``IndexSelectBackward0``, as torch composes it; a tensor of
repeats too), ``gather``,
``take_along_dim`` and ``index_select`` (a ``scatter_add``/``index_add`` into zeros),
``scatter``/``scatter_add``/``index_add`` (the target's gradient, masked for ``scatter``;
the source's a ``gather``/``index_select``), ``scatter_reduce`` (``sum``, ``mean``,
``amax``, ``amin``: torch's ``scatter_reduce_backward``), the values of ``topk``/``sort`` (a
``scatter`` into zeros at the returned indices), ``diag``/``diagonal``/``trace`` (the
gradient placed on the diagonal: a mask of ones and a broadcast product) and
``broadcast_to`` (summed back).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.formulas import (
    Unsupported,
    _dim,
    _needs,
    recorded,
    sum_to,
    untracked,
)
from kernbench.torch.autograd.pointwise_formulas import _via_method
from kernbench.torch.factories import arange
from kernbench.torch.logic import where
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.edge_padding import INT64, edge_positions, node_name

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["INDEX_FUNCTION_RULES", "INDEX_NN_RULES", "INDEX_RULES"]


def _ints(args: tuple) -> tuple[int, ...]:
    """``f(1, 2)`` or ``f((1, 2))`` as ints; Unsupported for anything else."""
    if len(args) == 1 and isinstance(args[0], list | tuple):
        args = tuple(args[0])
    if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        raise Unsupported
    return tuple(args)


# -- padding, flips, rolls, repeats ---------------------------------------------------------
def _pad(fn: Callable, input: Tensor, pad: Any, mode: str = "constant", value: Any = None):  # noqa: A002
    if mode in ("reflect", "replicate", "circular"):
        return _edge_pad(fn, input, pad, mode, value)
    if mode != "constant":
        raise Unsupported
    amounts = _ints((pad,))
    out = untracked(fn, input, pad, mode, value)
    back = [-a for a in amounts]

    def backward(g: Tensor) -> Sequence[Any]:
        return (F.pad(g, back),)

    return recorded(out, "ConstantPadNdBackward0", (input,), backward)


def _edge_pad(fn: Callable, input: Tensor, pad: Any, mode: str, value: Any) -> Any:  # noqa: A002
    """``reflect``/``replicate``/``circular``: the positions each output read, added back
    dim by dim."""
    amounts = _ints((pad,))
    out = untracked(fn, input, pad, mode, value)  # (it checks the arguments)
    steps = []
    shape = list(input.shape)
    for i in range(len(amounts) // 2):
        d = input.ndim - 1 - i
        before, after = amounts[2 * i], amounts[2 * i + 1]
        if before or after:
            steps.append((d, tuple(shape), edge_positions(shape[d], before, after, mode)))
            shape[d] += before + after

    def backward(g: Tensor) -> Sequence[Any]:
        for d, before_shape, positions in reversed(steps):
            index = g.new_tensor(positions, dtype=INT64)
            g = g.new_zeros(before_shape).index_add(d, index, g)
        return (g,)

    return recorded(out, node_name(mode, len(amounts) // 2), (input,), backward)


def _flip(fn: Callable, self: Tensor, *dims: Any) -> Any:
    axes = _ints(dims)
    out = untracked(fn, self, *dims)
    return recorded(out, "FlipBackward0", (self,), lambda g: (g.flip(axes),))


def _flip_fixed(fn: Callable, self: Tensor) -> Any:
    axes = (1,) if fn.__name__ == "fliplr" else (0,)
    out = untracked(fn, self)
    return recorded(out, "FlipBackward0", (self,), lambda g: (g.flip(axes),))


def _roll(fn: Callable, self: Tensor, shifts: Any, dims: Any = None) -> Any:
    shift = _ints((shifts,))
    axes = None if dims is None else _ints((dims,))
    out = untracked(fn, self, shifts, dims)
    back = tuple(-s for s in shift)
    if axes is None:
        return recorded(out, "RollBackward0", (self,), lambda g: (g.roll(back),))
    return recorded(out, "RollBackward0", (self,), lambda g: (g.roll(back, axes),))


def _fold_repeats(g: Tensor, shape: tuple[int, ...], repeats: tuple[int, ...]) -> Tensor:
    """The gradient of ``x.repeat(*repeats)``: each output dim split into (repeat, size)
    and the repeats summed."""
    lead = len(repeats) - len(shape)
    sizes = (1,) * lead + shape
    split = []
    for r, n in zip(repeats, sizes, strict=True):
        split += [r, n]
    summed = g.reshape(split).sum(tuple(range(0, 2 * len(sizes), 2)))
    return summed.reshape(shape)


def _repeat(fn: Callable, self: Tensor, *sizes: Any) -> Any:
    repeats = _ints(sizes)
    if len(repeats) < self.ndim:
        raise Unsupported  # (the forward raises torch's error)
    out = untracked(fn, self, *sizes)
    shape = tuple(self.shape)
    return recorded(out, "RepeatBackward0", (self,), lambda g: (_fold_repeats(g, shape, repeats),))


def _tile(fn: Callable, self: Tensor, *dims: Any) -> Any:
    reps = _ints(dims)
    out = untracked(fn, self, *dims)
    repeats = (1,) * (self.ndim - len(reps)) + reps
    shape = tuple(self.shape)
    return recorded(out, "RepeatBackward0", (self,), lambda g: (_fold_repeats(g, shape, repeats),))


def _repeat_interleave(
    fn: Callable, self: Tensor, repeats: Any, dim: Any = None, *, output_size: Any = None
) -> Any:
    if hasattr(repeats, "storage_device_tensor"):
        return _repeat_interleave_by(fn, self, repeats, dim, output_size)
    if isinstance(repeats, bool) or not isinstance(repeats, int):
        raise Unsupported
    out = untracked(fn, self, repeats, dim, output_size=output_size)
    shape = tuple(self.shape)
    if dim is None:
        flat = (self.numel(), repeats)
        return recorded(
            out,
            "IndexSelectBackward0",
            (self,),
            lambda g: (g.reshape(flat).sum(1).reshape(shape),),
        )
    d = _dim(dim, self.ndim)
    split = (*shape[:d], shape[d] if shape else 1, repeats, *shape[d + 1 :])

    def backward(g: Tensor) -> Sequence[Any]:
        return (g.reshape(split).sum(d + 1).reshape(shape),)

    return recorded(out, "IndexSelectBackward0", (self,), backward)


def _repeat_interleave_by(
    fn: Callable, self: Tensor, repeats: Tensor, dim: Any, output_size: Any
) -> Any:
    """A tensor of repeats: each source's gradient is the sum of its copies' (an
    ``index_add`` at the source index of each copy)."""
    d = None if dim is None else _dim(dim, self.ndim)
    out = untracked(fn, self, repeats, dim, output_size=output_size)
    shape = tuple(self.shape)
    numel = self.numel()

    def backward(g: Tensor) -> Sequence[Any]:
        count = numel if d is None else shape[d]
        source = arange(count, device=g.device).repeat_interleave(repeats)
        if d is None:
            return (g.new_zeros((numel,)).index_add(0, source, g.reshape(-1)).reshape(shape),)
        return (g.new_zeros(shape).index_add(d, source, g),)

    return recorded(out, "IndexSelectBackward0", (self,), backward)


# -- gathers and scatters --------------------------------------------------------------------
def _gather(fn: Callable, self: Tensor, dim: Any, index: Tensor, *, sparse_grad: bool = False):
    d = _dim(dim, self.ndim)
    out = untracked(fn, self, dim, index, sparse_grad=sparse_grad)
    shape = tuple(self.shape)

    def backward(g: Tensor, idx: Tensor) -> Sequence[Any]:
        return (g.new_zeros(shape).scatter_add(d, idx, g),)

    return recorded(out, "GatherBackward0", (self,), backward, (index,))


def _take_along_dim(fn: Callable, self: Tensor, indices: Tensor, dim: Any = None) -> Any:
    out = untracked(fn, self, indices, dim)
    shape = tuple(self.shape)
    if dim is None:
        numel = self.numel()

        def flat_backward(g: Tensor, idx: Tensor) -> Sequence[Any]:
            grad = g.new_zeros((numel,)).scatter_add(0, idx.reshape(-1), g.reshape(-1))
            return (grad.reshape(shape),)

        return recorded(out, "GatherBackward0", (self,), flat_backward, (indices,))
    d = _dim(dim, self.ndim)
    if indices.ndim != self.ndim:
        raise Unsupported
    # torch broadcasts self and indices in every dim but ``d``
    full = tuple(
        n if i == d else max(n, m)
        for i, (n, m) in enumerate(zip(shape, tuple(indices.shape), strict=True))
    )
    index_full = tuple(
        m if i == d else n for i, (n, m) in enumerate(zip(full, tuple(indices.shape), strict=True))
    )

    def backward(g: Tensor, idx: Tensor) -> Sequence[Any]:
        grad = g.new_zeros(full).scatter_add(d, idx.expand(index_full).contiguous(), g)
        return (sum_to(grad, shape),)

    return recorded(out, "GatherBackward0", (self,), backward, (indices,))


def _index_select(fn: Callable, self: Tensor, dim: Any, index: Tensor) -> Any:
    d = _dim(dim, self.ndim)
    out = untracked(fn, self, dim, index)
    shape = tuple(self.shape)

    def backward(g: Tensor, idx: Tensor) -> Sequence[Any]:
        if not shape:
            return (g.reshape(shape),)
        return (g.new_zeros(shape).index_add(d, idx.reshape(-1), g),)

    return recorded(out, "IndexSelectBackward0", (self,), backward, (index,))


def _scatter(
    fn: Callable,
    self: Tensor,
    dim: Any,
    index: Tensor,
    src: Any = None,
    *,
    value: Any = None,
    reduce: Any = None,
) -> Any:
    if reduce is not None:
        raise Unsupported
    d = _dim(dim, self.ndim)
    out = untracked(fn, self, dim, index, src, value=value, reduce=reduce)
    tensor_src = hasattr(src, "grad_fn")
    src_shape = tuple(src.shape) if tensor_src else ()
    need_self, need_src = _needs(self), tensor_src and _needs(src)

    def backward(g: Tensor, idx: Tensor) -> Sequence[Any]:
        g_self = g.scatter(d, idx, 0.0) if need_self else None
        g_src = g.gather(d, idx) if need_src else None
        if g_src is not None and tuple(g_src.shape) != src_shape:
            g_src = F.pad(g_src, _tail_pad(g_src.shape, src_shape))
        return (g_self, g_src) if tensor_src else (g_self,)

    inputs = (self, src) if tensor_src else (self,)
    name = "ScatterBackward0" if tensor_src else "ScatterBackward1"
    return recorded(out, name, inputs, backward, (index,))


def _scatter_reduce(
    fn: Callable,
    self: Tensor,
    dim: Any,
    index: Tensor,
    src: Any,
    reduce: Any,
    *,
    include_self: Any = True,
) -> Any:
    """torch's ``scatter_reduce_backward`` for ``sum``, ``mean``, ``amax`` and ``amin``
    (``prod`` has no formula here)."""
    if reduce not in ("sum", "mean", "amax", "amin") or not hasattr(src, "grad_fn"):
        raise Unsupported
    d = _dim(dim, self.ndim)
    out = untracked(fn, self, dim, index, src, reduce, include_self=include_self)
    need_self, need_src = _needs(self), _needs(src)
    src_shape = tuple(src.shape)

    def backward(g: Tensor, idx: Tensor, x: Tensor, s: Tensor, y: Tensor) -> Sequence[Any]:
        if idx.shape != s.shape:  # (only the part of src the index covers takes part)
            s = s[tuple(slice(0, n) for n in idx.shape)]
        if reduce == "sum":
            g_self, g_src = g, g.gather(d, idx)
        elif reduce == "mean":
            count = (
                g.new_ones(tuple(g.shape)) if include_self is True else g.new_zeros(tuple(g.shape))
            )
            count = count.scatter_add(d, idx, g.new_ones(tuple(idx.shape)))
            count = where(count == 0, 1.0, count)
            g_self, g_src = g / count, g.gather(d, idx) / count.gather(d, idx)
        else:
            value = y.gather(d, idx)
            self_hit = (x == y).to(g.dtype)
            if include_self is not True:
                self_hit = self_hit.scatter(d, idx, 0.0)
            src_hit = (s == value).to(g.dtype)
            shared = g / self_hit.scatter_add(d, idx, src_hit)
            g_self, g_src = self_hit * shared, src_hit * shared.gather(d, idx)
        if include_self is not True:
            g_self = g_self.scatter(d, idx, 0.0)
        if tuple(g_src.shape) != src_shape:
            g_src = F.pad(g_src, _tail_pad(g_src.shape, src_shape))
        return (g_self if need_self else None), (g_src if need_src else None)

    return recorded(out, "ScatterReduceBackward0", (self, src), backward, (index, self, src, out))


def _tail_pad(have: Sequence[int], want: Sequence[int]) -> list[int]:
    """``F.pad`` amounts that grow ``have`` to ``want`` at the end of each dim (the
    elements of a larger ``src`` no index reads get no gradient)."""
    amounts: list[int] = []
    for h, w in zip(reversed(tuple(have)), reversed(tuple(want)), strict=True):
        amounts += [0, w - h]
    return amounts


def _scatter_add(fn: Callable, self: Tensor, dim: Any, index: Tensor, src: Tensor) -> Any:
    d = _dim(dim, self.ndim)
    out = untracked(fn, self, dim, index, src)
    src_shape = tuple(src.shape)
    need_src = _needs(src)

    def backward(g: Tensor, idx: Tensor) -> Sequence[Any]:
        g_src = None
        if need_src:
            g_src = g.gather(d, idx)
            if tuple(g_src.shape) != src_shape:
                g_src = F.pad(g_src, _tail_pad(g_src.shape, src_shape))
        return g, g_src

    return recorded(out, "ScatterAddBackward0", (self, src), backward, (index,))


def _index_add(
    fn: Callable, self: Tensor, dim: Any, index: Tensor, source: Tensor, *, alpha: Any = 1
) -> Any:
    d = _dim(dim, self.ndim)
    if not hasattr(source, "grad_fn") or source.ndim != self.ndim:
        raise Unsupported
    out = untracked(fn, self, dim, index, source, alpha=alpha)
    need_source = _needs(source)

    def backward(g: Tensor, idx: Tensor) -> Sequence[Any]:
        g_source = g.index_select(d, idx.reshape(-1)) if need_source else None
        if g_source is not None and alpha != 1:
            g_source = g_source * alpha
        return g, g_source

    return recorded(out, "IndexAddBackward0", (self, source), backward, (index,))


def _ordered(name: str, dim_at: int) -> Callable[..., Any]:
    """``topk``/``sort``: the values' gradient scattered to the returned indices."""

    def rule(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
        dim = kwargs.get("dim", args[dim_at] if len(args) > dim_at else -1)
        d = _dim(dim, self.ndim)
        out = untracked(fn, self, *args, **kwargs)
        shape = tuple(self.shape)

        def backward(g: Tensor, index: Tensor) -> Sequence[Any]:
            if not shape:
                return (g.reshape(shape),)
            return (g.new_zeros(shape).scatter(d, index, g),)

        return recorded(out, name, (self,), backward, (out[1],))

    return rule


# -- diagonals -------------------------------------------------------------------------------
def _diagonal_mask(g: Tensor, rows: int, cols: int, offset: int) -> Tensor:
    ones = g.new_ones((rows, cols))
    return ones.triu(offset) - ones.triu(offset + 1)


def _on_diagonal(g: Tensor, rows: int, cols: int, offset: int) -> Tensor:
    """``g`` (..., L) placed on the ``offset`` diagonal of (..., rows, cols) zeros."""
    mask = _diagonal_mask(g, rows, cols, offset)
    length = g.shape[-1]
    if offset >= 0:
        return F.pad(g, [0, rows - length]).unsqueeze(-1) * mask
    return F.pad(g, [0, cols - length]).unsqueeze(-2) * mask


def _diagonal(fn: Callable, self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    if self.ndim < 2:
        raise Unsupported
    d1, d2 = _dim(dim1, self.ndim), _dim(dim2, self.ndim)
    if d1 == d2 or isinstance(offset, bool) or not isinstance(offset, int):
        raise Unsupported
    out = untracked(fn, self, offset, dim1, dim2)
    rows, cols = self.shape[d1], self.shape[d2]
    order = sorted((d1, d2))

    def backward(g: Tensor) -> Sequence[Any]:
        full = _on_diagonal(g, rows, cols, offset)  # (..., rows, cols)
        n = full.ndim
        if d1 < d2:
            return (full.movedim((n - 2, n - 1), tuple(order)),)
        return (full.movedim((n - 1, n - 2), tuple(order)),)

    return recorded(out, "DiagonalBackward0", (self,), backward)


def _diag(fn: Callable, self: Tensor, diagonal: int = 0) -> Any:
    if self.ndim not in (1, 2) or isinstance(diagonal, bool) or not isinstance(diagonal, int):
        raise Unsupported
    out = untracked(fn, self, diagonal)
    if self.ndim == 1:
        return recorded(out, "DiagEmbedBackward0", (self,), lambda g: (g.diagonal(diagonal),))
    rows, cols = self.shape
    return recorded(
        out, "DiagonalBackward0", (self,), lambda g: (_on_diagonal(g, rows, cols, diagonal),)
    )


def _trace(fn: Callable, self: Tensor) -> Any:
    if self.ndim != 2:
        raise Unsupported
    out = untracked(fn, self)
    rows, cols = self.shape

    def backward(g: Tensor) -> Sequence[Any]:
        return (_diagonal_mask(g, rows, cols, 0) * g,)

    return recorded(out, "TraceBackward0", (self,), backward)


def _broadcast_to(fn: Callable, self: Tensor, size: Any) -> Any:
    out = untracked(fn, self, size)
    shape = tuple(self.shape)
    return recorded(out, "ExpandBackward0", (self,), lambda g: (sum_to(g, shape),))


INDEX_RULES: dict[str, Callable[..., Any]] = {
    "flip": _flip,
    "fliplr": _flip_fixed,
    "flipud": _flip_fixed,
    "roll": _roll,
    "repeat": _repeat,
    "tile": _tile,
    "repeat_interleave": _repeat_interleave,
    "gather": _gather,
    "take_along_dim": _take_along_dim,
    "index_select": _index_select,
    "scatter": _scatter,
    "scatter_add": _scatter_add,
    "scatter_reduce": _scatter_reduce,
    "index_add": _index_add,
    "topk": _ordered("TopkBackward0", 1),
    "sort": _ordered("SortBackward0", 0),
    "diagonal": _diagonal,
    "diag": _diag,
    "trace": _trace,
    "broadcast_to": _broadcast_to,
}

INDEX_NN_RULES: dict[str, Callable[..., Any]] = {"pad": _pad}

INDEX_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    name: _via_method(name) for name in INDEX_RULES if name not in ("repeat",)
}
