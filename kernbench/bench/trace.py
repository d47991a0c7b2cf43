"""Export a run's trace as Chrome / Perfetto JSON.

One process per cube (``sip0.cube3``), plus the host and the inter-SIP
interconnect; one thread per component: each PE's matrix and vector engines,
its IPCQ, its kernel programs and collective programs, each memory, M_CPU and
link.  Requests served by one component can overlap in time (flows sharing a
link); they are spread over numbered lanes (``link:... #1``) so that slices on
one thread never partially overlap, as the format requires.  Link utilisation
is a counter track per link.  Engine, IPCQ and link activity comes from a
:class:`TraceCollector` hook, registered on the machine only when the run asked
for a trace (observation off costs nothing).

Traces and run reports are written by :func:`write_json_atomic` as strict JSON
(no bare ``NaN``) through :mod:`kernbench.files`, which never replaces a
special file and leaves no half-written one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernbench.errors import OutputFileError
from kernbench.files import write_text
from kernbench.machine import TraceRow
from kernbench.machine.observe import EngineBusy, LinkBusy, LinkLoad, QueueDepth
from kernbench.topology import names

__all__ = [
    "NON_FINITE",
    "TraceCollector",
    "chrome_trace",
    "json_text",
    "micros",
    "write_json_atomic",
    "place_of",
]

#: How reports spell the floats JSON has no numbers for (read back by ``regress``).
NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}

# Rows whose component is the PE that ran them get a thread per kind.
_PE_KINDS = {"collective": "collectives", "programs": "kernels"}


class TraceCollector:
    """Hook: the link, engine and queue activity a Chrome trace shows beside the rows."""

    def __init__(self) -> None:
        self.link_busy: list[LinkBusy] = []
        self.link_load: list[LinkLoad] = []
        self.engine_busy: list[EngineBusy] = []
        self.queue: list[QueueDepth] = []

    def on_link_busy(self, record: LinkBusy) -> None:
        self.link_busy.append(record)

    def on_link_load(self, record: LinkLoad) -> None:
        self.link_load.append(record)

    def on_engine_busy(self, record: EngineBusy) -> None:
        self.engine_busy.append(record)

    def on_queue(self, record: QueueDepth) -> None:
        self.queue.append(record)

    def rows(self) -> list[TraceRow]:
        """Engine work and IPCQ messages as trace rows (the way requests are shown)."""
        rows = [
            TraceRow(
                -1,
                "engine",
                r.pe,
                names.part_of(r.pe, r.engine),
                r.start_ps,
                r.end_ps,
                0,
                f"{r.flops} FLOP",
            )
            for r in self.engine_busy
        ]
        rows += [
            TraceRow(
                -1,
                "ipcq",
                r.src_pe,
                names.part_of(r.src_pe, "ipcq"),
                r.start_ps,
                r.end_ps,
                r.nbytes,
                f"to {r.dst_pe} (queue {r.depth})",
            )
            for r in self.queue
        ]
        return rows


def place_of(component: str) -> tuple[str, str]:
    """(process, thread) names for a component, link or memory port."""
    source = names.link_source(component)
    if source is not None:
        if source == names.HOST:
            return names.HOST, component
        inside = names.within_cube(source)
        return (inside[0], component) if inside else ("interconnect", component)
    inside = names.within_cube(component)
    if inside is None:
        return component, component
    return inside[0], inside[1] or "noc"


def micros(ps: int) -> float:
    """``ps`` in microseconds, as the trace's ``ts`` and ``dur`` give times.

    The value a viewer that multiplies by 1000 and truncates (Perfetto's JSON
    importer does) reads as ``ps // 1000`` nanoseconds: ``1001000 / 1e6`` is
    stored just below 1.001, which that importer reads as 1000 ns, and a
    slice ending at 1001 ns would then overlap the next on its track.  Such a
    value is nudged up to the next float; every other one is ``ps / 1e6``.
    """
    value = ps / 1e6
    while int(value * 1000.0) < ps // 1000:
        value = math.nextafter(value, math.inf)
    while int(value * 1000.0) > ps // 1000:  # past 2^53 ns or so: a float apart
        value = math.nextafter(value, -math.inf)
    return value


def chrome_trace(
    rows: Iterable[TraceRow],
    *,
    detail: TraceCollector | None = None,
    edges: Sequence[Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict:
    """``{"traceEvents": [...], "displayTimeUnit": "ns"}`` with ts/dur in microseconds."""
    events: list[dict[str, Any]] = []
    pids: dict[str, int] = {}
    tids: dict[tuple[int, str], int] = {}
    lane_ends: dict[tuple[int, str], list[int]] = {}

    def slice_(
        component: str,
        thread_suffix: str,
        name: str,
        cat: str,
        start: int,
        end: int,
        args: dict[str, Any],
    ) -> None:
        process, thread = place_of(component)
        thread = f"{thread} {thread_suffix}".strip()
        pid = pids.setdefault(process, len(pids) + 1)
        ends = lane_ends.setdefault((pid, thread), [])
        lane = next((i for i, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        label = thread if lane == 0 else f"{thread} #{lane}"
        tid = tids.setdefault((pid, label), len(tids) + 1)
        events.append(
            {
                "name": name,
                "cat": cat,
                "ph": "X",
                "ts": micros(start),
                "dur": micros(end - start),
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )

    timeline: list[tuple[int, int, str, Any]] = []
    for row in [*rows, *(detail.rows() if detail else ())]:
        timeline.append((row.start_ps, row.end_ps, "row", row))
    for span in detail.link_busy if detail else ():
        timeline.append((span.start_ps, span.end_ps, "flow", span))
    timeline.sort(key=lambda item: (item[0], -item[1], item[2]))
    for start, end, kind, item in timeline:
        if kind == "row":
            row = item
            suffix = _PE_KINDS.get(row.kind, "")
            slice_(
                row.dst,
                suffix,
                f"{row.kind} {row.tag}".strip(),
                row.kind,
                start,
                end,
                {"src": row.src, "dst": row.dst, "bytes": row.nbytes, "id": row.request_id},
            )
        else:
            edge = edges[item.edge]
            slice_(
                edge.name,
                "",
                f"flow {item.nbytes}B",
                "link",
                start,
                end,
                {"bytes": item.nbytes, "class": edge.link_class},
            )
    for load in detail.link_load if detail else ():
        edge = edges[load.edge]
        process, _ = place_of(edge.name)
        pid = pids.setdefault(process, len(pids) + 1)
        events.append(
            {
                "name": f"utilisation {edge.name}",
                "ph": "C",
                "ts": micros(load.time_ps),
                "pid": pid,
                "args": {"utilisation": round(load.utilisation, 6)},
            }
        )
    meta = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}
        for name, pid in pids.items()
    ] + [
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        for (pid, name), tid in tids.items()
    ]
    trace = {"traceEvents": meta + events, "displayTimeUnit": "ns"}
    if metadata:
        trace["metadata"] = metadata
    return trace


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float spelt as a string and NumPy values made plain."""
    if isinstance(value, float):
        return value if math.isfinite(value) else NON_FINITE[str(value)]
    if isinstance(value, dict):
        return {_finite(key): _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    if isinstance(value, np.generic | np.ndarray):
        return _finite(value.tolist())
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(
        f"a value of type {type(value).__name__} is not JSON "
        "(results hold numbers, text, booleans, lists and dicts)"
    )


def json_text(data: Any) -> str:
    """``data`` as strict JSON (RFC 8259), as reports and traces are written.

    ``json.dumps`` would write NaN and infinities as the bare words ``NaN`` and
    ``Infinity``, which JSON does not have; they are written as the strings
    ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` instead (``allow_nan=False``
    holds every writer to it), and NumPy scalars and arrays as plain numbers
    and lists.  A value JSON cannot hold raises ``TypeError``; nesting deeper
    than Python's recursion limit raises ``RecursionError``.
    """
    try:
        return json.dumps(data, indent=1, allow_nan=False, default=_plain)
    except ValueError:  # a non-finite float somewhere: spell it out, then encode again
        return json.dumps(_finite(data), indent=1, allow_nan=False, default=_plain)


def write_json_atomic(path: str | Path, data: Any, *, what: str = "JSON output") -> None:
    """:func:`json_text` of ``data`` written with :func:`kernbench.files.write_text`.

    A value JSON cannot hold is an :class:`~kernbench.errors.OutputFileError`
    naming the file, and nothing is written.
    """
    try:
        text = json_text(data)
    except (TypeError, RecursionError) as exc:
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise OutputFileError(f"cannot write {what}: {reason}", path=str(path)) from None
    write_text(path, text, what=what)
