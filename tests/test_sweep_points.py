"""Point files on resume (bad ones rerun with a warning, stale ones with a note); point identity."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml
from sweep_helpers import (
    copy_topology,
    hostile_sweep,
    point_files,
    records_by_label,
    run_cli,
    write_bench,
    write_sweep,
)

from kernbench.bench.sweep import expand_points, load_sweep
from kernbench.cli import main


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished two-point sweep; tests copy its output and damage the copy."""
    directory = tmp_path_factory.mktemp("finished")
    _run_two_points(directory)
    return directory


def _run_two_points(directory: Path) -> None:
    sweep = hostile_sweep(directory, {"-n": [1, 2]})
    result = run_cli(sweep, "-o", str(directory / "out"))
    assert result.returncode == 0, result.stderr


def _copy(finished: Path, tmp_path: Path) -> tuple[Path, Path, dict[str, Path]]:
    """The finished sweep's file and a copy of its output (point ids name the bench's path)."""
    out = tmp_path / "out"
    shutil.copytree(finished / "out", out, symlinks=True)
    paths = {
        record["point"]["label"]: out / "points" / name for name, record in point_files(out).items()
    }
    return finished / "sweep.yaml", out, paths


def _own(tmp_path: Path) -> tuple[Path, Path, dict[str, Path]]:
    """A finished two-point sweep of its own, for a test that edits the bench or topology."""
    directory = tmp_path / "sweep"
    _run_two_points(directory)
    out = directory / "out"
    paths = {
        record["point"]["label"]: out / "points" / name for name, record in point_files(out).items()
    }
    return directory / "sweep.yaml", out, paths


