"""The max-min solver on its own, without a clock: exact shares on known cases."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kernbench.machine import maxmin
from kernbench.machine.maxmin import Flow


def test_one_link_shared_equally_and_a_second_bottleneck_gives_the_rest():
    # Link 0 (6 GB/s) carries a, b, c; link 1 (1 GB/s) carries c only.
    a, b, c = Flow(0, (0,)), Flow(1, (0,)), Flow(2, (0, 1))
    maxmin.fair_rates([a, b, c], [6e9, 1e9])
    assert (c.rate, c.bottleneck) == (1e9, 1)
    assert (a.rate, a.bottleneck) == (2.5e9, 0) and b.rate == 2.5e9


def test_weight_counts_as_that_many_flows():
    single, triple = Flow(0, (0,)), Flow(1, (0,), weight=3)
    maxmin.fair_rates([single, triple], [4e9])
    assert single.rate == triple.rate == 1e9


def test_a_flow_alone_gets_its_slowest_link():
    flow = Flow(0, (2, 0, 1))
    assert maxmin.alone_rate(flow, [5.0, 3.0, 3.0]) == (1, 3.0)


def _random_case(rng: random.Random, flows: int, links: int):
    capacity = [rng.choice([1.0, 2.0, 3.0, 5.0]) * 1e9 for _ in range(links)]
    made = [
        Flow(
            i,
            tuple(sorted(rng.sample(range(links), rng.randint(1, min(3, links))))),
            rng.choice([1, 1, 2]),
        )
        for i in range(flows)
    ]
    return capacity, made


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("vector_region", [1, 10**9], ids=["arrays", "loops"])
def test_solving_a_region_from_nothing_is_the_full_solution(seed, vector_region):
    """solve_region with every flow in the region (nothing outside) agrees with fair_rates,
    in both its loop and its array form."""
    rng = random.Random(seed)
    capacity, flows = _random_case(rng, 60, 12)
    reference = [Flow(f.fid, f.edges, f.weight) for f in flows]
    maxmin.fair_rates(reference, capacity)
    active: list[dict[int, Flow]] = [{} for _ in capacity]
    for f in flows:
        for e in f.edges:
            active[e][f.fid] = f
    solved, _ = maxmin.solve_region(
        {f.fid: f for f in flows}, active, capacity, np.array(capacity), vector_region
    )
    rates = {flow.fid: rate for flow, rate, _ in solved}
    for ref in reference:
        assert rates[ref.fid] == pytest.approx(ref.rate, rel=1e-9)
    # No link is over its capacity, and every flow is held by a full link.
    for e, cap in enumerate(capacity):
        load = sum(rates[f.fid] * f.weight for f in active[e].values())
        assert load <= cap * (1 + 1e-9)


def test_a_group_sharing_one_memory_port_freezes_there_together():
    # A reduction: two reads of one memory (weight 2) and a write, all through
    # its port (link 0, 128 GB/s), each also on a link of its own to the PE.
    read, write = Flow(0, (0, 1), weight=2), Flow(1, (2, 0))
    active: list[dict[int, Flow]] = [{0: read, 1: write}, {0: read}, {1: write}]
    rates = maxmin.closed_rates({0: read, 1: write}, active, [128e9, 512e9, 512e9])
    assert rates == {0: (128e9 / 3, 0), 1: (128e9 / 3, 0)}


@pytest.mark.parametrize("seed", range(12))
def test_closed_rates_are_what_filling_gives(seed):
    """With or without a link every flow crosses, closed_rates equals fill exactly."""
    rng = random.Random(seed)
    capacity, flows = _random_case(rng, rng.randint(1, 4), 5)
    if seed % 2:  # every flow also crosses one slow link
        capacity.append(rng.choice([0.5, 1.0]) * 1e9)
        flows = [Flow(f.fid, (*f.edges, len(capacity) - 1), f.weight) for f in flows]
    group = {f.fid: f for f in flows}
    active: list[dict[int, Flow]] = [{} for _ in capacity]
    for f in flows:
        for e in f.edges:
            active[e][f.fid] = f
    rates, necks, _ = maxmin.fill(group, active, capacity)
    expected = {fid: (rates[fid], necks[fid]) for fid in group}
    assert maxmin.closed_rates(group, active, capacity) == expected


@pytest.mark.parametrize("seed", range(6))
def test_filling_by_scan_and_by_heap_give_the_same_bits(seed, monkeypatch):
    """A region's levels found by a scan over its links or from a heap of their shares:
    same rates to the last bit, same links frozen at, with rates held fixed outside."""
    rng = random.Random(seed)
    capacity, flows = _random_case(rng, 40, 20)
    for f in flows[::3]:  # the outside flows run at some fixed rate
        f.rate = rng.choice([0.1, 0.25, 0.4]) * 1e9
    active: list[dict[int, Flow]] = [{} for _ in capacity]
    for f in flows:
        for e in f.edges:
            active[e][f.fid] = f
    region = {f.fid: f for i, f in enumerate(flows) if i % 3}
    monkeypatch.setattr(maxmin, "SCAN_LINKS", 10**9)
    by_scan = maxmin.fill(region, active, capacity)
    monkeypatch.setattr(maxmin, "SCAN_LINKS", 0)
    by_heap = maxmin.fill(region, active, capacity)
    assert by_scan[0] == by_heap[0] and by_scan[1] == by_heap[1]
    assert list(by_scan[2].items()) == list(by_heap[2].items())
    assert len(set(by_scan[0].values())) > 2  # several levels were filled
