"""Dissemination barrier: ceil(lg p) rounds of empty messages to rank + 2^k."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, lg, register
from kernbench.ccl.algorithms.schedule import Phase, Schedule, ring_step
from kernbench.ccl.comm import Comm


def barrier(c: Comm, a: OpArgs) -> Generator:
    p, r = c.size, c.rank
    distance = 1
    while distance < p:
        c.post_send((r + distance) % p, None, 0)
        yield from c.recv((r - distance) % p)
        distance <<= 1
    yield from c.drain()


def _peers(op: str, size: int, rank: int) -> set[int]:
    peers, distance = set(), 1
    while distance < size:
        peers |= {(rank + distance) % size, (rank - distance) % size}
        distance <<= 1
    return peers - {rank}


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    p = len(pes)
    steps = tuple(ring_step(p, 0, None, shift=1 << k, signal=True) for k in range(lg(p)))
    return (Phase(steps),)


register(
    Algorithm(
        name="dissemination",
        description="dissemination barrier",
        programs={"barrier": barrier},
        costs={"barrier": lambda p, n, a, b, g: lg(p) * a},
        peers=_peers,
        schedule=_schedule,
    )
)
