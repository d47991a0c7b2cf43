"""``torch.profiler`` on the simulated clock: labelled regions and steps timed as
``torch.cuda.Event`` times them, torch's schedule cycle and ``on_trace_ready``, the table
and the Chrome trace."""

from __future__ import annotations

import json

import pytest

import kernbench.torch as torch
from kernbench.errors import TensorValueError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _work(x):
    with record_function("forward"):
        y = x @ x
    with record_function("backward"):
        return (y * 2).sum()


def test_regions_and_steps_are_timed_on_the_simulated_clock(ctx) -> None:
    x = torch.ones(32, 32)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 record_shapes=True) as prof:  # fmt: skip
        start.record()
        for _ in range(3):
            _work(x)
            prof.step()
        end.record()
    rows = {row.key: row for row in prof.key_averages()}
    assert rows["forward"].count == 3 and rows["backward"].count == 3
    assert [f"ProfilerStep#{i}" in rows for i in range(4)] == [True, True, True, True]
    steps_us = sum(rows[f"ProfilerStep#{i}"].total_us for i in range(3))
    assert steps_us == pytest.approx(start.elapsed_time(end) * 1000, rel=1e-9)
    assert 0 < rows["forward"].total_us < steps_us
    assert rows["forward"].average_us == pytest.approx(rows["forward"].total_us / 3)
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=3)
    assert "forward" in table and "# of Calls" in table and "simulated time" in table
    assert len(table.splitlines()) == 2 + 3 + 1


def test_schedule_records_only_active_steps_and_hands_each_cycle_on(ctx, tmp_path) -> None:
    act = schedule(wait=1, warmup=1, active=2, repeat=1)
    assert [act(i) for i in range(5)] == [
        ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
        ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE,
    ]  # fmt: skip
    handed = []
    with profile(schedule=act, on_trace_ready=lambda p: handed.append(
            sorted(e.name for e in p.events()))) as prof:  # fmt: skip
        for _ in range(6):
            _work(torch.ones(8, 8))
            prof.step()
    assert handed == [["ProfilerStep#2", "ProfilerStep#3", "backward", "backward", "forward",
                       "forward"]]  # fmt: skip
    assert {e.name for e in prof.events()} >= {"ProfilerStep#2", "ProfilerStep#3"}
    with pytest.raises(TensorValueError, match="Invalid profiler schedule arguments"):
        schedule(wait=0, warmup=0, active=0)


def test_chrome_trace_and_tensorboard_handler_write_the_events(ctx, tmp_path) -> None:
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path / "log"), "w0")) as prof:
        _work(torch.ones(8, 8))
    written = list((tmp_path / "log").glob("w0.*.pt.trace.json"))
    assert len(written) == 1
    events = json.loads(written[0].read_text())["traceEvents"]
    assert {e["name"] for e in events} == {"forward", "backward", "ProfilerStep#0"}
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"] == events


def test_record_function_outside_a_profiler_and_as_a_decorator(ctx) -> None:
    @record_function("helper")
    def helper(t):
        return t + 1

    assert helper(torch.ones(2)).tolist() == [2.0, 2.0]  # no profiler: nothing recorded
    with profile() as prof:
        helper(torch.ones(2))
    assert [e.name for e in prof.events()].count("helper") == 1
    assert torch.profiler.profile is profile
