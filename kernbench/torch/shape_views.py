"""More views of :class:`~kernbench.torch.Tensor`: ``broadcast_to``, ``tensor_split``,
``swapdims``, ``unfold`` and the ``torch.<name>`` view functions (``broadcast_tensors``,
``narrow``, ``swapaxes``, ``atleast_1d``/``2d``/``3d``).

Each result shares its input's memory, with PyTorch's shape and strides, and costs no
simulated time: ``broadcast_to`` is ``expand`` (stride 0 in the broadcast dims),
``unfold`` adds a dim of ``size`` with the dim's stride and steps the dim by ``step``,
``tensor_split`` is ``narrow`` over sections or between indices (clamped as Python slices
are).  A tensor given as ``indices_or_sections`` is read to the host, as torch reads it.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.shapes import dim_index, int_argument, int_sequence, tensor_argument
from kernbench.torch.views import broadcast_shapes

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "TensorShapeViews",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "broadcast_tensors",
    "broadcast_to",
    "narrow",
    "select",
    "swapaxes",
    "swapdims",
    "tensor_split",
]


def _sections(value: Any, what: str) -> int | tuple[int, ...]:
    """``indices_or_sections``: an int (sections), a sequence of ints (indices), or a 0-d
    (sections) or 1-D (indices) int64 tensor read to the host, as torch reads it."""
    if hasattr(value, "storage_device_tensor"):
        if value.dtype is not DTYPE_OBJECTS["int64"]:
            raise TensorError(
                f"{what} expected tensor_indices_or_sections to have dtype of long, but got "
                f"{value.dtype!r}"
            )
        if value.ndim > 1:
            raise TensorError(
                f"{what} expected tensor_indices_or_sections to be a zero-dimensional or "
                f"one-dimensional tensor, but got a tensor with {value.ndim} dims"
            )
        numbers_ = value.tolist()
        return int(numbers_) if value.ndim == 0 else tuple(int(i) for i in numbers_)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return int_sequence(value, what, "indices_or_sections")


class TensorShapeViews:
    """``broadcast_to``, ``tensor_split``, ``swapdims`` and ``unfold``: views, no copy."""

    __slots__ = ()

    def broadcast_to(self: Tensor, size: Any) -> Tensor:
        """``expand(size)``: a view of ``size`` (``-1`` keeps a dim's size)."""
        try:
            return self.expand(size)
        except TensorError as exc:
            raise TensorError(f"broadcast_to {tuple(self.shape)} to {size}: {exc}") from None

    def swapdims(self: Tensor, dim0: int, dim1: int) -> Tensor:
        """``transpose(dim0, dim1)``, torch's other name for it."""
        return self.transpose(dim0, dim1)

    def tensor_split(self: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
        """Views along ``dim``: ``n`` sections (the first ``size % n`` one longer), or the
        pieces between the given indices (negative ones count from the end; clamped)."""
        what = "tensor_split"
        split = _sections(indices_or_sections, what)
        if not self.ndim:
            raise TensorError(
                f"{what} expected at least a 1-dimensional tensor, but got a tensor with 0 dims"
            )
        d = dim_index(dim, self.ndim, what)
        size = self.shape[d]
        lead = (slice(None),) * d
        if isinstance(split, int):
            if split <= 0:
                raise TensorError(f"{what}: number of sections must be larger than 0, got {split}")
            base, longer = divmod(size, split)
            lengths = [base + 1] * longer + [base] * (split - longer)
            starts = [sum(lengths[:i]) for i in range(split)]
            return tuple(self.narrow(d, a, n) for a, n in zip(starts, lengths, strict=True))
        bounds = [0, *split, size]
        return tuple(self[(*lead, slice(a, b))] for a, b in zip(bounds, bounds[1:], strict=False))

    def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
        """The slices of ``size`` elements along ``dimension``, ``step`` apart, as a new last
        dim (a view: the dim steps by ``step``, the new dim has the dim's stride)."""
        d = dim_index(dimension, self.ndim, "unfold")
        size = int_argument(size, "unfold", "size")
        step = int_argument(step, "unfold", "step")
        geo = self.geometry
        shape, strides = list(geo.shape), list(geo.strides)
        longest = shape[d] if self.ndim else 1
        if size < 0:
            raise TensorError(f"unfold: size is {size} but must be >= 0")
        if size > longest:
            raise TensorError(
                f"unfold: maximum size for tensor at dimension {d} is {longest} but size is {size}"
            )
        if step <= 0:
            raise TensorError(f"unfold: step is {step} but must be > 0")
        inner = strides[d] if self.ndim else 1
        if self.ndim:
            shape[d] = (shape[d] - size) // step + 1
            strides[d] *= step
        return self._strided((*shape, size), (*strides, inner))


def _tensor(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.{what}")


def broadcast_to(input: Tensor, size: Any) -> Tensor:  # noqa: A002 - torch's name
    """``torch.broadcast_to``: ``input.expand(size)``, a view."""
    return _tensor(input, "broadcast_to").broadcast_to(size)


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """``torch.broadcast_tensors``: each tensor expanded to the shape they broadcast to
    (views, no copy)."""
    items = [_tensor(t, "broadcast_tensors") for t in tensors]
    shape: tuple[int, ...] = ()
    for t in items:
        shape = broadcast_shapes(shape, tuple(t.shape), "torch.broadcast_tensors")
    return tuple(t.expand(shape) for t in items)


def narrow(input: Tensor, dim: int, start: Any, length: int) -> Tensor:  # noqa: A002
    """``torch.narrow``: ``input.narrow(dim, start, length)``, a view."""
    return _tensor(input, "narrow").narrow(dim, start, length)


def select(input: Tensor, dim: int, index: int) -> Tensor:  # noqa: A002
    """``torch.select``: ``input.select(dim, index)``, a view."""
    return _tensor(input, "select").select(dim, index)


def tensor_split(
    input: Tensor,  # noqa: A002 - torch's name
    indices_or_sections: Any,
    dim: int = 0,
) -> tuple[Tensor, ...]:
    """``torch.tensor_split``: ``input.tensor_split(indices_or_sections, dim)``."""
    return _tensor(input, "tensor_split").tensor_split(indices_or_sections, dim)


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:  # noqa: A002 - torch's name
    """``torch.swapaxes``: ``transpose``, a view."""
    return _tensor(input, "swapaxes").transpose(axis0, axis1)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002 - torch's name
    """``torch.swapdims``: ``transpose``, a view."""
    return _tensor(input, "swapdims").transpose(dim0, dim1)


def _at_least(tensors: tuple[Any, ...], dims: int) -> Any:
    """torch's ``atleast_nd(*tensors)``: one tensor gives a tensor, several (or one
    sequence of them) a tuple; each a view with size-1 dims added as torch adds them."""
    what = f"torch.atleast_{dims}d"
    one = len(tensors) == 1 and hasattr(tensors[0], "storage_device_tensor")
    items = tensors[0] if len(tensors) == 1 and not one else tensors
    if not isinstance(items, Sequence):
        raise TensorError(f"{what}: expected Tensors or a sequence of Tensors, got {items!r}")
    raised = tuple(_raised(tensor_argument(t, what), dims) for t in items)
    return raised[0] if one else raised


def _raised(t: Tensor, dims: int) -> Tensor:
    if t.ndim >= dims:
        return t
    if t.ndim == 0:
        return t.reshape((1,) * dims)
    if dims == 2 or t.ndim == 2:  # (n,) -> (1, n); (m, n) -> (m, n, 1)
        t = t.unsqueeze(0) if t.ndim == 1 else t
        return t if dims == 2 else t.unsqueeze(-1)
    return t.unsqueeze(0).unsqueeze(-1)  # (n,) -> (1, n, 1)


def atleast_1d(*tensors: Any) -> Any:
    """``torch.atleast_1d``: 0-d tensors as 1-D views; others unchanged."""
    return _at_least(tensors, 1)


def atleast_2d(*tensors: Any) -> Any:
    """``torch.atleast_2d``: 0-d as ``(1, 1)``, ``(n,)`` as ``(1, n)`` views."""
    return _at_least(tensors, 2)


def atleast_3d(*tensors: Any) -> Any:
    """``torch.atleast_3d``: 0-d as ``(1, 1, 1)``, ``(n,)`` as ``(1, n, 1)``, ``(m, n)`` as
    ``(m, n, 1)`` views."""
    return _at_least(tensors, 3)
