"""Max-min fair rates for flows sharing links: the solver every backend uses.

A *flow* moves bytes over a route of links; flows that cross one link share
its capacity max-min fairly (progressive filling: the link with the least
capacity per unfrozen flow freezes its flows at that share, takes their rate
off every link they cross, and so on).  This module is pure: flows are plain
objects with ``fid``, ``edges``, ``weight``, ``rate`` and ``bottleneck``,
links are indices into a capacity list, and nothing here knows a clock.

* :func:`fair_rates` solves a set of flows from scratch.
* :func:`solve_region` re-solves only the flows near a change (ADR 0011):
  the region is filled with every other flow's rate held fixed, then checked
  (every flow touching the region must still have a bottleneck: a saturated
  link on which no flow is faster); flows that fail the check join the region
  and it is filled again.  Regions of :data:`VECTOR_REGION` flows or more are
  filled in NumPy passes (:class:`ArrayRegion`), smaller ones with loops.

``weight`` > 1 stands for that many identical flows (same route, same start)
moving as one; they get equal rates, so one object carries them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Iterable, Sequence
from itertools import chain
from operator import attrgetter

import numpy as np

__all__ = [
    "SATURATED",
    "VECTOR_REGION",
    "Flow",
    "alone_rate",
    "closed_rates",
    "fair_rates",
    "fill",
    "unfair",
    "solve_region",
    "ArrayRegion",
    "array_fill",
    "recheck_outside",
]

# A link counts as saturated, and a flow as the fastest on it, within this
# relative margin (rates from different sums of the same capacities differ in
# their last bits).
SATURATED = 1 - 1e-9
# Regions of at least this many flows are filled with array operations: a
# level of progressive filling is then a few passes over arrays instead of a
# Python loop over every link of every flow frozen at it.
VECTOR_REGION = 128
# Regions of at most this many links find each filling level by a scan over
# them rather than a heap of their shares.
SCAN_LINKS = 40

Active = Sequence[dict[int, "Flow"]]  # per link: the flows on it, by id, in arrival order

_EDGES, _WEIGHT, _RATE, _BOTTLENECK = map(attrgetter, ("edges", "weight", "rate", "bottleneck"))


class Flow:
    """What the solver knows of a flow: its links, weight, rate and bottleneck link."""

    __slots__ = ("fid", "edges", "weight", "rate", "bottleneck")

    def __init__(self, fid: int, edges: tuple[int, ...], weight: int = 1) -> None:
        self.fid = fid
        self.edges = edges
        self.weight = weight
        self.rate = 0.0  # bytes per second
        self.bottleneck = -1  # the link it was frozen at (or checked to be held by)


def alone_rate(flow: Flow, capacity: Sequence[float]) -> tuple[int, float]:
    """The bottleneck link and rate of a flow with its links to itself."""
    neck = flow.edges[0]
    for e in flow.edges:
        if capacity[e] < capacity[neck] or (capacity[e] == capacity[neck] and e < neck):
            neck = e
    return neck, capacity[neck] / flow.weight


def closed_rates(
    group: dict[int, Flow], active: Active, capacity: Sequence[float]
) -> dict[int, tuple[float, int]]:
    """Rate and bottleneck link of each flow of a group no other flow shares a link with.

    What :func:`fill` gives, and without its passes when every flow of the
    group crosses the link filling would freeze first (a PE reading and
    writing one memory): then all freeze there, at its capacity per flow.
    """
    load: dict[int, int] = {}
    for flow in group.values():
        for e in flow.edges:
            load[e] = load.get(e, 0) + flow.weight
    share, link = min((capacity[e] / n, e) for e, n in load.items())
    if all(link in flow.edges for flow in group.values()):
        return dict.fromkeys(group, (share, link))
    rates, necks, _ = fill(group, active, capacity)
    return {fid: (rates[fid], necks[fid]) for fid in group}


def fill(
    region: dict[int, Flow], active: Active, capacity: Sequence[float]
) -> tuple[dict[int, float], dict[int, int], dict[int, list[Flow]]]:
    """Progressive filling of ``region``'s flows, every other flow at its current rate.

    Repeatedly take the link whose remaining capacity per unfrozen flow is the
    smallest (ties: the lowest link index), freeze its flows at that share and
    take their rate off every link they cross.  Returns each flow's rate and
    the link it was frozen at, and the links, each with the flows on it from
    outside the region (in arrival order).

    A region of few links (the usual re-solve around one change) finds each
    level's link by a scan; a larger one keeps the shares in a heap, where
    every change pushes the link's new share and an out-of-date entry is
    skipped when popped.  Both take the same links in the same order and do
    the same arithmetic, so they give the same bits.
    """
    links: dict[int, list[Flow]] = {}
    residual: dict[int, float] = {}
    count: dict[int, int] = {}
    members: dict[int, list[Flow]] = {}  # link -> the region's flows on it, in arrival order
    for flow in region.values():
        for e in flow.edges:
            if e in links:
                continue
            links[e] = outside = []
            free, n = capacity[e], 0
            inside = []
            for fid, other in active[e].items():
                if fid in region:
                    n += other.weight
                    inside.append(other)
                else:
                    free -= other.rate * other.weight
                    outside.append(other)
            residual[e] = free if free > 0.0 else 0.0
            count[e] = n
            members[e] = inside
    if len(links) > SCAN_LINKS:
        rate, neck = _fill_by_heap(len(region), residual, count, members)
        return rate, neck, links
    order = sorted(links)
    rate: dict[int, float] = {}
    neck: dict[int, int] = {}
    todo = len(region)
    share = 0.0
    while todo:
        link = -1
        for e in order:  # ascending, so a tie keeps the lower link
            n = count[e]
            if n:
                s = residual[e] / n
                if link < 0 or s < share:
                    share, link = s, e
        todo -= len(_freeze(members[link], share, link, rate, neck, residual, count))
    return rate, neck, links


def _freeze(
    flows: list[Flow],
    share: float,
    link: int,
    rate: dict[int, float],
    neck: dict[int, int],
    residual: dict[int, float],
    count: dict[int, int],
) -> list[Flow]:
    """Freeze the flows on ``link`` not yet frozen at ``share``, taking their rate off every
    link they cross; the flows frozen."""
    frozen = []
    for flow in flows:
        fid = flow.fid
        if fid in rate:
            continue
        rate[fid] = share
        neck[fid] = link
        frozen.append(flow)
        weight = flow.weight
        used = share * weight
        for e in flow.edges:
            left = residual[e] - used
            residual[e] = left if left > 0.0 else 0.0
            count[e] -= weight
    return frozen


def _fill_by_heap(
    todo: int,
    residual: dict[int, float],
    count: dict[int, int],
    members: dict[int, list[Flow]],
) -> tuple[dict[int, float], dict[int, int]]:
    """:func:`fill`'s levels with the links' shares in a heap (for regions of many links)."""
    heap = [(free / count[e], e) for e, free in residual.items()]
    heapq.heapify(heap)
    rate: dict[int, float] = {}
    neck: dict[int, int] = {}
    heappop, heappush = heapq.heappop, heapq.heappush
    while todo:
        share, link = heappop(heap)
        n = count[link]
        if not n or share != residual[link] / n:
            continue  # stale: a newer entry for this link is in the heap
        frozen = _freeze(members[link], share, link, rate, neck, residual, count)
        todo -= len(frozen)
        if len(frozen) == 1:  # a route crosses a link once
            touched = frozen[0].edges
        else:
            touched = dict.fromkeys(e for flow in frozen for e in flow.edges)
        for e in touched:  # one new share per link the frozen flows cross
            n = count[e]
            if n:
                heappush(heap, (residual[e] / n, e))
    return rate, neck


def unfair(
    region: dict[int, Flow],
    rates: dict[int, float],
    necks: dict[int, int],
    links: dict[int, list[Flow]],
    active: Active,
    capacity: Sequence[float],
) -> dict[int, Flow]:
    """Flows outside ``region`` that must join it for ``rates`` to be max-min fair.

    ``links`` is what :func:`fill` returns: the region's links, each with the
    flows on it from outside.  A flow inside whose freezing link carries a
    faster outside flow, or an outside flow on the region's links left without
    a bottleneck, shows the fixed rates were wrong there.  An outside flow
    whose last bottleneck is off the region's links keeps it: nothing on that
    link changed.
    """
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
        return known[0] >= capacity[e] * SATURATED and r >= known[1] * SATURATED

    grow: dict[int, Flow] = {}
    for fid, f in region.items():
        r = rates[fid]
        neck = necks[fid]
        # Filling saturated the link a flow froze at, and only the region's
        # flows cross it when no outside flow does, none of them faster: it is
        # a bottleneck without looking.
        if not links[neck] or bottleneck_at(neck, r):
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
    outside: dict[int, Flow] = {}
    for on_link in links.values():
        for g in on_link:
            outside[g.fid] = g
    if outside:
        recheck_outside(outside.items(), links, bottleneck_at, grow)
    return grow


def solve_region(
    region: dict[int, Flow],
    active: Active,
    capacity: Sequence[float],
    capacity_array: np.ndarray,
    vector_region: int = VECTOR_REGION,
) -> tuple[list[tuple[Flow, float, int]], Iterable[int]]:
    """Max-min fair rates around a change: ``(flow, rate, bottleneck)`` per flow, and the links.

    ``region`` starts as the flows on the changed links and grows as the
    fairness check requires; every flow outside keeps its rate.  A route
    crosses a link at most once, and ``active`` keeps each link's flows in
    ascending id (the fabric adds them so): then the array path sums every
    link's outside load in the order the loops do.
    """
    while True:
        arrays = None
        if len(region) >= vector_region:
            arrays = ArrayRegion(region, active, capacity_array, SATURATED)
            arrays.fill()
            grow = arrays.unfair()
        else:
            rates, necks, links = fill(region, active, capacity)
            grow = unfair(region, rates, necks, links, active, capacity)
        if not grow:
            break
        region.update(grow)
    if arrays is not None:
        solved = list(zip(arrays.flows, arrays.rate.tolist(), arrays.necks(), strict=True))
        return solved, arrays.link_list
    return [(flow, rates[fid], necks[fid]) for fid, flow in region.items()], links


def fair_rates(flows: Iterable[Flow], capacity: Sequence[float]) -> None:
    """Give every flow its max-min fair rate and bottleneck link, from scratch (in place)."""
    region = {flow.fid: flow for flow in flows}
    active: dict[int, dict[int, Flow]] = {}
    for fid, flow in region.items():
        for e in flow.edges:
            active.setdefault(e, {})[fid] = flow
    if not region:
        return
    rates, necks, _ = fill(region, _Sparse(active), capacity)
    for fid, flow in region.items():
        flow.rate, flow.bottleneck = rates[fid], necks[fid]


class _Sparse(dict):
    """Per-link flow maps for the links some flow crosses (others read as empty)."""

    def __missing__(self, key: int) -> dict[int, Flow]:
        return {}


def _pairs(flows: Sequence[Flow]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every link of every flow, flow by flow: each flow's link count, the links, and
    where each flow's links begin."""
    routes = list(map(_EDGES, flows))
    lengths = np.fromiter(map(len, routes), dtype=np.intp, count=len(routes))
    edges = np.fromiter(chain.from_iterable(routes), dtype=np.intp, count=int(lengths.sum()))
    return lengths, edges, np.concatenate(([0], np.cumsum(lengths)[:-1]))


