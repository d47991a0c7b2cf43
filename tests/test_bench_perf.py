"""Collective perf benches (nccl-tests style) and the DP / TP model benches.

The perf benches run on ``topologies/ring8.yaml`` (8 ranks, one 50 GB/s link
between neighbours); their rows must follow nccl-tests' definitions exactly,
out-of-place and in-place timed apart, their values must check (``#wrong`` 0),
a value made wrong must be counted, and a bandwidth-optimal ring must drive
busbw close to the link bandwidth at large sizes.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernbench.bench import perf
from kernbench.bench.perf import bus_factor
from kernbench.bench.perf_table import COLUMN_LINES
from kernbench.bench.runner import run_script
from kernbench.errors import ConfigError, KernBenchError

ROOT = Path(__file__).resolve().parents[1]
BENCHES = ROOT / "benches"
RING8 = "ring8"
DEFAULT = "default"
LINK_GBPS = 50.0  # ring8's link bandwidth
PERF = {
    "allreduce_perf.py": "all_reduce",
    "allgather_perf.py": "all_gather",
    "reducescatter_perf.py": "reduce_scatter",
    "broadcast_perf.py": "broadcast",
    "alltoall_perf.py": "all_to_all",
    "reduce_perf.py": "reduce",
}
SPLIT = {"all_gather", "reduce_scatter", "all_to_all"}
QUICK = ["-n", "2", "-w", "1"]
SMALL = ["-b", "4KiB", "-e", "64KiB", "-f", "4", *QUICK]
GROUPS = ("", "in_place_")


def rows_of(script: str, args: list[str], topology: str = RING8, **kw) -> list[dict]:
    result = run_script(
        str(BENCHES / script), topology=topology, script_args=args, echo=lambda s: None, **kw
    )
    return result.report["results"]


def factor(op: str, n: int) -> float:
    return {
        "all_reduce": 2 * (n - 1) / n,
        "all_gather": (n - 1) / n,
        "reduce_scatter": (n - 1) / n,
        "all_to_all": (n - 1) / n,
        "broadcast": 1.0,
        "reduce": 1.0,
    }[op]


def kernbench_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "kernbench.cli", *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout,
    )  # fmt: skip


def test_bus_factor_follows_nccl_tests() -> None:
    for op in PERF.values():
        assert bus_factor(op, 8) == factor(op, 8)
        # one rank: the (n-1) factors give 0; the rooted ops' is 1 at any count
        assert bus_factor(op, 1) == (1.0 if op in ("broadcast", "reduce") else 0.0)
    with pytest.raises(ConfigError, match="unknown collective"):
        bus_factor("all_sum", 8)


def test_count_wrong_counts_elements() -> None:
    import numpy as np

    expected = np.arange(10, dtype=np.float64)
    got = expected.copy()
    got[[2, 7]] += 1
    assert perf.count_wrong(got.astype(np.float32), expected, "float32", 8) == 2
    assert perf.count_wrong(np.arange(10) + (np.arange(10) > 6), np.arange(10), "int32", 8) == 3


# --------------------------------------------------------------------------- perf benches
@pytest.mark.parametrize("script", sorted(PERF))
def test_perf_bench_rows_functional_and_timing_only(script: str) -> None:
    op = PERF[script]
    rows = rows_of(script, SMALL)
    assert [r["size_B"] for r in rows] == [4096, 16384, 65536]
    for r in rows:
        assert r["op"] == op and r["world_size"] == 8 and r["type"] == "float"
        # nccl-tests' count: the call's count argument, per rank for the split ops
        assert r["count"] * 4 * (8 if op in SPLIT else 1) == r["size_B"]
        assert r["root"] == (0 if op in ("broadcast", "reduce") else -1)
        assert r["checked"] is True
        for g in GROUPS:
            assert r[g + "wrong"] == 0
            assert r[g + "algbw_GBps"] == pytest.approx(r["size_B"] / r[g + "time_us"] / 1e3)
            assert r[g + "busbw_GBps"] == r[g + "algbw_GBps"] * factor(op, 8)
        assert r["redop"] == ("sum" if op in ("all_reduce", "reduce_scatter", "reduce") else "none")
    timing = rows_of(script, SMALL, timing_only=True)
    assert [(r["checked"], r["wrong"], r["in_place_wrong"]) for r in timing] == [("n/a",) * 3] * 3
    # Time does not depend on values: both modes time the same calls to the picosecond.
    for g in GROUPS:
        assert [r[g + "time_us"] for r in timing] == [r[g + "time_us"] for r in rows]


def test_out_of_place_and_in_place_are_timed_apart() -> None:
    (row,) = rows_of("allreduce_perf.py", ["-b", "64KiB", "-e", "64KiB", *QUICK])
    # torch's all_reduce is in place only: the input is copied in before the checked call
    # only; the timed calls move what NCCL's out-of-place calls move, as in place.
    assert row["time_us"] == pytest.approx(row["in_place_time_us"], rel=1e-3)
    assert row["wrong"] == 0 and row["in_place_wrong"] == 0
    (row,) = rows_of("alltoall_perf.py", ["-b", "64KiB", "-e", "64KiB", *QUICK])
    assert row["time_us"] > 0 and row["in_place_time_us"] > 0


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("allreduce_perf.py", ["-d", "half", "-o", "prod"]),
        ("allreduce_perf.py", ["-d", "int8", "-o", "avg"]),
        ("allreduce_perf.py", ["-d", "bfloat16", "-o", "max", "-n", "3", "-w", "0"]),
        ("reducescatter_perf.py", ["-d", "int32", "-o", "min"]),
        ("broadcast_perf.py", ["-r", "3", "-d", "uint8"]),
        ("reduce_perf.py", ["-r", "5", "-d", "uint32", "-o", "sum"]),
        ("allgather_perf.py", ["-d", "float16"]),
        ("allreduce_perf.py", ["-d", "int64", "-o", "prod"]),
        ("allreduce_perf.py", ["-d", "double", "-o", "sum"]),
        ("reduce_perf.py", ["-r", "2", "-d", "uint64", "-o", "max"]),
    ],
)
def test_perf_bench_types_and_ops_check(script: str, args: list[str]) -> None:
    rows = rows_of(script, ["-b", "1KiB", "-e", "1KiB", *QUICK, *args])
    assert [(r["wrong"], r["in_place_wrong"], r["checked"]) for r in rows] == [(0, 0, True)]
    assert rows[0]["type"] == {"float16": "half"}.get(args[-1], args[args.index("-d") + 1])


def test_all_types_ops_and_roots() -> None:
    one = ["-b", "64", "-e", "64", "-n", "1", "-w", "0"]
    rows = rows_of("allreduce_perf.py", [*one, "-o", "all", "-d", "all"], timing_only=True)
    assert [(r["type"], r["redop"]) for r in rows] == [
        (t, o)
        for t in (
            "int8",
            "uint8",
            "int32",
            "uint32",
            "int64",
            "uint64",
            "half",
            "float",
            "double",
            "bfloat16",
        )  # fmt: skip
        for o in ("sum", "prod", "max", "min", "avg")
    ]
    rows = rows_of("broadcast_perf.py", [*one, "-r", "all"], timing_only=True)
    assert [r["root"] for r in rows] == list(range(8))


def test_run_cycles_repeat_the_sizes() -> None:
    rows = rows_of("allgather_perf.py", ["-b", "1K", "-e", "2K", "-f", "2", "-N", "2", *QUICK],
                   timing_only=True)  # fmt: skip
    assert [(r["cycle"], r["size_B"]) for r in rows] == [(0, 1024), (0, 2048), (1, 1024), (1, 2048)]


def test_wrong_values_are_counted_per_column(monkeypatch: pytest.MonkeyPatch) -> None:
    output = perf._Case.output

    def spoiled(self, in_place):  # noqa: ANN001, ANN202
        values = output(self, in_place).copy()
        if in_place and self.rank in (2, 5):
            values[:3] += 1  # three wrong elements on each of two ranks
        return values

    monkeypatch.setattr(perf._Case, "output", spoiled)
    result = run_script(str(BENCHES / "allreduce_perf.py"), topology=RING8,
                        script_args=["-b", "1KiB", "-e", "2KiB", "-f", "2", *QUICK],
                        echo=lambda s: None)  # fmt: skip
    rows = result.report["results"]
    assert [(r["wrong"], r["in_place_wrong"], r["checked"]) for r in rows] == [(0, 6, False)] * 2


def test_average_modes_combine_the_ranks_times(monkeypatch: pytest.MonkeyPatch) -> None:
    timed = perf._timed

    def skewed(case, in_place, iters, blocking):  # noqa: ANN001, ANN202
        elapsed, used = timed(case, in_place, iters, blocking)
        return elapsed + case.rank * 2_000_000, used  # rank r: r x 1 us more per call (2 calls)

    monkeypatch.setattr(perf, "_timed", skewed)
    args = ["-b", "1KiB", "-e", "1KiB", *QUICK]
    (base,) = rows_of("allgather_perf.py", [*args, "-a", "0"], timing_only=True)
    times = {
        a: rows_of("allgather_perf.py", [*args, "-a", str(a)], timing_only=True)[0]["time_us"]
        for a in (1, 2, 3)
    }
    assert times[2] == base["time_us"]  # rank 0 is the fastest
    assert times[3] == pytest.approx(base["time_us"] + 7.0)
    assert times[1] == pytest.approx(base["time_us"] + 3.5)


def test_blocking_modes() -> None:
    args = ["-b", "4KiB", "-e", "4KiB", *QUICK]
    time = {
        z: rows_of("allreduce_perf.py", [*args, "-z", str(z)], timing_only=True)[0][
            "in_place_time_us"
        ]
        for z in (0, 1, 2, 3)
    }
    assert time[1] > time[0] == time[2]  # -z 1 times a barrier after every call
    assert time[3] == pytest.approx(time[0])  # -z 3 leaves the barriers out of the time


def test_single_rank_has_no_bus_bandwidth() -> None:
    args = ["-b", "4KiB", "-e", "8KiB", "-f", "2", *QUICK]
    rows = rows_of("allreduce_perf.py", args, topology=DEFAULT)
    assert [r["world_size"] for r in rows] == [1, 1]
    assert all(r["busbw_GBps"] == 0.0 and r["checked"] is True for r in rows)


def test_busbw_grows_with_size() -> None:
    args = ["-b", "4KiB", "-e", "4MiB", "-f", "4", "-n", "1", "-w", "0"]
    rows = rows_of("allreduce_perf.py", args, timing_only=True)
    for g in GROUPS:
        busbw = [r[g + "busbw_GBps"] for r in rows]
        assert busbw == sorted(busbw) and len(set(busbw)) == len(busbw)


@pytest.mark.parametrize(("algorithm", "floor"), [("ring", 0.9), ("ring_pipelined", 0.95)])
def test_ring_allreduce_busbw_approaches_link_bandwidth(algorithm: str, floor: float) -> None:
    # In place, ring: 46.30 GB/s at 64MiB, 46.46 at 256MiB; ring_pipelined 48.14 and 49.52.
    args = ["-b", "128MiB", "-e", "128MiB", "-n", "1", "-w", "0", "--algorithm", algorithm]
    (row,) = rows_of("allreduce_perf.py", args, timing_only=True)
    assert row["size_B"] == 128 * 2**20 and row["algorithm"] == algorithm
    big = row["in_place_busbw_GBps"]
    assert floor * LINK_GBPS <= big <= LINK_GBPS  # the bandwidth lower bound holds
    # out of place moves what in place moves (the input is copied in untimed)
    assert row["busbw_GBps"] == pytest.approx(big, rel=1e-3)


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(KernBenchError, match="maxbytes"):
        rows_of("allreduce_perf.py", ["-b", "1MiB", "-e", "4KiB"])
    with pytest.raises(KernBenchError, match="-o/--op: unknown op 'bogus'"):
        rows_of("allreduce_perf.py", ["-o", "bogus"])
    with pytest.raises(KernBenchError, match=r"-g/--ngpus 2: only 1 is supported"):
        rows_of("allreduce_perf.py", ["-g", "2"])
    with pytest.raises(KernBenchError, match="root 9 is not a rank of this run"):
        rows_of("broadcast_perf.py", ["-b", "1KiB", "-e", "1KiB", "-r", "9"])
    with pytest.raises(KernBenchError, match="--bucket-layers must be at least 1"):
        rows_of("dp_training_step.py", ["--bucket-layers", "0"])
    with pytest.raises(KernBenchError, match="is for 4 ranks"):
        rows_of("allreduce_perf.py", ["-b", "1KiB", "-e", "1KiB", "--algorithm", "mesh_2x2"])


def test_the_main_command_prints_the_nccl_tests_layout() -> None:
    """kernbench run benches/allreduce_perf.py -- -b 8 -e 128M -f 2 -g 1 -d float, smaller."""
    done = kernbench_cli("run", str(BENCHES / "allreduce_perf.py"), "--", "-b", "8", "-e", "1K",
                         "-f", "2", "-g", "1", "-d", "float", "-n", "2", "-w", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:6] == [
        "# Collective test starting: allreduce_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 1 iters: 2 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        "#  Rank  0 Group  0 Pid      0 on    default device  0 [sip0] KernBench sip",
        "#",
    ]
    assert tuple(lines[6:9]) == COLUMN_LINES
    table = lines[9:17]
    assert [int(line.split()[0]) for line in table] == [8 << k for k in range(8)]
    for line in table:
        cells = line.split()
        assert cells[2:5] == ["float", "sum", "-1"] and cells[8] == cells[12] == "0"
    assert lines[17:21] == [
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 0",
        "#",
        "# Collective test concluded: allreduce_perf",
    ]
    assert lines[21] == "# KernBench: default, 1 ranks, functional; algorithm: ring"
    assert lines[22].startswith("collectives: ")


def test_csv_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "allreduce.csv"
    done = kernbench_cli("run", str(BENCHES / "allreduce_perf.py"), "--topology", RING8,
                         "--timing-only", "--csv", str(out), "--", *SMALL)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "   N/A" in done.stdout
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["size_B"]) for r in rows] == [4096, 16384, 65536]
    for g in GROUPS:
        for column in ("time_us", "algbw_GBps", "busbw_GBps", "wrong"):
            assert g + column in rows[0]
    for column in ("count", "type", "redop", "root", "checked", "topology", "kernbench_version"):
        assert rows[0][column] != ""
    assert {r["checked"] for r in rows} == {"n/a"}
    assert float(rows[-1]["busbw_GBps"]) == pytest.approx(
        float(rows[-1]["algbw_GBps"]) * 2 * 7 / 8, rel=1e-12
    )


# --------------------------------------------------------------------------- model benches
DP_ARGS = ["--layers", "3", "--hidden", "64", "--batch", "32", "--block", "64"]


def test_dp_training_step_overlaps_and_checks() -> None:
    (row,) = rows_of("dp_training_step.py", [*DP_ARGS, "--bucket-layers", "2"])
    assert row["checked"] is True and row["world_size"] == 8 and row["buckets"] == 2
    assert row["step_us"] < row["compute_us"] + row["comm_us"]
    assert row["serialized_us"] == pytest.approx(row["compute_us"] + row["comm_us"])
    assert row["step_us"] >= max(row["compute_us"], row["comm_us"])
    assert 0 < row["overlap_efficiency"] <= 1
    (timing,) = rows_of("dp_training_step.py", [*DP_ARGS, "--bucket-layers", "2"],
                        timing_only=True)  # fmt: skip
    assert timing["checked"] == "n/a"
    assert timing["step_us"] == row["step_us"]


def test_tp_mlp_both_modes_check() -> None:
    args = ["--batch", "32", "--hidden", "64", "--block", "64"]
    rows = rows_of("tp_mlp.py", args)
    assert [r["mode"] for r in rows] == ["allreduce", "rs_ag"]
    for r in rows:
        assert r["checked"] is True and r["ffn"] == 256
        assert r["total_us"] == pytest.approx(r["compute_us"] + r["comm_us"])
        assert r["comm_us"] > 0 and r["compute_us"] > 0
    assert rows[1]["algorithm"] == "ring+ring"
    (row,) = rows_of("tp_mlp.py", [*args, "--mode", "rs_ag"], timing_only=True)
    assert row["checked"] == "n/a" and row["total_us"] == rows[1]["total_us"]


@pytest.mark.parametrize(
    ("script", "args", "key"),
    [
        ("dp_training_step.py", [*DP_ARGS, "--bucket-layers", "2"], "step_us"),
        ("tp_mlp.py", ["--batch", "32", "--hidden", "64", "--block", "64"], "total_us"),
    ],
)
def test_model_benches_on_the_fast_backend(script: str, args: list[str], key: str) -> None:
    """Kernels, collectives and their overlap run on ``fast``; values still checked."""
    detailed = rows_of(script, args)
    fast = rows_of(script, args, overrides=["simulation.backend=fast"])
    assert len(fast) == len(detailed)
    for a, b in zip(detailed, fast, strict=True):
        assert b["checked"] is True
        assert b[key] == pytest.approx(a[key], rel=0.05)


# ------------------------------------------- benches written as torch.distributed programs
PIPELINE_ARGS = ["--micro-batches", "3", "--micro-batch-size", "8", "--hidden", "32"]
ATTENTION_ARGS = ["--batch", "1", "--seq", "16", "--d-model", "32", "--heads", "8"]
ZERO_ARGS = ["--d-in", "16", "--d-out", "8", "--batch", "8", "--steps", "2"]


@pytest.mark.parametrize(
    ("script", "args", "key", "world_size"),
    [
        ("pipeline_parallel.py", PIPELINE_ARGS, "step_us", 8),
        ("attention_block.py", [*ATTENTION_ARGS, "--mode", "sequence"], "block_us", 4),
        ("zero_optimizer_step.py", ZERO_ARGS, "step_us", 8),
    ],
)
def test_torch_style_benches_check_on_both_backends(script, args, key, world_size) -> None:
    """Each checks its values against NumPy on ``detailed`` and ``fast``; timing-only
    mode gives the same times with no values."""
    detailed = rows_of(script, args, world_size=world_size)
    fast = rows_of(script, args, world_size=world_size, overrides=["simulation.backend=fast"])
    timing = rows_of(script, args, world_size=world_size, timing_only=True)
    assert detailed and len(fast) == len(timing) == len(detailed)
    for a, b, c in zip(detailed, fast, timing, strict=True):
        assert a["checked"] is True and b["checked"] is True and c["checked"] == "n/a"
        assert a["world_size"] == world_size and a[key] > 0
        assert b[key] == pytest.approx(a[key], rel=0.05)
        assert c[key] == a[key]


@pytest.mark.parametrize(
    ("script", "args", "world_size"),
    [
        ("pipeline_parallel.py", [*PIPELINE_ARGS, "--p2p", "batch"], 8),
        ("pipeline_parallel.py", ["--micro-batches", "2", "--schedule", "1f1b"], 4),
        ("attention_block.py", [*ATTENTION_ARGS, "--mode", "heads", "--kernel", "sdpa"], 8),
        ("attention_block.py", [*ATTENTION_ARGS, "--mode", "heads", "--kernel", "einsum"], 4),
        ("zero_optimizer_step.py", [*ZERO_ARGS, "--optimizer", "sgd", "--reduce", "all_reduce"], 8),
    ],
)
def test_torch_style_bench_variants_check(script, args, world_size) -> None:
    """The other schedules, kernels and optimizers; 1F1B checks every stage's gradients."""
    rows = rows_of(script, args, world_size=world_size)
    assert rows and all(r["checked"] is True for r in rows)


