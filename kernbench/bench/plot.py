"""Charts of bench results: a metric against message size, and where a run's time went.

:func:`plot_results` draws one line per group of rows (per topology, algorithm,
...) of a column such as ``busbw_GBps`` against ``size_B`` on a log-2 axis
labelled in binary units (4KiB, 1MiB).  :func:`plot_breakdown` draws, per run
report, the bytes moved on each link class and the busy time of the busiest
component.  Both render with Agg (no display needed) and write the PNG
atomically: to a temporary file beside the target, then renamed.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from kernbench.errors import ConfigError
from kernbench.units import format_size, format_time

__all__ = ["DEFAULT_GROUP_BY", "axis_label", "plot_breakdown", "plot_results"]

DEFAULT_GROUP_BY = ("op", "topology", "algorithm", "ccl.all_reduce")

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


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _save(figure: Figure, out_png: str | Path) -> None:
    """Render with Agg into a temporary file beside ``out_png``, then rename it."""
    path = Path(out_png)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            figure.savefig(handle, format="png", dpi=120)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def plot_results(
    rows: Sequence[dict[str, Any]],
    out_png: str | Path,
    *,
    x: str = "size_B",
    y: str = "busbw_GBps",
    group_by: str | Sequence[str] | None = None,
    title: str = "",
) -> None:
    """Plot column ``y`` against column ``x``, one line per group, into ``out_png``.

    ``group_by`` defaults to whichever of :data:`DEFAULT_GROUP_BY` vary across
    the rows.  Rows without a number in ``x`` or ``y`` (skipped or failed
    points) are left out; a column that no row has is a ConfigError naming the
    columns that exist.  ``x`` is drawn on a log-2 axis when it spans a factor
    of 8 or more; byte columns (``*_B``, ``bytes``) get labels like 4KiB.
    """
    columns = list(dict.fromkeys(column for row in rows for column in row))
    for name, column in (("--x", x), ("--y", y)):
        if column not in columns:
            raise ConfigError(
                f"{name} {column!r} is not a column of the results; columns: "
                + (", ".join(columns) or "(no rows)")
            )
    if group_by is None:
        group_by = _default_group_by(rows)
    elif isinstance(group_by, str):
        group_by = [group_by]
    for column in group_by:
        if column not in columns:
            raise ConfigError(
                f"--group-by {column!r} is not a column; columns: {', '.join(columns)}"
            )
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for row in rows:
        px, py = _number(row.get(x)), _number(row.get(y))
        if px is None or py is None:
            continue
        key = tuple(_hashable(row.get(c)) for c in group_by)
        groups.setdefault(key, []).append((px, py))
    if not groups:
        raise ConfigError(f"no row has numbers in both {x!r} and {y!r}")

    figure = Figure(figsize=(8, 5), layout="constrained")
    axes = figure.add_subplot()
    xs = [px for points in groups.values() for px, _ in points]
    if min(xs) > 0 and max(xs) / min(xs) >= 8:
        axes.set_xscale("log", base=2)
        _log2_axis(axes.xaxis, xs, _is_size(x))
    for number, (values, points) in enumerate(groups.items()):
        points.sort()
        axes.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker=_MARKERS[number % len(_MARKERS)],
            markersize=5,
            linewidth=1.5,
            label=_group_label(group_by, values) if group_by else None,
        )
    axes.set_xlabel(axis_label(x) + (", log2 scale" if axes.get_xscale() == "log" else ""))
    axes.set_ylabel(axis_label(y))
    axes.set_title(title or _default_title(rows, x, y, group_by))
    axes.grid(True, which="major", alpha=0.4)
    axes.set_ylim(bottom=0 if min(p[1] for ps in groups.values() for p in ps) >= 0 else None)
    if group_by:
        axes.legend(title=", ".join(group_by) if len(group_by) == 1 else None, fontsize="small")
    _save(figure, out_png)


def _report_label(label: Any, report: Mapping[str, Any], number: int) -> str:
    if isinstance(label, str):
        return label
    script = Path(report.get("metadata", {}).get("script", f"run {number}")).stem
    return f"{script} on {report.get('topology', '?')}"


def plot_breakdown(
    reports: Sequence[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    out_png: str | Path,
) -> None:
    """Per run report: bytes per link class, and the busiest component's busy time.

    ``reports`` is a list of run reports (labelled "script on topology") or a
    mapping label -> report.  Left: horizontal bars of bytes moved per link
    class, one bar per report in each class.  Right: the busy time of each
    report's busiest component, annotated with its name and utilisation.
    """
    items = list(reports.items()) if isinstance(reports, Mapping) else list(enumerate(reports))
    if not items:
        raise ConfigError("plot_breakdown needs at least one run report")
    labelled = [(_report_label(label, r, n), r) for n, (label, r) in enumerate(items)]
    classes = sorted({c for _, r in labelled for c in r.get("bytes_by_link_class", {})})

    height = max(3.5, 0.35 * max(1, len(classes)) * len(labelled) + 1.5)
    figure = Figure(figsize=(12, height), layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=[3, 2])
    byte_unit, byte_scale = _scale(
        [v for _, r in labelled for v in r.get("bytes_by_link_class", {}).values()], _BYTE_UNITS
    )
    bar = 0.8 / len(labelled)
    for number, (label, report) in enumerate(labelled):
        by_class = report.get("bytes_by_link_class", {})
        left.barh(
            [i + number * bar for i in range(len(classes))],
            [by_class.get(c, 0) / byte_scale for c in classes],
            height=bar,
            color=f"C{number % 10}",
            label=f"run {number + 1}: {label}",
        )
    left.set_yticks([i + bar * (len(labelled) - 1) / 2 for i in range(len(classes))], classes)
    left.invert_yaxis()
    left.set_xlabel(f"bytes moved ({byte_unit})")
    left.set_title("bytes per link class")
    left.grid(True, axis="x", alpha=0.4)
    if classes:
        left.legend(fontsize="small")
    else:
        left.text(0.5, 0.5, "no bytes moved", ha="center", transform=left.transAxes)

    busy = [r.get("busiest_component") or {} for _, r in labelled]
    time_unit, time_scale = _scale([b.get("busy_ps", 0) for b in busy], _TIME_UNITS)
    widths = [b.get("busy_ps", 0) / time_scale for b in busy]
    positions = list(range(len(labelled)))
    right.barh(positions, widths, height=0.5, color=[f"C{n % 10}" for n in positions])
    right.set_yticks(positions, [f"run {n + 1}" for n in positions])
    right.invert_yaxis()
    right.set_xlim(0, max(max(widths), 1e-9) * 2.2)  # room for the annotations
    for position, (b, (_, report)) in enumerate(zip(busy, labelled, strict=True)):
        text = (
            f"{b['name']}\nbusy {format_time(b['busy_ps'])}, {b['utilisation']:.1%} "
            f"of {format_time(report['simulated_time_ps'])}"
            if b
            else "no component busy"
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
    right.set_title("busiest component")
    right.grid(True, axis="x", alpha=0.4)
    _save(figure, out_png)
