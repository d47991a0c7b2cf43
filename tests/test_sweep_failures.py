"""A sweep point that exits, dies or segfaults is recorded as failed; every other point finishes.

Each test runs ``kernbench sweep`` in a process of its own, checks the failed
point's record (error, exit status or signal, the bench's own stderr tail),
the "N of M points failed" line and the summary, then resumes: only the failed
points run again, the finished ones are left untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweep_helpers import hostile_sweep, point_files, records_by_label, run_cli

# case -> (args of the sweep, label of the failing point, what its record must say)
CASES = {
    "argparse": (
        {"-n": [16, 32, "notanint"]},
        "tiny -n notanint",
        {
            "exit_status": 2,
            "signal": None,
            "stderr": "hostile: error: argument -n: invalid int value: 'notanint'",
            "error": "exited with status 2",
        },
    ),
    "help": (
        {"-n": [1, 2], "--help": [False, True]},
        "tiny -n 1 --help",
        {
            "exit_status": 0,
            "signal": None,
            "stdout": "usage: hostile [-h]",
            "error": "exited with status 0 before returning a result",
        },
    ),
    "os._exit(137)": (
        {"-n": [1, 2], "--mode": ["ok", "die"]},
        "tiny -n 1 --mode die",
        {
            "exit_status": 137,
            "signal": None,
            "stderr": "stderr of point n=1 mode=die",
            "error": "exited with status 137",
        },
    ),
    "segfault": (
        {"-n": [1, 2], "--mode": ["ok", "segv"]},
        "tiny -n 1 --mode segv",
        {
            "exit_status": None,
            "signal": "SIGSEGV",
            "stderr": "Fatal Python error: Segmentation fault",
            "error": "killed by SIGSEGV",
        },
    ),
}


def _check_failed(record: dict, expected: dict) -> None:
    assert record["status"] == "failed"
    for key, value in expected.items():
        if key in ("stderr", "stdout", "error"):
            assert value in record[key], (key, record[key])
        else:
            assert record[key] == value, (key, record[key])


# Every case with -j 2; -j 1 (the same loop, one child at a time) with one case by
# default and with the others under -m slow.
@pytest.mark.parametrize(
    ("case", "jobs"),
    [
        param
        for case in CASES
        for param in (
            (case, 1) if case == "os._exit(137)" else pytest.param(case, 1, marks=pytest.mark.slow),
            (case, 2),
        )
    ],
)
def test_a_point_that_exits_or_dies_is_recorded_and_the_others_finish(
    tmp_path: Path, case: str, jobs: int
) -> None:
    args, bad_label, expected = CASES[case]
    sweep = hostile_sweep(tmp_path, args)
    out = tmp_path / "out"
    result = run_cli(sweep, "-j", str(jobs), "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    records = records_by_label(out)
    total = len(records)
    marker = bad_label.split(maxsplit=2)[-1].split()[-1]  # notanint, --help, die, segv
    failing = [label for label in records if marker in label.split()]
    assert total == (3 if case == "argparse" else 4)
    assert f"error: {len(failing)} of {total} points failed" in result.stderr
    assert f"{total - len(failing)} ok, {len(failing)} failed" in result.stdout

    _check_failed(records[bad_label], expected)
    for label, record in records.items():
        if label in failing:
            assert record["status"] == "failed", label
        else:
            assert record["status"] == "ok", (label, record.get("error"))
            assert record["report"]["results"][0]["n"] == int(label.split()[2])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] == total - len(failing)
    assert sorted(f["label"] for f in summary["failed"]) == sorted(failing)

    # Resume: only the failed points run again (and fail the same way); nothing crashes.
    before = {name: path.read_bytes() for name, path in _ok_files(out).items()}
    again = run_cli(sweep, "-j", str(jobs), "-o", str(out))
    assert again.returncode == 2, again.stderr
    assert "Traceback" not in again.stderr
    skipped = total - len(failing)
    assert f"{total} points, {skipped} already done (skipped), {len(failing)} to run" in (
        again.stdout
    )
    assert {name: path.read_bytes() for name, path in _ok_files(out).items()} == before
    _check_failed(records_by_label(out)[bad_label], expected)


def _ok_files(out: Path) -> dict[str, Path]:
    return {
        name: out / "points" / name
        for name, record in point_files(out).items()
        if record["status"] == "ok"
    }


def test_a_bench_that_raises_keeps_its_error_and_traceback(tmp_path: Path) -> None:
    sweep = hostile_sweep(tmp_path, {"--mode": ["ok", "raise"]})
    out = tmp_path / "out"
    result = run_cli(sweep, "-o", str(out))
    assert result.returncode == 2
    record = records_by_label(out)["tiny --mode raise"]
    assert record["status"] == "failed"
    assert "RuntimeError: the bench gave up" in record["error"]
    assert record["exit_status"] == 0 and record["signal"] is None
    assert "stderr of point n=1 mode=raise" in record["stderr"]
    assert "rank 0 of point n=1 mode=raise" in record["stdout"]
    assert f"failed: tiny --mode raise ({record['point']['id']}): " in result.stdout


def test_an_ok_point_keeps_what_the_bench_printed(tmp_path: Path) -> None:
    sweep = hostile_sweep(tmp_path, {"-n": [5]})
    out = tmp_path / "out"
    assert run_cli(sweep, "-o", str(out)).returncode == 0
    (record,) = point_files(out).values()
    assert record["status"] == "ok" and record["exit_status"] == 0
    assert record["stdout"].startswith("rank 0 of point n=5 mode=ok\n")
    assert record["stderr"] == "stderr of point n=5 mode=ok\n"
    assert record["report"]["results"] == [{"n": 5, "mode": "ok"}]


def test_a_point_over_the_sweeps_wall_time_is_stopped_and_recorded(tmp_path: Path) -> None:
    sweep = hostile_sweep(tmp_path, {"--delay": [0, 60]}, max_wall_time="1s")
    out = tmp_path / "out"
    result = run_cli(sweep, "-o", str(out), timeout=60)
    assert result.returncode == 2
    records = records_by_label(out)
    assert records["tiny --delay 0"]["status"] == "ok"
    slow = records["tiny --delay 60"]
    assert slow["status"] == "failed" and "--max-wall-time (1 s)" in slow["error"]


def test_a_point_that_swallows_the_wall_time_stop_is_killed_after_a_grace(tmp_path: Path) -> None:
    """The limit is enforced inside the point's process; one that ignores it (catching
    the interrupt) is killed by the sweep at the limit plus a grace (5 s at least)."""
    sweep = hostile_sweep(tmp_path, {"--mode": ["stubborn"]}, max_wall_time="1s")
    out = tmp_path / "out"
    result = run_cli(sweep, "-o", str(out), timeout=60)
    assert result.returncode == 2
    (record,) = point_files(out).values()
    assert record["status"] == "failed"
    assert "past its wall-time limit (max_wall_time 1 s) and a grace" in record["error"]
    assert 6.0 <= record["wall_s"] < 20.0
