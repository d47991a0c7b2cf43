"""Compare bench results against a baseline: slower, faster, missing, wrong values.

Inputs are *results files*: run reports written by ``kernbench run --report``
(their ``results`` rows, each with the report's topology added), sweep
summaries (their ``rows``) and CSV files (``--csv`` or a sweep's
``results.csv``).  :func:`load_rows` reads any of them; :func:`compare` matches
rows point by point on their key columns and classifies every point.

Key columns are the columns that say *which* point a row is (op, size_B,
algorithm, topology, ...).  By default they are every column present on both
sides that is not a measurement: metric columns (names ending in ``_us``,
``_ps``, ``_ms``, ``_s``, ``_GBps``), value columns (``checked``,
``values_digest``, ``error``), provenance (``kernbench_version``,
``topology_digest``) and columns holding fractional numbers (measured rates
such as ``gbps``) are left out.

A point's simulated time is its ``time_us``, else ``simulated_time_ps``, else
``elapsed_ps``.  Slower by more than the relative tolerance is a regression,
faster by more is an improvement.  ``checked`` going from true to false, a
different ``values_digest``, a new ``error`` and a point missing from the
current results are regressions too; a point only in the current results is new.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernbench.errors import ConfigError

__all__ = [
    "METRIC_SUFFIXES",
    "TIME_COLUMNS",
    "Comparison",
    "PointResult",
    "compare",
    "format_comparison",
    "key_columns",
    "load_report",
    "load_rows",
    "parse_tolerance",
    "provenance_notes",
]

METRIC_SUFFIXES = ("_us", "_ps", "_ms", "_s", "_GBps")
TIME_COLUMNS = ("time_us", "simulated_time_ps", "elapsed_ps")
VALUE_COLUMNS = frozenset({"checked", "values_digest", "error"})
PROVENANCE_COLUMNS = frozenset({"kernbench_version", "topology_digest", "script_sha256"})

REGRESSION = "regression"
IMPROVEMENT = "improvement"
SAME = "ok"
MISSING = "missing"
NEW = "new"


# --- reading results files ---------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def _check_exists(path: Path) -> None:
    if not path.is_file():
        raise ConfigError("no such file", source=str(path))


def _is_report(document: Any) -> bool:
    return isinstance(document, dict) and "simulated_time_ps" in document and "topology" in document


def _is_summary(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("rows"), list)


def load_report(path: str | Path) -> dict[str, Any]:
    """A run report written by ``kernbench run --report``; anything else is an error."""
    path = Path(path)
    _check_exists(path)
    document = _read_json(path)
    if not _is_report(document):
        raise ConfigError(
            "not a run report (a JSON object with 'topology' and 'simulated_time_ps', "
            "as written by kernbench run --report)",
            source=str(path),
        )
    return document


def _cell(text: str) -> Any:
    """A CSV cell as the value JSON would have held: bool, int, float or text."""
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _csv_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames:
            raise ConfigError("CSV file has no header row", source=str(path))
        return [
            {key: _cell(value) for key, value in row.items() if key and value not in ("", None)}
            for row in reader
        ]


def _run_row(report: dict[str, Any]) -> dict[str, Any]:
    return {
        "row": "run",
        "topology": report["topology"],
        "world_size": report.get("world_size"),
        "timing_only": report.get("timing_only"),
        "simulated_time_ps": report["simulated_time_ps"],
    }


def load_rows(path: str | Path, *, include_run: bool = False) -> list[dict[str, Any]]:
    """The result rows of a run report, a sweep summary or a CSV file.

    A report's rows get its topology as a ``topology`` column (unless a row has
    its own).  With ``include_run``, a report also gives one ``row="run"`` row
    holding the whole run's ``simulated_time_ps``, so that a report without
    result rows can still be compared.  A file that is none of these, or that
    holds no rows, is a :class:`~kernbench.errors.ConfigError` naming it.
    """
    path = Path(path)
    _check_exists(path)
    document = _read_json(path)
    if _is_report(document):
        rows = [
            {"topology": document["topology"], **row}
            for row in document.get("results", [])
            if isinstance(row, dict)
        ]
        if include_run:
            rows.append(_run_row(document))
    elif _is_summary(document):
        rows = [row for row in document["rows"] if isinstance(row, dict)]
    elif document is None and path.suffix.lower() == ".csv":
        rows = _csv_rows(path)
    else:
        what = "JSON, but neither" if document is not None else "neither"
        raise ConfigError(
            f"{what} a run report (kernbench run --report), a sweep summary "
            "(summary.json with 'rows') nor a .csv file of result rows",
            source=str(path),
        )
    if not rows:
        raise ConfigError(
            "holds no result rows (a report has them only when the bench's main() "
            "returns a list of dicts)",
            source=str(path),
        )
    return rows


_PROVENANCE = {
    "script_sha256": "the script changed",
    "script_args": "the script's arguments differ",
    "topology_digest": "the topology file changed",
    "overrides": "the --set overrides differ",
    "timing_only": "one run is timing-only",
    "kernbench_version": "the KernBench version differs",
}


def provenance_notes(baseline: str | Path, current: str | Path) -> list[str]:
    """Why two run reports may differ besides the simulator: script, topology, flags.

    Empty unless both files are run reports with metadata.
    """
    documents = [_read_json(Path(p)) if Path(p).is_file() else None for p in (baseline, current)]
    if not all(_is_report(d) for d in documents):
        return []
    before, after = (d.get("metadata", {}) for d in documents)
    return [
        f"{why}: {key} {before[key]!r} -> {after[key]!r}"
        for key, why in _PROVENANCE.items()
        if key in before and key in after and before[key] != after[key]
    ]


# --- tolerance -----------------------------------------------------------------


def parse_tolerance(value: str | float) -> float:
    """``"2%"`` or ``0.02`` -> 0.02; a bare number must be a fraction in [0, 1]."""
    text = str(value).strip()
    percent = text.endswith("%")
    try:
        number = float(text[:-1] if percent else text)
    except ValueError:
        number = math.nan
    if percent:
        number /= 100
    if not math.isfinite(number) or number < 0 or (not percent and number > 1):
        raise ConfigError(
            f"--tolerance {value!r} is not a relative tolerance; write a percentage "
            "such as '2%' or a fraction such as 0.02"
        )
    return number


# --- comparing ---------------------------------------------------------------------


def _is_metric(column: str) -> bool:
    return column.endswith(METRIC_SUFFIXES)


def key_columns(
    baseline_rows: Iterable[dict[str, Any]], current_rows: Iterable[dict[str, Any]]
) -> list[str]:
    """The default key columns: non-measurement columns present on both sides."""

    def candidates(rows: Iterable[dict[str, Any]]) -> dict[str, None]:
        columns: dict[str, None] = {}
        fractional: set[str] = set()
        for row in rows:
            for column, value in row.items():
                columns.setdefault(column)
                if isinstance(value, float) and not value.is_integer():
                    fractional.add(column)
        excluded = VALUE_COLUMNS | PROVENANCE_COLUMNS | fractional
        return {c: None for c in columns if c not in excluded and not _is_metric(c)}

    current = candidates(current_rows)
    return [column for column in candidates(baseline_rows) if column in current]


def _hashable(value: Any) -> Any:
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _index(rows: Iterable[dict[str, Any]], keys: Sequence[str]) -> dict[tuple, dict[str, Any]]:
    """Rows by key; repeated keys are told apart by their order of appearance."""
    seen: dict[tuple, int] = defaultdict(int)
    index = {}
    for row in rows:
        key = tuple(_hashable(row.get(column)) for column in keys)
        index[(*key, seen[key])] = row
        seen[key] += 1
    return index


def _time_column(baseline: dict[str, Any], current: dict[str, Any]) -> str | None:
    for column in TIME_COLUMNS:
        if isinstance(baseline.get(column), int | float) and isinstance(
            current.get(column), int | float
        ):
            return column
    return None


@dataclass(frozen=True)
class PointResult:
    """One point of the comparison: its key, the time on each side and the verdict.

    ``status`` is ``"regression"``, ``"improvement"``, ``"ok"``, ``"missing"``
    (in the baseline only; also a regression) or ``"new"`` (current only).
    ``change`` is the relative change of the time, ``None`` when not compared.
    """

    key: dict[str, Any]
    status: str
    metric: str | None = None
    baseline: float | None = None
    current: float | None = None
    change: float | None = None
    reasons: tuple[str, ...] = ()

    @property
    def is_regression(self) -> bool:
        return self.status in (REGRESSION, MISSING)


@dataclass(frozen=True)
class Comparison:
    """Every point compared, with the key columns and tolerance used."""

    keys: tuple[str, ...]
    tolerance: float
    points: tuple[PointResult, ...] = field(default=())

    def with_status(self, *statuses: str) -> list[PointResult]:
        return [p for p in self.points if p.status in statuses]

    @property
    def regressions(self) -> list[PointResult]:
        """Slower points, wrong values and points missing from the current results."""
        return [p for p in self.points if p.is_regression]

    @property
    def improvements(self) -> list[PointResult]:
        return self.with_status(IMPROVEMENT)

    @property
    def missing(self) -> list[PointResult]:
        """Points of the baseline that the current results lack."""
        return self.with_status(MISSING)

    @property
    def new(self) -> list[PointResult]:
        """Points of the current results that the baseline lacks."""
        return self.with_status(NEW)

    @property
    def has_regression(self) -> bool:
        return bool(self.regressions)

    @property
    def has_change(self) -> bool:
        return any(p.status != SAME for p in self.points)


def _compare_point(
    key: dict[str, Any], baseline: dict[str, Any], current: dict[str, Any], tolerance: float
) -> PointResult:
    problems = []
    if baseline.get("checked") is True and current.get("checked") is not True:
        problems.append("values no longer checked")
    if (
        "values_digest" in baseline
        and "values_digest" in current
        and baseline["values_digest"] != current["values_digest"]
    ):
        problems.append("values differ")
    if current.get("error") and not baseline.get("error"):
        problems.append(f"error: {current['error']}")
    metric = _time_column(baseline, current)
    before = after = change = None
    status = REGRESSION if problems else SAME
    if metric is not None:
        before, after = baseline[metric], current[metric]
        if before == after:
            change = 0.0
        else:
            change = (after - before) / before if before else math.copysign(math.inf, after)
        if change > tolerance:
            status = REGRESSION
            problems.insert(0, "slower")
        elif change < -tolerance and not problems:
            status = IMPROVEMENT
    return PointResult(key, status, metric, before, after, change, tuple(problems))


def compare(
    baseline_rows: Sequence[dict[str, Any]],
    current_rows: Sequence[dict[str, Any]],
    *,
    tolerance: float = 0.02,
    keys: Sequence[str] | None = None,
) -> Comparison:
    """Match rows on ``keys`` (default: :func:`key_columns`) and classify every point."""
    if not isinstance(tolerance, int | float) or not tolerance >= 0:
        raise ConfigError(f"tolerance must be a number >= 0, got {tolerance!r}")
    keys = tuple(keys) if keys is not None else tuple(key_columns(baseline_rows, current_rows))
    if not keys:
        raise ConfigError(
            "no key column is common to the baseline and the current rows; name them with --key"
        )
    before, after = _index(baseline_rows, keys), _index(current_rows, keys)
    points = []
    for index_key, row in before.items():
        key = dict(zip(keys, index_key, strict=False))
        if index_key not in after:
            points.append(PointResult(key, MISSING))
        else:
            points.append(_compare_point(key, row, after[index_key], tolerance))
    for index_key in (k for k in after if k not in before):
        key = dict(zip(keys, index_key, strict=False))
        points.append(PointResult(key, NEW))
    return Comparison(keys, float(tolerance), tuple(points))


# --- the table ------------------------------------------------------------------------


_STATUS_TEXT = {MISSING: "regression (missing in current)", NEW: "new (not in baseline)"}


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def format_comparison(comparison: Comparison) -> str:
    """A table: varying key columns, metric, baseline, current, change %, status."""
    points = comparison.points
    varying = [k for k in comparison.keys if len({_show(p.key[k]) for p in points}) > 1]
    common = [
        f"{k}={_show(points[0].key[k])}"
        for k in comparison.keys
        if k not in varying and points and points[0].key[k] is not None
    ]
    header = [*varying, "metric", "baseline", "current", "change", "status"]
    body = []
    for p in points:
        change = "-" if p.change is None else f"{p.change:+.2%}"
        status = _STATUS_TEXT.get(p.status, p.status)
        if p.reasons:
            status += f" ({'; '.join(p.reasons)})"
        body.append(
            [*(_show(p.key[k]) for k in varying), _show(p.metric)]
            + [_show(p.baseline), _show(p.current), change, status]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = []
    if common:
        lines.append("common: " + ", ".join(common))
    for row in [header, *body]:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append("  ".join(cells).rstrip())
    lines.append(
        f"{len(points)} points, tolerance {comparison.tolerance:.4g}: "
        f"{len(comparison.regressions)} regressions "
        f"({len(comparison.missing)} missing in current), "
        f"{len(comparison.improvements)} improvements, {len(comparison.new)} new"
    )
    return "\n".join(lines)
