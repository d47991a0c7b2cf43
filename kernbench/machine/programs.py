"""Collective programs as recorded operations: what a backend evaluating them step-wide takes.

A collective's per-rank programs (:mod:`kernbench.ccl.algorithms`) can be run
against a recording communicator instead of the machine (:mod:`kernbench.ccl.record`):
each rank's calls become a list of operations, in program order, one list per
*strand* (a rank runs several side by side when an algorithm asks for
``concurrently``; strand 0 is the program itself).  A backend that evaluates
programs (``Machine.evaluates_programs``) turns a :class:`RecordedCollective`
into times without running the programs message by message (ADR 0015).

Operations are plain tuples, first item an :class:`Op`:

* ``(POST, peer, channel, nbytes, src_node, dst_node, comm)``: a message to rank
  ``peer`` of the lane, not waited for; ``channel`` is the communicator's tag
  path below the collective's (messages on one channel between one pair of
  ranks keep their order); ``comm`` numbers the rank's communicators (for DRAIN).
* ``(SEND, ...)``: the same, waited for until it is in the receiver's queue.
* ``(RECV, peer, channel)``: the next message from ``peer`` on ``channel``.
* ``(STREAM, loads, stores, flops)``: memory traffic ``(node, bytes)`` to and
  from the PE, overlapped with ``flops`` of vector work.
* ``(DRAIN, comm)``: wait until every message ``comm`` posted is delivered.
* ``(SPAWN, strands)`` / ``(JOIN, strands)``: start strands side by side / wait for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

__all__ = ["Op", "RecordedRank", "RecordedLane", "RecordedCollective", "shifted", "relative"]


class Op(IntEnum):
    POST = 0
    SEND = 1
    RECV = 2
    STREAM = 3
    DRAIN = 4
    SPAWN = 5
    JOIN = 6


@dataclass(slots=True)
class RecordedRank:
    """One rank's operations, one list per strand (strand 0 is the program)."""

    strands: list[list[tuple]] = field(default_factory=lambda: [[]])


@dataclass(slots=True)
class RecordedLane:
    """One instance of a collective: rank i runs on ``pes[i]``; its messages land in ``nodes[i]``.

    ``ranks`` holds every rank's operations, or, when ``period`` is set, only
    those of ranks ``0 .. period-1`` in *relative* form: the program of rank
    ``q * period + i`` is rank ``i``'s with every rank index shifted by
    ``q * period`` (mod p), peers as rank indices and every memory node as
    ``(role, rank)``, an index into ``roles`` (each a list of one node per rank).
    """

    pes: list[str]
    nodes: list[str]
    depth: int | None
    ranks: list[RecordedRank]
    period: int | None = None
    roles: tuple[list[str], ...] = ()


@dataclass(slots=True)
class RecordedCollective:
    """Every lane of one collective launch (lanes run at once and share the machine)."""

    lanes: list[RecordedLane]
    tag: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


Role = tuple[int, int]  # (role, rank): node ``roles[role][rank]`` of a lane


def shifted(
    strands: list[list[tuple]], shift: int, p: int, roles: tuple[list[str], ...] | None
) -> list[list[tuple]]:
    """Relative operations (see :class:`RecordedLane`) with every rank moved by ``shift``
    (mod ``p``): made concrete with ``roles``, or kept relative when ``roles`` is None."""

    def node(role: Role) -> str | Role:
        rank = (role[1] + shift) % p
        return (role[0], rank) if roles is None else roles[role[0]][rank]

    out = []
    for strand in strands:
        ops = []
        for op in strand:
            kind = op[0]
            if kind == Op.POST or kind == Op.SEND:
                peer = (op[1] + shift) % p
                ops.append((kind, peer, op[2], op[3], node(op[4]), node(op[5]), op[6]))
            elif kind == Op.RECV:
                ops.append((kind, (op[1] + shift) % p, op[2]))
            elif kind == Op.STREAM:
                loads = tuple((node(r), n) for r, n in op[1])
                stores = tuple((node(r), n) for r, n in op[2])
                ops.append((kind, loads, stores, op[3]))
            else:
                ops.append(op)
        out.append(ops)
    return out


def relative(strands: list[list[tuple]], where: dict[str, Role]) -> list[list[tuple]] | None:
    """Concrete operations with every memory node as its ``(role, rank)``; ``None`` if one
    is not a node of the lane."""
    out = []
    try:
        for strand in strands:
            ops = []
            for op in strand:
                kind = op[0]
                if kind == Op.POST or kind == Op.SEND:
                    ops.append((*op[:4], where[op[4]], where[op[5]], op[6]))
                elif kind == Op.STREAM:
                    loads = tuple((where[n], b) for n, b in op[1])
                    stores = tuple((where[n], b) for n, b in op[2])
                    ops.append((kind, loads, stores, op[3]))
                else:
                    ops.append(op)
            out.append(ops)
    except KeyError:
        return None
    return out
