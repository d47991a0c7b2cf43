"""Where sweep points run: each in a fresh child process, on this machine or on Dask workers.

Every item runs in a Python process of its own (:func:`run_child`), so nothing
an item does (``sys.exit``, ``os._exit``, a segfault, the out-of-memory killer)
can take down the driver or a Dask worker.  How the child ended comes back as
an :class:`Outcome`: what the function returned, or the exit status / signal,
with the tail of what the child wrote to stdout and stderr.

:func:`run_local` keeps at most ``jobs`` children alive and yields outcomes as
they finish; :func:`run_dask` sends one task per item to a Dask cluster, each
task running its item in a child on the worker, and turns a worker that died
(``KilledWorker``) into a failed outcome for that item only.  Closing either
generator early (Ctrl-C, an error) stops what is still running.

A child never outlives its parent: on Linux it asks the kernel for SIGKILL when
the parent dies (``PR_SET_PDEATHSIG``), and everywhere it watches its stdin, a
pipe whose only writer is the parent, and exits when that pipe closes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.errors import ConfigError, shown
from kernbench.files import RESULTS_LIMIT

__all__ = [
    "EXECUTORS",
    "TAIL_CHARS",
    "Outcome",
    "run_child",
    "run_local",
    "run_dask",
    "start_local_cluster",
]

EXECUTORS = ("local", "dask")

#: Characters of a child's stdout and of its stderr that an outcome keeps (the last ones).
TAIL_CHARS = 10_000
_TAIL_BYTES = 4 * TAIL_CHARS  # a UTF-8 character is at most 4 bytes
_READ_BYTES = 1 << 16
# A child that has exited but whose pipes stay open (a grandchild holds them) is
# given this long before its pipes are closed and its outcome reported.
_PIPE_GRACE_S = 1.0
# Loads point_child.py by path, not through the kernbench.bench package: its guard
# against outliving the parent must run before the slow imports.
_CHILD_FILE = str(Path(__file__).with_name("point_child.py"))
_CHILD_CODE = (
    "import importlib.util, sys; "
    "spec = importlib.util.spec_from_file_location('kernbench_point_child', sys.argv[1]); "
    "child = importlib.util.module_from_spec(spec); spec.loader.exec_module(child); child.main()"
)


@dataclass(frozen=True)
class Outcome:
    """How one item's child process ended.

    ``returned`` says whether the function returned (its JSON-decoded value is
    ``value``); otherwise ``error`` says why not in one line.  ``exit_status``
    is the child's exit status, ``signal`` the name of the signal that killed
    it (at most one of the two is set; neither when the child never ran).
    """

    returned: bool
    value: Any = None
    error: str = ""
    exit_status: int | None = None
    signal: str | None = None
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _died(exit_status: int | None, signal_name: str | None) -> str:
    if signal_name is not None:
        number = getattr(signal, signal_name, None)
        text = f"the process was killed by {signal_name}"
        text += f" (signal {int(number)})" if number else ""
        if signal_name == "SIGKILL":
            text += "; the out-of-memory killer sends SIGKILL"
        return text
    return f"the process exited with status {exit_status} before returning a result"


class _Tail:
    """The last bytes written to a stream, in bounded memory."""

    def __init__(self) -> None:
        self._data = bytearray()

    def add(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > 2 * _TAIL_BYTES:
            del self._data[:-_TAIL_BYTES]

    def text(self) -> str:
        return bytes(self._data[-_TAIL_BYTES:]).decode("utf-8", errors="replace")[-TAIL_CHARS:]


def backstop_s(item: Any) -> float | None:
    """How long a child may run: an item that is a mapping with a wall-time limit
    (``max_wall_s``, seconds) stops itself at it, inside its process; a child still
    running past the limit plus a grace (a quarter of it, at least 5 s) ignored it
    (a bench that catches the interrupt, a stopped process) and is killed."""
    limit = item.get("max_wall_s") if isinstance(item, dict) else None
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0:
        return None
    return limit + max(5.0, 0.25 * limit)


class _Child:
    """One running child: its process, the pipes it writes to and what came through them.

    The child's pipes are registered with ``selector`` while they are open.
    """

    def __init__(self, target: str, item: Any, selector: selectors.BaseSelector) -> None:
        self.item = item
        self.selector = selector
        self.started = time.monotonic()
        self.exited_at: float | None = None
        self.backstop = backstop_s(item)
        self.killed_past: float | None = None  # the backstop it was killed at
        self.stdout, self.stderr = _Tail(), _Tail()
        self.result = bytearray()
        self.result_too_large = False
        encoded = (json.dumps(item) + "\n").encode()
        result_read, result_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _CHILD_CODE,
                    _CHILD_FILE,
                    target,
                    str(result_write),
                    str(os.getpid()),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(result_write,),
            )
        except BaseException:
            os.close(result_read)
            raise
        finally:
            os.close(result_write)
        self.result_pipe = os.fdopen(result_read, "rb", buffering=0)
        self.open: dict[Any, _Tail | None] = {
            self.process.stdout: self.stdout,
            self.process.stderr: self.stderr,
            self.result_pipe: None,
        }
        for stream in self.open:
            selector.register(stream, selectors.EVENT_READ, self)
        # The item is one line, which the child reads first thing.  The pipe then
        # stays open while the child runs: its end-of-file tells the child we are gone.
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.write(encoded)
            self.process.stdin.flush()

    def read(self, stream: Any) -> None:
        """Take what ``stream`` has; close it at end-of-file."""
        chunk = os.read(stream.fileno(), _READ_BYTES)
        if not chunk:
            self._close(stream)
            return
        tail = self.open[stream]
        if tail is not None:
            tail.add(chunk)
        elif self.result_too_large or len(self.result) + len(chunk) > RESULTS_LIMIT:
            self.result_too_large = True
            self.result.clear()
        else:
            self.result += chunk

    def _close(self, stream: Any) -> None:
        del self.open[stream]
        self.selector.unregister(stream)
        stream.close()

    def done(self) -> bool:
        """The child has exited and its pipes are drained (or their grace has passed)."""
        if self.exited_at is None:
            if self.process.poll() is None:
                return False
            self.exited_at = time.monotonic()
        if self.open and time.monotonic() - self.exited_at < _PIPE_GRACE_S:
            return False
        for stream in list(self.open):
            self._close(stream)
        return True

    def outcome(self) -> Outcome:
        status = self.process.returncode
        exit_status, signal_name = (status, None) if status >= 0 else (None, _signal_name(-status))
        common = {
            "exit_status": exit_status,
            "signal": signal_name,
            "stdout": self.stdout.text(),
            "stderr": self.stderr.text(),
            "wall_s": time.monotonic() - self.started,
        }
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        if self.killed_past is not None:
            error = (
                f"the process was killed: still running {self.killed_past:g} s after it "
                f"started, past its wall-time limit (max_wall_time {self.item['max_wall_s']:g} "
                "s) and a grace (does the bench catch the interrupt?)"
            )
            return Outcome(returned=False, error=error, **common)
        if self.result_too_large:
            error = f"the result is larger than the limit of {RESULTS_LIMIT} bytes"
            return Outcome(returned=False, error=error, **common)
        if status != 0 or not self.result:
            return Outcome(returned=False, error=_died(exit_status, signal_name), **common)
        try:
            value = json.loads(self.result)
        except (ValueError, RecursionError) as exc:
            return Outcome(returned=False, error=f"the result is not JSON ({exc})", **common)
        return Outcome(returned=True, value=value, **common)

    def past_backstop(self) -> bool:
        """Kill the child if it runs past its backstop; whether it did."""
        if self.backstop is None or self.exited_at is not None or self.killed_past is not None:
            return False
        if time.monotonic() - self.started < self.backstop:
            return False
        self.killed_past = self.backstop
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        return True

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for stream in list(self.open):
            self._close(stream)
        with contextlib.suppress(OSError):
            self.process.stdin.close()


def _start(target: str, item: Any, selector: selectors.BaseSelector) -> _Child | Outcome:
    try:
        return _Child(target, item, selector)
    except OSError as exc:  # no memory, no file descriptors, no processes left
        return Outcome(returned=False, error=f"the process could not start: {exc.strerror}")


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """A second Ctrl-C must not interrupt the stopping of the children."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_local(target: str, items: Sequence[Any], jobs: int) -> Iterator[tuple[Any, Outcome]]:
    """Run ``target`` (``"module:function"``) on every item, at most ``jobs`` children at once.

    Yields ``(item, outcome)`` in completion order.
    """
    queue = deque(items)
    running: list[_Child] = []
    selector = selectors.DefaultSelector()
    try:
        while queue or running:
            while queue and len(running) < jobs:
                item = queue.popleft()
                child = _start(target, item, selector)
                if isinstance(child, Outcome):
                    yield item, child
                else:
                    running.append(child)
            for key, _ in selector.select(timeout=0.05):
                key.data.read(key.fileobj)
            for child in running:
                child.past_backstop()
            for child in [c for c in running if c.done()]:
                running.remove(child)
                yield child.item, child.outcome()
    finally:
        with _sigint_ignored():
            for child in running:
                child.kill()
            selector.close()


