"""Export a run's trace as Chrome / Perfetto JSON.

One process per cube (``sip0.cube3``), plus the host and the inter-SIP
interconnect; one thread per component: each PE's matrix and vector engines,
its IPCQ, its kernel programs and collective programs, each memory, M_CPU and
link.  Requests served by one component can overlap in time (flows sharing a
link); they are spread over numbered lanes (``link:... #1``) so that slices on
one thread never partially overlap, as the format requires.  Link utilisation
is a counter track per link.  Engine, IPCQ and link activity is recorded only
when the run asked for a trace (``Fabric.enable_detail``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kernbench.fabric import TraceRow

__all__ = ["chrome_trace", "write_json_atomic", "write_text_atomic", "place_of"]

# Rows whose component is the PE that ran them get a thread per kind.
_PE_KINDS = {"collective": "collectives", "programs": "kernels"}


def place_of(component: str) -> tuple[str, str]:
    """(process, thread) names for a component, link or memory port."""
    if component.startswith(("link:", "port:")):
        kind, _, ends = component.partition(":")
        source = ends.split("->", 1)[0]
        if source == "host":
            return "host", component
        parts = source.split(".")
        if len(parts) >= 2 and parts[1].startswith("cube"):
            return f"{parts[0]}.{parts[1]}", component
        return "interconnect", component
    parts = component.split(".")
    if len(parts) >= 2 and parts[0].startswith("sip") and parts[1].startswith("cube"):
        return f"{parts[0]}.{parts[1]}", ".".join(parts[2:]) or "noc"
    return component, component


def chrome_trace(
    rows: Iterable[TraceRow],
    *,
    link_log: Sequence[tuple] | None = None,
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
                "ts": start / 1e6,
                "dur": (end - start) / 1e6,
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )

    timeline: list[tuple[int, int, str, Any]] = []
    for row in rows:
        timeline.append((row.start_ps, row.end_ps, "row", row))
    for entry in link_log or ():
        if entry[0] == "flow":
            timeline.append((entry[2], entry[3], "flow", entry))
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
            edge = edges[item[1]]
            slice_(
                edge.name,
                "",
                f"flow {item[4]}B",
                "link",
                start,
                end,
                {"bytes": item[4], "class": edge.link_class},
            )
    for entry in link_log or ():
        if entry[0] == "util":
            edge = edges[entry[1]]
            process, _ = place_of(edge.name)
            pid = pids.setdefault(process, len(pids) + 1)
            events.append(
                {
                    "name": f"utilisation {edge.name}",
                    "ph": "C",
                    "ts": entry[2] / 1e6,
                    "pid": pid,
                    "args": {"utilisation": round(entry[3], 6)},
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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename: never half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes files private; results are not
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON atomically (temporary file, then rename)."""
    write_text_atomic(path, json.dumps(data, indent=1))
