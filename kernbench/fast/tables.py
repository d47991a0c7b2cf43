"""The evaluator's tables: operations as columns over ranks, routes and stream shapes
as ids into arrays, and the fluid model's max-min sharing over them (ADR 0015)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kernbench.machine.api import ROUNDING_SLACK, RouteCost
from kernbench.machine.maxmin import array_fill
from kernbench.machine.programs import Op
from kernbench.units import PS_PER_S

__all__ = [
    "MESSAGES",
    "TIME_LIMIT_PS",
    "Column",
    "Tables",
    "TimesTooLong",
    "fluid_finish",
    "message_parts",
    "network_ps",
    "shared_rates",
    "to_ps",
]

MESSAGES = (Op.POST, Op.SEND)

# The evaluator keeps times in 64-bit picoseconds; a program whose times could reach
# this (53 days) runs on the fabric instead, whose clock is a Python integer.
TIME_LIMIT_PS = 1 << 62


class TimesTooLong(Exception):
    """A time the evaluator would keep is at least :data:`TIME_LIMIT_PS`."""


def _within(values: np.ndarray) -> np.ndarray:
    """``values`` (ps, any dtype), after checking they stay under :data:`TIME_LIMIT_PS`."""
    if values.size and not float(np.max(values)) < TIME_LIMIT_PS:
        raise TimesTooLong
    return values


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
    stream_ps: np.ndarray | None = None  # streams without regular flows: their time alone
    flops: np.ndarray | None = None  # streams: vector work
    # streams: (route ids, bytes) per flow, when every row's traffic has the same shape
    flows: tuple[tuple[np.ndarray, np.ndarray], ...] = ()


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
        self._edges = np.zeros((0, 0), dtype=np.intp)
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
            lengths = [len(r) for r in self.routes]
            edges = np.full((len(self.routes), max(lengths, default=0)), -1, dtype=np.intp)
            for i, path in enumerate(self.routes):
                edges[i, : len(path)] = path
            self._edges = edges
            if self._latency and max(self._latency) >= TIME_LIMIT_PS:
                raise TimesTooLong
            self._arrays = (
                np.asarray(self._latency, dtype=np.int64),
                np.asarray(self._bottleneck, dtype=np.float64),
                np.asarray(self._fill, dtype=np.float64),
                np.asarray(lengths, dtype=np.intp),
            )
        return self._arrays

    def edges(self) -> np.ndarray:
        """Route id -> its links, padded with -1 (one row per route)."""
        self.arrays()
        return self._edges

    # -- streams --------------------------------------------------------------------------
    def stream_ps(self, pe: str, loads: tuple, stores: tuple) -> int:
        """Time of one PE's memory streams alone, sharing its links (:func:`fluid_finish`)."""
        key = (pe, loads, stores)
        known = self._streams.get(key)
        if known is None:
            known = self._streams[key] = self._stream_ps(pe, loads, stores)
        return known

    def _stream_ps(self, pe: str, loads: tuple, stores: tuple) -> int:
        moved = [(self.route_of(node, pe), n) for node, n in loads if n]
        moved += [(self.route_of(pe, node), n) for node, n in stores if n]
        moved = [(route, n) for route, n in moved if self.routes[route]]
        if not moved:
            return 0
        routes = np.fromiter((route for route, _ in moved), dtype=np.intp, count=len(moved))
        sizes = np.fromiter((n for _, n in moved), dtype=np.int64, count=len(moved))
        ps = float(fluid_finish(self, routes, sizes).max()) * PS_PER_S - ROUNDING_SLACK
        if not ps < TIME_LIMIT_PS:
            raise TimesTooLong
        return math.ceil(ps)


def shared_rates(tables: Tables, routes: np.ndarray) -> np.ndarray:
    """Each message's rate when all of ``routes`` are in flight at once (max-min fair)."""
    latency, bottleneck, _, length = tables.arrays()
    rates = bottleneck[routes].copy()
    lengths = length[routes]
    live = np.flatnonzero(lengths)
    if not len(live):
        return rates
    padded = tables.edges()[routes[live]]
    present = padded >= 0
    flat = padded[present]  # flow by flow, each flow's links in route order
    links, local = np.unique(flat, return_inverse=True)
    if len(links) == len(flat):  # every link carries at most one: each alone on its route
        return rates
    sub = lengths[live]
    starts = np.concatenate(([0], np.cumsum(sub)[:-1]))
    pair_flow = np.repeat(np.arange(len(live)), sub)
    rate, _ = array_fill(
        local, pair_flow, np.ones(len(flat)), starts, tables.capacity[links], len(live)
    )
    rates[live] = rate
    return rates


def fluid_finish(
    tables: Tables, routes: np.ndarray, nbytes: np.ndarray, starts: np.ndarray | None = None
) -> np.ndarray:
    """Seconds each transfer takes from its start when transfers share links max-min
    fairly, one that ends leaving its share to the others (the fabric's fluid model).

    ``starts`` (seconds, default all 0): a transfer joins at its start.
    """
    sizes = nbytes.astype(np.float64)
    staggered = starts is not None and bool(np.any(starts != starts[0]))
    rates = shared_rates(tables, routes) if not staggered else None
    if not staggered:
        ends = sizes / rates
        if len(routes) < 2 or np.all(ends == ends[0]):
            return ends
        starts = np.zeros(len(routes))
    remaining = sizes.copy()
    finish = np.zeros(len(routes))
    order = np.argsort(starts, kind="stable")
    joined = 0
    active = np.zeros(len(routes), dtype=bool)
    now = float(starts[order[0]])
    while True:
        while joined < len(order) and starts[order[joined]] <= now:
            active[order[joined]] = True
            joined += 1
        idx = np.flatnonzero(active)
        upcoming = float(starts[order[joined]]) - now if joined < len(order) else np.inf
        if not len(idx):
            now += upcoming
            continue
        current = shared_rates(tables, routes[idx])
        left = remaining[idx] / current
        step = min(float(np.min(left)), upcoming)
        now += step
        remaining[idx] -= current * step
        done = left <= step * (1 + 1e-12)
        finish[idx[done]] = now
        active[idx[done]] = False
        if joined == len(order) and not active.any():
            return finish - starts


def message_parts(
    tables: Tables, routes: np.ndarray, nbytes: np.ndarray, rates: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per message: the time its bytes take at ``rates``, and the latency and
    first-packet fill due after the last byte leaves."""
    latency, _, fill, length = tables.arrays()
    packet = tables.packet_bytes
    fills = np.ceil(np.minimum(nbytes, packet) * fill[routes] - ROUNDING_SLACK)
    tail = latency[routes] + _within(fills).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        flow = np.ceil(nbytes * float(PS_PER_S) / rates - ROUNDING_SLACK)
    flow = np.where((nbytes > 0) & (length[routes] > 0), np.maximum(flow, 0), 0)
    flow = _within(flow).astype(np.int64)
    tail = np.where(length[routes] > 0, np.maximum(tail, 0), 0)
    return flow, tail


def network_ps(tables: Tables, routes: np.ndarray, nbytes: np.ndarray, rates: np.ndarray):
    """Endpoint overhead + latency + bytes at ``rates`` + first-packet fill, per message."""
    flow, tail = message_parts(tables, routes, nbytes, rates)
    return tables.endpoint_overhead_ps + flow + tail


def to_ps(seconds: np.ndarray) -> np.ndarray:
    """Seconds as whole picoseconds (rounded up, as the fabric's timers are)."""
    return _within(np.ceil(seconds * PS_PER_S - ROUNDING_SLACK).clip(0)).astype(np.int64)
