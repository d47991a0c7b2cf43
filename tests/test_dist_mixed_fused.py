"""The fused TP x DP forms: values, never slower than two-step, faster where links allow.

Three 8-rank machines: ``ring8`` and ``fc8`` (one PE per SIP: ``local_size``
1, TP and DP both across SIPs) and ``multi_sip`` at cube level with 2 cubes per
SIP (``local_size`` 2, TP inside a SIP first).  Layouts TP2 x DP4 and TP4 x DP2.
The full 8 KiB - 16 MiB timing sweep is ``slow``; the default run times the
ends of the range that simulate quickly and the layouts the claims rest on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.runtime import current_context
from kernbench.topology import names
from kernbench.torch.distributed.mixed import FUSED_OPS, MODES, OPS, MixedCommHandler, MixedLayout
from kernbench.torch.distributed.mixed.pipeline import MIN_GAIN, plan_pieces

ROOT = Path(__file__).resolve().parents[1]
CUBE = ("system.device_level=cube",)
# machine -> (topology file (None: written by the fixture), overrides, ranks per SIP)
MACHINES = {
    "ring8": (ROOT / "topologies" / "ring8.yaml", (), 1),
    "fc8": (ROOT / "topologies" / "fc8.yaml", (), 1),
    "multi_sip": (None, CUBE, 2),
}
LAYOUTS = {"tp2-dp4": (2, 4), "tp4-dp2": (4, 2)}
SLACK = 1.05  # fused may take at most 5% longer than two-step
KIB = 1024


@pytest.fixture(scope="module")
def topologies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("topology") / "multi_sip_2cube.yaml"
    multi_sip = ROOT / "topologies" / "multi_sip.yaml"
    path.write_text(
        f"extends: {multi_sip}\nname: multi_sip_2cube\nsip:\n  cube_mesh: {{w: 2, h: 1}}\n"
    )
    return {name: str(spec[0] or path) for name, spec in MACHINES.items()}


def splits(local: int, tp: int, dp: int) -> dict[str, int]:
    """TP inside a SIP as far as it goes, the rest across SIPs."""
    local_tp = min(local, tp)
    local_dp = local // local_tp
    return {
        "local_tp_size": local_tp,
        "local_dp_size": local_dp,
        "inter_tp_size": tp // local_tp,
        "inter_dp_size": dp // local_dp,
    }


def handler(local: int, tp: int, dp: int, **kwargs) -> MixedCommHandler:
    r, ws = dist.get_rank(), dist.get_world_size()
    kwargs.setdefault("use_autotune", False)
    return MixedCommHandler(
        r, ws, r % local, local, r // local, ws // local, **splits(local, tp, dp), **kwargs
    )


def simulate(topologies, machine: str, fn, *args, timing_only: bool = True, overrides=()):
    _, extra, _ = MACHINES[machine]
    return kernbench.simulate(
        fn,
        topology=topologies[machine],
        world_size=8,
        overrides=(*extra, *overrides),
        args=args,
        timing_only=timing_only,
    )


# ----------------------------------------------------------------------------- values
def _values(local: int, tp: int, dp: int, shape: tuple[int, ...]) -> dict:
    dist.init_process_group()
    planned = handler(local, tp, dp, min_block_size=1)
    # Pieces of at most 2 elements: the pipeline runs however the plan would have it.
    piecewise = handler(local, tp, dp, min_block_size=1, max_block_size=2)
    x = torch.from_numpy(
        np.random.default_rng(dist.get_rank()).uniform(-1, 1, shape).astype(np.float32)
    )
    got = {}
    for op in OPS:
        got[op, "two_step"] = planned.run(x, op, "two_step").numpy()
        got[op, "fused"] = planned.run(x, op, "fused").numpy()
        got[op, "pieces"] = piecewise.run(x, op, "fused").numpy()
        got[op, "count"] = piecewise.last_fused_pieces
    return got


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("machine", list(MACHINES))
def test_fused_values_match_numpy(topologies, machine: str, layout: str) -> None:
    tp, dp = LAYOUTS[layout]
    local = MACHINES[machine][2]
    shape = (8, 3)
    res = simulate(topologies, machine, _values, local, tp, dp, shape, timing_only=False).returns
    ml = MixedLayout(local, 8 // local, *splits(local, tp, dp).values())
    xs = [np.random.default_rng(r).uniform(-1, 1, shape).astype(np.float32) for r in range(8)]

    def tp_sum(rank: int) -> np.ndarray:
        return np.sum([xs[w] for w in ml.tp_group_of(rank)], axis=0)

    for r in range(8):
        tp_rank, dp_rank = ml.tp_rank(r), ml.dp_rank(r)
        rows_tp, rows_dp = shape[0] // tp, shape[0] // dp
        world_sum = np.sum(xs, axis=0)
        expected = {
            "all_reduce": tp_sum(r),
            "all_gather": np.concatenate([xs[w] for w in ml.tp_group_of(r)]),
            "reduce_scatter": tp_sum(r)[tp_rank * rows_tp : (tp_rank + 1) * rows_tp],
            "all_reduce_all_gather": np.concatenate([tp_sum(w) for w in ml.dp_group_of(r)]),
            "reduce_scatter_all_reduce": world_sum[dp_rank * rows_dp : (dp_rank + 1) * rows_dp],
        }
        for op in OPS:
            assert res[r][op, "count"] > 1, op  # the piecewise handler did pipeline
            for mode in ("two_step", "fused", "pieces"):
                np.testing.assert_allclose(res[r][op, mode], expected[op], rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- timing
def _times(local: int, tp: int, dp: int, ops: tuple[str, ...], sizes: tuple[int, ...]) -> dict:
    """{(op, bytes): {mode: ps, "pieces": n}}: each op timed after an untimed round."""
    dist.init_process_group()
    h = handler(local, tp, dp)
    ctx = current_context()
    times: dict = {}
    for op in ops:
        for nbytes in sizes:
            x = torch.zeros(nbytes // 4)
            row: dict = {}
            for mode in (*MODES, *MODES):  # the first round installs the IPCQ tables
                dist.barrier()
                start = ctx.now
                h.run(x, op, mode).free()
                dist.barrier()
                row[mode] = ctx.now - start
            row["pieces"] = h.last_fused_pieces
            times[op, nbytes] = row
            x.free()
    return times


def check_never_slower(times: dict) -> None:
    """Fused within SLACK of two-step everywhere.  In one piece it is the two-step
    schedule in one launch, each rank starting phase 2 when its own phase 1 ends; where
    groups end phase 1 at different times (multi_sip TP4 x DP2 reduce_scatter_all_reduce
    at 2 MiB: the DP groups through the gateway cube take one piece, the others 16), an
    early phase 2 shares links with another group's phase 1, and one piece can cost more
    than two launches (2.4% there), so one piece is held to the slack too."""
    for (op, nbytes), row in times.items():
        ratio = row["fused"] / row["two_step"]
        assert ratio <= SLACK, f"{op} at {nbytes} bytes: fused/two-step = {ratio:.3f} ({row})"


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("machine", list(MACHINES))
def test_fused_is_never_more_than_5pct_slower(topologies, machine: str, layout: str) -> None:
    tp, dp = LAYOUTS[layout]
    sizes = (8 * KIB, 128 * KIB)
    times = simulate(topologies, machine, _times, MACHINES[machine][2], tp, dp, FUSED_OPS, sizes)
    check_never_slower(times.returns[0])


@pytest.mark.slow
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("machine", list(MACHINES))
def test_fused_is_never_more_than_5pct_slower_8kib_to_16mib(
    topologies, machine: str, layout: str
) -> None:
    tp, dp = LAYOUTS[layout]
    sizes = tuple(8 * KIB << i for i in range(12))  # 8 KiB .. 16 MiB per rank
    times = simulate(topologies, machine, _times, MACHINES[machine][2], tp, dp, FUSED_OPS, sizes)
    check_never_slower(times.returns[0])


def test_fused_wins_where_tp_and_dp_use_disjoint_links(topologies) -> None:
    """fc8 gives every pair of ranks its own link: the phases overlap fully."""
    size = 4096 * KIB
    times = simulate(topologies, "fc8", _times, 1, 4, 2, ("reduce_scatter_all_reduce",), (size,))
    row = times.returns[0]["reduce_scatter_all_reduce", size]
    assert row["pieces"] > 1
    assert row["fused"] <= 0.85 * row["two_step"], row


def test_fused_falls_back_to_two_step_where_the_phases_share_links(topologies) -> None:
    """On ring8 the DP ring of TP2 x DP4 crosses the very links the TP pairs use."""
    size = 256 * KIB
    times = simulate(topologies, "ring8", _times, 1, 2, 4, FUSED_OPS, (size,)).returns[0]
    for op in FUSED_OPS:
        row = times[op, size]
        assert row["pieces"] == 1
        assert row["two_step"] * 0.99 <= row["fused"] <= row["two_step"], (op, row)


# ----------------------------------------------------------------------------- autotune
def _autotune(max_coef: int) -> dict:
    dist.init_process_group()
    h = handler(1, 4, 2, use_autotune=True, max_coef=max_coef)
    return {"map": h.autotune_map, "times": h.autotune_times}


def test_autotune_picks_fused_where_it_is_measured_faster(topologies) -> None:
    # fc8 with links ten times slower: the sizes where overlap pays come sooner.
    slow_links = ("system.interconnect.link.bandwidth=5GB/s",)
    res = simulate(topologies, "fc8", _autotune, 7, overrides=slow_links).returns[0]
    for op in FUSED_OPS:
        for mode, row in zip(res["map"][op], res["times"][op], strict=True):
            assert mode == min(MODES, key=lambda m: (row[m], MODES.index(m)))
            assert row["fused"] <= SLACK * row["two_step"], (op, row)
        largest = res["times"][op][-1]  # 512 KiB per rank
        assert res["map"][op][-1] == "fused"
        assert largest["fused"] <= 0.85 * largest["two_step"], (op, largest)


# ----------------------------------------------------------------------------- the plan
def _plans() -> dict:
    dist.init_process_group()
    ctx = current_context()
    layout = MixedLayout(1, 8, 1, 1, 4, 2)  # fc8, TP4 x DP2
    pes = [names.pe(w, 0, 0) for w in range(8)]
    big, small = 4096 * KIB, 8 * KIB
    return {
        "big": plan_pieces(ctx, "reduce_scatter_all_reduce", layout, pes, big, 4, 64),
        "small": plan_pieces(ctx, "reduce_scatter_all_reduce", layout, pes, small, 4, 64),
        "forced": plan_pieces(ctx, "all_reduce_all_gather", layout, pes, big, 4, 3, 3),
        "single": plan_pieces(ctx, "all_reduce", layout, pes, big, 4, 64),
    }


def test_plan_pieces_pipelines_only_where_it_is_predicted_to_pay(topologies) -> None:
    plans = simulate(topologies, "fc8", _plans).returns[0]
    big, small = plans["big"], plans["small"]
    assert big.pieces > 1
    assert big.predicted_ps[big.pieces] <= (1 - MIN_GAIN) * big.predicted_ps[1]
    assert big.two_step_ps == big.predicted_ps[1]
    assert small.pieces == 1  # 8 KiB: every extra piece costs more latency than it hides
    assert all(small.predicted_ps[k] > small.predicted_ps[1] for k in small.predicted_ps if k > 1)
    assert plans["forced"].pieces == 3 and list(plans["forced"].predicted_ps) == [3]
    assert plans["single"].pieces == 1 and not plans["single"].predicted_ps
