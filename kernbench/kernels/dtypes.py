"""The kernel element types (``tl.float32``, ``tl.int8`` ...) and conversions between them.

A :class:`dtype` names a type, the NumPy type that holds its values and its
size. ``bfloat16`` has no NumPy type: its values are held in float32 arrays
rounded to bf16 precision (:func:`round_bf16`, round to nearest even).
Triton's 8-bit floats (``float8e4nv``, ``float8e5`` ...) are names only
(:class:`float8_type`): code may compare a pointer's element type with them,
but no value is ever of those types (:func:`check_modelled` refuses them).
:func:`cast_values` converts values to a type as a kernel's ``.to()`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.runtime.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits

__all__ = [
    "bfloat16",
    "bitcast_values",
    "cast_values",
    "dtype",
    "element_type",
    "float16",
    "float32",
    "float64",
    "float8_type",
    "float8e4b8",
    "float8e4b15",
    "float8e4nv",
    "float8e5",
    "float8e5b16",
    "check_modelled",
    "from_numpy",
    "int1",
    "int8",
    "int16",
    "int32",
    "int64",
    "pointer_type",
    "round_bf16",
    "round_toward_zero",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]


class dtype:  # noqa: N801 - Triton spells it in lower case
    """A kernel element type: a name, the NumPy type that holds it, its size."""

    __slots__ = ("name", "np_dtype", "itemsize", "_kind")

    def __init__(self, name: str, np_dtype: Any, itemsize: int) -> None:
        self.name = name
        self.np_dtype = np.dtype(np_dtype)
        self.itemsize = itemsize
        # The kind is asked of every operand of every operation: a NumPy dtype's
        # attribute costs more to read than a slot.
        self._kind = self.np_dtype.kind

    def is_floating(self) -> bool:
        return self._kind == "f"

    def is_int(self) -> bool:
        """True for the integer types, int1 among them (Triton counts it an unsigned int)."""
        return self._kind in "iub"

    def is_int_signed(self) -> bool:
        return self._kind == "i"

    def is_int_unsigned(self) -> bool:
        return self._kind in "ub"

    def is_bool(self) -> bool:
        return self._kind == "b"

    # is_int1(), is_int8(), ..., is_fp16(), is_bf16(), is_fp32(), is_fp64(): see below.

    @property
    def primitive_bitwidth(self) -> int:
        return 1 if self.is_bool() else 8 * self.itemsize

    @property
    def int_bitwidth(self) -> int:
        """The width of an integer type in bits (1 for int1)."""
        if not self.is_int():
            raise KernelError(f"{self!r} is not an integer type, so it has no int_bitwidth")
        return self.primitive_bitwidth

    def __repr__(self) -> str:
        return f"tl.{self.name}"


class pointer_type:  # noqa: N801 - Triton spells it in lower case
    """The type of a pointer; ``element_ty`` is what it points to."""

    __slots__ = ("element_ty",)

    def __init__(self, element_ty: dtype) -> None:
        self.element_ty = element_ty

    def __eq__(self, other: object) -> bool:
        return isinstance(other, pointer_type) and other.element_ty is self.element_ty

    def __hash__(self) -> int:
        return hash(("pointer", self.element_ty.name))

    def __repr__(self) -> str:
        return f"pointer<{self.element_ty!r}>"


int1 = dtype("int1", np.bool_, 1)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 2)
int32 = dtype("int32", np.int32, 4)
int64 = dtype("int64", np.int64, 8)
uint8 = dtype("uint8", np.uint8, 1)
uint16 = dtype("uint16", np.uint16, 2)
uint32 = dtype("uint32", np.uint32, 4)
uint64 = dtype("uint64", np.uint64, 8)
float16 = dtype("float16", np.float16, 2)
bfloat16 = dtype("bfloat16", np.float32, 2)
float32 = dtype("float32", np.float32, 4)
float64 = dtype("float64", np.float64, 8)


class float8_type(dtype):  # noqa: N801 - as the other dtypes
    """An 8-bit float type of Triton's: a name to compare with, never a value's type
    (NumPy has no fp8 type to hold the values)."""

    __slots__ = ()

    def __init__(self, name: str) -> None:
        super().__init__(name, np.uint8, 1)

    def is_floating(self) -> bool:
        return True

    def is_int(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False


float8e4nv = float8_type("float8e4nv")
float8e5 = float8_type("float8e5")
float8e4b15 = float8_type("float8e4b15")
float8e4b8 = float8_type("float8e4b8")
float8e5b16 = float8_type("float8e5b16")


def check_modelled(dt: dtype, where: str) -> dtype:
    """``dt``, unless it is an 8-bit float type, which no value here can have."""
    if isinstance(dt, float8_type):
        raise KernelError(
            f"{where}: {dt!r} values are not modelled (kernel values are NumPy arrays, which "
            "have no 8-bit float type); use tl.float16 or tl.bfloat16"
        )
    return dt


def _install_predicates() -> None:
    """Triton's ``dtype.is_fp16()``, ``is_int8()`` ...: one per type, by its short name."""
    short_names = {
        **{t: t.name for t in (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64)},
        float16: "fp16",
        bfloat16: "bf16",
        float32: "fp32",
        float64: "fp64",
    }
    for kind, short in short_names.items():
        setattr(dtype, f"is_{short}", lambda self, kind=kind: self is kind)


