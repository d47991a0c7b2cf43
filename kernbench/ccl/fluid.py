"""Flows in time over shared links, for the cost model: max-min fair, as the fabric shares them.

A flow is bytes moving over a route of links.  Flows in flight together get
max-min fair rates (progressive filling: the link with the least capacity per
unfrozen flow freezes its flows at that share, and so on), which is how
:mod:`kernbench.fabric.flows` shares its links; rates change only when a flow
starts or ends.  :func:`follow` moves a set of flows from their start times
until every one has finished, telling the caller as each ends so that it can
start others (the next message on a channel).  Times are picoseconds, rates
bytes per picosecond.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

from kernbench.machine import maxmin

__all__ = ["Flow", "max_min", "follow"]

# A flow with fewer bytes than this left, or less than this time's worth (ps), has
# finished: what is left is float rounding.
_DONE_BYTES = 1e-6
_DONE_PS = 0.5

Capacity = Callable[[int], float]  # link -> bytes per ps


class Flow(maxmin.Flow):
    """``remaining`` bytes moving over ``edges``; ``tag`` says what it is to the caller."""

    __slots__ = ("remaining", "tag")
    _ids = itertools.count()

    def __init__(self, remaining: float, edges: tuple[int, ...], tag: Any = None) -> None:
        super().__init__(next(Flow._ids), tuple(edges))
        self.remaining = remaining
        self.tag = tag

    def done(self) -> bool:
        return self.remaining <= max(_DONE_BYTES, self.rate * _DONE_PS)


class _Capacities:
    """A capacity function read as a sequence (what the solver indexes)."""

    __slots__ = ("capacity",)

    def __init__(self, capacity: Capacity) -> None:
        self.capacity = capacity

    def __getitem__(self, link: int) -> float:
        return self.capacity(link)


def max_min(flows: list[Flow], capacity: Capacity) -> None:
    """Give every flow its max-min fair rate (in place)."""
    maxmin.fair_rates(flows, _Capacities(capacity))


def follow(
    starts: Iterable[tuple[float, Flow]],
    capacity: Capacity,
    finished: Callable[[Flow, float], Iterable[tuple[float, Flow]]],
) -> None:
    """Move flows from their start times until all have finished.

    ``finished(flow, t)`` is called when a flow's last byte has left at ``t``
    (at once for a flow with nothing to move) and returns the flows to start
    next, with their start times (not before ``t``).
    """
    order = itertools.count()
    pending = [(at, next(order), flow) for at, flow in starts]
    heapq.heapify(pending)
    active: list[Flow] = []
    now = 0.0

    def end(flow: Flow, t: float) -> None:
        for at, more in finished(flow, t):
            heapq.heappush(pending, (at, next(order), more))

    while pending or active:
        horizon = math.inf
        if active:
            max_min(active, capacity)
            horizon = now + min(f.remaining / f.rate if f.rate > 0 else math.inf for f in active)
        t = min(horizon, pending[0][0] if pending else math.inf)
        if t == math.inf:  # nothing can move any more (a link without capacity)
            return
        for f in active:
            f.remaining -= f.rate * (t - now)
        now = t
        done = [f for f in active if f.done()]
        if done:
            active = [f for f in active if not f.done()]
        for f in done:
            end(f, now)
        while pending and pending[0][0] <= now:
            f = heapq.heappop(pending)[2]
            if f.remaining <= _DONE_BYTES or not f.edges:
                end(f, now)
            else:
                active.append(f)
