"""Links and routes as a fluid flow network with max-min fair sharing.

A transfer of ``S`` bytes over a route becomes a *flow* that occupies every
link of the route at once.  Flows that share a link share its bandwidth
max-min fairly (progressive filling), so congestion is real and costs only
events at flow start and end, not per packet.  When its last byte has been
pushed, the flow still pays the route's latency and the store-and-forward
fill of its first packet on every hop but the bottleneck one:

    t = sum(L_i) + S / B_bottleneck + sum(p / B_i) - p / B_bottleneck,
    p = min(packet_bytes, S)

which for an idle route of h equal hops is h·L + S/B + (h-1)·p/B, the cost of
a route pipelined at packet granularity (ADR 0004).  Rates are recomputed only
for the flows connected to the one that started or ended.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import simpy

from kernbench.topology.graph import Edge
from kernbench.units import PS_PER_S

__all__ = ["FlowNetwork", "RouteCost"]

# Completion times are rounded up to whole picoseconds; a rate computed from
# exact integer bandwidths may land a hair above an integer, which must not
# cost an extra picosecond.
_ROUNDING_SLACK = 1e-6


class RouteCost:
    """The static part of a route's cost, computed once per (route, size class)."""

    __slots__ = ("edges", "latency_ps", "bottleneck", "fill_ps_per_byte")

    def __init__(self, edges: Sequence[Edge]) -> None:
        self.edges = tuple(e.index for e in edges)
        self.latency_ps = sum(e.latency_ps for e in edges)
        self.bottleneck = min((e.bandwidth for e in edges), default=0)
        # ps per byte of the first packet, summed over the non-bottleneck hops.
        per_byte = sum(PS_PER_S / e.bandwidth for e in edges)
        self.fill_ps_per_byte = per_byte - (PS_PER_S / self.bottleneck if edges else 0.0)

    def idle_ps(self, nbytes: int, packet_bytes: int) -> int:
        """Time on an otherwise idle network (what the closed forms assume)."""
        if not self.edges:
            return 0
        stream = -(-nbytes * PS_PER_S // self.bottleneck) if nbytes else 0
        return self.latency_ps + stream + self.tail_fill_ps(nbytes, packet_bytes)

    def tail_fill_ps(self, nbytes: int, packet_bytes: int) -> int:
        first_packet = min(nbytes, packet_bytes)
        return math.ceil(first_packet * self.fill_ps_per_byte - _ROUNDING_SLACK)


def _succeed_after(env: simpy.Environment, event: simpy.Event, delay: int) -> None:
    """Trigger ``event`` ``delay`` picoseconds from now with one scheduled event.

    This is how ``simpy.Timeout`` schedules itself; doing it for an event handed
    out earlier saves a timeout and a callback per transfer on the hot path.
    """
    if not delay:
        event.succeed()
        return
    event._ok = True  # noqa: SLF001 - see the docstring
    event._value = None  # noqa: SLF001
    env.schedule(event, simpy.events.NORMAL, delay)


class _Flow:
    __slots__ = (
        "fid",
        "edges",
        "remaining",
        "rate",
        "updated",
        "version",
        "done",
        "start",
        "size",
        "tail",
    )

    def __init__(self, fid: int, edges: tuple[int, ...], nbytes: int, now: int) -> None:
        self.fid = fid
        self.size = nbytes
        self.edges = edges
        self.remaining = float(nbytes)
        self.rate = 0.0  # bytes per second
        self.updated = now
        self.version = 0
        self.done: simpy.Event | None = None
        self.start = now
        self.tail = 0  # route latency and packet fill still due after the last byte leaves


class FlowNetwork:
    """Bandwidth sharing over a fixed set of directed links."""

    def __init__(self, env: simpy.Environment, edges: Sequence[Edge], packet_bytes: int) -> None:
        self.env = env
        self.edges = edges
        self.packet_bytes = packet_bytes
        self.capacity = [float(e.bandwidth) for e in edges]
        # Insertion-ordered dicts keep every iteration deterministic.
        self.active: list[dict[int, _Flow]] = [{} for _ in edges]
        self.bytes_carried = [0] * len(edges)
        self._next_fid = 0
        self.flows_started = 0
        self._route_costs: dict[tuple[int, ...], RouteCost] = {}
        self._dirty: set[int] = set()
        self._rebalance_pending = False
        # When a detailed trace is wanted: ("flow", edge, start, end, bytes) per flow and
        # hop, and ("util", edge, time, fraction) whenever a link's load changes.
        self.link_log: list[tuple] | None = None

    def route_cost(self, route: tuple[int, ...]) -> RouteCost:
        cost = self._route_costs.get(route)
        if cost is None:
            cost = RouteCost([self.edges[i] for i in route])
            self._route_costs[route] = cost
        return cost

    def transfer(self, route: tuple[int, ...], nbytes: int, *, stream: bool = False) -> simpy.Event:
        """An event that fires when the last byte has arrived at the route's end.

        ``stream=True`` charges bandwidth only (no latency, no packet fill): a
        PE streaming data through its memory with the access latency hidden.
        """
        env = self.env
        cost = self.route_cost(route)
        delivered = env.event()
        if not route:
            delivered.succeed()
            return delivered
        tail = 0 if stream else cost.latency_ps + cost.tail_fill_ps(nbytes, self.packet_bytes)
        if nbytes <= 0:
            _succeed_after(env, delivered, tail)
            return delivered
        self.flows_started += 1
        flow = _Flow(self._next_fid, route, nbytes, env.now)
        self._next_fid += 1
        flow.done = delivered
        flow.tail = tail
        for e in route:
            self.active[e][flow.fid] = flow
            self.bytes_carried[e] += nbytes
        self._mark_dirty(route)
        return delivered

    def _mark_dirty(self, edges: tuple[int, ...]) -> None:
        """Rebalance once per instant, after every flow starting or ending now has.

        Many flows often start or end at the same picosecond (a collective step,
        shards written together); one rebalance for all of them keeps that
        linear instead of quadratic in events.  The zero-delay timer is queued
        behind every event already due now, so those flows are all counted.
        """
        self._dirty.update(edges)
        if not self._rebalance_pending:
            self._rebalance_pending = True
            self.env.timeout(0).callbacks.append(self._rebalance_dirty)

    def _rebalance_dirty(self, _event: simpy.Event) -> None:
        self._rebalance_pending = False
        dirty, self._dirty = tuple(sorted(self._dirty)), set()
        self._rebalance(dirty)
        if self.link_log is not None:
            now = self.env.now
            for e in dirty:
                if not self.active[e]:
                    self.link_log.append(("util", e, now, 0.0))

    # -- rate allocation ---------------------------------------------------------
    def _component(self, seed_edges: tuple[int, ...]) -> tuple[list[_Flow], list[int]]:
        """Flows and links transitively connected to ``seed_edges`` through shared links."""
        flows: dict[int, _Flow] = {}
        links: dict[int, None] = {}
        pending = list(seed_edges)
        while pending:
            e = pending.pop()
            if e in links:
                continue
            links[e] = None
            for fid, flow in self.active[e].items():
                if fid not in flows:
                    flows[fid] = flow
                    pending.extend(flow.edges)
        return sorted(flows.values(), key=lambda f: f.fid), sorted(links)

    def _rebalance(self, seed_edges: tuple[int, ...]) -> None:
        now = self.env.now
        flows, links = self._component(seed_edges)
        if not flows:
            return
        for flow in flows:  # bank progress made at the old rates
            if flow.rate:
                flow.remaining -= flow.rate * (now - flow.updated) / PS_PER_S
            flow.updated = now
        new_rate = self._max_min(flows, links)
        for flow in flows:
            rate = new_rate[flow.fid]
            if rate != flow.rate or flow.version == 0:
                flow.rate = rate
                self._schedule(flow)
        if self.link_log is not None:
            for e in links:
                used = sum(f.rate for f in self.active[e].values())
                self.link_log.append(("util", e, now, min(1.0, used / self.capacity[e])))

    def _max_min(self, flows: list[_Flow], links: list[int]) -> dict[int, float]:
        """Progressive filling with a heap of link fair shares.

        Repeatedly take the link whose remaining capacity per unfrozen flow is the
        smallest (ties: the lowest link index), freeze its flows at that share and
        take their rate off every link they cross.  Every change pushes the link's
        new share; an entry whose share is out of date is skipped when popped.
        """
        if len(flows) == 1:
            flow = flows[0]
            return {flow.fid: min(self.capacity[e] for e in flow.edges)}
        # The component is closed: every flow on these links is in ``flows``.
        residual = {e: self.capacity[e] for e in links}
        count = {e: len(self.active[e]) for e in links}
        heap = [(residual[e] / count[e], e) for e in links if count[e]]
        heapq.heapify(heap)
        rate: dict[int, float] = {}
        while heap and len(rate) < len(flows):
            share, link = heapq.heappop(heap)
            if not count[link] or share != residual[link] / count[link]:
                continue  # stale: a newer entry for this link is in the heap
            for flow in self.active[link].values():
                if flow.fid in rate:
                    continue
                rate[flow.fid] = share
                for e in flow.edges:
                    residual[e] -= share
                    count[e] -= 1
                    if count[e]:
                        heapq.heappush(heap, (residual[e] / count[e], e))
        return rate

    def _schedule(self, flow: _Flow) -> None:
        flow.version += 1
        version = flow.version
        delay = max(0, math.ceil(flow.remaining * PS_PER_S / flow.rate - _ROUNDING_SLACK))
        timer = self.env.timeout(delay)
        timer.callbacks.append(lambda _ev: self._finish(flow, version))

    def _finish(self, flow: _Flow, version: int) -> None:
        if version != flow.version or flow.done is None:
            return  # superseded by a later rate change
        for e in flow.edges:
            del self.active[e][flow.fid]
        if self.link_log is not None:
            now = self.env.now
            self.link_log.extend(("flow", e, flow.start, now, flow.size) for e in flow.edges)
        done, flow.done = flow.done, None
        _succeed_after(self.env, done, flow.tail)  # the last byte still has to arrive
        self._mark_dirty(flow.edges)