def _damage(kind: str, target: Path, other: Path) -> None:
    good = target.read_text()
    if kind == "directory":
        target.unlink()
        target.mkdir()
        (target / "inside.txt").write_text("kept")
    elif kind == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif kind == "symlink to the other point":
        target.unlink()
        target.symlink_to(other)
    elif kind == "dangling symlink":
        target.unlink()
        target.symlink_to(target.parent / "nowhere.json")
    elif kind == "other point's record":
        shutil.copy(other, target)
    elif kind == "binary":
        target.write_bytes(b"\xff\xfe\x00\x01garbage")
    elif kind == "nested":
        target.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "truncated":
        target.write_text(good[: len(good) // 2])
    else:
        record = json.loads(good)
        documents = {
            "[1]": [1],
            "empty": "",
            "status ok only": {"status": "ok"},
            "report not a mapping": {**record, "report": []},
            "results not rows": {**record, "report": {**record["report"], "results": [1, 2]}},
            "unknown status": {**record, "status": "done"},
            "point not a mapping": {**record, "point": "x"},
            "edited point": {**record, "point": {**record["point"], "script_args": ["-n", "9"]}},
        }
        document = documents[kind]
        target.write_text(document if isinstance(document, str) else json.dumps(document))


KINDS = [
    "[1]",
    "status ok only",
    "directory",
    "other point's record",
    "empty",
    "truncated",
    "binary",
    "nested",
    "fifo",
    "symlink to the other point",
    "dangling symlink",
    "report not a mapping",
    "results not rows",
    "unknown status",
    "point not a mapping",
    "edited point",
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_point_file_is_rerun_with_a_warning(finished: Path, tmp_path: Path, kind) -> None:
    sweep, out, paths = _copy(finished, tmp_path)
    target, other = paths["tiny -n 1"], paths["tiny -n 2"]
    other_before = other.read_bytes()
    _damage(kind, target, other)

    result = run_cli(sweep, "-o", str(out), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "2 points, 1 already done (skipped), 1 to run" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, result.stderr
    assert str(target) in warnings[0] and "running the point again" in warnings[0]

    assert target.is_file() and not target.is_symlink()
    record = json.loads(target.read_text())
    assert record["status"] == "ok"
    assert record["point"]["id"] == target.stem
    assert record["report"]["results"] == [{"n": 1, "mode": "ok"}]
    assert other.read_bytes() == other_before
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["ok"], summary["failed"]) == (2, [])
    if kind == "directory":  # not ours to delete: moved aside, contents kept
        (aside,) = [p for p in target.parent.iterdir() if p.is_dir()]
        assert (aside / "inside.txt").read_text() == "kept"
        assert str(aside) in warnings[0]


def test_an_unchanged_sweep_skips_everything_quietly(finished: Path, tmp_path: Path) -> None:
    sweep, out, paths = _copy(finished, tmp_path)
    before = {label: path.read_bytes() for label, path in paths.items()}
    result = run_cli(sweep, "-o", str(out))
    assert result.returncode == 0
    assert "2 points, 2 already done (skipped), 0 to run" in result.stdout
    assert "warning" not in result.stderr and "note" not in result.stdout + result.stderr
    assert {label: path.read_bytes() for label, path in paths.items()} == before


def test_an_edited_bench_makes_its_results_stale(tmp_path: Path) -> None:
    sweep, out, paths = _own(tmp_path)
    bench = sweep.parent / "hostile.py"
    bench.write_text(bench.read_text().replace('"mode": args.mode', '"mode": "edited"'))
    result = run_cli(sweep, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "2 points, 0 already done (skipped), 2 to run" in result.stdout
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and all("the bench changed since" in note for note in notes)
    assert {r["report"]["results"][0]["mode"] for r in point_files(out).values()} == {"edited"}


def test_an_edited_topology_parent_makes_its_results_stale(tmp_path: Path) -> None:
    sweep, out, _ = _own(tmp_path)
    parent = sweep.parent / "default.yaml"  # tiny.yaml extends it
    text = parent.read_text()
    assert 'host_link: {bandwidth: "64GB/s"' in text
    parent.write_text(
        text.replace('host_link: {bandwidth: "64GB/s"', 'host_link: {bandwidth: "32GB/s"')
    )
    result = run_cli(sweep, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "2 points, 0 already done (skipped), 2 to run" in result.stdout
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and all("the topology changed since" in note for note in notes)


def test_another_bench_of_the_same_name_does_not_reuse_results(finished, tmp_path) -> None:
    _, out, _ = _copy(finished, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    text = (finished / "hostile.py").read_text()
    write_bench(elsewhere, text=text.replace('"mode": args.mode', '"mode": "other"'))
    copy_topology(elsewhere)
    sweep = write_sweep(
        elsewhere, {"bench": "hostile.py", "topologies": ["tiny.yaml"], "args": {"-n": [1, 2]}}
    )
    result = run_cli(sweep, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "2 points, 0 already done (skipped), 2 to run" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert [row["mode"] for row in summary["rows"]] == ["other", "other"]
    assert len(point_files(out)) == 4  # the first bench's points are still there


def test_two_spellings_of_one_point_are_one_point(tmp_path: Path) -> None:
    """Values as the bench receives them, paths resolved: a respelt sweep resumes."""
    sweep, out, paths = _own(tmp_path)
    before = {label: path.read_bytes() for label, path in paths.items()}
    document = yaml.safe_load(sweep.read_text())
    document.update(
        bench="./hostile.py",
        topologies=[f"../{sweep.parent.name}/./tiny.yaml"],
        args={"-n": ["1", "2"]},
    )
    sweep.write_text(yaml.safe_dump(document, sort_keys=False))
    result = run_cli(sweep, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "2 points, 2 already done (skipped), 0 to run" in result.stdout
    assert {label: path.read_bytes() for label, path in paths.items()} == before


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        ("args", {"-n": [1, "1"]}, "args.-n: '1' appears twice"),
        ("args", {"-n": [1, 2], "--check": [True, "true", False]}, None),
        ("set", {"system.sips.count": [1, "1"]}, "set.system.sips.count: '1' appears twice"),
        ("set", {"ccl.all_reduce": [True, "true"]}, "set.ccl.all_reduce: 'true' appears twice"),
    ],
)
def test_values_that_reach_the_bench_as_the_same_text_are_one_value(
    tmp_path: Path, capsys, section: str, values: dict, message: str | None
) -> None:
    sweep = hostile_sweep(tmp_path, {})
    document = yaml.safe_load(sweep.read_text())
    document[section] = values
    sweep.write_text(yaml.safe_dump(document, sort_keys=False))
    if message is None:  # true (the flag alone), "true" (--check true), false: three argvs
        points = expand_points(load_sweep(sweep), sweep, tmp_path, trace=False)
        assert [p["script_args"] for p in points[:3]] == [
            ["-n", "1", "--check"],
            ["-n", "1", "--check", "true"],
            ["-n", "1"],
        ]
        assert len({p["id"] for p in points}) == 6
        return
    assert main(["sweep", str(sweep), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_one_topology_file_listed_twice_is_an_error(tmp_path: Path, capsys) -> None:
    sweep = hostile_sweep(tmp_path, {"-n": [1]})
    (tmp_path / "link.yaml").symlink_to(tmp_path / "tiny.yaml")
    for spelling in ("./tiny.yaml", "link.yaml", f"{tmp_path}/tiny.yaml"):
        document = yaml.safe_load(sweep.read_text())
        document["topologies"] = ["tiny.yaml", spelling]
        sweep.write_text(yaml.safe_dump(document, sort_keys=False))
        assert main(["sweep", str(sweep), "-o", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert f"topologies.1: {spelling!r} is the same file as topologies.0 ('tiny.yaml')" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["summary.json", "results.csv"])
def test_an_output_that_is_not_a_regular_file_is_refused_before_any_point_runs(
    tmp_path: Path, capsys, name: str
) -> None:
    sweep = hostile_sweep(tmp_path, {"-n": [1]})
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / name).symlink_to(victim)
    assert main(["sweep", str(sweep), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out / name}: ") and "symbolic link" in err
    assert victim.read_text() == "keep me"
    assert not list((out / "points").glob("*.json")) if (out / "points").exists() else True


@pytest.mark.parametrize("kind", ["file", "dangling link"])
def test_an_output_directory_that_is_not_one_is_named_with_what_would_do(
    tmp_path: Path, capsys, kind: str
) -> None:
    sweep = hostile_sweep(tmp_path, {"-n": [1]})
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("keep me")
    else:
        out.symlink_to(tmp_path / "nowhere")
    assert main(["sweep", str(sweep), "-o", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    problem = "is not a directory" if kind == "file" else "is a symbolic link to nothing"
    assert line == (
        f"error: {out}: the sweep output {problem}; --output (or output: in the sweep file) "
        "names a directory, made if missing"
    )
    assert out.read_text() == "keep me" if kind == "file" else not out.exists()


def test_point_files_and_summary_are_strict_json(tmp_path: Path) -> None:
    """A NaN in a bench's rows is written as "NaN", as reports are: every file is strict JSON."""
    bench = write_bench(
        tmp_path,
        text="import kernbench.torch.distributed as dist\n\n\ndef main():\n"
        "    dist.init_process_group()\n    return [{'ratio': float('nan'), 'ok': 1.5}]\n",
    )
    copy_topology(tmp_path)
    sweep = write_sweep(tmp_path, {"bench": bench.name, "topologies": ["tiny.yaml"]})
    out = tmp_path / "out"
    assert run_cli(sweep, "-o", str(out)).returncode == 0

    def strict(text: str):
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))

    (record,) = [strict(p.read_text()) for p in (out / "points").glob("*.json")]
    assert record["report"]["results"] == [{"ratio": "NaN", "ok": 1.5}]
    assert strict((out / "summary.json").read_text())["rows"][0]["ratio"] == "NaN"
    assert records_by_label(out)  # still readable by the helpers


def test_resuming_with_trace_runs_the_done_points_again_for_their_traces(
    finished: Path, tmp_path: Path
) -> None:
    sweep, out, _ = _copy(finished, tmp_path)
    result = run_cli(sweep, "-o", str(out), "--trace")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("no trace yet; running it again") == 2
    traces = sorted((out / "traces").glob("*.json"))
    assert len(traces) == 2 and all(json.loads(t.read_text())["traceEvents"] for t in traces)
    again = run_cli(sweep, "-o", str(out), "--trace")
    assert "2 already done (skipped), 0 to run" in again.stdout


def test_a_killed_writers_trace_temporaries_are_removed(finished: Path, tmp_path: Path) -> None:
    sweep, out, _ = _copy(finished, tmp_path)
    (out / "traces").mkdir()
    left = out / "traces" / ".6cd6130a21cb0d4b.json.xeruzsrk.tmp"
    left.write_text("{half")
    os.utime(left, (0, 0))  # long ago: no writer is still at it
    assert run_cli(sweep, "-o", str(out)).returncode == 0
    assert not left.exists()


def test_a_sweep_of_too_many_points_is_refused_before_it_builds_them(tmp_path: Path) -> None:
    values = list(range(50))
    sweep = hostile_sweep(tmp_path, {"-a": values, "-b": values, "-c": values})
    result = run_cli(sweep, "-o", str(tmp_path / "out"), timeout=30)
    assert result.returncode == 2
    assert "the sweep has 125000 points (1 topologies x 50 args.-a x 50 args.-b x 50" in (
        result.stderr
    )
    assert "at most 100000" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_second_sweep_on_the_same_output_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    import subprocess

    from sweep_helpers import sweep_command

    sweep = hostile_sweep(tmp_path, {"--delay": [3]})
    out = tmp_path / "out"
    first = subprocess.Popen(
        sweep_command(sweep, "-o", str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        for _ in range(200):  # until the first holds the lock (its points are running)
            if list((out / "points").glob("*")) or (out / ".lock").exists():
                break
            time.sleep(0.05)
        second = run_cli(sweep, "-o", str(out), timeout=60)
        assert second.returncode == 2, second.stderr
        assert "is in use by another run" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.wait(timeout=60)
    assert first.returncode == 0
    assert run_cli(sweep, "-o", str(out)).returncode == 0  # free again once it is done


def test_a_trace_that_cannot_be_written_is_refused_before_any_point_runs(
    finished: Path, tmp_path: Path
) -> None:
    """Resuming with --trace runs done points again for their traces; a trace target that
    is a directory must not turn their ok records into failures."""
    sweep, out, paths = _copy(finished, tmp_path)
    before = {label: path.read_text() for label, path in paths.items()}
    (out / "traces").mkdir()
    (out / "traces" / f"{next(iter(paths.values())).stem}.json").mkdir()
    result = run_cli(sweep, "-o", str(out), "--trace")
    assert result.returncode == 2 and "trace target is a directory" in result.stderr
    assert {label: path.read_text() for label, path in paths.items()} == before


MOODY_BENCH = """\
from pathlib import Path

import kernbench.torch.distributed as dist


def main():
    dist.init_process_group()
    if (Path(__file__).parent / "mood.txt").read_text() == "fail":
        raise RuntimeError("not today")
    return [{"n": 1}]
"""


@pytest.mark.parametrize("rerun", ["succeeds", "fails"])
def test_a_point_file_linked_to_its_own_record_is_rerun_for_its_trace(
    tmp_path: Path, rerun: str
) -> None:
    """A point file that is a symlink to a good record of its point (results gathered from
    elsewhere) is used as it is; run again for a trace, the link is moved aside so that
    the new record can be written, and a failed trace run writes the kept record back."""
    bench = write_bench(tmp_path, "moody.py", MOODY_BENCH)
    (tmp_path / "mood.txt").write_text("ok")
    copy_topology(tmp_path)
    sweep = write_sweep(tmp_path, {"bench": bench.name, "topologies": ["tiny.yaml"]})
    out = tmp_path / "out"
    assert run_cli(sweep, "-o", str(out)).returncode == 0
    (target,) = (out / "points").glob("*.json")
    elsewhere = tmp_path / "gathered.json"
    shutil.move(target, elsewhere)
    target.symlink_to(elsewhere)
    gathered = elsewhere.read_bytes()
    (tmp_path / "mood.txt").write_text("ok" if rerun == "succeeds" else "fail")

    result = run_cli(sweep, "-o", str(out), "--trace")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "error:" not in result.stderr
    assert "no trace yet; running it again; moved aside to " in result.stderr
    assert target.is_file() and not target.is_symlink()
    record = json.loads(target.read_text())
    assert record["status"] == "ok" and record["report"]["results"] == [{"n": 1}]
    assert elsewhere.read_bytes() == gathered
    (aside,) = (out / "points").glob("*.invalid-*")
    assert aside.is_symlink() and aside.resolve() == elsewhere
    traces = list((out / "traces").glob("*.json"))
    if rerun == "fails":
        assert "its trace could not be made" in result.stderr
        assert "not today" in result.stderr and not traces
        assert target.read_bytes() == gathered
    else:
        assert len(traces) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["ok"], summary["failed"]) == (1, [])


@pytest.mark.parametrize(
    ("renamed", "as_name"),
    [
        ("topology", "summary.json"),
        ("bench", "results.csv"),
        ("sweep", "summary.json"),
        ("tune table", "summary.json"),
    ],
)
def test_an_output_may_not_replace_one_of_the_sweeps_inputs(
    tmp_path: Path, capsys, renamed: str, as_name: str
) -> None:
    """With the output in the sweep's own directory, summary.json or results.csv used to
    replace a topology, bench, sweep file or tune table of that name."""
    names = {"topology": "tiny.yaml", "bench": "bench.py", "sweep": "sweep.yaml"}
    names[renamed] = as_name
    copy_topology(tmp_path)
    if renamed == "topology":
        (tmp_path / "tiny.yaml").rename(tmp_path / as_name)
    write_bench(tmp_path, names["bench"], "def main():\n    return [{'n': 1}]\n")
    document = {"bench": names["bench"], "topologies": [names["topology"]], "output": "."}
    if renamed == "tune table":
        (tmp_path / as_name).write_text("results: []\n")
        document["set"] = {"ccl.tune_table": [str(tmp_path / as_name)]}
    sweep = write_sweep(tmp_path, document, names["sweep"])
    before = (tmp_path / as_name).read_bytes()
    assert main(["sweep", str(sweep)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {tmp_path / as_name}: {as_name} would replace the input file "
        f"{tmp_path / as_name}; write it somewhere else"
    )
    assert (tmp_path / as_name).read_bytes() == before
    assert not (tmp_path / "points").exists()


def test_an_edited_tune_table_makes_its_results_stale(tmp_path: Path) -> None:
    """A point run with --set ccl.tune_table=PATH depends on that file as on its bench: its
    result used to be reused after the table changed."""
    table = tmp_path / "table.yaml"
    tune = ["tune", "-t", "tiny", "--set", "system.device_level=pe", "-o", str(table)]
    assert main([*tune, "--min-size", "4KiB", "--max-size", "4KiB"]) == 0
    copy_topology(tmp_path)
    write_bench(tmp_path, "bench.py", "def main():\n    return [{'n': 1}]\n")
    document = {
        "bench": "bench.py",
        "topologies": ["tiny.yaml"],
        "set": {"system.device_level": ["pe"], "ccl.tune_table": [str(table)]},
    }
    sweep, out = write_sweep(tmp_path, document), tmp_path / "out"
    assert run_cli(sweep, "-o", str(out)).returncode == 0
    again = run_cli(sweep, "-o", str(out))
    assert "1 points, 1 already done (skipped), 0 to run" in again.stdout, again.stderr

    table.write_text(table.read_text() + "# measured again\n")
    result = run_cli(sweep, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "1 points, 0 already done (skipped), 1 to run" in result.stdout
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "the tune table changed since this point ran" in notes[0]
