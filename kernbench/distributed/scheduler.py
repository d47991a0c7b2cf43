"""Greenlet-per-rank scheduler on one shared SimPy clock.

Each rank runs user code in its own greenlet.  When a rank must wait for the
machine (a request handle, a collective rendezvous) it registers the event it
waits on and switches back to the scheduler, which steps the SimPy clock until
some waited-for event fires and resumes the ranks it woke, in rank order.
Same inputs, same interleaving: ranks start in rank order and wake in rank
order at equal times.  If every live rank waits and nothing is scheduled, the
run can never finish: a :class:`~kernbench.errors.DeadlockError` lists every
blocked rank and what it waits for.

A run may be given limits: a simulated time, checked before every step of the
clock (the run stops at the limit, not at the first event past it), and a wall
time, watched by a timer thread (:mod:`kernbench.distributed.watchdog`)
that interrupts the thread running the ranks, so that a rank that never gives
control back (``while True: pass``) is stopped on time too.  Either limit ends
the run with a :class:`~kernbench.errors.SimulationLimitError` saying what
every rank was doing.

A stopped run unwinds the ranks it leaves suspended, and a rank that hides the
unwinding (``except BaseException``) and calls the simulator again is given up
on after a bounded number of throws: the run ends with its own error, always.
"""

from __future__ import annotations

import contextlib
import gc
import math
import numbers
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from greenlet import GreenletExit, getcurrent, greenlet

from kernbench.distributed.watchdog import (
    WallClock,
    WallTimeExpired,
    describe_frame,
    where_it_ran,
)
from kernbench.errors import (
    DeadlockError,
    KernBenchError,
    RankError,
    SimulationError,
    SimulationLimitError,
)
from kernbench.machine.api import Clock, Event
from kernbench.runtime.current import refuse_foreign_thread
from kernbench.validation import shown_value

__all__ = ["UNWIND_THROWS", "RankState", "Scheduler", "current_rank", "rank_local"]

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
    waiting: Event | None = None
    waiting_for: Any = ""  # a description, or a callable giving one when asked
    started: bool = False
    waited: bool = False  # it has waited on the machine at least once
    waits: int = 0  # how many times it has given control back to wait
    finished: bool = False
    result: Any = None
    error: BaseException | None = None
    traceback: Any = None
    unwind_throws: int = 0  # raised in it since the run stopped (it caught them)
    local: dict[str, Any] = field(default_factory=dict)  # per-rank state of upper layers


# What the clock's peek() says when nothing is scheduled.
_IDLE = float("inf")

#: How many times a stopped run's unwinding raises in a rank that catches it and calls
#: the simulator again, before that rank is abandoned (see Scheduler._end_ranks).
UNWIND_THROWS = 100

# Abandoned ranks' greenlets, kept so that they are never resumed: collecting a
# suspended greenlet throws GreenletExit into it, and a rank that swallowed every
# throw could then run on forever inside the collector.
_ABANDONED: list[greenlet] = []

_RANK_OF: dict[greenlet, RankState] = {}


def current_rank() -> RankState | None:
    """The state of the rank whose greenlet is running, or ``None`` outside ranks."""
    return _RANK_OF.get(getcurrent())


def rank_local(key: str, make: Callable[[], Any], outside: Any) -> Any:
    """The calling rank's ``local`` state under ``key`` (made by ``make()`` on its first
    use), or ``outside`` when no rank is running: per-rank state of the upper layers."""
    rank = _RANK_OF.get(getcurrent())
    if rank is None:
        return outside
    value = rank.local.get(key)
    if value is None:
        value = rank.local[key] = make()
    return value


