"""--max-sim-time and --max-wall-time stop a runaway run cleanly, keeping a partial report."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import SimulationLimitError

RUNAWAY = """
import kernbench.torch as torch
import kernbench.torch.distributed as dist

def main():
    dist.init_process_group()
    t = torch.ones(1024)
    while True:
        dist.all_reduce(t)
"""


def _forever() -> None:
    dist.init_process_group()
    t = torch.ones(256)
    while True:
        dist.all_reduce(t)


def test_max_sim_time_stops_with_a_partial_report():
    with pytest.raises(SimulationLimitError) as info:
        kernbench.simulate(
            _forever, topology="topologies/multi_sip.yaml", max_sim_time_ps=100_000_000
        )
    error = info.value
    assert "passed --max-sim-time (100000000 ps)" in str(error)
    assert set(error.blocked) == {0, 1, 2, 3}
    report = error.report
    assert report["stopped"].startswith("stopped at ")
    assert 100_000_000 <= report["simulated_time_ps"] < 110_000_000
    assert len(report["collectives"]) > 5  # what happened before the stop is there


def test_max_wall_time_stops_within_the_limit():
    start = time.perf_counter()
    with pytest.raises(SimulationLimitError, match="passed --max-wall-time"):
        kernbench.simulate(_forever, topology="topologies/multi_sip.yaml", max_wall_s=0.5)
    assert time.perf_counter() - start < 5


def test_cli_writes_the_partial_report_and_exits_2(tmp_path: Path):
    script, report = tmp_path / "runaway.py", tmp_path / "report.json"
    script.write_text(RUNAWAY)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernbench.cli",
            "run",
            str(script),
            "--topology",
            "topologies/multi_sip.yaml",
            "--max-sim-time",
            "200us",
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "error: stopped at" in result.stderr and "rank 3 was waiting for" in result.stderr
    partial = json.loads(report.read_text())
    assert partial["stopped"].startswith("stopped at ")
    assert partial["simulated_time_ps"] >= 200_000_000
