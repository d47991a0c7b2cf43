"""``flip``, ``roll``, ``diagonal``, ``diag``, ``diff``, ``nan_to_num`` and ``count_nonzero``
of :class:`~kernbench.torch.Tensor`.

:class:`TensorRearrange` is mixed into the tensor class.  ``diagonal`` is a
strided view (no copy, as torch's); ``flip`` is one strided copy reading with
negative strides; ``roll`` two slice copies per rolled dim (torch rolls one dim
at a time too); ``diag`` of a matrix copies its diagonal view, of a vector
fills zeros and copies into the diagonal view; ``diff`` is one subtraction of
two shifted views per order (``!=`` for bools, as torch); ``nan_to_num`` one
kernel; ``count_nonzero`` a comparison and a sum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, python_scalar
from kernbench.torch.more_kernels import launch_nan_to_num
from kernbench.torch.pointwise import launched
from kernbench.torch.shapes import dim_index, int_argument, int_sequence
from kernbench.torch.type_info import finfo
from kernbench.torch.view_kernels import launch_strided_copy
from kernbench.torch.views import Geometry

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorRearrange"]


def _dims(t: Tensor, dims: Any, what: str) -> tuple[int, ...]:
    found = tuple(dim_index(d, t.ndim, what) for d in int_sequence(dims, what, "dims"))
    if len(set(found)) != len(found):
        raise TensorError(f"{what}: dims {dims} has a dim more than once")
    return found


class TensorRearrange:
    """``flip``, ``roll``, ``diagonal``, ``diag``, ``diff``, ``nan_to_num``, ``count_nonzero``."""

    __slots__ = ()

    def flip(self: Tensor, *dims: Any) -> Tensor:
        """A copy with the elements of ``dims`` in reverse order: one strided copy kernel
        reading through negated strides."""
        given = dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims
        flipped = _dims(self, given, "flip")
        geo = self.geometry
        offset, strides = geo.offset, list(geo.strides)
        for d in flipped if self.ndim else ():  # a 0-d tensor's dim 0 flips nothing
            if geo.shape[d] > 1:
                offset += (geo.shape[d] - 1) * strides[d]
                strides[d] = -strides[d]
        out = self.new_empty(self.shape)
        if out.numel():
            launch_strided_copy(
                self.storage_device_tensor,
                offset,
                strides,
                out.device_tensor,
                0,
                out.geometry.strides,
                tuple(self.shape),
            )
        return out

    def fliplr(self: Tensor) -> Tensor:
        if self.ndim < 2:
            raise TensorError("fliplr: Input must be >= 2-d.")
        return self.flip(1)

    def flipud(self: Tensor) -> Tensor:
        if self.ndim < 1:
            raise TensorError("flipud: Input must be >= 1-d.")
        return self.flip(0)

    def roll(self: Tensor, shifts: Any, dims: Any = None) -> Tensor:
        """A copy with the elements shifted by ``shifts`` along ``dims`` (wrapping around);
        without ``dims``, of the flattened tensor, shape kept."""
        amounts = int_sequence(shifts, "roll", "shifts")
        if dims is None:
            if len(amounts) != 1:
                raise TensorError(
                    f"roll: shifts {shifts} must be one int when dims is not given (as torch)"
                )
            flat = self.flatten()
            return flat.roll(amounts[0], 0).view(self.shape)
        axes = int_sequence(dims, "roll", "dims")
        if len(axes) != len(amounts):
            raise TensorError(
                f"roll: shifts and dimensions must align. shifts: {len(amounts)}, dims: {len(axes)}"
            )
        current = self
        for shift, axis in zip(amounts, axes, strict=True):
            d = dim_index(axis, self.ndim, "roll", scalar=False)
            n = self.shape[d]
            out = current.new_empty(self.shape)
            k = shift % n if n else 0
            if k == 0:
                out.copy_(current)
            else:
                out.narrow(d, k, n - k).copy_(current.narrow(d, 0, n - k))
                out.narrow(d, 0, k).copy_(current.narrow(d, n - k, k))
            if current is not self:
                current.free()
            current = out
        return current if current is not self else self.clone()

    def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The ``offset``-th diagonal of the (``dim1``, ``dim2``) planes as the last dim: a
        view, as torch's."""
        k = int_argument(offset, "diagonal", "offset")
        if self.ndim < 2:
            raise TensorError(
                f"diagonal: input must have at least 2 dims, got shape {tuple(self.shape)}"
            )
        a = dim_index(dim1, self.ndim, "diagonal")
        b = dim_index(dim2, self.ndim, "diagonal")
        if a == b:
            raise TensorError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        geo = self.geometry
        rows, cols = geo.shape[a], geo.shape[b]
        size = max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))
        start = geo.offset
        if size:
            start += k * geo.strides[b] if k >= 0 else -k * geo.strides[a]
        keep = [d for d in range(self.ndim) if d not in (a, b)]
        shape = (*(geo.shape[d] for d in keep), size)
        strides = (*(geo.strides[d] for d in keep), geo.strides[a] + geo.strides[b])
        return self._view(Geometry(shape, strides, start))

    def diag(self: Tensor, diagonal: int = 0) -> Tensor:
        """A vector as the ``diagonal``-th diagonal of a square matrix of zeros, or a
        matrix's ``diagonal``-th diagonal as a vector (a copy)."""
        k = int_argument(diagonal, "diag", "diagonal")
        if self.ndim == 1:
            n = self.shape[0] + abs(k)
            out = self.new_zeros(n, n)
            if self.shape[0]:
                out.diagonal(k).copy_(self)
            return out
        if self.ndim == 2:
            return self.diagonal(k).clone()
        raise TensorError(f"diag(): Supports 1D or 2D tensors. Got {self.ndim}D")

    def diff(
        self: Tensor, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None
    ) -> Tensor:
        """The ``n``-th forward difference along ``dim`` (``prepend``/``append`` joined
        first): one subtraction of two shifted views per order; bools compare with ``!=``."""
        order = int_argument(n, "diff", "n")
        if order < 0:
            raise TensorError(f"diff: order must be non-negative but got {order}")
        if self.ndim == 0:
            raise TensorError("diff: expects input to be at least one-dimensional")
        d = dim_index(dim, self.ndim, "diff")
        current = self
        parts = [p for p in (prepend, self, append) if p is not None]
        if len(parts) > 1:
            current = _joined(self, parts, d)
        for _ in range(order):
            length = current.shape[d]
            if length == 0:
                break
            later, earlier = current.narrow(d, 1, length - 1), current.narrow(d, 0, length - 1)
            step = later != earlier if current.dtype is BOOL else later - earlier
            if current is not self and current.contiguous_device_tensor() is not None:
                current.free()
            current = step
        return current if current is not self else self.clone()

    def nan_to_num(
        self: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
    ) -> Tensor:
        """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0,
        the dtype's largest and its lowest value); one kernel.  Integers are copied."""
        return _nan_to_num(self, nan, posinf, neginf, out=None)

    def nan_to_num_(
        self: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
    ) -> Tensor:
        return _nan_to_num(self, nan, posinf, neginf, out=self)

    def count_nonzero(self: Tensor, dim: Any = None) -> Tensor:
        """How many elements are not zero over ``dim`` (all by default), ``int64``: a
        comparison and a sum (torch counts in one reduction)."""
        dims = () if dim is None else int_sequence(dim, "count_nonzero", "dim")
        nonzero = self != 0
        out = nonzero.sum(dims if dims else None, dtype=DTYPE_OBJECTS["int64"])
        nonzero.free()
        return out


