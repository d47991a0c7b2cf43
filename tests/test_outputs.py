"""Outputs never clobber: special targets refused before any work, I/O errors in one line.

Every output of the command line (``run --report/--csv/--trace``, ``plot -o``,
``tune -o``) goes through :mod:`kernbench.files`: a symlink, FIFO or device is
refused (and left as it was), ``-`` and ``/dev/stdout`` write to standard
output, and an OS failure is one ``error:`` line with exit status 2 that leaves
the previous file intact and no temporary file behind.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kernbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = "tiny"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

SCRIPT = """\
import kernbench.torch as torch
import kernbench.torch.distributed as dist


def main():
    dist.init_process_group()
    t = torch.ones(8)
    dist.all_reduce(t)
    print("printed by the script")
    return [{"op": "all_reduce", "size_B": 32, "time_us": 1.5, "busbw_GBps": 0.5}]
"""

RUN_OPTIONS = ("--report", "--csv", "--trace")


@pytest.fixture
def bench(tmp_path: Path) -> str:
    path = tmp_path / "bench.py"
    path.write_text(SCRIPT)
    return str(path)


@pytest.fixture
def results_csv(tmp_path: Path) -> str:
    path = tmp_path / "results.csv"
    path.write_text(
        "op,size_B,time_us,busbw_GBps\n"
        + "".join(f"all_reduce,{4096 << i},{10 * (i + 1)},{i + 0.5}\n" for i in range(4))
    )
    return str(path)


def _special(kind: str, tmp_path: Path) -> tuple[str, Path | None]:
    """A target of ``kind`` and, for a symlink, the file it points to."""
    if kind == "symlink":
        real = tmp_path / "real.out"
        real.write_text("keep me")
        link = tmp_path / "link.out"
        link.symlink_to(real)
        return str(link), real
    if kind == "fifo":
        fifo = tmp_path / "fifo.out"
        os.mkfifo(fifo)
        return str(fifo), None
    return "/dev/full", None


def _assert_untouched(kind: str, target: str, real: Path | None) -> None:
    mode = os.lstat(target).st_mode
    if kind == "symlink":
        assert stat.S_ISLNK(mode) and real.read_text() == "keep me"
    elif kind == "fifo":
        assert stat.S_ISFIFO(mode)
    else:
        assert stat.S_ISCHR(mode)
    assert not [p for p in Path(target).parent.iterdir() if p.name.endswith(".tmp")]


def _one_error_line(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for fragment in fragments:
        assert fragment in lines[0], err


# --- special targets are refused before the work starts -----------------------------------


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device"])
@pytest.mark.parametrize("option", RUN_OPTIONS)
def test_run_refuses_a_special_target_before_running(
    option: str, kind: str, bench: str, tmp_path: Path, capsys
) -> None:
    target, real = _special(kind, tmp_path)
    assert main(["run", bench, "-t", TINY, option, target]) == 2
    out, err = capsys.readouterr()
    _one_error_line(err, target, "only regular files")
    assert "simulated time" not in out  # refused before the run, not after it
    _assert_untouched(kind, target, real)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device"])
def test_plot_refuses_a_special_target(kind: str, results_csv: str, tmp_path: Path, capsys):
    target, real = _special(kind, tmp_path)
    assert main(["plot", results_csv, "-o", target]) == 2
    _one_error_line(capsys.readouterr().err, target, "only regular files")
    _assert_untouched(kind, target, real)


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device"])
def test_tune_refuses_a_special_target_before_tuning(kind: str, tmp_path: Path, capsys):
    target, real = _special(kind, tmp_path)
    args = ["tune", "-t", TINY, "--min-size", "4KiB", "--max-size", "4KiB", "-o", target]
    assert main(args) == 2
    out, err = capsys.readouterr()
    _one_error_line(err, target, "only regular files")
    assert "measuring" not in err and not out
    _assert_untouched(kind, target, real)


def test_two_outputs_on_one_file_or_stream_are_refused(bench: str, tmp_path: Path, capsys):
    same = str(tmp_path / "out.json")
    assert main(["run", bench, "-t", TINY, "--report", same, "--trace", same]) == 2
    _one_error_line(capsys.readouterr().err, "given for both report and trace")
    assert not Path(same).exists()
    assert main(["run", bench, "-t", TINY, "--report", "-", "--csv", "/dev/stdout"]) == 2
    _one_error_line(capsys.readouterr().err, "both report and CSV would go to standard output")


def test_an_output_may_not_replace_an_input(bench: str, results_csv: str, capsys) -> None:
    before = Path(results_csv).read_bytes()
    assert main(["plot", results_csv, "-o", results_csv]) == 2
    _one_error_line(capsys.readouterr().err, "would replace the input file")
    assert Path(results_csv).read_bytes() == before
    script_text = Path(bench).read_text()
    assert main(["run", bench, "-t", TINY, "--csv", bench]) == 2
    _one_error_line(capsys.readouterr().err, "would replace the input file")
    assert Path(bench).read_text() == script_text


def test_a_run_output_may_not_replace_the_tune_table_it_reads(
    bench: str, tmp_path: Path, capsys
) -> None:
    """--set ccl.tune_table=PATH is an input of the run: --report PATH used to replace it."""
    table = tmp_path / "table.yaml"
    tune = ["tune", "-t", TINY, "--set", "system.device_level=pe", "-o", str(table)]
    assert main([*tune, "--min-size", "4KiB", "--max-size", "4KiB"]) == 0
    before = table.read_bytes()
    capsys.readouterr()
    run = ["run", bench, "-t", TINY, "--set", "system.device_level=pe"]
    assert main([*run, "--set", f"ccl.tune_table={table}", "--report", str(table)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {table}: report would replace the input file {table}; write it somewhere else"
    )
    assert table.read_bytes() == before


# --- '-' and /dev/stdout write the output itself to standard output --------------------------


def test_report_to_dash_is_the_only_thing_on_stdout(bench: str, capfd) -> None:
    assert main(["run", bench, "-t", TINY, "--report", "-"]) == 0
    out, err = capfd.readouterr()
    report = json.loads(out)  # nothing else on stdout: the script's prints went to stderr
    assert report["results"][0]["time_us"] == 1.5
    assert "simulated time" in err and "printed by the script" in err
    assert not Path("-").exists()


def test_csv_to_dev_stdout(bench: str, capfd) -> None:
    assert main(["run", bench, "-t", TINY, "--csv", "/dev/stdout"]) == 0
    out, _ = capfd.readouterr()
    assert out.splitlines()[0].startswith("op,size_B,time_us,busbw_GBps")
    assert out.splitlines()[1].startswith("all_reduce,32,1.5,0.5")


def test_plot_to_dash_writes_png_bytes(results_csv: str, capfdbinary) -> None:
    assert main(["plot", results_csv, "-o", "-"]) == 0
    out, err = capfdbinary.readouterr()
    assert out.startswith(PNG_SIGNATURE) and b"plot: -" in err


def test_tune_table_to_dash(capfd) -> None:
    args = ["tune", "-t", TINY, "--min-size", "4KiB", "--max-size", "4KiB", "-o", "-"]
    assert main(args) == 0
    out, err = capfd.readouterr()
    table = yaml.safe_load(out)
    assert table["topology"] == "tiny" and table["results"][0]["bytes"] == 4096
    assert "table: -" in err


# --- I/O errors: one line, exit 2, the old file intact, no temporary file ---------------------


def _old_outputs(tmp_path: Path) -> dict[str, Path]:
    outputs = {}
    for option in RUN_OPTIONS:
        path = tmp_path / "out" / f"old{option.replace('-', '_')}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"old {option}")
        outputs[option] = path
    return outputs


def _assert_old(outputs: dict[str, Path]) -> None:
    for option, path in outputs.items():
        assert path.read_text() == f"old {option}"
    assert sorted(p.name for p in next(iter(outputs.values())).parent.iterdir()) == sorted(
        p.name for p in outputs.values()
    )


@pytest.mark.parametrize("option", RUN_OPTIONS)
def test_disk_full_is_one_error_line_and_the_old_file_stays(
    option: str, bench: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    outputs = _old_outputs(tmp_path)

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)  # where a full disk (or NFS quota) reports
    assert main(["run", bench, "-t", TINY, option, str(outputs[option])]) == 2
    _one_error_line(capsys.readouterr().err, str(outputs[option]), "No space left on device")
    _assert_old(outputs)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_report_to_a_full_stdout_is_one_error_line(bench: str) -> None:
    with open("/dev/full", "wb") as full:
        result = subprocess.run(
            [sys.executable, "-m", "kernbench.cli", "run", bench, "-t", TINY, "--report", "-"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    assert result.returncode == 2, result.stderr
    _one_error_line(
        "\n".join(line for line in result.stderr.splitlines() if line.startswith("error")),
        "-: cannot write report: No space left on device",
    )
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory no one may create files in: chmod, or for root an immutable flag."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "report.json").write_text("old")
    folder.chmod(0o500)
    immutable = False
    if os.access(folder, os.W_OK) and shutil.which("chattr"):  # root ignores the mode bits
        made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False)
        immutable = made.returncode == 0
    if os.access(folder, os.W_OK):
        folder.chmod(0o700)
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        pytest.skip("cannot make a read-only directory as this user")
    try:
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o700)


@pytest.mark.parametrize("option", RUN_OPTIONS)
def test_read_only_directory_is_refused_before_the_run(
    option: str, bench: str, read_only_dir: Path, capsys
) -> None:
    target = read_only_dir / "report.json"
    assert main(["run", bench, "-t", TINY, option, str(target)]) == 2
    out, err = capsys.readouterr()
    _one_error_line(err, str(target), "not writable")
    assert "simulated time" not in out
    assert target.read_text() == "old"
    assert [p.name for p in read_only_dir.iterdir()] == ["report.json"]


def _bad_path(kind: str, tmp_path: Path, suffix: str) -> str:
    if kind == "directory":
        (tmp_path / f"a_dir{suffix}").mkdir()
        return str(tmp_path / f"a_dir{suffix}")
    if kind == "under a file":
        (tmp_path / "a_file").write_text("x")
        return str(tmp_path / "a_file" / f"out{suffix}")
    if kind == "NUL":
        return str(tmp_path / f"out\x00{suffix}")
    return str(tmp_path / ("x" * 300 + suffix))  # a name longer than NAME_MAX


@pytest.mark.parametrize("kind", ["directory", "under a file", "NUL", "too long"])
@pytest.mark.parametrize("option", [*RUN_OPTIONS, "plot", "tune"])
def test_bad_paths_are_one_error_line_and_exit_2(
    option: str, kind: str, bench: str, results_csv: str, tmp_path: Path, capsys
) -> None:
    outputs = _old_outputs(tmp_path)
    target = _bad_path(kind, tmp_path, ".png" if option == "plot" else ".json")
    if option == "plot":
        args = ["plot", results_csv, "-o", target]
    elif option == "tune":
        args = ["tune", "-t", TINY, "--min-size", "4KiB", "--max-size", "4KiB", "-o", target]
    else:
        args = ["run", bench, "-t", TINY, "--report", str(outputs["--report"]), option, target]
        if option == "--report":
            args = ["run", bench, "-t", TINY, "--csv", str(outputs["--csv"]), option, target]
    assert main(args) == 2
    out, err = capsys.readouterr()
    shown_target = target.replace("\x00", "\\x00")[:180]
    _one_error_line(err, shown_target)
    assert "simulated time" not in out and "measuring" not in err
    _assert_old(outputs)


def test_a_csv_keeps_a_benchs_own_topology_and_seed_columns() -> None:
    from kernbench.bench.runner import csv_text

    text = csv_text(
        [{"topology": "x", "seed": 1234, "time_us": 1.5}],
        {"topology": "tiny", "seed": 0, "overrides": [], "kernbench_version": "v"},
    )
    header, row = (line.split(",") for line in text.splitlines())
    got = dict(zip(header, row, strict=True))
    assert (got["topology"], got["seed"]) == ("x", "1234")
    assert (got["run.topology"], got["run.seed"]) == ("tiny", "0")