@pytest.mark.parametrize(
    ("bench", "args", "row"),
    [
        # nccl-tests rounds a split op's count per rank down to 16-byte lines
        ("allgather_perf.py", ["-b", "1000", "-e", "1000"], ("896", "28")),
        ("reducescatter_perf.py", ["-b", "200", "-e", "200", "-d", "int8"], ("128", "16")),
        ("alltoall_perf.py", ["-b", "1000", "-e", "1000", "-d", "half"], ("896", "56")),
    ],
)
def test_split_op_sizes_are_rounded_as_nccl_tests_rounds_them(bench, args, row, capsys) -> None:
    from kernbench.cli import main

    path = str(Path(__file__).resolve().parents[1] / "benches" / bench)
    assert (
        main(["run", path, "-t", "ring8", "--timing-only", "--", *args, "-n", "1", "-w", "0"]) == 0
    )
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [cells[:2] for cells in lines if cells and cells[0].isdigit()] == [list(row)]


MOE_ARGS = ["--tokens", "32", "--d-model", "16", "--ffn", "32"]


@pytest.mark.parametrize(("args", "world_size"), [([], 8), (["--top-k", "1"], 4)])
def test_moe_layer_checks_on_both_backends(args, world_size) -> None:
    """topk routing, argsort, bincount, advanced indexing, two all_to_all_single with
    split sizes read from the exchanged counts and index_add_: checked against NumPy on
    both backends; timing-only runs take the routing as balanced and check nothing."""
    detailed = rows_of("moe_layer.py", [*MOE_ARGS, *args], world_size=world_size)
    fast = rows_of(
        "moe_layer.py", [*MOE_ARGS, *args], world_size=world_size,
        overrides=["simulation.backend=fast"],
    )  # fmt: skip
    timing = rows_of("moe_layer.py", [*MOE_ARGS, *args], world_size=world_size, timing_only=True)
    (a,), (b,), (c,) = detailed, fast, timing
    assert a["checked"] is True and b["checked"] is True and c["checked"] == "n/a"
    assert a["experts"] == 2 * world_size and a["all_to_all_us"] > 0
    assert b["layer_us"] == pytest.approx(a["layer_us"], rel=0.05)
    assert 0 < c["all_to_all_us"] and c["layer_us"] == pytest.approx(a["layer_us"], rel=0.25)
