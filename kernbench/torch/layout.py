"""Indexing and views of :class:`~kernbench.torch.Tensor`: ``t[...]``, ``view``, ``transpose``, ...

:class:`TensorLayout` is mixed into the tensor class.  Basic indexing (ints,
slices with positive steps, ``None``, ``...``) and the view methods return
tensors that share the memory of the tensor they came from, with PyTorch's
shapes and strides (:mod:`~kernbench.torch.views` computes them).  Lists,
arrays or integer tensors of indices anywhere in the key follow PyTorch's
advanced indexing (:mod:`~kernbench.torch.advanced_indexing`: one gather or
scatter kernel).  A boolean mask (a bool tensor, array or list of bools) over
the leading dims reads the selected elements (or rows) as a new 1-D (or
row) tensor, by one gather kernel; the mask is read to the host first, as
torch waits for the count.  ``t[mask] = value`` runs ``masked_fill_`` for a
scalar and a scatter kernel for a tensor of values.  ``index_put_`` is
``t[indices] = values`` with torch's checks, or with ``accumulate`` the scatter
kernel adding (``tl.atomic_add``), so repeated indices add up.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError, TensorTypeError
from kernbench.torch.advanced_indexing import (
    check_mask_shape,
    has_advanced,
    read_advanced,
    warn_uint8_mask,
    write_advanced,
)
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, python_scalar
from kernbench.torch.index_ops import launch_gather, launch_scatter
from kernbench.torch.shapes import dim_index, flag_argument, int_argument, int_sequence
from kernbench.torch.views import Geometry, index_geometry, reshape_shape, view_strides

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorLayout"]


def _sizes(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``f(2, 3)``, ``f((2, 3))`` or ``f(torch.Size(...))`` -> the sizes."""
    if len(args) == 1 and isinstance(args[0], tuple | list):
        return tuple(args[0])
    return args


def _shape_of(other: Any, what: str) -> tuple[int, ...]:
    """The shape of ``other`` in ``view_as(other)`` and its kind: it must be a tensor."""
    if not isinstance(other, TensorLayout):
        raise TensorError(f"{what}: other must be a Tensor, got {type(other).__name__}")
    return tuple(other.shape)


def _without_leading_ones(value: Any) -> Any:
    """``value`` without its leading size-1 dims, as torch strips them from what it assigns
    (so ``t[0] = row.unsqueeze(0)`` writes the row)."""
    if not isinstance(value, TensorLayout):
        try:
            value = np.asarray(value)
        except ValueError:
            raise TensorError(
                "indexing: the value assigned must be a Tensor, a number or an array (nested "
                f"lists of one length at each depth) of numbers, got {value!r}"
            ) from None
    while value.ndim and value.shape[0] == 1:
        value = value[0]
    return value