class Scheduler:
    """Runs ``fn(rank)`` for every rank, interleaving them on ``env``'s clock."""

    def __init__(self, env: Clock, world_size: int) -> None:
        if world_size < 1:
            raise KernBenchError(f"world size must be at least 1 (got {world_size})")
        self.env = env
        self.world_size = world_size
        self.ranks = [RankState(r) for r in range(world_size)]
        self._returned = 0  # ranks whose body has returned (or raised)
        self._woken: list[int] = []
        self._main: greenlet | None = None
        self.on_deadlock: Callable[[dict[int, str]], str] | None = None
        # A watchdog for runaway runs: stop at this simulated time / wall time.
        self.max_sim_ps: int | None = None
        self.max_wall_s: float | None = None
        self.wall_clock: WallClock | None = None  # a runner's, already started: shared
        self._running: RankState | None = None  # the rank whose greenlet has control
        self._wall: WallClock | None = None
        # Where the last wall-time interrupt found the run: (rank or None, " at FILE:LINE").
        self._interrupted: tuple[int | None, str] | None = None
        self._unwinding = False  # the run has stopped and its ranks are being unwound
        self._thread = threading.get_ident()  # the one thread that steps the clock

    # -- called from rank greenlets ----------------------------------------------
    def refuse_foreign_thread(self) -> None:
        """Raise ForeignThreadError unless called on the thread that steps the clock."""
        refuse_foreign_thread(self._thread)

    def block_on(self, event: Event, what: Any) -> None:
        """Suspend the calling rank until ``event`` has fired (or return at once)."""
        refuse_foreign_thread(self._thread)
        state = current_rank()
        if state is None or self._main is None:
            raise KernBenchError("block_on() called outside a rank")
        if self._unwinding:
            # The run has stopped: nothing the rank asks of the machine will happen.
            # It caught the throw that unwinds it; raise again, and after
            # UNWIND_THROWS give up on it (control goes back for good).
            state.unwind_throws += 1
            if state.unwind_throws > UNWIND_THROWS:
                self._main.switch()
            raise GreenletExit
        if event.processed or (event.triggered and event.callbacks is None):
            return
        state.waiting, state.waiting_for, state.waited = event, what, True
        state.waits += 1
        rank = state.rank
        event.callbacks.append(lambda _ev: self._woken.append(rank))
        self._main.switch()
        state.waiting, state.waiting_for = None, ""

    def wait_until(self, event: Event, what: Any) -> None:
        """Block the current rank, or when called outside ranks step the clock."""
        if current_rank() is not None:
            self.block_on(event, what)  # which refuses a foreign thread itself
            return
        refuse_foreign_thread(self._thread)
        limit = self.max_sim_ps
        while not event.processed:
            if self.env.peek() == _IDLE:
                what = what() if callable(what) else what
                raise DeadlockError(f"nothing is scheduled and {what} never happens", {})
            if limit is not None and self.env.peek() > limit:  # the ranks have returned
                what = what() if callable(what) else what
                raise self._stop_at_sim_limit([f"the run was waiting for {what}"])
            self.env.step()

    # -- the loop ------------------------------------------------------------------
    def run(self, fn: Callable[[int], Any]) -> list[Any]:
        """Run ``fn(rank)`` on every rank to completion; return the results in rank order."""
        limit = self.max_wall_s
        number = isinstance(limit, int | float) and not isinstance(limit, bool)
        if limit is not None and not (number and 0 < limit < math.inf):
            raise SimulationError(
                f"--max-wall-time must be a positive, finite number of seconds (got {limit!r})"
            )
        sim_limit = self.max_sim_ps
        if sim_limit is not None:
            # The clock is whole picoseconds; a text would fail a comparison mid-run, NaN
            # would never stop it, a fraction would move the clock to a fraction.
            whole = isinstance(sim_limit, numbers.Integral) and not isinstance(sim_limit, bool)
            if not (whole and sim_limit > 0):
                raise SimulationError(
                    "--max-sim-time must be a positive whole number of picoseconds "
                    f"(got {shown_value(sim_limit)})"
                )
            self.max_sim_ps = int(sim_limit)
        self._running, self._interrupted = None, None
        self._thread = threading.get_ident()
        with _fewer_collections():
            shared = self.wall_clock
            if shared is not None:
                wall = shared
                wall.call_on_interrupt(self._on_interrupt)
            else:
                wall = WallClock(limit, self._on_interrupt) if limit is not None else None
            self._wall = wall
            try:
                return self._run(fn)
            except WallTimeExpired as expired:
                if wall is not None:
                    wall.stop()  # first: nothing may interrupt what follows
                raise self._wall_time_error(expired) from None
            finally:
                self._end_ranks()
                if wall is not None and wall is shared:
                    wall.call_on_interrupt(None)  # the runner keeps it for its own code
                elif wall is not None:
                    wall.stop()
                self._wall = None

    def _on_interrupt(self, frame: Any) -> None:
        state = current_rank()
        self._interrupted = (state.rank if state else None, describe_frame(frame))

    def _run(self, fn: Callable[[int], Any]) -> list[Any]:
        self._main = getcurrent()
        self._returned = sum(1 for state in self.ranks if state.finished)
        for state in self.ranks:
            state.glet = greenlet(self._body(fn, state), parent=self._main)
            _RANK_OF[state.glet] = state
        return self._loop()

    def _end_ranks(self) -> None:
        """After the run, its error included: unwind the ranks a stopped run leaves
        suspended (an error in another rank, a limit).  The collector never frees a
        suspended greenlet's frames, so they would keep the run's tensors, machine and
        context alive for good.

        While they unwind, every wait on the machine (any simulator operation, a
        ``finally:`` block's cleanup included) raises ``GreenletExit`` at once.  A
        rank that catches it (``except BaseException``) and calls the simulator again
        gets it again; after :data:`UNWIND_THROWS` of those it is abandoned, never to
        be resumed (what its frames hold stays in memory), and the run's own error is
        what the run raises."""
        self._unwinding = True
        try:
            for state in self.ranks:
                if state.glet and not state.finished:  # started, suspended
                    try:
                        state.glet.throw(GreenletExit)
                    except BaseException:  # noqa: BLE001, S110 - the run's own error is raised
                        pass
                    if not state.glet.dead:
                        _ABANDONED.append(state.glet)
        finally:
            self._unwinding = False
            for state in self.ranks:
                _RANK_OF.pop(state.glet, None)
            self._main = None

    def _loop(self) -> list[Any]:
        ready: Sequence[int] = list(range(self.world_size))
        while True:
            for rank in ready:
                state = self.ranks[rank]
                self._running = state
                state.glet.switch()
                self._running = None
                if isinstance(state.error, DeadlockError | SimulationLimitError | WallTimeExpired):
                    raise state.error  # it already names every rank involved
                if state.error is not None:
                    # Before the run did anything: a script's own exit (--help, usage).
                    # A rank that waited on the machine (a lone rank's included) is done.
                    first = not state.waited and not any(
                        s.started for s in self.ranks if s is not state
                    )
                    exited = isinstance(state.error, SystemExit) and state.error.code in (None, 0)
                    if exited and not first:
                        # sys.exit() once the others run: this rank is done, as a
                        # torchrun process exiting 0 is.
                        state.error = state.traceback = None
                    else:
                        error = RankError(rank, state.error)
                        error.first = first
                        raise error.with_traceback(state.traceback) from state.error
            if self._returned == self.world_size:
                return [s.result for s in self.ranks]
            ready = self._advance()

    def _body(self, fn: Callable[[int], Any], state: RankState) -> Callable[[], None]:
        def body() -> None:
            state.started = True
            try:
                state.result = fn(state.rank)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the scheduler
                state.error = exc
                state.traceback = sys.exc_info()[2]
            finally:
                state.finished = True
                self._returned += 1

        return body

    def _blocked(self, live: list[RankState]) -> dict[int, str]:
        return {s.rank: s.waiting_for() if callable(s.waiting_for) else s.waiting_for for s in live}

    def _limit_error(
        self, reason: str, running: dict[int, str], lines: list[str] | None = None
    ) -> SimulationLimitError:
        """The error of a run stopped at a limit, saying what every rank was doing."""
        doing: dict[int, str] = {}  # rank -> what it waits for, or what it was running
        lines = list(lines or [])
        for state in self.ranks:
            if state.rank in running:
                doing[state.rank] = running[state.rank]
                lines.append(f"rank {state.rank} was {running[state.rank]}")
            elif not state.started:
                doing[state.rank] = "not started (an earlier rank kept control)"
                lines.append(f"rank {state.rank} had {doing[state.rank]}")
            elif not state.finished:
                what = state.waiting_for
                doing[state.rank] = what() if callable(what) else what
                lines.append(f"rank {state.rank} was waiting for {doing[state.rank]}")
        returned = [s.rank for s in self.ranks if s.finished and s.rank not in running]
        if returned:
            lines.append(f"ranks that had returned: {returned}")
        return SimulationLimitError(
            f"stopped at {self.env.now} ps: {reason}\n  " + "\n  ".join(lines), doing
        )

    def _wall_time_error(self, expired: WallTimeExpired) -> SimulationLimitError:
        if self._interrupted is not None:  # the signal handler saw where it was
            rank, where = self._interrupted
        else:
            state = self._running
            if state is None:  # raised in a rank's greenlet, which caught and kept it
                state = next((s for s in self.ranks if s.error is expired), None)
            rank, where = (state.rank if state else None), where_it_ran(expired)
        running, lines = {}, []
        if rank is not None:
            running[rank] = f"running Python code{where}"
        elif where:  # the machine was running user code: a kernel program
            lines.append(f"the simulated machine was running Python code{where}")
        reason = f"wall time passed --max-wall-time ({self.max_wall_s:g} s)"
        return self._limit_error(reason, running, lines)

    def _stop_at_sim_limit(self, lines: list[str] | None = None) -> SimulationLimitError:
        """The error of a run whose next event lies past ``max_sim_ps``: the clock is
        moved to the limit (nothing happens before it) and stops there, whichever the
        backend, so a step-wide priced collective cannot carry the run past it."""
        limit = self.max_sim_ps
        if self.env.now < limit:
            reached = self.env.timeout(limit - self.env.now)
            while not reached.processed:  # nothing else is scheduled before the limit
                self.env.step()
        reason = f"simulated time reached --max-sim-time ({limit} ps)"
        return self._limit_error(reason, {}, lines)

    def _advance(self) -> list[int]:
        """Step the clock until some blocked rank wakes; those ranks, in rank order."""
        wall, limit, woken = self._wall, self.max_sim_ps, self._woken
        peek, step = self.env.peek, self.env.step
        if wall is None and limit is None:  # the common case, one event after another
            while not woken:
                if peek() == _IDLE:
                    break
                step()
        while not woken:
            # SimPy turns an exception in a process into a failed event and steps on, so an
            # interrupt that hit a kernel program is not always seen: stop here once fired.
            if wall is not None and wall.fired:
                raise WallTimeExpired
            if limit is not None and peek() > limit:
                raise self._stop_at_sim_limit()
            if peek() == _IDLE:
                blocked = self._blocked([s for s in self.ranks if not s.finished])
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
            step()
        woken = sorted(set(self._woken))
        self._woken.clear()
        return woken
