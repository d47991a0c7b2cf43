"""Reports and traces are strict JSON, even when a bench returns NaN, infinities or NumPy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernbench.bench.trace import json_text, write_json_atomic
from kernbench.cli import main
from kernbench.errors import OutputFileError

TINY = "tiny"

SCRIPT = """\
import numpy as np
import kernbench.torch as torch
import kernbench.torch.distributed as dist


def main():
    dist.init_process_group()
    dist.all_reduce(torch.ones(8))
    return [
        {"op": "all_reduce", "size_B": 32, "time_us": {time}, "gbps": float("inf"),
         "low": -float("inf"){numpy}},
    ]
"""
NUMPY_COLUMNS = ', "count": np.int64(8), "ratio": np.float32("nan")'


def _strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _run(tmp_path: Path, time: str, *outputs: str, numpy: bool = True) -> int:
    script = tmp_path / f"bench_{len(list(tmp_path.iterdir()))}.py"
    script.write_text(
        SCRIPT.replace("{time}", time).replace("{numpy}", NUMPY_COLUMNS if numpy else "")
    )
    return main(["run", str(script), "-t", TINY, *outputs])


@pytest.mark.parametrize("numpy", [False, True], ids=["python-floats", "numpy-values"])
def test_a_report_and_trace_with_nan_are_valid_json(tmp_path: Path, numpy: bool) -> None:
    report, trace = tmp_path / "r.json", tmp_path / "t.json"
    outputs = ("--report", str(report), "--trace", str(trace))
    assert _run(tmp_path, 'float("nan")', *outputs, numpy=numpy) == 0
    row = _strict(report.read_text())["results"][0]
    assert row["time_us"] == "NaN"
    assert row["gbps"] == "Infinity" and row["low"] == "-Infinity"
    trace_document = _strict(trace.read_text())
    assert trace_document["metadata"]["results"][0]["time_us"] == "NaN"
    assert "traceEvents" in trace_document
    if not numpy:
        return
    assert row["ratio"] == "NaN"
    assert row["count"] == 8 and isinstance(row["count"], int)


def test_regress_reads_a_nan_report_back_as_nan(tmp_path: Path, capsys) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    assert _run(tmp_path, "1.5", "--report", str(good), numpy=False) == 0
    assert _run(tmp_path, 'float("nan")', "--report", str(bad), numpy=False) == 0
    capsys.readouterr()
    assert main(["regress", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 of 2 points cannot be compared: ")
    assert f"time_us is NaN in {bad} row 1" in err


def test_json_text_spells_non_finite_numbers_and_plain_numpy() -> None:
    data = {
        "nan": float("nan"),
        "values": [np.float32("inf"), -np.inf, np.arange(3), (1, 2.5)],
        "nested": {"x": np.float64("nan")},
        "fine": 1.25,
    }
    assert _strict(json_text(data)) == {
        "nan": "NaN",
        "values": ["Infinity", "-Infinity", [0, 1, 2], [1, 2.5]],
        "nested": {"x": "NaN"},
        "fine": 1.25,
    }
    assert json.loads(json_text({"a": [1, 2]})) == {"a": [1, 2]}


def test_a_value_json_cannot_hold_is_an_error_naming_the_file(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")
    with pytest.raises(OutputFileError, match=r"r\.json: cannot write report: a value of type"):
        write_json_atomic(target, {"rows": [{"x": object()}]}, what="report")
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(OutputFileError, match="nested too deeply"):
        write_json_atomic(target, deep, what="report")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_bench_returning_an_object_in_a_row_is_one_error_line(tmp_path: Path, capsys) -> None:
    report = tmp_path / "r.json"
    assert _run(tmp_path, "object()", "--report", str(report)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: rank 0 raised ResultRowError: result row 0 of rank 0's return, key "
        "'time_us': a value of type object cannot go in a report or CSV; row values are "
        "numbers, text, booleans, None, NumPy numbers and arrays, and lists, tuples and "
        "dicts (with text keys) of them"
    ]
    assert not report.exists()


def test_result_rows_are_checked_for_what_a_report_cannot_hold() -> None:
    from kernbench.bench.rows import MAX_DEPTH, check_rows
    from kernbench.errors import ResultRowError

    check_rows([{"a": np.float32(1), "b": [np.arange(3)], "c": (1, "x", None)}], "rank 0")
    deep: list = []
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(ResultRowError, match=f"lists and dicts nest more than {MAX_DEPTH}"):
        check_rows([{"a": deep}], "rank 0")
    with pytest.raises(ResultRowError, match="key 'z': a value of type ndarray of complex128"):
        check_rows([{"a": 1}, {"z": np.array([1 + 2j])}], "rank 0")
