"""Export a run's trace as Chrome / Perfetto JSON.

One process per SIP (plus the host), one thread per component a request was
served by.  Requests served by one component can overlap in time; they are
spread over numbered lanes (``sip0.cube0.hbm0 #1``) so that slices on one
thread never partially overlap, as the format requires.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernbench.fabric import TraceRow

__all__ = ["chrome_trace", "write_json_atomic", "write_text_atomic"]


def _process_of(name: str) -> str:
    return name.split(".", 1)[0] if name.startswith("sip") else name


def chrome_trace(rows: Iterable[TraceRow], *, metadata: dict[str, Any] | None = None) -> dict:
    """``{"traceEvents": [...], "displayTimeUnit": "ns"}`` with ts/dur in microseconds."""
    events: list[dict[str, Any]] = []
    pids: dict[str, int] = {}
    tids: dict[tuple[int, str], int] = {}
    lane_ends: dict[tuple[int, str], list[int]] = {}
    for row in sorted(rows, key=lambda r: (r.start_ps, r.request_id)):
        component = row.dst if row.kind != "mem_read" else row.dst
        process = _process_of(component)
        pid = pids.setdefault(process, len(pids) + 1)
        ends = lane_ends.setdefault((pid, component), [])
        lane = next((i for i, end in enumerate(ends) if end <= row.start_ps), len(ends))
        if lane == len(ends):
            ends.append(row.end_ps)
        else:
            ends[lane] = row.end_ps
        thread = component if lane == 0 else f"{component} #{lane}"
        tid = tids.setdefault((pid, thread), len(tids) + 1)
        events.append(
            {
                "name": f"{row.kind} {row.tag}".strip(),
                "cat": row.kind,
                "ph": "X",
                "ts": row.start_ps / 1e6,
                "dur": (row.end_ps - row.start_ps) / 1e6,
                "pid": pid,
                "tid": tid,
                "args": {"src": row.src, "dst": row.dst, "bytes": row.nbytes, "id": row.request_id},
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


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename: never half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON atomically (temporary file, then rename)."""
    write_text_atomic(path, json.dumps(data, indent=1))
