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
a route pipelined at packet granularity (ADR 0004).  Rates are re-solved only
around the flows that started or ended, as far as fairness requires (ADR 0011).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

import numpy as np
import simpy

from kernbench.fabric.arrayfill import ArrayRegion, recheck_outside
from kernbench.topology.graph import Edge
from kernbench.units import PS_PER_S

__all__ = ["FlowNetwork", "RouteCost"]

# Completion times are rounded up to whole picoseconds; a rate computed from
# exact integer bandwidths may land a hair above an integer, which must not
# cost an extra picosecond.
_ROUNDING_SLACK = 1e-6
# A link counts as saturated, and a flow as the fastest on it, within this
# relative margin (rates from different sums of the same capacities differ in
# their last bits).
_SATURATED = 1 - 1e-9
# Regions of at least this many flows are filled with array operations: a
# level of progressive filling is then a few passes over arrays instead of a
# Python loop over every link of every flow frozen at it.
VECTOR_REGION = 128


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


def _deliver(env: simpy.Environment, done: simpy.Event | Callable[[], None], delay: int) -> None:
    """Succeed the event, or call the callable, ``delay`` picoseconds from now."""
    if isinstance(done, simpy.Event):
        _succeed_after(env, done, delay)
    elif not delay:
        done()
    else:
        timer = env.timeout(delay)
        timer.callbacks.append(lambda _ev: done())


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
        "weight",
        "neck",
    )

    def __init__(
        self, fid: int, edges: tuple[int, ...], nbytes: int, now: int, weight: int = 1
    ) -> None:
        self.fid = fid
        # ``weight`` identical flows (same route, size and start) moving as one:
        # max-min fairness gives them equal rates, so they finish together.
        self.weight = weight
        self.neck = -1  # the link it was last frozen at: its bottleneck
        self.size = nbytes
        self.edges = edges
        self.remaining = float(nbytes)
        self.rate = 0.0  # bytes per second
        self.updated = now
        self.version = 0
        self.done: simpy.Event | Callable[[], None] | None = None
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
        # Flow completions: (time, order, flow, version), stale entries skipped,
        # and the times of the wake-ups queued in SimPy (at most one is needed
        # per distinct earliest completion).
        self._due: list[tuple[int, int, _Flow, int]] = []
        self._wakes: list[int] = []
        self._seq = 0
        # When a detailed trace is wanted: ("flow", edge, start, end, bytes) per flow and
        # hop, and ("util", edge, time, fraction) whenever a link's load changes.
        self.link_log: list[tuple] | None = None
        self.vector_region = VECTOR_REGION
        self._capacity_array = np.array(self.capacity, dtype=np.float64)

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
        delivered = self.env.event()
        self.start(route, nbytes, delivered, stream=stream)
        return delivered

    def start(
        self,
        route: tuple[int, ...],
        nbytes: int,
        done: simpy.Event | Callable[[], None],
        *,
        stream: bool = False,
        weight: int = 1,
    ) -> None:
        """Move ``nbytes`` over ``route``; then succeed ``done`` (an event) or call it.

        A callable is called at the instant the last byte arrives, from inside
        the simulation loop, and must only start work (flows, timers, events).
        ``weight`` > 1 moves that many copies of the transfer side by side, as
        separate flows sharing the links would (a PE reading two buffers in
        the same memory, say), for the cost of one.
        """
        env = self.env
        if not route:
            _deliver(env, done, 0)
            return
        if stream:
            tail = 0
        else:
            cost = self.route_cost(route)
            tail = cost.latency_ps + cost.tail_fill_ps(nbytes, self.packet_bytes)
        if nbytes <= 0:
            _deliver(env, done, tail)
            return
        self.flows_started += weight
        flow = _Flow(self._next_fid, route, nbytes, env.now, weight)
        self._next_fid += 1
        flow.done = done
        flow.tail = tail
        carried = nbytes * weight
        active = self.active
        idle = self.link_log is None and not any(active[e] for e in route)
        for e in route:
            active[e][flow.fid] = flow
            self.bytes_carried[e] += carried
        if idle:
            # Alone on its links: its rate is known now, no rebalance needed.  A
            # flow joining later (even at this instant) rebalances it as usual.
            flow.neck, flow.rate = self._alone_rate(flow)
            self._schedule(flow)
        else:
            self._mark_dirty(route)

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
    def _rebalance(self, seed_edges: tuple[int, ...]) -> None:
        """Re-solve max-min fair rates around the links where flows started or ended.

        Only the flows near a change are recomputed: the region starts as the
        flows on ``seed_edges`` and is filled with every other flow's rate held
        fixed.  The result is the max-min fair allocation exactly when every
        flow touching the region still has a bottleneck link (saturated, and no
        flow on it faster); each flow that does not is pulled into the region
        and the region is filled again.  On a ring whose flows share memory
        ports this keeps a change local instead of re-solving all p flows.
        """
        now = self.env.now
        region: dict[int, _Flow] = {}
        for e in seed_edges:
            region.update(self.active[e])
        if not region:
            return
        while True:
            arrays = None
            if len(region) >= self.vector_region:
                arrays = ArrayRegion(region, self.active, self._capacity_array, _SATURATED)
                arrays.fill()
                grow = arrays.unfair()
            else:
                rates, necks, links = self._fill(region)
                grow = self._unfair(region, rates, necks, links)
            if not grow:
                break
            region.update(grow)
        if arrays is not None:
            solved = zip(arrays.flows, arrays.rate.tolist(), arrays.necks(), strict=True)
            links = dict.fromkeys(arrays.link_list)
        else:
            solved = ((flow, rates[fid], necks[fid]) for fid, flow in region.items())
        for flow, rate, neck in solved:
            flow.neck = neck
            if rate != flow.rate or flow.version == 0:
                if flow.rate:  # bank progress made at the old rate
                    flow.remaining -= flow.rate * (now - flow.updated) / PS_PER_S
                flow.updated = now
                flow.rate = rate
                self._schedule(flow)
        if self.link_log is not None:
            for e in links:
                used = sum(f.rate * f.weight for f in self.active[e].values())
                self.link_log.append(("util", e, now, min(1.0, used / self.capacity[e])))

    def _alone_rate(self, flow: _Flow) -> tuple[int, float]:
        """The bottleneck link and rate of a flow with its links to itself."""
        capacity = self.capacity
        neck = flow.edges[0]
        for e in flow.edges:
            if capacity[e] < capacity[neck] or (capacity[e] == capacity[neck] and e < neck):
                neck = e
        return neck, capacity[neck] / flow.weight

    def _fill(
        self, region: dict[int, _Flow]
    ) -> tuple[dict[int, float], dict[int, int], dict[int, None]]:
        """Progressive filling of ``region``'s flows, every other flow at its current rate.

        Repeatedly take the link whose remaining capacity per unfrozen flow is the
        smallest (ties: the lowest link index), freeze its flows at that share and
        take their rate off every link they cross.  Every change pushes the link's
        new share; an entry whose share is out of date is skipped when popped.
        Returns each flow's rate and the link it was frozen at, and the links.
        """
        active, capacity = self.active, self.capacity
        links: dict[int, None] = {}
        for flow in region.values():
            for e in flow.edges:
                links[e] = None
        residual: dict[int, float] = {}
        count: dict[int, int] = {}
        heap = []
        for e in links:
            free, n = capacity[e], 0
            for fid, other in active[e].items():
                if fid in region:
                    n += other.weight
                else:
                    free -= other.rate * other.weight
            if free < 0.0:
                free = 0.0
            residual[e] = free
            count[e] = n
            heap.append((free / n, e))
        heapq.heapify(heap)
        rate: dict[int, float] = {}
        neck: dict[int, int] = {}
        todo = len(region)
        heappop, heappush = heapq.heappop, heapq.heappush
        while todo:
            share, link = heappop(heap)
            n = count[link]
            if not n or share != residual[link] / n:
                continue  # stale: a newer entry for this link is in the heap
            touched: dict[int, None] = {}
            for fid, flow in active[link].items():
                if fid in rate or fid not in region:
                    continue
                rate[fid] = share
                neck[fid] = link
                todo -= 1
                weight = flow.weight
                used = share * weight
                for e in flow.edges:
                    residual[e] -= used
                    count[e] -= weight
                    touched[e] = None
            for e in touched:  # one new share per link the frozen flows cross
                left = residual[e]
                if left < 0.0:
                    residual[e] = left = 0.0
                n = count[e]
                if n:
                    heappush(heap, (left / n, e))
        return rate, neck, links

    def _unfair(
        self,
        region: dict[int, _Flow],
        rates: dict[int, float],
        necks: dict[int, int],
        links: dict[int, None],
    ) -> dict[int, _Flow]:
        """Flows outside ``region`` that must join it for ``rates`` to be max-min fair.

        A flow inside whose freezing link carries a faster outside flow, or an
        outside flow on the region's links left without a bottleneck, shows the
        fixed rates were wrong there.  An outside flow whose last bottleneck is
        off the region's links keeps it: nothing on that link changed.
        """
        active, capacity = self.active, self.capacity
        stats: dict[int, tuple[float, float]] = {}  # link -> (load, fastest flow)

        def bottleneck_at(e: int, r: float) -> bool:
            known = stats.get(e)
            if known is None:
                load = fastest = 0.0
                for fid, f in active[e].items():
                    fr = rates[fid] if fid in region else f.rate
                    load += fr * f.weight
                    if fr > fastest:
                        fastest = fr
                known = stats[e] = (load, fastest)
            return known[0] >= capacity[e] * _SATURATED and r >= known[1] * _SATURATED

        grow: dict[int, _Flow] = {}
        for fid, f in region.items():
            r = rates[fid]
            if bottleneck_at(necks[fid], r):
                continue
            # Frozen at a link where a flow held from outside is faster: another
            # link must be its bottleneck, and is remembered as such, since the
            # skip below relies on a flow's remembered link being one.
            for e in f.edges:
                if bottleneck_at(e, r):
                    necks[fid] = e
                    break
            else:
                for e in f.edges:
                    for other_id, g in active[e].items():
                        if other_id not in region and g.rate > r:
                            grow[other_id] = g
        outside: dict[int, _Flow] = {}
        for e in links:
            for fid, g in active[e].items():
                if fid not in region:
                    outside[fid] = g
        recheck_outside(outside.items(), links, bottleneck_at, grow)
        return grow

    def _schedule(self, flow: _Flow) -> None:
        """Queue the flow's completion at its current rate (an earlier entry goes stale)."""
        flow.version += 1
        delay = math.ceil(flow.remaining * PS_PER_S / flow.rate - _ROUNDING_SLACK)
        if delay < 0:
            delay = 0
        when = self.env.now + delay
        self._seq += 1
        heapq.heappush(self._due, (when, self._seq, flow, flow.version))
        if not self._wakes or when < self._wakes[0]:
            heapq.heappush(self._wakes, when)
            self.env.schedule(self._wake_event(), simpy.events.NORMAL, delay)

    def _wake_event(self) -> simpy.Event:
        event = simpy.Event(self.env)
        event._ok = True  # noqa: SLF001 - scheduled directly, like a Timeout
        event._value = None  # noqa: SLF001
        event.callbacks.append(self._wake)
        return event

    def _wake(self, _event: simpy.Event) -> None:
        """Finish every flow due now; keep one wake-up queued for the next one due."""
        now = self.env.now
        heapq.heappop(self._wakes)
        due = self._due
        while due and due[0][0] <= now:
            _, _, flow, version = heapq.heappop(due)
            if version == flow.version and flow.done is not None:
                self._finish(flow)
        while due and due[0][2].version != due[0][3]:
            heapq.heappop(due)  # superseded: no wake-up for it
        if due and (not self._wakes or due[0][0] < self._wakes[0]):
            heapq.heappush(self._wakes, due[0][0])
            self.env.schedule(self._wake_event(), simpy.events.NORMAL, due[0][0] - now)

    def _finish(self, flow: _Flow) -> None:
        for e in flow.edges:
            del self.active[e][flow.fid]
        if self.link_log is not None:
            now = self.env.now
            entry = [("flow", e, flow.start, now, flow.size) for e in flow.edges]
            self.link_log.extend(entry * flow.weight)
        done, flow.done = flow.done, None
        _deliver(self.env, done, flow.tail)  # the last byte still has to arrive
        if self.link_log is None:  # links left idle need no rates (a trace logs them idle)
            busy = tuple(e for e in flow.edges if self.active[e])
            if busy:
                self._mark_dirty(busy)
        else:
            self._mark_dirty(flow.edges)
