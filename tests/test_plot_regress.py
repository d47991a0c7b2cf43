"""Regression checks against stored baselines, ``compare``, and the plot/regress commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernbench.bench.plot import axis_label, plot_breakdown, plot_results
from kernbench.bench.regress import (
    compare,
    format_comparison,
    key_columns,
    load_rows,
    parse_tolerance,
    provenance_notes,
)
from kernbench.bench.runner import run_script, write_csv_atomic
from kernbench.cli import main
from kernbench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ROOT / "tests" / "baselines"
MANIFEST = yaml.safe_load((BASELINES / "manifest.yaml").read_text())["baselines"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _rows(time_us: float = 10.0, sizes=(4096, 65536, 1 << 20), **extra) -> list[dict]:
    return [
        {
            "op": "all_reduce",
            "size_B": size,
            "count": size // 4,
            "type": "float32",
            "redop": "sum",
            "algorithm": "ring",
            "time_us": time_us * (i + 1),
            "algbw_GBps": size / (time_us * (i + 1)) / 1e3,
            "busbw_GBps": 1.75 * size / (time_us * (i + 1)) / 1e3,
            "checked": True,
            "world_size": 8,
            **extra,
        }
        for i, size in enumerate(sizes)
    ]


def _report(rows: list[dict], *, topology: str = "ring8", time_ps: int = 10**8) -> dict:
    return {
        "topology": topology,
        "world_size": 8,
        "timing_only": True,
        "simulated_time_ps": time_ps,
        "per_rank_time_ps": [time_ps] * 8,
        "bytes_by_link_class": {"ring_link": 3 << 20, "pe_port": 1 << 20},
        "busiest_component": {
            "name": "link:sip0->sip1",
            "class": "ring_link",
            "bytes": 1 << 20,
            "busy_ps": time_ps // 4,
            "utilisation": 0.25,
        },
        "collectives": [],
        "results": rows,
        "metadata": {"script": "benches/allreduce_perf.py"},
    }


def _write(path: Path, document: dict) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 10_000  # axes, labels and lines, not an empty canvas
    assert not list(path.parent.glob(f".{path.name}.*"))  # no temporary file left behind


# --- baselines: re-run each and compare ----------------------------------------------


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["name"])
def test_baseline_reruns_without_regression(entry: dict, tmp_path: Path) -> None:
    baseline_path = BASELINES / entry["report"]
    baseline = json.loads(baseline_path.read_text())
    # The stored report must come from the command the manifest (and README) gives.
    assert baseline["metadata"]["script_args"] == entry["args"]
    assert baseline["metadata"]["overrides"] == entry["overrides"]
    assert baseline["metadata"]["timing_only"] == entry["timing_only"]
    assert Path(baseline["metadata"]["topology_file"]) == Path(entry["topology"])

    current_path = tmp_path / "current.json"
    run_script(
        str(ROOT / entry["script"]),
        topology=str(ROOT / entry["topology"]),
        timing_only=entry["timing_only"],
        overrides=entry["overrides"],
        script_args=entry["args"],
        report_path=str(current_path),
        echo=lambda _text: None,
    )
    comparison = compare(
        load_rows(baseline_path, include_run=True),
        load_rows(current_path, include_run=True),
        tolerance=0.02,
    )
    why = "\n".join([format_comparison(comparison), *provenance_notes(baseline_path, current_path)])
    assert not comparison.regressions, f"see tests/baselines/README.md\n{why}"
    assert not comparison.missing and not comparison.new
    assert all(p.change == 0.0 for p in comparison.points)  # deterministic: identical times


def test_readme_gives_every_baseline_command() -> None:
    readme = (BASELINES / "README.md").read_text()
    for entry in MANIFEST:
        assert f"--report tests/baselines/{entry['report']}" in readme
        assert entry["script"] in readme and entry["topology"] in readme


# --- compare ---------------------------------------------------------------------------


def test_five_percent_slower_is_a_regression_at_two_percent() -> None:
    comparison = compare(_rows(10.0), _rows(10.5), tolerance=0.02)
    assert comparison.has_regression
    assert [p.status for p in comparison.points] == ["regression"] * 3
    assert comparison.points[0].change == pytest.approx(0.05)
    assert comparison.points[0].metric == "time_us"


def test_change_within_tolerance_is_ok() -> None:
    comparison = compare(_rows(10.0), _rows(10.15), tolerance=0.02)
    assert not comparison.has_change
    assert {p.status for p in comparison.points} == {"ok"}


def test_faster_is_an_improvement_not_a_regression() -> None:
    comparison = compare(_rows(10.0), _rows(9.0), tolerance=0.02)
    assert not comparison.has_regression and comparison.has_change
    assert len(comparison.improvements) == 3
    assert comparison.improvements[0].change == pytest.approx(-0.10)


def test_rows_missing_on_either_side_are_reported() -> None:
    baseline = _rows(sizes=(4096, 65536, 1 << 20))
    current = _rows(sizes=(4096, 65536, 1 << 22))
    comparison = compare(baseline, current)
    assert [p.key["size_B"] for p in comparison.missing] == [1 << 20]
    assert [p.key["size_B"] for p in comparison.new] == [1 << 22]
    assert comparison.has_regression  # missing in current counts as a regression
    only_new = compare(_rows(sizes=(4096,)), _rows(sizes=(4096, 65536)))
    assert not only_new.has_regression and only_new.has_change


def test_values_no_longer_checked_is_a_regression() -> None:
    current = _rows()
    current[1]["checked"] = False
    comparison = compare(_rows(), current)
    assert [p.status for p in comparison.points] == ["ok", "regression", "ok"]
    assert comparison.points[1].reasons == ("values no longer checked",)
    assert not compare(_rows(checked=False), _rows(checked=True)).has_regression


def test_different_values_digest_is_a_regression() -> None:
    baseline = _rows(values_digest="abc")
    current = _rows(values_digest="abc")
    current[0]["values_digest"] = "abd"
    comparison = compare(baseline, current)
    assert comparison.points[0].status == "regression"
    assert "values differ" in comparison.points[0].reasons


def test_wrong_element_counts_are_verdicts_not_keys() -> None:
    """A perf row's #wrong going 0 -> 5 is a regression at that point, not a point
    missing from current plus a new one; an unchecked run ("n/a") matches a checked one."""
    baseline = _rows(wrong=0, in_place_wrong=0)
    current = _rows(wrong=0, in_place_wrong=0)
    current[1].update(in_place_wrong=5, checked=False)
    comparison = compare(baseline, current)
    assert "wrong" not in comparison.keys and "in_place_wrong" not in comparison.keys
    assert [p.status for p in comparison.points] == ["ok", "regression", "ok"]
    assert comparison.points[1].reasons == ("values no longer checked", "in_place_wrong 0 -> 5")
    assert not comparison.missing and not comparison.new
    unchecked = compare(baseline, _rows(wrong="n/a", in_place_wrong="n/a", checked="n/a"))
    assert [p.reasons for p in unchecked.points] == [("values no longer checked",)] * 3
    assert not unchecked.missing and not unchecked.new
    assert not compare(_rows(wrong=3), _rows(wrong=3)).has_regression
    assert compare(_rows(wrong="n/a"), _rows(wrong=1)).points[0].reasons == ("wrong n/a -> 1",)


def test_default_keys_leave_out_metrics_values_and_measured_rates() -> None:
    baseline = [{**row, "gbps": 1.5, "values_digest": "x"} for row in _rows()]
    keys = key_columns(baseline, _rows(topology="ring8"))
    assert keys == ["op", "size_B", "count", "type", "redop", "algorithm", "world_size"]


MEASURED = {
    "gbps": 100.0,
    "tflops": 3.0,
    "flops": 2 * 64**3,
    "tflops_per_rank": 1.0,
    "bytes_loaded": 65536,
    "bytes_stored": 16384,
    "speedup": 2.0,
    "overlap_efficiency": 1.0,
    "tokens_per_s": 1000,
    "Step_US": 7,
}


def test_a_measured_column_is_never_a_key_even_when_whole() -> None:
    rows = _rows(**MEASURED)
    assert key_columns(rows, rows) == [
        "op", "size_B", "count", "type", "redop", "algorithm", "world_size"
    ]  # fmt: skip


def test_a_fractional_column_named_as_a_setting_is_a_key() -> None:
    rows = [{**row, "alpha": 0.5 * (i + 1)} for i, row in enumerate(_rows())]
    assert "alpha" in key_columns(rows, rows)
    assert not compare(rows, rows).has_change


def test_a_measurement_that_changes_with_the_time_is_a_slower_point_not_a_missing_one() -> None:
    baseline = _rows(bytes_loaded=65536, gbps=100.0)
    current = [{**row, "bytes_loaded": 131072, "gbps": 50.0} for row in _rows(20.0)]
    comparison = compare(baseline, current)
    assert [p.status for p in comparison.points] == ["regression"] * 3
    assert not comparison.missing and not comparison.new


def test_whole_run_time_is_compared_when_there_are_no_time_columns() -> None:
    baseline = [{"topology": "tiny", "simulated_time_ps": 1000}]
    comparison = compare(baseline, [{"topology": "tiny", "simulated_time_ps": 1100}])
    assert comparison.points[0].metric == "simulated_time_ps"
    assert comparison.points[0].status == "regression"


def test_every_time_column_is_compared_not_only_the_first() -> None:
    """An in-place slowdown with the out-of-place time unchanged is a regression."""
    baseline = [{**row, "in_place_time_us": 10.0} for row in _rows(10.0)]
    current = [{**row, "in_place_time_us": 30.0} for row in _rows(10.0)]
    comparison = compare(baseline, current)
    assert [p.status for p in comparison.points] == ["regression"] * 3
    assert comparison.points[0].metric == "time_us" and comparison.points[0].change == 0.0
    assert comparison.points[0].reasons == ("slower", "in_place_time_us +200.00%")


def test_a_bench_with_its_own_time_columns_is_compared_on_them() -> None:
    """dp_training_step's rows have step_us and comm_us, none of time_us and the like."""
    baseline = [{"layers": 2, "step_us": 100.0, "comm_us": 40.0, "checked": True}]
    same = compare(baseline, [dict(baseline[0])])
    assert [p.status for p in same.points] == ["ok"]
    assert same.points[0].metric == "step_us"
    slower = compare(baseline, [{**baseline[0], "comm_us": 50.0}])
    assert slower.points[0].status == "regression"
    assert "comm_us +25.00%" in slower.points[0].reasons
    wall = compare(baseline, [{**baseline[0], "wall_s": 9.0}], keys=["layers"])
    assert wall.points[0].status == "ok"  # a wall time is the simulator's, not the program's
    rate = [{**baseline[0], "tokens_per_s": 1000.0}]
    faster = compare(rate, [{**rate[0], "step_us": 90.0, "tokens_per_s": 1111.0}], keys=["layers"])
    assert faster.points[0].status == "improvement"  # a rate going up is not a slower time


