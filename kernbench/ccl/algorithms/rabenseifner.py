"""Rabenseifner: all-reduce = recursive-halving reduce-scatter + recursive-doubling all-gather.

Reduce-scatter by recursive halving: the data is cut into p blocks; in the
first step every rank exchanges half of the blocks with rank XOR p/2 (it
sends the half its partner keeps and reduces the half it keeps), then a
quarter with rank XOR p/4, and so on; after lg p steps rank v holds block v
reduced.  The all-gather runs the same steps backwards, doubling what it
sends.  The reduce-scatter op needs a power-of-two p.  The all-reduce takes
any p: it folds the group to the largest power of two p' first and unfolds it
after, as MPICH does (see :mod:`~kernbench.ccl.algorithms.recursive_doubling`),
and cuts the buffer into p' blocks (sizes differing by at most one element).

Costs (p ranks, n bytes; reference/collective-costs.md):

* all-reduce: 2 lg p·α + 2n(p-1)/p·β + n(p-1)/p·γ; when p is not a power of
  two, the same with p' for p plus 2α + 2nβ + nγ for the fold and unfold
* reduce-scatter: lg p·α + n(p-1)/p·(β + γ)

The schedule: the fold, the halving steps (partners p'/2, p'/4, ... apart
exchange half of what they hold and reduce the half they keep), the doubling
steps back, the unfold.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

import numpy as np

from kernbench.ccl.algorithms import Algorithm, OpArgs, lg, power_of_two, register
from kernbench.ccl.algorithms.recursive_doubling import (
    Fold,
    doubling_pattern,
    doubling_peers,
    exchange_step,
    fold_in,
    fold_out,
    fold_steps,
    post_blocks,
    span,
)
from kernbench.ccl.algorithms.schedule import Phase, Schedule
from kernbench.ccl.comm import Comm, Region, chunk_bounds


def reduce_blocks(
    c: Comm, dst: Sequence[Region], src: Sequence[Region], incoming: np.ndarray | None
) -> Generator:
    """``dst = src op incoming`` block by block; ``incoming`` is one message covering them."""
    whole_dst, whole_src = span(dst), span(src)
    if whole_dst is not None and whole_src is not None:
        yield from c.reduce_into(whole_dst, whole_src, incoming)
        return
    start = 0
    for d, s in zip(dst, src, strict=True):
        part = None if incoming is None else incoming[start : start + d.count]
        yield from c.reduce_into(d, s, part)
        start += d.count


def halving(
    c: Comm, fold: Fold, new: int, sources: Sequence[Region], targets: Sequence[Region]
) -> Generator:
    """Recursive-halving reduce-scatter over the folded group: ``targets[new]`` ends reduced.

    ``sources[i]`` holds block i as it starts (it is only read); partial sums are
    written to ``targets[i]``, which may be the same regions (in place).
    """
    current = list(sources)
    lo, hi = 0, fold.pof2
    distance = fold.pof2 // 2
    while distance:
        peer = fold.old_rank(new ^ distance)
        mid = (lo + hi) // 2
        keep, give = ((mid, hi), (lo, mid)) if new & distance else ((lo, mid), (mid, hi))
        # What is given away is final: later steps only write inside what is kept.
        yield from post_blocks(c, peer, current[give[0] : give[1]])
        incoming = yield from c.recv(peer)
        kept = slice(*keep)
        yield from reduce_blocks(c, targets[kept], current[kept], incoming)
        current[kept] = targets[kept]
        lo, hi = keep
        distance //= 2
    yield from c.drain()


def doubling(c: Comm, fold: Fold, new: int, blocks: Sequence[Region]) -> Generator:
    """Recursive-doubling all-gather over the folded group, block ``new`` complete."""
    distance = 1
    while distance < fold.pof2:
        other = new ^ distance
        mine = (new // distance) * distance
        theirs = (other // distance) * distance
        c.post_send(fold.old_rank(other), span(blocks[mine : mine + distance]))
        incoming = yield from c.recv(fold.old_rank(other))
        yield from c.place(span(blocks[theirs : theirs + distance]), incoming)
        distance <<= 1
    yield from c.drain()


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    fold = Fold(c.size)
    new = yield from fold_in(c, fold, a.buf)
    if new >= 0:
        blocks = [a.buf.sub(x, y) for x, y in chunk_bounds(a.buf.count, fold.pof2)]
        yield from halving(c, fold, new, blocks, blocks)
        yield from doubling(c, fold, new, blocks)
    yield from fold_out(c, fold, a.buf)
    yield from c.drain()


def reduce_scatter(c: Comm, a: OpArgs) -> Generator:
    """Straight from the input blocks (left untouched): partial sums go to scratch, and the
    last step reduces into ``out``, so no copy is on the critical path."""
    if c.size == 1:
        yield from c.copy(a.out, a.blocks[0])
        return
    work = c.scratch(a.blocks[0], sum(block.count for block in a.blocks))
    targets, start = [], 0
    for block in a.blocks:
        targets.append(work.sub(start, start + block.count))
        start += block.count
    targets[c.rank] = a.out
    yield from halving(c, Fold(c.size), c.rank, a.blocks, targets)


def _requires(op: str, size: int) -> str | None:
    return power_of_two(op, size) if op == "reduce_scatter" else None


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    fold = Fold(len(pes))
    q = fold.pof2
    distances = [1 << k for k in range(q.bit_length() - 1)]
    # At distance d a rank gives away (and reduces) d of the q blocks it still holds.
    halving = tuple(exchange_step(fold, d, nbytes * d / q, "reduce") for d in distances[::-1])
    if op == "reduce_scatter":
        return (Phase(halving),)
    doubling = tuple(exchange_step(fold, d, nbytes * d / q, "place") for d in distances)
    before, after = fold_steps(fold, nbytes)
    return (Phase(before + halving + doubling + after),)


def _peers(op: str, size: int, rank: int) -> set[int]:
    return doubling_peers(size, rank)


def _all_reduce_cost(p: int, n: float, a: float, b: float, g: float) -> float:
    q = 1 << (p.bit_length() - 1)
    base = 2 * lg(q) * a + 2 * n * (q - 1) / q * b + n * (q - 1) / q * g
    return base if q == p else base + 2 * a + 2 * n * b + n * g


register(
    Algorithm(
        name="rabenseifner",
        description="recursive-halving reduce-scatter (power of two); all-reduce = halving "
        "reduce-scatter + doubling all-gather (any p, folded)",
        programs={"all_reduce": all_reduce, "reduce_scatter": reduce_scatter},
        costs={
            "all_reduce": _all_reduce_cost,
            "reduce_scatter": lambda p, n, a, b, g: lg(p) * a + n * (p - 1) / p * (b + g),
        },
        requires=_requires,
        peers=_peers,
        # One partner per step; the first halving step (p'/2 away, half the data) is shown.
        pattern=doubling_pattern,
        schedule=_schedule,
    )
)
