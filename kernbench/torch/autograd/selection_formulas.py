"""Backward formulas of advanced indexing and the other ops that pick elements, and of
the moves and joins torch composes of views and ``cat``.

* ``t[key]`` with index tensors, lists or a mask (``IndexBackward0``), ``masked_select``
  (``MaskedSelectBackward0``), ``take`` (``TakeBackward0``) and ``as_strided`` of a
  contiguous tensor (``AsStridedBackward0``): the backward takes the
  same elements of an ``arange`` of the input's positions (an ``arange`` and the op's own
  kernel), then adds the gradient into zeros at those positions with ``index_add``, so
  repeated indices add up, as torch's ``index_put_(..., accumulate=True)``.
* ``index_copy``/``index_fill``/``index_put`` (the target's gradient with the written
  places zeroed, or whole with ``accumulate``; the source's picked back with
  ``index_select`` or the same key) and ``masked_scatter`` (the masked gradient, in order,
  padded with zeros to the source's size).
* ``cummax``/``cummin`` (the values): the gradient added at the returned indices.
* ``movedim``/``moveaxis`` (``PermuteBackward0``): the inverse permutation.
* ``hstack``/``vstack``/``dstack``/``column_stack`` (``CatBackward0``): each input's
  slice of the gradient, reshaped back.
* ``diff`` (``SubBackward0``, the last of torch's ops): per difference taken, the
  gradient padded by one before minus padded by one after; ``prepend``/``append``
  tensors get their slices of it.
* ``F.dropout1d``/``2d``/``3d``: the op itself, recording what it runs (its noise times
  the input is an ordinary ``MulBackward0``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.formulas import (
    RULES,
    Unsupported,
    _dim,
    _is_tensor,
    recorded,
    sum_to,
    untracked,
)
from kernbench.torch.autograd.pointwise_formulas import _via_method
from kernbench.torch.factories import arange
from kernbench.torch.nn import functional as F

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["SELECTION_FUNCTION_RULES", "SELECTION_NN_RULES", "SELECTION_RULES"]

_basic_getitem = RULES["__getitem__"]


def _positions(shape: tuple[int, ...], like: Tensor) -> Tensor:
    numel = 1
    for n in shape:
        numel *= n
    return arange(numel, device=like.device).reshape(shape)


def _added_at(g: Tensor, shape: tuple[int, ...], picked: Tensor) -> Tensor:
    """Zeros of ``shape`` with ``g`` added at the flat positions ``picked``."""
    numel = 1
    for n in shape:
        numel *= n
    flat = g.new_zeros((numel,)).index_add(0, picked.reshape(-1), g.reshape(-1))
    return flat.reshape(shape)


def _getitem(fn: Callable, self: Tensor, key: Any) -> Any:
    try:
        return _basic_getitem(fn, self, key)
    except Unsupported:
        pass
    parts = key if isinstance(key, tuple) else (key,)
    if not all(
        _is_tensor(p) or p is None or p is Ellipsis or isinstance(p, slice | int | list | range)
        for p in parts
    ):
        raise Unsupported
    out = untracked(fn, self, key)
    shape = tuple(self.shape)

    def backward(g: Tensor) -> Sequence[Any]:
        return (_added_at(g, shape, _positions(shape, g)[key]),)

    return recorded(out, "IndexBackward0", (self,), backward)


def _masked_select(fn: Callable, self: Tensor, mask: Any) -> Any:
    if not _is_tensor(mask):
        raise Unsupported
    out = untracked(fn, self, mask)
    shape = tuple(self.shape)

    def backward(g: Tensor) -> Sequence[Any]:
        return (_added_at(g, shape, _positions(shape, g).masked_select(mask)),)

    return recorded(out, "MaskedSelectBackward0", (self,), backward)


def _take(fn: Callable, self: Tensor, index: Any) -> Any:
    if not _is_tensor(index):
        raise Unsupported
    out = untracked(fn, self, index)
    shape = tuple(self.shape)

    def backward(g: Tensor) -> Sequence[Any]:
        return (_added_at(g, shape, _positions(shape, g).take(index)),)

    return recorded(out, "TakeBackward0", (self,), backward)


def _index_copy(fn: Callable, self: Tensor, dim: Any, index: Any, source: Any) -> Any:
    d = _dim(dim, self.ndim)
    if not (_is_tensor(index) and _is_tensor(source)):
        raise Unsupported
    out = untracked(fn, self, dim, index, source)
    need_self, need_source = self.requires_grad, source.requires_grad
    source_shape = tuple(source.shape)

    def backward(g: Tensor) -> Sequence[Any]:
        g_self = g.index_fill(d, index, 0.0) if need_self else None
        g_source = g.index_select(d, index).reshape(source_shape) if need_source else None
        return g_self, g_source

    return recorded(out, "IndexCopyBackward0", (self, source), backward)


def _index_fill(fn: Callable, self: Tensor, dim: Any, index: Any, value: Any) -> Any:
    d = _dim(dim, self.ndim)
    if not _is_tensor(index) or (_is_tensor(value) and value.requires_grad):
        raise Unsupported
    out = untracked(fn, self, dim, index, value)
    name = "IndexFillBackward1" if _is_tensor(value) else "IndexFillBackward0"
    return recorded(out, name, (self,), lambda g: (g.index_fill(d, index, 0.0),))


def _index_put(fn: Callable, self: Tensor, indices: Any, values: Any, accumulate: Any = False):
    if not isinstance(indices, list | tuple) or not _is_tensor(values):
        raise Unsupported
    key = tuple(indices)
    out = untracked(fn, self, indices, values, accumulate)
    need_self, need_values = self.requires_grad, values.requires_grad
    values_shape = tuple(values.shape)

    def backward(g: Tensor) -> Sequence[Any]:
        g_self = None
        if need_self:
            g_self = g if accumulate is True else g.index_put(key, g.new_zeros(()))
        g_values = sum_to(g[key], values_shape) if need_values else None
        return g_self, g_values

    return recorded(out, "IndexPutBackward0", (self, values), backward)


def _masked_scatter(fn: Callable, self: Tensor, mask: Any, source: Any) -> Any:
    if not (_is_tensor(mask) and _is_tensor(source)):
        raise Unsupported
    out = untracked(fn, self, mask, source)
    need_self, need_source = self.requires_grad, source.requires_grad
    source_shape, source_numel = tuple(source.shape), source.numel()

    def backward(g: Tensor) -> Sequence[Any]:
        g_self = g.masked_fill(mask, 0.0) if need_self else None
        g_source = None
        if need_source:  # the first elements of source, in order, went to the mask
            taken = g.masked_select(mask)
            g_source = F.pad(taken, [0, source_numel - taken.shape[0]]).reshape(source_shape)
        return g_self, g_source

    return recorded(out, "MaskedScatterBackward0", (self, source), backward)


def _as_strided(fn: Callable, self: Tensor, size: Any, stride: Any, storage_offset: Any = None):
    """``as_strided`` of a contiguous tensor: the positions it read, the ``arange`` way
    (overlapping windows add up)."""
    if not self.is_contiguous() or self.storage_offset() != 0:
        raise Unsupported  # (its positions are the storage's, not the tensor's)
    out = untracked(fn, self, size, stride, storage_offset)
    shape = tuple(self.shape)

    def backward(g: Tensor) -> Sequence[Any]:
        picked = _positions(shape, g).as_strided(size, stride, storage_offset)
        return (_added_at(g, shape, picked),)

    return recorded(out, "AsStridedBackward0", (self,), backward)


def _running_extreme(name: str) -> Callable[..., Any]:
    def rule(fn: Callable, self: Tensor, dim: Any) -> Any:
        d = _dim(dim, self.ndim)
        out = untracked(fn, self, dim)
        shape = tuple(self.shape)

        def backward(g: Tensor, index: Tensor) -> Sequence[Any]:
            if not shape:
                return (g.reshape(shape),)
            return (g.new_zeros(shape).scatter_add(d, index, g),)

        return recorded(out, name, (self,), backward, (out[1],))

    return rule


def _movedim(fn: Callable, self: Tensor, source: Any, destination: Any) -> Any:
    src = tuple(source) if isinstance(source, list | tuple) else (source,)
    dst = tuple(destination) if isinstance(destination, list | tuple) else (destination,)
    n = self.ndim
    src = tuple(_dim(s, n) for s in src)
    dst = tuple(_dim(d, n) for d in dst)
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise Unsupported
    out = untracked(fn, self, source, destination)
    perm: list[int | None] = [None] * n
    for s, d in zip(src, dst, strict=True):
        perm[d] = s
    rest = iter(i for i in range(n) if i not in src)
    order = [p if p is not None else next(rest) for p in perm]
    inverse = [0] * n
    for i, p in enumerate(order):
        inverse[p] = i
    return recorded(out, "PermuteBackward0", (self,), lambda g: (g.permute(inverse),))


def _promoted(name: str, t: Tensor, items: Sequence[Tensor]) -> tuple[int, ...]:
    shape = tuple(t.shape)
    if name == "hstack":
        return shape or (1,)
    if name == "column_stack":
        return (shape[0] if shape else 1, 1) if len(shape) < 2 else shape
    rank = 2 if name == "vstack" else 3
    if len(shape) >= rank:
        return shape
    if not shape:
        return (1,) * rank
    if len(shape) == 1:
        return (1, shape[0]) if rank == 2 else (1, shape[0], 1)
    return (*shape, 1)


def _stacked(name: str) -> Callable[..., Any]:
    def rule(fn: Callable, tensors: Any) -> Any:
        items = list(tensors) if isinstance(tensors, list | tuple) else None
        if not items or not all(_is_tensor(t) for t in items):
            raise Unsupported
        out = untracked(fn, items)
        shapes = [_promoted(name, t, items) for t in items]
        if name == "hstack":
            d = 0 if len(shapes[0]) == 1 else 1
        else:
            d = {"vstack": 0, "dstack": 2, "column_stack": 1}[name]
        originals = [tuple(t.shape) for t in items]
        needs = [t.requires_grad for t in items]

        def backward(g: Tensor) -> Sequence[Any]:
            grads, start = [], 0
            for shape, original, need in zip(shapes, originals, needs, strict=True):
                size = shape[d]
                grads.append(g.narrow(d, start, size).reshape(original) if need else None)
                start += size
            return grads

        return recorded(out, "CatBackward0", items, backward)

    return rule


def _diff(
    fn: Callable, self: Tensor, n: Any = 1, dim: Any = -1, prepend: Any = None, append: Any = None
) -> Any:
    if isinstance(n, bool) or not isinstance(n, int) or not self.ndim:
        raise Unsupported
    parts = [t for t in (prepend, self, append) if t is not None]
    if not all(_is_tensor(t) and t.ndim == self.ndim for t in parts):
        raise Unsupported  # (a number prepended, or the forward's error)
    d = _dim(dim, self.ndim)
    out = untracked(fn, self, n, dim, prepend, append)
    sizes = [t.shape[d] for t in parts]
    if n >= sum(sizes):
        raise Unsupported  # (an empty result: nothing to send back)
    trailing = [0, 0] * (self.ndim - 1 - d)

    def backward(g: Tensor) -> Sequence[Any]:
        for _ in range(n):
            g = F.pad(g, [*trailing, 1, 0]) - F.pad(g, [*trailing, 0, 1])
        grads, start = [], 0
        for t, size in zip(parts, sizes, strict=True):
            grads.append(g.narrow(d, start, size) if t.requires_grad else None)
            start += size
        return grads

    return recorded(out, "SubBackward0", parts, backward)


def _feature_dropout(fn: Callable, input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
    """The op run with recording on: it is ``input * noise``, a recorded product."""
    inplace = kwargs.get("inplace", args[2] if len(args) > 2 else False)
    if inplace is True:
        raise Unsupported  # recorded as the out-of-place call written back (in_place.py)
    return fn(input, *args, **kwargs)


SELECTION_RULES: dict[str, Callable[..., Any]] = {
    "__getitem__": _getitem,
    "masked_select": _masked_select,
    "take": _take,
    "cummax": _running_extreme("CummaxBackward0"),
    "cummin": _running_extreme("CumminBackward0"),
    "movedim": _movedim,
    "moveaxis": _movedim,
    "diff": _diff,
    "index_copy": _index_copy,
    "index_fill": _index_fill,
    "index_put": _index_put,
    "masked_scatter": _masked_scatter,
    "as_strided": _as_strided,
}

SELECTION_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    **{name: _via_method(name) for name in SELECTION_RULES if not name.startswith("_")},
    "hstack": _stacked("hstack"),
    "vstack": _stacked("vstack"),
    "dstack": _stacked("dstack"),
    "column_stack": _stacked("column_stack"),
}

SELECTION_NN_RULES: dict[str, Callable[..., Any]] = {
    "dropout1d": _feature_dropout,
    "dropout2d": _feature_dropout,
    "dropout3d": _feature_dropout,
}
