"""Recorded programs as columns: one operation of every rank, as arrays (ADR 0015).

A collective's lanes (:class:`~kernbench.machine.programs.RecordedLane`) become
one table of rows (rank ``i`` of lane ``l`` is row ``base[l] + i``) and, per
strand, a list of :class:`~kernbench.fast.tables.Column` s.  The programs
must be *aligned*: operation k of a strand has the same kind, channel,
communicator and strands on every row; otherwise :func:`build` gives ``None``
and the backend runs the programs message by message.

A lane recorded one period long is expanded here: its arrays are the
period's, tiled and shifted (by groups and within them, when the lane says
so).  Arrays that depend only on the relative operation (routes, sizes,
stream times) are built once per distinct pattern and shared between
columns, so the evaluator can recognise a repeated step by the identity of
its arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from kernbench.fast.tables import MESSAGES, Column, Tables
from kernbench.machine.programs import Op, RankShift, RecordedLane

__all__ = ["build"]


class _Memo:
    """Arrays by the pattern they were made from (one object per pattern)."""

    def __init__(self) -> None:
        self._arrays: dict[Hashable, np.ndarray] = {}
        self.flows: dict[Hashable, tuple] = {}  # a stream's flows, one tuple per pattern

    def get(self, key: Hashable, make: Callable[[], np.ndarray]) -> np.ndarray:
        found = self._arrays.get(key)
        if found is None:
            found = self._arrays[key] = make()
            found.setflags(write=False)
        return found


def _signature(op: tuple) -> tuple:
    """What must be equal on every row for operations to form a column."""
    kind = op[0]
    if kind in MESSAGES:
        return (kind, op[2], op[6])
    if kind == Op.RECV:
        return (kind, op[2])
    if kind == Op.DRAIN:
        return (kind, op[1])
    if kind in (Op.SPAWN, Op.JOIN):
        return (kind, op[1])
    return (kind,)


class _Lane:
    """One lane's rows: every rank's operations, or one period of them."""

    def __init__(self, lane: RecordedLane, base: int, tables: Tables, memo: _Memo) -> None:
        self.lane = lane
        self.base = base
        self.p = len(lane.pes)
        self.period = lane.period or self.p
        self.group = lane.group or self.p
        self.tables = tables
        self.memo = memo
        # Every row's shift (lane.shift_of(row)) at once, for arrays of ranks.
        rows = np.arange(self.p, dtype=np.intp)
        inner = rows % self.group
        self.moves = RankShift(self.p, self.group, rows // self.group, inner - inner % self.period)

    def strands(self) -> list[list[tuple]]:
        return [rank.strands for rank in self.lane.ranks]

    def _node(self, ref, row: int) -> str:
        """A recorded node of the period's rank ``row % period``, for ``row``."""
        if self.lane.period is None:
            return ref
        role, rank = ref
        return self.lane.roles[role][self.lane.shift_of(row)(rank)]

    def _tile(self, values: list) -> np.ndarray:
        return np.tile(np.asarray(values), self.p // self.period)

    def peers(self, ops: list[tuple]) -> np.ndarray:
        rel = tuple(op[1] for op in ops)
        if self.lane.period is None:
            return self.memo.get(("peer", self.base, rel), lambda: np.asarray(rel) + self.base)

        return self.memo.get(
            ("peer", self.base, self.p, self.period, self.group, rel),
            lambda: self.moves(self._tile(list(rel))) + self.base,
        )

    def sizes(self, ops: list[tuple]) -> np.ndarray:
        rel = tuple(op[3] for op in ops)
        return self.memo.get(
            ("n", self.p, self.period, rel), lambda: self._tile(list(rel)).astype(np.int64)
        )

    def routes(self, ops: list[tuple]) -> np.ndarray:
        rel = tuple((op[4], op[5]) for op in ops)

        def make() -> np.ndarray:
            route_of = self.tables.route_of
            period = self.period
            return np.fromiter(
                (
                    route_of(self._node(rel[r % period][0], r), self._node(rel[r % period][1], r))
                    for r in range(self.p)
                ),
                dtype=np.intp,
                count=self.p,
            )

        return self.memo.get(("route", id(self.lane), rel), make)

    def streams(self, ops: list[tuple]) -> tuple[tuple, np.ndarray, tuple]:
        """The traffic pattern, vector work, and the flows (see :meth:`stream_flows`)."""
        rel = tuple((op[1], op[2]) for op in ops)
        flops = self.memo.get(
            ("flops", self.p, self.period, tuple(op[3] for op in ops)),
            lambda: self._tile([op[3] for op in ops]).astype(np.int64),
        )
        return rel, flops, self.stream_flows(rel)

    def stream_flows(self, rel: tuple) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Per flow: (route id, bytes) for every row; ``()`` if the rows' shapes differ."""
        shapes = {
            (
                tuple(n for _, n in loads if n),
                tuple(n for _, n in stores if n),
            )
            for loads, stores in rel
        }
        if len(shapes) != 1:
            return ()
        loads_n, stores_n = shapes.pop()

        def make(j: int) -> tuple[np.ndarray, np.ndarray]:
            route_of, pes, period = self.tables.route_of, self.lane.pes, self.period
            out = np.empty(self.p, dtype=np.intp)
            for r in range(self.p):
                loads, stores = rel[r % period]
                moved = [(node, True) for node, n in loads if n] + [
                    (node, False) for node, n in stores if n
                ]
                node, inbound = moved[j]
                here = self._node(node, r)
                out[r] = route_of(here, pes[r]) if inbound else route_of(pes[r], here)
            return out

        sizes = (*loads_n, *stores_n)
        key = ("sflows", id(self.lane), rel)
        known = self.memo.flows.get(key)
        if known is not None:
            return known
        made = self.memo.flows[key] = tuple(
            (
                self.memo.get(("sroute", id(self.lane), rel, j), lambda j=j: make(j)),
                self.memo.get(
                    ("n", self.p, self.period, (size,) * self.period),
                    lambda size=size: np.full(self.p, size, dtype=np.int64),
                ),
            )
            for j, size in enumerate(sizes)
        )
        return made

    def stream_times(self, rel: tuple) -> np.ndarray:
        """Each row's time for the traffic ``rel`` (per recorded rank: loads, stores)."""

        def make() -> np.ndarray:
            stream_ps, pes, period = self.tables.stream_ps, self.lane.pes, self.period
            out = np.empty(self.p, dtype=np.int64)
            for r in range(self.p):
                loads, stores = rel[r % period]
                out[r] = stream_ps(
                    pes[r],
                    tuple((self._node(node, r), n) for node, n in loads),
                    tuple((self._node(node, r), n) for node, n in stores),
                )
            return out

        return self.memo.get(("stream", id(self.lane), rel), make)


def _join_flows(memo: _Memo, parts: list[tuple]) -> tuple:
    """Per-lane flows joined flow by flow (``()`` unless every lane has the same count)."""
    if any(not part for part in parts) or len({len(part) for part in parts}) != 1:
        return ()
    if len(parts) == 1:
        return parts[0]
    key = ("flows", tuple(id(part) for part in parts))
    known = memo.flows.get(key)
    if known is not None:
        return known
    made = memo.flows[key] = tuple(
        (_join(memo, [part[j][0] for part in parts]), _join(memo, [part[j][1] for part in parts]))
        for j in range(len(parts[0]))
    )
    return made


def _join(memo: _Memo, parts: list[np.ndarray]) -> np.ndarray:
    if len(parts) == 1:
        return parts[0]
    return memo.get(("join", tuple(id(a) for a in parts)), lambda: np.concatenate(parts))


def build(lanes: list[RecordedLane], tables: Tables) -> tuple[list[list[Column]], list[str]] | None:
    """The columns of every strand and the PE of every row; ``None`` if not aligned."""
    memo = _Memo()
    made: list[_Lane] = []
    base = 0
    for lane in lanes:
        made.append(_Lane(lane, base, tables, memo))
        base += len(lane.pes)
    # ranks[j] is row-set j: one recorded rank (of some lane); all must align.
    recorded = [(m, strands) for m in made for strands in m.strands()]
    first = recorded[0][1]
    for _, strands in recorded:
        if len(strands) != len(first):
            return None
        if any(len(a) != len(b) for a, b in zip(strands, first, strict=True)):
            return None
    shape: list[list[Column]] = []
    for s in range(len(first)):
        columns: list[Column] = []
        for k in range(len(first[s])):
            head = first[s][k]
            sig = _signature(head)
            for _, strands in recorded:
                if _signature(strands[s][k]) != sig:
                    return None
            columns.append(_column(head, s, k, made, memo))
        shape.append(columns)
    pes = [pe for lane in lanes for pe in lane.pes]
    return shape, pes


def _column(head: tuple, s: int, k: int, made: list[_Lane], memo: _Memo) -> Column:
    kind = head[0]

    def per_lane(m: _Lane) -> list[tuple]:
        return [strands[s][k] for strands in m.strands()]

    if kind in MESSAGES:
        return Column(
            kind,
            channel=head[2],
            comm=head[6],
            peer=_join(memo, [m.peers(per_lane(m)) for m in made]),
            nbytes=_join(memo, [m.sizes(per_lane(m)) for m in made]),
            route=_join(memo, [m.routes(per_lane(m)) for m in made]),
        )
    if kind == Op.RECV:
        return Column(kind, channel=head[2], peer=_join(memo, [m.peers(per_lane(m)) for m in made]))
    if kind == Op.STREAM:
        parts = [m.streams(per_lane(m)) for m in made]
        flows = _join_flows(memo, [c for _, _, c in parts])
        # Streams with flows are priced in their round's fluid; only irregular
        # ones need their time alone.
        alone = None
        if not flows:
            patterns = [rel for rel, _, _ in parts]
            alone = _join(memo, [m.stream_times(r) for m, r in zip(made, patterns, strict=True)])
        return Column(
            kind, stream_ps=alone, flops=_join(memo, [b for _, b, _ in parts]), flows=flows
        )
    if kind == Op.DRAIN:
        return Column(kind, comm=head[1])
    return Column(kind, strands=head[1])
