"""Ring algorithms: reduce-scatter, all-gather and all-reduce (RS then AG).

Each step a rank sends one chunk to its right neighbour and receives one from
its left.  With ``chunks`` > 1 (catalogue parameter) every chunk is cut into
that many pieces that flow through the ring independently: piece k of the next
step leaves as soon as piece k of this one has been reduced, so transfers of
one piece overlap reductions of another and large messages approach the
bandwidth bound.  Broadcast is a pipelined chain from the root.

The schedule (for the cost model) follows the programs: all-reduce is p-1
steps of "send a piece right, reduce the one from the left" and p-1 of "send,
place", all with ``chunks`` pieces in a pipeline through them.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, register
from kernbench.ccl.algorithms.schedule import Message, Phase, Schedule, Step, Work, ring_step
from kernbench.ccl.comm import Comm, Region, chunk_bounds

__all__ = ["reduce_scatter_steps", "all_gather_steps", "schedule", "chunks", "same_region"]


def _parts(c: Comm) -> int:
    """The pieces a chunk is cut into on this communicator (its ``chunks``)."""
    return chunks(c.params or {})


def _pieces(region: Region, parts: int) -> list[Region]:
    """``region`` cut into ``parts`` pieces (fewer if it has fewer elements)."""
    if parts == 1:  # the common case, asked for once per block of every rank
        return [region]
    count = region.count
    return [region.sub(a, b) for a, b in chunk_bounds(count, min(parts, max(1, count)))]


def reduce_scatter_steps(c: Comm, chunks: Sequence[Region], then_gather: bool = False) -> Generator:
    """After p-1 steps chunk ``rank`` holds the reduction; optionally go on into all-gather."""
    p, r = c.size, c.rank
    right, left = (r + 1) % p, (r - 1) % p
    parts = _parts(c)
    pieces = [_pieces(chunk, parts) for chunk in chunks]
    for piece in pieces[(r - 1) % p]:
        c.post_send(right, piece)
    for step in range(p - 1):
        target = pieces[(r - step - 2) % p]
        for piece in target:
            incoming = yield from c.recv(left)
            yield from c.reduce(piece, incoming)
            if step < p - 2 or then_gather:
                c.post_send(right, piece)  # the next step (or the gather) sends it on
    if then_gather:
        for step in range(p - 1):
            target = pieces[(r - step - 1) % p]
            for piece in target:
                incoming = yield from c.recv(left)
                yield from c.place(piece, incoming)
                if step < p - 2:
                    c.post_send(right, piece)
    yield from c.drain()


def all_gather_steps(c: Comm, chunks: Sequence[Region]) -> Generator:
    """Starting with chunk ``rank`` complete, after p-1 steps every chunk is."""
    p, r = c.size, c.rank
    right, left = (r + 1) % p, (r - 1) % p
    parts = _parts(c)
    pieces = [_pieces(chunk, parts) for chunk in chunks]
    for piece in pieces[r]:
        c.post_send(right, piece)
    for step in range(p - 1):
        for piece in pieces[(r - step - 1) % p]:
            incoming = yield from c.recv(left)
            yield from c.place(piece, incoming)
            if step < p - 2:
                c.post_send(right, piece)
    yield from c.drain()


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    if c.size == 1:
        return
    chunks = [a.buf.sub(x, y) for x, y in chunk_bounds(a.buf.count, c.size)]
    yield from reduce_scatter_steps(c, chunks, then_gather=True)


def reduce_scatter(c: Comm, a: OpArgs) -> Generator:
    """Ring reduce-scatter straight from the input blocks.

    The first step sends an input block as it is; each later step reduces the
    incoming partial sum with the local input block into a scratch block (the
    input stays untouched), and the last step reduces straight into ``out``,
    so no copy is on the critical path.  ``out`` may be the rank's own input
    block (a composition reducing in place): that block is read only by that
    last step.
    """
    p, r = c.size, c.rank
    if p == 1:
        yield from c.copy(a.out, a.blocks[0])
        return
    right, left = (r + 1) % p, (r - 1) % p
    parts = _parts(c)
    inputs = [_pieces(block, parts) for block in a.blocks]
    partial = [_pieces(c.scratch(block), parts) for block in a.blocks]
    partial[r] = _pieces(a.out, parts)
    for piece in inputs[(r - 1) % p]:
        c.post_send(right, piece)
    for step in range(p - 1):
        index = (r - step - 2) % p
        for mine, dst in zip(inputs[index], partial[index], strict=True):
            incoming = yield from c.recv(left)
            yield from c.reduce_into(dst, mine, incoming)
            if step < p - 2:
                c.post_send(right, dst)
    yield from c.drain()


def same_region(a: Region, b: Region) -> bool:
    """Whether two regions are the very same elements of the same buffer."""
    return a.buffer is b.buffer and a.start == b.start and a.stop == b.stop


def all_gather(c: Comm, a: OpArgs) -> Generator:
    """Ring all-gather; the own block leaves straight from the input while it is copied
    (no copy when the input is the own block already)."""
    p, r = c.size, c.rank
    right, left = (r + 1) % p, (r - 1) % p
    parts = _parts(c)
    if p > 1:
        for piece in _pieces(a.inp, parts):
            c.post_send(right, piece)
    if not same_region(a.blocks[r], a.inp):  # a composition gathers in place
        yield from c.copy(a.blocks[r], a.inp)
    if p == 1:
        return
    pieces = [_pieces(block, parts) for block in a.blocks]
    for step in range(p - 1):
        for piece in pieces[(r - step - 1) % p]:
            incoming = yield from c.recv(left)
            yield from c.place(piece, incoming)
            if step < p - 2:
                c.post_send(right, piece)
    yield from c.drain()


def broadcast(c: Comm, a: OpArgs) -> Generator:
    """A chain root -> root+1 -> ..., pipelined in pieces."""
    p = c.size
    v = (c.rank - a.root) % p
    nxt = (c.rank + 1) % p
    for piece in _pieces(a.buf, _parts(c)):
        if v:
            yield from c.place(piece, (yield from c.recv((c.rank - 1) % p)))
        if v < p - 1:
            c.post_send(nxt, piece)
    yield from c.drain()


def chunks(params: Mapping[str, Any]) -> int:
    """How many pieces a chunk is cut into (the ``chunks`` parameter, at least one)."""
    return max(1, int(params.get("chunks") or 1))


def schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    """The steps of the ring programs, per piece of a chunk (the root of a broadcast is rank 0)."""
    p, pieces = len(pes), chunks(params)
    if p == 1:
        return ()
    piece = nbytes / p / pieces
    # The steps of a ring send the same messages (one tuple of them: the cost model lays
    # a step's messages on the machine once for the steps that share them).
    if op == "all_reduce":
        reduce = ring_step(p, piece, "reduce")
        place = replace(reduce, work=tuple(Work(r, "place", piece) for r in range(p)))
        steps = (replace(reduce, repeat=p - 1), replace(place, repeat=p - 1))
    elif op == "reduce_scatter":
        steps = (replace(ring_step(p, piece, "reduce"), repeat=p - 1),)
    elif op == "all_gather":
        # The own block leaves while it is copied into the output.
        place = ring_step(p, piece, "place")
        first = replace(place, alongside=tuple(Work(r, "copy", piece) for r in range(p)))
        steps = (first, replace(place, repeat=p - 2))
    else:  # broadcast: a chain, one hop per step
        piece = nbytes / pieces
        steps = tuple(
            Step((Message(k - 1, k, piece),), (Work(k, "place", piece),)) for k in range(1, p)
        )
    return (Phase(tuple(s for s in steps if s.repeat), pieces),)


def _ring_peers(op: str, size: int, rank: int) -> set[int]:
    return {(rank + 1) % size, (rank - 1) % size} - {rank}


register(
    Algorithm(
        name="ring",
        pipelines=True,
        mapping="cycle",
        description="ring reduce-scatter / all-gather; all-reduce = RS + AG; chain broadcast",
        programs={
            "all_reduce": all_reduce,
            "reduce_scatter": reduce_scatter,
            "all_gather": all_gather,
            "broadcast": broadcast,
        },
        costs={
            "all_reduce": lambda p, n, a, b, g: (
                2 * (p - 1) * a + 2 * n * (p - 1) / p * b + n * (p - 1) / p * g
            ),
            "reduce_scatter": lambda p, n, a, b, g: (p - 1) * a + n * (p - 1) / p * (b + g),
            "all_gather": lambda p, n, a, b, g: (p - 1) * a + n * (p - 1) / p * b,
            "broadcast": lambda p, n, a, b, g: (p - 1) * a + n * b,
        },
        peers=_ring_peers,
        pattern=lambda size, rank: [(rank + 1) % size],
        schedule=schedule,
    )
)
