"""What a perf bench prints, laid out as nccl-tests 2.19 prints it (``src/util.cu``).

The header (run parameters and the ranks' devices), the three column lines
with the ``out-of-place`` and ``in-place`` groups, one line per row and the
footer (``# Out of bounds values`` and ``# Avg bus bandwidth``).  Column
widths, number formats (``getFloatStr``: two decimals while they fit, then
fewer) and the ``N/A`` of an unchecked ``#wrong`` are nccl-tests'; lines carry
no trailing blanks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "COLUMN_LINES",
    "GROUPS",
    "LISTED_DEVICES",
    "average_busbw",
    "float_cell",
    "format_footer",
    "format_header",
    "format_row",
    "format_table",
    "out_of_bounds",
]

#: Row keys of the two column groups: (prefix, title).
GROUPS = (("", "out-of-place"), ("in_place_", "in-place"))

_LEAD = f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
_NAMES = (
    f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
    + f"  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}" * 2
)
_UNITS = (
    f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
    + f"  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}" * 2
)
#: The three column lines, exactly as nccl-tests prints them (without trailing blanks).
COLUMN_LINES = (
    (_LEAD + "           out-of-place                       in-place").rstrip(),
    _NAMES.rstrip(),
    _UNITS.rstrip(),
)
#: Up to this many ranks the header lists every rank's device.
LISTED_DEVICES = 16


def float_cell(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: ``%.2f``, else ``%.1f``, else ``%.0f``, else exponent form."""
    for spec in (".2f", ".1f", ".0f"):
        text = f"{value:>{width}{spec}}"
        if len(text) <= width:
            return text
    return f"{value:>{width}{'.1e' if width >= 7 else '.0e'}}"


def _wrong_cell(wrong: Any) -> str:
    # nccl-tests' "  %6g", or "    N/A" (one character narrower) when nothing was checked.
    return "    N/A" if wrong == "n/a" else f"  {wrong:>6g}"


def format_row(row: dict[str, Any]) -> str:
    """One row: size, count, type, redop, root, then each group's time, algbw, busbw, #wrong."""
    cells = [
        f"{row['size_B']:>12d}  {row['count']:>12d}  {row['type']:>8}  {row['redop']:>6}  "
        f"{row['root']:>6d}"
    ]
    for prefix, _ in GROUPS:
        cells.append(
            f"  {float_cell(row[prefix + 'time_us'], 7)}"
            f"  {float_cell(row[prefix + 'algbw_GBps'], 6)}"
            f"  {float_cell(row[prefix + 'busbw_GBps'], 6)}"
            f"{_wrong_cell(row[prefix + 'wrong'])}"
        )
    return "".join(cells)


def format_header(
    program: str,
    *,
    minbytes: int,
    maxbytes: int,
    stepfactor: int,
    stepbytes: int,
    warmup: int,
    iters: int,
    check: int,
    blocking: int,
    parallel_init: int,
    devices: Sequence[str],
    ranks: int,
) -> str:
    """nccl-tests' lines before the table: parameters, blocking mode, the ranks' devices."""
    step = f"{stepfactor}(factor)" if stepfactor > 1 else f"{stepbytes}(bytes)"
    lines = [
        f"# Collective test starting: {program}",
        f"# nThread 1 nGpus 1 minBytes {minbytes} maxBytes {maxbytes} step: {step} "
        f"warmup iters: {warmup} iters: {iters} agg iters: 1 validation: {check} graph: 0",
    ]
    if blocking == 1:
        lines.append("# Blocking Enabled: wait and barrier after each inner iteration (-m)")
    elif blocking == 2:
        lines.append("# Blocking Enabled: wait after each inner iteration (-m), no barrier")
    elif blocking == 3:
        lines.append(
            "# Blocking Enabled: wait and barrier after each outer iteration (-n); "
            "time excludes barrier"
        )
    if parallel_init:
        lines.append("# Parallel Init Enabled: threads call into NcclInitRank concurrently")
    lines += ["#", "# Using devices"]
    lines += devices[:LISTED_DEVICES]
    if ranks > len(devices[:LISTED_DEVICES]):
        lines.append(f"#  ... and {ranks - len(devices[:LISTED_DEVICES])} more ranks")
    lines += ["#", *COLUMN_LINES]
    return "\n".join(lines)


def average_busbw(rows: Sequence[dict[str, Any]]) -> float:
    """nccl-tests' average: the mean busbw over every printed cell, both groups."""
    cells = [row[prefix + "busbw_GBps"] for row in rows for prefix, _ in GROUPS]
    return sum(cells) / len(cells) if cells else 0.0


def out_of_bounds(rows: Sequence[dict[str, Any]]) -> int:
    """How many timed cells had wrong values (nccl-tests counts tests, not elements)."""
    return sum(
        1
        for row in rows
        for prefix, _ in GROUPS
        if row[prefix + "wrong"] != "n/a" and row[prefix + "wrong"] > 0
    )


def format_footer(program: str, rows: Sequence[dict[str, Any]]) -> str:
    errors = out_of_bounds(rows)
    return "\n".join(
        [
            f"# {'Out of bounds values':<20} : {errors} {'FAILED' if errors else 'OK'}",
            f"# {'Avg bus bandwidth':<20} : {average_busbw(rows):g}",
            "#",
            f"# Collective test concluded: {program}",
        ]
    )


def format_table(rows: Sequence[dict[str, Any]], program: str = "") -> str:
    """The column lines, one line per row and the footer."""
    return "\n".join([*COLUMN_LINES, *(format_row(r) for r in rows), format_footer(program, rows)])