def test_a_time_column_in_one_row_only_is_incomparable() -> None:
    baseline = [{"size": 1, "time_us": 10.0, "comm_us": 4.0}]
    for current in (
        [{"size": 1, "time_us": 10.0}],
        [{"size": 1, "time_us": 10.0, "comm_us": None}],
    ):
        (point,) = compare(baseline, current).points
        assert point.status == "incomparable" and point.reasons == (
            "comm_us only in baseline row 1",
        )
    (point,) = compare(
        [{"size": 1, "time_us": 1.0}], [{"size": 1, "time_us": 1.0, "x_ms": 2.0}]
    ).points
    assert point.reasons == ("x_ms only in current row 1",)


@pytest.mark.parametrize("column", ["time_per_step_us", "latency_ns", "Time_US"])
def test_times_are_read_by_their_unit_whatever_else_the_name_says(column) -> None:
    (point,) = compare([{"size": 1, column: 5.0}], [{"size": 1, column: 500.0}]).points
    assert point.status == "regression" and point.metric == column


def test_where_a_row_was_made_is_not_part_of_its_key() -> None:
    """A sweep's point_id hashes its paths, topology_file is a path: another checkout or
    path spelling of the same runs still matches."""
    baseline = [{**row, "point_id": "a1", "topology_file": "/x/ring8.yaml"} for row in _rows()]
    current = [
        {**row, "point_id": "b2", "run.topology_file": "topologies/ring8.yaml"} for row in _rows()
    ]
    assert "point_id" not in key_columns(baseline, current)
    comparison = compare(baseline, current)
    assert [p.status for p in comparison.points] == ["ok"] * 3


