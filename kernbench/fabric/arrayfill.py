"""Max-min filling of a large region of flows in array passes (ADR 0011).

:class:`~kernbench.fabric.flows.FlowNetwork` re-solves rates around a change
with Python loops, which is fastest for the handful of flows a change usually
touches.  When many flows share one bottleneck (a switch uplink carrying a
flow per rank) every change re-solves all of them; this module does the same
filling and the same fairness check with NumPy over (flow, link) pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from kernbench.fabric.flows import _Flow

__all__ = ["ArrayRegion", "recheck_outside"]


class ArrayRegion:
    """A region's flows as (flow, link) pairs, filled progressively.

    ``saturated`` is the relative margin within which a link counts as full
    and a flow as the fastest on it (the flow network's ``_SATURATED``).
    """

    def __init__(
        self,
        region: dict[int, _Flow],
        active: Sequence[dict[int, Any]],
        capacity: np.ndarray,
        saturated: float,
    ) -> None:
        self.region = region
        self.active = active
        self.saturated = saturated
        flows = self.flows = list(region.values())
        n = self.n = len(flows)
        routes = [f.edges for f in flows]
        lengths = np.fromiter(map(len, routes), dtype=np.intp, count=n)
        n_pairs = int(lengths.sum())
        pair_edge = np.fromiter(chain.from_iterable(routes), dtype=np.intp, count=n_pairs)
        weight = np.array([f.weight for f in flows], dtype=np.float64)
        self.pair_flow = np.repeat(np.arange(n), lengths)
        self.flow_start = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        # Links in ascending index (ties between links go to the lower index).
        seen = np.zeros(len(capacity), dtype=bool)
        seen[pair_edge] = True
        self.link_ids = np.flatnonzero(seen)
        local = np.empty(len(capacity), dtype=np.intp)
        local[self.link_ids] = np.arange(len(self.link_ids))
        self.pair_link = local[pair_edge]
        self.link_list: list[int] = self.link_ids.tolist()
        self.local = dict(zip(self.link_list, range(len(self.link_list)), strict=True))
        self.all_capacity = capacity
        self.capacity = capacity[self.link_ids]
        self.pair_weight = weight[self.pair_flow]
        # Flows outside the region hold their rates: their load and the fastest of them.
        n_links = len(self.link_ids)
        members = np.bincount(self.pair_link, minlength=n_links)
        crowd = np.fromiter(map(len, map(active.__getitem__, self.link_list)), np.intp, n_links)
        self.outside: dict[int, _Flow] = {}
        self.out_load = np.zeros(n_links)
        self.out_fast = np.zeros(n_links)
        for j in np.flatnonzero(crowd != members).tolist():
            load = fast = 0.0
            for fid, other in active[self.link_list[j]].items():
                if fid not in region:
                    self.outside[fid] = other
                    load += other.rate * other.weight
                    if other.rate > fast:
                        fast = other.rate
            self.out_load[j] = load
            self.out_fast[j] = fast
        self.rate = np.empty(n)
        self.local_neck = np.empty(n, dtype=np.intp)  # each flow's bottleneck, a local index

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
        pair_link, pair_flow, pair_weight = self.pair_link, self.pair_flow, self.pair_weight
        flow_start, n_links = self.flow_start, len(self.link_ids)
        count = np.bincount(pair_link, weights=pair_weight, minlength=n_links)
        free = np.maximum(self.capacity - self.out_load, 0.0)
        unfrozen = np.ones(self.n, dtype=bool)
        todo = self.n
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
                self.rate[frozen] = lowest[frozen]
                self.local_neck[frozen] = at[frozen]
                unfrozen &= ~frozen
                todo -= int(np.count_nonzero(frozen))
                pairs = frozen[pair_flow]
                links_hit = pair_link[pairs]
                w = pair_weight[pairs]
                count -= np.bincount(links_hit, weights=w, minlength=n_links)
                used = w * lowest[pair_flow[pairs]]
                free -= np.bincount(links_hit, weights=used, minlength=n_links)
                np.maximum(free, 0.0, out=free)

    def unfair(self) -> dict[int, _Flow]:
        """The flows outside that must join the region (``FlowNetwork._unfair``)."""
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
        # one of its links that is a bottleneck instead (see FlowNetwork._unfair).
        n_links = len(self.link_ids)
        at_neck = self.local_neck
        moved = has_neck & ~(full[at_neck] & (rate >= fast[at_neck] * margin))
        if moved.any():
            first = np.minimum.reduceat(np.where(held, pair_link, n_links), self.flow_start)
            at_neck[moved] = first[moved]
        active, region = self.active, self.region
        grow: dict[int, _Flow] = {}
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

        recheck_outside(self.outside.items(), local, bottleneck_at, grow)
        return grow


def recheck_outside(
    outside: Iterable[tuple[int, _Flow]],
    region_links: Container[int],
    bottleneck_at: Callable[[int, float], bool],
    grow: dict[int, _Flow],
) -> None:
    """Outside flows keep their rates while their remembered bottleneck holds.

    One whose remembered link is off the region's links keeps it: nothing on
    that link changed.  One whose link is on them and no longer a bottleneck
    remembers another of its links that is, or else joins ``grow``.
    """
    for fid, g in outside:
        if g.neck not in region_links or bottleneck_at(g.neck, g.rate):
            continue
        for e in g.edges:
            if bottleneck_at(e, g.rate):
                g.neck = e
                break
        else:
            grow[fid] = g
