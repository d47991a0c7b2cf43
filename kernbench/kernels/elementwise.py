"""Elementwise arithmetic on kernel values, typed as compiled Triton types it.

An :class:`Operand` is a NumPy array and its kernel dtype, or a Python
number (a *scalar*, weakly typed). :func:`promote` casts two operands to the
type Triton computes in (:mod:`kernbench.kernels.promotion`); a
:class:`BinaryOp` then computes in that type's NumPy holder and rounds the
result to the type (bf16 results are rounded from float32). Integer ``//``
and ``%`` are C's (toward zero; the remainder takes the dividend's sign), float
``%`` is ``fmod``, ``/`` of integers is float32 division, ``>>`` is arithmetic
on signed values and logical on unsigned ones.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from kernbench.errors import KernelError
from kernbench.kernels.dtypes import cast_values, dtype, float32, int1
from kernbench.kernels.program import where_am_i
from kernbench.kernels.promotion import check_scalar, computation_type

__all__ = [
    "BINARY_OPS",
    "COMPARISONS",
    "MAX_BLOCK_ELEMENTS",
    "BinaryOp",
    "RIGHT_SHIFTS",
    "Operand",
    "check_broadcast",
    "check_elements",
    "promote",
]

#: The most elements one block may hold (Triton's TRITON_MAX_TENSOR_NUMEL): a block
#: is a NumPy array on the host, so its size is checked before it is made.
MAX_BLOCK_ELEMENTS = 2**20


def check_elements(count: int, what: str) -> None:
    if count > MAX_BLOCK_ELEMENTS:
        raise KernelError(
            f"{where_am_i()}: {what} would make a block of {count} elements; a block holds "
            f"at most {MAX_BLOCK_ELEMENTS} (as in Triton); give each program less work and "
            "launch more programs"
        )


def check_broadcast(values: Sequence[Any], what: str) -> None:
    """Refuse operands that broadcast to a block larger than MAX_BLOCK_ELEMENTS."""
    # The result is no larger than the product of the operands' sizes, so only operands
    # that could pass the limit are broadcast here (the common case costs a product).
    bound = 1
    for v in values:
        if isinstance(v, np.ndarray):
            bound *= v.size
    if bound <= MAX_BLOCK_ELEMENTS:
        return
    shapes = [v.shape for v in values if isinstance(v, np.ndarray)]
    if len(set(shapes)) == 1:
        return
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        return  # shapes that do not broadcast: the operation itself says so
    check_elements(math.prod(shape), what)


class Operand(NamedTuple):
    """A value of an elementwise operation: an array, or a Python number (``is_scalar``)."""

    value: Any
    dtype: dtype
    is_scalar: bool = False


def _as_type(operand: Operand, common: dtype) -> np.ndarray:
    if operand.is_scalar:
        check_scalar(operand.value, common)
    elif operand.dtype is common:
        return np.asarray(operand.value)
    return cast_values(operand.value, common)


def promote(
    a: Operand, b: Operand, div_or_mod: bool = False
) -> tuple[np.ndarray, np.ndarray, dtype]:
    """Both operands' values cast to the type Triton computes ``a op b`` in, and that type."""
    common = computation_type(a.dtype, a.is_scalar, b.dtype, b.is_scalar, div_or_mod)
    return _as_type(a, common), _as_type(b, common), common


def _c_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``//`` as Triton divides integers: rounded toward zero, as C does (Python floors)."""
    quotient, remainder = np.divmod(a, b)
    inexact = remainder != 0
    return quotient + (inexact & ((a < 0) != (b < 0)))


def _right_shift(arithmetic: bool) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``>>``: arithmetic (sign-filling) or logical, on values of one integer type."""

    def shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        as_kind = np.dtype(f"{'i' if arithmetic else 'u'}{a.dtype.itemsize}")
        return np.right_shift(a.astype(as_kind), b.astype(as_kind)).astype(a.dtype)

    return shift


@dataclass(frozen=True, slots=True)
class BinaryOp:
    """One of ``+ - * / // % ** & | ^ << >>`` or a comparison, as Triton types it."""

    symbol: str
    compute: Callable[[np.ndarray, np.ndarray], np.ndarray]
    div_or_mod: bool = False
    integers_only: bool = False
    comparison: bool = False  # Triton types a scalar operand first and gives int1
    true_division: bool = False  # integers divide as float32

    def apply(self, a: Operand, b: Operand) -> tuple[np.ndarray, dtype]:
        """The result's values and dtype."""
        common = computation_type(a.dtype, a.is_scalar, b.dtype, b.is_scalar, self.div_or_mod)
        x, y = _as_type(a, common), _as_type(b, common)
        if self.integers_only and not common.is_int():
            raise KernelError(
                f"{where_am_i()}: {self.symbol} needs integer operands (as in Triton), got "
                f"{a.dtype.name} and {b.dtype.name} (computed in {common.name})"
                + ("; use / to divide floats" if self.symbol == "//" else "")
            )
        if self.true_division and common.is_int():
            x, y, common = cast_values(x, float32), cast_values(y, float32), float32
        check_broadcast((x, y), "broadcasting the operands")
        # NumPy warns of nothing in a comparison, nor in integer arithmetic other than
        # division (which wraps), so only those enter errstate, which costs a microsecond.
        if self.comparison:
            return np.asarray(self.compute(x, y), dtype=np.bool_), int1
        if common.is_int() and not self.div_or_mod:
            return cast_values(self.compute(x, y), common), common
        with np.errstate(all="ignore"):
            out = self.compute(x, y)
        return cast_values(out, common), common


BINARY_OPS: dict[str, BinaryOp] = {
    "add": BinaryOp("+", operator.add),
    "sub": BinaryOp("-", operator.sub),
    "mul": BinaryOp("*", operator.mul),
    "truediv": BinaryOp("/", operator.truediv, div_or_mod=True, true_division=True),
    "floordiv": BinaryOp("//", _c_floordiv, div_or_mod=True, integers_only=True),
    "mod": BinaryOp("%", np.fmod, div_or_mod=True),
    "pow": BinaryOp("**", operator.pow),
    "and": BinaryOp("&", operator.and_, integers_only=True),
    "or": BinaryOp("|", operator.or_, integers_only=True),
    "xor": BinaryOp("^", operator.xor, integers_only=True),
    "lshift": BinaryOp("<<", np.left_shift, integers_only=True),
}
#: ``>>`` by the signedness of the block it is called on, as Triton chooses ashr or lshr.
RIGHT_SHIFTS = {
    signed: BinaryOp(">>", _right_shift(arithmetic=signed), integers_only=True)
    for signed in (True, False)
}
COMPARISONS: dict[str, BinaryOp] = {
    name: BinaryOp(symbol, fn, comparison=True)
    for name, symbol, fn in (
        ("lt", "<", operator.lt),
        ("le", "<=", operator.le),
        ("gt", ">", operator.gt),
        ("ge", ">=", operator.ge),
        ("eq", "==", operator.eq),
        ("ne", "!=", operator.ne),
    )
}