def run_child(target: str, item: Any) -> Outcome:
    """Run ``target`` on one item in a child process and wait for it (a Dask task)."""
    ((_, outcome),) = run_local(target, [item], 1)
    return outcome


# Dask's own logs are not the user's: it logs errors with tracebacks on races of its
# shutdown (a worker's heartbeat meeting a scheduler that is closing), which a sweep
# must not print; a point that fails is reported by its outcome.
_DASK_LOG_LEVEL = logging.CRITICAL


def start_local_cluster(jobs: int) -> Any:
    """A Dask cluster of ``jobs`` single-threaded worker processes on this machine, no HTTP.

    ``LocalCluster(dashboard_address=None)`` still serves HTTP: the scheduler
    listens on 8787 and every worker on a port of its own (distributed issue
    #7207).  So the scheduler and workers come from :mod:`kernbench.bench.dask_nodes`,
    whose nodes start no HTTP server.  A worker that dies fails its task at
    once (``allowed-failures: 0``): with every point in a child of its own, a
    worker dies only when a point kills it, and a retry would kill the next.
    """
    import dask
    from distributed import Nanny, SpecCluster

    from kernbench.bench.dask_nodes import NoHttpScheduler, NoHttpWorker

    scheduler = {
        "cls": NoHttpScheduler,
        "options": {"host": "127.0.0.1", "port": 0, "dashboard": False},
    }
    worker = {
        "cls": Nanny,
        "options": {
            "nthreads": 1,
            "host": "127.0.0.1",
            "worker_class": NoHttpWorker,
            "silence_logs": _DASK_LOG_LEVEL,
        },
    }
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        return SpecCluster(
            scheduler=scheduler,
            workers={index: worker for index in range(jobs)},
            silence_logs=_DASK_LOG_LEVEL,
            name="kernbench-sweep",
        )


