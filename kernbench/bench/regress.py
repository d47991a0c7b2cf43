"""Compare bench results against a baseline: slower, faster, missing, wrong values.

Inputs are *results files*: run reports written by ``kernbench run --report``
(their ``results`` rows, each with the report's topology added), sweep
summaries (their ``rows``) and CSV files (``--csv`` or a sweep's
``results.csv``).  :func:`~kernbench.bench.results.load_rows` (also importable
from here) reads any of them; :func:`compare` matches rows point by point on
their key columns and classifies every point.

Key columns are the columns that say *which* point a row is (op, size_B,
algorithm, topology, ...).  By default they are every column present on both
sides that is not a measurement, told by its *name*, never by its values (a
measured count is as whole a number as a size): left out are measured columns,
whose names (in any case, and ignoring a trailing ``_per_<word>``) end in a
unit of time (``_us``, ``_ps``, ``_ns``, ``_ms``, ``_s``), a rate (``bps``:
``gbps``, ``busbw_GBps``; ``flops``: ``tflops``, ``tflops_per_rank``) or one
of :data:`MEASURED_ENDINGS`' words (``speedup``, ``efficiency``, ``_loaded``,
``_stored``); value columns (``checked``, ``values_digest``, ``error``, and
the perf benches' counts of wrong elements, ``wrong`` and
``in_place_wrong``); and provenance (``kernbench_version``,
``topology_digest``, the ``overrides`` and ``seed`` that ``kernbench run
--csv`` writes into every row, and where a row was made: ``topology_file``, a
sweep's ``point_id``, a hash of its paths).  A bench that measures something
named otherwise names its key columns with ``--key`` (ADR 0009).

A point's times are its time columns: names ending in ``_us``, ``_ps``,
``_ns``, ``_ms`` or ``_s`` in any case (``time_us``, ``in_place_time_us``,
``step_us``, ``latency_ns``, ...; not ``wall*``, the simulator's own time, nor
rates such as ``tokens_per_s``).  Any of them slower by more than the
relative tolerance is a regression; the first of ``time_us``,
``simulated_time_ps``, ``elapsed_ps`` (else the first time column) is the
one the table shows, and faster by more on it, with nothing slower, is an
improvement.
``checked`` going from true to false, a different ``values_digest``, more
wrong elements (``wrong``, ``in_place_wrong``) than the baseline had, a new
``error`` and a point missing from the current results are regressions too; a
point only in the current results is new.

Nothing that cannot be compared passes as "ok".  A point is *incomparable*
(counted with the regressions; the CLI exits 2 naming row and column) when a
time column is in one row only, when a time is NaN, infinite, negative or not
a number (reports spell NaN as the string ``"NaN"``, see
:func:`kernbench.bench.trace.json_text`; old reports' bare ``NaN`` reads the
same), when a value column holds a list or an object, or when neither row has
a time and neither failed.  Two rows of one side with the same key, and a
``--key`` that a side does not have, are errors: rows are never paired by
position.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernbench.bench.results import is_report, kind_of, load_report, load_rows, read_document
from kernbench.bench.trace import NON_FINITE
from kernbench.errors import ConfigError, KernBenchError, shown

__all__ = [
    "MEASURED_ENDINGS",
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

TIME_COLUMNS = ("time_us", "simulated_time_ps", "elapsed_ps")
VALUE_COLUMNS = frozenset({"checked", "values_digest", "error"})
#: Counts of elements that differ from the expected answer (perf rows' ``#wrong``).
WRONG_COLUMNS = frozenset({"wrong", "in_place_wrong"})
PROVENANCE_COLUMNS = frozenset(
    {"kernbench_version", "topology_digest", "script_sha256", "topology_file", "point_id"}
)
#: How a run was made, as ``kernbench run --csv`` writes it into every row beside the
#: bench's columns (``run.<name>`` when the bench has a column of that name): provenance,
#: as the same values in a report's metadata are.
RUN_SETTING_COLUMNS = ("overrides", "seed")
TIME_SUFFIXES = ("_us", "_ps", "_ns", "_ms", "_s")
RATE_SUFFIXES = ("per_s", "per_ms", "per_us", "per_ns", "per_ps")
#: How a measured column's name ends (lower case; a trailing ``_per_<word>`` aside):
#: times and rates, FLOP counts, ratios, bytes a kernel moved.  Never a key.
MEASURED_ENDINGS = (*TIME_SUFFIXES, "bps", "flops", "speedup", "efficiency", "_loaded", "_stored")
_PER_SOMETHING = re.compile(r"_per_[a-z0-9]+$")

REGRESSION = "regression"
IMPROVEMENT = "improvement"
SAME = "ok"
MISSING = "missing"
NEW = "new"
INCOMPARABLE = "incomparable"


_PROVENANCE = {
    "script_sha256": "the script changed",
    "script_args": "the script's arguments differ",
    "topology_digest": "the topology file changed",
    "overrides": "the --set overrides differ",
    "seed": "the --seed differs",
    "timing_only": "one run is timing-only",
    "kernbench_version": "the KernBench version differs",
}


def provenance_notes(baseline: str | Path, current: str | Path) -> list[str]:
    """Why two run reports may differ besides the simulator: script, topology, flags.

    Empty unless both files are run reports with metadata, or both CSV files
    written by ``kernbench run --csv`` (each of one run).
    """
    try:
        if all(Path(p).suffix.lower() == ".csv" for p in (baseline, current)):
            before, after = (_csv_run(load_rows(p)) for p in (baseline, current))
        else:
            documents = [read_document(p) for p in (baseline, current)]
            if not all(is_report(d) for d in documents):
                return []
            before, after = (d.get("metadata") for d in documents)
        if not isinstance(before, dict) or not isinstance(after, dict):
            return []
        return [
            f"{why}: {key} {shown(repr(before[key]), 80)} -> {shown(repr(after[key]), 80)}"
            for key, why in _PROVENANCE.items()
            if key in before and key in after and before[key] != after[key]
        ]
    except (KernBenchError, RecursionError):  # notes are extras; load_rows judged the files
        return []


def _csv_run(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The run metadata ``kernbench run --csv`` gave every row, where all rows agree
    (no --set is an empty cell)."""
    columns = dict.fromkeys(column for row in rows for column in row)
    if not {"kernbench_version", "run.kernbench_version"} & set(columns):
        return {}  # not written by kernbench run --csv
    found = {}
    for key in _PROVENANCE:
        column = f"run.{key}" if f"run.{key}" in columns else key
        values = {_hashable(row.get(column, "")) for row in rows}
        if len(values) == 1 and (column in columns or key in RUN_SETTING_COLUMNS):
            found[key] = values.pop()
    return found


