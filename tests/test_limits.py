"""--max-sim-time and --max-wall-time stop a runaway run cleanly, keeping a partial report."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import kernbench
import kernbench.kernels as kernels
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import KernBenchError, SimulationLimitError

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
        kernbench.simulate(_forever, topology="multi_sip", max_sim_time_ps=100_000_000)
    error = info.value
    assert str(error).startswith(
        "stopped at 100000000 ps: simulated time reached --max-sim-time (100000000 ps)"
    )
    assert set(error.blocked) == {0, 1, 2, 3}
    report = error.report
    assert report["stopped"].startswith("stopped at ")
    assert report["simulated_time_ps"] == 100_000_000  # at the limit, not the next event
    assert len(report["collectives"]) > 5  # what happened before the stop is there


def _limited(fn, backend: str, limit_ps: int) -> SimulationLimitError:
    with pytest.raises(SimulationLimitError) as info:
        kernbench.simulate(
            fn,
            topology="multi_sip",
            overrides=[f"simulation.backend={backend}"],
            max_sim_time_ps=limit_ps,
        )
    return info.value


# Inside the second all-reduce of 256 floats on multi_sip (from 11.97 to 19.84 us; the
# first runs from 4.01 to 11.87 us): the fast backend prices it step-wide, so its ranks'
# next event lies 7.5 us past the limit.
LIMIT_IN_A_COLLECTIVE = 12_345_678


def test_max_sim_time_stops_both_backends_at_the_limit_alike():
    detailed = _limited(_forever, "detailed", LIMIT_IN_A_COLLECTIVE)
    fast = _limited(_forever, "fast", LIMIT_IN_A_COLLECTIVE)
    assert fast.report["collectives"][-1]["priced"] == "step-wide"
    assert fast.report["collectives"][-1]["end_ps"] is None  # stopped while it ran
    for error in (detailed, fast):
        assert type(error) is SimulationLimitError
        assert error.report["simulated_time_ps"] == LIMIT_IN_A_COLLECTIVE
        assert error.report["stopped"] == (
            f"stopped at {LIMIT_IN_A_COLLECTIVE} ps: simulated time reached --max-sim-time "
            f"({LIMIT_IN_A_COLLECTIVE} ps)"
        )
    assert str(fast) == str(detailed)  # the same stop, every rank in the same call
    assert fast.blocked == detailed.blocked
    assert "all_reduce(dtype='float32', shape=(256,)" in fast.blocked[0]


def _returns_with_an_async_all_reduce() -> None:
    dist.init_process_group()
    dist.all_reduce(torch.ones(256), async_op=True)


@pytest.mark.parametrize("backend", ["detailed", "fast"])
def test_max_sim_time_holds_while_the_returned_ranks_work_finishes(backend):
    limit = 8_000_000  # inside the all-reduce; every rank returned at 2.65 us
    error = _limited(_returns_with_an_async_all_reduce, backend, limit)
    text = str(error)
    assert text.startswith(f"stopped at {limit} ps: simulated time reached")
    assert "the run was waiting for all_reduce(dtype='float32', shape=(256,)" in text
    assert "ranks that had returned: [0, 1, 2, 3]" in text
    assert error.report["simulated_time_ps"] == limit


def test_max_wall_time_stops_within_the_limit():
    start = time.perf_counter()
    with pytest.raises(SimulationLimitError, match="passed --max-wall-time"):
        kernbench.simulate(_forever, topology="multi_sip", max_wall_s=0.5)
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
            "multi_sip",
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
    assert partial["simulated_time_ps"] == 200_000_000


# -- a rank that never gives control back -----------------------------------------------------
TINY = "tiny"
PE_LEVEL = ("system.device_level=pe",)  # tiny: 4 ranks


def _spins_in_python(stuck: int) -> None:
    dist.init_process_group()
    if dist.get_rank() == stuck:
        while True:
            pass
    dist.barrier()


def _limit_error(fn, *args, limit_s: float = 1.0) -> tuple[SimulationLimitError, float]:
    start = time.perf_counter()
    with pytest.raises(SimulationLimitError) as info:
        kernbench.simulate(fn, topology=TINY, overrides=PE_LEVEL, args=args, max_wall_s=limit_s)
    return info.value, time.perf_counter() - start


def _watchdog_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "wall" in t.name.lower()]


def test_a_rank_spinning_in_python_is_stopped_on_time_and_named():
    handler = signal.getsignal(signal.SIGINT)
    error, elapsed = _limit_error(_spins_in_python, 2, limit_s=1.0)
    assert 1.0 <= elapsed < 2.0
    text = str(error)
    assert text.startswith("stopped at ") and "wall time passed --max-wall-time (1 s)" in text
    assert re.search(r"rank 2 was running Python code at .*test_limits\.py:\d+", text)
    assert set(error.blocked) == {0, 1, 2, 3}
    assert "barrier" in error.blocked[0] and "running Python code" in error.blocked[2]
    assert error.report["stopped"] == text.splitlines()[0]  # the partial report is kept
    assert _watchdog_threads() == []
    assert signal.getsignal(signal.SIGINT) is handler


def _sleeps() -> None:
    dist.init_process_group()
    if dist.get_rank() == 1:
        time.sleep(60)
    dist.barrier()


def test_a_rank_blocked_in_a_sleep_is_stopped_on_time():
    error, elapsed = _limit_error(_sleeps, limit_s=0.5)
    assert elapsed < 1.5
    assert "rank 1 was running Python code" in str(error)


def _swallows_exceptions() -> None:
    dist.init_process_group()
    while True:
        try:
            sum(range(1000))
        except Exception:  # noqa: BLE001 - user code that hides its errors
            pass


def test_a_rank_that_catches_exception_is_still_stopped():
    error, elapsed = _limit_error(_swallows_exceptions, limit_s=0.5)
    assert elapsed < 1.5
    assert "rank 0 was running Python code" in str(error)


def test_the_watchdog_stops_a_run_in_another_thread():
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            kernbench.simulate(
                _spins_in_python, topology=TINY, overrides=PE_LEVEL, args=(0,), max_wall_s=0.5
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.append(exc)

    start = time.perf_counter()
    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert time.perf_counter() - start < 1.5
    assert isinstance(outcome[0], SimulationLimitError)
    assert "rank 0 was running Python code" in str(outcome[0])


def _quick() -> int:
    dist.init_process_group()
    dist.barrier()
    return dist.get_rank()


def test_the_watchdog_does_not_outlive_a_run_that_finished():
    handlers = {s: signal.getsignal(s) for s in signal.valid_signals()}
    before = set(threading.enumerate())
    result = kernbench.simulate(_quick, topology=TINY, overrides=PE_LEVEL, max_wall_s=0.2)
    assert result.returns == [0, 1, 2, 3]
    assert set(threading.enumerate()) == before
    assert {s: signal.getsignal(s) for s in signal.valid_signals()} == handlers
    deadline = time.perf_counter() + 0.6  # well past the limit: nothing may fire now
    spins = 0
    while time.perf_counter() < deadline:
        spins += 1
    assert spins > 0


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_a_wall_time_limit_must_be_a_positive_number_of_seconds(bad):
    with pytest.raises(KernBenchError, match="--max-wall-time must be a positive"):
        kernbench.simulate(_quick, topology=TINY, overrides=PE_LEVEL, max_wall_s=bad)


@kernels.jit
def _spinning_kernel(x_ptr):
    while True:
        pass


def _launches_a_spinning_kernel() -> None:
    dist.init_process_group()
    _spinning_kernel[(1,)](torch.ones(16))


def test_a_kernel_program_spinning_in_python_is_stopped_and_located():
    error, elapsed = _limit_error(_launches_a_spinning_kernel, limit_s=0.5)
    assert elapsed < 1.5
    text = str(error)
    assert re.search(
        r"the simulated machine was running Python code at .*test_limits\.py:\d+ "
        r"\(in _spinning_kernel\)",
        text,
    )
    assert "rank 0 was waiting for request" in text


SPINNER = """
import pathlib, time
import kernbench.torch.distributed as dist

