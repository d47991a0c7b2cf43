"""Charts of bench results: a metric against message size, and where a run's time went.

:func:`plot_results` draws one line per group of rows (per topology, algorithm,
...) of a column such as ``busbw_GBps`` against ``size_B`` on a log-2 axis
labelled in binary units (4KiB, 1MiB).  :func:`plot_breakdown` draws, per run
report, the bytes moved on each link class and the busy time of the busiest
component.  Both render with Agg (no display needed) in the format the output
name asks for (:func:`plot_format`: ``.png``, ``.svg``, ``.pdf``...; PNG when
it has no extension, as ``-`` for standard output) and write it with
:func:`kernbench.files.write_bytes`, which never replaces a special file.

The work is bounded: at most ``max_groups`` groups (default
:data:`MAX_GROUPS`, the first ones in the order the rows give them) are drawn,
and the legend says how many were left out.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from kernbench.bench.regress import key_columns
from kernbench.errors import ConfigError, OutputFileError, shown
from kernbench.files import is_stream_target, write_bytes
from kernbench.units import format_size, format_time

__all__ = [
    "DEFAULT_GROUP_BY",
    "MAX_GROUPS",
    "MAX_GROUPS_LIMIT",
    "PLOT_FORMATS",
    "PlotSummary",
    "axis_label",
    "plot_breakdown",
    "plot_format",
    "plot_results",
    "separate_curves",
]

DEFAULT_GROUP_BY = ("op", "topology", "algorithm", "ccl.all_reduce")
#: Groups drawn by default; more lines than this are unreadable and slow to lay out.
MAX_GROUPS = 20
#: The most groups one chart draws: about 10 s of layout on a 2-core machine, a legend
#: no one can read, and 100,000 lines would take 15 minutes.
MAX_GROUPS_LIMIT = 1000
#: Output formats, by file extension, that matplotlib writes without anything
#: outside KernBench's dependencies (``pgf`` needs LaTeX; raw pixels have no header).
PLOT_FORMATS = ("png", "svg", "svgz", "pdf", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")
# Past these, markers and the legend's "best" placement cost more than they show.
_MARKER_POINTS = 200
_LEGEND_INSIDE_ENTRIES = 8
_LEGEND_BEST_POINTS = 5000
_LABEL_CHARACTERS = 60
# Titles, labels and legends hold the user's column names and values: text to
# show as written.  With mathtext on, "$$" in a value (or "$\alpha$") would be
# parsed as TeX and fail while the figure is drawn.
_PLAIN_TEXT = {"text.parse_math": False}

_UNITS = {
    "_B": "B",
    "_Bps": "B/s",
    "_GBps": "GB/s, 1 GB = 10^9 B",
    "_us": "µs",
    "_ps": "ps",
    "_ns": "ns",
    "_ms": "ms",
    "_s": "s",
}
_SIZE_COLUMNS = ("bytes", "size", "nbytes")
_BYTE_UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))
_TIME_UNITS = (("ps", 1), ("ns", 10**3), ("µs", 10**6), ("ms", 10**9), ("s", 10**12))
_MARKERS = "osD^v<>pPX*h"


def axis_label(column: str) -> str:
    """``"busbw_GBps"`` -> ``"busbw (GB/s, 1 GB = 10^9 B)"``; ``"size_B"`` -> ``"size (B)"``."""
    for suffix, unit in sorted(_UNITS.items(), key=lambda item: -len(item[0])):
        if column.endswith(suffix) and len(column) > len(suffix):
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


def _is_size(column: str) -> bool:
    return column.endswith("_B") or column in _SIZE_COLUMNS


#: Larger magnitudes are left out of a chart: between two of them near the float
#: range an axis's span, margins or ticks overflow and matplotlib cannot draw.
_PLOTTABLE = 1e300


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past the float range
        return None
    return number if abs(number) <= _PLOTTABLE else None  # NaN fails this too


def _scale(values: Sequence[float], units: Sequence[tuple[str, int]]) -> tuple[str, int]:
    """The largest unit in which the largest value is at least 1."""
    largest = max(values, default=0)
    return max((u for u in units if u[1] <= largest), key=lambda u: u[1], default=units[0])


def _default_group_by(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [
        column
        for column in DEFAULT_GROUP_BY
        if len({str(row.get(column)) for row in rows if column in row}) > 1
    ]


def _shared_x(rows: Sequence[dict[str, Any]], x: str, columns: Sequence[str]) -> int:
    """How many rows share their group (``columns``) and their x with an earlier row."""
    seen: set[tuple] = set()
    shared = 0
    for row in rows:
        px = _number(row.get(x))
        if px is None:
            continue
        key = (tuple(_hashable(row.get(c)) for c in columns), px)
        shared += key in seen
        seen.add(key)
    return shared


def _is_curve(rows: Sequence[dict[str, Any]], column: str, x: str, spread: int) -> bool:
    """Whether every value of ``column`` spans ``spread`` x values: a series (type, redop),
    not a property of a point (count, which follows the size)."""
    xs_by_value: dict[Any, set[float]] = {}
    for row in rows:
        px = _number(row.get(x))
        if px is not None:
            xs_by_value.setdefault(_hashable(row.get(column)), set()).add(px)
    return len(xs_by_value) > 1 and all(len(xs) >= spread for xs in xs_by_value.values())


def separate_curves(rows: Sequence[dict[str, Any]], x: str, group_by: Sequence[str]) -> list[str]:
    """``group_by``, and while rows of one group share an x, the columns that tell them
    apart: a line through two values at one x (``-o all``'s sum and avg) would be drawn
    as one curve.  Candidates are the rows' key columns (those ``regress`` matches on),
    in the rows' order, that name series, each kept only when it separates rows."""
    columns = list(group_by)
    shared = _shared_x(rows, x, columns)
    if not shared:
        return columns
    spread = min(2, len({_number(row.get(x)) for row in rows} - {None}))
    for column in key_columns(rows, rows):
        if column == x or column in columns or not _is_curve(rows, column, x, spread):
            continue
        left = _shared_x(rows, x, [*columns, column])
        if left < shared:
            columns.append(column)
            shared = left
        if not shared:
            break
    return columns


def _base_name(column: str) -> str:
    return axis_label(column).split(" (")[0]


def _default_title(rows: Sequence[dict[str, Any]], x: str, y: str, group_by: Sequence[str]) -> str:
    """``"busbw vs size: all_reduce, ring8, ring"`` -- the grouping columns that do not vary."""
    constant = []
    for column in DEFAULT_GROUP_BY:
        values = {str(row[column]) for row in rows if column in row}
        if column not in group_by and len(values) == 1:
            constant.append(values.pop())
    title = f"{_base_name(y)} vs {_base_name(x)}"
    return f"{title}: {', '.join(constant)}" if constant else title


def _hashable(value: Any) -> Any:
    """Sweep columns can hold lists (script arguments); group them by their text."""
    return str(value) if isinstance(value, list | dict | set) else value


def _group_label(columns: Sequence[str], values: tuple) -> str:
    if len(columns) == 1:
        return str(values[0])
    return ", ".join(f"{c}={v}" for c, v in zip(columns, values, strict=True))


def _log2_axis(axis: Any, values: Sequence[float], sizes: bool) -> None:
    """Powers of two as ticks, at most about ten of them, labelled 4KiB or 4096."""
    low = math.floor(math.log2(min(values)))
    high = math.ceil(math.log2(max(values)))
    step = max(1, math.ceil((high - low + 1) / 10))
    ticks = [2.0**e for e in range(low, high + 1, step)]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    label = (lambda v: format_size(int(v))) if sizes else (lambda v: f"{v:g}")
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: label(v)))


