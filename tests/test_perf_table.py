"""The perf benches' output, character for character as nccl-tests prints it."""

from __future__ import annotations

from kernbench.bench.perf_table import (
    COLUMN_LINES,
    average_busbw,
    float_cell,
    format_footer,
    format_header,
    format_row,
    out_of_bounds,
)

# nccl-tests 2.19 (src/util.cu writeResultHeader), trailing blanks stripped.
NCCL_COLUMNS = (
    "#                                                              out-of-place"
    "                       in-place",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
    "     time   algbw   busbw  #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "             (us)  (GB/s)  (GB/s)",
)

ROW = {
    "size_B": 134217728,
    "count": 33554432,
    "type": "float",
    "redop": "sum",
    "root": -1,
    "time_us": 6895.49,
    "algbw_GBps": 19.4651,
    "busbw_GBps": 36.497,
    "wrong": 0,
    "in_place_time_us": 12345.678,
    "in_place_algbw_GBps": 1234.5,
    "in_place_busbw_GBps": 123456.0,
    "in_place_wrong": 3,
}


def test_column_lines_are_nccl_tests() -> None:
    assert COLUMN_LINES == NCCL_COLUMNS


def test_row_widths_and_number_formats() -> None:
    assert format_row(ROW) == (
        "   134217728      33554432     float     sum      -1  6895.49   19.47   36.50       0"
        "  12345.7  1234.5  123456       3"
    )
    unchecked = {**ROW, "wrong": "n/a", "in_place_wrong": "n/a"}
    assert format_row(unchecked).endswith("   36.50    N/A  12345.7  1234.5  123456    N/A")
    # getFloatStr: two decimals while they fit the width, then one, none, an exponent
    assert [float_cell(v, 7) for v in (0.1234, 99.999, 12345.678, 1234567.0, 12345678.0)] == [
        "   0.12",
        " 100.00",
        "12345.7",
        "1234567",
        "1.2e+07",
    ]
    assert float_cell(1234567.0, 6) == " 1e+06"


def test_footer_counts_failed_cells_and_averages_both_groups() -> None:
    clean = {**ROW, "in_place_wrong": 0}
    assert out_of_bounds([ROW, ROW]) == 2 and out_of_bounds([clean]) == 0
    assert average_busbw([ROW]) == (36.497 + 123456.0) / 2
    assert format_footer("allreduce_perf", [clean]).splitlines() == [
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 61746.2",
        "#",
        "# Collective test concluded: allreduce_perf",
    ]
    assert format_footer("x", [ROW]).startswith("# Out of bounds values : 1 FAILED\n")


def test_header_lines() -> None:
    header = format_header(
        "allreduce_perf",
        minbytes=8,
        maxbytes=134217728,
        stepfactor=2,
        stepbytes=1 << 20,
        warmup=5,
        iters=20,
        check=1,
        blocking=1,
        parallel_init=0,
        devices=[f"#  Rank {r:2d} ..." for r in range(16)],
        ranks=20,
    ).splitlines()
    assert header[:4] == [
        "# Collective test starting: allreduce_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "# Blocking Enabled: wait and barrier after each inner iteration (-m)",
        "#",
    ]
    assert header[4] == "# Using devices" and header[5] == "#  Rank  0 ..."
    assert header[21] == "#  ... and 4 more ranks"
    assert tuple(header[-3:]) == NCCL_COLUMNS and header[-4] == "#"
