"""Hierarchical all-reduce splits the ranks level by level, each level on its own communicator."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
from kernbench.ccl.algorithms.hierarchical import DEFAULT_SEGMENTS, HierarchicalParams

TOPOLOGY = "multi_sip"
# 2 SIPs x 2 cubes x 2 PEs: 8 ranks at PE level.
SMALL = [
    "system.sips.count=2",
    "system.device_level=pe",
    "sip.cube_mesh.w=2",
    "sip.cube_mesh.h=1",
    "cube.pe_layout.corners=[NW, NE]",
    "cube.pe_layout.pe_per_corner=1",
]


def _rank(rank: int, size: int, algorithm: str) -> np.ndarray:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    x = torch.from_numpy(np.arange(12, dtype=np.float32) * (rank + 1))
    dist.all_reduce(x, algorithm=algorithm)
    return x.numpy()


def _multi_cube_messages(overrides: list[str]) -> int:
    """IPCQ messages of one multi_cube all-reduce on 8 ranks, its values checked."""
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGY,
        overrides=overrides,
        world_size=8,
        args=("multi_cube",),
        rank_args=True,
    )
    expected = np.arange(12, dtype=np.float32) * sum(range(1, 9))
    for r in range(8):
        np.testing.assert_array_equal(result.returns[r], expected)
    return result.context.machine.ipcq_messages


def test_cube_then_sip_levels_each_split_their_own_communicator() -> None:
    """multi_cube: ring in the cube (k=2), ring across the SIP's cubes (m=2), ring across
    SIPs (s=2), ring back in the cube: (k-1) + 2(m-1) + 2(s-1) + (k-1) = 6 messages a rank
    for each of the buffer's segments.  Grouping the across-cube communicator by the outer
    ranks' PEs instead would skip the SIP level and ring all four cubes: 8 messages a rank."""
    # 48 bytes: a second segment would be smaller than a packet, so the tuner keeps one.
    assert _multi_cube_messages(SMALL) == 8 * 6 * 1


@pytest.mark.parametrize("segments", [2, 4])
def test_segments_set_in_the_catalogue_cut_the_buffer(segments: int) -> None:
    """Each segment goes through every level: 6 messages a rank per segment."""
    overrides = [*SMALL, f"ccl.configs.multi_cube.params.segments={segments}"]
    assert _multi_cube_messages(overrides) == 8 * 6 * segments


def test_segments_are_checked_and_chosen_by_the_cost_model() -> None:
    """``segments`` must be a positive count; left out, the tuner picks it per call."""
    with pytest.raises(ValueError, match="segments"):
        HierarchicalParams.model_validate({"segments": 0})
    assert HierarchicalParams().segments is None
    assert DEFAULT_SEGMENTS == 1


@pytest.mark.parametrize(
    ("topology", "level", "config"),
    [
        ("multi_sip", "cube", "multi_cube"),
        ("multi_sip", "pe", "multi_cube"),
        ("rack", "pe", "hierarchical"),
    ],
)
def test_installed_peers_are_the_ranks_the_schedule_exchanges_with(topology, level, config):
    """The IPCQ plan of a composition lists each rank's level peers (a few), not all p - 1."""
    from kernbench.ccl.algorithms import get_algorithm
    from kernbench.ccl.settings import CclSettings
    from kernbench.runtime import RuntimeContext
    from kernbench.topology import load_topology

    ctx = RuntimeContext(load_topology(topology, [f"system.device_level={level}"]))
    pes = [ctx.device_pe(i) for i in range(ctx.num_devices)]
    _, cfg = CclSettings.from_overrides([]).resolve(config)
    algorithm = get_algorithm(cfg.module)
    installed = algorithm.peers_on("all_reduce", pes, cfg.params)
    exchanged: list[set[int]] = [set() for _ in pes]
    for phase in algorithm.schedule("all_reduce", pes, float(1 << 20), cfg.params):
        for step in phase.steps:
            for m in step.messages:
                exchanged[m.src].add(m.dst)
                exchanged[m.dst].add(m.src)
    assert installed == exchanged
    assert max(map(len, installed)) <= 6  # ring neighbours at up to three levels


def test_the_tuner_sets_segments_not_chunks_and_a_catalogue_count_wins() -> None:
    """On multi_sip's 64 cubes the model predicts 4 segments fastest at 16 MiB; the
    count goes to ``segments`` (the levels keep one chunk), and a set count stays."""
    from kernbench.ccl.settings import CclSettings
    from kernbench.ccl.tuner import chosen_chunks, predict_detail, with_chunks
    from kernbench.runtime import RuntimeContext
    from kernbench.topology import load_topology

    ctx = RuntimeContext(load_topology("multi_sip", ["system.device_level=cube"]))
    pes = [ctx.device_pe(i) for i in range(ctx.num_devices)]
    _, config = CclSettings.from_overrides([]).resolve("multi_cube")
    nbytes = 16 << 20
    assert chosen_chunks(ctx, "all_reduce", config, pes, nbytes) == 4
    tuned = with_chunks(ctx, "all_reduce", config, pes, nbytes)
    assert tuned.params["segments"] == 4 and tuned.chunks is None
    times = {
        s: predict_detail(
            ctx,
            "all_reduce",
            config.model_copy(update={"params": {**config.params, "segments": s}}),
            pes,
            nbytes,
        ).seconds
        for s in (1, 2, 4)
    }
    assert times[4] < times[2] < times[1]
    _, fixed = CclSettings.from_overrides(["configs.multi_cube.params.segments=2"]).resolve(
        "multi_cube"
    )
    assert with_chunks(ctx, "all_reduce", fixed, pes, nbytes) is fixed