class TensorLayout:
    """Indexing and the view methods of :class:`~kernbench.torch.Tensor`."""

    __slots__ = ()

    # -- indexing -------------------------------------------------------------------------
    def __getitem__(self: Tensor, key: Any) -> Tensor:
        mask = self._bool_mask(key)
        if mask is not None:
            return self._masked_rows(mask)
        key = self._scalar_keys(key)
        if has_advanced(key):
            return read_advanced(self, key)
        return self._view(index_geometry(self.geometry, key, self.storage_device_tensor.name))

    def __setitem__(self: Tensor, key: Any, value: Any) -> None:
        mask = self._bool_mask(key)
        if mask is not None:
            self._write_masked(mask, value)
            return
        key = self._scalar_keys(key)
        scalar = python_scalar(value) is not None
        if not scalar:
            value = _without_leading_ones(value)
        if has_advanced(key):
            write_advanced(self, key, value)
        elif scalar:
            self[key].fill_(value)
        else:
            self[key].copy_(value)

    def index_put_(self: Tensor, indices: Any, values: Any, accumulate: Any = False) -> Tensor:
        """``self[indices] = values`` (``indices`` a tuple of index tensors, None for a
        whole dim; ``values`` a tensor of ``self``'s dtype, broadcast), or with
        ``accumulate`` ``self[indices] += values`` with repeated indices adding up, by one
        scatter kernel, as torch."""
        what = f"index_put_ of {self.storage_device_tensor.name!r}"
        accumulate = flag_argument(accumulate, "index_put_", "accumulate")
        if not isinstance(indices, tuple | list) or not all(
            k is None or isinstance(k, TensorLayout) for k in indices
        ):
            raise TensorTypeError(
                f"{what}: indices must be a tuple of Tensors (None for a whole dim), as torch "
                f"takes them; got {indices!r}"
            )
        if not isinstance(values, TensorLayout):
            raise TensorTypeError(
                f"{what}: values must be a Tensor (as torch), got {type(values).__name__}"
            )
        if values.dtype is not self.dtype:
            raise TensorError(
                f"{what}: Index put requires the source and destination dtypes match, got "
                f"{self.dtype!r} for the destination and {values.dtype!r} for the source."
            )
        key = self._scalar_keys(tuple(slice(None) if k is None else k for k in indices))
        value = _without_leading_ones(values)
        if has_advanced(key):
            write_advanced(self, key, value, accumulate=accumulate)
        elif accumulate:
            self[key].add_(value)
        else:
            self[key].copy_(value)
        return self

    def index_put(self: Tensor, indices: Any, values: Any, accumulate: Any = False) -> Tensor:
        """:meth:`index_put_` into a copy of ``self``."""
        return self.clone().index_put_(indices, values, accumulate)

    def _scalar_keys(self: Tensor, key: Any) -> Any:
        """0-d integer tensors in an index stand for their value (``t[i]`` with ``i`` a tensor);
        a ``range`` for the list of its ints (``t[range(n), target]``, as torch takes it)."""

        def scalar(k: Any) -> Any:
            if isinstance(k, range):
                return list(k)
            if (
                isinstance(k, TensorLayout)
                and k.ndim == 0
                and not k.dtype.is_floating_point
                and k.dtype is not BOOL
            ):
                return int(k.item())
            return k

        return tuple(scalar(k) for k in key) if isinstance(key, tuple) else scalar(key)

    # -- boolean masks -------------------------------------------------------------------
    def _bool_mask(self: Tensor, key: Any) -> Any:
        """A boolean mask index (a bool tensor, a bool array or a list of bools) checked
        against the leading dims it covers, else None."""
        if isinstance(key, TensorLayout):
            mask = key if key.dtype is BOOL else None
            if key.dtype.name == "uint8":  # a mask in torch too, deprecated there
                warn_uint8_mask(3)  # _bool_mask, __getitem__ / __setitem__
                mask = key.numpy() != 0
        elif isinstance(key, np.ndarray):
            mask = key if key.dtype == np.bool_ else None
        elif isinstance(key, list) and key and all(isinstance(k, bool | np.bool_) for k in key):
            mask = np.asarray(key)
        else:
            mask = None
        if mask is None:
            return None
        check_mask_shape(self.storage_device_tensor.name, tuple(self.shape), mask.shape, 0)
        return mask

    def _mask_rows(self: Tensor, mask: Any) -> tuple[Tensor, int, tuple[int, ...]]:
        """The numbers of the rows a mask selects (a device int64 tensor), the elements of a
        row and the shape of the rows (the dims the mask does not cover)."""
        values = mask.numpy() if isinstance(mask, TensorLayout) else mask
        chosen = np.flatnonzero(values).astype(np.int64)
        rest = tuple(self.shape)[np.ndim(values) :]
        rows = self.new_empty((len(chosen),), dtype=DTYPE_OBJECTS["int64"]).copy_(chosen)
        return rows, math.prod(rest), rest

    def _masked_rows(self: Tensor, mask: Any) -> Tensor:
        """``self[mask]``: the selected elements (rows), a copy by one gather kernel."""
        rows, row, rest = self._mask_rows(mask)
        out = self.new_empty((rows.numel(), *rest))
        if out.numel():
            x = self.dense()
            sizes = (rows.numel(), row, x.numel() // row)
            launch_gather(x.device_tensor, rows.device_tensor, out.device_tensor, sizes, line=True)
            if x is not self:
                x.free()
        rows.free()
        return out

    def _write_masked(self: Tensor, mask: Any, value: Any) -> None:
        """``self[mask] = value``: a scalar by masked_fill_, values by a scatter kernel."""
        name = self.storage_device_tensor.name
        if python_scalar(value) is not None or (
            isinstance(value, TensorLayout) and value.ndim == 0
        ):
            if not isinstance(mask, TensorLayout):
                mask = self.new_empty(mask.shape, dtype=BOOL).copy_(mask)
            lead = (*mask.shape, *[1] * (self.ndim - mask.ndim))
            self.masked_fill_(mask.reshape(lead), value)
            return
        rows, row, rest = self._mask_rows(mask)
        shape = (rows.numel(), *rest)
        try:
            np.broadcast_shapes(tuple(np.shape(value)), shape)
        except ValueError:
            rows.free()
            raise TensorError(
                f"indexing {name!r}: shape mismatch: value of shape {tuple(np.shape(value))} "
                f"cannot be broadcast to indexing result of shape {shape}"
            ) from None
        source = self.new_empty(shape).copy_(value)
        if source.numel():
            target = self.dense()
            counts = (source.numel(), rows.numel(), row, target.numel() // row)
            launch_scatter(
                source.device_tensor, rows.device_tensor, target.device_tensor, counts,
                line=True, add=False,
            )  # fmt: skip
            if target is not self:
                self.copy_(target)
                target.free()
        source.free()
        rows.free()

    def __iter__(self: Tensor) -> Iterator[Tensor]:
        if not self.ndim:
            raise TensorTypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __len__(self: Tensor) -> int:
        if not self.ndim:
            raise TensorTypeError("len() of a 0-d tensor")
        return self.shape[0]

    # -- views ---------------------------------------------------------------------------
    def _strided(self: Tensor, shape: tuple[int, ...], strides: tuple[int, ...]) -> Tensor:
        return self._view(Geometry(shape, strides, self.geometry.offset))

    def view(self: Tensor, *shape: Any) -> Tensor:
        """The same memory in ``shape`` (one ``-1`` inferred); an error when that needs a copy."""
        if len(shape) == 1 and not isinstance(shape[0], tuple | list | int | np.integer):
            raise TensorError(
                "view(dtype) is not supported; use .to(dtype) (a copy) or view(*shape)"
            )
        new_shape = reshape_shape(_sizes(shape), self.numel(), "view")
        strides = view_strides(self.geometry, new_shape)
        if strides is None:
            raise TensorError(
                f"view {tuple(new_shape)}: view size is not compatible with input tensor's size "
                f"{tuple(self.shape)} and stride {self.geometry.strides} (at least one "
                "dimension spans across two contiguous subspaces); use .reshape(...) instead"
            )
        return self._strided(new_shape, strides)

    def view_as(self: Tensor, other: Tensor) -> Tensor:
        return self.view(_shape_of(other, "view_as"))

    def reshape(self: Tensor, *shape: Any) -> Tensor:
        """A view when the memory allows one, else a contiguous copy in ``shape``."""
        new_shape = reshape_shape(_sizes(shape), self.numel(), "reshape")
        strides = view_strides(self.geometry, new_shape)
        if strides is not None:
            return self._strided(new_shape, strides)
        return self.contiguous().view(new_shape)

    def reshape_as(self: Tensor, other: Tensor) -> Tensor:
        return self.reshape(_shape_of(other, "reshape_as"))

    def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if not self.ndim:
            return self.reshape(1)
        start, end = dim_index(start_dim, self.ndim), dim_index(end_dim, self.ndim)
        if start > end:
            raise TensorError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        shape = self.shape
        merged = math.prod(shape[start : end + 1])
        return self.reshape((*shape[:start], merged, *shape[end + 1 :]))

    def ravel(self: Tensor) -> Tensor:
        return self.reshape(-1)

    def unsqueeze(self: Tensor, dim: int) -> Tensor:
        d = dim_index(dim, self.ndim + 1)
        geo = self.geometry
        stride = geo.strides[d] * geo.shape[d] if d < self.ndim else 1
        return self._strided(
            (*geo.shape[:d], 1, *geo.shape[d:]), (*geo.strides[:d], stride, *geo.strides[d:])
        )

    def squeeze(self: Tensor, dim: Any = None) -> Tensor:
        geo = self.geometry
        if dim is None:
            dims = {d for d, size in enumerate(geo.shape) if size == 1}
        else:
            named = dim if isinstance(dim, tuple | list) else (dim,)
            dims = {dim_index(d, self.ndim) for d in named} if self.ndim else set()
            dims = {d for d in dims if geo.shape[d] == 1}
        keep = [d for d in range(self.ndim) if d not in dims]
        return self._strided(tuple(geo.shape[d] for d in keep), tuple(geo.strides[d] for d in keep))

    def permute(self: Tensor, *dims: Any) -> Tensor:
        order = [dim_index(d, self.ndim) for d in _sizes(dims)]
        if sorted(order) != list(range(self.ndim)):
            raise TensorError(
                f"permute: dims {tuple(_sizes(dims))} must name each of the {self.ndim} dims once"
            )
        geo = self.geometry
        return self._strided(
            tuple(geo.shape[d] for d in order), tuple(geo.strides[d] for d in order)
        )

    def transpose(self: Tensor, dim0: int, dim1: int) -> Tensor:
        if not self.ndim:
            return self._strided((), ())
        order = list(range(self.ndim))
        a, b = dim_index(dim0, self.ndim), dim_index(dim1, self.ndim)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    swapaxes = transpose

    def t(self: Tensor) -> Tensor:
        if self.ndim > 2:
            raise TensorError(f"t() expects a tensor with <= 2 dimensions, but it has {self.ndim}")
        return (
            self.transpose(0, 1)
            if self.ndim == 2
            else self._strided(self.geometry.shape, self.geometry.strides)
        )

    @property
    def T(self: Tensor) -> Tensor:  # noqa: N802 - torch's name
        return self.permute(list(range(self.ndim))[::-1])

    @property
    def mT(self: Tensor) -> Tensor:  # noqa: N802 - torch's name
        if self.ndim < 2:
            raise TensorError(f"mT needs a tensor of at least 2 dims, got {self.ndim}")
        return self.transpose(-2, -1)

    def expand(self: Tensor, *sizes: Any) -> Tensor:
        """A view of ``sizes``; dims of size 1 repeat with stride 0 (``-1`` keeps a size)."""
        wanted = list(_sizes(sizes))
        geo = self.geometry
        if len(wanted) < self.ndim:
            raise TensorError(
                f"expand: the number of sizes {len(wanted)} must be at least the tensor's "
                f"{self.ndim} dims"
            )
        lead = len(wanted) - self.ndim
        shape, strides = [], []
        for i, want in enumerate(wanted):
            want = int_argument(want, "expand", "a size")
            if i < lead:
                if want < 0:
                    raise TensorError(f"expand: size -1 is not allowed in a new leading dim {i}")
                shape.append(want)
                strides.append(0)
                continue
            size, stride = geo.shape[i - lead], geo.strides[i - lead]
            if want == -1 or want == size:
                shape.append(size)
                strides.append(stride)
            elif size == 1:
                shape.append(want)
                strides.append(0)
            else:
                raise TensorError(
                    f"expand: the expanded size of the tensor ({want}) must match the existing "
                    f"size ({size}) at non-singleton dimension {i}; shape {tuple(geo.shape)}"
                )
        return self._strided(tuple(shape), tuple(strides))

    def expand_as(self: Tensor, other: Tensor) -> Tensor:
        return self.expand(_shape_of(other, "expand_as"))

    def split(self: Tensor, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
        """Views of ``split_size`` elements along ``dim`` (the last may be smaller), or
        of the sizes in a list ``split_size`` (they must add up to the dimension)."""
        d = dim_index(dim, self.ndim, "split", scalar=False)
        size = self.shape[d]
        if isinstance(split_size, numbers.Integral) and not isinstance(split_size, bool):
            split_size = int(split_size)
            if split_size < 0 or (split_size == 0 and size):
                raise TensorError(f"split: split_size must be positive, got {split_size}")
            sizes = [min(split_size, size - a) for a in range(0, size, split_size or 1)] or [0]
        else:
            sizes = list(int_sequence(split_size, "split", "split_size"))
            if sum(sizes) != size or any(n < 0 for n in sizes):
                raise TensorError(
                    f"split: split_sizes {sizes} must be non-negative and add up to the "
                    f"size of dimension {dim} ({size})"
                )
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return tuple(self.narrow(d, a, n) for a, n in zip(starts, sizes, strict=True))

    def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most ``chunks`` views along ``dim``, each ceil(size / chunks) long but the
        last (fewer when the dimension is short), as torch.chunk."""
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            raise TensorError(f"chunk: chunks must be a positive int, got {chunks!r}")
        size = self.shape[dim_index(dim, self.ndim, "chunk", scalar=False)]
        return self.split(max(1, -(-size // chunks)), dim)

    def as_strided(
        self: Tensor, size: Any, stride: Any, storage_offset: int | None = None
    ) -> Tensor:
        """A view of this tensor's storage with the given shape, strides and first element
        (this tensor's offset when None), as torch's; it must lie inside the storage."""
        shape = int_sequence(size, "as_strided", "size")
        strides = int_sequence(stride, "as_strided", "stride")
        if len(shape) != len(strides):
            raise TensorError(
                f"mismatch in length of strides and shape: as_strided got {len(shape)} sizes "
                f"and {len(strides)} strides"
            )
        if any(s < 0 for s in strides):
            raise TensorError(
                f"as_strided: Negative strides are not supported at the moment, got strides: "
                f"{list(strides)}"
            )
        if any(n < 0 for n in shape):
            raise TensorError(f"as_strided: negative size in {list(shape)}")
        offset = self.storage_offset() if storage_offset is None else storage_offset
        offset = int_argument(offset, "as_strided", "storage_offset")
        geometry = Geometry(tuple(shape), tuple(strides), offset)
        room = math.prod(self.storage_device_tensor.shape)
        needed = offset + geometry.extent if geometry.numel else 0
        if offset < 0 or needed > room:
            raise TensorError(
                f"setStorage: sizes {list(shape)}, strides {list(strides)}, storage offset "
                f"{offset}, and itemsize {self.element_size()} requiring a storage size of "
                f"{needed * self.element_size()} are out of bounds for storage of size "
                f"{room * self.element_size()}"
            )
        return self._view(geometry)

    def select(self: Tensor, dim: int, index: int) -> Tensor:
        """The slice at ``index`` along ``dim``, that dimension removed (a view)."""
        d = dim_index(dim, self.ndim, "select", scalar=False)
        size = self.shape[d]
        index = int_argument(index, "select", "index")
        if not -size <= index < size:
            raise TensorError(
                f"select(): index {index} out of range for tensor of size {list(self.shape)} "
                f"at dimension {d}"
            )
        return self[(*[slice(None)] * d, index + size if index < 0 else index)]

    def narrow(self: Tensor, dim: int, start: int, length: int) -> Tensor:
        d = dim_index(dim, self.ndim, "narrow", scalar=False)
        size = self.shape[d]
        start = int_argument(start, "narrow", "start")
        length = int_argument(length, "narrow", "length")
        if not -size <= start <= size:
            raise TensorError(
                f"narrow: start ({start}) is out of range for dimension {dim} of size {size} "
                f"(valid: {-size}..{size})"
            )
        start = start + size if start < 0 else start  # as torch: counts from the end
        if length < 0 or start + length > size:
            raise TensorError(
                f"narrow: start ({start}) + length ({length}) exceeds dimension size ({size})"
            )
        return self[(*[slice(None)] * d, slice(start, start + length))]