def test_explicit_keys_and_bad_tolerance() -> None:
    comparison = compare(_rows(), _rows(algorithm="tree"), keys=["size_B"])
    assert not comparison.has_change
    with pytest.raises(ConfigError, match="tolerance"):
        compare(_rows(), _rows(), tolerance=-0.1)


@pytest.mark.parametrize(
    ("text", "value"), [("2%", 0.02), ("0.02", 0.02), (0.05, 0.05), ("150%", 1.5), ("0", 0.0)]
)
def test_tolerance_parsing(text, value) -> None:
    assert parse_tolerance(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["-1%", "abc", "2", "nan", "%"])
def test_bad_tolerance_names_the_option(text) -> None:
    with pytest.raises(ConfigError, match="--tolerance"):
        parse_tolerance(text)


# --- reading results files -----------------------------------------------------------


def test_reports_summaries_and_csv_give_the_same_rows(tmp_path: Path) -> None:
    rows = _rows()
    report_rows = load_rows(_write(tmp_path / "r.json", _report(rows)))
    assert report_rows == [{"topology": "ring8", **row} for row in rows]
    with_run = load_rows(tmp_path / "r.json", include_run=True)
    assert with_run[-1]["row"] == "run" and with_run[-1]["simulated_time_ps"] == 10**8

    summary = {"points": 1, "ok": 1, "failed": [], "rows": report_rows}
    assert load_rows(_write(tmp_path / "summary.json", summary)) == report_rows

    write_csv_atomic(tmp_path / "r.csv", report_rows)
    assert load_rows(tmp_path / "r.csv") == report_rows  # numbers and booleans come back typed


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("trace.json", '{"traceEvents": []}', "JSON, but neither a run report"),
        ("notes.txt", "hello", "neither a run report"),
        ("empty.json", json.dumps(_report([]) | {"results": []}), "no result rows"),
    ],
)
def test_a_file_that_holds_no_results_is_an_error_naming_it(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_rows(path)
    assert str(path) in str(info.value)


# --- plots --------------------------------------------------------------------------------


def test_plot_results_writes_a_png(tmp_path: Path) -> None:
    rows = [*_rows(topology="ring8"), *_rows(5.0, topology="fc8")]
    rows.append({"op": "all_reduce", "size_B": 8192, "skipped": "does not divide"})
    rows += _rows(7.0, topology="fc8", args=["--iters", "2"])  # sweep columns may be lists
    out = tmp_path / "plots" / "by_args.png"
    plot_results(rows, out, group_by=["topology", "args"])
    _assert_png(out)
    out = tmp_path / "plots" / "busbw.png"
    plot_results(rows, out, title="all_reduce")
    _assert_png(out)


def test_series_that_share_sizes_are_separate_lines_not_one(tmp_path: Path, capsys) -> None:
    """`-d all -o all` rows: sum and avg (int8 and float32) at one size are different
    series; one line through all of them would zigzag.  count, which follows the size
    and the type, does not name a series."""
    rows = [
        {**row, "type": dtype, "redop": redop, "count": row["size_B"] // width}
        for dtype, width in (("int8", 1), ("float32", 4))
        for redop, time_us in (("sum", 10.0), ("avg", 12.0))
        for row in _rows(time_us)
    ]
    summary = plot_results(rows, tmp_path / "all.png")
    assert summary.group_by == ("type", "redop") and summary.groups == 4
    _assert_png(tmp_path / "all.png")
    assert plot_results(_rows(), tmp_path / "one.png").group_by == ()
    write_csv_atomic(tmp_path / "all.csv", rows)
    out = tmp_path / "cli.png"
    assert main(["plot", str(tmp_path / "all.csv"), "-o", str(out), "--max-groups", "3"]) == 0
    assert "drew 3 of 4 groups" in capsys.readouterr().out


def test_plot_breakdown_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "breakdown.png"
    plot_breakdown([_report(_rows()), _report(_rows(), topology="fc8", time_ps=10**7)], out)
    _assert_png(out)


def test_plot_names_the_columns_when_one_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'bandwidth' is not a column.*busbw_GBps"):
        plot_results(_rows(), tmp_path / "x.png", y="bandwidth")
    assert not (tmp_path / "x.png").exists()


def test_axis_labels_carry_units() -> None:
    assert axis_label("size_B") == "size (B)"
    assert axis_label("time_us") == "time (µs)"
    assert axis_label("busbw_GBps").startswith("busbw (GB/s")
    assert axis_label("count") == "count"


# --- the command line ----------------------------------------------------------------------


def test_cli_plot_from_report_and_csv(tmp_path: Path, capsys) -> None:
    report = _write(tmp_path / "r.json", _report(_rows()))
    write_csv_atomic(tmp_path / "r.csv", _rows(5.0, topology="fc8"))
    out = tmp_path / "busbw.png"
    assert main(["plot", report, str(tmp_path / "r.csv"), "-o", str(out)]) == 0
    assert f"plot: {out}" in capsys.readouterr().out
    _assert_png(out)
    out_time = tmp_path / "time.png"
    args = ["plot", report, "-o", str(out_time), "--y", "time_us", "--group-by", "algorithm"]
    assert main(args) == 0
    _assert_png(out_time)


def test_cli_plot_breakdown_of_baselines(tmp_path: Path) -> None:
    out = tmp_path / "breakdown.png"
    reports = [str(BASELINES / entry["report"]) for entry in MANIFEST]
    assert main(["plot", "--breakdown", *reports, "-o", str(out)]) == 0
    _assert_png(out)


def test_cli_plot_errors_exit_2_naming_the_file(tmp_path: Path, capsys) -> None:
    write_csv_atomic(tmp_path / "r.csv", _rows())
    out = str(tmp_path / "b.png")
    assert main(["plot", "--breakdown", str(tmp_path / "r.csv"), "-o", out]) == 2
    assert f"{tmp_path / 'r.csv'}: not a run report" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "nope.json"), "-o", out]) == 2
    assert "nope.json: results file not found" in capsys.readouterr().err


