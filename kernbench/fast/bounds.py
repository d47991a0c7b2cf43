"""Bounds on what the evaluator's rounds do not see: flows of one round overlapping
other rounds' when ranks drift apart or channels keep a backlog (ADR 0015), and the
way back of an IPCQ credit."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np

from kernbench.fast.tables import MESSAGES, Column, Tables, message_parts, to_ps
from kernbench.machine.programs import Op

__all__ = ["Extreme", "credit_ps", "crowded_rates", "periodic"]


def credit_ps(tables: Tables, pes: list[str], peer: np.ndarray) -> np.ndarray:
    """Per sending row, the latency of the route from its receiver back to it: how
    long an IPCQ credit takes to come back (the fabric's channel model)."""
    routes = np.fromiter(
        (tables.route_of(pes[q], pes[r]) for r, q in enumerate(peer.tolist())),
        dtype=np.intp,
        count=len(peer),
    )
    return tables.arrays()[0][routes]


def crowded_rates(
    tables: Tables,
    shape: list[list[Column]],
    slot: dict[tuple[int, int], tuple],
    n: int,
    nodes: set[tuple[int, int]],
) -> np.ndarray:
    """Per route id, the least rate max-min sharing can leave a flow on it, whenever
    the flows of the operations ``nodes`` overlap.

    A channel moves one message at a time and a rank one stream, so at no moment do
    more flows cross a link than the channels whose routes cross it plus, per rank,
    the most flows one of its streams sends across it; max-min sharing gives every
    flow at least its links' capacity over that count.
    """
    edges = tables.edges()
    links = len(tables.capacity)
    by_slot: dict[tuple, dict[int, np.ndarray]] = defaultdict(dict)
    streams: dict[int, tuple[tuple[np.ndarray, np.ndarray], ...]] = {}
    for s, k in nodes:
        col = shape[s][k]
        if col.kind in MESSAGES:
            by_slot[slot[(s, k)]].setdefault(id(col.route), col.route)
        elif col.kind == Op.STREAM and col.flows:
            streams.setdefault(id(col.flows), col.flows)
    rows = np.arange(n, dtype=np.int64)

    def places(routes: list[np.ndarray]) -> np.ndarray:
        hops = np.concatenate([edges[route] for route in routes], axis=1)
        return (rows[:, None] * links + hops)[hops >= 0]

    crowd = np.zeros(links, dtype=np.int64)
    for group in by_slot.values():
        # A channel is on a (row's) link or not.
        crowd += np.bincount(np.unique(places(list(group.values()))) % links, minlength=links)
    if streams:
        # Per (row, link): the most flows one stream puts there.
        keys, counts = zip(
            *(
                np.unique(places([route for route, _ in flows]), return_counts=True)
                for flows in streams.values()
            ),
            strict=True,
        )
        key = np.concatenate(keys)
        count = np.concatenate(counts)
        order = np.lexsort((-count, key))
        key, count = key[order], count[order]
        first = np.r_[True, key[1:] != key[:-1]]
        crowd += np.bincount(key[first] % links, weights=count[first], minlength=links).astype(
            np.int64
        )
    per_link = tables.capacity / np.maximum(crowd, 1)
    padded = np.where(edges >= 0, per_link[np.maximum(edges, 0)], np.inf)
    return padded.min(axis=1) if padded.shape[1] else np.full(len(edges), np.inf)


class Extreme:
    """Rounds (by their place among the rounds that move data: ``region``) priced with
    every flow at a fixed rate per route, whatever overlaps it: the least sharing
    can leave it (:func:`crowded_rates`, a bound above) or its bottleneck alone (a
    bound below)."""

    def __init__(
        self, tables: Tables, region: range, rate: np.ndarray, pick: Callable[..., np.ndarray]
    ) -> None:
        self.tables = tables
        self.region = region
        self.pick = pick  # of rows a period apart: the largest (a bound above) or least
        self.rate = rate
        self._priced: dict[tuple, tuple] = {}

    def price(self, base: tuple, messages: list[Column], streams: list[Column], m: int) -> tuple:
        known = self._priced.get(base)
        if known is None:
            times = [
                tuple(
                    periodic(part, m, self.pick)
                    for part in message_parts(self.tables, c.route, c.nbytes, self.rate[c.route])
                )
                for c in messages
            ]
            stream_times: list[np.ndarray | None] = []
            for c in streams:
                if not c.flows:
                    stream_times.append(None)
                    continue
                seconds = np.max(
                    np.stack([size / self.rate[route] for route, size in c.flows]), axis=0
                )
                stream_times.append(periodic(to_ps(seconds), m, self.pick))
            known = self._priced[base] = (times, stream_times)
        return known


def periodic(values: np.ndarray, m: int, pick: Callable[..., np.ndarray]) -> np.ndarray:
    """``pick`` (np.max or np.min) of ``values`` at rows ``m`` apart, for every row: a
    bound above or below that a fold keeps."""
    n = len(values)
    if m >= n:
        return values
    return np.tile(pick(values.reshape(-1, m), axis=0), n // m)
