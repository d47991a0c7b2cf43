"""The benchmark scripts run and print their figures (they measure; tests do not)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _run(script: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_engine_overhead_prints_both_rates_and_the_ratio(benchmarks_dir):
    out = _run(benchmarks_dir / "engine_overhead.py", "--messages", "500")
    assert "bare SimPy:" in out and "fabric:" in out and "ratio fabric/bare cost" in out


def test_allreduce_scale_prints_a_row_per_run(benchmarks_dir):
    out = _run(
        benchmarks_dir / "allreduce_scale.py",
        "--ranks",
        "8",
        "--bytes",
        "64KiB",
        "--algorithms",
        "ring",
        "multi_cube",
    )
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("machine: bare SimPy") and "events/s" in lines[1]
    assert len(lines) == 4 and lines[2].split()[:2] == ["8", "ring"]


def test_functional_prints_wall_time_and_memory_ratio(benchmarks_dir):
    out = _run(benchmarks_dir / "functional.py", "--ranks", "4", "--bytes", "64KiB")
    assert "values checked: True" in out and "peak RSS" in out and "in the all-reduce" in out


@pytest.mark.slow  # two 16-point sweeps: a long run whatever the sizes
def test_sweep_speedup_prints_the_speed_up(benchmarks_dir):
    out = _run(benchmarks_dir / "sweep_speedup.py", "--max-bytes", "64KiB", "--iters", "1")
    assert "1 worker:" in out and "2 workers:" in out and "speed-up:" in out


def test_scale_prints_a_row_per_point_and_the_growth(benchmarks_dir):
    out = _run(
        benchmarks_dir / "scale.py",
        "--ranks", "8", "16",
        "--algorithms", "ring",
        "--backends", "fast",
        "--bytes", "32KiB",  # blocks of a packet: one piece, evaluated step-wide
        "--topology", "multi_sip",
    )  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("machine: bare SimPy") and "growth" in lines[1]
    rows = [line.split() for line in lines[2:]]
    assert [row[:3] for row in rows] == [["fast", "ring", "8"], ["fast", "ring", "16"]]
    assert rows[0][-1] == rows[1][-1] == "step-wide"
    float(rows[1][5])  # the growth exponent against the 8-rank point


def test_scale_takes_ccl_overrides_as_kernbench_run_does(benchmarks_dir):
    args = ["--ranks", "8", "--algorithms", "ring", "--backends", "fast", "--bytes", "64KiB"]
    args += ["--topology", "multi_sip"]
    out = _run(benchmarks_dir / "scale.py", *args, "--set", "ccl.configs.ring.chunks=0")
    assert "error: ConfigError" in out and "configs.ring.chunks: must be > 0" in out
    one, two = (
        _run(benchmarks_dir / "scale.py", *args, "--set", f"ccl.configs.ring.chunks={n}")
        for n in (1, 2)
    )
    assert one.splitlines()[2].split()[6] != two.splitlines()[2].split()[6]  # sim(ms)


def test_crossval_prints_the_worst_case_per_configuration(benchmarks_dir):
    out = _run(
        benchmarks_dir / "crossval.py",
        "--machines", "ring8",
        "--configs", "ring", "binomial",
        "--bytes", "16KiB",
    )  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("machine: bare SimPy")
    assert [line.split()[0] for line in lines[2:4]] == ["ring", "binomial"]
    assert lines[-1].endswith("s wall") and "0 over their bound" in lines[-1]


def test_collectives_quality_prints_a_row_per_point_and_the_count_outside(benchmarks_dir):
    out = _run(
        benchmarks_dir / "collectives_quality.py",
        "--machines", "fc8",
        "--ops", "all_reduce",
        "--configs", "ring", "double_binary_tree",
        "--sizes", "64KiB",
    )  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("machine: bare SimPy") and "pred us" in lines[1]
    assert [line.split()[:4] for line in lines[2:4]] == [
        ["fc8", "all_reduce", "ring", "64KiB"],
        ["fc8", "all_reduce", "double_binary_tree", "64KiB"],
    ]
    assert lines[4].startswith("2 points, ")


def test_ccl_mapping_prints_crossings_and_the_bound_per_link_class(benchmarks_dir):
    out = _run(
        benchmarks_dir / "ccl_mapping.py",
        "rack",
        "--rack-bytes", "4MiB",
        "--rack-chunks", "2",
        "--set", "system.sips.count=2",
        "--set", "sip.cube_mesh.w=1",
        "--set", "sip.cube_mesh.h=1",
    )  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("machine: bare SimPy")
    assert lines[1] == (
        "rack.yaml, PE level (16 ranks): ring all-reduce of 4194304 bytes, 2 pieces per chunk"
    )
    # Two SIPs behind the switch: the ring crosses each of the four directed links once a step.
    assert lines[4] == "inter-SIP links: 4, crossings per step per direction: min 1.000, max 1.000"
    assert lines[6].split()[0] == "hbm_port"  # the slowest link class comes first
