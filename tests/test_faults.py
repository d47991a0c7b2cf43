"""Faults and stragglers: values stay right, time moves the way (and by what) it should."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.algorithms import get_algorithm
from kernbench.ccl.settings import ccl_settings
from kernbench.ccl.tuner import link_costs
from kernbench.errors import RouteError, TopologyError
from kernbench.topology import build_graph, load_topology

PES8 = [f"sip{r}.cube0.pe0" for r in range(8)]
HALF_SPEED = 'faults.links=[{link: "link:sip0->sip1", slowdown: 2}]'
DOWN = 'faults.links=[{link: "link:sip0->sip1", down: true}]'
STRAGGLER = 'faults.pes=[{pe: "sip3.cube0.pe0", slowdown: 50}]'


def _all_reduce(nbytes: int, check: bool) -> float | None:
    dist.init_process_group()
    rank = dist.get_rank()
    n = nbytes // 4
    t = torch.tensor(np.full(n, rank + 1, dtype=np.float32)) if check else torch.empty(n)
    for _ in range(2):  # the second call runs with the IPCQ plan installed
        if check:
            t.copy_(np.full(n, rank + 1, dtype=np.float32))
        dist.all_reduce(t, algorithm="ring")
    return float(t.numpy()[0]) if check else None


def _run(overrides: list[str], nbytes: int = 1 << 20, check: bool = True):
    result = kernbench.simulate(
        _all_reduce,
        topology="ring8",
        overrides=overrides,
        timing_only=not check,
        args=(nbytes, check),
    )
    record = result.report["collectives"][-1]
    return result, (record["end_ps"] - record["start_ps"]) / 1e12


@pytest.mark.parametrize("fault", [HALF_SPEED, DOWN, STRAGGLER], ids=["slow", "down", "pe"])
def test_values_stay_right_and_time_grows(fault):
    healthy, healthy_time = _run([])
    faulty, faulty_time = _run([fault])
    assert all(v == 36.0 for v in faulty.returns)  # 1 + 2 + ... + 8
    assert all(v == 36.0 for v in healthy.returns)
    assert faulty_time > healthy_time


def test_half_speed_link_costs_what_the_ring_model_says():
    nbytes = 64 << 20
    _, healthy_time = _run([], nbytes, check=False)
    result, slow_time = _run([HALF_SPEED], nbytes, check=False)
    # A ring moves in lock step: every step waits for the slowest message, so the
    # closed form holds with β of the half-speed link (the tuner derives it from
    # the faulty topology).
    ctx = result.context
    name, config = ccl_settings(ctx).resolve("ring")
    algo = get_algorithm("ring")
    costs = link_costs(ctx, config, algo, "all_reduce", PES8, nbytes // 8)
    expected = algo.costs["all_reduce"](8, nbytes, costs.alpha, costs.beta, costs.gamma)
    assert costs.beta == pytest.approx(1 / 25e9)
    assert abs(slow_time - expected) / expected < 0.05
    assert 1.7 < slow_time / healthy_time < 2.0  # bandwidth-bound: nearly twice as long


def test_a_link_that_is_down_is_routed_around():
    graph = build_graph(load_topology("ring8", [DOWN]))
    names = [graph.edges[i].name for i in graph.route("sip0.cube0.pe0", "sip1.cube0.pe0")]
    assert "link:sip0->sip1" not in names
    assert names[1:-1] == [
        f"link:sip{a}->sip{b}" for a, b in [(0, 7), (7, 6), (6, 5), (5, 4), (4, 3), (3, 2), (2, 1)]
    ]


def test_no_route_left_is_an_error_naming_the_link():
    both = (
        'faults.links=[{link: "link:sip0->sip1", down: true}, '
        '{link: "link:sip0->sip7", down: true}]'
    )
    with pytest.raises(RouteError, match=r"link:sip0->sip[17] is down and no other route exists"):
        _run([both], 4096, check=False)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ('faults.links=[{link: "link:sip0->sip9"}]', "faults.links.0.link"),
        ('faults.pes=[{pe: "sip0.cube0.pe7", slowdown: 2}]', "faults.pes.0.pe"),
    ],
)
def test_faults_naming_nothing_are_errors(override, key):
    with pytest.raises(TopologyError) as info:
        build_graph(load_topology("ring8", [override]))
    assert info.value.key_path == key and key in str(info.value)


def test_a_slowdown_below_one_is_rejected():
    from kernbench.errors import ConfigError

    with pytest.raises(ConfigError, match="faults.links.0.slowdown"):
        load_topology("ring8", ['faults.links=[{link: "link:sip0->sip1", slowdown: 0.5}]'])
