"""View geometry: the shape, strides and storage offset of indexing, reshapes and broadcasts.

A tensor is a window on its storage (the device tensor that owns the memory):
element ``(i0, i1, ...)`` is storage element ``offset + i0*s0 + i1*s1 + ...``
in the storage's row-major order, as in PyTorch (strides count elements).
These functions compute that window for every view operation and say when a
request cannot be a view; they touch no memory.  :class:`Geometry` is the
triple; the tensor methods that use it are in :mod:`~kernbench.torch.layout`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernbench.errors import TensorError

__all__ = [
    "Geometry",
    "broadcast_shapes",
    "check_no_partial_overlap",
    "coalesce",
    "contiguous_strides",
    "index_geometry",
    "reshape_shape",
    "same_device",
    "view_strides",
]


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """The row-major strides of ``shape`` (``(3, 1)`` for ``(2, 3)``)."""
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Geometry:
    """Where a tensor's elements are in its storage: shape, strides and first element."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @classmethod
    def dense(cls, shape: Sequence[int]) -> Geometry:
        return cls(tuple(shape), contiguous_strides(shape), 0)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_contiguous(self) -> bool:
        """Row-major with no gaps (size-1 dims may have any stride, as in PyTorch)."""
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if size == 0:
                return True
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    @property
    def extent(self) -> int:
        """Storage elements from the first to one past the last element (0 when empty)."""
        if self.numel == 0:
            return 0
        return 1 + sum(
            (size - 1) * stride for size, stride in zip(self.shape, self.strides, strict=True)
        )

    @property
    def dense_span(self) -> tuple[int, int] | None:
        """The storage elements ``[start, stop)`` the view fills with no gaps, in some order of
        its dims (torch's "non-overlapping and dense"); ``None`` for any other view."""
        if self.numel == 0:
            return None
        expected = 1
        for stride, size in sorted(
            (st, sz) for sz, st in zip(self.shape, self.strides, strict=True) if sz > 1
        ):
            if stride != expected:
                return None
            expected *= size
        return self.offset, self.offset + self.numel

    @property
    def overlaps(self) -> bool:
        """Whether two elements share one storage element (an expanded dim)."""
        return any(
            size > 1 and stride == 0 for size, stride in zip(self.shape, self.strides, strict=True)
        )


def _dim(dim: Any, ndim: int, what: str) -> int:
    try:
        d = operator.index(dim)
    except TypeError:
        raise TensorError(f"{what}: dim must be an int, got {dim!r}") from None
    if not -ndim <= d < ndim:
        raise TensorError(
            f"{what}: dim {d} is out of range for a {max(ndim, 0)}-d tensor "
            f"(valid: {-ndim}..{ndim - 1})"
        )
    return d % ndim


def _is_int(key: Any) -> bool:
    return not isinstance(key, bool) and isinstance(key, int | np.integer)