def plot_format(out: str | Path) -> str:
    """The format a plot written to ``out`` gets: its extension, or ``png`` without one.

    An extension that is not in :data:`PLOT_FORMATS` is an
    :class:`~kernbench.errors.OutputFileError` naming the formats that are.
    """
    name = str(out)
    suffix = "" if is_stream_target(name) else Path(name).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    if suffix not in PLOT_FORMATS:
        raise OutputFileError(
            f"a plot cannot be written as .{shown(suffix, 20)}; name it with one of "
            + ", ".join(f".{f}" for f in PLOT_FORMATS),
            path=name,
        )
    return suffix


def _save(figure: Figure, out: str | Path) -> str:
    """Render ``figure`` in :func:`plot_format` of ``out`` and write it there; the format."""
    fmt = plot_format(out)
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=120)
    write_bytes(out, buffer.getvalue(), what="plot")
    return fmt


@dataclass(frozen=True)
class PlotSummary:
    """What :func:`plot_results` drew: ``drawn`` of ``groups`` groups, in ``format``."""

    groups: int
    drawn: int
    format: str
    group_by: tuple[str, ...] = ()

    @property
    def left_out(self) -> int:
        return self.groups - self.drawn


def _check_max_groups(max_groups: object) -> None:
    if (
        isinstance(max_groups, bool)
        or not isinstance(max_groups, int)
        or not 1 <= max_groups <= MAX_GROUPS_LIMIT
    ):
        raise ConfigError(
            f"max_groups must be a whole number from 1 to {MAX_GROUPS_LIMIT}, got {max_groups!r}"
        )


