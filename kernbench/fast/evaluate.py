"""Evaluate recorded collective programs step-wide: one NumPy pass per operation for all ranks.

The programs of one collective (:mod:`kernbench.machine.programs`) are
*aligned* when every rank runs the same sequence of operations (the same kinds,
channels, communicators and strands), with its own peers, sizes and memories:
SPMD programs such as rings, direct exchanges, recursive doubling on powers of
two and hierarchical compositions of them.  Then each operation is one step
for all ranks at once (ADR 0015):

* a **message** leaves when its rank reaches it and its channel's transmitter
  is free, pays the IPCQ endpoint overhead, its route's latency, its bytes at
  its rate and its first packet's store-and-forward fill (the fabric's
  formula); the messages of one *round* (operations that become ready
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
whose channels would run out of IPCQ credits, are refused (``None``) and the
backend runs them message by message instead.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kernbench.machine.api import ROUNDING_SLACK, RouteCost
from kernbench.machine.maxmin import Flow, array_fill, fair_rates
from kernbench.machine.programs import Op
from kernbench.units import PS_PER_S

__all__ = ["Column", "Tables", "evaluate", "network_ps", "shared_rates", "MESSAGES"]

MESSAGES = (Op.POST, Op.SEND)


@dataclass(eq=False)
class Column:
    """One operation of the aligned programs, for every rank (row) at once."""

    kind: Op
    channel: tuple = ()  # messages and receives: the channel's tag path
    comm: int = -1  # messages and drains: the communicator
    strands: tuple[int, ...] = ()  # spawn and join
    peer: np.ndarray | None = None  # messages: receiver rows; receives: sender rows
    nbytes: np.ndarray | None = None  # messages
    route: np.ndarray | None = None  # messages: route ids (Tables.route_of)
    stream_ps: np.ndarray | None = None  # streams: memory traffic time, alone
    flops: np.ndarray | None = None  # streams: vector work
    traffic: tuple = ()  # streams: the traffic, as the column builder describes it


class Tables:
    """Routes and stream shapes met so far, as ids into arrays (built once per machine)."""

    def __init__(
        self,
        route: Callable[[str, str], tuple[int, ...]],
        route_cost: Callable[[tuple[int, ...]], RouteCost],
        capacity: np.ndarray,
        packet_bytes: int,
        endpoint_overhead_ps: int,
        vector_flops_per_s: Callable[[str], int],
    ) -> None:
        self.route = route
        self.route_cost = route_cost
        self.capacity = capacity
        self.packet_bytes = packet_bytes
        self.endpoint_overhead_ps = endpoint_overhead_ps
        self.vector_flops_per_s = vector_flops_per_s
        self._route_ids: dict[tuple[str, str], int] = {}
        self.routes: list[tuple[int, ...]] = []
        self._latency: list[int] = []
        self._bottleneck: list[float] = []
        self._fill: list[float] = []
        self._arrays: tuple[np.ndarray, ...] | None = None
        self._streams: dict[tuple, int] = {}

    # -- routes ---------------------------------------------------------------------------
    def route_of(self, src: str, dst: str) -> int:
        key = (src, dst)
        found = self._route_ids.get(key)
        if found is None:
            path = self.route(src, dst) if src != dst else ()
            cost = self.route_cost(path)
            found = self._route_ids[key] = len(self.routes)
            self.routes.append(path)
            self._latency.append(cost.latency_ps)
            self._bottleneck.append(float(cost.bottleneck) if path else np.inf)
            self._fill.append(cost.fill_ps_per_byte)
            self._arrays = None
        return found

    def arrays(self) -> tuple[np.ndarray, ...]:
        """(latency ps, bottleneck B/s, fill ps per byte, route length) by route id."""
        if self._arrays is None:
            self._arrays = (
                np.asarray(self._latency, dtype=np.int64),
                np.asarray(self._bottleneck, dtype=np.float64),
                np.asarray(self._fill, dtype=np.float64),
                np.asarray([len(r) for r in self.routes], dtype=np.intp),
            )
        return self._arrays

    # -- streams --------------------------------------------------------------------------
    def stream_ps(self, pe: str, loads: tuple, stores: tuple) -> int:
        """Time of one PE's memory streams alone (identical streams as one weighted flow;
        a stream that ends leaves its links to the others, as the fabric shares them)."""
        key = (pe, loads, stores)
        known = self._streams.get(key)
        if known is None:
            known = self._streams[key] = self._stream_ps(pe, loads, stores)
        return known

    def _stream_ps(self, pe: str, loads: tuple, stores: tuple) -> int:
        grouped: dict[tuple[tuple[int, ...], int], int] = {}
        for node, n in loads:
            if n:
                key = (self.route(node, pe), n)
                grouped[key] = grouped.get(key, 0) + 1
        for node, n in stores:
            if n:
                key = (self.route(pe, node), n)
                grouped[key] = grouped.get(key, 0) + 1
        remaining: dict[int, float] = {}
        active: dict[int, Flow] = {}
        for fid, ((path, n), weight) in enumerate(grouped.items()):
            if path:
                active[fid] = Flow(fid, path, weight)
                remaining[fid] = float(n)
        now = 0.0
        while active:
            fair_rates(active.values(), self.capacity)
            step = min(remaining[fid] / f.rate for fid, f in active.items())
            now += step
            for fid, f in list(active.items()):
                remaining[fid] -= f.rate * step
                if remaining[fid] <= 1e-9 * f.rate + 1e-6:
                    del active[fid]
        return int(np.ceil(now * PS_PER_S - ROUNDING_SLACK)) if now else 0


def shared_rates(tables: Tables, routes: np.ndarray) -> np.ndarray:
    """Each message's rate when all of ``routes`` are in flight at once (max-min fair)."""
    latency, bottleneck, _, length = tables.arrays()
    rates = bottleneck[routes].copy()
    lengths = length[routes]
    live = np.flatnonzero(lengths)
    if not len(live):
        return rates
    paths = tables.routes
    flat = np.fromiter(
        (e for i in routes[live].tolist() for e in paths[i]),
        dtype=np.intp,
        count=int(lengths[live].sum()),
    )
    if np.bincount(flat).max() <= 1:  # every link carries at most one: each alone on its route
        return rates
    links, local = np.unique(flat, return_inverse=True)
    sub = lengths[live]
    starts = np.concatenate(([0], np.cumsum(sub)[:-1]))
    pair_flow = np.repeat(np.arange(len(live)), sub)
    rate, _ = array_fill(
        local, pair_flow, np.ones(len(flat)), starts, tables.capacity[links], len(live)
    )
    rates[live] = rate
    return rates