class ArrayRegion:
    """A region's flows as (flow, link) pairs, filled progressively (ADR 0011).

    Same filling and fairness check as :func:`fill` and :func:`unfair`, with
    NumPy over (flow, link) pairs.  ``saturated`` is the relative margin within
    which a link counts as full and a flow as the fastest on it.
    """

    def __init__(
        self,
        region: dict[int, Flow],
        active: Active,
        capacity: np.ndarray,
        saturated: float,
    ) -> None:
        self.region = region
        self.active = active
        self.saturated = saturated
        flows = self.flows = list(region.values())
        n = self.n = len(flows)
        lengths, pair_edge, self.flow_start = _pairs(flows)
        weight = np.fromiter(map(_WEIGHT, flows), np.float64, n)
        self.pair_flow = np.repeat(np.arange(n), lengths)
        # Links in ascending index (ties between links go to the lower index).
        seen = np.zeros(len(capacity), dtype=bool)
        seen[pair_edge] = True
        self.link_ids = np.flatnonzero(seen)
        # Every link's local index, -1 off the region.
        local = self.local_index = np.full(len(capacity), -1, dtype=np.intp)
        local[self.link_ids] = np.arange(len(self.link_ids))
        self.pair_link = local[pair_edge]
        self.link_list: list[int] = self.link_ids.tolist()
        self.local = dict(zip(self.link_list, range(len(self.link_list)), strict=True))
        self.all_capacity = capacity
        self.capacity = capacity[self.link_ids]
        self.pair_weight = weight[self.pair_flow]
        self._hold_outside(region, active)
        self.rate = np.empty(n)
        self.local_neck = np.empty(n, dtype=np.intp)  # each flow's bottleneck, a local index

    def _hold_outside(self, region: dict[int, Flow], active: Active) -> None:
        """The flows on the region's links from outside it, their load and the fastest of them.

        A link's flows are kept in arrival order, which is ascending id, so
        summing the outside flows' pairs id by id (``bincount`` adds in order)
        is the same sum, term for term, as walking each link's flows.  The
        outside flows are listed as that walk meets them: by the first region
        link they cross, then by id.
        """
        n_links = len(self.link_ids)
        members = np.bincount(self.pair_link, minlength=n_links)
        link_list, active_at = self.link_list, self.active.__getitem__
        crowd = np.fromiter(map(len, map(active_at, link_list)), np.intp, n_links)
        self.outside: dict[int, Flow] = {}
        self.out_load = np.zeros(n_links)
        self.out_fast = np.zeros(n_links)
        self.out_rate = np.zeros(0)
        crowded = np.flatnonzero(crowd != members).tolist()
        if not crowded:
            return
        pool: dict[int, Flow] = {}
        for j in crowded:
            pool.update(active_at(link_list[j]))
        ids = sorted(pool.keys() - region.keys())
        flows = [pool[fid] for fid in ids]
        lengths, pair_edge, starts = _pairs(flows)
        pair_local = self.local_index[pair_edge]
        pair_flow = np.repeat(np.arange(len(flows)), lengths)
        rate = np.fromiter(map(_RATE, flows), np.float64, len(flows))
        used = rate * np.fromiter(map(_WEIGHT, flows), np.float64, len(flows))
        inside = pair_local >= 0
        on, by = pair_local[inside], pair_flow[inside]
        self.out_load = np.bincount(on, weights=used[by], minlength=n_links)
        np.maximum.at(self.out_fast, on, rate[by])
        first = np.minimum.reduceat(np.where(inside, pair_local, n_links), starts)
        order = np.argsort(first, kind="stable").tolist()
        self.outside = {ids[i]: flows[i] for i in order}
        self.out_rate = rate[order]

    def necks(self) -> list[int]:
        """Each flow's bottleneck link (after :meth:`fill` and :meth:`unfair`)."""
        return self.link_ids[self.local_neck].tolist()

    def fill(self) -> None:
        """Progressive filling, freezing every link that is at its level at once.

        Filling freezes links in order of their share (remaining capacity per
        unfrozen flow), and freezing a link only raises the shares of the
        links its flows cross.  So a link whose share no unfrozen flow on it
        beats elsewhere freezes at that share whatever freezes before it; each
        pass freezes all such links (a flow on two of them, tied, takes the
        lower link index as its bottleneck).
        """
        self.rate, self.local_neck = array_fill(
            self.pair_link,
            self.pair_flow,
            self.pair_weight,
            self.flow_start,
            np.maximum(self.capacity - self.out_load, 0.0),
            self.n,
        )

    def unfair(self) -> dict[int, Flow]:
        """The flows outside that must join the region (as :func:`unfair`)."""
        pair_link, pair_flow = self.pair_link, self.pair_flow
        rate, margin = self.rate, self.saturated
        pair_rate = rate[pair_flow]
        load = self.out_load + np.bincount(
            pair_link, weights=pair_rate * self.pair_weight, minlength=len(self.link_ids)
        )
        fast = self.out_fast.copy()
        np.maximum.at(fast, pair_link, pair_rate)
        full = load >= self.capacity * margin
        held = full[pair_link] & (pair_rate >= fast[pair_link] * margin)
        has_neck = np.logical_or.reduceat(held, self.flow_start)
        # A flow frozen at a link where an outside flow is faster remembers
        # one of its links that is a bottleneck instead (see unfair()).
        n_links = len(self.link_ids)
        at_neck = self.local_neck
        moved = has_neck & ~(full[at_neck] & (rate >= fast[at_neck] * margin))
        if moved.any():
            first = np.minimum.reduceat(np.where(held, pair_link, n_links), self.flow_start)
            at_neck[moved] = first[moved]
        active, region = self.active, self.region
        grow: dict[int, Flow] = {}
        # A flow without one is squeezed by faster flows held from outside: on
        # its links whose fastest outside flow beats it, those flows join.
        squeezed = ~has_neck[pair_flow] & (self.out_fast[pair_link] > pair_rate)
        for j, r in zip(pair_link[squeezed].tolist(), pair_rate[squeezed].tolist(), strict=True):
            for other_id, g in active[self.link_list[j]].items():
                if other_id not in region and g.rate > r:
                    grow[other_id] = g
        if not self.outside:
            return grow
        local, all_capacity = self.local, self.all_capacity
        full_list, fast_list = full.tolist(), fast.tolist()

        def bottleneck_at(e: int, r: float) -> bool:
            j = local.get(e)
            if j is not None:
                return full_list[j] and r >= fast_list[j] * margin
            load = fastest = 0.0  # a link off the region: every flow on it holds its rate
            for f in active[e].values():
                load += f.rate * f.weight
                fastest = max(fastest, f.rate)
            return load >= all_capacity[e] * margin and r >= fastest * margin

        # recheck_outside, its first test over arrays: a flow whose remembered
        # bottleneck is off the region's links, or still one, keeps its rate.
        flows = list(self.outside.values())
        neck = np.fromiter(map(_BOTTLENECK, flows), np.intp, len(flows))
        at = np.where(neck >= 0, self.local_index[neck], -1)
        on = np.maximum(at, 0)
        kept = (at < 0) | (full[on] & (self.out_rate >= fast[on] * margin))
        recheck_outside(
            ((flows[i].fid, flows[i]) for i in np.flatnonzero(~kept).tolist()),
            local,
            bottleneck_at,
            grow,
        )
        return grow


