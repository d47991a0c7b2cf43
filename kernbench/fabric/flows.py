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

from kernbench.machine import maxmin
from kernbench.machine.api import ROUNDING_SLACK, RouteCost
from kernbench.machine.observe import FlowStarted, LinkBusy, LinkLoad, Observers
from kernbench.topology.graph import Edge
from kernbench.units import PS_PER_S

__all__ = ["Delivery", "FlowNetwork", "Timer"]


class Delivery(simpy.Event):
    """The event a transfer hands out: it fires when the last byte has arrived.

    It is triggered and scheduled in one step once the arrival time is known,
    the way ``simpy.Timeout`` schedules itself, which saves a timeout and a
    callback per transfer on the hot path.
    """

    __slots__ = ()

    def fire_after(self, delay: int) -> None:
        """Succeed ``delay`` picoseconds from now (at once for no delay)."""
        if not delay:
            self.succeed()
            return
        self._ok = True
        self._value = None
        self.env.schedule(self, simpy.events.NORMAL, delay)


class Timer(simpy.Event):
    """An event that calls ``callback(event)`` ``delay`` picoseconds from now.

    The fabric's own timers (completions, rebalances, α, route tails) are
    queued like ``env.timeout(delay)`` with one callback, so they fire in the
    same order, but without a timeout's callback list built empty and
    appended to, and a closure per timer.
    """

    def __init__(self, env: simpy.Environment, delay: int, callback: Callable) -> None:
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        self.env = env
        self.callbacks = [callback]
        self._ok = True
        self._value = None
        env.schedule(self, simpy.events.NORMAL, delay)


def _deliver(env: simpy.Environment, done: simpy.Event | Callable[[], None], delay: int) -> None:
    """Fire the delivery (or succeed the event, or call the callable) ``delay`` ps from now."""
    if isinstance(done, Delivery):
        done.fire_after(delay)
    elif isinstance(done, simpy.Event):
        if delay:
            Timer(env, delay, lambda _ev: done.succeed())
        else:
            done.succeed()
    elif not delay:
        done()
    else:
        Timer(env, delay, lambda _ev: done())


class _Flow(maxmin.Flow):
    """A flow in progress: the solver's view plus how far it has got."""

    __slots__ = ("remaining", "updated", "version", "done", "start", "size", "tail")

    def __init__(
        self, fid: int, edges: tuple[int, ...], nbytes: int, now: int, weight: int = 1
    ) -> None:
        # ``weight`` identical flows (same route, size and start) moving as one:
        # max-min fairness gives them equal rates, so they finish together.
        # (The solver's fields are set here rather than by a super() call: a
        # flow is made per transfer, millions of times in a large collective.)
        self.fid = fid
        self.edges = edges
        self.weight = weight
        self.rate = 0.0
        self.bottleneck = -1
        self.size = nbytes
        self.remaining = float(nbytes)
        self.updated = now
        self.version = 0
        self.done: simpy.Event | Callable[[], None] | None = None
        self.start = now
        self.tail = 0  # route latency and packet fill still due after the last byte leaves


