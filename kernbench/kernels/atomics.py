"""What Triton's atomics do to memory, lane by lane, over NumPy (``tl.atomic_*``).

The kernel language (:mod:`kernbench.kernels.language`) finds the lanes an atomic
touches, loads their elements and stores them back; this module decides the rest:

* **Order.** Lanes are applied in lane order (row-major over the pointer's block):
  a lane that hits an element an earlier lane of the same call hit sees that lane's
  result, and each lane returns its element as it was just before its own operation,
  as one atomic a lane does.  Lanes hitting distinct elements are applied together,
  so a call takes as many NumPy passes as its most-hit element has lanes.
* **Types** (Triton's ``semantic.py``): ``atomic_cas`` takes elements of 16, 32 or 64
  bits; the others refuse int1, the 8- and 16-bit integers, and float16/bfloat16;
  ``atomic_and``/``or``/``xor`` take integers only; ``atomic_max``/``min`` on floats
  are what compiled Triton makes of them (a signed-integer max of the bits where the
  value's sign bit is clear, an unsigned min where it is set, and the reverse for
  min), so -0.0 < +0.0 and a NaN with its sign bit clear wins a max.  Values (and
  ``cmp``) are converted to the element type first; ``atomic_cas`` compares bits.
* **Memory order.** ``sem`` is one of ``acquire``, ``release``, ``acq_rel``,
  ``relaxed`` and ``scope`` one of ``gpu``, ``cta``, ``sys`` (None means Triton's
  defaults, ``acq_rel`` and ``gpu``); programs run one at a time here, so any
  valid order gives the same values.
* **Spinning.** A program runs to its end before another starts (ADR 0006), so a
  program that waits in a loop for an atomic to see another program's write (a spin
  lock held by a program that ended without releasing it) would wait forever.  An
  atomic call that changes nothing, repeated the same way (same op, elements,
  operands and old values) :data:`SPIN_LIMIT` times in a row by one program, raises
  a :class:`~kernbench.errors.KernelError` saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.kernels.dtypes import bfloat16, dtype, float16
from kernbench.kernels.program import current_program, where_am_i

__all__ = [
    "MEMORY_SEMANTICS",
    "RMW_OPS",
    "SCOPES",
    "SPIN_LIMIT",
    "apply_in_lane_order",
    "check_element_type",
    "check_memory_order",
    "note_spin",
]

MEMORY_SEMANTICS = ("acquire", "release", "acq_rel", "relaxed")
SCOPES = ("gpu", "cta", "sys")

# Identical atomics that change nothing, in a row in one program, before it is a hang.
SPIN_LIMIT = 1000

Update = Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]


def _unwrapped(value: Any) -> Any:
    inner = getattr(value, "value", value)  # a tl.constexpr holds its value
    return inner if isinstance(inner, str) or inner is None else value


def check_memory_order(what: str, sem: Any, scope: Any) -> None:
    """Refuse a ``sem`` or ``scope`` Triton does not know, naming the valid ones."""
    for name, value, valid in (("sem", sem, MEMORY_SEMANTICS), ("scope", scope, SCOPES)):
        value = _unwrapped(value)
        if value is None or (isinstance(value, str) and value in ("", *valid)):
            continue
        raise KernelError(
            f"{where_am_i()}: tl.{what} {name}={value!r} is not a memory "
            f"{'semantic' if name == 'sem' else 'scope'}; use one of "
            f"{', '.join(repr(v) for v in valid)} (or None for "
            f"{'acq_rel' if name == 'sem' else 'gpu'})"
        )


def check_element_type(what: str, element: dtype) -> None:
    """Refuse the element types Triton's ``atomic_*`` refuse (``add`` is not checked here)."""
    op = what.removeprefix("atomic_")
    bits = element.primitive_bitwidth
    if op == "cas":
        if bits not in (16, 32, 64):
            raise KernelError(
                f"{where_am_i()}: tl.atomic_cas takes elements of 16, 32 or 64 bits (as in "
                f"Triton), got {element!r}"
            )
        return
    if element in (float16, bfloat16) or bits < 32:
        raise KernelError(
            f"{where_am_i()}: tl.{what} does not take {element!r} elements (as in Triton: "
            + (
                "32- and 64-bit integers)"
                if op in ("and", "or", "xor")
                else "32- and 64-bit integers, float32 and float64; only atomic_add takes "
                "float16/bfloat16)"
            )
        )
    if op in ("and", "or", "xor") and not element.is_int():
        raise KernelError(
            f"{where_am_i()}: tl.{what} takes integer elements, got {element!r}; "
            "Triton's bitwise atomics take integers only"
        )


