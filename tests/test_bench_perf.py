"""Collective perf benches (nccl-tests style) and the DP / TP model benches.

The perf benches run on ``topologies/ring8.yaml`` (8 ranks, one 50 GB/s link
between neighbours); their rows must follow nccl-tests' definitions exactly,
their values must check, and a bandwidth-optimal ring must drive busbw close
to the link bandwidth at large sizes.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernbench.bench import perf
from kernbench.bench.perf import bus_factor, format_table, parse_bytes, sizes_from_args
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
}
SMALL = ["-b", "4KiB", "-e", "64KiB", "-f", "4"]


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
    }[op]


# --------------------------------------------------------------------------- helpers
def test_parse_bytes_accepts_units_and_nccl_suffixes() -> None:
    assert parse_bytes("8") == 8
    assert parse_bytes(8) == 8
    assert parse_bytes("4KiB") == 4096
    assert parse_bytes("1MB") == 10**6
    assert parse_bytes("1M") == 2**20
    assert parse_bytes("2g") == 2 * 2**30
    with pytest.raises(KernBenchError):
        parse_bytes("4 bananas")


def test_sizes_from_args() -> None:
    assert sizes_from_args("4KiB", "64KiB", 4) == [4096, 16384, 65536]
    assert sizes_from_args("8", "100", "2") == [8, 16, 32, 64]
    assert sizes_from_args("1M", "1M") == [2**20]
    for bad in (("0", "8", 2), ("8", "4", 2), ("8", "64", 1), ("8", "64", "x")):
        with pytest.raises(ConfigError):
            sizes_from_args(*bad)


def test_bus_factor_follows_nccl_tests() -> None:
    for op in PERF.values():
        assert bus_factor(op, 8) == factor(op, 8)
        assert bus_factor(op, 1) == 0.0
    assert bus_factor("reduce", 4) == 1.0
    with pytest.raises(ConfigError, match="unknown collective"):
        bus_factor("all_sum", 8)


def test_format_table_columns() -> None:
    row = {
        "size_B": 4096,
        "count": 1024,
        "type": "float32",
        "redop": "sum",
        "algorithm": "ring",
        "time_us": 11.5,
        "algbw_GBps": 0.356,
        "busbw_GBps": 0.623,
        "checked": True,
    }
    lines = format_table([row]).splitlines()
    for column in ("size", "count", "type", "redop", "algorithm", "time(us)", "algbw(GB/s)"):
        assert column in lines[0]
    assert lines[1].split() == ["4096", "1024", "float32", "sum", "ring", "11.50", "0.36", "0.62",
                                "True"]  # fmt: skip
    assert lines[-1] == "# Avg bus bandwidth    : 0.62 GB/s"


# --------------------------------------------------------------------------- perf benches
@pytest.mark.parametrize("script", sorted(PERF))
def test_perf_bench_rows_functional_and_timing_only(script: str) -> None:
    op = PERF[script]
    rows = rows_of(script, SMALL)
    assert [r["size_B"] for r in rows] == [4096, 16384, 65536]
    for r in rows:
        assert r["op"] == op and r["world_size"] == 8 and r["type"] == "float32"
        assert r["count"] * 4 == r["size_B"]
        assert r["checked"] is True
        assert r["algbw_GBps"] == pytest.approx(r["size_B"] / r["time_us"] / 1e3, rel=1e-12)
        assert r["busbw_GBps"] == r["algbw_GBps"] * factor(op, 8)
        assert r["redop"] == ("sum" if op in ("all_reduce", "reduce_scatter") else "none")
    timing = rows_of(script, SMALL, timing_only=True)
    assert [r["checked"] for r in timing] == ["n/a"] * 3
    # Time does not depend on values: both modes time the same calls to the picosecond.
    assert [r["time_us"] for r in timing] == [r["time_us"] for r in rows]


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("allreduce_perf.py", ["-d", "float16", "-o", "prod"]),
        ("allreduce_perf.py", ["-d", "int8", "-o", "avg"]),
        ("allreduce_perf.py", ["-d", "bfloat16", "-o", "max", "-n", "3", "-w", "0"]),
        ("reducescatter_perf.py", ["-d", "int32", "-o", "min"]),
        ("broadcast_perf.py", ["-r", "3", "-d", "uint8"]),
    ],
)
def test_perf_bench_types_and_ops_check(script: str, args: list[str]) -> None:
    rows = rows_of(script, ["-b", "1KiB", "-e", "1KiB", *args])
    assert [r["checked"] for r in rows] == [True]
    assert rows[0]["type"] == args[args.index("-d") + 1]


def test_wrong_values_are_reported_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = perf._Case.expected

    def off_by_one(self):  # noqa: ANN001, ANN202
        values = expected(self)
        return None if values is None else values + (1 if self.rank == 5 else 0)

    monkeypatch.setattr(perf._Case, "expected", off_by_one)
    rows = rows_of("allreduce_perf.py", ["-b", "1KiB", "-e", "1KiB"])
    assert rows[0]["checked"] is False  # rank 5's mismatch reaches rank 0's row


def test_single_rank_has_no_bus_bandwidth() -> None:
    rows = rows_of("allreduce_perf.py", ["-b", "4KiB", "-e", "8KiB"], topology=DEFAULT)
    assert [r["world_size"] for r in rows] == [1, 1]
    assert all(r["busbw_GBps"] == 0.0 and r["checked"] is True for r in rows)


def test_busbw_grows_with_size() -> None:
    rows = rows_of("allreduce_perf.py", ["-b", "4KiB", "-e", "4MiB", "-f", "4"], timing_only=True)
    busbw = [r["busbw_GBps"] for r in rows]
    assert busbw == sorted(busbw) and len(set(busbw)) == len(busbw)


@pytest.mark.parametrize(("algorithm", "floor"), [("ring", 0.9), ("ring_pipelined", 0.95)])
def test_ring_allreduce_busbw_approaches_link_bandwidth(algorithm: str, floor: float) -> None:
    # At 64MiB ring: 46.30 GB/s, ring_pipelined: 48.14; at 256MiB 46.46 and 49.52.
    args = ["-b", "64MiB", "-e", "256MiB", "-f", "4", "--algorithm", algorithm]
    rows = rows_of("allreduce_perf.py", args, timing_only=True)
    assert [r["size_B"] for r in rows] == [64 * 2**20, 256 * 2**20]
    assert {r["algorithm"] for r in rows} == {algorithm}
    big = rows[-1]["busbw_GBps"]
    assert floor * LINK_GBPS <= big <= LINK_GBPS  # the bandwidth lower bound holds
    assert rows[0]["busbw_GBps"] <= big


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(KernBenchError, match="maxbytes"):
        rows_of("allreduce_perf.py", ["-b", "1MiB", "-e", "4KiB"])
    with pytest.raises(KernBenchError, match="invalid choice: 'bogus'"):
        rows_of("allreduce_perf.py", ["-o", "bogus"])
    with pytest.raises(KernBenchError, match="--bucket-layers must be at least 1"):
        rows_of("dp_training_step.py", ["--bucket-layers", "0"])
    with pytest.raises(KernBenchError, match="is for 4 ranks"):
        rows_of("allreduce_perf.py", ["-b", "1KiB", "-e", "1KiB", "--algorithm", "mesh_2x2"])


def test_csv_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "allreduce.csv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", str(BENCHES / "allreduce_perf.py"),
         "--topology", RING8, "--timing-only", "--csv", str(out), "--", *SMALL],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "busbw(GB/s)" in result.stdout
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["size_B"]) for r in rows] == [4096, 16384, 65536]
    for column in ("time_us", "algbw_GBps", "busbw_GBps", "count", "type", "checked"):
        assert column in rows[0]
    for column in ("topology", "topology_digest", "seed", "kernbench_version"):
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
