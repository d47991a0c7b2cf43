"""2-D mesh / torus all-reduce: rows, then columns, then rows again.

Ranks form a logical ``rows`` x ``cols`` grid (row-major: rank = row·cols +
col).  Reduce-scatter along my row, all-reduce my part down my column,
all-gather along my row (each with ``algorithms``, default ring).  Without
``rows``/``cols`` the grid is the most square factorisation of p.  The
schedule and the check that the grid and its algorithms fit the group are the
hierarchical composition's (:func:`~kernbench.ccl.algorithms.hierarchical.composed_schedule`).

Parameters (:class:`Mesh2dParams`, checked when the catalogue loads): ``rows``
and ``cols`` together or neither; ``algorithms``, one or two (along rows, then
down columns).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from pydantic import Field, ValidationInfo, model_validator

from kernbench.ccl.algorithms import Algorithm, OpArgs, register
from kernbench.ccl.algorithms.hierarchical import (
    ComposedParams,
    compose_all_reduce,
    composed_schedule,
)
from kernbench.ccl.algorithms.schedule import Schedule
from kernbench.ccl.comm import Comm
from kernbench.errors import DistributedError
from kernbench.topology.limits import MAX_PES


class Mesh2dParams(ComposedParams):
    """``rows`` x ``cols`` grid (both or neither); ``algorithms``: along rows, down columns."""

    rows: int | None = Field(None, strict=True, gt=0, le=MAX_PES, description="grid rows")
    cols: int | None = Field(None, strict=True, gt=0, le=MAX_PES, description="grid columns")

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Mesh2dParams:
        if (self.rows is None) != (self.cols is None):
            raise ValueError("give rows and cols together (or neither, for the most square grid)")
        world_size = (info.context or {}).get("world_size")
        if self.rows is not None and world_size and self.rows * self.cols != world_size:
            raise ValueError(
                f"a {self.rows} x {self.cols} grid holds {self.rows * self.cols} ranks, but "
                f"the configuration is for {world_size} (world_size)"
            )
        self.check_algorithms(1)
        return self


def grid(size: int, params: dict) -> tuple[int, int]:
    rows, cols = params.get("rows"), params.get("cols")
    if rows is None or cols is None:
        rows = max(d for d in range(1, math.isqrt(size) + 1) if size % d == 0)
        cols = size // rows
    if rows * cols != size:
        raise DistributedError(f"mesh2d: a {rows}x{cols} grid does not hold {size} ranks")
    return int(rows), int(cols)


@functools.lru_cache(maxsize=64)
def _row_key(cols: int):
    """Rank -> its row of the grid (one function per width, so groupings are cached)."""
    return lambda _pes, rank: rank // cols


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    params = c.params or {}
    rows, cols = grid(c.size, params)
    names = list(params.get("algorithms", ["ring", "ring"]))
    yield from compose_all_reduce(c, a, [_row_key(cols)], names)


def _requires(op: str, size: int) -> str | None:
    return None if size >= 1 else "needs ranks"


def _composition(pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    for key in ("rows", "cols"):
        value = params.get(key)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if value is not None and not (number and value == int(value) and value >= 1):
            raise DistributedError(f"mesh2d: {key} must be a positive whole number, not {value!r}")
    rows, cols = grid(len(pes), dict(params))
    names = list(params.get("algorithms", ["ring", "ring"]))
    return composed_schedule(pes, [_row_key(cols)], names, nbytes, params)


def _fits(op: str, pes: Sequence[str], params: Mapping[str, Any]) -> str | None:
    try:
        _composition(pes, 0, params)
    except DistributedError as exc:
        return str(exc)
    return None


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    return _composition(pes, nbytes, params)


def _peers(op: str, size: int, rank: int) -> set[int]:
    rows, cols = grid(size, {})
    row, col = divmod(rank, cols)
    same_row = {row * cols + (col + d) % cols for d in (-1, 1)}
    same_col = {((row + d) % rows) * cols + col for d in (-1, 1)}
    return (same_row | same_col) - {rank}


register(
    Algorithm(
        name="mesh2d",
        description="2-D grid: reduce-scatter along rows, all-reduce along columns, all-gather",
        programs={"all_reduce": all_reduce},
        params=Mesh2dParams,
        requires=_requires,
        costs={
            # ring RS + AG over cols, ring AR over rows on n/cols bytes
            "all_reduce": lambda p, n, a, b, g: _mesh_cost(p, n, a, b, g),
        },
        peers=_peers,
        fits=_fits,
        schedule=_schedule,
    )
)


def _mesh_cost(p: int, n: float, a: float, b: float, g: float) -> float:
    rows, cols = grid(p, {})
    row_part = 2 * (cols - 1) * a + 2 * n * (cols - 1) / cols * b + n * (cols - 1) / cols * g
    m = n / cols
    col_part = 2 * (rows - 1) * a + 2 * m * (rows - 1) / rows * b + m * (rows - 1) / rows * g
    return row_part + col_part