def network_ps(tables: Tables, routes: np.ndarray, nbytes: np.ndarray, rates: np.ndarray):
    """Endpoint overhead + latency + bytes at ``rates`` + first-packet fill, per message."""
    latency, _, fill, length = tables.arrays()
    packet = tables.packet_bytes
    tail = latency[routes] + np.ceil(
        np.minimum(nbytes, packet) * fill[routes] - ROUNDING_SLACK
    ).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        flow = np.ceil(nbytes * float(PS_PER_S) / rates - ROUNDING_SLACK)
    flow = np.where((nbytes > 0) & (length[routes] > 0), np.maximum(flow, 0), 0).astype(np.int64)
    tail = np.where(length[routes] > 0, np.maximum(tail, 0), 0)
    return tables.endpoint_overhead_ps + flow + tail


class _Pairing:
    """Which message each receive takes, and rounds in which operations become ready."""

    def __init__(self, shape: list[list[Column]], n: int) -> None:
        self.shape = shape
        self.n = n
        self.match: dict[tuple[int, int], tuple[int, int]] = {}
        self.slot: dict[tuple[int, int], tuple] = {}

    def pair(self) -> bool:
        """Pair receives with messages per channel, in order; ``False`` if ranks disagree.

        Messages whose receivers are the same array for every rank share their
        channels; two such groups that share a channel on some rank but not on
        all would order differently per rank, and are refused.
        """
        groups: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
        dests: dict[tuple, np.ndarray] = {}
        for s, strand in enumerate(self.shape):
            for k, col in enumerate(strand):
                if col.kind in MESSAGES:
                    key = (col.channel, col.peer.tobytes())
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
        rows = np.arange(self.n)
        taken: dict[tuple, int] = defaultdict(int)
        inverse: dict[tuple, tuple | None] = {}
        for s, strand in enumerate(self.shape):
            for k, col in enumerate(strand):
                if col.kind != Op.RECV:
                    continue
                wanted = (col.channel, col.peer.tobytes())
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
                    level[(s, k)] = 1 + max((level[d] for d in deps), default=-1)
                    pointer[s] += 1
                    remaining -= 1
                    moved = True
            if not moved:
                return None
        rounds: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for node, at in level.items():
            rounds[at].append(node)
        return [sorted(rounds[at]) for at in sorted(rounds)]

    def credits_hold(self, rounds: list[list[tuple[int, int]]], depth: int | None) -> bool:
        """No channel has more messages sent and not yet taken than the queue's credits."""
        if not depth:
            return True
        outstanding: dict[tuple, int] = defaultdict(int)
        for round_ in rounds:
            for s, k in round_:
                kind = self.shape[s][k].kind
                if kind in MESSAGES:
                    outstanding[self.slot[(s, k)]] += 1
                    if outstanding[self.slot[(s, k)]] > depth:
                        return False
            for s, k in round_:
                if self.shape[s][k].kind == Op.RECV:
                    outstanding[self.slot[self.match[(s, k)]]] -= 1
        return True