def _joined(t: Tensor, parts: list[Any], d: int) -> Tensor:
    """``parts`` (``prepend``, ``t``, ``append``) joined along ``d`` by slice copies; a
    number or 0-d tensor is one slice of ``t``'s shape, as torch."""
    slices = []
    for part in parts:
        if not hasattr(part, "storage_device_tensor"):
            raise TensorError(
                f"diff: prepend and append must be Tensors, got {type(part).__name__}"
            )
        if part.ndim == 0:
            part = part.expand((*t.shape[:d], 1, *t.shape[d + 1 :]))
        same = part.ndim == t.ndim and all(
            a == b for i, (a, b) in enumerate(zip(part.shape, t.shape, strict=True)) if i != d
        )
        if not same:
            raise TensorError(
                f"diff: prepend/append of shape {tuple(part.shape)} must match the input's "
                f"shape {tuple(t.shape)} but along dim {d}"
            )
        slices.append(part)
    shape = list(t.shape)
    shape[d] = sum(p.shape[d] for p in slices)
    out = t.new_empty(shape)
    start = 0
    for part in slices:
        if part.shape[d]:
            out.narrow(d, start, part.shape[d]).copy_(part)
        start += part.shape[d]
    return out


def _nan_to_num(t: Tensor, nan: Any, posinf: Any, neginf: Any, out: Tensor | None) -> Tensor:
    for name, value in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if value is not None and (isinstance(value, bool) or python_scalar(value) is None):
            raise TensorError(f"nan_to_num: {name} must be a number or None, got {value!r}")
    nan = 0.0 if nan is None else nan  # torch's nan=None is 0.0
    if not t.dtype.is_floating_point:
        return t if out is not None else t.clone()
    high = finfo(t.dtype).max
    posinf = high if posinf is None else float(posinf)
    neginf = -high if neginf is None else float(neginf)
    return launched(
        t, out, t.dtype, lambda s, d: launch_nan_to_num(s, d, float(nan), posinf, neginf)
    )
