"""The Triton-style kernel language (``import kernbench.kernels.language as tl``).

Kernels are ordinary Python functions run one program at a time by the
interpreter. Values are :class:`Block` objects (a NumPy array plus a ``tl``
dtype); buffer arguments appear as :class:`Pointer` objects (a buffer plus a
block of element offsets). Every ``tl`` call and every operator on a block
reports its work to the recorder of the running program, so a cost model can
charge time for it later.

What is counted (one record per call, see ``ProgramRecorder``):

* ``tl.load`` / ``tl.store``: one instruction each; lanes issued, lanes active
  (mask true) and ``active lanes * buffer itemsize`` bytes.  Through a block pointer
  (``tl.make_block_ptr``; :mod:`~kernbench.kernels.block_pointers`) the same, with the
  elements in bounds along the ``boundary_check`` dims as the active lanes.
* ``tl.atomic_add`` and the other atomics (``atomic_cas``, ``atomic_xchg``,
  ``atomic_max``/``min``, ``atomic_and``/``or``/``xor``; :mod:`~kernbench.kernels.atomics`):
  a load and a store of the lanes' elements, and one op a lane.
* ``tl.dot``: ``2*M*N*K`` (times the batch) matrix FLOPs of the blocks as
  issued -- padding lanes included, since the hardware multiplies them too. The
  accumulate into ``acc`` is part of the dot and not counted again.
* Elementwise operators and ``tl`` math (``+ - * / // % **``, comparisons,
  ``& | ^ ~``, negation, ``where``, ``maximum``, ``exp`` ...): one op per
  output element. It is a vector FLOP when any operand is floating point,
  otherwise an integer op (index and mask arithmetic). ``exp``, ``exp2``,
  ``log``, ``log2``, ``sqrt``, ``rsqrt``, ``sin``, ``cos``, ``sigmoid`` and
  ``erf`` also count one transcendental op per element (a subset of the vector FLOPs).
* Reductions (``sum``, ``max``, ``min``) and scans (``cumsum``, ``cumprod``): one op
  per *input* element.  ``associative_scan``: what ``combine_fn`` counts, once for each
  element after the first along the axis (a sequential scan's combines).  ``sort``: a
  bitonic network's compare-exchanges, one vector FLOP per element a stage, integer
  keys too (``log2(n) * (log2(n) + 1) / 2`` stages for ``n`` along the axis).
* Pointer arithmetic (``ptr + offsets``): one integer op per element.
* Not counted: ``arange``, ``zeros``, ``full``, ``.to()`` casts, indexing with
  ``None``/``:``, and plain Python arithmetic on ints.

Grids: ``spmd_dim`` and ``nc`` are here as NKI's language has them
(``kernel[tl.spmd_dim(g, tl.nc(2)), h]``; :mod:`kernbench.kernels.grid`).
A name the language lacks is an :class:`~kernbench.errors.UnsupportedNameError`
saying what to use instead.

Dtypes: ``bfloat16`` has no NumPy type, so bf16 values are held in float32
arrays rounded to bf16 precision (round to nearest even). ``tl.arange`` and
``tl.program_id`` give int32 like Triton; pointer offsets are int64, and an
int32 offset that wrapped around is caught as out of bounds.

Types of results follow Triton's ``semantic.py`` (:mod:`~kernbench.kernels.promotion`):
both operands are cast to one computation type, then the operation runs in it
(bf16 in float32, rounded back to bf16). A Python number (or constexpr) takes
the block's type when its kind (bool < int < float) is no higher than the
block's, so ``int8_block + 1`` is int8 and wraps; otherwise the wider type
wins (fp64 > fp32 > fp16 > bf16; integers by C's usual arithmetic
conversions, so int32 with uint32 is uint32). ``/`` and ``%`` of fp16 or bf16
compute in float32, ``/`` of integers gives float32, and ``/``, ``//``, ``%``
refuse integers of different signedness. Comparisons, ``maximum``,
``minimum`` and ``clamp`` type a Python number first (int32, float32 ...);
``maximum``/``minimum``/``clamp`` also widen bf16 to float32. Integer ``//``
and ``%`` truncate toward zero as C does (``-7 // 2 == -3``, ``-7 % 3 == -1``);
float ``%`` is ``fmod``; ``//`` and the bitwise operators take integers only.
The math functions (``exp``, ``log``, ``sqrt``, ``sin`` ... ``sigmoid``, ``erf``,
``floor``, ``ceil``) take
float32 or float64 only, as Triton's do: convert others with ``.to(tl.float32)``.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import math
import operator
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np

from kernbench.errors import KernelError, unsupported_name
from kernbench.kernels.atomics import (
    RMW_OPS,
    apply_in_lane_order,
    check_element_type,
    check_memory_order,
    note_spin,
)
from kernbench.kernels.block_pointers import BlockPointer, advance, make_block_ptr
from kernbench.kernels.dtypes import (
    bfloat16,
    bitcast_values,
    cast_values,
    check_modelled,
    dtype,
    element_type,
    float8e4b8,
    float8e4b15,
    float8e4nv,
    float8e5,
    float8e5b16,
    float16,
    float32,
    float64,
    from_numpy,
    int1,
    int8,
    int16,
    int32,
    int64,
    pointer_type,
    round_toward_zero,
    uint8,
    uint16,
    uint32,
    uint64,
)
from kernbench.kernels.elementwise import (
    BINARY_OPS,
    COMPARISONS,
    MAX_BLOCK_ELEMENTS,
    RIGHT_SHIFTS,
    BinaryOp,
    Operand,
    check_broadcast,
    check_elements,
    promote,
)
from kernbench.kernels.grid import nc, spmd_dim
from kernbench.kernels.program import (
    ProgramState,
    current_program,
    record_vector,
    running_program,
    where_am_i,
)
from kernbench.kernels.promotion import runtime_type, scalar_type

__all__ = [
    "MAX_BLOCK_ELEMENTS",
    "Block",
    "Pointer",
    "PropagateNan",
    "ProgramState",
    "abs",
    "advance",
    "arange",
    "associative_scan",
    "atomic_add",
    "atomic_and",
    "atomic_cas",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_xchg",
    "atomic_xor",
    "bfloat16",
    "broadcast_to",
    "cast",
    "cdiv",
    "ceil",
    "clamp",
    "constexpr",
    "cos",
    "cumprod",
    "cumsum",
    "debug_barrier",
    "device_assert",
    "dot",
    "dtype",
    "erf",
    "exp",
    "exp2",
    "expand_dims",
    "float16",
    "float32",
    "float64",
    "float8e4b8",
    "float8e4b15",
    "float8e4nv",
    "float8e5",
    "float8e5b16",
    "floor",
    "full",
    "int1",
    "int8",
    "int16",
    "int32",
    "int64",
    "load",
    "log",
    "log2",
    "make_block_ptr",
    "max",
    "max_contiguous",
    "maximum",
    "min",
    "minimum",
    "multiple_of",
    "nc",
    "next_power_of_2",
    "num_programs",
    "pointer_type",
    "program_id",
    "reshape",
    "rsqrt",
    "sigmoid",
    "sin",
    "sort",
    "spmd_dim",
    "sqrt",
    "static_assert",
    "store",
    "sum",
    "trans",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "where",
    "zeros",
    "zeros_like",
]


# ----------------------------------------------------------------------------- dtypes

_DType = dtype  # for functions whose Triton signature has a parameter named ``dtype``


class constexpr:  # noqa: N801 - Triton spells it in lower case
    """Marks a compile-time meta-parameter (``BLOCK: tl.constexpr``).

    Used as an annotation it makes the parameter a meta-parameter of the
    launch; ``constexpr(v)`` wraps a value and is unwrapped when passed in.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"