pathlib.Path(__file__).with_suffix(".started").write_text(repr(time.time()))

def main():
    dist.init_process_group()
    if dist.get_rank() == 3:
        while True:
            pass
    dist.barrier()
"""


def test_cli_stops_a_spinning_rank_within_a_second_of_the_limit(tmp_path: Path):
    """The limit counts from the run's start (the machine built, then the script
    imported); the stop comes within a second of it.  Measured from the script's first
    line to the process's end, so that interpreter start-up and imports on a loaded
    machine do not count."""
    script, report = tmp_path / "spin.py", tmp_path / "report.json"
    script.write_text(SPINNER)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernbench.cli",
            "run",
            str(script),
            "--topology",
            TINY,
            "--set",
            "system.device_level=pe",
            "--max-wall-time",
            "2s",
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.time() - float(script.with_suffix(".started").read_text())
    assert result.returncode == 2
    assert elapsed < 3.0, elapsed
    assert "error: stopped at" in result.stderr and "--max-wall-time (2 s)" in result.stderr
    assert f"rank 3 was running Python code at {script}:10 (in main)" in result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(report.read_text())["stopped"].startswith("stopped at ")


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--max-sim-time", "0", "cannot read time '0'"),
        ("--max-sim-time", "0ns", "must be more than zero (got '0ns')"),
        ("--max-wall-time", "0s", "must be more than zero (got '0s')"),  # was no limit at all
        ("--max-wall-time", "abc", "cannot read time 'abc'"),
        ("--max-sim-time", "1e30s", "time '1e30s' is too large"),
    ],
)
def test_a_bad_limit_is_a_usage_error_naming_the_option(tmp_path, option, value, says):
    script = tmp_path / "bench.py"
    script.write_text("def main():\n    pass\n")
    command = [sys.executable, "-m", "kernbench.cli", "run", str(script), "-t", TINY]
    result = subprocess.run([*command, option, value], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"error: Invalid value for '{option}': {says}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("limit", "shown"),
    [(0, "0"), (-1, "-1"), (1000.5, "1000.5"), (float("nan"), "nan"), ("1ms", "'1ms'")]
    + [(True, "True"), (float("inf"), "inf")],
    ids=["zero", "negative", "fraction", "nan", "text", "true", "inf"],
)
def test_a_max_sim_time_that_is_not_a_positive_whole_number_is_refused(limit, shown):
    """The clock is whole picoseconds: a text used to fail a comparison mid-run, NaN and
    infinity never stopped it, a fraction moved the clock to a fraction of a ps."""
    message = "--max-sim-time must be a positive whole number of picoseconds (got {})"
    with pytest.raises(KernBenchError, match=re.escape(message.format(shown))):
        kernbench.simulate(_forever, topology="multi_sip", max_sim_time_ps=limit)
