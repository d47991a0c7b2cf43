"""Observation: typed records a backend emits to the hooks registered on it.

Nothing is recorded for nobody: a backend emits a kind of record only when
some hook takes it (an empty list check on the hot path), so observation off
costs nothing.  A hook is any object with one or more of the methods
``on_row``, ``on_flow``, ``on_link_busy``, ``on_link_load``,
``on_engine_busy``, ``on_queue`` and ``on_refused``; :meth:`Observers.add`
registers each one it has.  The run report's byte counts and busiest component, its trace digest,
and the Chrome/Perfetto trace are such hooks (kernbench.bench).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernbench.machine.messages import TraceRow

__all__ = [
    "FlowStarted",
    "LinkBusy",
    "LinkLoad",
    "EngineBusy",
    "QueueDepth",
    "CollectiveRefused",
    "Observers",
    "RowRecorder",
    "LinkBytes",
]


@dataclass(frozen=True, slots=True)
class FlowStarted:
    """Bytes set off over a route of links (``nbytes`` counts every copy of a weighted flow)."""

    route: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True, slots=True)
class LinkBusy:
    """A flow crossed link ``edge`` from ``start_ps`` to ``end_ps`` (one record per copy)."""

    edge: int
    start_ps: int
    end_ps: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class LinkLoad:
    """From ``time_ps`` on, link ``edge`` runs at ``utilisation`` (0 to 1) of its bandwidth."""

    edge: int
    time_ps: int
    utilisation: float


@dataclass(frozen=True, slots=True)
class EngineBusy:
    """A PE's ``engine`` (matrix or vector) worked on ``flops`` from ``start_ps`` to ``end_ps``."""

    pe: str
    engine: str
    start_ps: int
    end_ps: int
    flops: int


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """An IPCQ message ``src_pe`` -> ``dst_pe`` sent over ``start_ps``-``end_ps``; after it the
    receiver's queue from ``src_pe`` holds ``depth`` messages."""

    src_pe: str
    dst_pe: str
    start_ps: int
    end_ps: int
    nbytes: int
    depth: int


@dataclass(frozen=True, slots=True)
class CollectiveRefused:
    """A machine that prices collectives step-wide runs this one message by message:
    ``op`` with configuration ``config`` over ``ranks`` ranks (its widest lane), and why."""

    op: str
    config: str
    ranks: int
    reason: str


_KINDS = ("row", "flow", "link_busy", "link_load", "engine_busy", "queue", "refused")


class Observers:
    """The hooks registered on one machine, one list per kind of record."""

    __slots__ = _KINDS

    def __init__(self) -> None:
        for kind in _KINDS:
            setattr(self, kind, [])

    def add(self, hook: Any) -> None:
        """Register every ``on_<kind>`` method ``hook`` has; a hook with none is an error."""
        found = False
        for kind in _KINDS:
            method = getattr(hook, f"on_{kind}", None)
            if callable(method):
                getattr(self, kind).append(method)
                found = True
        if not found:
            raise TypeError(
                f"{type(hook).__name__} has no on_<kind> method; kinds: {', '.join(_KINDS)}"
            )

    def remove(self, hook: Any) -> None:
        for kind in _KINDS:
            method = getattr(hook, f"on_{kind}", None)
            hooks: list[Callable[..., None]] = getattr(self, kind)
            if method is not None and method in hooks:
                hooks.remove(method)


class RowRecorder:
    """Keeps every finished request and component work row, in order (the run's trace)."""

    def __init__(self) -> None:
        self.rows: list[TraceRow] = []

    def on_row(self, row: TraceRow) -> None:
        self.rows.append(row)


class LinkBytes:
    """Bytes every link has carried (the report's link classes and busiest component)."""

    def __init__(self, links: int) -> None:
        self.carried = [0] * links

    def on_flow(self, record: FlowStarted) -> None:
        carried = self.carried
        for e in record.route:
            carried[e] += record.nbytes