def _bits(values: np.ndarray, signed: bool) -> np.ndarray:
    """The bit patterns of ``values`` as signed or unsigned integers of their width."""
    return values.view(np.dtype(f"{'i' if signed else 'u'}{values.dtype.itemsize}"))


def _float_extreme(largest: bool) -> Update:
    """Compiled Triton's float max/min: integer compares of the bit patterns."""

    def update(current: np.ndarray, values: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
        current, values = np.ascontiguousarray(current), np.ascontiguousarray(values)
        negative = np.signbit(values)
        signed_pick = np.maximum if largest else np.minimum
        unsigned_pick = np.minimum if largest else np.maximum
        by_signed = signed_pick(_bits(current, True), _bits(values, True)).view(values.dtype)
        by_unsigned = unsigned_pick(_bits(current, False), _bits(values, False))
        return np.where(negative, by_unsigned.view(values.dtype), by_signed)

    return update


def _compare_and_swap(current: np.ndarray, values: np.ndarray, cmp: np.ndarray | None):
    assert cmp is not None
    current, cmp = np.ascontiguousarray(current), np.ascontiguousarray(cmp)
    equal = _bits(current, False) == _bits(cmp, False)
    return np.where(equal, values, current)


def _integer_or_float(int_fn: Callable[..., np.ndarray], float_fn: Update) -> Update:
    def update(current: np.ndarray, values: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
        if values.dtype.kind == "f":
            return float_fn(current, values, cmp)
        return int_fn(current, values)

    return update


RMW_OPS: dict[str, Update] = {
    "atomic_cas": _compare_and_swap,
    "atomic_xchg": lambda current, values, cmp: values,
    "atomic_max": _integer_or_float(np.maximum, _float_extreme(True)),
    "atomic_min": _integer_or_float(np.minimum, _float_extreme(False)),
    "atomic_and": lambda current, values, cmp: np.bitwise_and(current, values),
    "atomic_or": lambda current, values, cmp: np.bitwise_or(current, values),
    "atomic_xor": lambda current, values, cmp: np.bitwise_xor(current, values),
}


def apply_in_lane_order(
    update: Update,
    current: np.ndarray,
    inverse: np.ndarray,
    values: np.ndarray,
    cmp: np.ndarray | None = None,
) -> np.ndarray:
    """Apply ``update`` lane by lane; ``current`` (one value per distinct element) is
    updated in place and each lane's value before its own update is returned.

    ``inverse[i]`` is the element lane ``i`` hits (an index into ``current``).  The
    k-th lanes of all elements are applied together, in k order.
    """
    n = inverse.size
    old = np.empty(n, dtype=current.dtype)
    if n == 0:
        return old
    order = np.argsort(inverse, kind="stable")
    by_element = inverse[order]
    starts = np.flatnonzero(np.r_[True, by_element[1:] != by_element[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - group_start
    rounds = int(rank.max()) + 1
    for k in range(rounds):
        lanes = np.flatnonzero(rank == k) if rounds > 1 else np.arange(n)
        at = inverse[lanes]
        before = current[at]
        old[lanes] = before
        with np.errstate(all="ignore"):
            current[at] = update(before, values[lanes], None if cmp is None else cmp[lanes])
    return old


_last_spin: list[Any] = [None, None, 0]  # program, what the call was, times in a row


def note_spin(what: str, unchanged: bool, signature: tuple[Any, ...]) -> None:
    """Count identical atomics of the running program that changed nothing; raise at
    :data:`SPIN_LIMIT`.  ``signature`` says what the call was (op, buffer, elements,
    operands, old values) as hashable values."""
    program = current_program()
    if program is None or not unchanged:
        _last_spin[:] = [None, None, 0]
        return
    key = (what, *signature)
    if _last_spin[0] is program and _last_spin[1] == key:
        _last_spin[2] += 1
    else:
        _last_spin[:] = [program, key, 1]
    if _last_spin[2] >= SPIN_LIMIT:
        _last_spin[:] = [None, None, 0]
        raise KernelError(
            f"{where_am_i()}: tl.{what} changed nothing {SPIN_LIMIT} times in a row; the "
            "program is spinning on a value only another program could change, and "
            "programs run one at a time here, each to its end (a lock taken and not "
            "released by an earlier program, or a flag a later program sets), so it "
            "would wait forever; release locks before a program ends"
        )