def evaluate(
    shape: list[list[Column]],
    n: int,
    tables: Tables,
    pes: list[str],
    depth: int | None,
    together: Callable[[list[Column]], np.ndarray] | None = None,
) -> np.ndarray | None:
    """Each row's end time (ps after its program starts), or ``None`` if it cannot be done.

    ``together`` prices the streams of one round run at once (they share the
    PE's memory links); without it each stream is priced alone.
    """
    if not n:
        return np.zeros(0, dtype=np.int64)
    pairing = _Pairing(shape, n)
    if not pairing.pair():
        return None
    rounds = pairing.rounds()
    if rounds is None or not pairing.credits_hold(rounds, depth):
        return None
    vector = np.fromiter((tables.vector_flops_per_s(pe) for pe in pes), np.int64, n)
    clock = [np.zeros(n, dtype=np.int64) for _ in shape]
    engine_free = np.zeros(n, dtype=np.int64)
    arrival: dict[tuple[int, int], np.ndarray] = {}
    last_arrival: dict[int, np.ndarray] = {}
    free_at: dict[tuple, np.ndarray] = {}
    cache: dict[tuple, list[np.ndarray]] = {}
    for round_ in rounds:
        messages = [(s, k) for s, k in round_ if shape[s][k].kind in MESSAGES]
        if messages:
            cols = [shape[s][k] for s, k in messages]
            key = tuple((id(c.route), id(c.nbytes)) for c in cols)
            times = cache.get(key)
            if times is None:
                routes = np.concatenate([c.route for c in cols])
                nbytes = np.concatenate([c.nbytes for c in cols])
                moving = np.where(nbytes > 0, routes, -1)
                rates = np.full(len(routes), np.inf)
                if np.any(moving >= 0):
                    live = moving >= 0
                    rates[live] = shared_rates(tables, routes[live])
                flat = network_ps(tables, routes, nbytes, rates)
                times = [flat[i * n : (i + 1) * n] for i in range(len(cols))]
                cache[key] = times
            network = dict(zip(messages, times, strict=True))
        streams = [(s, k) for s, k in round_ if shape[s][k].kind == Op.STREAM]
        shared = None
        if together is not None and len(streams) > 1:
            shared = together([shape[s][k] for s, k in streams])
        for s, k in round_:
            col = shape[s][k]
            kind = col.kind
            if kind in MESSAGES:
                slot = pairing.slot[(s, k)]
                free = free_at.get(slot)
                depart = clock[s] if free is None else np.maximum(clock[s], free)
                done = depart + network[(s, k)]
                free_at[slot] = done
                arrival[(s, k)] = done
                last = last_arrival.get(col.comm)
                last_arrival[col.comm] = done if last is None else np.maximum(last, done)
                if kind == Op.SEND:
                    clock[s] = done
            elif kind == Op.RECV:
                clock[s] = np.maximum(clock[s], arrival[pairing.match[(s, k)]][col.peer])
            elif kind == Op.STREAM:
                flops = col.flops
                engine = -(-flops * PS_PER_S // vector)
                start = np.maximum(clock[s], engine_free)
                busy = flops > 0
                engine_free = np.where(busy, start + engine, engine_free)
                alone = col.stream_ps if shared is None else shared
                clock[s] = np.maximum(clock[s] + alone, np.where(busy, engine_free, 0))
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
    return clock[0]
