"""``torch.multiprocessing`` for simulated ranks: processes are greenlets.

``Process(target=..., args=...).start()`` registers a rank (ranks are numbered
in start order); the first ``join()`` runs every started process together on
the current context's machine, each in its own greenlet.  ``spawn(fn, args,
nprocs)`` runs ``fn(i, *args)`` for i in 0..nprocs-1.  Environment variables
such as ``MASTER_ADDR`` and ``MASTER_PORT`` are accepted and mean nothing here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from kernbench.distributed.scheduler import current_rank
from kernbench.distributed.world import SPIN_POLLS, World, check_world_size
from kernbench.errors import DistributedError, ProcessTargetError
from kernbench.runtime import current_context

__all__ = [
    "Process",
    "spawn",
    "set_start_method",
    "get_start_method",
    "get_context",
    "join_unjoined",
    "forget_unjoined",
]

_started: list[Process] = []
_polls: list[Any] = [0, None]  # is_alive() polls of unrun processes, and the clock then


class Process:
    """A rank to be run; mirrors ``multiprocessing.Process``."""

    calls = "target(*args, **kwargs)"  # how the target is called, for the errors

    def __init__(
        self,
        group: Any = None,
        target: Callable[..., Any] | None = None,
        name: str | None = None,
        args: tuple = (),
        kwargs: dict | None = None,
        *,
        daemon: bool | None = None,
    ) -> None:
        self.name = name or f"Process-{len(_started) + 1}"
        self.target = target
        self.args = _as_args(args, f"{self.name}: args")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise ProcessTargetError(
                f"{self.name}: kwargs must be a dict of keyword arguments, "
                f"not {type(kwargs).__name__}"
            )
        self.kwargs = dict(kwargs or {})
        self.daemon = daemon
        self.exitcode: int | None = None
        self.result: Any = None
        self._started = False

    def start(self) -> None:
        if self._started:
            raise DistributedError(f"{self.name} was already started")
        running = current_rank()
        if running is not None:
            raise DistributedError(
                f"{self.name}.start() (or mp.spawn) in rank {running.rank}: ranks start "
                "ranks only from the script's __main__ block, outside every rank (with "
                "--nproc-per-node the whole script already runs once per rank: leave "
                "mp.spawn out, or run without --nproc-per-node)"
            )
        _check_target(self.target, self.args, self.kwargs, self.name, self.calls)
        self._started = True
        _started.append(self)

    def run(self) -> Any:
        return self.target(*self.args, **self.kwargs) if self.target else None

    def join(self, timeout: float | None = None) -> None:
        if not self._started:
            raise DistributedError(f"{self.name} was not started; call start() first")
        if self.exitcode is None:
            _run_started()

    def is_alive(self) -> bool:
        """True from start() until the process has run; as with a Work's polls, the
        started processes run (as join() runs them) once the script has asked
        :data:`~kernbench.distributed.world.SPIN_POLLS` times with nothing else done:
        they run only when joined, so a loop waiting for them would never end."""
        alive = self._started and self.exitcode is None
        if alive and current_rank() is None and self in _started:
            now = current_context().now
            _polls[:] = [_polls[0] + 1 if _polls[1] == now else 1, now]
            if _polls[0] >= SPIN_POLLS:
                _run_started()
                return False
        return alive


def _as_args(args: Any, what: str) -> tuple:
    """``args`` as the tuple a process passes on (``multiprocessing`` takes any iterable)."""
    if isinstance(args, Iterable):
        return tuple(args)
    raise ProcessTargetError(
        f"{what} must be a tuple of positional arguments, not {type(args).__name__} "
        f"{args!r}; write args=({args!r},) for one"
    )


def _check_target(target: Any, args: tuple, kwargs: dict, name: str, calls: str) -> None:
    """Refuse, before any rank runs, a target that is not callable or cannot take the
    arguments it will be given (in a process that would fail at its first line)."""
    if target is None:
        return
    if not callable(target):
        raise ProcessTargetError(
            f"{name}: the target {target!r} ({type(target).__name__}) is not callable; pass "
            "the function each rank runs: mp.Process(target=fn, args=(...)) or "
            "mp.spawn(fn, args=(...), nprocs=n)"
        )
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # no signature to check (some builtins): called as given
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        shown = getattr(target, "__qualname__", None) or repr(target)
        bare = signature.replace(
            parameters=[q.replace(annotation=q.empty) for q in signature.parameters.values()],
            return_annotation=signature.empty,
        )
        raise ProcessTargetError(
            f"{name}: {shown}{bare} cannot be called as {calls} with args={args!r}"
            + (f", kwargs={kwargs!r}" if kwargs else "")
            + f": {exc}"
        ) from None


def join_unjoined() -> None:
    """Run the processes started and never joined, as Python joins a script's children
    when it exits (a ``__main__`` block that forgot ``join()`` still runs its ranks)."""
    if _started:
        _run_started()


def forget_unjoined() -> None:
    """Drop processes a failed script started, so that they do not join the next run (nor
    its polls count toward the next run's)."""
    _started.clear()
    _polls[:] = [0, None]


def _run_started() -> None:
    batch = list(_started)
    _started.clear()
    _polls[:] = [0, None]
    world = World(current_context(), len(batch), what="mp.Process count")
    try:
        results = world.run(lambda rank: batch[rank].run())
    except BaseException:
        for process in batch:
            process.exitcode = 1
        raise
    for process, result in zip(batch, results, strict=True):
        process.exitcode, process.result = 0, result


class _Spawned(Process):
    calls = "fn(i, *args), i the process index,"  # as torch.multiprocessing.spawn calls it


class ProcessContext:
    def __init__(self, processes: list[Process]) -> None:
        self.processes = processes

    def join(self, timeout: float | None = None) -> bool:
        for process in self.processes:
            process.join()
        return True


def spawn(
    fn: Callable[..., Any],
    args: tuple = (),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
) -> ProcessContext | None:
    """Run ``fn(i, *args)`` as ranks 0..nprocs-1 on the simulated machine."""
    nprocs = check_world_size(nprocs, current_context(), what="nprocs")
    args = _as_args(args, "mp.spawn: args")
    processes = [_Spawned(target=fn, args=(i, *args)) for i in range(nprocs)]
    for process in processes:
        process.start()
    context = ProcessContext(processes)
    if join:
        context.join()
        return None
    return context


_start_method = "spawn"


def set_start_method(method: str, force: bool = False) -> None:
    global _start_method
    _start_method = method


def get_start_method(allow_none: bool = False) -> str:
    return _start_method


def get_context(method: str | None = None) -> Any:
    import sys

    return sys.modules[__name__]