def _run_settings(columns: Iterable[str]) -> set[str]:
    """The columns of :data:`RUN_SETTING_COLUMNS` that ``kernbench run --csv`` wrote
    (rows that carry its ``kernbench_version``); a bench's own column of that name stays
    a key."""
    columns = set(columns)
    if not {"kernbench_version", "run.kernbench_version"} & columns:
        return set()
    return {f"run.{c}" if f"run.{c}" in columns else c for c in RUN_SETTING_COLUMNS}


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


def _is_measured(column: str) -> bool:
    """A measurement, by its name (see the module docstring): never part of a key."""
    name = column.lower()
    return name.endswith(MEASURED_ENDINGS) or _PER_SOMETHING.sub("", name).endswith(
        MEASURED_ENDINGS
    )


def _is_value(column: str) -> bool:
    """A column that says whether the values were right: a verdict, not part of a key."""
    return column in VALUE_COLUMNS or column in WRONG_COLUMNS


def _is_provenance(column: str) -> bool:
    return column.removeprefix("run.") in PROVENANCE_COLUMNS


def _is_time(column: str) -> bool:
    """A simulated time: its name ends in a time unit (any case), and it is neither the
    simulator's own wall time nor a rate (``tokens_per_s``; ``time_per_step_us`` is a
    time)."""
    name = column.lower()
    return (
        name.endswith(TIME_SUFFIXES)
        and not name.startswith("wall")
        and not name.endswith(RATE_SUFFIXES)
    )


