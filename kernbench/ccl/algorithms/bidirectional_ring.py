"""Bidirectional ring: reduce-scatter, all-gather and all-reduce on both ring directions.

The data is cut in two halves.  The first half goes round the ring clockwise
(rank r sends to r+1), the second counter-clockwise (r sends to r-1), both at
once, each with the ring's own program (:mod:`kernbench.ccl.algorithms.ring`:
its ``chunks`` pipelining, its reduce-scatter straight from the input blocks
and its all-gather sending the own block straight from the input).  The
counter-clockwise ring runs on a sub-communicator over the ranks in reverse
order, so its messages use their own channels even where both rings join the
same pair of PEs (p = 2).

Costs (p ranks, n bytes): the step count is the ring's, so the α terms are
the same; each direction carries n/2 over the opposite link direction at the
same time, so per direction the β and γ terms are half the ring's.  The two
directions' transfers overlap (β halves); their reductions share the PE and
its memory port (γ stays the ring's):

* all-reduce: 2(p-1)α + n(p-1)/p·β + n(p-1)/p·γ
* reduce-scatter: (p-1)α + n(p-1)/p·(β/2 + γ)
* all-gather: (p-1)α + n(p-1)/(2p)·β

The schedule is the ring's on each half, run together as two programs on
every rank, the counter-clockwise one relabelled to the reversed ranks on
channels of its own.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, register, ring
from kernbench.ccl.algorithms.schedule import Schedule, in_lane, relabel, together
from kernbench.ccl.comm import Comm, Region, chunk_bounds

__all__ = ["halves"]


def halves(region: Region) -> tuple[Region, Region]:
    """The two halves of ``region`` (the first one element longer when the count is odd)."""
    (a, b), (c, d) = chunk_bounds(region.count, 2)
    return region.sub(a, b), region.sub(c, d)


def _rings(c: Comm) -> tuple[Comm, Comm]:
    """(clockwise, counter-clockwise): in the second, sub-rank s is rank p-1-s."""
    return c, c.sub(list(range(c.size))[::-1], "ccw")


def _both(c: Comm, program, args: tuple[OpArgs, OpArgs], empty: tuple[bool, bool]) -> Generator:
    """Run ``program`` on both rings at once, each with its half of the arguments."""
    bodies = [
        program(comm, half)
        for comm, half, skip in zip(_rings(c), args, empty, strict=True)
        if not skip
    ]
    yield from c.concurrently(bodies)


def _mirror(blocks: list[Region]) -> tuple[Region, ...]:
    """Blocks indexed by counter-clockwise sub-rank: sub-rank s is rank p-1-s."""
    return tuple(blocks[::-1])


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    if c.size == 1:
        return
    lo, hi = halves(a.buf)
    yield from _both(
        c, ring.all_reduce, (OpArgs(buf=lo), OpArgs(buf=hi)), (not lo.count, not hi.count)
    )


def reduce_scatter(c: Comm, a: OpArgs) -> Generator:
    """Each ring reduce-scatters its halves straight from the input blocks into ``out``."""
    split = [halves(block) for block in a.blocks]
    out_lo, out_hi = halves(a.out)
    args = (
        OpArgs(blocks=tuple(lo for lo, _ in split), out=out_lo),
        OpArgs(blocks=_mirror([hi for _, hi in split]), out=out_hi),
    )
    yield from _both(c, ring.reduce_scatter, args, (not out_lo.count, not out_hi.count))


def all_gather(c: Comm, a: OpArgs) -> Generator:
    """Each ring all-gathers its halves; the own block leaves straight from the input."""
    split = [halves(block) for block in a.blocks]
    in_lo, in_hi = halves(a.inp)
    args = (
        OpArgs(inp=in_lo, blocks=tuple(lo for lo, _ in split)),
        OpArgs(inp=in_hi, blocks=_mirror([hi for _, hi in split])),
    )
    yield from _both(c, ring.all_gather, args, (not in_lo.count, not in_hi.count))


def _peers(op: str, size: int, rank: int) -> set[int]:
    return {(rank + 1) % size, (rank - 1) % size} - {rank}


def _pattern(size: int, rank: int) -> list[int]:
    """Both directions at once."""
    return sorted(_peers("all_reduce", size, rank))


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    half = ring.schedule(op, pes, nbytes / 2, params)
    mirrored = relabel(half, list(range(len(pes)))[::-1], "ccw")
    return together([in_lane(half, "cw"), in_lane(mirrored, "ccw")])


register(
    Algorithm(
        name="bidirectional_ring",
        pipelines=True,
        mapping="cycle",
        description="two half-size rings in opposite directions at once: reduce-scatter, "
        "all-gather, all-reduce",
        programs={
            "all_reduce": all_reduce,
            "reduce_scatter": reduce_scatter,
            "all_gather": all_gather,
        },
        costs={
            "all_reduce": lambda p, n, a, b, g: 2 * (p - 1) * a + n * (p - 1) / p * (b + g),
            "reduce_scatter": lambda p, n, a, b, g: (p - 1) * a + n * (p - 1) / p * (b / 2 + g),
            "all_gather": lambda p, n, a, b, g: (p - 1) * a + n * (p - 1) / (2 * p) * b,
        },
        peers=_peers,
        pattern=_pattern,
        schedule=_schedule,
    )
)
