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

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

__all__ = [
    "Op",
    "RecordedRank",
    "RecordedLane",
    "RecordedCollective",
    "RankShift",
    "shifted",
    "relative",
]


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
    With ``group`` set too, the ranks form groups of ``group`` consecutive ranks
    and the shift is by groups and within them (:meth:`RankShift.of_row`): rank
    ``g * group + i`` runs rank ``i % period``'s program with the groups moved by
    ``g`` and the ranks within each group by ``i - i % period`` (a ring inside
    every SIP and rings across SIPs: two programs, not one SIP's worth).
    """

    pes: list[str]
    nodes: list[str]
    depth: int | None
    ranks: list[RecordedRank]
    period: int | None = None
    roles: tuple[list[str], ...] = ()
    group: int | None = None

    def shift_of(self, row: int) -> RankShift:
        """What takes the recorded rank ``row % period`` to ``row`` (a period is set)."""
        p = len(self.pes)
        return RankShift.of_row(p, self.group or p, self.period or p, row)


@dataclass(slots=True)
class RecordedCollective:
    """Every lane of one collective launch (lanes run at once and share the machine)."""

    lanes: list[RecordedLane]
    tag: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


Role = tuple[int, int]  # (role, rank): node ``roles[role][rank]`` of a lane


@dataclass(frozen=True, slots=True)
class RankShift:
    """A rotation of a lane's rank indices, by groups and within them.

    The ``p`` ranks form ``p // group`` groups of ``group`` consecutive ranks; rank
    ``g * group + i`` goes to ``((g + across) % (p // group)) * group + (i + within) % group``.
    With ``group == p`` it is a plain rotation by ``within``.  ``across`` and
    ``within`` may be NumPy arrays (one shift per row, applied to an array of ranks).
    """

    p: int
    group: int
    across: Any
    within: Any

    @classmethod
    def of_row(cls, p: int, group: int, period: int, row: int) -> RankShift:
        """What takes rank ``row % period`` of a lane recorded one period long to ``row``."""
        i = row % group
        return cls(p, group, row // group, i - i % period)

    def __call__(self, rank: int) -> int:
        g = self.group
        return ((rank // g + self.across) % (self.p // g)) * g + (rank % g + self.within) % g

    def inverse(self) -> RankShift:
        return RankShift(self.p, self.group, -self.across, -self.within)


def shifted(
    strands: list[list[tuple]], move: RankShift, roles: tuple[list[str], ...] | None
) -> list[list[tuple]]:
    """Relative operations (see :class:`RecordedLane`) with every rank index moved by
    ``move``: made concrete with ``roles``, or kept relative when ``roles`` is None."""

    def node(role: Role) -> str | Role:
        rank = move(role[1])
        return (role[0], rank) if roles is None else roles[role[0]][rank]

    return _rewrite(strands, move, node, lambda name, _peer: node(name))


class _Rewritten(dict):
    """Each operation's rewrite (``made(op)``), made the first time it is asked for."""

    def __init__(self, made: Callable[[tuple], tuple]) -> None:
        super().__init__()
        self.made = made

    def __missing__(self, op: tuple) -> tuple:
        made = self[op] = self.made(op)
        return made


def _rewrite(
    strands: list[list[tuple]],
    rank: Callable[[int], int],
    node: Callable[[Any], Any],
    peer_node: Callable[[Any, int], Any],
) -> list[list[tuple]]:
    """Operations with every peer rank through ``rank``, every memory node through
    ``node`` and a message's destination through ``peer_node(node, peer)``."""

    def made(op: tuple) -> tuple:
        kind = op[0]
        if kind == Op.POST or kind == Op.SEND:
            return (kind, rank(op[1]), op[2], op[3], node(op[4]), peer_node(op[5], op[1]), op[6])
        if kind == Op.RECV:
            return (kind, rank(op[1]), op[2])
        if kind == Op.STREAM:
            loads = tuple((node(r), n) for r, n in op[1])
            stores = tuple((node(r), n) for r, n in op[2])
            return (kind, loads, stores, op[3])
        return op

    # A program repeats its operations (a ring's every step posts, receives and
    # reduces alike): each distinct one is rewritten once, and the repeats share it.
    done = _Rewritten(made)
    return [list(map(done.__getitem__, strand)) for strand in strands]


def relative(
    strands: list[list[tuple]],
    where: dict[str, Role],
    roles: tuple[list[str], ...] = (),
    rank: int | None = None,
    move: RankShift | None = None,
) -> list[list[tuple]] | None:
    """Concrete operations of rank ``rank`` with every memory node as its ``(role, rank)``;
    ``None`` if one is not a node of the lane.

    A node that is the rank's own in some role (or, for a message, the peer's) is
    named by that rank, so that shifting the ranks moves it with them even where
    ranks share the node (PEs of one cube, one HBM); any other by ``where``.
    ``move``, given, moves every rank index too: ``shifted(relative(...), move,
    None)`` in one pass, what a lane's symmetry check does to every sampled rank.
    """
    own: dict[str, Role] = {}
    if rank is not None:
        for role, names_ in enumerate(roles):
            own.setdefault(names_[rank], (role, rank))

    def mv(r: int) -> int:
        return r if move is None else move(r)

    def node(name: str) -> Role:
        role, r = own.get(name) or where[name]
        return (role, mv(r))

    def peer_node(name: str, peer: int) -> Role:
        for role, names_ in enumerate(roles):
            if names_[peer] == name:
                return (role, mv(peer))
        return node(name)

    try:
        return _rewrite(strands, mv, node, peer_node)
    except KeyError:
        return None
