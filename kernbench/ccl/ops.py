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


def combine(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a op b`` elementwise, in the values' dtype (AVG combines as SUM)."""
    if op in ("sum", "avg"):
        return a + b
    if op == "product":
        return a * b
    if op == "min":
        return np.minimum(a, b)
    if op == "max":
        return np.maximum(a, b)
    if op == "band":
        return a & b
    if op == "bor":
        return a | b
    return a ^ b


def finish_average(values: np.ndarray, count: int) -> np.ndarray:
    """SUM -> AVG: divide by the number of ranks (integers truncate toward zero)."""
    if values.dtype.kind in "iu":
        return np.trunc(values / count).astype(values.dtype)
    return (values / count).astype(values.dtype)
