"""``kernbench sweep``: points, resume after Ctrl-C, the process pool and Dask, errors."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from sweep_helpers import interruptible

from kernbench.bench.runner import run_script
from kernbench.bench.sweep import expand_points, load_sweep, point_id
from kernbench.bench.sweep_records import IDENTITY_KEYS
from kernbench.cli import main

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "tests" / "data" / "sweep_bench.py"
TOPOLOGIES = [REPO / "topologies" / f"{name}.yaml" for name in ("ring8", "fc8", "multi_sip")]
SIZES = ["4KiB", "16KiB", "64KiB", "256KiB"]
POINT_COLUMNS = ["topology", "ccl.all_reduce", "-b", "point_id"]


def write_sweep(directory: Path, name: str = "sweep.yaml", **document) -> Path:
    """A sweep file in ``directory``; bench and topologies relative to it, as users write them."""
    path = directory / name
    relative = lambda p: os.path.relpath(p, directory)  # noqa: E731
    document = {
        "bench": relative(BENCH),
        "topologies": [relative(t) for t in TOPOLOGIES],
        "set": {"ccl.all_reduce": ["ring", "recursive_doubling"]},
        "args": {"-b": SIZES},
        **document,
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory) -> Path:
    """The 3 topologies x 2 algorithms x 4 sizes sweep, run once with -j 2."""
    directory = tmp_path_factory.mktemp("local")
    sweep = write_sweep(directory)
    assert main(["sweep", str(sweep), "-j", "2", "-o", str(directory / "out")]) == 0
    return directory / "out"


def test_points_are_the_product_with_stable_ids(tmp_path: Path) -> None:
    sweep_path = write_sweep(tmp_path)
    sweep = load_sweep(sweep_path)
    points = expand_points(sweep, sweep_path, tmp_path / "a", trace=False)
    assert len(points) == 3 * 2 * 4
    assert len({p["id"] for p in points}) == 24
    assert points[0]["label"] == "ring8 ccl.all_reduce=ring -b 4KiB"
    assert points[0]["overrides"] == ["ccl.all_reduce=ring"]
    assert points[0]["script_args"] == ["-b", "4KiB"]
    assert Path(points[0]["topology_path"]) == TOPOLOGIES[0].resolve()
    # The id is the hash of what the run receives: resolved files, --set and argv text.
    assert points[5]["id"] == point_id({key: points[5][key] for key in IDENTITY_KEYS})
    assert IDENTITY_KEYS == (
        "bench_path",
        "topology_path",
        "overrides",
        "script_args",
        "world_size",
        "timing_only",
        "seed",
    )
    # The id depends on what the point is, not on where its output goes.
    elsewhere = expand_points(sweep, sweep_path, tmp_path / "b", trace=True)
    assert [p["id"] for p in elsewhere] == [p["id"] for p in points]


def test_flag_values_true_and_false(tmp_path: Path) -> None:
    sweep_path = write_sweep(tmp_path, set={}, args={"--check": [True, False], "-f": [2]})
    points = expand_points(load_sweep(sweep_path), sweep_path, tmp_path, trace=False)
    assert [p["script_args"] for p in points[:2]] == [["--check", "-f", "2"], ["-f", "2"]]


def test_sweep_writes_points_results_and_summary(local_sweep: Path) -> None:
    points = sorted((local_sweep / "points").iterdir())
    assert len(points) == 24
    records = [json.loads(p.read_text()) for p in points]
    assert {r["status"] for r in records} == {"ok"}
    assert all(p.name == f"{r['point']['id']}.json" for p, r in zip(points, records, strict=True))

    rows = read_csv(local_sweep / "results.csv")
    assert len(rows) == 24
    assert list(rows[0])[:4] == POINT_COLUMNS
    assert {r["topology"] for r in rows} == {"ring8", "fc8", "multi_sip"}
    assert all(r["algorithm"] == r["ccl.all_reduce"] for r in rows)
    assert [r["-b"] for r in rows[:4]] == SIZES
    assert [int(r["size_B"]) for r in rows[:4]] == [4096, 16384, 65536, 262144]

    summary = json.loads((local_sweep / "summary.json").read_text())
    assert (summary["points"], summary["ok"], summary["failed"]) == (24, 24, [])
    assert len(summary["rows"]) == 24


def test_a_point_gives_what_kernbench_run_gives(local_sweep: Path) -> None:
    direct = run_script(
        str(BENCH),
        topology=str(TOPOLOGIES[1]),
        overrides=["ccl.all_reduce=recursive_doubling"],
        timing_only=True,
        script_args=["-b", "64KiB"],
        echo=lambda _text: None,
    )
    summary = json.loads((local_sweep / "summary.json").read_text())
    (row,) = [
        r
        for r in summary["rows"]
        if (r["topology"], r["ccl.all_reduce"], r["-b"]) == ("fc8", "recursive_doubling", "64KiB")
    ]
    assert row["time_us"] == direct.report["results"][0]["time_us"]
    record = json.loads((local_sweep / "points" / f"{row['point_id']}.json").read_text())
    assert record["report"]["simulated_time_ps"] == direct.elapsed_ps


def test_dask_executor_gives_identical_rows(local_sweep: Path, tmp_path: Path) -> None:
    # Every topology and algorithm of the local sweep, at its smallest and largest size (12
    # of its 24 points): the other sizes take the same path through the executor.
    sizes = [SIZES[0], SIZES[-1]]
    sweep = write_sweep(tmp_path, args={"-b": sizes})
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "-j", "2", "--executor", "dask", "-o", str(out)]) == 0
    local = json.loads((local_sweep / "summary.json").read_text())
    dask = json.loads((out / "summary.json").read_text())
    assert len(dask["rows"]) == 12
    assert dask["rows"] == [row for row in local["rows"] if row["-b"] in sizes]
    for path in (out / "points").iterdir():
        ours = json.loads(path.read_text())["report"]
        theirs = json.loads((local_sweep / "points" / path.name).read_text())["report"]
        for key in (
            "simulated_time_ps",
            "per_rank_time_ps",
            "bytes_by_link_class",
            "results",
            "trace_digest",
        ):
            assert ours[key] == theirs[key], (path.name, key)


def _start_slow_sweep(tmp_path: Path, jobs: int, wait_for: int):
    """An 8-point sweep whose points take 0.4 s, running until ``wait_for`` points exist."""
    sweep = write_sweep(
        tmp_path,
        topologies=[str(t) for t in TOPOLOGIES[:2]],
        args={"-b": SIZES[:2], "--delay": [0.4]},
    )
    out = tmp_path / "out"
    points_dir = out / "points"
    command = [
        sys.executable,
        "-m",
        "kernbench.cli",
        "sweep",
        str(sweep),
        "-j",
        str(jobs),
        "-o",
        str(out),
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if points_dir.is_dir() and len(list(points_dir.glob("*.json"))) >= wait_for:
            break
        time.sleep(0.02)
    return process, command, out, points_dir


def test_interrupted_sweep_loses_nothing_and_resumes(tmp_path: Path) -> None:
    process, command, out, points_dir = _start_slow_sweep(tmp_path, jobs=2, wait_for=4)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr

    files = sorted(points_dir.iterdir())
    assert 4 <= len(files) < 8
    assert f"interrupted: {len(files)} of 8 points done; run again to resume" in stderr
    assert all(json.loads(f.read_text())["status"] == "ok" for f in files)  # whole files only
    before = {f.name: (f.read_bytes(), f.stat().st_mtime_ns) for f in files}

    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (
        f"8 points, {len(files)} already done (skipped), {8 - len(files)} to run" in result.stdout
    )
    for name, (content, mtime) in before.items():
        path = points_dir / name
        assert (path.read_bytes(), path.stat().st_mtime_ns) == (content, mtime)
    assert len(list(points_dir.iterdir())) == 8
    assert len(read_csv(out / "results.csv")) == 8


def test_killed_sweep_leaves_only_whole_points_and_resumes(tmp_path: Path) -> None:
    """SIGKILL: no handler runs, so only the atomic writes protect the results."""
    process, command, _, points_dir = _start_slow_sweep(tmp_path, jobs=1, wait_for=3)
    process.kill()
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL

    done = sorted(points_dir.glob("*.json"))
    assert 3 <= len(done) < 8
    for path in done:  # every point file is whole; leftovers of a write are hidden temp files
        assert json.loads(path.read_text())["status"] == "ok"
    before = {f.name: f.read_bytes() for f in done}

    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"8 points, {len(done)} already done (skipped)" in result.stdout
    assert {f.name: f.read_bytes() for f in points_dir.glob("*.json") if f.name in before} == before
    assert len(list(points_dir.glob("*.json"))) == 8


def test_a_failing_point_is_recorded_and_the_others_run(tmp_path: Path, capsys) -> None:
    sweep = write_sweep(
        tmp_path,
        topologies=[str(TOPOLOGIES[0])],
        set={"cube.hbm.slice_bandwidth": ["1TB/s", "fast"]},
        args={"-b": ["4KiB"]},
    )
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert "error: 1 of 2 points failed" in captured.err

    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] == 1
    (failed,) = summary["failed"]
    assert failed["label"] == "ring8 cube.hbm.slice_bandwidth=fast -b 4KiB"
    assert failed["error"].startswith("ConfigError: ")
    assert "cube.hbm.slice_bandwidth: cannot read bandwidth 'fast'" in failed["error"]
    record = json.loads((out / "points" / f"{failed['id']}.json").read_text())
    assert record["status"] == "failed" and record["error"] == failed["error"]
    rows = read_csv(out / "results.csv")
    assert [r["cube.hbm.slice_bandwidth"] for r in rows] == ["1TB/s"]

    # A re-run retries the failed point and skips the one that succeeded.
    assert main(["sweep", str(sweep), "-o", str(out)]) == 2
    assert "2 points, 1 already done (skipped), 1 to run" in capsys.readouterr().out


def test_bench_without_rows_gives_simulated_time_and_traces(tmp_path: Path) -> None:
    bench = tmp_path / "barrier.py"
    bench.write_text(
        "import kernbench.torch.distributed as dist\n\n\n"
        "def main():\n    dist.init_process_group()\n    dist.barrier()\n"
    )
    sweep = write_sweep(
        tmp_path, bench="barrier.py", topologies=[str(TOPOLOGIES[0])], set={}, args={}
    )
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "-o", str(out), "--trace"]) == 0
    (row,) = read_csv(out / "results.csv")
    (record,) = [json.loads(p.read_text()) for p in (out / "points").iterdir()]
    assert int(row["simulated_time_ps"]) == record["report"]["simulated_time_ps"] > 0
    trace = json.loads((out / "traces" / f"{row['point_id']}.json").read_text())
    assert trace["traceEvents"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sets": {}}, "sets: unknown key 'sets'; valid keys here: bench, topologies, set"),
        ({"bench": None}, "bench: required key is missing"),
        ({"bench": "nope.py"}, "bench: bench script 'nope.py' not found"),
        ({"topologies": ["a.yaml"]}, "topologies.0: topology file 'a.yaml' not found"),
        ({"set": {"ccl.all_reduce": "ring"}}, "set.ccl.all_reduce: Input should be a valid list"),
        ({"args": {"b": ["4KiB"]}}, "args.b: 'b' is not a flag"),
        ({"args": {"-b": []}}, "args.-b: needs at least one value"),
        ({"world_size": 0}, "world_size: must be > 0"),
        ({"world_size": True}, "world_size: expected a whole number (got True)"),
        ({"seed": "7"}, "seed: expected a whole number"),
        ({"trace": 1}, "trace: expected true or false (got 1)"),
        ({"timing_only": 0.0}, "timing_only: expected true or false (got 0.0)"),
        (
            {"timing_only": "yes"},
            "timing_only: expected true or false (got the text 'yes'; write true or false "
            "unquoted)",
        ),
    ],
)
def test_bad_sweep_file_is_a_one_line_error(tmp_path: Path, capsys, change, message) -> None:
    document = {key: value for key, value in change.items() if value is not None}
    sweep = write_sweep(tmp_path, **document)
    if change.get("bench", "") is None:
        text = yaml.safe_load(sweep.read_text())
        del text["bench"]
        sweep.write_text(yaml.safe_dump(text))
    assert main(["sweep", str(sweep), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {sweep}: ")
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_true_and_false_are_read_as_written(tmp_path: Path) -> None:
    sweep = load_sweep(write_sweep(tmp_path, timing_only=False, trace=True))
    assert sweep.timing_only is False and sweep.trace is True


def test_values_listed_twice_and_bad_jobs_are_errors(tmp_path: Path, capsys) -> None:
    sweep = write_sweep(tmp_path, set={"ccl.all_reduce": ["ring", "ring"]})
    assert main(["sweep", str(sweep)]) == 2
    assert "set.ccl.all_reduce: 'ring' appears twice" in capsys.readouterr().err
    assert main(["sweep", str(write_sweep(tmp_path)), "-j", "0"]) == 2
    assert "-j/--jobs must be at least 1 (got 0)" in capsys.readouterr().err


def test_the_documented_example_runs(tmp_path: Path, capsys) -> None:
    example = REPO / "examples" / "sweep_allreduce.yaml"
    docs = (REPO / "docs" / "sweeps.md").read_text()
    assert f"```yaml\n{example.read_text()}```" in docs
    if not (REPO / "benches" / "allreduce_perf.py").is_file():
        pytest.skip("benches/allreduce_perf.py is not there yet")
    assert main(["sweep", str(example), "-j", "2", "-o", str(tmp_path)]) == 0
    assert "sweep: 6 points, 0 already done (skipped), 6 to run" in capsys.readouterr().out
    rows = read_csv(tmp_path / "results.csv")
    assert len(rows) == 6 * 13
    assert list(rows[0])[:8] == [
        "topology",
        "ccl.all_reduce",
        "-b",
        "-e",
        "-f",
        "-n",
        "-w",
        "point_id",
    ]
    assert {(r["topology"], r["algorithm"]) for r in rows} == {
        (t, a) for t in ("ring8", "fc8", "multi_sip") for a in ("ring", "recursive_doubling")
    }
    assert (tmp_path / "busbw.png").stat().st_size > 0
