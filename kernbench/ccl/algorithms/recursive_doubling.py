"""Recursive doubling: all-reduce (any p) and all-gather (power-of-two p).

All-reduce: in step k every rank exchanges its whole buffer with rank XOR 2^k
and reduces, lg p steps.  For a p that is not a power of two the ranks fold
first (MPICH): with p' the largest power of two below p and r = p - p', the
first 2r ranks pair up, each even one sends its buffer to the odd one above it
and sits out; the p' remaining ranks (the odd ones of the first 2r, then all
the rest) run the doubling; the odd ranks then send the result back to their
even partners.

All-gather: in step k every rank sends the 2^k blocks it has to rank XOR 2^k
and receives as many; it needs a power-of-two p.  Blocks that are not
contiguous in memory (``all_gather`` into a list of tensors) are packed into
one message.

Costs (p ranks, n bytes; reference/collective-costs.md):

* all-reduce: lg p·α + n·lg p·β + n·lg p·γ; when p is not a power of two,
  with s = ⌊lg p⌋: (s+2)·α + (s+2)·n·β + (s+1)·n·γ (the fold and the unfold)
* all-gather: lg p·α + n(p-1)/p·β

The schedule has one step per exchange (the fold and the unfold are steps of
their own): all ranks of the power-of-two group exchange with their partner
at once, then reduce (all-reduce) or place (all-gather).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

import numpy as np

from kernbench.ccl.algorithms import Algorithm, OpArgs, lg, power_of_two, register
from kernbench.ccl.algorithms.schedule import Message, Phase, Schedule, Step, Work
from kernbench.ccl.comm import Comm, Region

__all__ = [
    "Fold",
    "span",
    "post_blocks",
    "place_blocks",
    "fold_in",
    "fold_out",
    "doubling_peers",
    "doubling_pattern",
    "exchange_step",
    "fold_steps",
]


# -- messages made of several blocks ---------------------------------------------------
def span(blocks: Sequence[Region]) -> Region | None:
    """One region covering ``blocks`` when they lie back to back in one buffer, else None."""
    first = blocks[0]
    for a, b in zip(blocks, blocks[1:], strict=False):
        if b.buffer is not first.buffer or b.start != a.stop:
            return None
    return Region(first.buffer, first.start, blocks[-1].stop)


def post_blocks(c: Comm, peer: int, blocks: Sequence[Region]) -> Generator:
    """Post ``blocks`` (final values) to ``peer`` as one message, packing them if scattered."""
    region = span(blocks)
    if region is None:
        region = c.scratch(blocks[0], sum(block.count for block in blocks))
        start = 0
        for block in blocks:
            yield from c.copy(region.sub(start, start + block.count), block)
            start += block.count
    c.post_send(peer, region)


def place_blocks(c: Comm, blocks: Sequence[Region], incoming: np.ndarray | None) -> Generator:
    """Put a message made by :func:`post_blocks` into ``blocks``."""
    region = span(blocks)
    if region is not None:
        yield from c.place(region, incoming)
        return
    start = 0
    for block in blocks:
        part = None if incoming is None else incoming[start : start + block.count]
        yield from c.place(block, part)
        start += block.count


# -- folding a non-power-of-two group (MPICH) ------------------------------------------
class Fold:
    """The power-of-two group left after the first 2r ranks pair up (r = p - p')."""

    def __init__(self, size: int) -> None:
        self.pof2 = 1 << (size.bit_length() - 1)
        self.rest = size - self.pof2

    def new_rank(self, rank: int) -> int:
        """Rank in the power-of-two group, or -1 for a rank that sits out."""
        if rank < 2 * self.rest:
            return rank // 2 if rank % 2 else -1
        return rank - self.rest

    def old_rank(self, new: int) -> int:
        return 2 * new + 1 if new < self.rest else new + self.rest


def fold_in(c: Comm, fold: Fold, buf: Region) -> Generator:
    """Pair up the first 2r ranks (even sends, odd reduces); returns the new rank or -1."""
    new = fold.new_rank(c.rank)
    if c.rank < 2 * fold.rest:
        if new < 0:
            yield from c.send(c.rank + 1, buf)
        else:
            yield from c.reduce(buf, (yield from c.recv(c.rank - 1)))
    return new


def fold_out(c: Comm, fold: Fold, buf: Region) -> Generator:
    """Give the result back to the ranks that sat out (posted: drain after)."""
    if c.rank < 2 * fold.rest:
        if c.rank % 2:
            c.post_send(c.rank - 1, buf)
        else:
            yield from c.place(buf, (yield from c.recv(c.rank + 1)))


def doubling_peers(size: int, rank: int) -> set[int]:
    """The ranks a folded recursive-doubling (or -halving) exchange talks to."""
    fold = Fold(size)
    peers = set()
    if rank < 2 * fold.rest:
        peers.add(rank ^ 1)
    new = fold.new_rank(rank)
    if new >= 0:
        distance = 1
        while distance < fold.pof2:
            peers.add(fold.old_rank(new ^ distance))
            distance <<= 1
    return peers - {rank}


# -- schedules ---------------------------------------------------------------------------
def exchange_step(fold: Fold, distance: int, nbytes: float, work: str, drain: bool = False) -> Step:
    """Every rank of the folded group exchanges ``nbytes`` with new rank XOR ``distance``
    (``drain``: and waits for its own message to arrive before its work)."""
    pairs = [(fold.old_rank(v), fold.old_rank(v ^ distance)) for v in range(fold.pof2)]
    return Step(
        tuple(Message(a, b, nbytes) for a, b in pairs),
        tuple(Work(b, work, nbytes) for _, b in pairs),  # type: ignore[arg-type]
        drain=drain,
    )


def fold_steps(fold: Fold, nbytes: float) -> tuple[tuple[Step, ...], tuple[Step, ...]]:
    """(the fold: even ranks of the first 2r send to the odd ones, which reduce;
    the unfold: the odd ones send the result back)."""
    if not fold.rest:
        return (), ()
    pairs = [(2 * i, 2 * i + 1) for i in range(fold.rest)]
    fold_in_step = Step(
        tuple(Message(a, b, nbytes) for a, b in pairs),
        tuple(Work(b, "reduce", nbytes) for _, b in pairs),
    )
    fold_out_step = Step(
        tuple(Message(b, a, nbytes) for a, b in pairs),
        tuple(Work(a, "place", nbytes) for a, _ in pairs),
    )
    return (fold_in_step,), (fold_out_step,)


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    p = len(pes)
    fold = Fold(p)
    distances = [1 << k for k in range(fold.pof2.bit_length() - 1)]
    if op == "all_gather":  # a power of two: no fold; d blocks go in the exchange at distance d
        steps = [exchange_step(fold, d, d * nbytes / p, "place") for d in distances]
        if steps:  # the own block leaves while it is copied into the output
            steps[0] = Step(
                steps[0].messages,
                steps[0].work,
                tuple(Work(r, "copy", nbytes / p) for r in range(p)),
            )
        return (Phase(tuple(steps)),)
    before, after = fold_steps(fold, nbytes)
    # The program drains its send before it reduces into the buffer the send reads.
    middle = tuple(exchange_step(fold, d, nbytes, "reduce", drain=True) for d in distances)
    return (Phase(before + middle + after),)


# -- the programs ----------------------------------------------------------------------
def all_reduce(c: Comm, a: OpArgs) -> Generator:
    fold = Fold(c.size)
    new = yield from fold_in(c, fold, a.buf)
    if new >= 0:
        distance = 1
        while distance < fold.pof2:
            peer = fold.old_rank(new ^ distance)
            c.post_send(peer, a.buf)
            incoming = yield from c.recv(peer)
            yield from c.drain()  # the send has read buf before buf changes
            yield from c.reduce(a.buf, incoming)
            distance <<= 1
    yield from fold_out(c, fold, a.buf)
    yield from c.drain()


def all_gather(c: Comm, a: OpArgs) -> Generator:
    """The own block leaves straight from the input in the first step while it is copied."""
    p, r = c.size, c.rank
    distance = 1
    while distance < p:
        peer = r ^ distance
        mine = (r // distance) * distance
        theirs = (peer // distance) * distance
        if distance == 1:
            c.post_send(peer, a.inp)
            yield from c.copy(a.blocks[r], a.inp)
        else:
            yield from post_blocks(c, peer, a.blocks[mine : mine + distance])
        incoming = yield from c.recv(peer)
        yield from place_blocks(c, a.blocks[theirs : theirs + distance], incoming)
        distance <<= 1
    if p == 1:
        yield from c.copy(a.blocks[r], a.inp)
    yield from c.drain()


def _requires(op: str, size: int) -> str | None:
    return power_of_two(op, size) if op == "all_gather" else None


def _peers(op: str, size: int, rank: int) -> set[int]:
    return doubling_peers(size, rank)


def _all_reduce_cost(p: int, n: float, a: float, b: float, g: float) -> float:
    steps = p.bit_length() - 1
    if p & (p - 1):
        return (steps + 2) * (a + n * b) + (steps + 1) * n * g
    return steps * (a + n * b + n * g)


def doubling_pattern(size: int, rank: int) -> list[int]:
    """One partner per step; the step across the widest distance (p'/2) is the one shown."""
    fold = Fold(size)
    new = fold.new_rank(rank)
    if new < 0 or fold.pof2 < 2:
        return [rank ^ 1] if rank ^ 1 < size else []
    return [fold.old_rank(new ^ (fold.pof2 // 2))]


register(
    Algorithm(
        name="recursive_doubling",
        description="recursive-doubling all-reduce (any p, folded) and all-gather (power of two)",
        programs={"all_reduce": all_reduce, "all_gather": all_gather},
        costs={
            "all_reduce": _all_reduce_cost,
            "all_gather": lambda p, n, a, b, g: lg(p) * a + n * (p - 1) / p * b,
        },
        requires=_requires,
        peers=_peers,
        pattern=doubling_pattern,
        schedule=_schedule,
    )
)