@rc_context(_PLAIN_TEXT)
def plot_results(
    rows: Sequence[dict[str, Any]],
    out_png: str | Path,
    *,
    x: str = "size_B",
    y: str = "busbw_GBps",
    group_by: str | Sequence[str] | None = None,
    title: str = "",
    max_groups: int = MAX_GROUPS,
) -> PlotSummary:
    """Plot column ``y`` against column ``x``, one line per group, into ``out_png``.

    ``group_by`` defaults to whichever of :data:`DEFAULT_GROUP_BY` vary across
    the rows, and then the columns :func:`separate_curves` adds.  Rows without
    a number in ``x`` or ``y`` (skipped or failed points) are left out; a column
    that no row has is a ConfigError naming the columns that exist.  ``x`` is
    drawn on a log-2 axis when it spans a factor of 8 or more; byte columns
    (``*_B``, ``bytes``) get labels like 4KiB.
    Only the first ``max_groups`` groups are drawn; the legend counts the rest.
    """
    _check_max_groups(max_groups)
    fmt = plot_format(out_png)  # an unwritable format is refused before any drawing
    columns = list(dict.fromkeys(column for row in rows for column in row))
    for name, column in (("--x", x), ("--y", y)):
        if column not in columns:
            raise ConfigError(
                f"{name} {shown(column, 60)!r} is not a column of the results; columns: "
                + (shown(", ".join(columns), 400) or "(no rows)")
            )
    if group_by is None:
        group_by = separate_curves(rows, x, _default_group_by(rows))
    elif isinstance(group_by, str):
        group_by = [group_by]
    for column in group_by:
        if column not in columns:
            raise ConfigError(
                f"--group-by {shown(column, 60)!r} is not a column; "
                f"columns: {shown(', '.join(columns), 400)}"
            )
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for row in rows:
        px, py = _number(row.get(x)), _number(row.get(y))
        if px is None or py is None:
            continue
        key = tuple(_hashable(row.get(c)) for c in group_by)
        groups.setdefault(key, []).append((px, py))
    if not groups:
        raise ConfigError(
            f"no row has numbers in both {x!r} and {y!r} (finite, of magnitude at most "
            f"{_PLOTTABLE:g}: larger ones are left out)"
        )
    drawn = dict(list(groups.items())[:max_groups])

    figure = Figure(figsize=(8, 5), layout="constrained")
    axes = figure.add_subplot()
    xs = [px for points in drawn.values() for px, _ in points]
    if min(xs) > 0 and max(xs) / min(xs) >= 8:
        axes.set_xscale("log", base=2)
        _log2_axis(axes.xaxis, xs, _is_size(x))
    for number, (values, points) in enumerate(drawn.items()):
        points.sort()
        axes.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker=_MARKERS[number % len(_MARKERS)] if len(points) <= _MARKER_POINTS else None,
            markersize=5,
            linewidth=1.5,
            label=shown(_group_label(group_by, values), _LABEL_CHARACTERS) if group_by else None,
        )
    axes.set_xlabel(axis_label(x) + (", log2 scale" if axes.get_xscale() == "log" else ""))
    axes.set_ylabel(axis_label(y))
    axes.set_title(shown(title or _default_title(rows, x, y, group_by), 2 * _LABEL_CHARACTERS))
    axes.grid(True, which="major", alpha=0.4)
    axes.set_ylim(bottom=0 if min(p[1] for ps in drawn.values() for p in ps) >= 0 else None)
    if group_by:
        _legend(axes, group_by, len(groups) - len(drawn), len(xs))
    _save(figure, out_png)
    return PlotSummary(len(groups), len(drawn), fmt, tuple(group_by))