def array_fill(
    pair_link: np.ndarray,
    pair_flow: np.ndarray,
    pair_weight: np.ndarray,
    flow_start: np.ndarray,
    free: np.ndarray,
    n: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Progressive filling over (flow, link) pairs: each flow's rate and bottleneck (local index).

    ``pair_link``/``pair_flow``/``pair_weight`` list every link of every flow,
    flow by flow (``flow_start`` is where each flow's pairs begin); links are
    numbered 0..len(free)-1 and ``free`` is what each has for these flows.
    Every link that is at its level freezes in the same pass (see
    :meth:`ArrayRegion.fill`); ties go to the lower link index.
    """
    n_links = len(free)
    free = free.astype(np.float64, copy=True)
    count = np.bincount(pair_link, weights=pair_weight, minlength=n_links)
    rate = np.empty(n)
    neck = np.empty(n, dtype=np.intp)
    unfrozen = np.ones(n, dtype=bool)
    todo = n
    with np.errstate(divide="ignore", invalid="ignore"):
        while todo:
            share = np.where(count > 0, free / count, np.inf)
            pair_share = share[pair_link]
            lowest = np.minimum.reduceat(pair_share, flow_start)  # per flow
            live = unfrozen[pair_flow]
            blocked = live & (lowest[pair_flow] < pair_share)
            ready = (count > 0) & (np.bincount(pair_link[blocked], minlength=n_links) == 0)
            candidate = np.where(live & ready[pair_link], pair_link, n_links)
            at = np.minimum.reduceat(candidate, flow_start)  # lowest ready link per flow
            frozen = at < n_links
            rate[frozen] = lowest[frozen]
            neck[frozen] = at[frozen]
            unfrozen &= ~frozen
            todo -= int(np.count_nonzero(frozen))
            pairs = frozen[pair_flow]
            links_hit = pair_link[pairs]
            w = pair_weight[pairs]
            count -= np.bincount(links_hit, weights=w, minlength=n_links)
            used = w * lowest[pair_flow[pairs]]
            free -= np.bincount(links_hit, weights=used, minlength=n_links)
            np.maximum(free, 0.0, out=free)
    return rate, neck


def recheck_outside(
    outside: Iterable[tuple[int, Flow]],
    region_links: Container[int],
    bottleneck_at: Callable[[int, float], bool],
    grow: dict[int, Flow],
) -> None:
    """Outside flows keep their rates while their remembered bottleneck holds.

    One whose remembered link is off the region's links keeps it: nothing on
    that link changed.  One whose link is on them and no longer a bottleneck
    remembers another of its links that is, or else joins ``grow``.
    """
    for fid, g in outside:
        if g.bottleneck not in region_links or bottleneck_at(g.bottleneck, g.rate):
            continue
        for e in g.edges:
            if bottleneck_at(e, g.rate):
                g.bottleneck = e
                break
        else:
            grow[fid] = g
