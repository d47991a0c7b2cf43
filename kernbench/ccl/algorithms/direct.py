"""Direct algorithms: every message goes straight to its destination.

Gather, scatter, all-to-all (sends posted to rank+1, rank+2, … so no rank is
flooded first), a one-step all-gather for small messages, and the natural
reduce-scatter and all-reduce of a fully connected machine:

* reduce-scatter: the data is cut into p blocks as
  :func:`~kernbench.ccl.comm.chunk_bounds` cuts it; every rank sends block j
  to rank j, all at once, and rank j reduces the p-1 incoming blocks into its
  own in a fixed order, from rank j-1 first, then j-2, … (each sender posts
  to rank+1 first), so the result's bits do not depend on arrival times;
* all-reduce: that reduce-scatter, then every rank sends its reduced block to
  every other rank (a direct all-gather), so every rank ends with the same bits.

With ``chunks`` > 1 (catalogue parameter) every block is cut into that many
pieces (fewer when the smallest block has fewer elements): a rank reduces
piece k from all its peers and sends it on to all of them while the later
pieces are still in flight, so transfers, reductions and the all-gather
overlap.

Costs (p ranks, n bytes, one chunk, every pair of ranks on a link of its own):
the p-1 messages of a step travel at once, one α and n/p·β for all of them;
the p-1 reductions run one after another on the receiving PE:

* all-reduce: 2α + 2n/p·β + n(p-1)/p·γ
* reduce-scatter: α + n/p·β + n(p-1)/p·γ

On machines where pairs share links, β is what the busiest link leaves each
message (the tuner's ``link_costs`` raises it so).  The gather, scatter,
all-to-all and all-gather costs count a rank's p-1 messages one after another.

In the schedule each op is one phase.  Gather, scatter, all-to-all and
all-gather are one step: all their messages in flight together (sharing
their memory ports and links), the own block copied alongside, the messages
placed after.  Reduce-scatter is one step of messages reduced after they
arrive; all-reduce is that step and then one of messages placed; their
``chunks`` pieces flow through the phase as a pipeline.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, register
from kernbench.ccl.algorithms.ring import chunks
from kernbench.ccl.algorithms.schedule import Message, Phase, Schedule, Step, Work, WorkKind
from kernbench.ccl.comm import Comm, Region, chunk_bounds

__all__ = [
    "gather",
    "scatter",
    "all_to_all",
    "all_gather",
    "reduce_scatter",
    "all_reduce",
    "schedule",
]


def gather(c: Comm, a: OpArgs) -> Generator:
    if c.rank != a.root:
        yield from c.send(a.root, a.inp)
        return
    yield from c.copy(a.blocks[a.root], a.inp)
    for offset in range(1, c.size):
        peer = (a.root + offset) % c.size
        yield from c.place(a.blocks[peer], (yield from c.recv(peer)))


def scatter(c: Comm, a: OpArgs) -> Generator:
    if c.rank == a.root:
        for offset in range(1, c.size):
            peer = (a.root + offset) % c.size
            c.post_send(peer, a.blocks[peer])
        yield from c.copy(a.out, a.blocks[a.root])
        yield from c.drain()
        return
    yield from c.place(a.out, (yield from c.recv(a.root)))


def all_to_all(c: Comm, a: OpArgs) -> Generator:
    p, r = c.size, c.rank
    for offset in range(1, p):
        c.post_send((r + offset) % p, a.sends[(r + offset) % p])
    yield from c.copy(a.recvs[r], a.sends[r])
    for offset in range(1, p):
        peer = (r - offset) % p
        yield from c.place(a.recvs[peer], (yield from c.recv(peer)))
    yield from c.drain()


def all_gather(c: Comm, a: OpArgs) -> Generator:
    """Every rank sends its block to every other rank at once: one step, p-1 messages."""
    return all_to_all(c, OpArgs(sends=(a.inp,) * c.size, recvs=a.blocks))


def _cut(c: Comm, blocks: Sequence[Region]) -> list[list[Region]]:
    """Every block cut into the same number of pieces: the configuration's ``chunks``, or
    fewer when the smallest block has fewer elements (blocks of a ragged count differ
    by one element, so every rank and every channel agree on how many pieces there are)."""
    smallest = min(block.count for block in blocks)
    parts = min(chunks(c.params or {}), max(1, smallest))
    return [[block.sub(x, y) for x, y in chunk_bounds(block.count, parts)] for block in blocks]


def _scatter_blocks(c: Comm, blocks: Sequence[Sequence[Region]]) -> None:
    """Post every block but the own one to its rank: piece by piece, rank+1, rank+2, … each."""
    p, r = c.size, c.rank
    for k in range(len(blocks[r])):
        for offset in range(1, p):
            c.post_send((r + offset) % p, blocks[(r + offset) % p][k])


def _reduce_piece(c: Comm, out: Region, first: Region) -> Generator:
    """``out = first op (what ranks r-1, r-2, … send)``, reducing each as it arrives."""
    p, r = c.size, c.rank
    for offset in range(1, p):
        incoming = yield from c.recv((r - offset) % p)
        if offset == 1 and first is not out:
            yield from c.reduce_into(out, first, incoming)
        else:
            yield from c.reduce(out, incoming)


def reduce_scatter(c: Comm, a: OpArgs) -> Generator:
    """Block j of every rank straight to rank j, reduced there into ``out``.

    The first incoming block is reduced with the own input block straight into
    ``out`` and the others into ``out``: the inputs stay untouched and no copy
    is on the critical path.  Blocks may differ in size by one element (a
    composition's ragged parts); ``out`` has the own block's size.
    """
    if c.size == 1:
        yield from c.copy(a.out, a.blocks[0])
        return
    inputs = _cut(c, a.blocks)
    _scatter_blocks(c, inputs)
    outs = [a.out.sub(x, y) for x, y in chunk_bounds(a.out.count, len(inputs[c.rank]))]
    for mine, out in zip(inputs[c.rank], outs, strict=True):
        yield from _reduce_piece(c, out, mine)
    yield from c.drain()


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    """Direct reduce-scatter into the own block of ``buf``, then a direct all-gather of it.

    Each piece of the own block goes to every other rank as soon as it is
    reduced; a rank's reduce-scatter messages to a peer were posted first, so
    on every channel they arrive before its all-gather messages.  A block is
    overwritten by the all-gather only after its owner has reduced it, so
    after it has received (and read) what this rank sent of it.
    """
    p, r = c.size, c.rank
    if p == 1:
        return
    blocks = _cut(c, [a.buf.sub(x, y) for x, y in chunk_bounds(a.buf.count, p)])
    _scatter_blocks(c, blocks)
    for piece in blocks[r]:
        yield from _reduce_piece(c, piece, piece)
        for offset in range(1, p):
            c.post_send((r + offset) % p, piece)
    for k in range(len(blocks[r])):
        for offset in range(1, p):
            peer = (r - offset) % p
            yield from c.place(blocks[peer][k], (yield from c.recv(peer)))
    yield from c.drain()


def _direct_step(p: int, block: float, work: WorkKind) -> Step:
    """Every rank sends ``block`` bytes to every other at once; each receiver then does ``work``
    on them, in the order it takes them (from rank r-1 first)."""
    pairs = [(r, (r + k) % p) for k in range(1, p) for r in range(p)]
    return Step(
        tuple(Message(a, b, block) for a, b in pairs),
        tuple(Work(b, work, block) for _, b in pairs),
    )


def schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    """The steps of the programs (root 0 for gather and scatter).

    ``nbytes`` is p blocks: the buffer of an all-reduce, the input of a
    reduce-scatter, one rank's sends of an all-to-all.
    """
    p = len(pes)
    block = nbytes / p
    if op in ("all_reduce", "reduce_scatter"):
        if p == 1:
            return ()
        pieces = chunks(params)
        piece = block / pieces
        steps = [_direct_step(p, piece, "reduce")]
        if op == "all_reduce":
            steps.append(_direct_step(p, piece, "place"))
        return (Phase(tuple(steps), pieces),)
    if op == "gather":
        pairs = [(r, 0) for r in range(1, p)]
        copies = [0]
    elif op == "scatter":
        pairs = [(0, r) for r in range(1, p)]
        copies = [0]
    else:  # all_to_all, all_gather
        pairs = [(r, (r + k) % p) for r in range(p) for k in range(1, p)]
        copies = list(range(p))
    step = Step(
        tuple(Message(a, b, block) for a, b in pairs),
        tuple(Work(b, "place", block) for _, b in pairs),
        tuple(Work(r, "copy", block) for r in copies),
    )
    return (Phase((step,)),)


def _serial(p: int, n: float, a: float, b: float, g: float) -> float:
    """p-1 messages of n/p bytes leave one port one after another."""
    return (p - 1) * (a + n / p * b)


register(
    Algorithm(
        name="direct",
        pipelines=True,
        description="direct gather, scatter, all-to-all and one-step all-gather; "
        "reduce-scatter and all-reduce by direct sends",
        programs={
            "all_reduce": all_reduce,
            "reduce_scatter": reduce_scatter,
            "gather": gather,
            "scatter": scatter,
            "all_to_all": all_to_all,
            "all_gather": all_gather,
        },
        costs={
            "all_reduce": lambda p, n, a, b, g: 2 * a + 2 * n / p * b + n * (p - 1) / p * g,
            "reduce_scatter": lambda p, n, a, b, g: a + n / p * b + n * (p - 1) / p * g,
            "gather": _serial,
            "scatter": _serial,
            "all_to_all": _serial,
            "all_gather": _serial,
        },
        schedule=schedule,
    )
)
