"""Hostile inputs the other hostile-input tests leave out; each was a traceback or exit
status 70, a hang, a message naming no key, or a result silently not what was asked.

* An exception whose ``__str__`` raises or returns something other than text,
  raised by a script (in a rank, at import, in its ``__main__`` block or in a
  kernel) or given to ``sys.exit``, is the script's error: status 2 (1 for
  ``sys.exit``, as Python gives it), never an internal error.
* A ``page_size`` past the start of the virtual address space is refused at its key.
* An empty output or input path is refused before any work.
* ``tune --max-size`` past a device's memory names the option.
* ``plot --max-groups`` is bounded.
* ``install_ipcq``'s ``rank_to_pe`` holds whole numbers, and may be the plan's mapping.
* A CSV KernBench writes, KernBench reads back, whatever the length of a cell.
* A loop polling ``Work.is_completed()`` or ``Process.is_alive()`` ends, at the time a
  wait or a join would.
* A bad ``--scheduler`` address is a user error naming the option.
* ``run --csv`` says when the CSV has a header only.
* A seed out of torch's range names ``--seed`` (or the sweep file's ``seed``).
* An error in the middle of a sweep is printed on its own line, not after the progress bar's.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernbench.cli import EXIT_USER_ERROR, main
from kernbench.errors import RankError, exception_text

TINY = "tiny"
HINT = "KERNBENCH_TRACEBACK=1 shows the traceback"
UNPRINTABLE = "<exception str() failed>"

_BAD_EXCEPTIONS = """\
class NotText(Exception):
    def __str__(self):
        return 5


class Raises(Exception):
    def __str__(self):
        raise RuntimeError("inside __str__")