def run_dask(
    target: str,
    items: Sequence[Any],
    jobs: int,
    scheduler: str | None = None,
    *,
    keys: Sequence[str] | None = None,
) -> Iterator[tuple[Any, Outcome]]:
    """Send every item to a Dask scheduler, or to a local cluster of ``jobs`` workers."""
    from distributed import Client, as_completed

    cluster = None
    if scheduler:
        try:
            client = Client(scheduler)
        except (OSError, ValueError, TypeError) as exc:  # no such address, or no one there
            raise ConfigError(
                f"cannot reach a Dask scheduler at {shown(scheduler)!r} "
                f"({type(exc).__name__}: {shown(str(exc))}); give the address the scheduler "
                "listens on, as `dask scheduler` prints it (tcp://HOST:PORT)",
                key_path="--scheduler",
            ) from None
    else:
        # Workers started while SIGINT is ignored keep ignoring it, so Ctrl-C in a
        # terminal stops only the driver, which then closes the cluster; the price
        # is that Ctrl-C waits for the start-up.
        with _sigint_ignored():
            cluster = start_local_cluster(jobs)
        client = Client(cluster)
    futures = {}
    try:
        for index, item in enumerate(items):
            key = keys[index] if keys else None
            future = client.submit(run_child, target, item, pure=False, key=key)
            futures[future] = item
        for future in as_completed(list(futures)):
            item = futures.pop(future)
            try:
                outcome = future.result()
            except Exception as exc:  # the worker died (KilledWorker) or the task was lost
                outcome = Outcome(
                    returned=False, error=f"the Dask task failed: {type(exc).__name__}: {exc}"
                )
            future.release()
            yield item, outcome
    except BaseException:
        client.cancel(list(futures))
        raise
    finally:
        with _sigint_ignored():
            client.close()
            if cluster is not None:
                cluster.close()
