"""The collective ops and reduction operators: the one list of each, and reductions on arrays."""

from __future__ import annotations

import numpy as np

from kernbench.errors import DistributedError

__all__ = [
    "COLLECTIVE_OPS",
    "TUNABLE_OPS",
    "combine",
    "finish_average",
    "premultiply",
    "REDUCE_OPS",
    "INTEGER_ONLY",
]

#: Every collective op an algorithm may serve (catalogue keys, ccl.<op> overrides).
COLLECTIVE_OPS = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "all_to_all",
    "barrier",
)
#: The ops ``kernbench tune`` measures.
TUNABLE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")

REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")
INTEGER_ONLY = frozenset({"band", "bor", "bxor"})


_BOOL_OPS = "for bool tensors MIN (or PRODUCT) is a logical and, MAX (or SUM) a logical or"


def check_op(op: str, dtype: np.dtype) -> None:
    """Refuse an unknown op, or one the dtype does not take.  On bool values SUM and MAX
    combine as a logical or, PRODUCT and MIN as an and (NCCL maps them so for torch)."""
    if op not in REDUCE_OPS:
        raise DistributedError(f"unknown reduce op {op!r}; valid: {', '.join(REDUCE_OPS)}")
    is_bool = np.dtype(dtype).kind == "b"
    if op in INTEGER_ONLY and np.dtype(dtype).kind not in "iu":
        raise DistributedError(
            f"reduce op {op.upper()} needs an integer tensor (got {np.dtype(dtype).name})"
            + (f"; {_BOOL_OPS}" if is_bool else "")
        )
    if op == "avg" and is_bool:
        raise DistributedError(
            f"Cannot use ReduceOp.AVG with boolean inputs (as in torch); {_BOOL_OPS}"
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
    """SUM -> AVG for integers: divide the sum by the number of ranks, truncating toward
    zero (NCCL's integer ncclAvg).  Floating values were premultiplied: unchanged."""
    if values.dtype.kind in "iu":
        return np.trunc(values / count).astype(values.dtype)
    return values


def premultiply(values: np.ndarray, count: int) -> np.ndarray:
    """Each rank's input times 1/``count`` in its own dtype, before any sum: NCCL's
    floating ncclAvg (PreMulSum), so that float16 gradients whose sum passes 65504
    still average to a finite value.  Integers are left for :func:`finish_average`."""
    if values.dtype.kind in "iu":
        return values
    with np.errstate(over="ignore", under="ignore"):
        return values * values.dtype.type(1 / count)
