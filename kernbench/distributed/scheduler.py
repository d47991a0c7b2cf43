"""Greenlet-per-rank scheduler on one shared SimPy clock.

Each rank runs user code in its own greenlet.  When a rank must wait for the
machine (a request handle, a collective rendezvous) it registers the event it
waits on and switches back to the scheduler, which steps the SimPy clock until
some waited-for event fires and resumes the ranks it woke, in rank order.
Same inputs, same interleaving: ranks start in rank order and wake in rank
order at equal times.  If every live rank waits and nothing is scheduled, the
run can never finish: a :class:`~kernbench.errors.DeadlockError` lists every
blocked rank and what it waits for.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import simpy
from greenlet import getcurrent, greenlet

from kernbench.errors import DeadlockError, KernBenchError, RankError, SimulationLimitError

__all__ = ["Scheduler", "RankState", "current_rank"]

# Allocations of container objects between young-generation collections while
# ranks run (CPython's default is 700).  A run allocates millions of short-lived
# events, flows and rate tables; at the default the cyclic collector, and its
# full collections over the machine's graph, took a quarter of a 1024-rank
# all-reduce (ADR 0011).
GC_YOUNG_THRESHOLD = 100_000


@contextlib.contextmanager
def _fewer_collections():
    """Collect cyclic garbage less often for the duration of a run."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], GC_YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@dataclass
class RankState:
    rank: int
    glet: greenlet | None = None
    waiting: simpy.Event | None = None
    waiting_for: Any = ""  # a description, or a callable giving one when asked
    finished: bool = False
    result: Any = None
    error: BaseException | None = None
    traceback: Any = None
    local: dict[str, Any] = field(default_factory=dict)  # per-rank state of upper layers


_RANK_OF: dict[greenlet, RankState] = {}


def current_rank() -> RankState | None:
    """The state of the rank whose greenlet is running, or ``None`` outside ranks."""
    return _RANK_OF.get(getcurrent())


class Scheduler:
    """Runs ``fn(rank)`` for every rank, interleaving them on ``env``'s clock."""

    def __init__(self, env: simpy.Environment, world_size: int) -> None:
        if world_size < 1:
            raise KernBenchError(f"world size must be at least 1 (got {world_size})")
        self.env = env
        self.world_size = world_size
        self.ranks = [RankState(r) for r in range(world_size)]
        self._woken: list[int] = []
        self._main: greenlet | None = None
        self.on_deadlock: Callable[[dict[int, str]], str] | None = None
        # A watchdog for runaway runs: stop at this simulated time / wall time.
        self.max_sim_ps: int | None = None
        self.max_wall_s: float | None = None
        self._started_wall = 0.0

    # -- called from rank greenlets ----------------------------------------------
    def block_on(self, event: simpy.Event, what: Any) -> None:
        """Suspend the calling rank until ``event`` has fired (or return at once)."""
        state = current_rank()
        if state is None or self._main is None:
            raise KernBenchError("block_on() called outside a rank")
        if event.processed or (event.triggered and event.callbacks is None):
            return
        state.waiting, state.waiting_for = event, what
        rank = state.rank
        event.callbacks.append(lambda _ev: self._woken.append(rank))
        self._main.switch()
        state.waiting, state.waiting_for = None, ""

    def wait_until(self, event: simpy.Event, what: Any) -> None:
        """Block the current rank, or when called outside ranks step the clock."""
        if current_rank() is not None:
            self.block_on(event, what)
            return
        while not event.processed:
            if not self.env._queue:  # noqa: SLF001 - SimPy has no public "is idle"
                what = what() if callable(what) else what
                raise DeadlockError(f"nothing is scheduled and {what} never happens", {})
            self.env.step()

    # -- the loop ------------------------------------------------------------------
    def run(self, fn: Callable[[int], Any]) -> list[Any]:
        """Run ``fn(rank)`` on every rank to completion; return the results in rank order."""
        with _fewer_collections():
            return self._run(fn)

    def _run(self, fn: Callable[[int], Any]) -> list[Any]:
        self._main = getcurrent()
        self._started_wall = time.perf_counter()
        for state in self.ranks:
            state.glet = greenlet(self._body(fn, state), parent=self._main)
            _RANK_OF[state.glet] = state
        try:
            ready: Sequence[int] = list(range(self.world_size))
            while True:
                for rank in ready:
                    state = self.ranks[rank]
                    state.glet.switch()
                    if isinstance(state.error, DeadlockError | SimulationLimitError):
                        raise state.error  # it already names every rank involved
                    if state.error is not None:
                        raise RankError(rank, state.error).with_traceback(
                            state.traceback
                        ) from state.error
                live = [s for s in self.ranks if not s.finished]
                if not live:
                    return [s.result for s in self.ranks]
                ready = self._advance(live)
        finally:
            for state in self.ranks:
                _RANK_OF.pop(state.glet, None)
            self._main = None

    def _body(self, fn: Callable[[int], Any], state: RankState) -> Callable[[], None]:
        def body() -> None:
            try:
                state.result = fn(state.rank)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the scheduler
                state.error = exc
                state.traceback = sys.exc_info()[2]
            finally:
                state.finished = True

        return body

    def _blocked(self, live: list[RankState]) -> dict[int, str]:
        return {s.rank: s.waiting_for() if callable(s.waiting_for) else s.waiting_for for s in live}

    def _check_limits(self, live: list[RankState]) -> None:
        reason = None
        if self.max_sim_ps is not None and self.env.now > self.max_sim_ps:
            reason = f"simulated time passed --max-sim-time ({self.max_sim_ps} ps)"
        elif (
            self.max_wall_s is not None
            and time.perf_counter() - self._started_wall > self.max_wall_s
        ):
            reason = f"wall time passed --max-wall-time ({self.max_wall_s:g} s)"
        if reason:
            blocked = self._blocked(live)
            lines = [f"rank {r} was waiting for {what}" for r, what in blocked.items()]
            raise SimulationLimitError(
                f"stopped at {self.env.now} ps: {reason}\n  " + "\n  ".join(lines), blocked
            )

    def _advance(self, live: list[RankState]) -> list[int]:
        """Step the clock until some blocked rank wakes; those ranks, in rank order."""
        steps = 0
        while not self._woken:
            steps += 1
            past_limit = self.max_sim_ps is not None and self.env.peek() > self.max_sim_ps
            if past_limit or steps % 1024 == 0:
                self._check_limits(live)
            if not self.env._queue:  # noqa: SLF001
                blocked = self._blocked(live)
                finished = [s.rank for s in self.ranks if s.finished]
                lines = [f"rank {r} waits for {what}" for r, what in blocked.items()]
                if finished:
                    lines.append(f"ranks that already returned: {finished}")
                detail = self.on_deadlock(blocked) if self.on_deadlock else ""
                if detail:
                    lines.append(detail)
                raise DeadlockError(
                    "deadlock: every live rank waits and nothing else can happen\n  "
                    + "\n  ".join(lines),
                    blocked,
                )
            self.env.step()
        self._check_limits(live)
        woken = sorted(set(self._woken))
        self._woken.clear()
        return woken