def _time_columns(before: dict[str, Any], after: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The simulated times both rows hold, the headline (TIME_COLUMNS' first) first; and
    those only one row holds."""
    times = [c for c in dict.fromkeys([*before, *after]) if _is_time(c)]
    shared = [c for c in times if _has_time(before, c) and _has_time(after, c)]
    one_side = [
        c for c in times if c not in shared and (_has_time(before, c) or _has_time(after, c))
    ]
    order = sorted(shared, key=lambda c: TIME_COLUMNS.index(c) if c in TIME_COLUMNS else 99)
    return order, one_side


def key_columns(
    baseline_rows: Iterable[dict[str, Any]], current_rows: Iterable[dict[str, Any]]
) -> list[str]:
    """The default key columns: columns present on both sides whose names do not say
    they are measurements, values or provenance (what the rows hold does not count)."""

    def candidates(rows: Iterable[dict[str, Any]]) -> dict[str, None]:
        columns = dict.fromkeys(column for row in rows for column in row)
        excluded = _run_settings(columns)
        return {
            c: None
            for c in columns
            if c not in excluded
            and not _is_value(c)
            and not _is_measured(c)
            and not _is_provenance(c)
        }

    current = candidates(current_rows)
    return [column for column in candidates(baseline_rows) if column in current]


def _hashable(value: Any) -> Any:
    """A key value as something to match on: 4096.0 is 4096, NaN is "NaN" however written."""
    if isinstance(value, list | dict):
        try:
            return json.dumps(value, sort_keys=True, default=repr)
        except (TypeError, ValueError):
            return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return NON_FINITE[str(value)]
        if value.is_integer():
            return int(value)
    return value


@dataclass(frozen=True)
class PointResult:
    """One point of the comparison: its key, the time on each side and the verdict.

    ``status`` is ``"regression"``, ``"improvement"``, ``"ok"``, ``"missing"``
    (in the baseline only; also a regression), ``"new"`` (current only) or
    ``"incomparable"`` (the rows cannot be compared; ``reasons`` say which row
    and column; also a regression).  ``change`` is the relative change of the
    time, ``None`` when not compared.
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
        return self.status in (REGRESSION, MISSING, INCOMPARABLE)


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
        """Slower points, wrong values, incomparable points and points missing from current."""
        return [p for p in self.points if p.is_regression]

    @property
    def improvements(self) -> list[PointResult]:
        return self.with_status(IMPROVEMENT)

    @property
    def missing(self) -> list[PointResult]:
        """Points of the baseline that the current results lack."""
        return self.with_status(MISSING)

    @property
    def incomparable(self) -> list[PointResult]:
        """Matched points whose rows cannot be compared (see :attr:`PointResult.reasons`)."""
        return self.with_status(INCOMPARABLE)

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


@dataclass(frozen=True)
class _Side:
    """The rows of one side of a comparison and what messages call it."""

    name: str
    rows: Sequence[dict[str, Any]]

    def where(self, number: int) -> str:
        return f"{self.name} row {number + 1}"


def _describe(key: dict[str, Any]) -> str:
    return ", ".join(f"{k}={shown(str(v), 40)}" for k, v in key.items() if v is not None)


def _index(side: _Side, keys: Sequence[str]) -> dict[tuple, int]:
    """Row number by key; two rows with one key make the matching ambiguous: an error."""
    index: dict[tuple, int] = {}
    for number, row in enumerate(side.rows):
        key = tuple(_hashable(row.get(column)) for column in keys)
        if key in index:
            shown_key = _describe(dict(zip(keys, key, strict=True))) or "all empty"
            raise ConfigError(
                f"{side.where(index[key])} and row {number + 1} have the same key "
                f"({shown_key}), so rows cannot be matched; name the columns that tell "
                f"them apart with --key (key columns: {', '.join(keys)})"
            )
        index[key] = number
    return index


def _time_problem(value: Any, column: str, where: str) -> str | None:
    """Why ``value`` cannot be compared as a simulated time, or None when it can."""
    if isinstance(value, str) and value in NON_FINITE.values():
        return f"{column} is {value} in {where}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{column} is {kind_of(value)} in {where}, not a number"
    try:
        number = float(value)
    except OverflowError:
        return f"{column} is too large to compare in {where}"
    if not math.isfinite(number):
        return f"{column} is {NON_FINITE[str(number)]} in {where}"
    if number < 0:
        return f"{column} is negative ({value!r}) in {where}; a time is never below 0"
    return None


def _scalar_problem(row: dict[str, Any], column: str, where: str) -> str | None:
    value = row.get(column)
    if isinstance(value, list | dict):
        return f"{column} is {kind_of(value)} in {where}, where a single value belongs"
    return None


def _wrong_problem(row: dict[str, Any], column: str, where: str) -> str | None:
    """Why ``row``'s count of wrong elements cannot be read, or None when it can."""
    value = row.get(column)
    if value in (None, "", "n/a") or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{column} is {kind_of(value)} in {where}, not a count of wrong elements"
    if not math.isfinite(value) or value < 0 or value != int(value):
        return f"{column} is {value!r} in {where}, not a count of wrong elements (0 or more)"
    return None


def _wrong_count(value: Any) -> int | float | None:
    """A count of wrong elements, or None where none was made (``"n/a"``, missing)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return value


def _more_wrong(before: Any, after: Any) -> bool:
    """Whether the current row found wrong elements the baseline did not have."""
    now = _wrong_count(after)
    if now is None or now <= 0:
        return False
    then = _wrong_count(before)
    return then is None or now > then


def _failed(row: dict[str, Any]) -> bool:
    return row.get("error") not in (None, "", False)


def _has_time(row: dict[str, Any], column: str) -> bool:
    return row.get(column) is not None


def _compare_point(
    key: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
    where: tuple[str, str],
    tolerance: float,
) -> PointResult:
    values = sorted({c for c in (*VALUE_COLUMNS, *before, *after) if _is_value(c)})
    incomparable = [
        problem
        for column in values
        for row, place in ((before, where[0]), (after, where[1]))
        if (problem := _scalar_problem(row, column, place))
    ]
    incomparable += [
        problem
        for column in values
        if column in WRONG_COLUMNS
        for row, place in ((before, where[0]), (after, where[1]))
        if (problem := _wrong_problem(row, column, place))
    ]
    if incomparable:
        return PointResult(key, INCOMPARABLE, reasons=tuple(incomparable))
    problems = []
    if before.get("checked") is True and after.get("checked") is not True:
        problems.append("values no longer checked")
    if (
        "values_digest" in before
        and "values_digest" in after
        and before["values_digest"] != after["values_digest"]
    ):
        problems.append("values differ")
    problems += [
        f"{column} {_show(before.get(column))} -> {_show(after[column])}"
        for column in values
        if column in WRONG_COLUMNS and _more_wrong(before.get(column), after.get(column))
    ]
    if _failed(after) and not _failed(before):
        problems.append(f"error: {shown(str(after['error']), 120)}")
    status = REGRESSION if problems else SAME

    metrics, one_sided = _time_columns(before, after)
    if metrics and one_sided and not (_failed(before) or _failed(after)):
        reasons = tuple(
            f"{c} only in {where[0] if _has_time(before, c) else where[1]}" for c in one_sided
        )
        return PointResult(key, INCOMPARABLE, metrics[0], reasons=reasons)
    if not metrics:
        one_side = [
            f"{column} only in {place}"
            for column in TIME_COLUMNS
            for row, place in ((before, where[0]), (after, where[1]))
            if _has_time(row, column)
        ]
        if _failed(before) or _failed(after):  # a failed point has no time to compare
            if _failed(before) and not _failed(after) and not problems:
                return PointResult(key, IMPROVEMENT, reasons=("error fixed",))
            if _failed(before) and not _failed(after):  # fixed, but the values went wrong
                problems.append("error fixed")
            return PointResult(key, status, reasons=tuple(problems))
        reason = (
            f"{one_side[0]}; the other row has no time column"
            if one_side
            else f"neither {where[0]} nor {where[1]} has a time (a column ending in "
            f"{', '.join(TIME_SUFFIXES)}, e.g. {', '.join(TIME_COLUMNS)})"
        )
        return PointResult(key, INCOMPARABLE, reasons=(reason,))

    bad = [
        problem
        for metric in metrics
        for row, place in ((before, where[0]), (after, where[1]))
        if (problem := _time_problem(row[metric], metric, place))
    ]
    if bad:
        return PointResult(key, INCOMPARABLE, metrics[0], reasons=tuple(bad))
    changes = {metric: _change(before[metric], after[metric]) for metric in metrics}
    headline = metrics[0]
    old, new = before[headline], after[headline]
    if _failed(before) and not _failed(after):  # a failed run's time is not a baseline
        if problems:  # fixed, but the values went wrong
            return PointResult(
                key, REGRESSION, headline, old, new, changes[headline], (*problems, "error fixed")
            )
        return PointResult(
            key, IMPROVEMENT, headline, old, new, changes[headline], ("error fixed",)
        )
    slower = [m for m in metrics if changes[m] > tolerance]
    if slower:
        status = REGRESSION
        problems[:0] = ["slower"] + [f"{m} {changes[m]:+.2%}" for m in slower if m != headline]
    elif changes[headline] < -tolerance and not problems:
        status = IMPROVEMENT
    return PointResult(key, status, headline, old, new, changes[headline], tuple(problems))


def _change(old: int | float, new: int | float) -> float:
    if old == new:
        return 0.0
    if old == 0:
        return math.inf
    return (float(new) - float(old)) / float(old)


def _check_keys(keys: Sequence[str], sides: Sequence[_Side]) -> None:
    for side in sides:
        columns = list(dict.fromkeys(column for row in side.rows for column in row))
        unknown = [key for key in keys if key not in columns]
        if unknown:
            raise ConfigError(
                f"--key {shown(unknown[0], 60)!r} is not a column of {side.name}; "
                f"its columns: {shown(', '.join(columns), 400)}"
            )


def compare(
    baseline_rows: Sequence[dict[str, Any]],
    current_rows: Sequence[dict[str, Any]],
    *,
    tolerance: float = 0.02,
    keys: Sequence[str] | None = None,
    names: tuple[str, str] = ("baseline", "current"),
) -> Comparison:
    """Match rows on ``keys`` (default: :func:`key_columns`) and classify every point.

    ``names`` say what messages call the two sides (the CLI gives the file
    names).  An explicit key that is not a column of both sides, and two rows
    of one side with the same key, are :class:`~kernbench.errors.ConfigError`
    (rows would otherwise be paired by position, which can hide a slowdown).
    A point whose time cannot be compared (missing on one side, NaN, not a
    number, negative, a list where a number belongs) is ``"incomparable"``,
    which counts as a regression.
    """
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, int | float)
        or not (0 <= tolerance < math.inf)
    ):
        raise ConfigError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    sides = (_Side(names[0], baseline_rows), _Side(names[1], current_rows))
    if keys is not None:
        keys = tuple(dict.fromkeys(keys))
        _check_keys(keys, sides)
    else:
        keys = tuple(key_columns(baseline_rows, current_rows))
    if not keys:
        raise ConfigError(
            "no key column is common to the baseline and the current rows; name them with --key"
        )
    before, after = _index(sides[0], keys), _index(sides[1], keys)
    points = []
    for index_key, number in before.items():
        key = dict(zip(keys, index_key, strict=True))
        if index_key not in after:
            points.append(PointResult(key, MISSING))
            continue
        other = after[index_key]
        where = (sides[0].where(number), sides[1].where(other))
        points.append(
            _compare_point(key, baseline_rows[number], current_rows[other], where, tolerance)
        )
    for index_key in (k for k in after if k not in before):
        points.append(PointResult(dict(zip(keys, index_key, strict=True)), NEW))
    return Comparison(keys, float(tolerance), tuple(points))


# --- the table ------------------------------------------------------------------------


_STATUS_TEXT = {MISSING: "regression (missing in current)", NEW: "new (not in baseline)"}
_KEY_CHARACTERS = 40


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return shown(str(value), _KEY_CHARACTERS)


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
        + (f", {len(comparison.incomparable)} incomparable" if comparison.incomparable else "")
    )
    return "\n".join(lines)
