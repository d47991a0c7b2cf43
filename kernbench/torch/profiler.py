"""``torch.profiler`` on the simulated clock (ADR 0030).

Programs wrap training steps in ``with torch.profiler.profile(...) as prof:``, label
regions with ``record_function("forward")``, call ``prof.step()`` per iteration and print
``prof.key_averages().table(sort_by="cuda_time_total")`` or export a Chrome trace.  Here
the events are the labelled regions and one ``ProfilerStep#N`` per step, timed on the
simulated clock (what ``torch.cuda.Event`` measures): the table lists each name's calls
and simulated time, total and average, and ``export_chrome_trace`` writes them as
Chrome/Perfetto ``X`` events in microseconds.  Individual kernels are not listed: the
run's own trace (``kernbench run --trace FILE``) has every operation.  ``schedule``
follows torch's wait/warmup/active/repeat cycle: only active steps are recorded, and
``on_trace_ready`` is called when a cycle's active steps end (and at ``stop``).
``activities``, ``record_shapes``, ``profile_memory``, ``with_stack`` and the other
options are accepted and change nothing.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernbench.errors import TensorValueError
from kernbench.runtime.current import current_context

__all__ = [
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "tensorboard_trace_handler",
]

PS_PER_US = 10**6


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(
    *, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0
) -> Callable[[int], ProfilerAction]:
    """torch's cycle: ``skip_first`` steps, then (``wait``, ``warmup``, ``active``) repeated
    ``repeat`` times (0: for ever); the last active step of a cycle saves."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise TensorValueError("Invalid profiler schedule arguments")

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        within = step % cycle
        if within < wait:
            return ProfilerAction.NONE
        if within < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if within < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


@dataclass(frozen=True)
class ProfilerEvent:
    """One recorded region: its name and simulated start and end, in ps."""

    name: str
    start_ps: int
    end_ps: int

    @property
    def duration_us(self) -> float:
        return (self.end_ps - self.start_ps) / PS_PER_US


_ACTIVE: list[profile] = []  # the profilers inside their `with`, innermost last


class record_function(contextlib.ContextDecorator):  # noqa: N801 - torch's name
    """A labelled region: an event in every recording profiler."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self._start_ps: int | None = None

    def __enter__(self) -> record_function:
        self._start_ps = current_context().now
        return self

    def __exit__(self, *exc: Any) -> None:
        end = current_context().now
        for prof in _ACTIVE:
            prof.add_event(self.name, self._start_ps or 0, end)


class _Average:
    def __init__(self, key: str) -> None:
        self.key, self.count, self.total_us = key, 0, 0.0

    @property
    def average_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0


class EventList(list):
    """``prof.key_averages()``: one row per name."""

    def table(self, sort_by: str | None = None, row_limit: int = 100, **_: Any) -> str:
        rows = sorted(self, key=lambda a: -a.total_us) if sort_by else list(self)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        width = max([len("Name"), *(len(a.key) for a in rows)])
        lines = [
            f"{'Name':<{width}}  {'# of Calls':>10}  {'Sim total (us)':>15}  {'Sim avg (us)':>13}"
        ]
        lines.append("-" * len(lines[0]))
        for a in rows:
            lines.append(
                f"{a.key:<{width}}  {a.count:>10}  {a.total_us:>15.3f}  {a.average_us:>13.3f}"
            )
        lines.append("(simulated time; every operation is in kernbench run --trace FILE)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


class profile:  # noqa: N801 - torch's name
    """``torch.profiler.profile(activities=None, schedule=None, on_trace_ready=None, ...)``."""

    def __init__(
        self,
        *,
        activities: Any = None,
        schedule: Callable[[int], ProfilerAction] | None = None,
        on_trace_ready: Callable[[profile], Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        execution_trace_observer: Any = None,
        acc_events: bool = False,
        use_cuda: bool | None = None,
    ) -> None:
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self._events: list[ProfilerEvent] = []
        self._step_start_ps = 0
        self._action = ProfilerAction.NONE

    # -- the window -------------------------------------------------------------------
    def _action_at(self, step: int) -> ProfilerAction:
        return self.schedule(step) if self.schedule is not None else ProfilerAction.RECORD

    @property
    def _recording(self) -> bool:
        return self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)

    def start(self) -> None:
        self.step_num = 0
        self._action = self._action_at(0)
        self._step_start_ps = current_context().now
        _ACTIVE.append(self)

    def stop(self) -> None:
        if self in _ACTIVE:
            self._close_step()
            _ACTIVE.remove(self)
            if self._recording and self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def step(self) -> None:
        """The end of one training step: record it, move the schedule on; a cycle whose
        active steps ended is handed to ``on_trace_ready``, and the next starts afresh."""
        self._close_step()
        previous = self._action
        self.step_num += 1
        self._action = self._action_at(self.step_num)
        if previous == ProfilerAction.RECORD_AND_SAVE and self.on_trace_ready is not None:
            self.on_trace_ready(self)
        if self._recording and previous != ProfilerAction.RECORD:
            self._events = []
        self._step_start_ps = current_context().now

    def _close_step(self) -> None:
        if self._recording:
            self.add_event(f"ProfilerStep#{self.step_num}", self._step_start_ps,
                           current_context().now)  # fmt: skip

    def add_event(self, name: str, start_ps: int, end_ps: int) -> None:
        if self._recording:
            self._events.append(ProfilerEvent(name, start_ps, end_ps))

    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- results ------------------------------------------------------------------------
    def events(self) -> list[ProfilerEvent]:
        return list(self._events)

    def key_averages(self, group_by_input_shape: bool = False, **_: Any) -> EventList:
        averages: dict[str, _Average] = {}
        for event in self._events:
            row = averages.setdefault(event.name, _Average(event.name))
            row.count += 1
            row.total_us += event.duration_us
        return EventList(averages.values())

    def export_chrome_trace(self, path: str) -> None:
        """The events as a Chrome/Perfetto trace (``X`` events, times in us)."""
        trace = {
            "traceEvents": [
                {
                    "name": e.name,
                    "ph": "X",
                    "ts": e.start_ps / PS_PER_US,
                    "dur": e.duration_us,
                    "pid": 0,
                    "tid": 0,
                    "cat": "simulated",
                }
                for e in self._events
            ],  # fmt: skip
            "displayTimeUnit": "ms",
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(trace, f)


def tensorboard_trace_handler(
    dir_name: str, worker_name: str | None = None, use_gzip: bool = False
) -> Callable[[profile], None]:
    """An ``on_trace_ready`` that writes each trace as
    ``<dir_name>/<worker_name>.<time_ns>.pt.trace.json``."""

    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{os.uname().nodename}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{name}.{time.time_ns()}.pt.trace.json"))

    return handler