def test_cli_regress_exit_codes(tmp_path: Path, capsys) -> None:
    baseline = _write(tmp_path / "base.json", _report(_rows(10.0)))
    same = _write(tmp_path / "same.json", _report(_rows(10.0)))
    slower = _write(tmp_path / "slower.json", _report(_rows(10.5)))
    faster = _write(tmp_path / "faster.json", _report(_rows(9.0)))

    assert main(["regress", baseline, same, "--tolerance", "2%"]) == 0
    out = capsys.readouterr().out
    assert "common: " in out and "size_B" in out and "0 regressions" in out

    assert main(["regress", baseline, slower, "--tolerance", "2%"]) == 1
    assert "+5.00%" in capsys.readouterr().out
    assert main(["regress", baseline, slower, "--tolerance", "0.06"]) == 0

    assert main(["regress", baseline, faster]) == 0
    assert "improvement" in capsys.readouterr().out
    assert main(["regress", baseline, faster, "--fail-on-change"]) == 1

    assert main(["regress", baseline, str(tmp_path / "missing.json")]) == 2
    assert "missing.json: results file not found" in capsys.readouterr().err
    assert main(["regress", baseline, same, "--tolerance", "two"]) == 2
    assert "--tolerance 'two'" in capsys.readouterr().err


def test_regress_notes_when_the_runs_differ_in_script_or_flags(tmp_path: Path, capsys) -> None:
    before = _report(_rows()) | {"metadata": {"script_sha256": "aa", "timing_only": True}}
    after = _report(_rows()) | {"metadata": {"script_sha256": "bb", "timing_only": True}}
    paths = _write(tmp_path / "a.json", before), _write(tmp_path / "b.json", after)
    assert provenance_notes(*paths) == ["the script changed: script_sha256 'aa' -> 'bb'"]
    assert main(["regress", *paths]) == 0
    assert "note: the script changed" in capsys.readouterr().out