# ----------------------------------------------------------------------------- blocks


def runtime_scalar(value: Any, specialize: bool = True) -> Any:
    """A non-constexpr kernel argument as the kernel sees it.

    Triton's launcher types a Python number: a bool is int1, an int int32 (int64 past
    it, uint64 past int64), a float float32. Here it becomes a 0-d block of that type,
    so ``fp16_block * s`` is float32 and ``s // 3`` divides as C does. An int equal to
    1 is a constant (Triton specializes it) unless ``specialize`` is false (the
    kernel's ``do_not_specialize``). A NumPy number is a 0-d block of its own dtype
    (how the facade passes a float64 tensor's scalar). Anything else is returned
    unchanged.
    """
    if isinstance(value, np.number):  # a NumPy scalar keeps its own type (float64 included)
        return Block(np.asarray(value), from_numpy(value.dtype))
    if not isinstance(value, bool | int | float) or isinstance(value, np.generic):
        return value
    if specialize and value == 1 and type(value) is int:
        return value
    kind = runtime_type(value)
    with np.errstate(over="ignore"):  # a float past float32's range is inf, as on a GPU
        return Block(np.asarray(value, dtype=kind.np_dtype), kind)


def _operand(x: Any, typed: bool = False) -> Operand:
    """``x`` as an elementwise operand. A Python number is a weakly typed scalar unless
    ``typed`` (Triton types it first for comparisons, ``maximum``, ``clamp`` ...)."""
    if isinstance(x, constexpr):
        x = x.value
    if isinstance(x, Block):
        return Operand(x.value, x.dtype)
    if isinstance(x, np.ndarray | np.generic):
        return Operand(np.asarray(x), from_numpy(x.dtype))
    if isinstance(x, bool | int | float):
        return Operand(x, scalar_type(x), is_scalar=not typed)
    if isinstance(x, Pointer):
        raise KernelError(f"{where_am_i()}: a pointer cannot be used as a value here")
    raise KernelError(f"{where_am_i()}: cannot use {type(x).__name__} as a kernel value")


def _values(x: Any) -> np.ndarray:
    """The values of a block, array or Python number, as an array."""
    return np.asarray(_operand(x, typed=True).value)


def _result(values: Any, dt: dtype, floating: bool, transcendental: bool = False) -> Block:
    """A computed block; its elements are counted as vector ops."""
    result = Block(values, dt)
    record_vector(result.numel, floating, transcendental)
    return result


def _apply(op: BinaryOp, x: Any, y: Any) -> Block:
    a, b = _operand(x, typed=op.comparison), _operand(y, typed=op.comparison)
    values, dt = op.apply(a, b)
    floating = dt.is_floating() or a.dtype.is_floating() or b.dtype.is_floating()
    return _result(values, dt, floating)


def _unary(fn: Callable[[np.ndarray], Any], x: Any, transcendental: bool = False) -> Block:
    b = _block(x)
    with np.errstate(all="ignore"):
        out = fn(b.value)
    return _result(cast_values(out, b.dtype), b.dtype, b.dtype.is_floating(), transcendental)


_ONE_VALUE = "get one value with tl.sum or tl.max first"
_ROUNDING_MODES = ("rtne", "rtz")


def _rounds_toward_zero(rounding: Any, source: dtype, to: dtype) -> bool:
    """Whether ``fp_downcast_rounding`` asks for "rtz"; refuse it where Triton does."""
    rounding = rounding.value if isinstance(rounding, constexpr) else rounding
    if rounding is None or source is to:
        return False
    if rounding not in _ROUNDING_MODES:
        raise KernelError(
            f"{where_am_i()}: fp_downcast_rounding must be one of {', '.join(_ROUNDING_MODES)}, "
            f"got {rounding!r}"
        )
    if not (source.is_floating() and to.is_floating()) or (
        to.primitive_bitwidth >= source.primitive_bitwidth
    ):
        raise KernelError(
            f"{where_am_i()}: fp_downcast_rounding={rounding!r} applies only to a float "
            f"conversion to a narrower float type (e.g. tl.float32 to tl.float16 or "
            f"tl.bfloat16), not {source!r} to {to!r}"
        )
    return rounding == "rtz"


class Block:
    """A block of values inside a kernel: a NumPy array and its kernel dtype."""

    __slots__ = ("value", "dtype")
    __array_ufunc__ = None  # make NumPy defer to our reflected operators
    __hash__ = None  # type: ignore[assignment]  # == is elementwise

    def __init__(self, value: Any, dtype_: dtype | None = None) -> None:
        arr = np.asarray(value)
        self.dtype = from_numpy(arr.dtype) if dtype_ is None else dtype_
        self.value = arr

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    @property
    def ndim(self) -> int:
        return self.value.ndim

    @property
    def numel(self) -> int:
        return int(self.value.size)

    @property
    def T(self) -> Block:  # noqa: N802 - Triton's name
        return trans(self)

    def to(self, dtype: dtype, fp_downcast_rounding: str | None = None, bitcast: bool = False):
        """Convert to ``dtype`` (``bitcast=True`` reinterprets the bits).

        ``fp_downcast_rounding`` rounds a float conversion to a narrower float type:
        ``"rtne"`` (to nearest even, the default) or ``"rtz"`` (toward zero).
        """
        if isinstance(dtype, pointer_type):
            return _pointer_to(self, dtype)
        if not isinstance(dtype, _DType):
            raise KernelError(f"{where_am_i()}: .to() needs a tl dtype, got {dtype!r}")
        check_modelled(dtype, f"{where_am_i()}: .to({dtype!r})")
        if bitcast:
            return self._bitcast(dtype)
        if _rounds_toward_zero(fp_downcast_rounding, self.dtype, dtype):
            return Block(round_toward_zero(self.value, dtype), dtype)
        return Block(cast_values(self.value, dtype), dtype)

    def _bitcast(self, dtype: dtype) -> Block:
        if dtype.primitive_bitwidth != self.dtype.primitive_bitwidth:
            raise KernelError(
                f"{where_am_i()}: cannot bitcast {self.dtype!r} ({self.dtype.primitive_bitwidth} "
                f"bits) to {dtype!r} ({dtype.primitive_bitwidth} bits); a bitcast keeps the width"
            )
        if dtype is self.dtype:
            return self
        return Block(bitcast_values(self.value, self.dtype, dtype), dtype)

    def __getitem__(self, key: Any) -> Block:
        return Block(self.value[key], self.dtype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.value, dtype=dtype)

    def __repr__(self) -> str:
        return f"Block(shape={self.shape}, dtype={self.dtype!r})"

    def __str__(self) -> str:
        return f"{self.value} ({self.dtype!r})"

    def _scalar(self, use: str, instead: str) -> Any:
        if self.value.size != 1:
            raise KernelError(
                f"{where_am_i()}: {use} needs one value, but this block has "
                f"{self.value.size} elements; {instead}"
            )
        return self.value.reshape(()).item()

    def __bool__(self) -> bool:
        return bool(
            self._scalar(
                "Python's and/or/not (and if)",
                "for elementwise logic use &, | and ~ (Triton compiles and/or to elementwise "
                "logical and/or), or get one value with tl.where, tl.sum or tl.max",
            )
        )

    def __format__(self, spec: str) -> str:
        """A format spec on a one-value block formats its value (``f"{n:4d}"`` of a
        run-time argument); without one, a block shows as str() shows it."""
        if not spec:
            return str(self)
        return format(self._scalar(f"format spec {spec!r}", "print the block instead"), spec)

    def __int__(self) -> int:
        return int(self._scalar("int()", _ONE_VALUE))

    def __float__(self) -> float:
        return float(self._scalar("float()", _ONE_VALUE))

    def __index__(self) -> int:
        if not self.dtype.is_int():
            raise KernelError(f"{where_am_i()}: a {self.dtype!r} block is not an index")
        return int(self._scalar("an index", _ONE_VALUE))

    def _binary(self, other: Any, op: BinaryOp, reflected: bool = False):
        if isinstance(other, Pointer):
            return NotImplemented
        return _apply(op, other, self) if reflected else _apply(op, self, other)

    # + - * / // % ** & | ^ << >> and comparisons: see _install_operators below.

    def __neg__(self):
        return _unary(operator.neg, self)

    def __pos__(self):
        return self

    def __invert__(self):
        if not self.dtype.is_int():
            raise KernelError(f"{where_am_i()}: ~ needs an integer block, got {self.dtype!r}")
        return _unary(operator.invert, self)

    def __abs__(self):
        return _unary(np.abs, self)

    # sum, max, min and the tl functions Triton also attaches to tensors: see
    # _install_methods below.


