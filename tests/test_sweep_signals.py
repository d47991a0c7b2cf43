"""A sweep killed or interrupted at any moment leaves no process and only whole point files."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sweep_helpers import (
    descendants_alive,
    hostile_sweep,
    interruptible,
    records_by_label,
    run_cli,
    sweep_command,
)

MODES = ["a", "b", "c", "d", "e", "f", "g", "die"]  # all but "die" return a row


def _sweep(tmp_path: Path, delay: float) -> tuple[Path, Path]:
    sweep = hostile_sweep(tmp_path, {"--mode": MODES, "--delay": [delay]})
    return sweep, tmp_path / "out"


def _start(sweep: Path, out: Path, jobs: int, **popen) -> subprocess.Popen:
    # A session of its own: the process group holds the driver and every process it starts.
    return subprocess.Popen(
        sweep_command(sweep, "-j", str(jobs), "-o", str(out)),
        start_new_session=True,
        preexec_fn=interruptible,
        **popen,
    )


def _assert_nothing_left(pgid: int, grace_s: float = 0.5) -> None:
    # Shorter than a point, so a child that outlived the driver would still be running.
    deadline = time.monotonic() + grace_s
    while descendants_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert descendants_alive(pgid) == [], "processes of the sweep outlived it"


def _assert_whole_point_files(out: Path) -> int:
    points = out / "points"
    files = sorted(points.glob("*.json")) if points.is_dir() else []
    for path in files:
        record = json.loads(path.read_text())
        assert record["point"]["id"] == path.stem
        assert record["status"] in ("ok", "failed")
        if record["status"] == "ok":
            assert record["report"]["results"][0]["mode"] in MODES
        else:
            assert record["point"]["script_args"][1] == "die", record["error"]
            assert record["exit_status"] == 137
    return len(files)


def _ok_files(out: Path) -> dict[str, bytes]:
    points = out / "points"
    files = {p.name: p.read_bytes() for p in points.glob("*.json")} if points.is_dir() else {}
    return {name: data for name, data in files.items() if b'"status": "ok"' in data}


def _assert_resume_completes(sweep: Path, out: Path) -> None:
    result = run_cli(sweep, "-j", "2", "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert f"error: 1 of {len(MODES)} points failed" in result.stderr
    records = records_by_label(out)
    assert sorted(label.split()[2] for label in records) == sorted(MODES)
    for label, record in records.items():
        expected = "failed" if " die " in label else "ok"
        assert record["status"] == expected, (label, record.get("error"))


def _kill_rounds(tmp_path: Path, rounds: int, seed: int) -> None:
    sweep, out = _sweep(tmp_path, delay=1.0)
    rng = random.Random(seed)
    with_children = 0
    for round_index in range(rounds):
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL, "text": True}
        process = _start(sweep, out, 2, **pipes)
        if round_index % 2:  # every other kill lands after the driver began to run points
            process.stdout.readline()
        time.sleep(rng.uniform(0.0, 1.5))
        with_children += len(descendants_alive(process.pid)) > 1
        process.kill()
        process.communicate(timeout=30)
        _assert_nothing_left(process.pid)
        _assert_whole_point_files(out)
    assert with_children >= rounds // 4  # kills hit the sweep while points ran
    _assert_resume_completes(sweep, out)


def test_sigkill_at_random_moments_leaves_no_process_and_whole_files(tmp_path: Path) -> None:
    # Four rounds, two of them after the driver began to run points; 100 with -m slow.
    _kill_rounds(tmp_path, rounds=4, seed=14)


@pytest.mark.slow
def test_sigkill_at_random_moments_many_rounds(tmp_path: Path) -> None:
    _kill_rounds(tmp_path, rounds=100, seed=1414)


@pytest.mark.parametrize("jobs", [1, 2])
def test_sigterm_leaves_no_process_behind(tmp_path: Path, jobs: int) -> None:
    sweep, out = _sweep(tmp_path, delay=1.5)
    process = _start(sweep, out, jobs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while _assert_whole_point_files(out) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    process.terminate()
    process.wait(timeout=30)
    _assert_nothing_left(process.pid)
    assert 1 <= _assert_whole_point_files(out) < len(MODES)


# -j 1 and -j 2 share the driver's loop; -j 2 (two points cut at once) runs by default.
@pytest.mark.parametrize("jobs", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_ctrl_c_exits_130_without_a_traceback_and_keeps_what_finished(
    tmp_path: Path, jobs: int
) -> None:
    sweep, out = _sweep(tmp_path, delay=1.0)  # three rounds cannot finish the sweep
    rng = random.Random(jobs)
    for _ in range(3):
        process = _start(
            sweep, out, jobs, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert process.stdout.readline().startswith("sweep: ")  # the driver is running
        time.sleep(rng.uniform(0.0, 1.2))
        before = _ok_files(out)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
        assert process.returncode == 130, stderr
        assert "Traceback" not in stderr and "Error" not in stderr, stderr
        assert "points done; run again to resume" in stderr or "aborted" in stderr, stderr
        _assert_nothing_left(process.pid)
        _assert_whole_point_files(out)
        after = _ok_files(out)
        assert {name: after.get(name) for name in before} == before  # nothing finished is lost
    _assert_resume_completes(sweep, out)