def test_csvs_of_runs_with_other_flags_compare_point_by_point(tmp_path: Path, capsys) -> None:
    """`kernbench run --csv` writes the run's --set and --seed into every row; like the
    same values in a report's metadata they say how the run was made, not which point
    a row is: the points still match, and a note says what differs."""

    def run_csv(name: str, rows: list[dict], **metadata) -> str:
        meta = {"topology": "ring8", "topology_digest": "ab", "kernbench_version": "0.1.0"}
        write_csv_atomic(tmp_path / name, rows, {**meta, "overrides": [], "seed": 0, **metadata})
        return str(tmp_path / name)

    baseline = run_csv("base.csv", _rows(10.0))
    current = run_csv("cur.csv", _rows(10.5), seed=1, overrides=["simulation.backend=fast"])
    comparison = compare(load_rows(baseline), load_rows(current))
    assert "seed" not in comparison.keys and "overrides" not in comparison.keys
    assert [p.status for p in comparison.points] == ["regression"] * 3
    assert provenance_notes(baseline, current) == [
        "the --set overrides differ: overrides '' -> 'simulation.backend=fast'",
        "the --seed differs: seed 0 -> 1",
    ]
    assert main(["regress", baseline, current]) == 1
    assert "note: the --seed differs: seed 0 -> 1" in capsys.readouterr().out
    # A bench's own seed column is one of its keys; the run's is then run.seed.
    own = [{**row, "seed": seed} for seed in (1, 2) for row in _rows()]
    keys = compare(load_rows(run_csv("own.csv", own)), load_rows(run_csv("own2.csv", own))).keys
    assert "seed" in keys and "run.seed" not in keys


def test_regress_exits_1_from_the_shell(tmp_path: Path) -> None:
    baseline = _write(tmp_path / "base.json", _report(_rows(10.0)))
    slower = _write(tmp_path / "slower.json", _report(_rows(11.0)))
    result = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "regress", baseline, slower],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "regression (slower)" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_report_regressed_against_its_own_csv_is_unchanged(tmp_path, capsys) -> None:
    from kernbench.cli import main

    report, table = tmp_path / "v.json", tmp_path / "v.csv"
    bench = str(Path(__file__).resolve().parents[1] / "benches" / "allreduce_perf.py")
    args = ["run", bench, "-t", "fc8", "--timing-only", "--report", str(report)]
    assert (
        main([*args, "--csv", str(table), "--", "-b", "1K", "-e", "4K", "-n", "1", "-w", "0"]) == 0
    )
    capsys.readouterr()
    assert main(["regress", str(report), str(table)]) == 0
    assert (
        "3 points, tolerance 0.02: 0 regressions (0 missing in current)" in capsys.readouterr().out
    )
