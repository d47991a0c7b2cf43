"""Collective timings against the closed-form α-β-γ costs of reference/collective-costs.md.

α, β and γ are derived from the topology's own parameters by
``kernbench.ccl.tuner.link_costs`` (ADR 0008); with one chunk the simulated
time of the algorithm (from its start on the PEs to its end, second call so
the IPCQ plan is installed) must be within 1% of the closed form.
"""

from __future__ import annotations

import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.algorithms import algorithms, get_algorithm
from kernbench.ccl.settings import ccl_settings
from kernbench.ccl.tuner import link_costs, message_bytes, predict

SIZES = [4 << 10, 1 << 20, 64 << 20]
PES8 = [f"sip{r}.cube0.pe0" for r in range(8)]


def _collective(op: str, algorithm: str, nbytes: int, calls: int = 2) -> None:
    dist.init_process_group()
    p = dist.get_world_size()
    n = nbytes // 4
    for _ in range(calls):
        if op == "all_reduce":
            dist.all_reduce(torch.empty(n), algorithm=algorithm)
        elif op == "all_gather":
            dist.all_gather_into_tensor(torch.empty(n), torch.empty(n // p), algorithm=algorithm)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(torch.empty(n // p), torch.empty(n), algorithm=algorithm)
        elif op == "broadcast":
            dist.broadcast(torch.empty(n), src=0, algorithm=algorithm)


def simulated_and_closed_form(topology: str, op: str, algorithm: str, nbytes: int):
    result = kernbench.simulate(
        _collective,
        topology=topology,
        timing_only=True,
        overrides=[f"ccl.configs.{algorithm}.chunks=1"],  # one chunk: no pipelining
        args=(op, algorithm, nbytes),
    )
    record = result.report["collectives"][-1]
    simulated = (record["end_ps"] - record["start_ps"]) / 1e12
    name, config = ccl_settings(result.context).resolve(algorithm)
    algo = get_algorithm(config.module)
    costs = link_costs(
        result.context, config, algo, op, PES8, message_bytes(config.module, op, 8, nbytes)
    )
    closed = algo.costs[op](8, nbytes, costs.alpha, costs.beta, costs.gamma)
    return simulated, closed, costs


CASES = [
    ("ring8", "all_reduce", "ring"),
    ("ring8", "all_gather", "ring"),
    ("ring8", "reduce_scatter", "ring"),
    ("fc8", "all_reduce", "recursive_doubling"),
    ("fc8", "all_reduce", "rabenseifner"),
    ("fc8", "all_gather", "recursive_doubling"),
    ("fc8", "broadcast", "binomial"),
]


@pytest.mark.parametrize("nbytes", SIZES, ids=["4KiB", "1MiB", "64MiB"])
@pytest.mark.parametrize(
    ("topology", "op", "algorithm"), CASES, ids=[f"{t}-{o}-{a}" for t, o, a in CASES]
)
def test_one_chunk_matches_the_closed_form_within_1_percent(topology, op, algorithm, nbytes):
    if algorithm not in algorithms():
        pytest.skip(f"algorithm {algorithm} is not registered")
    simulated, closed, costs = simulated_and_closed_form(topology, op, algorithm, nbytes)
    assert costs.alpha > 0 and costs.beta > 0
    assert abs(simulated - closed) / closed < 0.01, (simulated, closed, costs)


def test_alpha_beta_gamma_come_from_the_topology():
    from kernbench.runtime import RuntimeContext

    ctx = RuntimeContext("ring8")
    name, config = ccl_settings(ctx).resolve("ring")
    costs = link_costs(ctx, config, get_algorithm("ring"), "all_reduce", PES8, 1 << 20)
    # route HBM -> router -> ring link -> router -> HBM: 100 + 500 + 100 ns of flight, the
    # 100 ns IPCQ endpoint overhead, and the first packet's store-and-forward on the
    # non-bottleneck hops (2 x 4 KiB at 1 TB/s); the 50 GB/s link is the bottleneck.
    assert costs.alpha == pytest.approx(800e-9 + 2 * 4096 / 1e12)
    assert costs.beta == pytest.approx(1 / 50e9)
    # A reduction streams 3 bytes per byte through the 1 TB/s HBM port; the vector
    # engine (256 FLOP/cycle at 1.5 GHz on float32) is faster than that.
    assert costs.gamma == pytest.approx(3 / 1e12)


def test_chunk_pipelining_approaches_the_bandwidth_bound():
    nbytes = 256 << 20
    result = kernbench.simulate(
        _collective,
        topology="ring8",
        timing_only=True,
        args=("all_reduce", "ring_pipelined", nbytes),
    )
    record = result.report["collectives"][-1]
    simulated = (record["end_ps"] - record["start_ps"]) / 1e12
    bound = 2 * 7 / 8 * nbytes / 50e9
    assert bound / simulated >= 0.90
    assert simulated >= bound  # nothing beats the lower bound


def _two_groups(nbytes: int, together: bool) -> None:
    dist.init_process_group()
    rank = dist.get_rank()
    first, second = dist.new_group([0, 2]), dist.new_group([1, 3])
    t = torch.empty(nbytes // 4)
    if rank in (0, 2):
        dist.all_reduce(t, group=first, algorithm="ring")
    elif together:
        dist.all_reduce(t, group=second, algorithm="ring")
    _ = second


def test_concurrent_all_reduces_that_share_links_take_longer():
    # On multi_sip's ring of 4 SIPs, 0<->2 and 1<->3 both cross the links between
    # SIPs 1 and 2 (shortest paths), so the two all-reduces congest each other.  HBM is
    # made fast so that the ring links, not the memories, are what the groups share.
    nbytes = 16 << 20
    fast_memory = ["cube.hbm.slice_bandwidth=2TB/s"]
    alone = kernbench.simulate(
        _two_groups,
        topology="multi_sip",
        timing_only=True,
        args=(nbytes, False),
        overrides=fast_memory,
    )
    both = kernbench.simulate(
        _two_groups,
        topology="multi_sip",
        timing_only=True,
        args=(nbytes, True),
        overrides=fast_memory,
    )

    def duration(result):
        records = [c for c in result.report["collectives"] if c["op"] == "all_reduce"]
        return max(c["end_ps"] for c in records) - min(c["start_ps"] for c in records)

    assert duration(both) > 1.3 * duration(alone)


@pytest.mark.parametrize(("nbytes", "kind"), [(4 << 10, "latency"), (256 << 20, "bandwidth")])
def test_tuner_choice_and_prediction_on_multi_sip(nbytes, kind):
    from kernbench.ccl.tuner import auto_choice

    def run(nbytes: int) -> None:
        dist.init_process_group()
        t = torch.empty(nbytes // 4)
        for _ in range(2):
            dist.all_reduce(t, algorithm="auto")

    result = kernbench.simulate(run, topology="multi_sip", timing_only=True, args=(nbytes,))
    ctx = result.context
    pes = [f"sip{r}.cube0.pe0" for r in range(4)]
    chosen = auto_choice(ctx, "all_reduce", 4, nbytes, pes)
    record = result.report["collectives"][-1]
    assert record["config"] == chosen
    module = ccl_settings(ctx).resolve(chosen)[1].module
    if kind == "latency":
        # Fewer message rounds than the ring's 2(p-1) = 6.
        assert module in (
            "recursive_doubling",
            "binomial",
            "binary_tree",
            "double_binary_tree",
            "rabenseifner",
        ), module
    else:
        # Bandwidth-optimal: moves 2(p-1)/p of the data per rank (the leader form with
        # one rank per SIP is the ring, its messages landing in SRAM).
        assert module in (
            "ring",
            "leader",
            "rabenseifner",
            "bidirectional_ring",
            "hierarchical",
            "mesh2d",
            "direct",
        ), module
    predicted = predict(
        ctx, "all_reduce", chosen, ccl_settings(ctx).resolve(chosen)[1], pes, nbytes
    )
    simulated = (record["end_ps"] - record["launch_ps"]) / 1e12
    assert abs(predicted - simulated) / simulated < 0.10, (chosen, predicted, simulated)
