"""Binomial trees rooted anywhere: broadcast, reduce, and all-reduce as reduce + broadcast.

Schedules (for the cost model, root 0): the broadcast reaches rank v in
round popcount(v), sent by v - lowbit(v), which posts all its sends at once;
the reduce runs round k with every rank whose lowest set bit is 2^k sending
its partial sum 2^k down, after the non-root ranks copied their buffer.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, lg, register
from kernbench.ccl.algorithms.schedule import Message, Phase, Schedule, Step, Work, then
from kernbench.ccl.comm import Comm


def broadcast(c: Comm, a: OpArgs) -> Generator:
    """ceil(lg p) rounds; in round k the ranks that have the data send it 2^k further."""
    p = c.size
    v = (c.rank - a.root) % p
    mask = 1
    while mask < p:
        if v & mask:
            incoming = yield from c.recv((v - mask + a.root) % p)
            yield from c.place(a.buf, incoming)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if v + mask < p:
            c.post_send((v + mask + a.root) % p, a.buf)
        mask >>= 1
    yield from c.drain()


def reduce(c: Comm, a: OpArgs) -> Generator:
    """The mirror of broadcast; non-root ranks accumulate in scratch, leaving ``buf`` as is."""
    p = c.size
    v = (c.rank - a.root) % p
    acc = a.buf
    if v:
        acc = c.scratch(a.buf)
        yield from c.copy(acc, a.buf)
    mask = 1
    while mask < p:
        if v & mask:
            yield from c.send((v - mask + a.root) % p, acc)
            break
        if v + mask < p:
            incoming = yield from c.recv((v + mask + a.root) % p)
            yield from c.reduce(acc, incoming)
        mask <<= 1
    yield from c.drain()


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    """Binomial reduce to rank 0, then binomial broadcast from it."""
    yield from reduce(c, OpArgs(buf=a.buf, root=0))
    yield from broadcast(c, OpArgs(buf=a.buf, root=0))


def _peers(op: str, size: int, rank: int) -> set[int]:
    peers, bit = set(), 1
    while bit < size:
        for other in (rank ^ bit, rank - bit, rank + bit):
            if 0 <= other < size and other != rank:
                peers.add(other)
        bit <<= 1
    return peers


def broadcast_steps(p: int, nbytes: float) -> tuple[Step, ...]:
    """Round j: every rank v with popcount(v) = j receives from v - lowbit(v) and places."""
    rounds: dict[int, list[int]] = {}
    for v in range(1, p):
        rounds.setdefault(v.bit_count(), []).append(v)
    return tuple(
        Step(
            tuple(Message(v - (v & -v), v, nbytes) for v in rounds[j]),
            tuple(Work(v, "place", nbytes) for v in rounds[j]),
        )
        for j in sorted(rounds)
    )


def reduce_steps(p: int, nbytes: float) -> tuple[Step, ...]:
    """The non-root ranks' copy, then round k: v with lowbit 2^k sends to v - 2^k, which reduces."""
    steps = [Step(work=tuple(Work(v, "copy", nbytes) for v in range(1, p)))] if p > 1 else []
    mask = 1
    while mask < p:
        senders = [v for v in range(mask, p, 2 * mask)]
        steps.append(
            Step(
                tuple(Message(v, v - mask, nbytes) for v in senders),
                tuple(Work(v - mask, "reduce", nbytes) for v in senders),
            )
        )
        mask <<= 1
    return tuple(steps)


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    p = len(pes)
    down: Schedule = (Phase(broadcast_steps(p, nbytes)),)
    if op == "broadcast":
        return down
    up: Schedule = (Phase(reduce_steps(p, nbytes)),)
    return up if op == "reduce" else then(up, down)


def _pattern(size: int, rank: int) -> list[int]:
    """The widest step of a tree rooted at rank 0 (a rank sends to one child at a time):
    the ranks below the step's distance to their partners that far above, which send
    back when reducing."""
    masks = [1 << k for k in range(max(size - 1, 1).bit_length())]
    mask = max(masks, key=lambda m: (min(m, size - m), -m))
    partner = rank ^ mask
    return [partner] if partner < size else []


register(
    Algorithm(
        name="binomial",
        mapping="rooted",
        description="binomial-tree broadcast and reduce; all-reduce = reduce + broadcast",
        programs={"broadcast": broadcast, "reduce": reduce, "all_reduce": all_reduce},
        costs={
            "broadcast": lambda p, n, a, b, g: lg(p) * (a + n * b),
            "reduce": lambda p, n, a, b, g: lg(p) * (a + n * (b + g)),
            "all_reduce": lambda p, n, a, b, g: 2 * lg(p) * a + 2 * n * lg(p) * b + n * lg(p) * g,
        },
        # Rooted anywhere, a rank may talk to any other.
        peers=None,
        pattern=_pattern,
        schedule=_schedule,
    )
)
