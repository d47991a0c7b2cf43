"""The context bench scripts run against, without passing it around.

``kernbench run`` (and ``kernbench.simulate``) install a context with
:func:`use_context`; a script run directly with ``python`` gets one built from
``$KERNBENCH_TOPOLOGY`` (a path or a bundled machine's name; default: the
bundled ``default``) and
``$KERNBENCH_TIMING_ONLY`` (``1`` for timing-only mode).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernbench import limit_blas_threads
from kernbench.runtime.context import RuntimeContext
from kernbench.topology import resolve_topology_path

__all__ = ["current_context", "use_context", "default_topology_path"]

_ACTIVE: list[RuntimeContext] = []


def default_topology_path() -> Path:
    """The topology used when none is given: ``$KERNBENCH_TOPOLOGY`` or the bundled default."""
    configured = os.environ.get("KERNBENCH_TOPOLOGY")
    return resolve_topology_path(configured or "default")


def current_context() -> RuntimeContext:
    """The active context; the first call outside a runner creates one from the environment."""
    if not _ACTIVE:
        limit_blas_threads()
        timing_only = os.environ.get("KERNBENCH_TIMING_ONLY", "") not in ("", "0")
        _ACTIVE.append(RuntimeContext(default_topology_path(), timing_only=timing_only))
    return _ACTIVE[-1]


@contextmanager
def use_context(ctx: RuntimeContext) -> Iterator[RuntimeContext]:
    """Make ``ctx`` the current context inside the ``with`` block."""
    _ACTIVE.append(ctx)
    try:
        yield ctx
    finally:
        _ACTIVE.remove(ctx)
