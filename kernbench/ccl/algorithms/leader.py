"""Leader all-reduce: chain-reduce inside each SIP to its first member, all-reduce among
the first members, chain-broadcast back; intermediate data in the buffer memory.

Ranks are grouped by the SIP their PEs sit in.  The launcher lays every group
out from its gateway (its first member: the cube with the links to the other
SIPs) along a snake through its cubes (:mod:`kernbench.ccl.mapping`), so each
hop of a chain crosses one cube link.  Member v of a group of k:

1. chain reduce: member k-1 sends its input; member v (0 < v < k-1) adds its
   input to the sum that arrives from v+1 and sends the result on to v-1; the
   first member adds its input into an accumulator;
2. the first members all-reduce their accumulators with the ring (segments
   alternate the ring's direction, so both directions of the links between
   SIPs carry them);
3. chain broadcast: the first member sends the result to member 1, which
   passes it on to member 2, and so on; every member writes it to its buffer.

Nothing intermediate goes through the rank's own memory: partial sums,
accumulators and forwarded pieces sit in the memory its messages land in (cube
SRAM with ``buffer: sram``), so that memory sees the rank's input read once
and its result written once, and on multi_sip at cube level the cube links
carry 120 n bytes (n the buffer) against the flat ring's 126 n.

The buffer flows through in pieces of at most ``piece_bytes``; the chains run
piece by piece without pause, the first members take ``segment_pieces`` pieces
at a time (a segment) and work on three segments at once: the chain reduces
into one accumulator while the next one is all-reduced across and the one
before is broadcast.  What a rank keeps in its buffer memory is bounded by
construction (:class:`LeaderParams`).  Groups may differ in size; a group of
one adds its input into its accumulator itself.  With every group of one the
program is the ring.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from pydantic import Field

from kernbench.ccl.algorithms import Algorithm, OpArgs, Params, register, ring
from kernbench.ccl.algorithms.hierarchical import grouping, placement_key
from kernbench.ccl.algorithms.schedule import (
    Message,
    Phase,
    Schedule,
    Step,
    Work,
    in_buffer,
    relabel,
    together,
)
from kernbench.ccl.comm import Comm, Region, chunk_bounds

__all__ = ["ACCUMULATORS", "LeaderParams", "scratch_bytes"]

KiB = 1024

# Segments a first member holds at once: reduced into, all-reduced across, broadcast.
ACCUMULATORS = 3


class LeaderParams(Params):
    """How the buffer flows through; they bound what a rank keeps in its buffer memory
    (:func:`scratch_bytes`)."""

    piece_bytes: int = Field(
        256 * KiB,
        strict=True,
        ge=4,
        le=4096 * KiB,
        description="bytes: the largest piece that flows through the chains",
    )
    segment_pieces: int = Field(
        8, strict=True, ge=1, le=64, description="pieces the first members all-reduce at once"
    )
    slots: int = Field(
        2,
        strict=True,
        ge=1,
        le=8,
        description="piece slots per chain (reduce, broadcast) on every other member",
    )


def scratch_bytes(params: LeaderParams) -> tuple[int, int]:
    """The working space a first member and any other member keep in their buffer memory
    (the messages waiting in their queues aside: ``queue_depth`` per channel)."""
    first = ACCUMULATORS * params.segment_pieces * params.piece_bytes
    return first, 2 * params.slots * params.piece_bytes


def _settings(params: Mapping[str, Any]) -> LeaderParams:
    fields = LeaderParams.model_fields
    return LeaderParams(**{k: v for k, v in params.items() if k in fields and v is not None})


_SIP = placement_key("sip")


def _segments(buf: Region, s: LeaderParams) -> list[list[Region]]:
    """The buffer cut into pieces of at most ``piece_bytes``, grouped into segments."""
    per_piece = max(1, s.piece_bytes // buf.buffer.dtype.itemsize)
    bounds = chunk_bounds(buf.count, max(1, math.ceil(buf.count / per_piece)))
    pieces = [buf.sub(a, b) for a, b in bounds]
    n = s.segment_pieces
    return [pieces[i : i + n] for i in range(0, len(pieces), n)]


def _slot_comms(g: Comm, tag: str, count: int) -> list[Comm]:
    """A communicator per slot: draining one waits for its slot's last send only."""
    return [g.sub(list(range(g.size)), (tag, i)) for i in range(count)]


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    if c.size == 1:
        return
    labels, groups = grouping(tuple(c.pes), _SIP)
    if len(groups) == c.size:  # every group of one: only the ring across
        yield from ring.all_reduce(c, a)
        return
    s = _settings(c.params or {})
    g = c.sub(groups[labels[c.rank]], "group")
    segments = _segments(a.buf, s)
    if g.rank:
        yield from g.concurrently([_chain_reduce(g, segments, s), _chain_broadcast(g, segments, s)])
    else:
        firsts = [members[0] for members in groups.values()]
        yield from _first_member(c, g, firsts, segments, s)


