"""Triton's implicit type rules: the type a binary operation computes in.

As ``triton/language/semantic.py`` has them (``to_tensor_type``,
``integer_promote_impl``, ``computation_type_impl`` and the scalar checks of
``binary_op_type_checking_impl``):

* A Python number standing alone is typed by :func:`scalar_type` (bool ->
  int1, an int -> int32, uint32, int64 or uint64 by its range, a float ->
  float32, or float64 outside float32's normal range).
* A *scalar* operand (a Python number or constexpr) whose kind (bool < int <
  float) is no higher than the block's takes the block's type; ``/`` and
  ``%`` of fp16/bf16 blocks compute in float32.
* Otherwise fp64 > fp32 > fp16 (fp32 for ``/`` and ``%``) > bf16 (only when
  both are bf16; fp32 for ``/`` and ``%``, and for bf16 with an integer);
  two integers undergo C's usual arithmetic conversions
  (:func:`integer_promote`), and ``/``, ``//``, ``%`` refuse integers of
  different signedness.
"""

from __future__ import annotations

import functools
from typing import Any

from kernbench.errors import KernelError
from kernbench.kernels.dtypes import (
    bfloat16,
    dtype,
    float16,
    float32,
    float64,
    int1,
    int32,
    int64,
    uint32,
    uint64,
)
from kernbench.kernels.program import where_am_i

__all__ = ["check_scalar", "computation_type", "integer_promote", "runtime_type", "scalar_type"]

_FLOAT32_NORMAL = (2.0**-126, (2 - 2.0**-23) * 2.0**127)


def _integer_type(value: int, ranges: tuple[tuple[int, int, dtype], ...]) -> dtype:
    for low, high, kind in ranges:
        if low <= value < high:
            return kind
    raise KernelError(f"{where_am_i()}: the integer {value} does not fit in 64 bits")


def scalar_type(value: Any) -> dtype:
    """The type Triton gives a Python number used as a value (``to_tensor_type``)."""
    if isinstance(value, bool):
        return int1
    if isinstance(value, int):
        return _integer_type(
            value,
            ((-(2**31), 2**31, int32), (2**31, 2**32, uint32))
            + ((-(2**63), 2**63, int64), (2**63, 2**64, uint64)),
        )
    low, high = _FLOAT32_NORMAL
    magnitude = abs(value)
    if magnitude in (0.0, float("inf")) or value != value or low <= magnitude <= high:
        return float32
    return float64


def runtime_type(value: bool | int | float) -> dtype:
    """The type of a non-constexpr scalar kernel argument, as Triton's launcher types it."""
    if isinstance(value, bool):
        return int1
    if isinstance(value, int):
        return _integer_type(
            value,
            ((-(2**31), 2**31, int32), (2**63, 2**64, uint64), (-(2**63), 2**63, int64)),
        )
    return float32


def _kind(kind: dtype) -> int:
    """Triton's order of kinds: bool < integer < floating point."""
    return 0 if kind.is_bool() else 1 if kind.is_int() else 2


def integer_promote(a: dtype, b: dtype) -> dtype:
    """C's usual arithmetic conversions (int1 is an unsigned integer of width 1)."""
    if a.is_int_signed() == b.is_int_signed():
        return a if a.int_bitwidth > b.int_bitwidth else b
    unsigned, signed = (a, b) if a.is_int_unsigned() else (b, a)
    return unsigned if unsigned.int_bitwidth >= signed.int_bitwidth else signed


def _float_type(a: dtype, b: dtype, div_or_mod: bool) -> dtype | None:
    if float64 in (a, b):
        return float64
    if float32 in (a, b):
        return float32
    if float16 in (a, b):
        return float32 if div_or_mod else float16
    if a is bfloat16 and b is bfloat16:
        return float32 if div_or_mod else bfloat16
    if bfloat16 in (a, b):
        return float32
    return None


# Every elementwise operation of every program asks this; the answer depends only on the
# arguments (a few dozen dtypes, three flags), so it is remembered.  A refusal is not
# remembered: it raises again, naming the program it is raised in.
@functools.lru_cache(maxsize=4096)
def computation_type(
    a: dtype, a_is_scalar: bool, b: dtype, b_is_scalar: bool, div_or_mod: bool
) -> dtype:
    """The type both operands are cast to before the operation (``computation_type_impl``)."""
    if a_is_scalar != b_is_scalar:
        scalar, block = (a, b) if a_is_scalar else (b, a)
        if _kind(scalar) <= _kind(block):
            return float32 if div_or_mod and block in (float16, bfloat16) else block
    floating = _float_type(a, b, div_or_mod)
    if floating is not None:
        return floating
    if div_or_mod and a.is_int_signed() != b.is_int_signed():
        raise KernelError(
            f"{where_am_i()}: Cannot use /, // or % with {a.name} and {b.name} because they "
            "have different signedness; cast them to the same signedness"
        )
    return integer_promote(a, b)


@functools.lru_cache(maxsize=64)
def _integer_range(kind: dtype) -> tuple[int, int]:
    """The values an integer type holds: ``low <= value < high``."""
    bits = kind.int_bitwidth
    return (-(2 ** (bits - 1)), 2 ** (bits - 1)) if kind.is_int_signed() else (0, 2**bits)


def check_scalar(value: Any, common: dtype) -> None:
    """Refuse a Python number that ``common`` cannot hold, as Triton does."""
    if not common.is_int():
        return
    if value < 0 and common.is_int_unsigned():
        raise KernelError(
            f"{where_am_i()}: Cannot perform a binary operation between an unsigned tensor "
            f"and a negative scalar ({value} with {common.name}); cast one of them explicitly"
        )
    low, high = _integer_range(common)
    if not low <= value < high:
        raise KernelError(
            f"{where_am_i()}: scalar {value} is out of range for {common.name}; cast the "
            "block to a wider type first (.to(tl.int32) or .to(tl.int64))"
        )