def _install_operators() -> None:
    # Each operator calls _apply itself: these run for every operation of every program.
    def forward(op):
        def method(self, other):
            return NotImplemented if isinstance(other, Pointer) else _apply(op, self, other)

        return method

    def reflected(op):
        def method(self, other):
            return NotImplemented if isinstance(other, Pointer) else _apply(op, other, self)

        return method

    for name, op in BINARY_OPS.items():
        setattr(Block, f"__{name}__", forward(op))
        setattr(Block, f"__r{name}__", reflected(op))
    for name, op in COMPARISONS.items():
        setattr(Block, f"__{name}__", forward(op))
    # Triton shifts right arithmetically when the block it is called on is signed.
    Block.__rshift__ = lambda self, other: self._binary(other, RIGHT_SHIFTS[_signed(self)])
    Block.__rrshift__ = lambda self, other: self._binary(other, RIGHT_SHIFTS[_signed(self)], True)


def _signed(b: Block) -> bool:
    return b.dtype.is_int_signed()


_install_operators()


def _block(x: Any) -> Block:
    if isinstance(x, Block):
        return x
    operand = _operand(x, typed=True)
    return Block(cast_values(operand.value, operand.dtype), operand.dtype)


# ----------------------------------------------------------------------------- pointers


def _offsets_of(x: Any) -> np.ndarray:
    arr = np.asarray(_values(x))
    if arr.dtype.kind not in "iub":
        raise KernelError(
            f"{where_am_i()}: pointer offsets must be integers, got {arr.dtype} values"
        )
    return arr


class Pointer:
    """A buffer plus a block (or scalar) of element offsets into it."""

    __slots__ = ("buffer", "offsets")

    def __init__(self, buffer: Any, offsets: Any = 0) -> None:
        self.buffer = buffer
        self.offsets = np.asarray(offsets, dtype=np.int64)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.offsets.shape

    @property
    def dtype(self) -> pointer_type:
        return pointer_type(element_type(self.buffer))

    type = dtype

    def to(self, dtype: Any, fp_downcast_rounding: Any = None, bitcast: bool = False) -> Pointer:
        """A pointer to its own element type is itself; other casts are refused here: a
        pointer is a buffer and offsets, not an address, and values are held by type."""
        if isinstance(dtype, pointer_type) and dtype.element_ty is self.dtype.element_ty:
            return self
        raise KernelError(
            f"{where_am_i()}: cannot convert a pointer to {self.dtype!r} into {dtype!r} here: "
            "a pointer is a buffer plus offsets, not an address, and a buffer's values are held "
            "by its element type; pass a tensor of the type you need (or load and .to() the "
            "values)"
        )

    def _moved(self, other: Any, sign: int) -> Pointer:
        if isinstance(other, Pointer):
            raise KernelError(f"{where_am_i()}: cannot add two pointers")
        delta = _offsets_of(other)
        check_broadcast([self.offsets, delta], "pointer arithmetic")
        combine = np.add if sign > 0 else np.subtract
        moved = Pointer(self.buffer, combine(self.offsets, delta, dtype=np.int64))
        record_vector(int(moved.offsets.size), floating=False)
        return moved

    def __add__(self, other: Any) -> Pointer:
        return self._moved(other, 1)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Pointer:
        return self._moved(other, -1)

    def __getitem__(self, key: Any) -> Pointer:
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, Block | np.ndarray | list) for k in keys):
            # NKI indexes a tensor with index tiles (a[ix, iy]); here a pointer is offset.
            raise KernelError(
                f"{where_am_i()}: a pointer is indexed only with None, : or ... (to reshape "
                f"its offsets), not with index blocks; offset it instead: "
                f"ptr + ix * n_cols + iy for the tile a[ix, iy] of a row-major (rows, n_cols) "
                f"tensor"
            )
        return Pointer(self.buffer, self.offsets[key])

    def __repr__(self) -> str:
        return f"Pointer({self.buffer.name!r}, shape={self.shape})"


def _pointer_to(addresses: Block, to: pointer_type) -> Pointer:
    """``addresses.to(tl.pointer_type(ty))``: loaded addresses (``tensor.data_ptr()``
    values) as a pointer into the tensor that holds them, on the running machine."""
    if not addresses.dtype.is_int() or addresses.dtype.is_bool():
        raise KernelError(
            f"{where_am_i()}: only integer addresses (e.g. from tensor.data_ptr()) convert to "
            f"{to!r}, not {addresses.dtype!r} values"
        )
    state = current_program()
    space = state.address_space if state is not None else None
    if space is None:
        raise KernelError(
            f"{where_am_i()}: an address converts to {to!r} only in a kernel running on the "
            "simulated machine (on device tensors); a host launch on NumPy arrays has no "
            "addresses: pass each array as an argument"
        )
    return space.pointer(addresses.value, to.element_ty)


# ----------------------------------------------------------------------------- program ids


def _axis(axis: Any) -> int:
    axis = int(axis)
    if axis not in (0, 1, 2):
        raise KernelError(f"{where_am_i()}: axis must be 0, 1 or 2, got {axis}")
    return axis


