"""``kernbench regress`` never passes what it cannot compare.

Each case used to report "ok" (or an improvement, or a traceback): a renamed
time column, NaN or non-numeric times, a negative time, an unknown ``--key``
that paired rows by position, objects where a value belongs, undecodable or
too deeply nested files.  Each is now an error (exit 2) naming the row and
the column, while real regressions and improvements are still told apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernbench.bench.regress import compare, load_rows
from kernbench.cli import main
from kernbench.errors import ConfigError

SIZES = (4096, 65536, 1 << 20)


def _rows(times=(10.0, 20.0, 40.0), **extra) -> list[dict]:
    return [
        {"op": "all_reduce", "size_B": size, "time_us": time, "checked": True, **extra}
        for size, time in zip(SIZES, times, strict=True)
    ]


def _report(rows: list[dict]) -> dict:
    return {"topology": "ring8", "world_size": 8, "simulated_time_ps": 10**8, "results": rows}


def _write(path: Path, rows: list[dict] | str) -> str:
    path.write_text(rows if isinstance(rows, str) else json.dumps(_report(rows)))
    return str(path)


def _regress(tmp_path: Path, baseline, current, *options: str) -> tuple[int, str, str]:
    base = _write(tmp_path / "base.json", baseline)
    cur = _write(tmp_path / "cur.json", current)
    return main(["regress", base, cur, *options]), base, cur


def _error_line(capsys) -> str:
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in out + err
    return lines[0]


# --- times that cannot be compared ---------------------------------------------------------


def _renamed(rows: list[dict]) -> list[dict]:
    return [{("latency_us" if k == "time_us" else k): v for k, v in row.items()} for row in rows]


def _set(rows: list[dict], index: int, **values) -> list[dict]:
    rows = [dict(row) for row in rows]
    rows[index].update(values)
    return rows


NAN_BARE = json.dumps(_report(_rows())).replace("20.0", "NaN")  # what json.dumps used to write


@pytest.mark.parametrize(
    ("baseline", "current", "fragments"),
    [
        (_rows(), _renamed(_rows((20.0, 40.0, 80.0))), ["time_us only in", "base.json row 1"]),
        (_rows(), _set(_rows(), 1, time_us="NaN"), ["time_us is NaN in", "cur.json row 2"]),
        (_rows(), NAN_BARE, ["time_us is NaN in", "cur.json row 2"]),
        (_set(_rows(), 0, time_us="NaN"), _rows(), ["time_us is NaN in", "base.json row 1"]),
        (_rows(), _set(_rows(), 2, time_us="Infinity"), ["time_us is Infinity", "cur.json row 3"]),
        (_rows(), _set(_rows(), 0, time_us="fast"), ["time_us is text 'fast'", "cur.json row 1"]),
        (_rows(), _set(_rows(), 0, time_us=True), ["time_us is true", "not a number"]),
        (_rows(), _set(_rows(), 0, time_us=None), ["time_us only in", "base.json row 1"]),
        (_rows(), _set(_rows(), 1, time_us=-5.0), ["time_us is negative", "cur.json row 2"]),
        (_rows(), _set(_rows(), 1, time_us=[20.0]), ["time_us is a list", "cur.json row 2"]),
        (_rows(), _set(_rows(), 1, time_us={"v": 1}), ["time_us is an object", "cur.json row 2"]),
        (_rows(), _set(_rows(), 0, checked=[True]), ["checked is a list", "cur.json row 1"]),
        (_rows(), _set(_rows(), 0, error={"x": 1}), ["error is an object", "cur.json row 1"]),
        # a count of wrong elements that is not one passed as "ok"
        (_rows(), _set(_rows(), 0, wrong="abc"), ["wrong is text 'abc'", "not a count of wrong"]),
        (_rows(), _set(_rows(), 2, in_place_wrong=-3), ["in_place_wrong is -3", "cur.json row 3"]),
        (_set(_rows(), 1, wrong=1.5), _rows(), ["wrong is 1.5 in", "base.json row 2"]),
    ],
    ids=[
        "renamed-time-column",
        "nan-string",
        "nan-bare",
        "nan-baseline",
        "infinite",
        "text",
        "boolean",
        "null",
        "negative",
        "list",
        "object",
        "checked-list",
        "error-object",
        "wrong-text",
        "wrong-negative",
        "wrong-fraction",
    ],
)
def test_incomparable_times_exit_2_naming_row_and_column(
    tmp_path: Path, capsys, baseline, current, fragments
) -> None:
    status, _, _ = _regress(tmp_path, baseline, current)
    assert status == 2
    line = _error_line(capsys)
    assert "cannot be compared" in line
    for fragment in fragments:
        assert fragment in line


def test_a_time_column_on_one_side_only_is_not_ok(tmp_path: Path, capsys) -> None:
    current = [{k: v for k, v in row.items() if k != "time_us"} for row in _rows()]
    current = [{**row, "elapsed_ps": 10**9} for row in current]  # a different time column
    baseline = [{**row, "elapsed_ps_total": 1} for row in _rows()]
    assert _regress(tmp_path, baseline, current)[0] == 2
    assert "time_us only in" in _error_line(capsys)


def test_rows_without_any_time_are_not_ok(tmp_path: Path, capsys) -> None:
    plain = [{"op": "x", "size_B": s, "gbps": 1.5} for s in SIZES]
    assert _regress(tmp_path, plain, plain)[0] == 2
    assert "has a time" in _error_line(capsys)


# --- keys that cannot pair rows -----------------------------------------------------------------


def test_unknown_key_is_an_error_not_a_match_by_position(tmp_path: Path, capsys) -> None:
    slower = list(reversed(_rows((10.0, 40.0, 80.0))))  # 2x slower at 64KiB, rows reordered
    status, _, _ = _regress(tmp_path, _rows(), slower, "--key", "sizeB")
    assert status == 2
    line = _error_line(capsys)
    assert "--key 'sizeB' is not a column of" in line and "size_B" in line
    assert _regress(tmp_path, _rows(), slower, "--key", "size_B")[0] == 1  # named right: caught


def test_two_rows_with_one_key_are_an_error(tmp_path: Path, capsys) -> None:
    status, _, _ = _regress(tmp_path, _rows(), _rows((10.0, 40.0, 80.0)), "--key", "op")
    assert status == 2
    line = _error_line(capsys)
    assert "row 1 and row 2 have the same key (op=all_reduce)" in line
    duplicated = [*_rows(), _rows()[0]]
    assert _regress(tmp_path, _rows(), duplicated)[0] == 2
    assert "cur.json row 1 and row 4 have the same key" in _error_line(capsys)


def test_a_json_object_with_a_key_twice_is_an_error(tmp_path: Path, capsys) -> None:
    text = json.dumps(_report(_rows())).replace('"time_us": 10.0', '"time_us": 10.0, "time_us": 5')
    assert _regress(tmp_path, text, _rows())[0] == 2
    assert "has the key 'time_us' twice" in _error_line(capsys)


def test_a_csv_header_with_a_column_twice_is_an_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("op,size_B,time_us,time_us\nall_reduce,4096,10,20\n")
    assert main(["regress", str(path), str(path)]) == 2
    assert "CSV header has the column 'time_us' twice" in _error_line(capsys)


# --- files that cannot be read -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary data"),
        ("op,size_B,time_us\ncaf\u00e9,1,2\n".encode("latin-1"), "not UTF-8"),
        (json.dumps(_report(_rows())).encode("utf-16"), "UTF-16"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (
            json.dumps({"rows": [{"time_us": [[[[1]]]] * 1}]})
            .replace("[1]", "[" * 70 + "1" + "]" * 70)
            .encode(),
            "nested more than",
        ),
        (b"", "neither a run report"),
        (b'{"rows": [1, 2]}', "rows row 1 is 1, not an object of columns"),
        (
            json.dumps({"results": {"a": 1}, "topology": "t", "simulated_time_ps": 1}).encode(),
            "results is an object, not a list of rows",
        ),
        (b'{"rows": [{"time_us": 1' + b"0" * 5000 + b"}]}", "not valid JSON"),
    ],
    ids=[
        "binary",
        "latin-1",
        "utf-16",
        "deep",
        "deep-row",
        "empty",
        "non-object-rows",
        "results-object",
        "huge-int",
    ],
)
def test_unreadable_inputs_are_one_error_line(tmp_path: Path, capsys, content, fragment) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    good = _write(tmp_path / "good.json", _rows())
    assert main(["regress", good, str(bad)]) == 2
    line = _error_line(capsys)
    assert str(bad) in line and fragment in line


def test_a_csv_row_with_more_cells_than_the_header_is_an_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "shifted.csv"
    path.write_text("op,size_B,time_us\nall_reduce,4096,10\nall_reduce,8192,,20\n")
    assert main(["regress", str(path), str(path)]) == 2
    assert "CSV row 2 has 4 cells but the header has 3 columns" in _error_line(capsys)


def test_empty_and_header_only_csv(tmp_path: Path, capsys) -> None:
    good = _write(tmp_path / "good.json", _rows())
    for text, fragment in (("", "no header row"), ("op,size_B,time_us\n", "no result rows")):
        path = tmp_path / "r.csv"
        path.write_text(text)
        assert main(["regress", good, str(path)]) == 2
        assert fragment in _error_line(capsys)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, capsys) -> None:
    import os

    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    good = _write(tmp_path / "good.json", _rows())
    assert main(["regress", good, str(fifo)]) == 2
    assert "a FIFO" in _error_line(capsys)


# --- what must still work ---------------------------------------------------------------------


def test_real_regressions_and_improvements_are_still_told_apart(tmp_path: Path, capsys) -> None:
    assert _regress(tmp_path, _rows(), _rows((10.0, 40.0, 40.0)))[0] == 1
    out = capsys.readouterr().out
    assert "+100.00%" in out and "regression (slower)" in out
    assert _regress(tmp_path, _rows(), _rows((10.0, 10.0, 40.0)))[0] == 0
    assert "-50.00%" in capsys.readouterr().out
    # A NaN in a column that is not a time (a measured rate) does not block the comparison.
    with_nan_rate = [{**row, "gbps": "NaN"} for row in _rows((10.0, 40.0, 40.0))]
    assert _regress(tmp_path, _rows(), with_nan_rate)[0] == 1


def test_points_in_one_file_only(tmp_path: Path, capsys) -> None:
    assert _regress(tmp_path, _rows(), _rows()[:2])[0] == 1  # missing in current: regression
    assert "missing in current" in capsys.readouterr().out
    more = [*_rows(), {"op": "all_reduce", "size_B": 1 << 22, "time_us": 9.0, "checked": True}]
    assert _regress(tmp_path, _rows(), more)[0] == 0
    assert "new (not in baseline)" in capsys.readouterr().out
    assert _regress(tmp_path, _rows(), more, "--fail-on-change")[0] == 1


def test_failed_points_compare_on_their_error(tmp_path: Path, capsys) -> None:
    failed = [{"op": "all_reduce", "size_B": s, "error": "boom"} for s in SIZES]
    assert _regress(tmp_path, _rows(), failed, "--key", "size_B")[0] == 1
    assert "error: boom" in capsys.readouterr().out
    assert _regress(tmp_path, failed, _rows(), "--key", "size_B")[0] == 0
    assert "error fixed" in capsys.readouterr().out


def test_compare_api_counts_incomparable_points_as_regressions() -> None:
    comparison = compare(_rows(), _set(_rows(), 1, time_us=float("nan")))
    assert comparison.has_regression
    assert [p.status for p in comparison.points] == ["ok", "incomparable", "ok"]
    assert comparison.points[1].reasons == ("time_us is NaN in current row 2",)
    with pytest.raises(ConfigError, match="--key 'nope' is not a column of baseline"):
        compare(_rows(), _rows(), keys=["nope"])
    with pytest.raises(ConfigError, match="tolerance"):
        compare(_rows(), _rows(), tolerance=float("nan"))


def test_csv_nan_and_negative_times_read_back(tmp_path: Path, capsys) -> None:
    base, cur = tmp_path / "base.csv", tmp_path / "cur.csv"
    base.write_text("op,size_B,time_us\nall_reduce,4096,10\nall_reduce,8192,20\n")
    cur.write_text("op,size_B,time_us\nall_reduce,4096,nan\nall_reduce,8192,-1\n")
    assert main(["regress", str(base), str(cur)]) == 2
    line = _error_line(capsys)
    assert "2 of 2 points cannot be compared" in line  # a CSV has no whole-run row
    assert f"time_us is NaN in {cur} row 1" in line and "1 more" in line
    assert len(load_rows(cur)) == 2


def test_a_partial_report_is_not_a_faster_run(tmp_path: Path, capsys) -> None:
    """A run stopped by --max-sim-time wrote its report at the stop: its time is where
    it stopped.  Against the full run it is a regression naming the stop, not an
    improvement; the full run against it is an improvement (the error is gone)."""
    script = tmp_path / "steps.py"
    script.write_text(
        "import kernbench.torch as torch\n"
        "import kernbench.torch.distributed as dist\n\n\n"
        "def main():\n"
        "    dist.init_process_group()\n"
        "    t = torch.ones(1 << 12)\n"
        "    for _ in range(8):\n"
        "        dist.all_reduce(t)\n"
    )
    full, partial = tmp_path / "full.json", tmp_path / "partial.json"
    common = ["run", str(script), "--topology", "ring8", "--timing-only", "--report"]
    assert main([*common, str(full)]) == 0
    assert main([*common, str(partial), "--max-sim-time", "20us"]) == 2
    capsys.readouterr()
    (run,) = [row for row in load_rows(partial, include_run=True) if row.get("row") == "run"]
    assert run["error"].startswith("stopped at ") and "--max-sim-time" in run["error"]

    assert main(["regress", str(full), str(partial)]) == 1
    out = capsys.readouterr().out
    assert "regression (error: stopped at " in out and "1 regressions" in out
    (point,) = compare(
        load_rows(full, include_run=True), load_rows(partial, include_run=True)
    ).points
    assert point.status == "regression" and point.change < 0

    (point,) = compare(
        load_rows(partial, include_run=True), load_rows(full, include_run=True)
    ).points
    assert (point.status, point.reasons) == ("improvement", ("error fixed",))
    assert main(["regress", str(partial), str(full)]) == 0


@pytest.mark.parametrize(
    ("baseline", "current"),
    [
        ("op,size_B,time_us,wrong,error\nadd,1024,10,n/a,boom\n", "add,1024,10,7,\n"),
        ("op,size_B,wrong,error\nadd,1024,n/a,boom\n", "add,1024,7,\n"),  # no time
    ],
)
def test_an_error_fixed_with_wrong_values_is_a_regression(tmp_path, baseline, current):
    base, cur = tmp_path / "base.csv", tmp_path / "cur.csv"
    base.write_text(baseline)
    cur.write_text(baseline.splitlines()[0] + "\n" + current)
    (point,) = compare(load_rows(base), load_rows(cur)).points
    assert (point.status, point.reasons) == ("regression", ("wrong n/a -> 7", "error fixed"))


# --- CSV files read strictly --------------------------------------------------------------------


def _csv(tmp_path: Path, text: str, name: str = "r.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            'op,size_B,time_us\nall_reduce,4096,10\nall_reduce,"8192,20\n',
            "line 3: a quoted cell is never closed (the file ends inside it)",
        ),
        ('op,size_B,time_us\n"all"_reduce,4096,10\n', "line 2: not readable as CSV"),
        (
            "op,size_B,time_us\nall_reduce,4096,10\nall_reduce,8192\n",
            "line 3: CSV row 2 has 2 cells but the header has 3 columns",
        ),
        ('op,size_B,time_us\n"all\nreduce",4096,10\nx,1\n', "line 4: CSV row 2 has 2 cells"),
    ],
    ids=["unterminated-quote", "text-after-quote", "short-row", "line-after-quoted-newline"],
)
def test_a_malformed_csv_names_the_file_and_line(tmp_path: Path, capsys, text, fragment) -> None:
    bad = _csv(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_rows(bad)
    assert str(info.value).startswith(f"{bad}: ") and fragment in str(info.value)
    assert main(["regress", str(bad), str(bad)]) == 2
    line = _error_line(capsys)
    assert str(bad) in line and fragment in line


@pytest.mark.parametrize("cell", ["NAN", "Inf", "+inf", "infinity", "-nan", "+Infinity"])
def test_a_nan_or_infinity_spelled_otherwise_is_an_error(tmp_path: Path, capsys, cell) -> None:
    bad = _csv(tmp_path, f"op,size_B,time_us\nall_reduce,4096,10\nall_reduce,8192,{cell}\n")
    with pytest.raises(ConfigError) as info:
        load_rows(bad)
    assert str(info.value) == (
        f"{bad}: line 3 (row 2), column 'time_us': {cell!r} is not a number KernBench reads; "
        "NaN and the infinities are written NaN, Infinity and -Infinity (or nan, inf and -inf)"
    )


def test_a_number_too_large_for_a_float_is_an_error(tmp_path: Path) -> None:
    bad = _csv(tmp_path, "op,size_B,time_us\nall_reduce,4096,1e999\n")
    with pytest.raises(ConfigError, match=r"line 2 \(row 1\), column 'time_us': '1e999' is too"):
        load_rows(bad)


def test_only_plain_numbers_are_numbers(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "a,b,c,d,e,f,g,h\n"
        "1_000,12,-3,2.5e3,1E-2, 7,+5,007\n"
        "NaN,Infinity,-Infinity,nan,inf,-inf,true,\u0661\u0662\n",
    )
    first, second = load_rows(path)
    assert first == {
        "a": "1_000", "b": 12, "c": -3, "d": 2500.0, "e": 0.01, "f": " 7", "g": "+5", "h": "007"
    }  # fmt: skip
    assert [type(v) for v in first.values()] == [str, int, int, float, float, str, str, str]
    assert str(second["a"]) == str(second["d"]) == "nan"
    assert second["b"] == second["e"] == float("inf") and second["c"] == second["f"] == -second["b"]
    assert second["g"] is True and second["h"] == "\u0661\u0662"


def test_a_time_written_with_underscores_is_not_a_number(tmp_path: Path, capsys) -> None:
    base = _csv(tmp_path, "op,size_B,time_us\nall_reduce,4096,1000\n", "base.csv")
    cur = _csv(tmp_path, "op,size_B,time_us\nall_reduce,4096,1_000\n", "cur.csv")
    assert main(["regress", str(base), str(cur)]) == 2
    assert f"time_us is text '1_000' in {cur} row 1, not a number" in _error_line(capsys)


def test_a_valid_csv_with_blank_lines_and_quoted_cells_loads(tmp_path: Path) -> None:
    path = _csv(tmp_path, 'op,size_B,time_us\n\n"all_reduce, ring",4096,10\n\n')
    assert load_rows(path) == [{"op": "all_reduce, ring", "size_B": 4096, "time_us": 10}]