def _legend(axes: Any, group_by: Sequence[str], left_out: int, points: int) -> None:
    """One entry per drawn group, and one saying how many groups were not drawn."""
    handles, labels = axes.get_legend_handles_labels()
    if left_out:
        handles.append(Line2D([], [], linestyle="none"))
        labels.append(f"... {left_out} more group{'s' * (left_out != 1)} not drawn")
    inside = len(handles) <= _LEGEND_INSIDE_ENTRIES
    where = {"loc": "best" if points <= _LEGEND_BEST_POINTS else "upper right"}
    if not inside:  # a long legend would cover the lines: put it beside the axes
        where = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}
    axes.legend(
        handles,
        labels,
        title=", ".join(group_by) if len(group_by) == 1 else None,
        fontsize="small",
        **where,
    )


@dataclass(frozen=True)
class _Run:
    """What :func:`plot_breakdown` draws of one run report, checked."""

    label: str
    bytes_by_class: dict[str, float]
    busiest: tuple[str, float, float] | None  # name, busy time (ps), utilisation
    simulated_ps: float


def _report_label(label: Any, report: Mapping[str, Any], number: int) -> str:
    if isinstance(label, str):
        return label
    metadata = report.get("metadata")
    script = metadata.get("script") if isinstance(metadata, Mapping) else None
    name = Path(script).stem if isinstance(script, str) else f"run {number}"
    return f"{name} on {report.get('topology', '?')}"


def _quantity(value: Any, label: str, key: str) -> float:
    number = _number(value)
    if number is None or number < 0:
        raise ConfigError(
            f"{key} must be a finite number >= 0 (at most {_PLOTTABLE:g}), "
            f"got {shown(repr(value), 40)}",
            source=label,
        )
    return number


def _run_of(label: str, report: Any) -> _Run:
    if not isinstance(report, Mapping):
        raise ConfigError("not a run report (a JSON object)", source=label)
    by_class = report.get("bytes_by_link_class") or {}
    if not isinstance(by_class, Mapping):
        raise ConfigError("bytes_by_link_class must map link classes to bytes", source=label)
    checked = {
        shown(str(name), _LABEL_CHARACTERS): _quantity(v, label, f"bytes_by_link_class.{name}")
        for name, v in by_class.items()
    }
    busiest = report.get("busiest_component") or None
    if busiest is not None:
        if not isinstance(busiest, Mapping) or not isinstance(busiest.get("name"), str):
            raise ConfigError(
                "busiest_component must be an object with a name, busy_ps and utilisation",
                source=label,
            )
        busiest = (
            shown(busiest["name"], _LABEL_CHARACTERS),
            _quantity(busiest.get("busy_ps"), label, "busiest_component.busy_ps"),
            _quantity(busiest.get("utilisation"), label, "busiest_component.utilisation"),
        )
    simulated = _quantity(report.get("simulated_time_ps"), label, "simulated_time_ps")
    return _Run(shown(label, _LABEL_CHARACTERS), checked, busiest, simulated)


