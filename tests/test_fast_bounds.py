"""The bounds the fast backend prices drifting and pipelined rounds with (ADR 0015)."""

from __future__ import annotations

import types

import numpy as np

from kernbench.fast.bounds import crowded_rates, periodic
from kernbench.fast.tables import Column, Tables
from kernbench.machine.programs import Op

# Three links: 0 and 1 of 100 B/s, 2 of 60 B/s.
_ROUTES = {("a", "b"): (0, 1), ("c", "b"): (1,), ("a", "m"): (2,), ("c", "m"): (2,)}


def _tables() -> Tables:
    capacity = np.array([100.0, 100.0, 60.0])

    def cost(path: tuple[int, ...]) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            latency_ps=10 * len(path),
            bottleneck=min((capacity[i] for i in path), default=0),
            fill_ps_per_byte=0.0,
        )

    return Tables(
        route=lambda src, dst: _ROUTES[(src, dst)],
        route_cost=cost,
        capacity=capacity,
        packet_bytes=4096,
        endpoint_overhead_ps=0,
        vector_flops_per_s=lambda pe: 1,
    )


def test_crowded_rates_divide_each_link_among_everything_that_may_cross_it() -> None:
    """Two ranks' channels cross link 1 (one of them link 0 too), and each rank's
    stream puts two flows on link 2: no flow can get less than link 1's capacity over
    2, or link 2's over 4 (two ranks, two flows each)."""
    tables = _tables()
    ab, cb = tables.route_of("a", "b"), tables.route_of("c", "b")
    am, cm = tables.route_of("a", "m"), tables.route_of("c", "m")
    send = Column(Op.POST, route=np.array([ab, cb]), nbytes=np.array([8, 8]))
    again = Column(Op.POST, route=np.array([ab, cb]), nbytes=np.array([8, 8]))
    routes = np.array([am, cm])
    stream = Column(Op.STREAM, flows=((routes, np.array([4, 4])), (routes, np.array([4, 4]))))
    shape = [[send, again, stream]]
    # ``send`` and ``again`` are one channel (one message at a time on it)
    slot = {(0, 0): "ch", (0, 1): "ch"}
    rates = crowded_rates(tables, shape, slot, 2, {(0, 0), (0, 1), (0, 2)})
    assert rates[ab] == rates[cb] == 50.0
    assert rates[am] == rates[cm] == 15.0
    # two channels of their own on the same routes: link 1 carries four
    rates = crowded_rates(tables, shape, {(0, 0): "x", (0, 1): "y"}, 2, {(0, 0), (0, 1)})
    assert rates[ab] == rates[cb] == 25.0
    # nothing outside ``nodes`` counts: link 2 free of streams is the flow's alone
    assert rates[am] == 60.0


def test_periodic_bounds_keep_a_fold() -> None:
    values = np.array([5, 1, 7, 3])
    assert periodic(values, 2, np.max).tolist() == [7, 3, 7, 3]
    assert periodic(values, 2, np.min).tolist() == [5, 1, 5, 1]
    assert periodic(values, 4, np.max) is values