def _chain_reduce(g: Comm, segments: Sequence[Sequence[Region]], s: LeaderParams) -> Generator:
    """Member v > 0 of the chain reduce toward member 0."""
    v, k = g.rank, g.size
    comms = _slot_comms(g, "up", s.slots)
    pieces = [piece for segment in segments for piece in segment]
    if v == k - 1:  # the chain's start: its input as it is
        for j, piece in enumerate(pieces):
            comms[j % s.slots].post_send(v - 1, piece)
    else:
        largest = max(piece.count for piece in pieces)
        slots = [g.scratch(pieces[0], largest, g.nodes[g.rank]) for _ in range(s.slots)]
        for j, piece in enumerate(pieces):
            comm = comms[j % s.slots]
            yield from comm.drain()  # the slot's last sum has been taken
            incoming = yield from comm.recv(v + 1)
            total = slots[j % s.slots].sub(0, piece.count)
            yield from comm.reduce_into(total, piece, incoming)
            comm.post_send(v - 1, total)
    for comm in comms:
        yield from comm.drain()


def _chain_broadcast(g: Comm, segments: Sequence[Sequence[Region]], s: LeaderParams) -> Generator:
    """Member v > 0 of the chain broadcast from member 0."""
    v, k = g.rank, g.size
    comms = _slot_comms(g, "down", s.slots)
    pieces = [piece for segment in segments for piece in segment]
    largest = max(piece.count for piece in pieces)
    slots = (
        [g.scratch(pieces[0], largest, g.nodes[g.rank]) for _ in range(s.slots)]
        if v < k - 1
        else []
    )
    for j, piece in enumerate(pieces):
        comm = comms[j % s.slots]
        if v == k - 1:  # the chain's end: straight to the output
            yield from comm.place(piece, (yield from comm.recv(v - 1)))
            continue
        yield from comm.drain()  # the slot's last piece has been passed on
        incoming = yield from comm.recv(v - 1)
        result = slots[j % s.slots].sub(0, piece.count)
        yield from comm.place(result, incoming)  # it landed there: free
        comm.post_send(v + 1, result)
        yield from comm.copy(piece, result)
    for comm in comms:
        yield from comm.drain()


