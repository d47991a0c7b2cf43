"""``kernbench.cli.main`` ends every failure with one line and a status that says what it was.

2: a user error (KernBench's own message, or the user's script raising: rank,
exception and file:line); 70: an internal error; 130: Ctrl-C; 141: standard
output closed by its reader.  The traceback only when asked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sweep_helpers import interruptible

import kernbench.topology.summary
from kernbench.cli import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    main,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = "tiny"
HINT = "KERNBENCH_TRACEBACK=1 shows the traceback"


def _script(tmp_path: Path, body: str, name: str = "bench.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env | extra


def _kernbench(*args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kernbench.cli", *args],
        cwd=ROOT,
        env=_env(),
        preexec_fn=interruptible,
        **popen,
    )


@pytest.fixture(autouse=True)
def _no_traceback_variable(monkeypatch) -> None:
    monkeypatch.delenv("KERNBENCH_TRACEBACK", raising=False)


# --- internal errors --------------------------------------------------------------------------


def _broken_summary(monkeypatch) -> None:
    def summarize(*_args, **_kwargs):
        raise TypeError("unsupported operand")

    monkeypatch.setattr(kernbench.topology.summary, "summarize", summarize)


def test_an_internal_error_is_one_line_and_exit_70(monkeypatch, capsys) -> None:
    _broken_summary(monkeypatch)
    assert main(["topo", "show", TINY]) == EXIT_INTERNAL_ERROR == 70
    assert capsys.readouterr().err.splitlines() == [
        "error: internal error: TypeError: unsupported operand "
        "(please report; KERNBENCH_TRACEBACK=1 shows where)"
    ]


@pytest.mark.parametrize("how", ["variable", "flag"])
def test_the_traceback_is_shown_when_asked(monkeypatch, capsys, how: str) -> None:
    _broken_summary(monkeypatch)
    args = ["topo", "show", TINY]
    if how == "variable":
        monkeypatch.setenv("KERNBENCH_TRACEBACK", "1")
    else:
        args.insert(0, "--traceback")
    assert main(args) == EXIT_INTERNAL_ERROR
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)")
    assert "in summarize" in err and "TypeError: unsupported operand\n" in err
    assert err.rstrip().splitlines()[-1].startswith("error: internal error: TypeError")


def test_a_user_error_with_the_traceback_asked_keeps_its_line_last(monkeypatch, capsys) -> None:
    monkeypatch.setenv("KERNBENCH_TRACEBACK", "1")
    assert main(["topo", "show", str(ROOT / "nope.yaml")]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.rstrip().splitlines()
    assert err[0].startswith("Traceback") and err[-1].startswith("error: ")


# --- the user's script raising ----------------------------------------------------------------


def test_a_script_exception_names_rank_exception_and_line(tmp_path: Path, capsys) -> None:
    path = _script(
        tmp_path,
        """\
        import json

        def parse(rank):
            return json.loads("{not json")

        def run(rank, world_size):
            parse(rank)
        """,
    )
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: rank 0 raised JSONDecodeError: Expecting property name")
    assert err[0].endswith(f"(at {path}:4 in parse; {HINT})")  # the script, not json/decoder.py


def test_a_multi_line_message_stays_on_one_line(tmp_path: Path, capsys) -> None:
    path = _script(tmp_path, 'def main():\n    raise ValueError("first\\nsecond")\n')
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"error: rank 0 raised ValueError: first\\nsecond (at {path}:2 in main; {HINT})"
    ]


def test_a_kernbench_error_in_a_rank_names_the_script_line(tmp_path: Path, capsys) -> None:
    path = _script(
        tmp_path,
        """\
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        def main():
            dist.all_reduce(torch.ones(8))
        """,
    )
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: rank 0 raised DistributedError: ")
    assert err[0].endswith(f"(at {path}:5 in main)")


# A bench script's entry point: without one a script is a program, run as python runs it.
MAIN = "def main():\n    pass\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("x = 1 +\n", "error: {path}:1:8: syntax error: invalid syntax"),
        (
            "import json\nCONFIG = json.loads('{')\n" + MAIN,
            "error: {path}:2: importing the bench script raised JSONDecodeError: Expecting "
            "property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (
            "raise KeyError('k')\n" + MAIN,
            "error: {path}:1: importing the bench script raised KeyError: 'k'",
        ),
    ],
    ids=["syntax", "runtime-in-a-library-call", "runtime"],
)
def test_a_script_that_fails_to_load_is_a_user_error(
    tmp_path: Path, capsys, body: str, expected: str
) -> None:
    path = _script(tmp_path, body)
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.splitlines()
    assert err == [expected.format(path=path)]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "class Stop(BaseException):\n    pass\n\nraise Stop('early')\n" + MAIN,
            "error: {path}:4: importing the bench script raised Stop: early",
        ),
        (
            "raise GeneratorExit('at import')\n" + MAIN,
            "error: {path}:1: importing the bench script raised GeneratorExit: at import",
        ),
        (
            "class Stop(BaseException):\n    pass\n\nif __name__ == '__main__':\n"
            "    raise Stop('in the main block')\n",
            "error: {path}:5: running the bench script raised Stop: in the main block",
        ),
    ],
    ids=["own-base-exception", "generator-exit", "in-the-main-block"],
)
def test_a_base_exception_outside_the_ranks_is_the_scripts_error(
    tmp_path: Path, capsys, body: str, expected: str
) -> None:
    path = _script(tmp_path, body)
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [expected.format(path=path)]


def test_a_script_sys_exit_keeps_its_status_and_message(tmp_path: Path, capsys) -> None:
    assert main(["run", _script(tmp_path, "import sys\ndef main():\n    sys.exit(3)\n")]) == 3
    quit_with_text = _script(
        tmp_path, "import sys\ndef main():\n    sys.exit('bad args')\n", "b.py"
    )
    assert main(["run", quit_with_text, "-t", TINY]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "bad args"


# --- Ctrl-C ------------------------------------------------------------------------------------


def test_ctrl_c_exits_130_without_a_traceback(monkeypatch, capsys, tmp_path: Path) -> None:
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(kernbench.topology.summary, "summarize", interrupted)
    assert main(["topo", "show", TINY]) == EXIT_INTERRUPTED == 130
    assert "Traceback" not in capsys.readouterr().err
    in_a_rank = _script(tmp_path, "def main():\n    raise KeyboardInterrupt\n")
    assert main(["run", in_a_rank, "-t", TINY]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "aborted"


def test_sigint_during_a_run_exits_130(tmp_path: Path) -> None:
    path = _script(
        tmp_path,
        """\
        import sys

        def main():
            print("started", flush=True)
            while True:
                pass
        """,
    )
    proc = _kernbench("run", path, "-t", TINY, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"started\n"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert b"Traceback" not in err and b"aborted" in err


# --- a closed standard output -----------------------------------------------------------------


def _closed_reader(*args: str) -> tuple[int, bytes]:
    """Run kernbench with a standard output whose reader has gone (``| head -1`` done)."""
    proc = _kernbench(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    return proc.returncode, err


@pytest.mark.parametrize("command", ["regress", "topo"])
def test_broken_pipe_exits_quietly(tmp_path: Path, command: str) -> None:
    base = tmp_path / "base.csv"
    base.write_text("op,size_B,time_us\nall_reduce,4096,10\nall_reduce,8192,20\n")
    args = ["regress", str(base), str(base)] if command == "regress" else ["topo", "show", TINY]
    status, err = _closed_reader(*args)
    assert (status, err) == (EXIT_BROKEN_PIPE, b"")


def test_an_output_to_a_closed_stdout_exits_quietly(tmp_path: Path) -> None:
    path = _script(tmp_path, "def main():\n    return [{'x': 'y' * 100, 'time_us': 1}] * 2000\n")
    status, err = _closed_reader("run", path, "-t", TINY, "--report", "-")
    assert status == EXIT_BROKEN_PIPE, err
    assert b"error" not in err and b"Traceback" not in err and b"Exception ignored" not in err


# --- click's own errors and the help -----------------------------------------------------------


def test_usage_errors_stay_exit_2(capsys) -> None:
    assert main(["plot", "x.csv"]) == 2  # no -o
    assert "Missing option '--output'" in capsys.readouterr().err
    assert main(["no-such-command"]) == 2
    assert main(["regress", "a.json", "b.json", "--tolerance"]) == 2


@pytest.mark.parametrize(
    "args",
    [
        ["run", "bench\x00.py"],
        ["run", "benches/vector_add.py", "-t", "tiny\x00.yaml"],
        ["tune", "-t", "tiny\x00.yaml", "-o", "table.yaml"],
        ["plot", "r\x00.csv", "-o", "p.png"],
        ["regress", "a\x00.json", "b.json"],
        ["topo", "show", "t\x00.yaml"],
    ],
    ids=["script", "run-topology", "tune-topology", "plot", "regress", "topo"],
)
def test_a_nul_in_an_input_path_is_a_usage_error(args: list[str], capsys) -> None:
    assert main(args) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "contains a NUL character" in err and "Traceback" not in err


def test_help_documents_traceback_and_exit_statuses(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--traceback" in out and "KERNBENCH_TRACEBACK=1" in out
    for status in ("70", "130", "141"):
        assert status in out


# --- found by a sweep of hostile scripts ------------------------------------------------------


def test_a_rank_exiting_0_is_done_and_the_others_waiting_for_it_are_told(
    tmp_path: Path, capsys
) -> None:
    path = _script(
        tmp_path,
        """\
        import sys
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        def main():
            dist.init_process_group()
            t = torch.ones(8)
            if dist.get_rank() == 1:
                sys.exit(0)
            dist.all_reduce(t)
        """,
    )
    report = tmp_path / "r.json"
    assert main(["run", path, "-t", "ring8", "--report", str(report)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "(ranks [1] have not called it)" in err and "ranks that already returned: [1]" in err
    assert not report.exists()
    # Every rank exiting 0 once done is a finished run, as under torchrun.
    done = _script(
        tmp_path,
        """        import sys
        import kernbench.torch.distributed as dist

        def main():
            dist.init_process_group()
            dist.barrier()
            sys.exit(0)
        """,
        "done.py",
    )
    assert main(["run", done, "-t", "ring8", "--report", str(report)]) == 0
    assert report.exists()


def test_a_lone_rank_exiting_0_once_it_has_run_writes_the_report(tmp_path: Path) -> None:
    path = _script(
        tmp_path,
        """\
        import sys
        import kernbench.torch as torch

        def main():
            torch.ones(8).numpy()
            sys.exit(0)
        """,
    )
    report = tmp_path / "r.json"
    assert main(["run", path, "-t", TINY, "--report", str(report)]) == 0
    assert report.exists()


@pytest.mark.parametrize(
    "body",
    [
        "import sys\ndef main():\n    pass\nsys.exit(0)\n",
        "import argparse\ndef main():\n    argparse.ArgumentParser().parse_args(['--help'])\n",
    ],
)
def test_a_script_exiting_0_before_its_run_says_the_report_was_not_written(
    tmp_path: Path, capsys, body: str
) -> None:
    path = _script(tmp_path, body)
    report = tmp_path / "r.json"
    assert main(["run", path, "-t", TINY, "--report", str(report)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith(f"error: {path}:") and "called sys.exit(0) before its run" in err
    assert f"no report ({report}) was written" in err
    assert not report.exists()
    assert main(["run", path, "-t", TINY]) == 0  # no output asked for: its own status


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("def main(argv):\n    pass\n", "main is not callable as main() (missing a required"),
        ("async def main():\n    pass\n", "main is a coroutine function (async def)"),
        ("def main():\n    yield 1\n", "main is a generator function (it yields)"),
        ("def run(rank):\n    pass\n", "run is not callable as run(rank, world_size)"),
    ],
)
def test_an_entry_point_ranks_cannot_call_is_a_user_error(tmp_path, capsys, body, says) -> None:
    assert main(["run", _script(tmp_path, body), "-t", TINY]) == EXIT_USER_ERROR
    assert says in capsys.readouterr().err


def test_an_unjoined_process_still_runs_as_python_joins_at_exit(tmp_path, capsys) -> None:
    path = _script(
        tmp_path,
        """\
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist
        import kernbench.torch.multiprocessing as mp

        def run(rank, size):
            dist.init_process_group(rank=rank, world_size=size)
            t = torch.ones(2) * (rank + 1)
            dist.all_reduce(t)
            print("rank", rank, t.tolist())

        if __name__ == "__main__":
            for r in range(4):
                mp.Process(target=run, args=(r, 4)).start()
        """,
    )
    assert main(["run", path, "-t", "ring8", "--world-size", "4"]) == 0
    out = capsys.readouterr().out
    assert all(f"rank {r} [10.0, 10.0]" in out for r in range(4)) and "4 ranks" in out


def test_an_empty_topology_is_refused_not_the_default(capsys) -> None:
    assert main(["run", "benches/vector_add.py", "--topology", ""]) == EXIT_USER_ERROR
    assert "--topology is empty" in capsys.readouterr().err


def test_an_output_may_not_replace_a_file_the_topology_extends(tmp_path, capsys) -> None:
    parent = tmp_path / "base.yaml"
    parent.write_text((ROOT / "topologies" / "default.yaml").read_text())
    child = tmp_path / "child.yaml"
    child.write_text("extends: base.yaml\nname: child\n")
    before = parent.read_bytes()
    args = ["run", "benches/vector_add.py", "-t", str(child), "--timing-only"]
    assert main([*args, "--report", str(parent)]) == EXIT_USER_ERROR
    assert "report would replace the input file" in capsys.readouterr().err
    assert parent.read_bytes() == before


def test_max_wall_time_stops_a_module_level_loop_outside_the_ranks(tmp_path, capsys) -> None:
    path = _script(tmp_path, "while True:\n    pass\n\ndef main():\n    pass\n")
    start = time.monotonic()
    assert main(["run", path, "-t", TINY, "--max-wall-time", "1s"]) == EXIT_USER_ERROR
    assert time.monotonic() - start < 10
    err = capsys.readouterr().err
    assert "wall time passed --max-wall-time (1 s) in the script outside its ranks" in err


def test_an_error_raised_in_compiled_numpy_names_the_script_line(tmp_path, capsys) -> None:
    path = _script(
        tmp_path, "import numpy as np\n\ndef main():\n    np.random.default_rng(0).random(-5)\n"
    )
    assert main(["run", path, "-t", TINY, "--timing-only"]) == EXIT_USER_ERROR
    assert f"(at {path}:4 in main;" in capsys.readouterr().err  # not numpy's _common.pyx


def test_importing_a_missing_torch_name_says_what_to_use(tmp_path, capsys) -> None:
    path = _script(tmp_path, "from kernbench.torch import histogramdd\n\ndef main():\n    pass\n")
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "cannot import name 'histogramdd'" in err
    assert "torch.histogramdd is not in KernBench" in err


NOT_UTF8 = os.fsdecode(b"\xff\xfe")  # how Python holds argument bytes that are not UTF-8


def test_a_set_value_that_is_not_utf8_names_the_key(capsys) -> None:
    assert main(["topo", "show", TINY, "--set", f"name=ab{NOT_UTF8}"]) == EXIT_USER_ERROR
    assert capsys.readouterr().err == (
        "error: --set name: holds bytes that are not UTF-8 (0xff 0xfe at character 3); "
        "write it as UTF-8 text\n"
    )


def test_outputs_and_rows_with_arguments_that_are_not_utf8(tmp_path: Path) -> None:
    """A report path and a bench argument in another encoding: written, printed, exit 0."""
    script = _script(
        tmp_path,
        """
        import sys

        import kernbench.torch.distributed as dist


        def main():
            dist.init_process_group()
            return [{"size_B": 1, "arg": sys.argv[-1]}]
        """,
    )
    report = tmp_path / f"r{NOT_UTF8}.json"
    args = ["run", script, "-t", TINY, "--timing-only", "--report", str(report)]
    args += ["--csv", str(tmp_path / "r.csv"), "--", NOT_UTF8]
    proc = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", *args],
        cwd=ROOT,
        env=_env(PYTHONIOENCODING="utf-8"),
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert os.fsencode(f"report: {report}\n") in proc.stdout
    assert report.exists()
    row = (tmp_path / "r.csv").read_text(encoding="utf-8").splitlines()[1]
    assert row.startswith("1,\\udcff\\udcfe,")


# --- a script that changes the process it runs in ----------------------------------------------


def test_a_script_that_changes_directory_does_not_move_its_outputs(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """Outputs are checked where they were asked for; a module-level os.chdir used to send
    them to another directory, unchecked."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = _script(
        tmp_path,
        f"import os\nos.chdir({str(elsewhere)!r})\n\ndef main():\n    return [{{'n': 1}}]\n",
    )
    monkeypatch.chdir(tmp_path)
    assert main(["run", path, "-t", TINY, "--report", "r.json", "--csv", "r.csv"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bench.py",
        "elsewhere",
        "r.csv",
        "r.json",
    ]
    assert list(elsewhere.iterdir()) == []
    assert "report: r.json" in capsys.readouterr().out


def test_a_script_that_rebinds_stdout_keeps_the_summary(tmp_path: Path, capsys) -> None:
    path = _script(
        tmp_path, "import io, sys\nsys.stdout = io.StringIO()\n\ndef main():\n    print('hidden')\n"
    )
    assert main(["run", path, "-t", TINY]) == 0
    assert capsys.readouterr().out.startswith("simulated time: ")


def test_a_script_that_closes_stdout_and_stderr_keeps_the_summary_and_error_line(
    tmp_path: Path,
) -> None:
    """Closing them used to end in an internal error (the summary) or Python's
    'lost sys.stderr' (the error line)."""
    fine = _script(tmp_path, "import sys\nsys.stdout.close()\n\ndef main():\n    pass\n", "a.py")
    failing = _script(
        tmp_path,
        "import sys\n\ndef main():\n    sys.stderr.close()\n    raise ValueError('x')\n",
        "b.py",
    )
    done = _kernbench("run", fine, "-t", TINY, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    assert out.decode().startswith("simulated time: ")
    raised = _kernbench("run", failing, "-t", TINY, stderr=subprocess.PIPE)
    _, err = raised.communicate(timeout=60)
    assert raised.returncode == EXIT_USER_ERROR
    assert err.decode().splitlines() == [
        f"error: rank 0 raised ValueError: x (at {failing}:5 in main; {HINT})"
    ]


def test_a_script_that_changes_directory_keeps_its_tune_table(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """auto reads the table again when the file changes: a relative --set ccl.tune_table
    used to name nothing once a script had changed directory."""
    machine = ["-t", TINY, "--set", "system.device_level=pe"]
    monkeypatch.chdir(tmp_path)
    tune = ["tune", *machine, "--min-size", "4KiB", "--max-size", "4KiB", "-o", "table.yaml"]
    assert main(tune) == 0
    (tmp_path / "elsewhere").mkdir()
    path = _script(
        tmp_path,
        """\
        import os
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        os.chdir("elsewhere")


        def main():
            dist.init_process_group()
            dist.all_reduce(torch.ones(1024))
        """,
    )
    capsys.readouterr()
    auto = ["--set", "ccl.all_reduce=auto", "--set", "ccl.tune_table=table.yaml"]
    assert main(["run", path, *machine, *auto]) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("call", "line"),
    [("dist.all_reduce(t)", 9), ("t.numpy()", 9), ("torch.ones(4)", 9)],
)
def test_simulated_work_in_a_thread_a_rank_started_fails_the_run(
    tmp_path: Path, capsys, call: str, line: int
) -> None:
    # The machine's clock is stepped by the ranks' thread alone: such a thread used to
    # print a traceback (or step the clock itself) and the run ended with status 0.
    path = _script(
        tmp_path,
        f"""\
        import threading
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        def main():
            dist.init_process_group()
            t = torch.ones(4)
            def work():
                {call}
            thread = threading.Thread(target=work, name="helper")
            thread.start()
            thread.join()
        """,
    )
    report = tmp_path / "r.json"
    assert main(["run", path, "-t", TINY, "--report", str(report)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines() == [
        f"error: simulated work was asked for from thread 'helper' at {path}:{line} "
        f"in work ({call}); simulated work must run on the rank's own thread (the one main() "
        "or run() runs on): call it from the rank's code, and keep other threads to work "
        "that does not touch the simulated machine"
    ]
    assert not report.exists()


@pytest.mark.parametrize("output", ["--report", "--csv"])
def test_a_result_row_a_report_cannot_hold_is_refused_as_the_rank_returns_it(
    tmp_path: Path, capsys, output: str
) -> None:
    path = _script(
        tmp_path,
        """\
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        def main():
            dist.init_process_group()
            t = torch.ones(4)
            dist.all_reduce(t)
            if dist.get_rank() == 0:
                return [{"size": 4, "time_us": 1.5}, {"size": 8, "value": t}]
            return None
        """,
    )
    written = tmp_path / "out"
    assert main(["run", path, "-t", "ring8", output, str(written)]) == EXIT_USER_ERROR
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith(
            "error: rank 0 raised ResultRowError: result row 1 of rank 0's return, key 'value': "
            "a value of type Tensor cannot go in a report or CSV (a tensor: .item() or "
            ".tolist()); row values are numbers, text, booleans, None, NumPy numbers and arrays"
        )
    )
    assert not written.exists()


def test_a_result_row_needs_text_keys_and_plain_values_only_for_an_output(tmp_path, capsys):
    path = _script(tmp_path, "def main():\n    return [{('a', 1): 2}]\n")
    assert main(["run", path, "-t", TINY, "--report", str(tmp_path / "r.json")]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: rank 0 raised ResultRowError: result row 0 of rank 0's return has a key "
        "('a', 1) of type tuple; row keys are text (column names)"
    )
    assert main(["run", path, "-t", TINY]) == 0  # no report: the return is the script's own


@pytest.mark.parametrize("closes", ["1", "1, 2"])
def test_a_script_closing_standard_descriptors_still_gets_its_report_and_summary(
    tmp_path: Path, closes: str
) -> None:
    script = _script(
        tmp_path,
        f"""\
        import os
        import kernbench.torch as torch

        def main():
            torch.ones(4).numpy()
            for fd in ({closes},):
                os.close(fd)
        """,
    )
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", script, "-t", TINY, "--report", str(report)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr  # was 70, an internal error, and no report
    assert report.exists()
    if closes == "1":
        lines = proc.stderr.splitlines()
        assert lines[0].startswith("note: the script closed standard output")
        assert lines[1].startswith("simulated time: ") and lines[-1] == f"report: {report}"


def test_a_script_closing_standard_error_still_gets_its_error_line(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """\
        import os

        def main():
            os.close(2)
            raise ValueError("boom")
        """,
    )
    proc = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", script, "-t", TINY],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_USER_ERROR  # was 1, and nothing said
    assert proc.stdout.startswith("error: rank 0 raised ValueError: boom")
