"""A sweep point's record: made from how its process ended, written as JSON, checked when read back.

A record is ``{"point": {...}, "status": "ok" | "failed", ...}``: an ok record
has the run's ``report``; a failed one an ``error`` line (and ``traceback``
when the error is a bug rather than a KernBench error).  Every record also
has how the point's process ended (``exit_status`` or ``signal``), its
``wall_s`` and the last :data:`~kernbench.bench.executors.TAIL_CHARS`
characters of its ``stdout`` and ``stderr``.

On resume a stored record counts only if it is whole and describes this very
point (same id and :data:`IDENTITY_KEYS`), and an ok record only if the bench,
the topology and the tune table a ``--set ccl.tune_table`` names still have the
contents it ran with (``bench_sha256``, ``topology_digest``,
``tune_table_sha256``); anything else is run again.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench import files
from kernbench.bench.executors import Outcome
from kernbench.errors import KernBenchError, OutputFileError, shown

__all__ = [
    "IDENTITY_KEYS",
    "Stored",
    "point_record",
    "stored_record",
    "not_regular",
    "move_aside",
    "remove_stale_temporaries",
]

#: What a point's id is the hash of: what the run receives.
IDENTITY_KEYS = (
    "bench_path",
    "topology_path",
    "overrides",
    "script_args",
    "world_size",
    "timing_only",
    "seed",
)
# A temporary file of an atomic write older than this was left by a killed driver.
_TEMPORARY_AGE_S = 60.0
_TEMPORARY = re.compile(r"\.[0-9a-f]{16}\.json\..+")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def point_record(point: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    """The record of a point whose process ended with ``outcome``."""
    value = outcome.value if outcome.returned else None
    record: dict[str, Any] = {"point": point}
    problem = _result_problem(value) if outcome.returned else None
    if outcome.returned and problem is None:
        record.update(value)
    else:
        if outcome.returned:
            error = f"the point's run returned something that is not a result (it {problem})"
        else:
            error = "the point's " + outcome.error.removeprefix("the ")
        last = _last_line(outcome.stderr)
        if outcome.exit_status not in (None, 0) and last:
            error += f": {shown(last, 500)}"
        elif outcome.exit_status == 0:
            error += " (the bench called sys.exit, or printed --help)"
        record.update(status="failed", error=error)
    record.update(
        exit_status=outcome.exit_status,
        signal=outcome.signal,
        wall_s=outcome.wall_s,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
    )
    return record


def _result_problem(value: Any) -> str | None:
    """Why ``value`` is not a run's result (``{"status", "report" | "error"}``), or None."""
    if not isinstance(value, dict):
        return "is not a JSON object"
    status = value.get("status")
    if status == "ok":
        return _report_problem(value.get("report"))
    if status == "failed":
        return None if isinstance(value.get("error"), str) else "has no error message"
    return f"has an unknown status {shown(repr(status), 60)}"


def _report_problem(report: Any) -> str | None:
    if not isinstance(report, dict):
        return "has no report"
    rows = report.get("results")
    if rows:
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            return "has results that are not rows"
        return None
    time_ps = report.get("simulated_time_ps")
    if not isinstance(time_ps, int) or isinstance(time_ps, bool):
        return "has no simulated time"
    return None


@dataclass(frozen=True)
class Stored:
    """What a point's file on disk holds.

    ``record`` is a valid record of this point (ok or failed), else None;
    ``problem`` says why the file is unusable (it starts with the path);
    ``stale`` why a valid ok record no longer counts.
    """

    record: dict[str, Any] | None = None
    problem: str = ""
    stale: str = ""


def stored_record(path: Path, point: dict[str, Any]) -> Stored:
    """Read and check ``path``, the file of ``point`` (missing: an empty :class:`Stored`)."""
    if not os.path.lexists(path):
        return Stored()
    try:
        text = files.read_text(path, what="point file", limit=files.RESULTS_LIMIT)
        record = json.loads(text)
    except KernBenchError as exc:
        return Stored(problem=str(exc))
    except (ValueError, RecursionError) as exc:
        return Stored(problem=f"{path}: not JSON ({shown(str(exc), 120)})")
    problem = _record_problem(record, point)
    if problem:
        return Stored(problem=f"{path}: {problem}")
    stored_point = record["point"]
    if record["status"] == "ok":
        if stored_point.get("bench_sha256") != point["bench_sha256"]:
            return Stored(record, stale="the bench changed since this point ran")
        if stored_point.get("topology_digest") != point["topology_digest"]:
            return Stored(record, stale="the topology changed since this point ran")
        if stored_point.get("tune_table_sha256") != point.get("tune_table_sha256"):
            return Stored(record, stale="the tune table changed since this point ran")
    return Stored(record)


def _record_problem(record: Any, point: dict[str, Any]) -> str | None:
    if not isinstance(record, dict):
        return "is not a point record (not a JSON object)"
    stored_point = record.get("point")
    if not isinstance(stored_point, dict):
        return "is not a point record (no point description)"
    if stored_point.get("id") != point["id"]:
        return f"holds the record of another point ({shown(repr(stored_point.get('id')), 40)})"
    for key in IDENTITY_KEYS:
        if stored_point.get(key) != point[key]:
            return f"describes another point ({key} differs)"
    problem = _result_problem(record)
    return f"is not a whole point record (it {problem})" if problem else None


def not_regular(path: Path) -> bool:
    """Something other than a regular file (a directory, symlink, FIFO...) is at ``path``."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False
    except OSError:
        return True


def move_aside(path: Path) -> Path:
    """Rename what is at ``path`` (never followed) so that a record can be written there."""
    aside = path.with_name(f"{path.name}.invalid-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, aside)
    except OSError as exc:
        raise OutputFileError(
            f"is not a regular file and cannot be moved aside ({exc.strerror}); remove it",
            path=str(path),
        ) from None
    return aside


def remove_stale_temporaries(points_dir: Path) -> None:
    """Remove what a killed driver or point left of atomic writes in ``points_dir`` (hidden
    temporaries of point files, or of traces in OUTPUT/traces)."""
    now = time.time()
    try:
        entries = list(os.scandir(points_dir))
    except OSError:
        return
    for entry in entries:
        if not _TEMPORARY.fullmatch(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > _TEMPORARY_AGE_S:
                os.unlink(entry.path)
        except OSError:
            continue
