"""kernbench.bench.executors on its own: bounded children, bounded output, how children end."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from kernbench.bench import executors
from kernbench.bench.executors import TAIL_CHARS, run_child, run_local

TESTS = str(Path(__file__).resolve().parent)


@pytest.fixture(autouse=True)
def _targets_importable(monkeypatch) -> None:
    """The children import their target from this directory."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", TESTS if not path else f"{TESTS}{os.pathsep}{path}")


def test_output_tails_are_bounded_and_the_last_characters() -> None:
    outcome = run_child("sweep_helpers:target_loud", {"lines": 200_000})  # 2.4 MB per stream
    assert outcome.returned and outcome.value == {"printed": 200_000}
    assert outcome.exit_status == 0 and outcome.signal is None
    for tail, stream in ((outcome.stdout, "out"), (outcome.stderr, "err")):
        assert len(tail) == TAIL_CHARS
        assert tail.endswith(f"{stream} 0199999\n")


def test_a_thread_left_running_does_not_keep_the_child_alive() -> None:
    start = time.monotonic()
    outcome = run_child("sweep_helpers:target_thread_left_running", {})
    assert outcome.returned and outcome.value == "returned"
    assert time.monotonic() - start < 30


def test_sys_exit_with_a_message_is_status_1_with_the_message() -> None:
    outcome = run_child("sweep_helpers:target_exit_with_text", {"text": "usage: no"})
    assert not outcome.returned
    assert (outcome.exit_status, outcome.signal) == (1, None)
    assert outcome.stderr == "usage: no\n"
    assert outcome.error == "the process exited with status 1 before returning a result"


def test_a_result_over_the_limit_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(executors, "RESULTS_LIMIT", 1000)
    outcome = run_child("sweep_helpers:target_big_result", {"size": 5000})
    assert not outcome.returned
    assert outcome.error == "the result is larger than the limit of 1000 bytes"
    assert run_child("sweep_helpers:target_big_result", {"size": 10}).value == "x" * 10


def test_at_most_jobs_children_run_at_once() -> None:
    items = [{"sleep_s": 0.3, "index": index} for index in range(5)]
    spans = [outcome.value for _, outcome in run_local("sweep_helpers:target_timed", items, 2)]
    assert len(spans) == 5
    moments = sorted({moment for span in spans for moment in span})
    for moment in moments:
        assert sum(start <= moment < end for start, end in spans) <= 2


def test_closing_the_generator_stops_the_running_children() -> None:
    items = [{"sleep_s": 0}, {"sleep_s": 60}, {"sleep_s": 60}]
    results = run_local("sweep_helpers:target_timed", items, 3)
    item, outcome = next(results)
    assert item == {"sleep_s": 0} and outcome.returned
    children = [
        child
        for child in psutil.Process().children()
        if "kernbench_point_child" in " ".join(child.cmdline())
    ]
    assert len(children) == 2
    start = time.monotonic()
    results.close()
    assert time.monotonic() - start < 5
    for child in children:
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