_install_predicates()

_FROM_NUMPY = {
    d.np_dtype: d
    for d in (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
    + (float16, float32, float64)
}


def from_numpy(np_dtype: Any) -> dtype:
    """The kernel dtype whose values a NumPy dtype holds (float32 for bf16's holder)."""
    try:
        return _FROM_NUMPY[np.dtype(np_dtype)]
    except KeyError:
        raise KernelError(
            f"NumPy dtype {np.dtype(np_dtype)} has no kernel dtype; "
            f"valid: {', '.join(sorted(str(k) for k in _FROM_NUMPY))}"
        ) from None


def element_type(buffer: Any) -> dtype:
    """A buffer's element type: its ``element_type`` if it has one (bfloat16 values are
    held in float32 arrays), else the type of its NumPy dtype."""
    declared = getattr(buffer, "element_type", None)
    return declared if declared is not None else from_numpy(buffer.dtype)


def round_bf16(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to bf16 precision (to nearest even), held in float32: the
    runtime's bfloat16 storage rounding, shape kept (0-d blocks stay 0-d)."""
    as_f32 = np.asarray(values, dtype=np.float32)
    bits = float32_to_bfloat16_bits(as_f32.reshape(-1))
    return bfloat16_bits_to_float32(bits).reshape(as_f32.shape)


def cast_values(values: Any, to: dtype) -> np.ndarray:
    """``values`` converted to ``to`` (floats to nearest; integers wrap, as C casts do)."""
    out = np.asarray(values)
    if out.dtype != to.np_dtype:
        with np.errstate(all="ignore"):  # entering errstate costs more than most casts
            out = out.astype(to.np_dtype)
    return round_bf16(out) if to is bfloat16 else out


def round_toward_zero(values: Any, to: dtype) -> np.ndarray:
    """Floats converted to the narrower float type ``to``, rounded toward zero ("rtz").

    bf16 keeps the high 16 bits of the float32; other types round to nearest and step
    one ulp toward zero where that overshot, so an overflow gives the largest finite
    value instead of inf.
    """
    source = np.asarray(values)
    if to is bfloat16:
        as_f32 = np.asarray(round_toward_zero(source, float32), order="C")
        truncated = (as_f32.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
        return np.where(np.isnan(as_f32), as_f32, truncated)
    with np.errstate(all="ignore"):
        nearest = source.astype(to.np_dtype)
        overshot = np.abs(nearest.astype(np.float64)) > np.abs(source.astype(np.float64))
    return np.where(overshot, np.nextafter(nearest, np.zeros_like(nearest)), nearest)


_UNSIGNED_OF_WIDTH = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def bitcast_values(values: Any, source: dtype, to: dtype) -> np.ndarray:
    """``values`` of type ``source`` reinterpreted as ``to`` (types of the same width).

    A bf16 value's bits are the high 16 bits of the float32 that holds it.
    """
    held = np.asarray(values, dtype=source.np_dtype, order="C")
    if source is bfloat16:
        bits = (held.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    else:
        bits = held.view(_UNSIGNED_OF_WIDTH[source.primitive_bitwidth])
    if to is bfloat16:
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return bits.view(to.np_dtype)