def _first_member(
    c: Comm,
    g: Comm,
    firsts: list[int],
    segments: Sequence[Sequence[Region]],
    s: LeaderParams,
) -> Generator:
    """Accumulate the chain's sums, all-reduce them across, broadcast them: three
    segments at a time, one in each stage."""
    up, down = _slot_comms(g, "up", s.slots), _slot_comms(g, "down", s.slots)
    longest = max(sum(piece.count for piece in segment) for segment in segments)
    accumulators = [
        g.scratch(segments[0][0], longest, g.nodes[g.rank]) for _ in range(ACCUMULATORS)
    ]
    first_piece = [0]
    for segment in segments:
        first_piece.append(first_piece[-1] + len(segment))

    def held(t: int) -> list[Region]:
        """Segment t's pieces in its accumulator."""
        acc, out, at = accumulators[t % ACCUMULATORS], [], 0
        for piece in segments[t]:
            out.append(acc.sub(at, at + piece.count))
            at += piece.count
        return out

    def reduce(t: int) -> Generator:
        for i, (piece, total) in enumerate(zip(segments[t], held(t), strict=True)):
            if g.size == 1:
                yield from g.copy(total, piece)
                continue
            comm = up[(first_piece[t] + i) % s.slots]
            yield from comm.reduce_into(total, piece, (yield from comm.recv(1)))

    def across(t: int) -> Generator:
        if len(firsts) == 1:
            return
        ranks = firsts[::-1] if t % 2 and len(firsts) > 2 else firsts
        count = sum(piece.count for piece in segments[t])
        acc = accumulators[t % ACCUMULATORS].sub(0, count)
        yield from ring.all_reduce(c.sub(ranks, ("across", t)), OpArgs(buf=acc))

    def broadcast(t: int) -> Generator:
        for i, (piece, result) in enumerate(zip(segments[t], held(t), strict=True)):
            if g.size > 1:
                down[(first_piece[t] + i) % s.slots].post_send(1, result)
            yield from g.copy(piece, result)
        for comm in down:
            yield from comm.drain()

    # Stage by stage: reduce t+1, all-reduce t across, broadcast t-1; an
    # accumulator is reduced into again only once its broadcast has been taken.
    count = len(segments)
    for t in range(-1, count + 1):
        bodies = []
        if t + 1 < count:
            bodies.append(reduce(t + 1))
        if 0 <= t < count:
            bodies.append(across(t))
        if 1 <= t:
            bodies.append(broadcast(t - 1))
        yield from c.concurrently(bodies)


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    """One pipeline of the buffer's pieces: the chain reduce's hops, the ring across the
    first members (on a piece, in their buffer memory), the chain broadcast's hops."""
    if len(pes) == 1:
        return ()
    labels, groups = grouping(tuple(pes), _SIP)
    if len(groups) == len(pes):
        return ring.schedule("all_reduce", pes, nbytes, {})
    members = list(groups.values())
    s = _settings(params)
    pieces = max(1, math.ceil(nbytes / s.piece_bytes))
    b = nbytes / pieces
    steps = []
    longest = max(len(group) for group in members)
    for v in range(longest - 1, 0, -1):  # v sends its sum to v - 1, which adds its input
        chains = [group for group in members if v < len(group)]
        steps.append(
            Step(
                tuple(
                    Message(
                        group[v],
                        group[v - 1],
                        b,
                        "up",
                        source="memory" if v == len(group) - 1 else "buffer",
                    )
                    for group in chains
                ),
                tuple(Work(group[v - 1], "reduce", b, into="buffer") for group in chains),
            )
        )
    alone = [group[0] for group in members if len(group) == 1]
    if alone:
        steps.insert(0, Step(work=tuple(Work(r, "copy", b, into="buffer") for r in alone)))
    firsts = [group[0] for group in members]
    if len(firsts) > 1:
        # Segments alternate the ring's direction: on average half of each piece each way.
        ways = [firsts, firsts[::-1]] if len(firsts) > 2 else [firsts]
        share = b / len(ways)
        across = together(
            [
                relabel(ring.schedule("all_reduce", [pes[r] for r in way], share, {}), way, i)
                for i, way in enumerate(ways)
            ]
        )
        for phase in relabel(in_buffer(across), list(range(len(pes))), "across"):
            steps.extend(phase.steps)
    # v - 1 passes the result on from its buffer and, alongside, writes it out; the
    # chain's end takes it straight to its memory.
    for v in range(1, longest):
        chains = [g for g in members if v < len(g)]
        steps.append(
            Step(
                tuple(Message(g[v - 1], g[v], b, "down", source="buffer") for g in chains),
                tuple(Work(g[v], "place", b) for g in chains if v == len(g) - 1),
                tuple(Work(g[v - 1], "copy", b, local="buffer") for g in chains),
            )
        )
    if alone:
        steps.append(Step(work=tuple(Work(r, "copy", b, local="buffer") for r in alone)))
    return (Phase(tuple(steps), pieces),)


def _peers_on(op: str, pes: Sequence[str], params: Mapping[str, Any]) -> list[set[int]]:
    """Chain neighbours inside each group; ring neighbours among the first members."""
    labels, groups = grouping(tuple(pes), _SIP)
    out: list[set[int]] = [set() for _ in pes]
    for group in groups.values():
        for a, b in zip(group, group[1:], strict=False):
            out[a].add(b)
            out[b].add(a)
    firsts = [group[0] for group in groups.values()]
    for i, r in enumerate(firsts):
        out[r].update({firsts[i - 1], firsts[(i + 1) % len(firsts)]} - {r})
    return out


register(
    Algorithm(
        name="leader",
        mapping="cycle",
        description="chain-reduce to each SIP's gateway, ring all-reduce across, chain-broadcast",
        programs={"all_reduce": all_reduce},
        params=LeaderParams,
        schedule=_schedule,
        peers_on=_peers_on,
    )
)
