"""MixedCommHandler: TP x DP collectives, both modes, autotune, misuse.

Ranks are cube devices of a small machine written to a temporary file: it
extends ``topologies/multi_sip.yaml`` (4 SIPs in a ring) with 2 cubes per SIP,
so device d sits in SIP d // 2 and ``local_size`` is 2.  Rank functions return
what they hold and the test body compares it with NumPy, for float32 and int32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import CollectiveMismatchError, DeadlockError, DistributedError, RankError
from kernbench.placement import DPPolicy
from kernbench.runtime import current_context
from kernbench.torch.distributed.mixed import (
    AUTOTUNE_BASE_BYTES,
    DEFAULT_MODE,
    FUSED_OPS,
    MODES,
    OPS,
    SINGLE_OPS,
    MixedCommHandler,
    MixedLayout,
)

ROOT = Path(__file__).resolve().parents[1]
MULTI_SIP = ROOT / "topologies" / "multi_sip.yaml"
CUBE = ("system.device_level=cube",)
LOCAL = 2  # cubes (ranks) per SIP on the small machine
TORCH_DTYPES = {"float32": torch.float32, "int32": torch.int32}

# (world size, local_tp, local_dp, inter_tp, inter_dp)
LAYOUTS = {
    "2x2": (4, 2, 1, 1, 2),  # TP inside a SIP, DP across 2 SIPs
    "tp2-dp4": (8, 2, 1, 1, 4),  # TP inside a SIP, DP across 4 SIPs
    "tp4-dp2": (8, 2, 1, 2, 2),  # TP spans 2 SIPs
    "dp-local": (8, 1, 2, 2, 2),  # DP inside a SIP, TP across SIPs
}


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("topology") / "multi_sip_2cube.yaml"
    path.write_text(
        f"extends: {MULTI_SIP}\nname: multi_sip_2cube\nsip:\n  cube_mesh: {{w: 2, h: 1}}\n"
    )
    return str(path)


def sim(machine: str, fn, ws: int, *args, timing_only: bool = False) -> kernbench.SimResult:
    return kernbench.simulate(
        fn, topology=machine, world_size=ws, overrides=CUBE, args=args, timing_only=timing_only
    )


def handler(layout: tuple[int, ...] | None = None, **kwargs) -> MixedCommHandler:
    """This rank's handler (``layout``: split sizes; None: the defaults)."""
    r, ws = dist.get_rank(), dist.get_world_size()
    splits = {}
    if layout is not None:
        names = ("local_tp_size", "local_dp_size", "inter_tp_size", "inter_dp_size")
        splits = dict(zip(names, layout[1:], strict=True))
    kwargs.setdefault("use_autotune", False)
    return MixedCommHandler(r, ws, r % LOCAL, LOCAL, r // LOCAL, ws // LOCAL, **splits, **kwargs)


def data(rank: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    rng = np.random.default_rng(rank)
    if dtype == "int32":
        return rng.integers(-20, 21, shape).astype(np.int32)
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


def check(actual: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    assert actual.dtype == np.dtype(dtype) and actual.shape == expected.shape
    if dtype == "int32":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- layout
@pytest.mark.parametrize("splits", [(2, 1, 1, 4), (1, 2, 2, 2), (2, 2, 2, 1), (4, 1, 1, 1)])
def test_layout_groups_partition_the_world(splits) -> None:
    ltp, ldp, itp, idp = splits
    layout = MixedLayout(ltp * ldp, itp * idp, ltp, ldp, itp, idp)
    ws = layout.world_size
    for w in range(ws):
        assert layout.world_rank(*layout.coords(w)) == w
        assert layout.tp_group_of(w)[layout.tp_rank(w)] == w
        assert layout.dp_group_of(w)[layout.dp_rank(w)] == w
    for groups, size in (
        (layout.tp_groups(), layout.tp_size),
        (layout.dp_groups(), layout.dp_size),
    ):
        assert sorted(r for g in groups for r in g) == list(range(ws))
        assert all(len(g) == size and list(g) == sorted(g) for g in groups)


# ----------------------------------------------------------------------------- values
def _all_ops(layout: tuple[int, ...], dtype: str, shape: tuple[int, ...]) -> dict:
    dist.init_process_group()
    h = handler(layout, dtype=TORCH_DTYPES[dtype], min_block_size=1)
    rank = dist.get_rank()
    got = {"ops": h.get_valid_op_list(), "modes": h.get_valid_mode_list()}
    got["ranks"] = (h.tp_rank, h.dp_rank, h.tp_size, h.dp_size)
    x = torch.from_numpy(data(rank, shape, dtype))
    for op in h.get_valid_op_list():
        for mode in MODES:
            got[op, mode] = getattr(h, op)(x, mode=mode).numpy()
    got["x_after"] = x.numpy()
    return got


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_values_match_numpy(machine: str, name: str, dtype: str) -> None:
    layout = LAYOUTS[name]
    ws = layout[0]
    shape = (8, 3)  # 24 elements: ragged pieces, splits evenly over 2 and 4 ranks
    res = sim(machine, _all_ops, ws, layout, dtype, shape).returns
    xs = [data(r, shape, dtype) for r in range(ws)]
    ml = MixedLayout(LOCAL, ws // LOCAL, *layout[1:])
    expected_ops = list(SINGLE_OPS) + (list(FUSED_OPS) if ml.dp_size > 1 else [])
    for r in range(ws):
        got = res[r]
        tp_group, dp_group = ml.tp_group_of(r), ml.dp_group_of(r)
        tp_rank, dp_rank = ml.tp_rank(r), ml.dp_rank(r)
        assert got["ranks"] == (tp_rank, dp_rank, ml.tp_size, ml.dp_size)
        assert got["ops"] == expected_ops and got["modes"] == list(MODES)
        np.testing.assert_array_equal(got["x_after"], xs[r])  # inputs are not changed

        def tp_sum(rank: int) -> np.ndarray:
            return np.sum([xs[w] for w in ml.tp_group_of(rank)], axis=0).astype(dtype)

        rows_tp, rows_dp = shape[0] // ml.tp_size, shape[0] // ml.dp_size
        expected = {
            "all_reduce": tp_sum(r),
            "all_gather": np.concatenate([xs[w] for w in tp_group]),
            "reduce_scatter": tp_sum(r)[tp_rank * rows_tp : (tp_rank + 1) * rows_tp],
            "all_reduce_all_gather": np.concatenate([tp_sum(w) for w in dp_group]),
            "reduce_scatter_all_reduce": np.sum(
                [
                    xs[w][dp_rank * rows_dp : (dp_rank + 1) * rows_dp]
                    for v in tp_group
                    for w in ml.dp_group_of(v)
                ],
                axis=0,
            ).astype(dtype),
        }
        for op in expected_ops:
            for mode in MODES:
                check(got[op, mode], expected[op], dtype)


def _lists(layout: tuple[int, ...]) -> tuple[list[str], list[str]]:
    dist.init_process_group()
    h = handler(layout)
    return h.get_valid_op_list(), h.get_valid_mode_list()


@pytest.mark.parametrize(
    ("layout", "ops"),
    [
        ((8, 1, 2, 1, 4), []),  # tp = 1: nothing to do
        ((8, 2, 1, 4, 1), list(SINGLE_OPS)),  # dp = 1: the TP ops only
        ((8, 2, 1, 1, 4), list(OPS)),
    ],
    ids=["tp1", "dp1", "tp2-dp4"],
)
def test_valid_op_and_mode_lists(machine: str, layout, ops) -> None:
    for valid_ops, modes in sim(machine, _lists, 8, layout).returns:
        assert valid_ops == ops
        assert modes == (list(MODES) if ops else [])


# ----------------------------------------------------------------------------- autotune
def _autotune() -> dict:
    dist.init_process_group()
    h = handler(LAYOUTS["tp2-dp4"], use_autotune=True, max_coef=3)
    picks = {}
    for op in h.get_valid_op_list():
        for nbytes in (1024, AUTOTUNE_BASE_BYTES, 3 * AUTOTUNE_BASE_BYTES, 1 << 20):
            picks[op, nbytes] = h.select_autotune_mode(op, torch.zeros(nbytes // 4))
    x = torch.from_numpy(data(dist.get_rank(), (16,), "float32"))
    tuned = h.all_reduce_all_gather(x).numpy()  # mode=None: the tuned mode
    h.shutdown()
    return {"map": h.autotune_map, "times": h.autotune_times, "picks": picks, "tuned": tuned}


def test_autotune_map_is_complete_valid_and_the_same_on_every_rank(machine: str) -> None:
    res = sim(machine, _autotune, 8).returns
    first = res[0]
    assert all(r["map"] == first["map"] and r["times"] == first["times"] for r in res)
    table = first["map"]
    assert list(table) == list(OPS)
    for op, modes in table.items():
        assert len(modes) == 3 and set(modes) <= set(MODES)
        for i, row in enumerate(first["times"][op]):
            assert set(row) == set(MODES) and all(t > 0 for t in row.values())
            assert modes[i] == min(MODES, key=lambda m: (row[m], MODES.index(m)))
        picks = first["picks"]
        assert picks[op, 1024] == modes[0]  # clamped below
        assert picks[op, AUTOTUNE_BASE_BYTES] == modes[0]
        assert picks[op, 3 * AUTOTUNE_BASE_BYTES] == modes[2]  # round(log2(3)) = 2
        assert picks[op, 1 << 20] == modes[-1]  # clamped above
    xs = [data(r, (16,), "float32") for r in range(8)]
    for r in range(8):  # TP pairs (2w, 2w+1), then gathered over the 4 SIPs
        want = np.concatenate([xs[2 * s] + xs[2 * s + 1] for s in range(4)])
        check(res[r]["tuned"], want, "float32")


# ----------------------------------------------------------------------------- timing
def _timed(nbytes: int) -> dict:
    dist.init_process_group()
    h = handler((8, 2, 1, 1, 4))
    ctx = current_context()
    x = torch.zeros(nbytes // 4)
    times = {}
    for mode in (*MODES, *MODES):  # the first round installs the IPCQ tables
        dist.barrier()
        start = ctx.now
        h.all_reduce_all_gather(x, mode=mode).free()
        dist.barrier()
        times[mode] = ctx.now - start
    return times


def test_fused_is_one_reported_launch_and_not_slower_than_two_step(machine: str) -> None:
    # TP pairs inside a SIP, DP rings across the SIPs: the TP all-reduce over one
    # cube link is short next to the DP all-gather over the SIP ring, so there is
    # too little to hide and the fused form runs the two-step schedule in one
    # launch (tests/test_dist_mixed_fused.py has layouts where it overlaps).
    result = sim(machine, _timed, 8, 512 * 1024, timing_only=True)
    times = result.returns[0]
    assert times["fused"] <= times["two_step"], times
    fused = [c for c in result.report["collectives"] if c["config"] == "mixed_fused"]
    assert len(fused) == 2 and all(c["op"] == "all_reduce_all_gather" for c in fused)
    assert all(c["end_ps"] > c["start_ps"] for c in fused)


def _defaults() -> tuple:
    dist.init_process_group()
    r, ws = dist.get_rank(), dist.get_world_size()
    h = MixedCommHandler(r, ws, r % LOCAL, LOCAL, r // LOCAL, ws // LOCAL, None, None, None, None)
    layout = (h.local_tp_size, h.local_dp_size, h.inter_tp_size, h.inter_dp_size)
    summed = h.all_reduce(torch.full((4,), float(r + 1))).numpy()
    return layout, h.get_valid_op_list(), summed


def test_sizes_left_none_put_tp_over_every_rank_as_flashinfer_does(machine: str) -> None:
    for layout, ops, summed in sim(machine, _defaults, 8).returns:
        assert layout == (LOCAL, 1, 4, 1)
        assert ops == list(SINGLE_OPS)
        np.testing.assert_array_equal(summed, np.full(4, 36.0, np.float32))


# ----------------------------------------------------------------------------- misuse
def _sizes_differ() -> None:
    dist.init_process_group()
    h = handler(LAYOUTS["tp2-dp4"])
    n = 16 if dist.get_rank() == 3 else 32
    h.all_reduce_all_gather(torch.zeros(n), mode="fused")


def _modes_differ() -> None:
    dist.init_process_group()
    h = handler(LAYOUTS["tp2-dp4"])
    mode = "fused" if dist.get_rank() == 0 else "two_step"
    h.reduce_scatter_all_reduce(torch.zeros(32), mode=mode)


def test_mismatched_use_across_ranks_is_a_deadlock(machine: str) -> None:
    with pytest.raises(CollectiveMismatchError) as info:
        sim(machine, _sizes_differ, 8)
    assert "does not match" in str(info.value)
    with pytest.raises(DeadlockError):
        sim(machine, _modes_differ, 8)


def _construct(kwargs: dict, ws_local: int) -> None:
    dist.init_process_group()
    r, ws = dist.get_rank(), dist.get_world_size()
    if kwargs.pop("uninitialised", False):
        dist.destroy_process_group()
    MixedCommHandler(r, ws, r % ws_local, ws_local, r // ws_local, ws // ws_local, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "local", "words"),
    [
        ({"local_tp_size": 2, "local_dp_size": 2}, 2, ["local_tp_size (2)", "local_size (2)"]),
        ({"inter_dp_size": 3}, 2, ["inter_dp_size (3)", "inter_size (4)"]),
        ({}, 4, ["does not match where ranks live", "SIP 1"]),  # 4 ranks per SIP: no
        ({"uninitialised": True}, 2, ["init_process_group"]),
        ({"use_autotune": False, "max_coef": 0}, 2, ["max_coef"]),
    ],
    ids=["local-split", "inter-split", "placement", "uninitialised", "max-coef"],
)
def test_bad_construction_is_a_clear_error(machine: str, kwargs, local, words) -> None:
    with pytest.raises(RankError) as info:
        sim(machine, _construct, 8, dict(kwargs), local)
    error = info.value.original
    assert isinstance(error, DistributedError)
    for word in words:
        assert word in str(error)


def _misuse() -> list[str]:
    dist.init_process_group()
    h = handler(LAYOUTS["tp2-dp4"])
    errors = []
    for call in (
        lambda: h.reduce_scatter_all_reduce(torch.zeros(6)),  # 6 rows over dp = 4
        lambda: h.all_reduce(torch.zeros(8), mode="nccl"),
        lambda: h.select_autotune_mode("all_to_all", torch.zeros(8)),
        lambda: h.all_reduce(
            torch.zeros(8, dp=DPPolicy(pe="row_wise", num_pes=2))
        ),  # split over 2 PEs
    ):
        try:
            call()
        except DistributedError as exc:
            errors.append(str(exc))
    assert h.select_autotune_mode("all_reduce", torch.zeros(8)) == DEFAULT_MODE
    h.shutdown()
    try:
        h.all_reduce(torch.zeros(8))
    except DistributedError as exc:
        errors.append(str(exc))
    return errors


def test_misuse_of_the_ops_is_a_clear_error(machine: str) -> None:
    for errors in sim(machine, _misuse, 8).returns:
        assert len(errors) == 5, errors
        assert "dimension 0 of x (6) must split over 4 ranks" in errors[0]
        assert "unknown mode 'nccl'" in errors[1]
        assert "unknown op 'all_to_all'" in errors[2]
        assert "split over" in errors[3]
        assert "after shutdown" in errors[4]
