"""The wall-clock watchdog of a run: a timer thread that interrupts the ranks' thread.

A rank that never gives control back to the scheduler (``while True: pass``,
a long ``time.sleep``) cannot be stopped by a check in the scheduler's loop.
:class:`WallClock` starts a timer thread; once the limit has passed it raises
:class:`WallTimeExpired` in the thread that runs the ranks, wherever that
thread is, and again every ``REPEAT_S`` seconds for as long as the run goes on
(rank code may have caught it with a bare ``except:``).

How it interrupts:

* in the main thread, with a signal (``SIGURG``, which is ignored by default)
  sent to that thread with ``signal.pthread_kill`` and a Python handler
  installed for the run, so that a blocking system call (a sleep, a read) is
  interrupted too;
* in any other thread, where Python cannot install signal handlers, with
  CPython's ``PyThreadState_SetAsyncExc``: it takes effect at the thread's
  next bytecode (a blocking call is interrupted only once it returns).

:meth:`WallClock.stop` disarms it: once it returns nothing more is raised, the
thread has exited and the signal handler is the one from before the run.  A
signal already sent and not yet handled then finds SIGURG's previous handler
(by default: ignored).
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import simpy

__all__ = ["REPEAT_S", "WallClock", "WallTimeExpired", "describe_frame", "where_it_ran"]

#: Seconds between interrupts once the limit has passed, until the run stops.
REPEAT_S = 0.5

_SIGNAL = getattr(signal, "SIGURG", None)
# Code that is the simulator's, not the user's: KernBench and the SimPy engine it drives.
_MACHINERY = (str(Path(__file__).resolve().parents[1]), str(Path(simpy.__file__).resolve().parent))


class WallTimeExpired(BaseException):  # noqa: N818 - it is a signal of time, not an error
    """Raised in the ranks' thread when the run's wall-time limit has passed.

    A ``BaseException``, so that ``except Exception`` in rank code does not
    swallow it; the scheduler turns it into a SimulationLimitError.
    """


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Raise ``exc_type`` in thread ``thread_id`` at its next bytecode (None: withdraw it)."""
    exc = None if exc_type is None else ctypes.py_object(exc_type)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), exc)


class WallClock:
    """Interrupts the calling thread with :class:`WallTimeExpired` after ``limit_s`` seconds.

    ``on_interrupt(frame)`` is called, in the interrupted thread, with the frame
    that was running just before each interrupt is raised (when it is raised
    by the signal handler; the other way knows no frame).
    """

    def __init__(
        self, limit_s: float, on_interrupt: Callable[[FrameType | None], None] | None = None
    ) -> None:
        self._target = threading.get_ident()
        self._on_interrupt = on_interrupt
        self._lock = threading.Lock()  # orders an interrupt against stop()
        self._armed = True
        self._fired = False
        self._stopped = threading.Event()
        self._previous_handler = None
        self._by_signal = False
        if _SIGNAL is not None and threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(_SIGNAL)
            if previous is not None:  # None: set outside Python, and could not be put back
                self._previous_handler = previous
                signal.signal(_SIGNAL, self._on_signal)
                self._by_signal = True
        self._thread = threading.Thread(
            target=self._watch,
            args=(min(limit_s, threading.TIMEOUT_MAX),),
            name="kernbench-wall-clock",
            daemon=True,
        )
        try:
            self._thread.start()
        except BaseException:
            self._disarm()
            raise

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._armed and self._fired:
            if self._on_interrupt is not None:
                self._on_interrupt(frame)
            raise WallTimeExpired
        previous = self._previous_handler
        if callable(previous):
            previous(signum, frame)

    def _watch(self, limit_s: float) -> None:
        wait = limit_s
        while not self._stopped.wait(wait):
            with self._lock:
                if not self._armed:
                    return
                self._fired = True
                if self._by_signal:
                    signal.pthread_kill(self._target, _SIGNAL)
                else:
                    _raise_in_thread(self._target, WallTimeExpired)
            wait = REPEAT_S

    @property
    def fired(self) -> bool:
        """Whether the limit has passed (and the thread has been interrupted)."""
        return self._fired

    def call_on_interrupt(self, on_interrupt: Callable[[FrameType | None], None] | None) -> None:
        """Who is told of the frame each interrupt stops (a scheduler sharing the clock)."""
        self._on_interrupt = on_interrupt

    def stop(self) -> None:
        """Disarm: after this returns nothing is raised, and the thread and handler are gone.

        Call it from the thread being watched.  It may be called more than once.
        """
        while True:
            try:
                self._disarm()
                return
            except WallTimeExpired:
                continue  # raised before it was disarmed; nothing can come after that

    def _disarm(self) -> None:
        with self._lock:
            self._armed = False
            if self._fired and not self._by_signal:
                _raise_in_thread(self._target, None)  # withdraw one not yet delivered
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if self._by_signal:
            signal.signal(_SIGNAL, self._previous_handler)
            self._by_signal = False


def _is_users(filename: str) -> bool:
    return not filename.startswith(_MACHINERY)


def describe_frame(frame: FrameType | None) -> str:
    """`` at FILE:LINE (in FUNCTION)`` for user code, ``""`` for the simulator's own."""
    if frame is None or not _is_users(frame.f_code.co_filename):
        return ""
    return f" at {frame.f_code.co_filename}:{frame.f_lineno} (in {frame.f_code.co_name})"


def where_it_ran(exc: BaseException) -> str:
    """`` at FILE:LINE (in FUNCTION)``: the user code ``exc`` interrupted, or ``""``.

    That is the innermost frame of its traceback (following the exceptions it
    was re-raised as, as SimPy does), when that frame is user code: a rank's,
    or a kernel program's.
    """
    while isinstance(exc.__cause__, WallTimeExpired):
        exc = exc.__cause__
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if not _is_users(code.co_filename):
        return ""
    return f" at {code.co_filename}:{tb.tb_lineno} (in {code.co_name})"
