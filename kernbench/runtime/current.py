"""The context bench scripts run against, without passing it around.

``kernbench run`` (and ``kernbench.simulate``) install a context with
:func:`use_context`; a script run directly with ``python`` gets one built from
``$KERNBENCH_TOPOLOGY`` (a path or a bundled machine's name; default: the
bundled ``default``) and
``$KERNBENCH_TIMING_ONLY`` (``1`` for timing-only mode).
"""

from __future__ import annotations

import linecache
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernbench import limit_blas_threads
from kernbench.errors import ForeignThreadError, user_frame
from kernbench.runtime.context import RuntimeContext
from kernbench.topology import resolve_topology_path

__all__ = ["current_context", "use_context", "default_topology_path", "refuse_foreign_thread"]

_ACTIVE: list[RuntimeContext] = []
_OWNERS: list[int] = []  # the thread each active context was installed on


def default_topology_path() -> Path:
    """The topology used when none is given: ``$KERNBENCH_TOPOLOGY`` or the bundled default."""
    configured = os.environ.get("KERNBENCH_TOPOLOGY")
    return resolve_topology_path(configured or "default")


def current_context() -> RuntimeContext:
    """The active context; the first call outside a runner creates one from the environment.

    While a runner has a context installed, only its own thread may use it: the
    simulator is one clock stepped by one thread (see :func:`refuse_foreign_thread`).
    """
    if _OWNERS:
        refuse_foreign_thread(_OWNERS[-1])
    if not _ACTIVE:
        limit_blas_threads()
        timing_only = os.environ.get("KERNBENCH_TIMING_ONLY", "") not in ("", "0")
        _ACTIVE.append(RuntimeContext(default_topology_path(), timing_only=timing_only))
    return _ACTIVE[-1]


@contextmanager
def use_context(ctx: RuntimeContext) -> Iterator[RuntimeContext]:
    """Make ``ctx`` the current context inside the ``with`` block."""
    _ACTIVE.append(ctx)
    _OWNERS.append(threading.get_ident())
    try:
        yield ctx
    finally:
        _ACTIVE.remove(ctx)
        _OWNERS.pop()


def refuse_foreign_thread(owner: int) -> None:
    """Raise :class:`~kernbench.errors.ForeignThreadError` unless the caller runs on the
    thread ``owner`` (a ``threading.get_ident()``), naming the user's line that asked.

    The ranks are greenlets of one thread, and the machine's clock is stepped by it
    alone: a ``threading.Thread`` a rank starts would step it behind the ranks' backs
    (or find no rank to wait as), so its simulated work is refused where it is asked for.
    """
    if threading.get_ident() == owner:
        return
    frame, _ = user_frame()
    where = ""
    if frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno).strip()
        where = f" at {code.co_filename}:{frame.f_lineno} in {code.co_name}"
        where += f" ({line})" if line else ""
    raise ForeignThreadError(
        f"simulated work was asked for from thread {threading.current_thread().name!r}{where}; "
        "simulated work must run on the rank's own thread (the one main() or run() runs "
        "on): call it from the rank's code, and keep other threads to work that does not "
        "touch the simulated machine"
    )
