"""The leader all-reduce: chains inside each SIP to its gateway, a ring across the
gateways, intermediate data in cube SRAM (catalogue entry ``hierarchical_leader``)."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
from kernbench.ccl.algorithms.leader import LeaderParams, scratch_bytes
from kernbench.errors import ConfigError, DistributedError, KernBenchError

CONFIG = "hierarchical_leader"
# 2 SIPs x 2 cubes x 2 PEs: 8 ranks at PE level, 4 per SIP.
SMALL = [
    "system.sips.count=2",
    "system.device_level=pe",
    "sip.cube_mesh.w=2",
    "sip.cube_mesh.h=1",
    "cube.pe_layout.corners=[NW, NE]",
    "cube.pe_layout.pe_per_corner=1",
]
# Small pieces and segments, so a short buffer goes through several of each.
FINE = f"ccl.configs.{CONFIG}.params={{piece_bytes: 64, segment_pieces: 3}}"
MiB = 1 << 20


def _inputs(rank: int, count: int) -> np.ndarray:
    return (np.arange(count, dtype=np.float32) % 7 + 1) * (rank + 1)


def _rank(rank: int, size: int, count: int, op: str) -> np.ndarray:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    x = torch.from_numpy(_inputs(rank, count))
    dist.all_reduce(x, op=getattr(dist.ReduceOp, op), algorithm=CONFIG)
    return x.numpy()


def _check_values(topology, overrides, world_size, count, backend, op="SUM") -> None:
    result = kernbench.simulate(
        _rank,
        topology=topology,
        overrides=[*overrides, FINE, f"simulation.backend={backend}"],
        world_size=world_size,
        args=(count, op),
        rank_args=True,
    )
    stacked = np.stack([_inputs(r, count) for r in range(world_size)])
    expected = {"SUM": stacked.sum(0), "MAX": stacked.max(0), "AVG": stacked.mean(0)}[op]
    for r in range(world_size):
        np.testing.assert_allclose(result.returns[r], expected, rtol=1e-6)


@pytest.mark.parametrize("backend", ["detailed", "fast"])
@pytest.mark.parametrize("world_size", range(2, 10))
def test_one_sip_is_a_chain_reduce_and_broadcast(world_size: int, backend: str) -> None:
    """default.yaml at cube level: one group, no ring across."""
    _check_values("default", ["system.device_level=cube"], world_size, 37, backend)


@pytest.mark.parametrize("backend", ["detailed", "fast"])
@pytest.mark.parametrize(
    ("overrides", "world_size", "op"),
    [
        (["system.device_level=cube"], 64, "SUM"),  # 4 SIPs of 16 cubes
        (["system.device_level=cube", "system.sips.count=3"], 40, "SUM"),  # 16, 16, 8
        (SMALL, 8, "MAX"),
        (SMALL, 8, "AVG"),
        (SMALL, 5, "SUM"),  # a group of one: its gateway adds its own input
        (["system.device_level=sip", "system.sips.count=3"], 3, "SUM"),  # all alone: the ring
    ],
)
def test_values_across_sips_match_numpy(overrides, world_size, op, backend) -> None:
    _check_values("multi_sip", overrides, world_size, 1001, backend, op)


def _timed(name: str, nbytes: int) -> tuple[int, dict[str, int]]:
    def body() -> None:
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        dist.init_process_group()
        dist.all_reduce(torch.empty(nbytes // 4), algorithm=name)

    result = kernbench.simulate(
        body, topology="multi_sip", overrides=["system.device_level=cube"], timing_only=True
    )
    record = result.report["collectives"][-1]
    return record["end_ps"] - record["start_ps"], result.report["bytes_by_link_class"]


def test_fewer_cube_link_bytes_than_the_flat_ring_and_faster_on_multi_sip() -> None:
    """64 cubes, 16 MiB.  Cube links: each SIP's two chains of 15 hops carry the buffer
    once each, 4 x 2 x 15 = 120 n, where the snaking ring carries 126 n.  HBM: each rank
    reads its input once and writes its result once (2 n a rank); the ring reads and
    writes its memory several times over, and its time is its HBM slices'.  SIP links:
    the ring across 4 gateways sends 2(4-1)/4 n from each, 6 n in all."""
    n = 16 * MiB
    leader_ps, leader = _timed(CONFIG, n)
    ring_ps, ring = _timed("ring", n)
    launch = 16 * 1024  # the launch's commands to the cubes: a few KiB on the cube links
    assert 0 < leader["cube_link"] - 120 * n < launch
    assert 0 < ring["cube_link"] - 126 * n < launch
    assert leader["hbm_port"] == 64 * 2 * n
    assert leader["sip_link"] == 6 * n
    assert leader_ps < 0.6 * ring_ps


def test_the_cost_model_prices_it_below_the_ring_on_multi_sip() -> None:
    """The schedule keeps the chains' partial sums in the buffer memory (SRAM): the model
    ranks the leader form ahead of the flat ring and the reduce-scatter composition."""
    from kernbench.ccl.settings import CclSettings
    from kernbench.ccl.tuner import predict_detail
    from kernbench.runtime import RuntimeContext
    from kernbench.topology import load_topology

    ctx = RuntimeContext(load_topology("multi_sip", ["system.device_level=cube"]))
    pes = [ctx.device_pe(i) for i in range(ctx.num_devices)]
    settings = CclSettings.from_overrides([])
    seconds = {
        name: predict_detail(ctx, "all_reduce", settings.resolve(name)[1], pes, 16 * MiB).seconds
        for name in (CONFIG, "ring", "hierarchical")
    }
    assert seconds[CONFIG] < seconds["hierarchical"] and seconds[CONFIG] < seconds["ring"]


@pytest.mark.parametrize(("level", "world_size"), [("cube", 64), ("pe", 40)])
def test_installed_peers_are_the_ranks_the_schedule_exchanges_with(level, world_size) -> None:
    from kernbench.ccl.algorithms import get_algorithm
    from kernbench.ccl.settings import CclSettings
    from kernbench.runtime import RuntimeContext
    from kernbench.topology import load_topology

    ctx = RuntimeContext(load_topology("multi_sip", [f"system.device_level={level}"]))
    pes = [ctx.device_pe(i) for i in range(world_size)]
    _, config = CclSettings.from_overrides([]).resolve(CONFIG)
    algorithm = get_algorithm(config.module)
    installed = algorithm.peers_on("all_reduce", pes, config.params)
    exchanged: list[set[int]] = [set() for _ in pes]
    for phase in algorithm.schedule("all_reduce", pes, float(MiB), config.params):
        for step in phase.steps:
            for m in step.messages:
                exchanged[m.src].add(m.dst)
                exchanged[m.dst].add(m.src)
    assert installed == exchanged


def test_scratch_is_bounded_by_the_parameters() -> None:
    """Three segments of 8 pieces of 256 KiB on a gateway, two slots per chain elsewhere:
    6 MiB and 1 MiB of the 32 MiB SRAM of a default cube."""
    assert scratch_bytes(LeaderParams()) == (6 * MiB, MiB)
    assert scratch_bytes(LeaderParams(piece_bytes=64, segment_pieces=3, slots=1)) == (576, 128)


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("params.piece_bytes=0", ">= 4"),
        ("params.piece_bytes=8388608", "4194304"),
        ("params.piece_bytes=8MiB", "whole number"),
        ("params.segment_pieces=65", "<= 64"),
        ("params.slots=0", ">= 1"),
        ("params.segments=2", "segments"),
    ],
)
def test_bad_params_name_the_param(override: str, fragment: str) -> None:
    from kernbench.ccl.settings import CclSettings

    with pytest.raises(ConfigError) as info:
        CclSettings.from_overrides([f"configs.{CONFIG}.{override}"])
    key = override.partition("=")[0]
    assert f"configs.{CONFIG}.{key}" in str(info.value) and fragment in str(info.value)


def test_it_serves_all_reduce_only() -> None:
    def body() -> None:
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        dist.init_process_group()
        dist.broadcast(torch.empty(16), src=0, algorithm=CONFIG)

    with pytest.raises(KernBenchError) as info:
        kernbench.simulate(body, topology="multi_sip", overrides=["system.device_level=sip"])
    assert isinstance(info.value.original, DistributedError)
    assert "does not serve broadcast" in str(info.value)