"""


@pytest.fixture(autouse=True)
def _no_traceback_variable(monkeypatch) -> None:
    monkeypatch.delenv("KERNBENCH_TRACEBACK", raising=False)


def _script(tmp_path: Path, body: str, name: str = "bench.py") -> str:
    path = tmp_path / name
    path.write_text(_BAD_EXCEPTIONS + textwrap.dedent(body))
    return str(path)


def _line(path: str, text: str) -> int:
    """The number of the last line of ``path`` that holds ``text``."""
    lines = Path(path).read_text().splitlines()
    return max(number for number, line in enumerate(lines, 1) if text in line)


def test_exception_text_never_raises() -> None:
    class NotText(Exception):
        def __str__(self):
            return 5

    assert exception_text(NotText()) == UNPRINTABLE
    assert exception_text(ValueError("plain")) == "plain"
    assert str(RankError(3, NotText())) == f"rank 3 raised NotText: {UNPRINTABLE}"


@pytest.mark.parametrize("exception", ["NotText", "Raises"])
def test_an_unprintable_exception_in_a_rank_is_the_scripts_error(
    tmp_path: Path, capsys, exception: str
) -> None:
    path = _script(tmp_path, f"\n\ndef main():\n    raise {exception}()\n")
    line = _line(path, "raise")
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"error: rank 0 raised {exception}: {UNPRINTABLE} (at {path}:{line} in main; {HINT})"
    ]


def test_an_unprintable_exception_at_import_is_the_scripts_error(tmp_path: Path, capsys) -> None:
    path = _script(tmp_path, "\n\nraise NotText()\n\ndef main():\n    pass\n")
    where = f"{path}:{_line(path, 'raise')}"
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"error: {where}: importing the bench script raised NotText: {UNPRINTABLE}"
    ]


def test_an_unprintable_exception_in_a_main_block_is_the_scripts_error(
    tmp_path: Path, capsys
) -> None:
    path = _script(tmp_path, '\n\nif __name__ == "__main__":\n    raise NotText()\n')
    where = f"{path}:{_line(path, 'raise')}"
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"error: {where}: running the bench script raised NotText: {UNPRINTABLE}"
    ]


def test_an_unprintable_exception_in_a_kernel_is_a_kernel_error(tmp_path: Path, capsys) -> None:
    path = _script(
        tmp_path,
        """

        import kernbench.torch as torch
        import kernbench.triton as triton


        @triton.jit
        def kernel(x):
            raise NotText()


        def main():
            kernel[(1,)](torch.ones(4))
        """,
    )
    assert main(["run", path, "-t", TINY]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"error: rank 0 raised KernelError: kernel 'kernel' program (0,): NotText: {UNPRINTABLE}"
        f" (at {path}:{_line(path, 'kernel[')} in main)"
    ]


def test_sys_exit_with_an_unprintable_object_exits_1_as_python_does(tmp_path: Path, capsys) -> None:
    path = _script(tmp_path, "\n\nimport sys\n\ndef main():\n    sys.exit(Raises())\n")
    assert main(["run", path, "-t", TINY]) == 1
    assert capsys.readouterr().err.splitlines() == [UNPRINTABLE]


# -- a page larger than the start of the virtual address space ---------------------------------

PAGE_SIZE = "cube.pe_template.components.pe_mmu.attrs.page_size"


@pytest.mark.parametrize("command", ["topo", "run"])
def test_a_page_past_the_start_of_the_address_space_names_the_key(
    tmp_path: Path, capsys, command: str
) -> None:
    """It was accepted by the topology and failed as the run started, naming no key."""
    argv = (
        ["topo", "show", TINY] if command == "topo" else ["run", _script(tmp_path, ""), "-t", TINY]
    )
    assert main([*argv, "--set", f"{PAGE_SIZE}=1TiB"]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"error: tiny: {PAGE_SIZE}: page_size must be at most 4GiB, where the virtual "
        "address space starts (got 1TiB)"
    ]


def test_a_page_as_large_as_the_start_of_the_address_space_runs(tmp_path: Path, capsys) -> None:
    path = _script(
        tmp_path, "\n\nimport kernbench.torch as torch\n\ndef main():\n    torch.ones(8)\n"
    )
    assert main(["run", path, "-t", TINY, "--set", f"{PAGE_SIZE}=4GiB"]) == 0


# -- empty paths -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "what"), [("--report", "report"), ("--csv", "CSV"), ("--trace", "trace")]
)
def test_an_empty_run_output_is_refused_before_the_run(
    tmp_path: Path, capsys, option: str, what: str
) -> None:
    """``--report ''`` used to run and write no report, with exit status 0."""
    path = _script(tmp_path, "\n\ndef main():\n    print('ran')\n")
    assert main(["run", path, "-t", TINY, option, ""]) == EXIT_USER_ERROR
    captured = capsys.readouterr()
    assert "ran" not in captured.out
    assert captured.err.splitlines() == [
        f"error: {what} path is empty; name a file (or '-' for standard output)"
    ]


def test_an_empty_tune_table_path_is_refused_before_tuning(capsys) -> None:
    """It used to measure every algorithm, then fail to write the table."""
    assert main(["tune", "-t", TINY, "-o", ""]) == EXIT_USER_ERROR
    captured = capsys.readouterr()
    assert "measuring" not in captured.out + captured.err
    assert captured.err.splitlines() == [
        "error: tune table path is empty; name a file (or '-' for standard output)"
    ]


def test_an_empty_plot_path_is_refused(tmp_path: Path, capsys) -> None:
    results = tmp_path / "r.csv"
    results.write_text("size_B,busbw_GBps\n1,2\n")
    assert main(["plot", str(results), "-o", ""]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        "error: plot path is empty; name a file (or '-' for standard output)"
    ]


def _sweep_file(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "bench.py").write_text("def main():\n    return []\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"bench: bench.py\ntopologies: [machine.yaml]\n{extra}")
    (tmp_path / "machine.yaml").write_text("extends: tiny.yaml\n")
    return sweep


def test_an_empty_sweep_output_is_refused_not_the_current_directory(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """``sweep -o ''`` used to write points/, results.csv, ... into the current directory."""
    sweep = _sweep_file(tmp_path)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    assert main(["sweep", str(sweep), "-o", ""]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        "error: --output is empty; name the sweep's output directory (made if missing)"
    ]
    assert list(workdir.iterdir()) == []


def test_an_empty_output_in_a_sweep_file_names_the_key(tmp_path: Path, capsys) -> None:
    """``output: ""`` used to fall back to out/<stem> without a word."""
    sweep = _sweep_file(tmp_path, 'output: ""\n')
    assert main(["sweep", str(sweep)]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"error: {sweep}: output: String should have at least 1 character"
    ]


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["sweep", ""], "SWEEP_FILE"),
        (["regress", "", "-"], "BASELINE"),
        (["plot", "", "-o", "x.png"], "INPUTS..."),
        (["run", ""], "SCRIPT"),
    ],
)
def test_an_empty_input_path_is_a_usage_error_naming_it(capsys, argv: list[str], name) -> None:
    """An empty input used to be read as '.', "a directory"."""
    assert main(argv) == EXIT_USER_ERROR
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error: Invalid value for '{name}': the path is empty; name a file")


def test_a_seed_out_of_torchs_range_names_the_option(tmp_path: Path, capsys) -> None:
    """A seed torch.manual_seed refuses used to be refused without naming --seed."""
    script = _script(tmp_path, "def main():\n    pass\n")
    assert main(["run", script, "-t", TINY, "--seed", str(1 << 64)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert f"Invalid value for '--seed': {1 << 64} is not in the range" in err
    assert str((1 << 64) - 1) in err


def test_a_seed_out_of_torchs_range_in_a_sweep_file_names_the_key(tmp_path: Path, capsys) -> None:
    sweep = _sweep_file(tmp_path, f"seed: {-(1 << 63) - 1}\n")
    assert main(["sweep", str(sweep)]) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        f"error: {sweep}: seed: must be >= {-(1 << 63)} (got {-(1 << 63) - 1})"
    ]


def test_an_error_in_the_middle_of_a_sweep_is_printed_on_its_own_line(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """The progress bar was left open: the error line went on the end of the bar's."""
    from kernbench import files
    from kernbench.errors import OutputFileError

    sweep = _sweep_file(tmp_path, "set:\n  system.device_level: [cube, sip]\n")
    write_text = files.write_text
    written = []

    def refusing(path, text, *, what="output"):
        if what == "point file" and written:
            raise OutputFileError("refused for this test", path=str(path))
        written.append(path)
        write_text(path, text, what=what)

    monkeypatch.setattr(files, "write_text", refusing)
    output = tmp_path / "out"
    assert main(["sweep", str(sweep), "-j", "1", "-o", str(output)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "refused for this test" in err
    error_lines = [line for line in err.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and error_lines[0].startswith("error: ")


# -- tune: a --max-size larger than a device's memory ------------------------------------------


def test_a_tune_max_size_past_device_memory_names_the_option(tmp_path: Path, capsys) -> None:
    """It used to be a rank's out-of-memory error naming only tensor 't37'."""
    table = tmp_path / "table.yaml"
    assert main(["tune", "-t", TINY, "-o", str(table), "--max-size", "2GiB"]) == EXIT_USER_ERROR
    *progress, err = capsys.readouterr().err.splitlines()
    assert progress == ["measuring all_reduce: ring"]
    assert err.startswith(
        "error: tune: all_reduce by ring on messages of 1GiB does not fit in device memory "
        "(tensor 't"
    )
    assert "capacity 1GB" in err
    assert err.endswith("; give a --max-size below 1GiB")
    assert not table.exists()


# -- plot: a --max-groups no chart can show ----------------------------------------------------


def test_a_max_groups_past_the_limit_is_refused_before_drawing(tmp_path: Path, capsys) -> None:
    """--max-groups 100000 over as many groups used to draw for a quarter of an hour."""
    results = tmp_path / "r.csv"
    results.write_text("size_B,busbw_GBps\n1,2\n")
    out = tmp_path / "p.png"
    argv = ["plot", str(results), "-o", str(out), "--max-groups", "1001"]
    assert main(argv) == EXIT_USER_ERROR
    assert capsys.readouterr().err.splitlines() == [
        "error: Invalid value for '--max-groups': 1001 is more lines than a chart can show; "
        "at most 1000 (see kernbench plot --help)"
    ]
    assert not out.exists()
    assert main([*argv[:-1], "1000"]) == 0


def test_plot_functions_refuse_a_max_groups_past_the_limit(tmp_path: Path) -> None:
    from kernbench.bench.plot import plot_breakdown, plot_results
    from kernbench.errors import ConfigError

    for plot, data in ((plot_results, [{"size_B": 1, "busbw_GBps": 2}]), (plot_breakdown, [])):
        with pytest.raises(ConfigError, match="max_groups must be a whole number from 1 to 1000"):
            plot(data, tmp_path / "p.png", max_groups=1001)


# -- install_ipcq: rank_to_pe read strictly, and as the plan gives it back ---------------------


@pytest.mark.parametrize(
    ("rank_to_pe", "message"),
    [
        # these used to be read as PE (0, 0, 0), (0, 1, 2) and (0, 0, 1)
        ([(0.9, 0, 0)], "rank_to_pe[0] must be a (sip, cube, pe) triple of whole numbers"),
        (["012"], "rank_to_pe[0] must be a (sip, cube, pe) triple of whole numbers (got '012')"),
        ([(0, 0, True)], "rank_to_pe[0] must be a (sip, cube, pe) triple of whole numbers"),
        # this used to be a TypeError
        (5, "rank_to_pe must list each rank's (sip, cube, pe) (got 5)"),
        ({1: (0, 0, 0)}, "rank_to_pe maps [1]; as a mapping it must map every rank 0..0"),
    ],
)
def test_install_ipcq_refuses_a_placement_that_is_not_whole_numbers(rank_to_pe, message) -> None:
    from kernbench.errors import DistributedError
    from kernbench.runtime import RuntimeContext

    with pytest.raises(DistributedError) as caught:
        RuntimeContext(TINY, timing_only=True).install_ipcq("ring", rank_to_pe=rank_to_pe)
    assert message in str(caught.value)


def test_install_ipcq_takes_back_the_placement_its_plan_gives() -> None:
    """The plan maps rank -> (sip, cube, pe); handing that back used to be refused."""
    import numpy as np

    from kernbench.runtime import RuntimeContext

    ctx = RuntimeContext(TINY, timing_only=True)
    plan = ctx.install_ipcq("ring", rank_to_pe=[(0, 0, 0), (0, 0, 1)])
    again = ctx.install_ipcq("ring", rank_to_pe=plan["rank_to_pe"])
    assert again["rank_to_pe"] == plan["rank_to_pe"] and not again["installed"]
    rows = ctx.install_ipcq("ring", rank_to_pe=np.array([(0, 0, 0), (0, 0, 2)]))
    assert rows["rank_to_pe"] == {0: (0, 0, 0), 1: (0, 0, 2)}


# -- a CSV KernBench wrote is a CSV KernBench reads --------------------------------------------


def test_a_csv_cell_longer_than_the_csv_modules_default_limit_reads_back(
    tmp_path: Path, capsys
) -> None:
    """A row holding 40,000 samples made a 269 KB cell; regress and plot refused the CSV
    ``run --csv`` had just written ("field larger than field limit (131072)")."""
    import csv

    row = '{"size_B": 1, "time_us": 1.0, "samples": list(range(40000))}'
    body = f"\n\ndef main():\n    return [{row}]\n"
    path = _script(tmp_path, body)
    results = tmp_path / "r.csv"
    assert main(["run", path, "-t", TINY, "--csv", str(results)]) == 0
    limit = csv.field_size_limit()
    assert main(["regress", str(results), str(results)]) == 0
    assert main(["plot", str(results), "-o", str(tmp_path / "p.png"), "--y", "time_us"]) == 0
    assert "error" not in capsys.readouterr().err
    assert csv.field_size_limit() == limit  # the reader puts the module's limit back


# -- a rank polling Work.is_completed() --------------------------------------------------------

_POLL = """

import kernbench.torch as torch
import kernbench.torch.distributed as dist


def main():
    dist.init_process_group()
    if dist.get_rank() in RANKS:
        work = dist.all_reduce(torch.ones(1024), async_op=True)
        {wait}
"""


@pytest.mark.parametrize("backend", ["detailed", "fast"])
def test_polling_is_completed_ends_when_the_work_would_and_costs_what_wait_costs(
    tmp_path: Path, capsys, backend: str
) -> None:
    """The loop used to spin forever: no other rank, and not the clock, ran while it did."""
    times = []
    polls = ("work.is_completed()", "work.is_success()")
    for wait in ("work.wait()", *(f"while not {poll}:\n            pass" for poll in polls)):
        body = _POLL.replace("RANKS", "range(4)").replace("{wait}", wait)
        path = _script(tmp_path, body, name=f"poll{len(times)}.py")
        argv = ["run", path, "-t", TINY, "--set", "system.device_level=pe", "--timing-only"]
        assert main([*argv, "--set", f"simulation.backend={backend}"]) == 0
        out = capsys.readouterr().out
        times.append(next(line for line in out.splitlines() if line.startswith("simulated time")))
    assert times[0] == times[1] == times[2]


def test_polling_a_collective_the_other_ranks_never_call_is_a_deadlock(
    tmp_path: Path, capsys
) -> None:
    body = _POLL.replace("RANKS", "(0,)").replace(
        "{wait}", "while not work.is_completed():\n            pass"
    )
    path = _script(tmp_path, body)
    assert main(["run", path, "-t", TINY, "--set", "system.device_level=pe"]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "error: deadlock: every live rank waits and nothing else can happen" in err
    assert "rank 0 waits for all_reduce(" in err and "ranks [1, 2, 3] have not called it" in err


def test_a_few_polls_do_not_wait() -> None:
    import kernbench
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    def rank() -> tuple[bool, ...]:
        dist.init_process_group()
        work = dist.all_reduce(torch.ones(1024), async_op=True)
        polls = tuple(work.is_completed() for _ in range(3))
        work.wait()
        return (*polls, work.is_completed())

    result = kernbench.simulate(rank, topology=TINY, overrides=["system.device_level=pe"])
    assert result.returns == [(False, False, False, True)] * 4


def test_polling_is_alive_runs_the_processes_as_join_would(tmp_path: Path, capsys) -> None:
    """``while p.is_alive(): pass`` in a __main__ block used to spin forever: started
    processes run only when joined."""
    times = []
    for wait in (
        "for p in ps:\n        p.join()",
        "while any(p.is_alive() for p in ps):\n        pass",
    ):
        body = f"""

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.multiprocessing as mp


def rank(r, size):
    dist.init_process_group(rank=r, world_size=size)
    dist.all_reduce(torch.ones(4))


if __name__ == "__main__":
    ps = [mp.Process(target=rank, args=(r, 2)) for r in range(2)]
    for p in ps:
        p.start()
    {wait}
    print("exit codes", [p.exitcode for p in ps], [p.is_alive() for p in ps])
"""
        path = _script(tmp_path, body, name=f"alive{len(times)}.py")
        assert main(["run", path, "-t", TINY, "--set", "system.device_level=pe"]) == 0
        out = capsys.readouterr().out
        assert "exit codes [0, 0] [False, False]" in out
        times.append(next(line for line in out.splitlines() if line.startswith("simulated time")))
    assert times[0] == times[1]


# -- sweep: a Dask scheduler address that leads nowhere ----------------------------------------


@pytest.mark.parametrize("address", ["foo", "tcp://"])
def test_a_bad_scheduler_address_is_a_user_error_naming_the_option(
    tmp_path: Path, capsys, address: str
) -> None:
    """It was an internal error (exit 70): ValueError: missing port number in address."""
    pytest.importorskip("distributed")
    sweep = _sweep_file(tmp_path)
    argv = ["sweep", str(sweep), "-o", str(tmp_path / "out"), "--scheduler", address]
    assert main(argv) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert f"error: --scheduler: cannot reach a Dask scheduler at {address!r} (ValueError: " in err
    assert "give the address the scheduler listens on" in err
    assert list((tmp_path / "out" / "points").iterdir()) == []


def test_a_csv_without_rows_says_so(tmp_path: Path, capsys) -> None:
    """A main() returning one dict (not a list of them) wrote a header-only CSV and said
    nothing."""
    path = _script(tmp_path, '\n\ndef main():\n    return {"size_B": 1, "time_us": 1.0}\n')
    results = tmp_path / "r.csv"
    assert main(["run", path, "-t", TINY, "--csv", str(results)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"csv: {results} (a header only: no rank returned a list of result dicts)"
    )
    assert len(results.read_text().splitlines()) == 1
