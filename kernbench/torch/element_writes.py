"""Writes of chosen elements of :class:`~kernbench.torch.Tensor`: ``index_fill_``,
``fill_diagonal_``, ``put_``, ``masked_scatter_`` (and their copying forms), and the reads
``take_along_dim`` and ``argwhere``.

Each runs the device kernels of the ops it is made of, so it costs simulated time and
runs in timing-only mode and on the fast backend:

* ``index_fill_`` is ``self[..., index] = value`` along ``dim``: one scatter kernel.
* ``fill_diagonal_`` fills a strided view of the diagonal (torch's ``as_strided`` of the
  summed strides; with ``wrap`` a tall matrix's diagonal starts again every ``w + 1``
  rows): one strided fill kernel, or two.
* ``put_`` is ``index_put_`` on the tensor seen as 1-D (row-major; a non-contiguous
  tensor through a dense copy written back); ``accumulate`` adds atomically.
* ``masked_scatter_`` reads the mask to the host (torch waits for the count too), then
  scatters the first ``count`` elements of ``source`` into the masked places.  In
  timing-only mode, which carries no values, the mask is taken to select the first
  places ``source`` can fill (the most it can scatter: an upper bound on the time).
* ``take_along_dim`` broadcasts the input and the indices but along ``dim`` (views) and
  gathers; ``argwhere`` is ``nonzero``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError, TensorIndexError
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, python_scalar
from kernbench.torch.host_values import checked_read
from kernbench.torch.shapes import dim_index, flag_argument, tensor_argument
from kernbench.torch.views import Geometry, broadcast_shapes

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "TensorElementWrites",
    "argwhere",
    "index_fill",
    "masked_scatter",
    "put",
    "take_along_dim",
]

INT64 = DTYPE_OBJECTS["int64"]


def _tensor(value: Any, what: str) -> Any:
    return tensor_argument(value, what)


def _out_of_range(index: Tensor, size: int) -> int | None:
    """An index of ``index`` outside ``-size..size-1``, looked at host-side (no simulated
    time, as the indexing kernels' own checks; timing-only runs carry no values)."""
    if index.storage_device_tensor.context.timing_only or not index.numel():
        return None
    values = index.peek()
    bad = values[(values >= size) | (values < -size)]
    return int(bad.flat[0]) if bad.size else None


def _fill_value(value: Any, what: str) -> Any:
    """A number or a 0-d tensor (read to the host, as torch's ``item()``)."""
    if hasattr(value, "storage_device_tensor"):
        if value.ndim:
            raise TensorError(
                f"{what} only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.ndim} dimension(s)."
            )
        return value.item()
    if python_scalar(value) is None:
        raise TensorError(f"{what}: value must be a number or a 0-d Tensor, got {value!r}")
    return value


class TensorElementWrites:
    """``index_fill_``, ``fill_diagonal_``, ``put_``, ``masked_scatter_`` (and copying
    forms), ``take_along_dim``, ``argwhere``."""

    __slots__ = ()

    # -- index_fill -----------------------------------------------------------------------
    def index_fill_(self: Tensor, dim: int, index: Any, value: Any) -> Tensor:
        """``value`` into the slices of ``dim`` that ``index`` (int64, 0-d or 1-D; negative
        counts from the end) names, by one scatter kernel."""
        what = "index_fill_()"
        self._check_writable(what)
        index = _tensor(index, what)
        if index.dtype is not INT64:
            raise TensorError(f"{what}: Expected dtype int64 for index, got {index.dtype!r}")
        if index.ndim > 1:
            raise TensorError(f"{what}: Index has to be a vector/scalar, got {index.ndim} dims")
        value = _fill_value(value, "index_fill_")
        d = dim_index(dim, self.ndim, what)
        target = self if self.ndim else self.unsqueeze(0)
        if index.numel():
            size = target.shape[d]
            bad = _out_of_range(index, size)
            if bad is not None:
                raise TensorIndexError(
                    f"{what}: index {bad} is out of range for dimension {d} of "
                    f"size {size} (valid: {-size}..{size - 1})"
                )
            target[(*[slice(None)] * d, index.reshape(-1))] = value
        return self

    def index_fill(self: Tensor, dim: int, index: Any, value: Any) -> Tensor:
        """:meth:`index_fill_` on a copy."""
        return self.clone().index_fill_(dim, index, value)

    # -- fill_diagonal_ -------------------------------------------------------------------
    def fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
        """``fill_value`` on the main diagonal (every dim equal past 2-D); with ``wrap`` a
        tall matrix's diagonal starts again after ``w + 1`` rows, as torch's."""
        what = "fill_diagonal_"
        wrap = flag_argument(wrap, what, "wrap")
        if python_scalar(fill_value) is None:
            raise TensorError(f"{what}: fill_value must be a number, got {fill_value!r}")
        if self.ndim < 2:
            raise TensorError(f"{what}: dimensions must larger than 1, got {self.ndim}")
        geo = self.geometry
        height, width = geo.shape[0], geo.shape[1]
        if self.ndim > 2 and len(set(geo.shape)) > 1:
            raise TensorError(
                f"{what}: all dimensions of input must be of equal length, got {tuple(geo.shape)}"
            )
        self._check_writable(what)
        step = sum(geo.strides)
        size = min(height, width)
        self._view(Geometry((size,), (step,), geo.offset)).fill_(fill_value)
        if wrap and self.ndim == 2 and height > width + 1:
            again = -(-self.numel() // (width + 1)) - size
            start = geo.offset + geo.strides[0] * (width + 1)
            self._view(Geometry((again,), (step,), start)).fill_(fill_value)
        return self

    # -- put ------------------------------------------------------------------------------
    def put_(self: Tensor, index: Any, source: Any, accumulate: bool = False) -> Tensor:
        """``source`` into the elements of ``self`` (seen as 1-D, row-major) at ``index``
        (int64, negative counts from the end); ``accumulate`` adds, repeats adding up."""
        what = "put_()"
        index, source = _tensor(index, what), _tensor(source, what)
        accumulate = flag_argument(accumulate, what, "accumulate")
        if index.dtype is not INT64:
            raise TensorIndexError(
                f"{what}: Expected a long tensor for index, but got {index.dtype!r}"
            )
        if source.dtype is not self.dtype:
            raise TensorError(
                f"{what}: self and source expected to have the same dtype, but got self.dtype "
                f"= {self.dtype!r} and source.dtype = {source.dtype!r}"
            )
        if source.numel() != index.numel():
            raise TensorError(
                f"{what}: Expected source and index to have the same number of elements, but "
                f"got source.numel() = {source.numel()}, index.numel() = {index.numel()}"
            )
        self._check_writable(what)
        if not index.numel():
            return self
        n = self.numel()
        if not n:
            raise TensorIndexError(f"{what}: Tried to put elements into an empty tensor")
        bad = _out_of_range(index, n)
        if bad is not None:
            raise TensorIndexError(
                f"{what}: out of range: tried to access index {bad} on a tensor of {n} elements."
            )
        dense = self.dense()
        dense.view(-1).index_put_((index.reshape(-1),), source.reshape(-1), accumulate)
        if dense is not self:
            self.copy_(dense)
            dense.free()
        return self

    def put(self: Tensor, index: Any, source: Any, accumulate: bool = False) -> Tensor:
        """:meth:`put_` on a copy."""
        return self.clone().put_(index, source, accumulate)

    # -- masked_scatter -------------------------------------------------------------------
    def masked_scatter_(self: Tensor, mask: Any, source: Any) -> Tensor:
        """The first elements of ``source`` (row-major) into the places where ``mask``
        (bool, broadcast to ``self``) is True, in order."""
        what = "masked_scatter_"
        mask, source = _tensor(mask, what), _tensor(source, what)
        if mask.dtype is not BOOL:
            raise TensorError(
                f"{what} only supports boolean masks, but got mask with dtype {mask.dtype!r}"
            )
        if source.dtype is not self.dtype:
            raise TensorError(
                f"{what}: expected self and source to have same dtypes but got "
                f"{self.dtype!r} and {source.dtype!r}"
            )
        if broadcast_shapes(tuple(mask.shape), tuple(self.shape), what) != tuple(self.shape):
            raise TensorError(
                f"{what}: mask of shape {tuple(mask.shape)} cannot be broadcast to self's "
                f"shape {tuple(self.shape)} (the mask broadcasts to self, not self to it)"
            )
        self._check_writable(what)
        target = self if self.ndim else self.reshape(1)
        marks = checked_read(mask)  # the count decides what is read from source
        if marks is None:  # timing-only: no values; the first places source can fill
            marks = np.arange(self.numel()).reshape(tuple(self.shape)) < source.numel()
        marks = np.asarray(marks, bool)
        chosen = np.broadcast_to(marks, tuple(self.shape)).reshape(target.shape)
        count = int(np.count_nonzero(chosen))
        if count > source.numel():
            raise TensorError(
                f"{what}: Number of elements of source < number of ones in mask "
                f"({source.numel()} < {count})"
            )
        if count:
            target[np.ascontiguousarray(chosen)] = source.reshape(-1)[:count]
        return self

    def masked_scatter(self: Tensor, mask: Any, source: Any) -> Tensor:
        """:meth:`masked_scatter_` on a copy of ``self`` broadcast with ``mask``."""
        mask = _tensor(mask, "masked_scatter")
        shape = broadcast_shapes(tuple(self.shape), tuple(mask.shape), "masked_scatter")
        return self.expand(shape).clone().masked_scatter_(mask, source)

    # -- reads ----------------------------------------------------------------------------
    def take_along_dim(self: Tensor, indices: Any, dim: Any = None) -> Tensor:
        """``gather`` of ``indices`` along ``dim`` after broadcasting every other dim (views);
        with ``dim=None`` the flattened tensor at the flattened indices."""
        what = "torch.take_along_dim()"
        indices = _tensor(indices, what)
        if indices.dtype is not INT64:
            raise TensorError(f"{what}: dtype of indices should be Long but got {indices.dtype!r}")
        if dim is None:
            return self.reshape(-1).gather(0, indices.reshape(-1))
        if indices.ndim != self.ndim:
            raise TensorError(
                f"{what}: input and indices should have the same number of dimensions, but got "
                f"{self.ndim} dimensions for input, and {indices.ndim} dimensions for indices"
            )
        d = dim_index(dim, self.ndim, what)
        sizes = list(self.shape)
        sizes[d] = indices.shape[d]
        index_shape = broadcast_shapes(sizes, tuple(indices.shape), what)
        sizes = list(indices.shape)
        sizes[d] = self.shape[d]
        input_shape = broadcast_shapes(sizes, tuple(self.shape), what)
        return self.expand(input_shape).gather(d, indices.expand(index_shape))

    def argwhere(self: Tensor) -> Tensor:
        """``nonzero()``: the indices of the nonzero elements, ``(count, ndim)`` int64."""
        return self.nonzero()


def index_fill(input: Tensor, dim: int, index: Any, value: Any) -> Tensor:  # noqa: A002
    """``torch.index_fill``: ``input.index_fill(dim, index, value)``."""
    return _tensor(input, "torch.index_fill").index_fill(dim, index, value)


def put(input: Tensor, index: Any, source: Any, accumulate: bool = False) -> Tensor:  # noqa: A002
    """``torch.put``: ``input.put(index, source, accumulate)``."""
    return _tensor(input, "torch.put").put(index, source, accumulate)


def masked_scatter(input: Tensor, mask: Any, source: Any) -> Tensor:  # noqa: A002
    """``torch.masked_scatter``: ``input.masked_scatter(mask, source)``."""
    return _tensor(input, "torch.masked_scatter").masked_scatter(mask, source)


def take_along_dim(input: Tensor, indices: Any, dim: Any = None) -> Tensor:  # noqa: A002
    """``torch.take_along_dim``: ``input.take_along_dim(indices, dim)``."""
    return _tensor(input, "torch.take_along_dim").take_along_dim(indices, dim)


def argwhere(input: Tensor) -> Tensor:  # noqa: A002
    """``torch.argwhere``: ``input.nonzero()``."""
    return _tensor(input, "torch.argwhere").nonzero()
