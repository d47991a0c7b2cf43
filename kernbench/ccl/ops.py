"""Reduction operators of collectives, applied to value arrays."""

from __future__ import annotations

import numpy as np

from kernbench.errors import DistributedError

__all__ = ["combine", "finish_average", "REDUCE_OPS", "INTEGER_ONLY"]

REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")
INTEGER_ONLY = frozenset({"band", "bor", "bxor"})


def check_op(op: str, dtype: np.dtype) -> None:
    if op not in REDUCE_OPS:
        raise DistributedError(f"unknown reduce op {op!r}; valid: {', '.join(REDUCE_OPS)}")
    if op in INTEGER_ONLY and np.dtype(dtype).kind not in "iu":
        raise DistributedError(
            f"reduce op {op.upper()} needs an integer tensor (got {np.dtype(dtype).name})"
        )


_UFUNCS = {
    "sum": np.add,
    "avg": np.add,  # AVG combines as SUM; the division comes last
    "product": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
    "band": np.bitwise_and,
    "bor": np.bitwise_or,
    "bxor": np.bitwise_xor,
}


def combine(op: str, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a op b`` elementwise in the values' dtype, into ``out`` when given."""
    ufunc = _UFUNCS[op]
    with np.errstate(over="ignore", invalid="ignore"):  # like hardware: inf, no warning
        if out is None:
            return ufunc(a, b)
        return ufunc(a, b, out=out, casting="unsafe")


def finish_average(values: np.ndarray, count: int) -> np.ndarray:
    """SUM -> AVG: divide by the number of ranks (integers truncate toward zero)."""
    if values.dtype.kind in "iu":
        return np.trunc(values / count).astype(values.dtype)
    return (values / count).astype(values.dtype)