def index_geometry(geo: Geometry, key: Any, name: str) -> Geometry:
    """The view ``t[key]`` for basic indexing: ints, slices, ``None`` and ``...``.

    ``key`` must be basic (the caller handles integer lists and tensors).  An
    int removes its dim, a slice keeps it (steps must be positive, as in
    PyTorch), ``None`` inserts a dim of size 1 and ``...`` stands for the
    dims not named.
    """
    keys = list(key) if isinstance(key, tuple) else [key]
    if sum(k is Ellipsis for k in keys) > 1:
        raise TensorError(f"indexing {name!r}: an index can only have a single ellipsis ('...')")
    named = sum(1 for k in keys if k is not None and k is not Ellipsis)
    ndim = len(geo.shape)
    if named > ndim:
        raise TensorError(
            f"indexing {name!r}: too many indices for a tensor of dimension {ndim} ({named} given)"
        )
    if Ellipsis in keys:
        at = keys.index(Ellipsis)
        keys[at : at + 1] = [slice(None)] * (ndim - named)
    else:
        keys += [slice(None)] * (ndim - named)
    shape: list[int] = []
    strides: list[int] = []
    offset = geo.offset
    d = 0
    for k in keys:
        if k is None:
            # PyTorch inserts the dim with unsqueeze, whose stride spans the next dim.
            shape.append(1)
            strides.append(geo.shape[d] * geo.strides[d] if d < ndim else 1)
            continue
        size, stride = geo.shape[d], geo.strides[d]
        if _is_int(k):
            i = int(k)
            if not -size <= i < size:
                raise TensorError(
                    f"indexing {name!r}: index {i} is out of bounds for dimension {d} "
                    f"with size {size}"
                )
            offset += (i % size) * stride
        elif isinstance(k, slice):
            try:
                start, stop, step = k.indices(size)
            except (TypeError, ValueError):  # a float or a string bound, a zero step
                start, stop, step = 0, 0, 0
                bounds = (k.start, k.stop)
                if k.step != 0 or not all(v is None or _is_int(v) for v in bounds):
                    raise TensorError(
                        f"indexing {name!r}: slice {k!r}: its start, stop and step must be "
                        "ints or None"
                    ) from None
            if step <= 0:
                raise TensorError(
                    f"indexing {name!r}: step must be greater than zero, got {k.step} "
                    "(as in PyTorch; t.flip(dim) reverses a dim, as a copy)"
                )
            count = max(0, -(-(stop - start) // step))
            shape.append(count)
            strides.append(stride * step)
            if count:
                offset += start * stride
        else:
            raise TensorError(
                f"indexing {name!r}: index {k!r} of type {type(k).__name__} is not supported; "
                "valid: ints, slices, None, ..., or one list / int tensor of indices"
            )
        d += 1
    return Geometry(tuple(shape), tuple(strides), offset)


def reshape_shape(shape: Sequence[Any], numel: int, what: str) -> tuple[int, ...]:
    """``shape`` with one ``-1`` inferred, checked to hold ``numel`` elements."""
    dims = []
    for d in shape:
        if not _is_int(d) or d < -1:
            raise TensorError(f"{what}: shape {tuple(shape)} must be ints >= -1, got {d!r}")
        dims.append(int(d))
    if dims.count(-1) > 1:
        raise TensorError(f"{what}: only one dimension can be inferred (-1) in {tuple(dims)}")
    known = math.prod(d for d in dims if d != -1)
    if -1 in dims:
        if known == 0 or numel % known:
            raise TensorError(f"{what}: shape {tuple(dims)} is invalid for input of size {numel}")
        dims[dims.index(-1)] = numel // known
    elif known != numel:
        raise TensorError(f"{what}: shape {tuple(dims)} is invalid for input of size {numel}")
    return tuple(dims)


def view_strides(geo: Geometry, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides that show ``geo``'s elements in ``shape`` without a copy, or None.

    PyTorch's rule (``computeStride``): each run of old dims that are laid out
    contiguously with one another can be split or merged freely; a new dim
    that would span two such runs needs a copy.
    """
    old_shape, old_strides = geo.shape, geo.strides
    if math.prod(old_shape) == 0 or not old_shape:
        return contiguous_strides(shape)
    new_strides = [0] * len(shape)
    view_d = len(shape) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1
            and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def broadcast_shapes(a: Sequence[int], b: Sequence[int], what: str) -> tuple[int, ...]:
    """The shape ``a`` and ``b`` broadcast to (NumPy's and PyTorch's rule)."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise TensorError(
                f"{what}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast together "
                f"(size {x} vs {y} at dim {-i})"
            )
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def same_device(what: str, first: Any, *others: Any) -> None:
    """Refuse tensors of one call that live on different devices, as torch does."""
    for other in others:
        if other.get_device() != first.get_device():
            raise TensorError(
                f"{what}: tensors are on different devices ({first.device} and {other.device}); "
                "move one with .to(...)"
            )


def coalesce(
    shape: Sequence[int], *stride_sets: Sequence[int]
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Drop size-1 dims and merge neighbours that every stride set walks as one.

    Kernels that index a view dim by dim do less integer work on fewer dims;
    the elements visited, and their order, do not change.
    """
    dims = [(size, [s[k] for s in stride_sets]) for k, size in enumerate(shape) if size != 1]
    merged: list[tuple[int, list[int]]] = []
    for size, strides in dims:
        if merged:
            prev_size, prev_strides = merged[-1]
            if all(p == s * size for p, s in zip(prev_strides, strides, strict=True)):
                merged[-1] = (prev_size * size, strides)
                continue
        merged.append((size, strides))
    if not merged:
        merged = [(1, [0] * len(stride_sets))]
    new_shape = tuple(size for size, _ in merged)
    sets = tuple(tuple(strides[i] for _, strides in merged) for i in range(len(stride_sets)))
    return new_shape, sets


def check_no_partial_overlap(dst: Any, src: Any, what: str) -> None:
    """Refuse, as torch does, to write tensor ``dst`` from a tensor ``src`` that shares only
    some of its memory: a copy from a slice of a tensor to another slice of it, say.

    Like torch, only views that fill their memory densely are compared (the same view is
    fine: an in-place op); others are too hard to tell and pass.
    """
    if src.storage_device_tensor is not dst.storage_device_tensor:
        return
    mine, theirs = dst.geometry, src.geometry
    if mine == theirs:
        return
    a, b = mine.dense_span, theirs.dense_span
    if a is not None and b is not None and a[0] < b[1] and b[0] < a[1]:
        raise TensorError(
            f"{what}: unsupported operation: some elements of the input tensor and the "
            "written-to tensor refer to a single memory location (as in torch); clone() "
            "the input before the operation"
        )
