"""Triton's block pointers: ``tl.make_block_ptr``, ``tl.advance`` and what a load or
store through one touches.

A block pointer names a tile of a strided n-d tensor: a base pointer (a buffer and a
scalar element offset), the tensor's ``shape`` and ``strides`` (in elements), the
tile's ``offsets`` into it and its ``block_shape``; ``order`` (the dims from fastest
to slowest in memory) is a layout hint that Triton checks and that changes nothing
here.  ``tl.advance`` moves the tile by whole elements along each dim and returns a
new block pointer.

``tl.load`` and ``tl.store`` (:mod:`kernbench.kernels.language`) turn a block pointer
into the pointer-tensor access it stands for (:meth:`BlockPointer.access`): the
offsets of the tile's elements and, for the dims in ``boundary_check``, a mask of the
elements inside ``[0, shape)`` along those dims.  Masked-off elements read the
padding (``padding_option``: ``"zero"``, ``"nan"``, or ``""``, which pads with zeros
as Triton does when a boundary check asks for padding) and are not written.  The
dims not checked are not masked, as in Triton: an element past ``shape`` there is
read or written wherever its address falls, and one outside the buffer raises the
out-of-bounds error a regular pointer raises.  So a block pointer costs exactly what
the equivalent masked pointer-tensor load or store costs (ADR 0006).

As in Triton, ``mask``/``other`` cannot be given with a block pointer, ``"nan"``
padding needs a float tensor, ``block_shape`` dims are powers of two, ``order`` is a
permutation of the dims, all five tuples have one length, and a stored value has the
tile's shape (a scalar is broadcast) and the element type (convert with ``.to``).
Offsets, shapes and strides are exact Python integers here (Triton keeps offsets in
int32).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.kernels.dtypes import dtype, element_type, pointer_type
from kernbench.kernels.elementwise import check_elements
from kernbench.kernels.program import where_am_i

__all__ = ["PADDING_OPTIONS", "BlockPointer", "advance", "make_block_ptr"]

#: What ``padding_option`` may be for a load through a block pointer ("" pads with zeros).
PADDING_OPTIONS = ("", "zero", "nan")


def _unwrap(value: Any) -> Any:
    """A ``tl.constexpr``'s value (found by its plain ``value``: the language module,
    where constexpr lives, imports this one); anything else as it is."""
    inner = getattr(value, "value", None)
    return inner if isinstance(inner, int | str | tuple | list) else value


def _integers(values: Any, what: str) -> tuple[int, ...]:
    values = _unwrap(values)
    if not isinstance(values, Sequence) or isinstance(values, str):
        values = (values,)
    out = []
    for v in values:
        try:
            out.append(operator.index(_unwrap(v)))
        except (TypeError, KernelError):  # a float, or a block that is not one integer
            raise KernelError(
                f"{where_am_i()}: {what} must be integers (or integer scalar blocks), got {v!r}"
            ) from None
    return tuple(out)


class BlockPointer:
    """A pointer to a ``block_shape`` tile at ``offsets`` of a strided n-d tensor."""

    __slots__ = ("block_shape", "buffer", "base", "offsets", "order", "shape", "strides")

    def __init__(
        self,
        buffer: Any,
        base: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offsets: tuple[int, ...],
        block_shape: tuple[int, ...],
        order: tuple[int, ...],
    ) -> None:
        self.buffer = buffer
        self.base = base
        self.shape = shape
        self.strides = strides
        self.offsets = offsets
        self.block_shape = block_shape
        self.order = order

    @property
    def dtype(self) -> pointer_type:
        """The pointer's type; ``.element_ty`` is the element type, as a pointer's."""
        return pointer_type(element_type(self.buffer))

    type = dtype

    def moved(self, offsets: tuple[int, ...]) -> BlockPointer:
        """This block pointer with ``offsets`` added to its tile's offsets."""
        moved = tuple(o + d for o, d in zip(self.offsets, offsets, strict=True))
        return BlockPointer(
            self.buffer, self.base, self.shape, self.strides, moved, self.block_shape, self.order
        )

    def access(
        self, what: str, boundary_check: Any, mask: Any, extra: Any = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The element offsets of the tile and the mask of the elements in bounds along
        the dims of ``boundary_check`` (None when every element is, or no dim is checked).

        ``mask`` must be None; ``extra`` is ``other`` for a load (it must be None too).
        """
        if mask is not None or extra is not None:
            given = "mask" if mask is not None else "other"
            raise KernelError(
                f"{where_am_i()}: tl.{what} through a block pointer takes no {given}= (as in "
                f"Triton); use boundary_check=(dims...)"
                f"{' and padding_option=' if what == 'load' else ''} for the tile's edges"
            )
        checked = self._checked_dims(boundary_check, what)
        index = [
            np.arange(n, dtype=np.int64) + o
            for n, o in zip(self.block_shape, self.offsets, strict=True)
        ]
        grids = np.meshgrid(*index, indexing="ij") if index else []
        element = np.full(self.block_shape, self.base, dtype=np.int64)
        for grid, stride in zip(grids, self.strides, strict=True):
            element += grid * stride
        inside = None
        for dim in checked:
            ok = (grids[dim] >= 0) & (grids[dim] < self.shape[dim])
            inside = ok if inside is None else inside & ok
        if inside is not None and inside.all():
            inside = None
        return element, inside

    def _checked_dims(self, boundary_check: Any, what: str) -> tuple[int, ...]:
        boundary_check = _unwrap(boundary_check)
        if boundary_check is None or (isinstance(boundary_check, Sequence) and not boundary_check):
            return ()
        dims = _integers(boundary_check, f"tl.{what} boundary_check")
        rank = len(self.block_shape)
        bad = [d for d in dims if not 0 <= d < rank]
        if bad or len(set(dims)) != len(dims):
            raise KernelError(
                f"{where_am_i()}: tl.{what} boundary_check={dims} must name distinct dims "
                f"of the {rank}-d block pointer, each in 0..{rank - 1}"
            )
        return tuple(sorted(dims))

    def padding(self, padding_option: Any) -> float:
        """The value a load gives the elements masked off by its boundary check."""
        option = _unwrap(padding_option)
        option = "" if option is None else option
        if option not in PADDING_OPTIONS:
            raise KernelError(
                f"{where_am_i()}: tl.load padding_option must be one of "
                f"{', '.join(repr(o) for o in PADDING_OPTIONS)}, got {option!r}"
            )
        element = element_type(self.buffer)
        if option == "nan":
            if not element.is_floating():
                raise KernelError(
                    f"{where_am_i()}: tl.load padding_option='nan' needs a floating-point "
                    f"tensor, but the block pointer's elements are {element!r} (as in "
                    "Triton); use padding_option='zero'"
                )
            return math.nan
        return 0.0

    def check_value(self, value: Any) -> None:
        """Refuse a stored value that Triton refuses: another shape, another type."""
        shape, kind = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is None or not isinstance(kind, dtype):
            return  # a Python number: broadcast and converted, as Triton does
        if tuple(shape) not in ((), self.block_shape):
            raise KernelError(
                f"{where_am_i()}: tl.store through a block pointer of block_shape "
                f"{self.block_shape} got a value of shape {tuple(shape)}; they must match"
            )
        element = element_type(self.buffer)
        if kind is not element:
            raise KernelError(
                f"{where_am_i()}: tl.store through a block pointer of {element!r} elements got "
                f"a {kind!r} value; convert it first with .to({element!r}) (Triton does not "
                "convert it)"
            )

    def __add__(self, other: Any) -> BlockPointer:
        raise KernelError(
            f"{where_am_i()}: a block pointer is moved with tl.advance(ptr, offsets), not "
            "with + (as in Triton)"
        )

    __radd__ = __sub__ = __add__

    def __repr__(self) -> str:
        return (
            f"BlockPointer({self.buffer.name!r}, shape={self.shape}, offsets={self.offsets}, "
            f"block_shape={self.block_shape})"
        )


def make_block_ptr(
    base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any, order: Any
) -> BlockPointer:
    """A pointer to the ``block_shape`` tile at ``offsets`` of the tensor of ``shape``
    and ``strides`` (in elements) that starts at ``base``; ``order`` lists the dims
    from fastest to slowest in memory (a hint, checked as Triton checks it)."""
    if isinstance(base, BlockPointer) or not hasattr(base, "buffer"):
        raise KernelError(
            f"{where_am_i()}: tl.make_block_ptr base must be a pointer (a buffer argument "
            f"plus a scalar offset), not {type(base).__name__}"
        )
    start = np.asarray(base.offsets)
    if start.ndim:
        raise KernelError(
            f"{where_am_i()}: tl.make_block_ptr base must be a scalar pointer, got a block of "
            f"pointers of shape {start.shape}"
        )
    dims = _integers(block_shape, "tl.make_block_ptr block_shape")
    for d in dims:
        if d <= 0 or d & (d - 1):
            raise KernelError(
                f"{where_am_i()}: tl.make_block_ptr block_shape {dims} must be powers of two "
                "(as a block's dims are in Triton)"
            )
    check_elements(math.prod(dims), f"tl.make_block_ptr block_shape {dims}")
    parts = {
        "shape": _integers(shape, "tl.make_block_ptr shape"),
        "strides": _integers(strides, "tl.make_block_ptr strides"),
        "offsets": _integers(offsets, "tl.make_block_ptr offsets"),
        "order": _integers(order, "tl.make_block_ptr order"),
    }
    wrong = {name: len(v) for name, v in parts.items() if len(v) != len(dims)}
    if wrong:
        raise KernelError(
            f"{where_am_i()}: tl.make_block_ptr block_shape has {len(dims)} dims, but "
            + ", ".join(f"{name} has {n}" for name, n in wrong.items())
            + "; shape, strides, offsets, block_shape and order need one entry a dim"
        )
    if sorted(parts["order"]) != list(range(len(dims))):
        raise KernelError(
            f"{where_am_i()}: tl.make_block_ptr order={parts['order']} must be a permutation "
            f"of {tuple(range(len(dims)))}"
        )
    return BlockPointer(
        base.buffer,
        int(start),
        parts["shape"],
        parts["strides"],
        parts["offsets"],
        dims,
        parts["order"],
    )


def advance(base: Any, offsets: Any) -> BlockPointer:
    """``base`` with its tile moved by ``offsets`` elements along each dim."""
    if not isinstance(base, BlockPointer):
        raise KernelError(
            f"{where_am_i()}: tl.advance needs a block pointer (from tl.make_block_ptr), got "
            f"{type(base).__name__}; move a regular pointer with +"
        )
    steps = _integers(offsets, "tl.advance offsets")
    if len(steps) != len(base.block_shape):
        raise KernelError(
            f"{where_am_i()}: tl.advance offsets {steps} has {len(steps)} entries for a "
            f"{len(base.block_shape)}-d block pointer; give one a dim"
        )
    return base.moved(steps)