def _state(what: str) -> ProgramState:
    state = current_program()
    if state is None:
        raise KernelError(f"tl.{what} called outside a running kernel program")
    return state


def program_id(axis: int) -> Block:
    """This program's index along grid ``axis`` (an int32 scalar block)."""
    return Block(np.int32(_state("program_id").pid[_axis(axis)]))


def num_programs(axis: int) -> Block:
    """The number of programs along grid ``axis`` (an int32 scalar block)."""
    return Block(np.int32(_state("num_programs").num_programs[_axis(axis)]))


# ----------------------------------------------------------------------------- creation


def _int(x: Any, what: str) -> int:
    try:
        return operator.index(x.value if isinstance(x, constexpr) else x)
    except TypeError:
        raise KernelError(f"{where_am_i()}: {what} must be an integer, got {x!r}") from None


def arange(start: int, end: int) -> Block:
    """``[start, end)`` as an int32 block; ``end - start`` must be a power of two."""
    lo, hi = _int(start, "tl.arange start"), _int(end, "tl.arange end")
    n = hi - lo
    check_elements(n, f"tl.arange({lo}, {hi})")
    if n <= 0 or n & (n - 1):
        raise KernelError(
            f"{where_am_i()}: tl.arange({lo}, {hi}) has length {n}, which is not a "
            f"power of two; use tl.arange(0, {next_power_of_2(builtins.max(n, 1))}) and a mask"
        )
    return Block(np.arange(lo, hi, dtype=np.int32), int32)


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, Block | constexpr) or not isinstance(shape, Sequence):
        shape = (shape,)
    dims = tuple(_int(s, "a block dimension") for s in shape)
    for d in dims:
        if d < 0:
            raise KernelError(f"{where_am_i()}: block dimension {d} is negative in {dims}")
    check_elements(math.prod(dims), f"a block of shape {dims}")
    return dims


def _check_dtype(dt: Any, what: str) -> dtype:
    if not isinstance(dt, dtype):
        raise KernelError(f"{where_am_i()}: {what} needs a tl dtype (e.g. tl.float32), got {dt!r}")
    return check_modelled(dt, f"{where_am_i()}: {what}")


def full(shape: Any, value: Any, dtype: dtype) -> Block:
    dt = _check_dtype(dtype, "tl.full")
    if isinstance(value, int) and not isinstance(value, bool) and dt.np_dtype.kind in "iu":
        info = np.iinfo(dt.np_dtype)
        if not info.min <= value <= info.max:  # Triton refuses it too, rather than wrap
            raise KernelError(
                f"{where_am_i()}: tl.full value {value} is out of range for {dt.name} "
                f"({info.min}..{info.max})"
            )
    return Block(cast_values(np.full(_shape(shape), _values(value)), dt), dt)


def zeros(shape: Any, dtype: dtype) -> Block:
    return full(shape, 0, dtype)


def zeros_like(input: Any) -> Block:
    b = _block(input)
    return zeros(b.shape, b.dtype)


def cast(input: Any, dtype: dtype, fp_downcast_rounding: str | None = None, bitcast=False):
    return _block(input).to(dtype, fp_downcast_rounding, bitcast)


# ----------------------------------------------------------------------------- memory


