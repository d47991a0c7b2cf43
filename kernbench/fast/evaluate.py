"""Evaluate recorded collective programs step-wide: one NumPy pass per operation for all ranks.

The programs of one collective (:mod:`kernbench.machine.programs`) are
*aligned* when every rank runs the same sequence of operations (the same kinds,
channels, communicators and strands), with its own peers, sizes and memories:
SPMD programs such as rings, direct exchanges, recursive doubling on powers of
two and hierarchical compositions of them.  Then each operation is one step
for all ranks at once (ADR 0015):

* a **message** leaves when its rank reaches it and its channel's transmitter
  is free (the channel's previous bytes have left), pays the IPCQ endpoint
  overhead and its bytes at its rate, then arrives its route's latency and
  its first packet's store-and-forward fill later, not before the channel's
  previous message (the fabric's formula); the messages of one *round* (operations that become ready
  together) share the links they cross max-min fairly;
* a **receive** waits for its message (a channel keeps its messages in order);
* a **stream** (a reduction, a placement, a copy) takes its memory traffic at
  the rates its routes allow, overlapped with the vector engine's work, queued
  behind the rank's earlier work;
* a **drain** waits for the rank's messages on that communicator; strands fork
  and join.

Operations reach the evaluator as :class:`Column` s: one array per quantity,
one entry per rank (route and stream-shape ids index small tables), so the
work per operation is NumPy, whatever the number of ranks.  Programs that are
not aligned, whose messages do not pair up the same way on every rank, or
whose sends need IPCQ credits from receives the rounds have not reached, are
refused (``None``) and the backend runs them message by message instead; so
are programs whose ranks drift apart, or whose channels keep a backlog, where
bounds on how much that can move a rank's time are wider than
:data:`DRIFT_BOUND`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernbench.fast.bounds import Extreme, credit_ps, crowded_rates
from kernbench.fast.tables import (
    MESSAGES,
    TIME_LIMIT_PS,
    Column,
    Tables,
    TimesTooLong,
    fluid_finish,
    message_parts,
    network_ps,
    to_ps,
)
from kernbench.machine.programs import Op
from kernbench.units import PS_PER_S

__all__ = [
    "evaluate",
    "DRIFT_BOUND",
    "STRANDS",
    "UNPAIRED",
    "BACKLOG",
    "CREDITS",
    "DRIFTING",
]

# How many times a repeated round pattern looks at its start offsets again.
RECHECKS = 8
# Rounds whose flows on one link start more than this many flow times apart are
# drifting: in time they overlap other rounds' flows, which the round model does
# not see (ADR 0015), so the program is priced only within DRIFT_BOUND.  Checked
# every SKEW_EVERY-th time a round pattern repeats, once its rechecks are done.
SKEW_LIMIT = 1.0
SKEW_EVERY = 16
# ... unless sharing links costs no message more than this share of its time.
SHARING_MATTERS = 0.02
# Rounds whose messages' route latencies differ by more than this factor are taken
# as drifting too (see _uneven).
UNEVEN = 4
# A program whose ranks drift apart, or whose channels keep a backlog, is priced
# step-wide when bounds on its rounds' sharing (slow as sharing could make them;
# with a backlog, also every flow alone) move no rank's end by more than this share.
DRIFT_BOUND = 0.01

# The operations that move data: a round with one of them is priced (and played).
_MOVES = (*MESSAGES, Op.STREAM)

# Why :func:`evaluate` refuses a program (``notes["refused"]``), as a report says it.
STRANDS = "strands side by side"
UNPAIRED = "messages that do not pair alike on every rank"
BACKLOG = "pipelined channels on shared links (flows overlapping across steps)"
CREDITS = "IPCQ credit waits (sends more than a queue's depth ahead of its receives)"
DRIFTING = "ranks drifting apart (simulation.drift=approximate prices them step-wide)"


class _Pairing:
    """Which message each receive takes, and rounds in which operations become ready."""

    def __init__(self, shape: list[list[Column]], n: int) -> None:
        self.shape = shape
        self.n = n
        self.match: dict[tuple[int, int], tuple[int, int]] = {}
        self.slot: dict[tuple[int, int], tuple] = {}
        self.index: dict[tuple[int, int], int] = {}  # a message's place on its channel
        self.queues: dict[tuple, list[tuple[int, int]]] = {}  # each channel's messages

    def pair(self) -> bool:
        """Pair receives with messages per channel, in order; ``False`` if ranks disagree.

        Messages whose receivers are the same array for every rank share their
        channels; two such groups that share a channel on some rank but not on
        all would order differently per rank, and are refused.
        """
        groups: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
        dests: dict[tuple, np.ndarray] = {}
        content: dict[int, bytes] = {}  # peer arrays are shared: hash each one once

        def peers(col: Column) -> bytes:
            found = content.get(id(col.peer))
            if found is None:
                found = content[id(col.peer)] = col.peer.tobytes()
            return found

        for s, strand in enumerate(self.shape):
            for k, col in enumerate(strand):
                if col.kind in MESSAGES:
                    key = (col.channel, peers(col))
                    self.index[(s, k)] = len(groups[key])
                    groups[key].append((s, k))
                    dests[key] = col.peer
                    self.slot[(s, k)] = key
        by_channel: dict[tuple, list[tuple]] = defaultdict(list)
        for key in groups:
            by_channel[key[0]].append(key)
        for keys in by_channel.values():
            for i, a in enumerate(keys):
                for b in keys[i + 1 :]:
                    if np.any(dests[a] == dests[b]):
                        return False
        self.queues = dict(groups)
        rows = np.arange(self.n)
        taken: dict[tuple, int] = defaultdict(int)
        inverse: dict[tuple, tuple | None] = {}
        for s, strand in enumerate(self.shape):
            for k, col in enumerate(strand):
                if col.kind != Op.RECV:
                    continue
                wanted = (col.channel, peers(col))
                key = inverse.get(wanted, 0)
                if key == 0:
                    key = None
                    for candidate in by_channel.get(col.channel, ()):
                        if np.array_equal(dests[candidate][col.peer], rows):
                            key = candidate
                            break
                    inverse[wanted] = key
                if key is None or taken[key] >= len(groups[key]):
                    return False
                self.match[(s, k)] = groups[key][taken[key]]
                taken[key] += 1
        return True

    def rounds(self) -> list[list[tuple[int, int]]] | None:
        """Operations by round: each depends only on operations of earlier rounds."""
        shape = self.shape
        spawned_at: dict[int, tuple[int, int]] = {}
        for s, strand in enumerate(shape):
            for k, col in enumerate(strand):
                if col.kind == Op.SPAWN:
                    for child in col.strands:
                        spawned_at[child] = (s, k)
        level: dict[tuple[int, int], int] = {}
        pointer = [0] * len(shape)
        remaining = sum(len(strand) for strand in shape)
        while remaining:
            moved = False
            for s, strand in enumerate(shape):
                while pointer[s] < len(strand):
                    k = pointer[s]
                    col = strand[k]
                    deps = [(s, k - 1)] if k else ([spawned_at[s]] if s in spawned_at else [])
                    if col.kind == Op.RECV:
                        deps.append(self.match[(s, k)])
                    elif col.kind == Op.JOIN:
                        deps.extend((c, len(shape[c]) - 1) for c in col.strands if shape[c])
                    if not all(d in level for d in deps):
                        break
                    # A post or a spawn does not hold its strand up: what follows it
                    # starts in the same round (posts to several peers go out together).
                    level[(s, k)] = max(
                        (level[d] + (0 if self._passes(d, s) else 1) for d in deps), default=0
                    )
                    pointer[s] += 1
                    remaining -= 1
                    moved = True
            if not moved:
                return None
        rounds: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for node, at in level.items():
            rounds[at].append(node)
        return [sorted(rounds[at]) for at in sorted(rounds)]

    def _passes(self, dep: tuple[int, int], strand: int) -> bool:
        """Whether ``dep`` lets the next operation of ``strand`` start in its round."""
        kind = self.shape[dep[0]][dep[1]].kind
        return kind == Op.SPAWN or (kind == Op.POST and dep[0] == strand)

    def credited(self, rounds: list[list[tuple[int, int]]], depth: int) -> bool:
        """Whether every message's IPCQ credit comes from a receive of an earlier round.

        A channel has ``depth`` credits: its message ``i >= depth`` leaves only once
        message ``i - depth`` has been taken (and the credit has come back).  The
        round loop knows when that was only if that receive is in an earlier round;
        a program whose sends run further ahead than that is refused.
        """
        taken_in: dict[tuple[int, int], int] = {}
        for at, round_ in enumerate(rounds):
            for s, k in round_:
                if self.shape[s][k].kind == Op.RECV:
                    taken_in[self.match[(s, k)]] = at
        for at, round_ in enumerate(rounds):
            for s, k in round_:
                if self.shape[s][k].kind in MESSAGES:
                    i = self.index[(s, k)]
                    if i < depth:
                        continue
                    earlier = self.queues[self.slot[(s, k)]][i - depth]
                    if taken_in.get(earlier, at) >= at:
                        return False
        return True

    def backlogged(self, rounds: list[list[tuple[int, int]]]) -> bool:
        """Whether a channel ever holds two messages sent and not yet taken (a
        pipelined program: its flows run on across rounds, beside later work)."""
        outstanding: dict[tuple, int] = defaultdict(int)
        for round_ in rounds:
            for s, k in round_:
                if self.shape[s][k].kind in MESSAGES:
                    outstanding[self.slot[(s, k)]] += 1
                    if outstanding[self.slot[(s, k)]] > 1:
                        return True
            for s, k in round_:
                if self.shape[s][k].kind == Op.RECV:
                    outstanding[self.slot[self.match[(s, k)]]] -= 1
        return False


def _price_round(
    tables: Tables,
    n: int,
    messages: list[Column],
    lead: list[int],
    streams: list[Column],
    starts: list[np.ndarray] | None = None,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[np.ndarray | None]]:
    """Times of a round's messages (bytes, tail) and streams.

    Every leading message (the first of its channel) and every stream with
    regular flows moves at once, sharing links max-min fairly, a flow that
    ends leaving its share to the others.  A stream takes until its last flow
    ends; one whose rows differ in shape is priced alone (``None``).
    ``starts`` (ps, per message then per stream, each row) staggers them.
    """
    leaders = sorted(set(lead))
    begin = []
    if starts is not None:
        begin = [starts[i] for i in leaders]
    parts_route = [messages[i].route for i in leaders]
    parts_size = [messages[i].nbytes for i in leaders]
    joined = [c for c in streams if c.flows]
    for c in joined:
        for route, size in c.flows:
            parts_route.append(route)
            parts_size.append(size)
            if starts is not None:
                begin.append(starts[len(messages) + streams.index(c)])
    if not parts_route:
        return [], [None] * len(streams)
    routes = np.concatenate(parts_route)
    sizes = np.concatenate(parts_size)
    _, _, _, length = tables.arrays()
    live = (sizes > 0) & (length[routes] > 0)
    finish = np.zeros(len(routes))
    if live.any():
        at = np.concatenate(begin)[live] / PS_PER_S if begin else None
        finish[live] = fluid_finish(tables, routes[live], sizes[live], at)
    blocks = [finish[b * n : (b + 1) * n] for b in range(len(parts_route))]
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = {
            j: np.where(blocks[b] > 0, messages[j].nbytes / blocks[b], np.inf)
            for b, j in enumerate(leaders)
        }
    network = [
        message_parts(tables, c.route, c.nbytes, rate[j])
        for c, j in zip(messages, lead, strict=True)
    ]
    stream_times: list[np.ndarray | None] = []
    b = len(leaders)
    for c in streams:
        if not c.flows:
            stream_times.append(None)
            continue
        ends = np.max(np.stack(blocks[b : b + len(c.flows)]), axis=0)
        b += len(c.flows)
        stream_times.append(to_ps(ends))
    return network, stream_times


def _uneven(tables: Tables, messages: list[Column]) -> bool:
    """Whether one message of a round crosses a route UNEVEN times slower to cross than
    another's (a ring's hop through a switch among hops inside a chip).  The ranks
    behind the slow hop fall behind the others, so flows that the round prices as
    moving together overlap other rounds' flows instead (ADR 0018: a channel's next
    message no longer waits for the slow hop, so the skew of one round stays small
    while the error grows: -10% on a 256-rank ring over two SIPs of rack.yaml)."""
    if not messages:
        return False
    latency = tables.arrays()[0][np.concatenate([col.route for col in messages])]
    return bool(latency.max() > UNEVEN * max(int(latency.min()), 1))


def _sharing_costs(
    tables: Tables, messages: list[Column], priced: list[tuple[np.ndarray, np.ndarray]]
) -> bool:
    """Whether sharing links costs some message of a round more than SHARING_MATTERS of
    its time alone (where it does not, when flows overlap hardly matters)."""
    _, bottleneck, _, _ = tables.arrays()
    for col, (flow, tail) in zip(messages, priced, strict=True):
        alone = network_ps(tables, col.route, col.nbytes, bottleneck[col.route])
        shared = tables.endpoint_overhead_ps + flow + tail
        if np.any(shared - alone > SHARING_MATTERS * np.maximum(alone, 1)):
            return True
    return False


def _stagger(
    tables: Tables,
    n: int,
    messages: list[Column],
    lead: list[int],
    streams: list[Column],
    starts: list[np.ndarray],
    sharing: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]],
    base: tuple,
) -> tuple[np.ndarray | None, float]:
    """The round's start offsets (ps, per column then row), quantised, when flows
    sharing a link start at different times, else ``None`` (all priced as
    starting together); and the skew: how many typical flow times apart flows
    sharing a link start."""
    offsets = np.stack(starts)
    offsets = offsets - offsets.min()
    spread = int(offsets.max())
    if not spread:
        return None, 0.0
    pairs = sharing.get(base)
    if pairs is None:
        pairs = sharing[base] = _shared_pairs(tables, n, messages, lead, streams)
    columns, rows, first = pairs
    if not len(columns):
        return None, 0.0
    at = offsets[columns, rows]
    apart = np.maximum.reduceat(at, first) - np.minimum.reduceat(at, first)
    if not apart.any():
        return None, 0.0
    # How far apart flows sharing a link start, in a typical message's time
    # alone (bytes, latency and overheads: where latency dominates, overlaps
    # matter little).
    _, bottleneck, _, _ = tables.arrays()
    typical = 0
    if messages:
        head = messages[lead[0]]
        alone = network_ps(tables, head.route, head.nbytes, bottleneck[head.route])
        typical = int(np.median(alone))
    skew = float(apart.max()) / typical if typical else 0.0
    # Offsets well under a flow's time barely change how flows share: quantise
    # to the larger of 1/8 of the spread and 1/4 of the typical flow's time.
    step = max(1, spread // 8, typical // 4)
    offsets = (offsets // step) * step
    at = offsets[columns, rows]
    if np.array_equal(np.maximum.reduceat(at, first), np.minimum.reduceat(at, first)):
        return None, skew
    return offsets, skew


def _shared_pairs(
    tables: Tables, n: int, messages: list[Column], lead: list[int], streams: list[Column]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (column, row) of a flow on a link two or more of a round's flows cross,
    grouped by link, and where each link's group begins; a stream's flows count
    for the stream's column."""
    owners, routes = [], []
    for i in sorted(set(lead)):
        owners.append(i)
        routes.append(messages[i].route)
    for j, c in enumerate(streams):
        for route, _ in c.flows:
            owners.append(len(messages) + j)
            routes.append(route)
    empty = np.zeros(0, dtype=np.intp)
    if not routes:
        return empty, empty, empty
    padded = tables.edges()[np.concatenate(routes)]
    flow, hop = np.nonzero(padded >= 0)
    links = padded[flow, hop]
    _, where, counts = np.unique(links, return_inverse=True, return_counts=True)
    keep = counts[where] > 1
    flow, links = flow[keep], links[keep]
    order = np.argsort(links, kind="stable")
    flow, links = flow[order], links[order]
    first = np.flatnonzero(np.r_[True, links[1:] != links[:-1]]) if len(links) else empty
    column = np.asarray(owners, dtype=np.intp)[flow // n]
    return column, flow % n, first


class _Asymmetric(Exception):
    """Rows one period apart were priced differently: fold no more (see :class:`_Fold`)."""


class _Fold:
    """Rows ``r`` and ``r + period`` of a lane recorded one period long, when everything
    the evaluator reads of them is the same (sizes, prices, vector rates) and their peers
    are shifted alike, keep the same clocks, round after round: the round loop then
    keeps ``period`` rows, not ``n`` (a uniform ring of 16,384 ranks: one row, not
    16,384).  An array that is not periodic raises :class:`_Asymmetric`, and the
    evaluation starts again on every row.  ``period == n``: nothing is folded."""

    def __init__(self, n: int, period: int) -> None:
        self.n = n
        self.m = period
        # Folded arrays by the id of the array they fold (kept alive in _keep, so the
        # ids are not reused while the fold lives).
        self._rows: dict[int, np.ndarray] = {}
        self._peers: dict[int, np.ndarray] = {}
        self._keep: list[np.ndarray] = []

    def rows(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per row) on the first ``period`` rows."""
        if self.m == self.n:
            return values
        found = self._rows.get(id(values))
        if found is None:
            head = values[: self.m]
            if not np.array_equal(
                values.reshape(-1, self.m), np.broadcast_to(head, (self.n // self.m, self.m))
            ):
                raise _Asymmetric
            found = self._rows[id(values)] = head
            self._keep.append(values)
        return found

    def peers(self, peer: np.ndarray) -> np.ndarray:
        """Peer rows of the first ``period`` rows, folded onto them."""
        if self.m == self.n:
            return peer
        found = self._peers.get(id(peer))
        if found is None:
            q = self.n // self.m
            shift = np.repeat(np.arange(q, dtype=peer.dtype) * self.m, self.m)
            if not np.array_equal(peer, (np.tile(peer[: self.m], q) + shift) % self.n):
                raise _Asymmetric
            found = self._peers[id(peer)] = peer[: self.m] % self.m
            self._keep.append(peer)
        return found

    def full(self, values: np.ndarray) -> np.ndarray:
        """Per-row values of the kept rows, for every row."""
        return values if self.m == self.n else np.tile(values, self.n // self.m)


def evaluate(
    shape: list[list[Column]],
    n: int,
    tables: Tables,
    pes: list[str],
    depth: int | None,
    *,
    approximate: bool = False,
    period: int | None = None,
    notes: dict[str, Any] | None = None,
) -> np.ndarray | None:
    """Each row's end time (ps after its program starts), or ``None`` if it cannot be done.

    ``approximate``: a program whose ranks drift apart (see :data:`SKEW_LIMIT`) is
    priced anyway, and ``notes["skew"]`` is set to the largest skew met (else such a
    program is priced only within :data:`DRIFT_BOUND`).  ``period``: the rows form
    one lane recorded that many rows long, so rows that far apart may keep the same
    clocks (:class:`_Fold`).  ``notes``, given, also gets a refusal's reason
    (``"refused"``: :data:`STRANDS`, ...) and the bound of a program priced although
    its ranks drift apart or its channels keep a backlog (``"bound"``: the share by
    which flows overlapping across rounds could make a rank's time longer, at most
    :data:`DRIFT_BOUND`; only when not 0).
    """
    notes = {} if notes is None else notes
    if not n:
        return np.zeros(0, dtype=np.int64)
    if len(shape) > 1:
        notes["refused"] = STRANDS  # they drift apart round by round (ADR 0015)
        return None
    pairing = _Pairing(shape, n)
    if not pairing.pair():
        notes["refused"] = UNPAIRED
        return None
    rounds = pairing.rounds()
    if rounds is None:
        notes["refused"] = UNPAIRED
        return None
    credits = depth or 1
    if not pairing.credited(rounds, credits):
        notes["refused"] = CREDITS
        return None
    backlog = pairing.backlogged(rounds)
    program = _Program(shape, n, tables, pes, pairing, rounds, credits)
    kept = [period] if period and period < n and n % period == 0 else []
    # Ranks drift apart where sharing links costs, or channels keep flows moving
    # across rounds: flows of other rounds overlap theirs.  The rounds from the
    # first drifting one to the last (the streams between them too; with a
    # backlog, every round) priced as slow as sharing could make them bound every
    # rank's end from above; with a backlog, every flow alone at its route's
    # bottleneck bounds it from below.  The step-wide price stands when the bounds
    # are within DRIFT_BOUND of it.  Lagging ranks overlapping the rounds after the
    # drifting ones are not bounded: measured against the fabric instead (ADR 0015).
    # With a backlog the bounds are known before the first pass, and are played in
    # it, side by side with it.
    extremes: list[Extreme] = []
    if backlog:
        moving = sum(any(shape[s][k].kind in _MOVES for s, k in round_) for round_ in rounds)
        nodes = {node for round_ in rounds for node in round_}
        rates = crowded_rates(tables, shape, pairing.slot, n, nodes)
        extremes = [
            Extreme(tables, range(moving), rates, np.max),
            Extreme(tables, range(moving), tables.arrays()[1], np.min),
        ]
    for m in (*kept, n):  # the unfolded loop (m == n) never raises _Asymmetric
        fold = _Fold(n, m)
        learnt = _Notes()
        try:
            ends, *bounds = _run(program, fold, learnt, extremes)
            if learnt.skews and approximate:
                notes["skew"] = max(learnt.skews)
            loose = set() if approximate else learnt.drifted
            if not loose and not backlog:
                return ends
            if not backlog:
                played = learnt.played
                turns = [t for t, (_, base, _) in enumerate(played) if base in loose]
                region = range(turns[0], turns[-1] + 1)
                nodes = {node for t in region for node in rounds[played[t][0]]}
                rates = crowded_rates(tables, shape, pairing.slot, n, nodes)
                bounds = _run(program, fold, learnt, [Extreme(tables, region, rates, np.max)], True)
            high, *low = bounds
            bound = float(np.max((high - ends) / np.maximum(ends, 1)))
            if low:
                bound = max(bound, float(np.max((ends - low[0]) / np.maximum(ends, 1))))
        except _Asymmetric:
            continue
        if bound > DRIFT_BOUND:
            notes["refused"] = BACKLOG if backlog else DRIFTING
            return None
        if bound > 0:
            notes["bound"] = bound
        return ends
    raise AssertionError("unreachable: the unfolded loop always ends")


@dataclass
class _Notes:
    """What a first pass of the round loop learns: the skews of drifting rounds, their
    patterns, and every round that moves data as (its index, pattern, prices), for
    the passes that play it again."""

    skews: list[float] = field(default_factory=list)
    drifted: set[tuple] = field(default_factory=set)
    played: list[tuple[int, tuple, tuple]] = field(default_factory=list)


@dataclass
class _Program:
    """The aligned programs :func:`evaluate` prices, paired and in rounds, with
    ``credits`` IPCQ slots per channel."""

    shape: list[list[Column]]
    n: int
    tables: Tables
    pes: list[str]
    pairing: _Pairing
    rounds: list[list[tuple[int, int]]]
    credits: int
    # Per channel: the way back of its credits, every row (kept across passes).
    way_back: dict[tuple, np.ndarray] = field(default_factory=dict)


class _Stack:
    """``k`` copies of the rows a fold keeps, side by side: the passes that play the
    same rounds priced ``k`` ways (:class:`Extreme`) run as one loop, each copy on
    rows of its own (no operation reads another copy's rows)."""

    def __init__(self, fold: _Fold, k: int) -> None:
        self.fold = fold
        self.k = k
        self.m = fold.m * k
        # Stacked arrays by the ids of the arrays they stack (kept alive beside them).
        self._rows: dict[tuple[int, ...], tuple[tuple[np.ndarray, ...], np.ndarray]] = {}
        self._peers: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def rows(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per row, the same for every copy) on every copy's rows."""
        return self.each((values,) * self.k)

    def each(self, values: tuple[np.ndarray, ...]) -> np.ndarray:
        """Each copy's own ``values`` (one array per copy) on its rows."""
        if self.k == 1:
            return self.fold.rows(values[0])
        key = tuple(map(id, values))
        found = self._rows.get(key)
        if found is None:
            found = self._rows[key] = (values, np.concatenate([self.fold.rows(v) for v in values]))
        return found[1]

    def peers(self, peer: np.ndarray) -> np.ndarray:
        """Peer rows of every copy's rows, within the copy."""
        if self.k == 1:
            return self.fold.peers(peer)
        found = self._peers.get(id(peer))
        if found is None:
            folded = self.fold.peers(peer)
            stacked = np.concatenate([folded + c * self.fold.m for c in range(self.k)])
            found = self._peers[id(peer)] = (peer, stacked)
        return found[1]

    def full(self, values: np.ndarray) -> np.ndarray:
        """Per-row values of the first copy's rows, for every row."""
        return self.fold.full(values[: self.fold.m])

    def split(self, values: np.ndarray) -> list[np.ndarray]:
        """Per-row values of every copy's rows, for every row: one array per copy."""
        m = self.fold.m
        return [self.fold.full(values[c * m : (c + 1) * m]) for c in range(self.k)]


def _run(
    program: _Program,
    fold: _Fold,
    notes: _Notes,
    extremes: Sequence[Extreme] = (),
    replay: bool = False,
) -> list[np.ndarray]:
    """The round loop of :func:`evaluate` on the rows ``fold`` keeps: each row's end,
    one array per pass.  Unless ``replay``, it prices the rounds and fills ``notes``
    (the first array); then once per extreme (side by side, :class:`_Stack`) it plays
    the same rounds, those of the extreme's region priced by it.  ``replay`` plays
    ``notes.played`` again for the extremes alone."""
    shape, n, tables, pes = program.shape, program.n, program.tables, program.pes
    pairing, rounds, credits = program.pairing, program.rounds, program.credits
    way_back = program.way_back
    base_m = fold.m
    fold = _Stack(fold, len(extremes) + (0 if replay else 1))
    m = fold.m
    vector = fold.rows(np.fromiter((tables.vector_flops_per_s(pe) for pe in pes), np.int64, n))
    # A reduction's time, ceil(flops * PS_PER_S / vector) as the fabric's PEs take it,
    # with the fraction reduced first: flops * PS_PER_S alone passes int64 past 9.2 M.
    common = np.gcd(vector, PS_PER_S)
    per_ps, per_s = PS_PER_S // common, vector // common
    widest, narrowest = _peak(per_ps), int(per_s.min()) if per_s.size else 1
    peaks: dict[int, int] = {}  # of arrays the loop meets again (columns', priced ones)

    def peak(values: np.ndarray | None) -> int:
        if values is None:
            return 0
        found = peaks.get(id(values))
        if found is None:
            found = peaks[id(values)] = _peak(values)
        return found

    overhead = tables.endpoint_overhead_ps
    clock = [np.zeros(m, dtype=np.int64) for _ in shape]
    engine_free = np.zeros(m, dtype=np.int64)
    arrival: dict[tuple[int, int], np.ndarray] = {}
    last_arrival: dict[int, np.ndarray] = {}  # per communicator, for drains
    free_at: dict[tuple, np.ndarray] = {}
    arriving: dict[tuple, np.ndarray] = {}  # per channel: when its last message arrives
    cache: dict[tuple, tuple] = {}
    sharing: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # by round pattern
    again = enumerate(notes.played) if replay else None
    region = extremes[0].region if extremes else range(0)
    # When each message was taken (its credit starts back), by (channel, its place),
    # for the receiver's rows.
    taken_at: dict[tuple, np.ndarray] = {}
    # No clock passes the sum of every operation's longest time so far: while that
    # stays under TIME_LIMIT_PS, no int64 sum can wrap (else TimesTooLong).
    horizon = 0
    for index, round_ in enumerate(rounds):
        messages = [(s, k) for s, k in round_ if shape[s][k].kind in MESSAGES]
        streams = [(s, k) for s, k in round_ if shape[s][k].kind == Op.STREAM]
        network: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        memory: dict[tuple[int, int], np.ndarray] = {}
        if messages or streams:
            cols = [shape[s][k] for s, k in messages]
            scols = [shape[s][k] for s, k in streams]
            if again is not None:
                turn, (_, base, played) = next(again)
                variants = []
            else:
                # Messages of one channel go one after another: only the first of each
                # channel in the round shares the links; the others get its rate.
                first: dict[tuple, int] = {}
                lead = [first.setdefault(pairing.slot[m], i) for i, m in enumerate(messages)]
                base = (
                    tuple((id(c.route), id(c.nbytes), j) for c, j in zip(cols, lead, strict=True)),
                    tuple(id(c.flows) for c in scols),
                )
                # A round pattern is priced with the start offsets it has; its first
                # RECHECKS occurrences look again (and price again if the offsets of
                # flows that share links moved), then it keeps its last pricing: a
                # repeated step (a ring's) settles into the sharing it has.  Every
                # SKEW_EVERY-th occurrence checks the skew again.
                known = cache.get(base)
                seen = 0 if known is None else known[2]
                if known is None or seen < RECHECKS or seen % SKEW_EVERY == 0:
                    # Messages start when their rank and channel are ready, streams
                    # when their rank is.
                    starts = [
                        fold.full(
                            clock[s]
                            if pairing.slot[(s, k)] not in free_at
                            else np.maximum(clock[s], free_at[pairing.slot[(s, k)]])
                        )
                        for s, k in messages
                    ] + [fold.full(clock[s]) for s, k in streams]
                    staggered, skew = _stagger(tables, n, cols, lead, scols, starts, sharing, base)
                    used = b"" if staggered is None else staggered.tobytes()
                    if known is None or (seen < RECHECKS and known[1] != used):
                        at = None if staggered is None else list(staggered.reshape(len(starts), n))
                        known = (_price_round(tables, n, cols, lead, scols, at), used, seen)
                    drifting = skew > SKEW_LIMIT or (seen == 0 and _uneven(tables, cols))
                    if drifting and _sharing_costs(tables, cols, known[0][0]):
                        notes.skews.append(skew)  # flows sharing links start apart
                        notes.drifted.add(base)
                cache[base] = known = (known[0], known[1], seen + 1)
                played = known[0]
                turn = len(notes.played)
                notes.played.append((index, base, played))
                variants = [played]
            variants += [
                extreme.price(base, cols, scols, base_m) if turn in region else played
                for extreme in extremes
            ]
            for i, node in enumerate(messages):
                flow = fold.each(tuple(times[i][0] for times, _ in variants))
                tail = fold.each(tuple(times[i][1] for times, _ in variants))
                network[node] = (flow, tail)
                horizon += overhead + peak(flow) + peak(tail)
            for i, (node, col) in enumerate(zip(streams, scols, strict=True)):
                memory[node] = took = fold.each(
                    tuple(col.stream_ps if t[i] is None else t[i] for _, t in variants)
                )
                horizon += peak(took)
        for s, k in round_:
            col = shape[s][k]
            kind = col.kind
            if kind in MESSAGES:
                slot = pairing.slot[(s, k)]
                free = free_at.get(slot)
                depart = clock[s] if free is None else np.maximum(clock[s], free)
                place = pairing.index[(s, k)]
                if place >= credits:
                    # it leaves once the receive of the message ``credits`` before
                    # it has sent the credit back
                    back = way_back.get(slot)
                    if back is None:
                        back = way_back[slot] = credit_ps(tables, pes, col.peer)
                    taken = taken_at.pop((slot, place - credits))
                    depart = np.maximum(depart, taken[fold.peers(col.peer)] + fold.rows(back))
                    horizon += peak(back)
                flow, tail = network[(s, k)]
                # The transmitter is free once the bytes have left; the route's
                # tail overlaps the channel's next message, which arrives after.
                left = depart + overhead + flow
                free_at[slot] = left
                done = left + tail
                before = arriving.get(slot)
                if before is not None:
                    done = np.maximum(done, before)
                arriving[slot] = done
                arrival[(s, k)] = done
                last = last_arrival.get(col.comm)
                last_arrival[col.comm] = done if last is None else np.maximum(last, done)
                if kind == Op.SEND:
                    clock[s] = done
            elif kind == Op.RECV:
                # Each message is taken by one receive: forget it once taken.
                message = pairing.match[(s, k)]
                taken = arrival.pop(message)
                clock[s] = np.maximum(clock[s], taken[fold.peers(col.peer)])
                taken_at[(pairing.slot[message], pairing.index[message])] = clock[s]
            elif kind == Op.STREAM:
                product = peak(col.flops) * widest  # no row's flops * PS_PER_S / common more
                slowest = -(-product // narrowest)  # nor its time
                if slowest >= TIME_LIMIT_PS:
                    raise TimesTooLong
                flops = fold.rows(col.flops)
                if product < TIME_LIMIT_PS:
                    engine = -(-flops * per_ps // per_s)
                else:  # the product passes int64, the time does not: Python integers
                    engine = np.fromiter(
                        (
                            -(-f * a // b)
                            for f, a, b in zip(
                                flops.tolist(), per_ps.tolist(), per_s.tolist(), strict=True
                            )
                        ),
                        np.int64,
                        len(flops),
                    )
                horizon += slowest
                start = np.maximum(clock[s], engine_free)
                busy = flops > 0
                engine_free = np.where(busy, start + engine, engine_free)
                clock[s] = np.maximum(clock[s] + memory[(s, k)], np.where(busy, engine_free, 0))
            elif kind == Op.DRAIN:
                last = last_arrival.get(col.comm)
                if last is not None:
                    clock[s] = np.maximum(clock[s], last)
            elif kind == Op.SPAWN:
                for child in col.strands:
                    clock[child] = clock[s].copy()
            elif kind == Op.JOIN:
                for child in col.strands:
                    clock[s] = np.maximum(clock[s], clock[child])
        if horizon >= TIME_LIMIT_PS:
            raise TimesTooLong
    return fold.split(clock[0])


def _peak(values: np.ndarray | None) -> int:
    """The largest of ``values`` (0 if none), as a Python integer."""
    return 0 if values is None or not values.size else int(values.max())