class FlowNetwork:
    """Bandwidth sharing over a fixed set of directed links."""

    def __init__(
        self,
        env: simpy.Environment,
        edges: Sequence[Edge],
        packet_bytes: int,
        observers: Observers | None = None,
    ) -> None:
        self.env = env
        self.edges = edges
        self.packet_bytes = packet_bytes
        self.capacity = [float(e.bandwidth) for e in edges]
        # Insertion-ordered dicts keep every iteration deterministic.
        self.active: list[dict[int, _Flow]] = [{} for _ in edges]
        self._next_fid = 0
        self.flows_started = 0
        self._route_costs: dict[tuple[int, ...], RouteCost] = {}
        self._dirty: set[int] = set()
        self._rebalance_pending = False
        # Links a group of streams solved at once would have marked, and when.
        self._held: tuple[int, list[int]] | None = None
        # Flow completions: per time, the (flow, version) entries in the order
        # they were queued (stale entries are skipped), a heap of those times,
        # and the times of the wake-ups queued in SimPy (at most one is needed
        # per distinct earliest completion).  Symmetric flows finish at the same
        # picosecond, so a bucket per time keeps the heap small and its keys ints.
        self._due: dict[int, list[tuple[_Flow, int]]] = {}
        self._due_times: list[int] = []
        self._wakes: list[int] = []
        # Hooks taking flow starts, link busy spans and link loads (observe.py).
        self.observers = observers if observers is not None else Observers()
        self.vector_region = maxmin.VECTOR_REGION
        self._capacity_array = np.array(self.capacity, dtype=np.float64)

    def route_cost(self, route: tuple[int, ...]) -> RouteCost:
        cost = self._route_costs.get(route)
        if cost is None:
            cost = RouteCost([self.edges[i] for i in route])
            self._route_costs[route] = cost
        return cost

    def transfer(
        self, route: tuple[int, ...], nbytes: int, *, stream: bool = False, after: int = 0
    ) -> Delivery:
        """An event that fires when the last byte has arrived at the route's end (``after``
        ps later, for work that follows the arrival: one timer for both).

        ``stream=True`` charges bandwidth only (no latency, no packet fill): a
        PE streaming data through its memory with the access latency hidden.
        """
        delivered = Delivery(self.env)
        self.start(route, nbytes, delivered, stream=stream, after=after)
        return delivered

    def start(
        self,
        route: tuple[int, ...],
        nbytes: int,
        done: simpy.Event | Callable[[], None],
        *,
        stream: bool = False,
        weight: int = 1,
        after: int = 0,
    ) -> None:
        """Move ``nbytes`` over ``route``; then succeed ``done`` (an event) or call it.

        A callable is called at the instant the last byte arrives, from inside
        the simulation loop, and must only start work (flows, timers, events).
        ``weight`` > 1 moves that many copies of the transfer side by side, as
        separate flows sharing the links would (a PE reading two buffers in
        the same memory, say), for the cost of one.  ``after`` > 0 succeeds or
        calls ``done`` that many picoseconds after the arrival instead (work
        the receiver does on the data, with one timer for both).
        """
        env = self.env
        if not route:
            _deliver(env, done, after)
            return
        if stream:
            tail = after
        else:
            cost = self._route_costs.get(route) or self.route_cost(route)
            tail = cost.tail_ps(nbytes, self.packet_bytes) + after
        if nbytes <= 0:
            _deliver(env, done, tail)
            return
        self.flows_started += weight
        fid = self._next_fid
        self._next_fid = fid + 1
        flow = _Flow(fid, route, nbytes, env.now, weight)
        flow.done = done
        flow.tail = tail
        active = self.active
        observers = self.observers
        if observers.flow:
            record = FlowStarted(route, nbytes * weight)
            for hook in observers.flow:
                hook(record)
        # A trace of link loads rebalances even idle links, to log their load.
        idle = not observers.link_load
        if idle:
            for e in route:
                if active[e]:
                    idle = False
                    break
        for e in route:
            active[e][fid] = flow
        if idle:
            # Alone on its links: its rate is known now, no rebalance needed.  A
            # flow joining later (even at this instant) rebalances it as usual.
            flow.bottleneck, flow.rate = maxmin.alone_rate(flow, self.capacity)
            self._schedule(flow)
        else:
            self._mark_dirty(route)

    def start_streams(
        self, streams: Sequence[tuple[tuple[int, ...], int, int]], done: Callable[[], None]
    ) -> None:
        """Start PE streams ``(route, nbytes, weight)`` together; each calls ``done`` when it ends.

        The same as :meth:`start` with ``stream=True`` for each in turn, but
        when no other flow crosses their links (a reduction reading and
        writing one memory, say) they are solved at once, as the closed group
        the rebalance at the end of this instant would solve, instead of
        marking their links.  If anything else changes at this instant, the
        links they would have marked are marked after all, so every rebalance
        solves what it would have.  (Their completions are queued now rather
        than at the rebalance: same-instant order, no time, differs.)
        """
        active, observers = self.active, self.observers
        if (
            len(streams) < 2
            or self._rebalance_pending
            or observers.link_load
            or observers.flow
            or any(not route or nbytes <= 0 for route, nbytes, _ in streams)
            or any(active[e] for route, _, _ in streams for e in route)
        ):
            for route, nbytes, weight in streams:
                self.start(route, nbytes, done, stream=True, weight=weight)
            return
        now = self.env.now
        group: dict[int, _Flow] = {}
        marked: list[int] = []  # the links start() would have marked
        for route, nbytes, weight in streams:
            self.flows_started += weight
            fid = self._next_fid
            self._next_fid = fid + 1
            flow = _Flow(fid, route, nbytes, now, weight)
            flow.done = done
            if any(active[e] for e in route):
                marked.extend(route)
            for e in route:
                active[e][fid] = flow
            group[fid] = flow
        if not marked:  # disjoint: each alone on its links, as start() would see it
            for flow in group.values():
                flow.bottleneck, flow.rate = maxmin.alone_rate(flow, self.capacity)
                self._schedule(flow)
            return
        for fid, (rate, neck) in maxmin.closed_rates(group, active, self.capacity).items():
            flow = group[fid]
            flow.rate, flow.bottleneck = rate, neck
            self._schedule(flow)
        held = self._held
        if held is not None and held[0] == now:  # another group solved at this instant
            held[1].extend(marked)
        else:
            self._held = (now, marked)

    def _mark_dirty(self, edges: Sequence[int]) -> None:
        """Rebalance once per instant, after every flow starting or ending now has.

        Many flows often start or end at the same picosecond (a collective step,
        shards written together); one rebalance for all of them keeps that
        linear instead of quadratic in events.  The zero-delay timer is queued
        behind every event already due now, so those flows are all counted.
        """
        self._dirty.update(edges)
        if not self._rebalance_pending:
            self._rebalance_pending = True
            Timer(self.env, 0, self._rebalance_dirty)
            held = self._held
            if held is not None:  # a group solved at once this instant: its links too
                self._held = None
                if held[0] == self.env.now:
                    self._dirty.update(held[1])

    def _rebalance_dirty(self, _event: simpy.Event) -> None:
        self._rebalance_pending = False
        dirty, self._dirty = tuple(sorted(self._dirty)), set()
        self._rebalance(dirty)
        if self.observers.link_load:
            now = self.env.now
            for e in dirty:
                if not self.active[e]:
                    self._load(e, now, 0.0)

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
        solved, links = maxmin.solve_region(
            region, self.active, self.capacity, self._capacity_array, self.vector_region
        )
        for flow, rate, neck in solved:
            flow.bottleneck = neck
            if rate != flow.rate or flow.version == 0:
                if flow.rate:  # bank progress made at the old rate
                    flow.remaining -= flow.rate * (now - flow.updated) / PS_PER_S
                flow.updated = now
                flow.rate = rate
                self._schedule(flow)
        if self.observers.link_load:
            for e in links:
                used = sum(f.rate * f.weight for f in self.active[e].values())
                self._load(e, now, min(1.0, used / self.capacity[e]))

    def _load(self, edge: int, now: int, utilisation: float) -> None:
        record = LinkLoad(edge, now, utilisation)
        for hook in self.observers.link_load:
            hook(record)

    def _schedule(self, flow: _Flow) -> None:
        """Queue the flow's completion at its current rate (an earlier entry goes stale)."""
        flow.version = version = flow.version + 1
        delay = math.ceil(flow.remaining * PS_PER_S / flow.rate - ROUNDING_SLACK)
        if delay < 0:
            delay = 0
        when = self.env.now + delay
        bucket = self._due.get(when)
        if bucket is None:
            self._due[when] = [(flow, version)]
            heapq.heappush(self._due_times, when)
        else:
            bucket.append((flow, version))
        wakes = self._wakes
        if not wakes or when < wakes[0]:
            heapq.heappush(wakes, when)
            Timer(self.env, delay, self._wake)

    def _wake(self, _event: simpy.Event) -> None:
        """Finish every flow due now; keep one wake-up queued for the next one due."""
        now = self.env.now
        wakes, due, times = self._wakes, self._due, self._due_times
        heapq.heappop(wakes)
        # Entries in (time, queued) order, as one heap of (time, order) would give.
        while times and times[0] <= now:
            for flow, version in due.pop(heapq.heappop(times)):
                if version == flow.version and flow.done is not None:
                    self._finish(flow)
        while times:  # a time whose entries are all superseded needs no wake-up
            if any(version == flow.version for flow, version in due[times[0]]):
                break
            del due[heapq.heappop(times)]
        if times and (not wakes or times[0] < wakes[0]):
            heapq.heappush(wakes, times[0])
            Timer(self.env, times[0] - now, self._wake)

    def _finish(self, flow: _Flow) -> None:
        active, fid, edges = self.active, flow.fid, flow.edges
        for e in edges:
            del active[e][fid]
        observers = self.observers
        if observers.link_busy:
            now = self.env.now
            spans = [LinkBusy(e, flow.start, now, flow.size) for e in flow.edges] * flow.weight
            for record in spans:
                for hook in observers.link_busy:
                    hook(record)
        done, flow.done = flow.done, None
        _deliver(self.env, done, flow.tail)  # the last byte still has to arrive
        if not observers.link_load:  # links left idle need no rates (a trace logs them idle)
            busy = [e for e in edges if active[e]]
            if busy:
                self._mark_dirty(busy)
        else:
            self._mark_dirty(edges)