@rc_context(_PLAIN_TEXT)
def plot_breakdown(
    reports: Sequence[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    out_png: str | Path,
    *,
    max_groups: int = MAX_GROUPS,
) -> str:
    """Per run report: bytes per link class, and the busiest component's busy time.

    ``reports`` is a list of run reports (labelled "script on topology") or a
    mapping label -> report.  Left: horizontal bars of bytes moved per link
    class, one bar per report in each class.  Right: the busy time of each
    report's busiest component, annotated with its name and utilisation.
    At most ``max_groups`` reports and ``max_groups`` link classes (those that
    moved the most bytes) are drawn; the titles count the rest.  A report
    whose fields are not numbers where numbers belong is a ConfigError naming
    it.  Returns the format written (:func:`plot_format`).
    """
    _check_max_groups(max_groups)
    plot_format(out_png)  # an unwritable format is refused before any drawing
    items = list(reports.items()) if isinstance(reports, Mapping) else list(enumerate(reports))
    if not items:
        raise ConfigError("plot_breakdown needs at least one run report")
    runs = [_run_of(_report_label(label, r, n), r) for n, (label, r) in enumerate(items)]
    runs_left_out = max(0, len(runs) - max_groups)
    runs = runs[:max_groups]
    totals: dict[str, float] = {}
    for run in runs:
        for name, nbytes in run.bytes_by_class.items():
            totals[name] = totals.get(name, 0.0) + nbytes
    busiest_classes = sorted(totals, key=lambda name: -totals[name])[:max_groups]
    classes = sorted(busiest_classes)
    classes_left_out = len(totals) - len(classes)

    height = min(40.0, max(3.5, 0.35 * max(1, len(classes)) * len(runs) + 1.5))
    figure = Figure(figsize=(12, height), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=[3, 2])
    byte_unit, byte_scale = _scale(
        [run.bytes_by_class[c] for run in runs for c in classes if c in run.bytes_by_class],
        _BYTE_UNITS,
    )
    bar = 0.8 / len(runs)
    for number, run in enumerate(runs):
        left.barh(
            [i + number * bar for i in range(len(classes))],
            [run.bytes_by_class.get(c, 0) / byte_scale for c in classes],
            height=bar,
            color=f"C{number % 10}",
            label=f"run {number + 1}: {run.label}",
        )
    left.set_yticks([i + bar * (len(runs) - 1) / 2 for i in range(len(classes))], classes)
    left.invert_yaxis()
    left.set_xlabel(f"bytes moved ({byte_unit})")
    left.set_title(
        "bytes per link class"
        + (f" ({classes_left_out} smaller classes not drawn)" if classes_left_out else "")
    )
    left.grid(True, axis="x", alpha=0.4)
    if classes:
        left.legend(fontsize="small")
    else:
        left.text(0.5, 0.5, "no bytes moved", ha="center", transform=left.transAxes)

    time_unit, time_scale = _scale([r.busiest[1] if r.busiest else 0 for r in runs], _TIME_UNITS)
    widths = [(r.busiest[1] if r.busiest else 0) / time_scale for r in runs]
    positions = list(range(len(runs)))
    right.barh(positions, widths, height=0.5, color=[f"C{n % 10}" for n in positions])
    right.set_yticks(positions, [f"run {n + 1}" for n in positions])
    right.invert_yaxis()
    right.set_xlim(0, max(max(widths), 1e-9) * 2.2)  # room for the annotations
    for position, run in enumerate(runs):
        text = "no component busy"
        if run.busiest:
            name, busy_ps, utilisation = run.busiest
            text = (
                f"{name}\nbusy {format_time(busy_ps)}, {utilisation:.1%} "
                f"of {format_time(run.simulated_ps)}"
            )
        right.annotate(
            text,
            (widths[position], position),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    right.set_xlabel(f"busy time of the busiest component ({time_unit})")
    right.set_title(
        "busiest component"
        + (f" ({runs_left_out} more reports not drawn)" if runs_left_out else "")
    )
    right.grid(True, axis="x", alpha=0.4)
    return _save(figure, out_png)