def _masked(pointer: Any, mask: Any, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    if not isinstance(pointer, Pointer):
        raise KernelError(
            f"{where_am_i()}: tl.{what} needs a pointer (a buffer argument plus offsets), "
            f"got {type(pointer).__name__}"
        )
    offsets = pointer.offsets
    if mask is None:
        return offsets, None
    mask_values = np.asarray(_values(mask)).astype(bool, copy=False)
    if mask_values.shape == offsets.shape:  # the common case: nothing to broadcast
        check_elements(mask_values.size, f"tl.{what} with its mask")
        return offsets, None if mask_values.all() else mask_values
    try:
        shape = np.broadcast_shapes(offsets.shape, mask_values.shape)
    except ValueError:
        raise KernelError(
            f"{where_am_i()}: tl.{what} mask of shape {mask_values.shape} does not "
            f"broadcast to the pointer shape {offsets.shape}"
        ) from None
    check_elements(math.prod(shape), f"tl.{what} with its mask")
    offsets = np.broadcast_to(offsets, shape)
    if mask_values.all():  # the common full block: skip boolean indexing
        return offsets, None
    return offsets, np.broadcast_to(mask_values, shape)


def _check_bounds(active: np.ndarray, buffer: Any, what: str, issued: int) -> None:
    if active.size == 0:
        return
    numel = int(buffer.numel)
    if int(active.min()) >= 0 and int(active.max()) < numel:
        return
    bad = active[(active < 0) | (active >= numel)]
    raise KernelError(
        f"{where_am_i()}: tl.{what} of buffer {buffer.name!r} ({buffer.memory}, "
        f"{numel} elements) at element offset {int(bad[0])} is out of bounds [0, {numel}) "
        f"({bad.size} of {issued} lanes out of bounds); pass a mask (e.g. mask=offsets < n), "
        "or boundary_check=(dims...) for a block pointer, so those lanes are not touched"
    )


def _record_memory(kind: str, buffer: Any, issued: int, active: int) -> None:
    state = current_program()
    if state is not None:
        getattr(state.recorder, f"record_{kind}")(buffer, lanes_issued=issued, lanes_active=active)


def load(
    pointer: Pointer,
    mask: Any = None,
    other: Any = None,
    boundary_check: Sequence[int] = (),
    padding_option: str = "",
    cache_modifier: str = "",
    eviction_policy: str = "",
    volatile: bool = False,
) -> Block:
    """Load the elements ``pointer`` points at; masked-off lanes get ``other`` (or 0),
    converted to the element type (bf16 rounded).

    Through a block pointer (:mod:`~kernbench.kernels.block_pointers`) the elements
    outside the tensor along the dims of ``boundary_check`` get ``padding_option``'s
    value; it costs what the equivalent masked pointer load costs.  The cache hints
    are accepted for compatibility and ignored.
    """
    if isinstance(pointer, BlockPointer):
        offsets, mask = pointer.access("load", boundary_check, mask, other)
        other = pointer.padding(padding_option)
        pointer = Pointer(pointer.buffer, offsets)
    offsets, lanes = _masked(pointer, mask, "load")
    buffer = pointer.buffer
    np_dtype = np.dtype(buffer.dtype)
    if lanes is None:
        flat = offsets.reshape(-1)
        _check_bounds(flat, buffer, "load", flat.size)
        out = np.asarray(buffer.load(flat), dtype=np_dtype).reshape(offsets.shape)
        active = flat.size
    else:
        chosen = offsets[lanes]
        _check_bounds(chosen, buffer, "load", offsets.size)
        fill = cast_values(0 if other is None else _values(other), element_type(buffer))
        out = np.array(np.broadcast_to(fill, offsets.shape), dtype=np_dtype)
        out[lanes] = buffer.load(chosen)
        active = chosen.size
    _record_memory("load", buffer, int(offsets.size), int(active))
    return Block(out, element_type(buffer))


def store(
    pointer: Pointer,
    value: Any,
    mask: Any = None,
    boundary_check: Sequence[int] = (),
    cache_modifier: str = "",
    eviction_policy: str = "",
) -> None:
    """Store ``value`` (broadcast to the pointer shape) where ``mask`` is true; through a
    block pointer, where the tile is inside the tensor along the dims of ``boundary_check``."""
    if isinstance(pointer, BlockPointer):
        pointer.check_value(value)
        offsets, mask = pointer.access("store", boundary_check, mask)
        pointer = Pointer(pointer.buffer, offsets)
    offsets, lanes = _masked(pointer, mask, "store")
    buffer = pointer.buffer
    values = np.asarray(_values(value))
    try:
        values = np.broadcast_to(values, offsets.shape)
    except ValueError:
        raise KernelError(
            f"{where_am_i()}: tl.store value of shape {values.shape} does not broadcast "
            f"to the pointer shape {offsets.shape}"
        ) from None
    with np.errstate(all="ignore"):
        values = values.astype(np.dtype(buffer.dtype), copy=False)
    if lanes is None:
        chosen, chosen_values = offsets.reshape(-1), values.reshape(-1)
    else:
        chosen, chosen_values = offsets[lanes], values[lanes]
    _check_bounds(chosen, buffer, "store", offsets.size)
    if chosen.size:
        buffer.store(chosen, chosen_values)
    _record_memory("store", buffer, int(offsets.size), int(chosen.size))


def _lane_values(x: Any, offsets: np.ndarray, lanes: Any, what: str, name: str) -> np.ndarray:
    """``x`` broadcast to the pointer's lanes, the active ones in lane order."""
    values = np.asarray(_values(x))
    try:
        values = np.broadcast_to(values, offsets.shape)
    except ValueError:
        raise KernelError(
            f"{where_am_i()}: tl.{what} {name} of shape {values.shape} does not broadcast "
            f"to the pointer shape {offsets.shape}"
        ) from None
    return values.reshape(-1) if lanes is None else values[lanes]


def _record_atomic(buffer: Any, issued: int, active: int) -> None:
    """What an atomic costs: a load and a store of the active lanes' elements, one op a lane."""
    _record_memory("load", buffer, issued, active)
    _record_memory("store", buffer, issued, active)
    record_vector(issued, element_type(buffer).is_floating())


def _spun(what: str, buffer: Any, unique: np.ndarray, before: bytes, after: bytes, *operands):
    """Tell the spin check about an atomic call (:func:`atomics.note_spin`)."""
    if before != after:  # memory changed: no spin, and no signature to build
        note_spin(what, False, ())
        return
    note_spin(what, True, (id(buffer), unique.tobytes(), before, *(o.tobytes() for o in operands)))


def atomic_add(pointer: Pointer, val: Any, mask: Any = None, sem: Any = None, scope: Any = None):
    """``*pointer += val`` for each active lane, lanes at one element adding up in lane
    order; returns each lane's element as it was before this call's adds (Triton returns
    the value before that lane's own add).  ``sem`` and ``scope`` are checked as
    Triton's (:func:`atomics.check_memory_order`); programs run one at a time, so they
    change nothing else."""
    check_memory_order("atomic_add", sem, scope)
    offsets, lanes = _masked(pointer, mask, "atomic_add")
    buffer = pointer.buffer
    np_dtype = np.dtype(buffer.dtype)
    chosen_values = _lane_values(val, offsets, lanes, "atomic_add", "val")
    chosen = offsets.reshape(-1) if lanes is None else offsets[lanes]
    _check_bounds(chosen, buffer, "atomic_add", offsets.size)
    old = np.zeros(offsets.shape, dtype=np_dtype)
    if chosen.size:
        unique, inverse = np.unique(chosen, return_inverse=True)
        current = np.array(buffer.load(unique), dtype=np_dtype)
        before = current[inverse]
        initial = current.tobytes()
        with np.errstate(all="ignore"):
            np.add.at(current, inverse, chosen_values.astype(np_dtype, copy=False))
        current = cast_values(current, element_type(buffer))
        buffer.store(unique, current)
        _spun("atomic_add", buffer, unique, initial, current.tobytes(), chosen_values)
        if lanes is None:
            old = before.reshape(offsets.shape)
        else:
            old[lanes] = before
    _record_atomic(buffer, int(offsets.size), int(chosen.size))
    return Block(old, element_type(buffer))


def _read_modify_write(
    what: str, pointer: Any, val: Any, mask: Any, sem: Any, scope: Any, cmp: Any = None
) -> Block:
    """One of Triton's atomics other than add, lane by lane (:mod:`kernbench.kernels.atomics`)."""
    check_memory_order(what, sem, scope)
    offsets, lanes = _masked(pointer, mask, what)
    buffer = pointer.buffer
    element = element_type(buffer)
    check_element_type(what, element)
    np_dtype = np.dtype(buffer.dtype)
    new = cast_values(_lane_values(val, offsets, lanes, what, "val"), element).astype(np_dtype)
    compare = None
    if cmp is not None:
        compare = cast_values(_lane_values(cmp, offsets, lanes, what, "cmp"), element)
        compare = compare.astype(np_dtype)
    chosen = offsets.reshape(-1) if lanes is None else offsets[lanes]
    _check_bounds(chosen, buffer, what, offsets.size)
    old = np.zeros(offsets.shape, dtype=np_dtype)
    unique, inverse = np.unique(chosen, return_inverse=True)
    current = np.array(buffer.load(unique) if chosen.size else (), dtype=np_dtype)
    initial = current.tobytes()
    before = apply_in_lane_order(RMW_OPS[what], current, inverse, new, compare)
    if chosen.size:
        buffer.store(unique, current)
    operands = (new,) if compare is None else (new, compare)
    _spun(what, buffer, unique, initial, current.tobytes(), before, *operands)
    if lanes is None:
        old = before.reshape(offsets.shape)
    else:
        old[lanes] = before
    _record_atomic(buffer, int(offsets.size), int(chosen.size))
    return Block(old, element)


def atomic_cas(pointer: Pointer, cmp: Any, val: Any, sem: Any = None, scope: Any = None):
    """Compare-and-swap: where a lane's element equals ``cmp`` (bit for bit), it becomes
    ``val``; returns each lane's element as it was before its own swap.  No mask, as in
    Triton; elements of 16, 32 or 64 bits."""
    return _read_modify_write("atomic_cas", pointer, val, None, sem, scope, cmp=cmp)


def _atomic(name: str, does: str) -> Callable[..., Block]:
    def op(pointer: Pointer, val: Any, mask: Any = None, sem: Any = None, scope: Any = None):
        return _read_modify_write(name, pointer, val, mask, sem, scope)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (
        f"{does} for each active lane, lanes at one element in lane order; returns each "
        "lane's element as it was before its own operation (:mod:`kernbench.kernels.atomics` "
        "has the types each takes)."
    )
    return op


atomic_xchg = _atomic("atomic_xchg", "``*pointer = val``")
atomic_max = _atomic("atomic_max", "``*pointer = max(*pointer, val)``")
atomic_min = _atomic("atomic_min", "``*pointer = min(*pointer, val)``")
atomic_and = _atomic("atomic_and", "``*pointer &= val``")
atomic_or = _atomic("atomic_or", "``*pointer |= val``")
atomic_xor = _atomic("atomic_xor", "``*pointer ^= val``")


# ----------------------------------------------------------------------------- compute


def dot(
    input: Any,
    other: Any,
    acc: Any = None,
    input_precision: str | None = None,
    allow_tf32: bool | None = None,
    max_num_imprecise_acc: int | None = None,
    out_dtype: dtype = float32,
) -> Block:
    """Matrix product of two 2-D (or batched 3-D) blocks, accumulated in fp32.

    As in Triton, the result is float32 for fp32 or bf16 inputs whatever ``out_dtype``
    says, float64 for fp64 inputs, and ``out_dtype`` (fp32 or fp16) for fp16 inputs;
    integer inputs accumulate in int32. With ``acc`` the product is added to it and
    the result has ``acc``'s dtype.
    """
    a, b = _block(input), _block(other)
    if a.ndim not in (2, 3) or b.ndim != a.ndim:
        raise KernelError(
            f"{where_am_i()}: tl.dot needs two 2-D or two 3-D blocks, got shapes "
            f"{a.shape} and {b.shape}"
        )
    if a.shape[-1] != b.shape[-2] or a.shape[:-2] != b.shape[:-2]:
        raise KernelError(
            f"{where_am_i()}: tl.dot shapes {a.shape} and {b.shape} do not match "
            "(inner dimensions and batch must agree)"
        )
    check_elements(math.prod(a.shape[:-1]) * b.shape[-1], f"tl.dot of {a.shape} and {b.shape}")
    result_dtype = _dot_type(a.dtype, b.dtype, out_dtype)
    work = {int32: np.int32, float64: np.float64}.get(result_dtype, np.float32)
    with np.errstate(all="ignore"):
        product = np.matmul(a.value.astype(work), b.value.astype(work))
        if acc is not None:
            acc_block = _block(acc)
            product = product + acc_block.value.astype(work)
            result_dtype = acc_block.dtype
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = a.shape[0] if a.ndim == 3 else 1
    state = current_program()
    if state is not None:
        state.recorder.record_dot(m, n, k, batch)
    return Block(cast_values(product, result_dtype), result_dtype)


def _dot_type(a: dtype, b: dtype, out_dtype: Any) -> dtype:
    """The type of ``tl.dot(a, b, out_dtype=...)``, as Triton's semantic.dot picks it."""
    if not a.is_floating() and not b.is_floating():
        return int32
    out = _check_dtype(out_dtype, "tl.dot out_dtype")
    if out is bfloat16:
        raise KernelError(
            f"{where_am_i()}: tl.dot out_dtype=tl.bfloat16 is not supported (as in Triton); "
            "use out_dtype=tl.float32 and .to(tl.bfloat16)"
        )
    if float64 in (a, b):
        return float64
    return out if a is float16 and b is float16 else float32


def _reduction_axis(b: Block, axis: Any) -> int | None:
    if axis is None:
        return None
    ax = _int(axis, "a reduction axis")
    if not -b.ndim <= ax < builtins.max(b.ndim, 1):
        raise KernelError(f"{where_am_i()}: axis {ax} is out of range for shape {b.shape}")
    return ax


def _reduce(fn, b: Block, axis: Any, keep_dims: Any, accumulate: dtype | None = None) -> Block:
    """``fn`` over ``axis`` of ``b``, in ``accumulate``'s holder, rounded to ``b``'s type."""
    ax = _reduction_axis(b, axis)
    values = b.value if accumulate is None else cast_values(b.value, accumulate)
    with np.errstate(all="ignore"):
        out = fn(values, axis=ax, keepdims=bool(keep_dims))
    record_vector(b.numel, b.dtype.is_floating())
    return Block(cast_values(out, b.dtype), b.dtype)


def _sum_type(b: Block) -> dtype:
    """Triton's default: integers narrower than 32 bits sum in (u)int32, others in their type."""
    if b.dtype.is_int() and b.dtype.int_bitwidth < 32:
        return int32 if b.dtype.is_int_signed() else uint32
    return b.dtype


def sum(input: Any, axis: int | None = None, keep_dims: bool = False, dtype: dtype | None = None):
    """Sum over ``axis`` (all axes when None), as Triton types it.

    ``dtype`` casts the input first. Without it, integers narrower than 32 bits
    sum in int32 (uint32 when unsigned, int1 included) and every other type keeps
    its own: an fp16 or bf16 sum is fp16 or bf16, accumulated here in float32 and
    rounded once (compiled Triton adds in the input type, so its last bits may differ).
    """
    b = _block(input)
    b = b.to(_check_dtype(dtype, "tl.sum dtype") if dtype is not None else _sum_type(b))
    accumulate = float32 if b.dtype in (float16, bfloat16) else None
    return _reduce(np.sum, b, axis, keep_dims, accumulate)


def _scan(fn, input: Any, axis: Any, reverse: Any, dtype: Any) -> Block:
    """``fn`` (np.cumsum, np.cumprod) along ``axis``, typed as :func:`sum` types it."""
    b = _block(input)
    b = b.to(_check_dtype(dtype, "a scan dtype") if dtype is not None else _sum_type(b))
    ax = _reduction_axis(b, axis)
    if ax is None:
        raise KernelError(f"{where_am_i()}: a scan needs an axis, got None")
    values = cast_values(b.value, float32) if b.dtype in (float16, bfloat16) else b.value
    if reverse:
        values = np.flip(values, ax)
    with np.errstate(all="ignore"):
        out = fn(values, axis=ax, dtype=values.dtype)
    if reverse:
        out = np.flip(out, ax)
    record_vector(b.numel, b.dtype.is_floating())
    return Block(cast_values(out, b.dtype), b.dtype)


def cumsum(input: Any, axis: int = 0, reverse: bool = False, dtype: dtype | None = None):
    """Inclusive running sum along ``axis`` (from the end with ``reverse``), typed as
    :func:`sum`; fp16/bf16 accumulate in float32, each running value rounded once."""
    return _scan(np.cumsum, input, axis, reverse, dtype)


def cumprod(input: Any, axis: int = 0, reverse: bool = False, dtype: dtype | None = None):
    """Inclusive running product along ``axis``, typed as :func:`cumsum`."""
    return _scan(np.cumprod, input, axis, reverse, dtype)


class _Unrecorded:
    """A recorder that keeps nothing: the work it would see is charged otherwise."""

    def record_load(self, *args: Any, **kwargs: Any) -> None: ...

    def record_store(self, *args: Any, **kwargs: Any) -> None: ...

    def record_dot(self, *args: Any, **kwargs: Any) -> None: ...

    def record_vector(self, *args: Any, **kwargs: Any) -> None: ...


def _combined(combine_fn: Callable[..., Any], earlier: list[Block], later: list[Block]):
    """``combine_fn(*earlier, *later)`` as blocks of the inputs' types and shape."""
    result = combine_fn(*earlier, *later)
    parts = result if isinstance(result, tuple) else (result,)
    if len(parts) != len(later):
        raise KernelError(
            f"{where_am_i()}: tl.associative_scan's combine_fn returned {len(parts)} values "
            f"for {len(later)} inputs; it returns one value per input"
        )
    shape = later[0].shape
    return [
        Block(np.broadcast_to(cast_values(_values(r), b.dtype), shape), b.dtype)
        for r, b in zip(parts, later, strict=True)
    ]


def associative_scan(
    input: Any, axis: int, combine_fn: Callable[..., Any], reverse: bool = False
) -> Any:
    """Inclusive scan of ``input`` (a block, or a tuple of blocks of one shape) along
    ``axis`` with ``combine_fn``, as Triton's: ``combine_fn(*earlier, *later)`` takes the
    running values so far and the next ones (one of each per input) and returns the
    combined ones, in the inputs' types; it must be associative.  ``reverse`` scans from
    the end.

    The values are computed in ``log2(n)`` whole-block combines (a Hillis-Steele scan);
    the cost charged is one combine for each element after the first along the axis,
    what a sequential scan does, whatever ``combine_fn`` counts for it.
    """
    single = not isinstance(input, tuple)
    blocks = [_block(b) for b in ((input,) if single else input)]
    if not blocks or any(b.shape != blocks[0].shape for b in blocks):
        raise KernelError(
            f"{where_am_i()}: tl.associative_scan takes a block or a tuple of blocks of one "
            f"shape, got shapes {[b.shape for b in blocks]}"
        )
    ax = _reduction_axis(blocks[0], axis)
    if ax is None or not blocks[0].ndim:
        raise KernelError(f"{where_am_i()}: tl.associative_scan needs an axis, got {axis!r}")
    values = [np.moveaxis(b.value, ax, -1) for b in blocks]
    if reverse:
        values = [np.flip(v, -1) for v in values]
    n = values[0].shape[-1]
    kinds = [b.dtype for b in blocks]

    def parts(arrays: list[np.ndarray], where: slice) -> list[Block]:
        return [
            Block(np.ascontiguousarray(a[..., where]), k)
            for a, k in zip(arrays, kinds, strict=True)
        ]

    state = current_program()
    scanned = [np.array(v) for v in values]
    offset = 1
    quiet = running_program(dataclasses.replace(state, recorder=_Unrecorded())) if state else None
    with quiet or nullcontext():
        while offset < n:
            earlier, later = (
                parts(scanned, slice(None, -offset)),
                parts(scanned, slice(offset, None)),
            )
            done = _combined(combine_fn, earlier, later)
            for array, block in zip(scanned, done, strict=True):
                array[..., offset:] = block.value
            offset *= 2
    if n > 1:  # the combines a sequential scan makes, charged to the program
        _combined(combine_fn, parts(scanned, slice(None, -1)), parts(values, slice(1, None)))
    if reverse:
        scanned = [np.flip(v, -1) for v in scanned]
    out = [
        Block(np.ascontiguousarray(np.moveaxis(v, -1, ax)), k)
        for v, k in zip(scanned, kinds, strict=True)
    ]
    return out[0] if single else tuple(out)


def sort(x: Any, dim: Any = None, descending: Any = False) -> Block:
    """``x`` sorted along ``dim`` (the last when None), as Triton's bitonic ``tl.sort``
    (NaN after every number here; equal values are indistinguishable, so order among
    them does not show)."""
    b = _block(x)
    ax = b.ndim - 1 if dim is None else _reduction_axis(b, dim)
    if ax is None or b.ndim == 0:
        raise KernelError(f"{where_am_i()}: tl.sort needs a block with a dim to sort along")
    values = np.sort(b.value, axis=ax, kind="stable")
    if descending:
        values = np.flip(values, ax)
    n = b.shape[ax]
    levels = builtins.max(1, (n - 1).bit_length())
    # the compare-exchanges are the vector engine's work whatever the type (integer keys
    # included), so they count as vector FLOPs, not as free index math
    record_vector(b.numel * levels * (levels + 1) // 2, True)
    return Block(np.ascontiguousarray(values), b.dtype)


def _extreme(largest: bool, input, axis, return_indices, keep_dims):
    b = _block(input)
    if b.dtype is bfloat16:  # as Triton: no bf16 comparisons in hardware
        b = b.to(float32)
    if return_indices:
        ax = _reduction_axis(b, axis)
        index = (np.argmax if largest else np.argmin)(b.value, axis=ax, keepdims=bool(keep_dims))
        values = _reduce(np.max if largest else np.min, b, axis, keep_dims)
        return values, Block(np.asarray(index, dtype=np.int32), int32)
    if b.dtype.primitive_bitwidth < 32:
        b = b.to(float32 if b.dtype.is_floating() else int32)
    # the NONE rule of tl.maximum: a NaN gives way to the numbers beside it
    return _reduce((np.fmax if largest else np.fmin).reduce, b, axis, keep_dims)


def max(
    input: Any,
    axis: int | None = None,
    return_indices: bool = False,
    return_indices_tie_break_left: bool = True,
    keep_dims: bool = False,
):
    """Maximum over ``axis`` (all axes when None), as Triton types it.

    Without ``return_indices``: bf16, and any type narrower than 32 bits, is widened
    first (floats to float32, integers to int32), and NaN gives way to the numbers
    beside it. With ``return_indices`` only bf16 is widened; the index is the first
    of equal values.
    """
    return _extreme(True, input, axis, return_indices, keep_dims)


def min(
    input: Any,
    axis: int | None = None,
    return_indices: bool = False,
    return_indices_tie_break_left: bool = True,
    keep_dims: bool = False,
):
    """Minimum over ``axis`` (all axes when None); typed as :func:`max`."""
    return _extreme(False, input, axis, return_indices, keep_dims)


def where(condition: Any, x: Any, y: Any) -> Block:
    """``x`` where ``condition`` is true, else ``y`` (all broadcast together).

    ``x`` and ``y`` are typed as a binary operation's operands (``tl.where(c, 1, 0)``
    is int32; a float block with a Python number keeps the block's type).
    """
    cond = np.asarray(_values(condition)).astype(bool, copy=False)
    a, b, common = promote(_operand(x), _operand(y))
    check_broadcast([cond, a, b], "tl.where")
    return _result(np.where(cond, a, b), common, common.is_floating())


def _typed(x: Any) -> Operand:
    """An operand of maximum/minimum/clamp: scalars typed, bf16 widened to fp32 (as Triton)."""
    operand = _operand(x, typed=True)
    return operand._replace(dtype=float32) if operand.dtype is bfloat16 else operand


class PropagateNan(enum.IntEnum):
    """How ``tl.maximum``, ``tl.minimum`` and ``tl.clamp`` treat NaN (Triton's values).

    ``NONE`` (the default) gives the other operand, as compiled Triton's ``maxnumf``;
    ``ALL`` gives NaN when an operand is NaN.
    """

    NONE = 0
    ALL = 0xFFFF


def _propagates_nan(propagate_nan: Any) -> bool:
    value = propagate_nan.value if isinstance(propagate_nan, constexpr) else propagate_nan
    try:
        return PropagateNan(value) is PropagateNan.ALL
    except ValueError:
        raise KernelError(
            f"{where_am_i()}: propagate_nan must be tl.PropagateNan.NONE or "
            f"tl.PropagateNan.ALL, got {value!r}"
        ) from None


def _pairwise(fn: Callable[..., Any], x: Any, y: Any) -> Block:
    a, b, common = promote(_typed(x), _typed(y))
    check_broadcast([a, b], "broadcasting the operands")
    with np.errstate(all="ignore"):
        return _result(fn(a, b), common, common.is_floating())


def maximum(x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE) -> Block:
    """Elementwise maximum; bf16 operands compare in float32, as in Triton."""
    return _pairwise(np.maximum if _propagates_nan(propagate_nan) else np.fmax, x, y)


def minimum(x: Any, y: Any, propagate_nan: Any = PropagateNan.NONE) -> Block:
    """Elementwise minimum; bf16 operands compare in float32, as in Triton."""
    return _pairwise(np.minimum if _propagates_nan(propagate_nan) else np.fmin, x, y)


def clamp(x: Any, min: Any, max: Any, propagate_nan: Any = PropagateNan.NONE) -> Block:
    """``x`` clamped to ``[min, max]``; floating point only, as in Triton.

    A NaN in ``x`` gives ``min`` with ``PropagateNan.NONE``, NaN with ``ALL``.
    """
    low, high, bounds = promote(_typed(min), _typed(max))
    values, low, common = promote(_typed(x), Operand(low, bounds))
    if not common.is_floating():
        raise KernelError(
            f"{where_am_i()}: tl.clamp takes floating-point values (as in Triton), got "
            f"{common!r}; use tl.minimum(tl.maximum(x, min), max) for integers"
        )
    high = cast_values(high, common)
    check_broadcast([values, low, high], "tl.clamp")
    upper, lower = (
        (np.minimum, np.maximum) if _propagates_nan(propagate_nan) else (np.fmin, np.fmax)
    )
    with np.errstate(all="ignore"):
        return _result(upper(lower(values, low), high), common, True)


def _float_math(fn: Callable[[np.ndarray], np.ndarray], name: str, transcendental: bool = True):
    def op(x: Any) -> Block:
        b = _block(x)
        if b.dtype not in (float32, float64):
            raise KernelError(
                f"{where_am_i()}: tl.{name} takes float32 or float64 values (as in Triton), "
                f"got {b.dtype!r}; convert first with .to(tl.float32)"
            )
        return _unary(fn, b, transcendental=transcendental)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name} of float32 or float64 values (Triton refuses others)."
    return op


exp = _float_math(np.exp, "exp")
exp2 = _float_math(np.exp2, "exp2")
log = _float_math(np.log, "log")
log2 = _float_math(np.log2, "log2")
sqrt = _float_math(np.sqrt, "sqrt")
rsqrt = _float_math(lambda v: 1 / np.sqrt(v), "rsqrt")
sin = _float_math(np.sin, "sin")
cos = _float_math(np.cos, "cos")
sigmoid = _float_math(lambda v: 1 / (1 + np.exp(-v)), "sigmoid")
floor = _float_math(np.floor, "floor", transcendental=False)
ceil = _float_math(np.ceil, "ceil", transcendental=False)
_erf = np.frompyfunc(math.erf, 1, 1)
erf = _float_math(lambda v: _erf(v).astype(v.dtype), "erf")


def abs(x: Any) -> Block:
    return _unary(np.abs, x)


# ----------------------------------------------------------------------------- shapes


def trans(input: Any, *dims: int) -> Block:
    b = _block(input)
    order = dims[0] if len(dims) == 1 and isinstance(dims[0], Sequence) else dims
    return Block(np.transpose(b.value, order or None), b.dtype)


def reshape(input: Any, *shape: Any, can_reorder: bool = False) -> Block:
    b = _block(input)
    target = _shape(shape[0] if len(shape) == 1 else shape)
    if int(np.prod(target)) != b.numel:
        raise KernelError(f"{where_am_i()}: cannot reshape {b.shape} to {target}")
    return Block(b.value.reshape(target), b.dtype)


def broadcast_to(input: Any, *shape: Any) -> Block:
    b = _block(input)
    return Block(np.broadcast_to(b.value, _shape(shape[0] if len(shape) == 1 else shape)), b.dtype)


def expand_dims(input: Any, axis: int | Sequence[int]) -> Block:
    b = _block(input)
    return Block(np.expand_dims(b.value, axis), b.dtype)


# ----------------------------------------------------------------------------- hints and checks


def multiple_of(input: Any, values: Any) -> Any:
    """A compiler hint; returns ``input`` unchanged."""
    return input


def max_contiguous(input: Any, values: Any) -> Any:
    """A compiler hint; returns ``input`` unchanged."""
    return input


def debug_barrier() -> None:
    """Programs run one at a time here, each a whole block at once, so a barrier has
    nothing to wait for (as before a lock's release in Triton's layer-norm tutorial);
    it costs nothing."""


def static_assert(cond: Any, msg: str = "") -> None:
    if not bool(cond):
        raise KernelError(f"{where_am_i()}: static_assert failed: {msg}")


def device_assert(cond: Any, msg: str = "", mask: Any = None) -> None:
    values = np.asarray(_values(cond)).astype(bool, copy=False)
    if mask is not None:
        values = values | ~np.asarray(_values(mask)).astype(bool, copy=False)
    if not values.all():
        raise KernelError(f"{where_am_i()}: device_assert failed: {msg}")


# ----------------------------------------------------------------------------- integer helpers


def cdiv(x: Any, div: Any) -> Any:
    """Ceiling division: the number of blocks of ``div`` needed to cover ``x``."""
    if isinstance(x, Block) or isinstance(div, Block):
        return (x + div - 1) // div
    x, div = _int(x, "cdiv's dividend"), _int(div, "cdiv's divisor")
    if div <= 0:
        raise KernelError(f"cdiv divisor must be positive, got {div}")
    return -(-x // div)


def next_power_of_2(n: int) -> int:
    """The smallest power of two that is >= ``n``; 0 for 0, as Triton's bit trick gives."""
    n = _int(n, "next_power_of_2's argument")
    if n < 0:
        raise KernelError(f"next_power_of_2 needs a non-negative integer, got {n}")
    return n if n <= 1 else 1 << (n - 1).bit_length()


# ----------------------------------------------------------------------------- methods


def _install_methods() -> None:
    """``x.sum(...)`` and the like: the tl functions Triton attaches to tensors, as methods."""
    methods = (sum, max, min, exp, exp2, log, log2, sin, cos, sqrt, rsqrt, sigmoid, abs)
    methods += (erf, floor, ceil, cumsum, cumprod, sort)
    for fn in methods + (reshape, trans, expand_dims, broadcast_to, cast):
        setattr(Block, fn.__name__, fn)


_install_methods()


# NKI names people reach for, and what to write here instead.
_HINTS = {
    **dict.fromkeys(
        ("ndarray", "shared_hbm", "hbm", "sbuf", "psum"),
        "make tensors on the host side (torch.empty_like, ctx.empty) and pass them in",
    ),
    **dict.fromkeys(
        ("affine_range", "sequential_range", "static_range", "range"),
        "Python's range (programs run one at a time; kernbench.triton.language has tl.range)",
    ),
}


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.kernels.language", "tl", name, __all__, _HINTS)
