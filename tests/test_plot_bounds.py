"""``kernbench plot`` is bounded and writes the format its output name asks for."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from kernbench.bench.plot import MAX_GROUPS, plot_results
from kernbench.cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _csv(path: Path, groups: int, sizes=(4096, 65536)) -> str:
    lines = ["algorithm,size_B,busbw_GBps"]
    lines += [f"algo{g},{s},{g % 7 + s / 1e5}" for g in range(groups) for s in sizes]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _svg_texts(path: Path) -> list[str]:
    """The text elements of a matplotlib SVG (it writes each one's text in a comment)."""
    return re.findall(r"<!-- (.*?) -->", path.read_text())


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_twenty_thousand_groups_take_seconds_and_the_legend_says_what_was_left_out(
    tmp_path: Path, capsys
) -> None:
    results = _csv(tmp_path / "r.csv", 20_000)
    out = tmp_path / "groups.svg"
    start = time.perf_counter()
    assert main(["plot", results, "-o", str(out), "--group-by", "algorithm"]) == 0
    assert time.perf_counter() - start < 20  # minutes before the cap; well under 2 s alone
    assert f"drew {MAX_GROUPS} of 20000 groups" in capsys.readouterr().out
    texts = _svg_texts(out)
    assert f"algo{MAX_GROUPS - 1}" in texts and f"algo{MAX_GROUPS}" not in texts
    assert f"... {20_000 - MAX_GROUPS} more groups not drawn" in texts


def test_max_groups_draws_more_or_fewer(tmp_path: Path, capsys) -> None:
    results = _csv(tmp_path / "r.csv", 30)
    out = tmp_path / "few.svg"
    args = ["plot", results, "-o", str(out), "--group-by", "algorithm", "--max-groups"]
    assert main([*args, "3"]) == 0
    assert "drew 3 of 30 groups" in capsys.readouterr().out
    assert "... 27 more groups not drawn" in _svg_texts(out)
    assert main([*args, "30"]) == 0
    assert "drew" not in capsys.readouterr().out
    assert not any("not drawn" in text for text in _svg_texts(out))
    assert main([*args, "0"]) == 2  # click's own usage error
    assert "--max-groups" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "signature"),
    [
        ("chart.svg", b"<?xml"),
        ("chart.SVG", b"<?xml"),
        ("chart.pdf", b"%PDF-"),
        ("chart.eps", b"%!PS-Adobe"),
        ("chart.png", PNG_SIGNATURE),
        ("chart", PNG_SIGNATURE),
    ],
)
def test_the_extension_picks_the_format(tmp_path: Path, name: str, signature: bytes) -> None:
    results = _csv(tmp_path / "r.csv", 3)
    out = tmp_path / name
    assert main(["plot", results, "-o", str(out)]) == 0
    assert out.read_bytes().startswith(signature)


@pytest.mark.parametrize("name", ["chart.txt", "chart.json", "chart.pgf", "chart.png.bak"])
def test_an_unsupported_extension_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys, name: str
) -> None:
    results = _csv(tmp_path / "r.csv", 3)
    out = tmp_path / name
    assert main(["plot", results, "-o", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(out) in line and "cannot be written as" in line and ".svg" in line
    assert not out.exists()
    assert main(["plot", "--breakdown", results, "-o", str(out)]) == 2
    assert "cannot be written as" in _one_error_line(capsys.readouterr().err)


def _report(**changes) -> dict:
    report = {
        "topology": "ring8",
        "simulated_time_ps": 10**8,
        "bytes_by_link_class": {"ring_link": 3 << 20},
        "busiest_component": {"name": "link:a->b", "busy_ps": 10**7, "utilisation": 0.1},
    }
    return report | changes


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"bytes_by_link_class": [1, 2]}, "bytes_by_link_class must map"),
        ({"bytes_by_link_class": {"ring": "lots"}}, "bytes_by_link_class.ring must be"),
        ({"busiest_component": {"busy_ps": 1}}, "busiest_component must be an object"),
        ({"busiest_component": {"name": "x", "busy_ps": -1, "utilisation": 0.1}}, "busy_ps"),
        ({"simulated_time_ps": "NaN"}, "simulated_time_ps must be a finite number"),
        ({"metadata": [1]}, None),  # not needed for a label: drawn
    ],
)
def test_breakdown_of_a_malformed_report_is_one_error_line(
    tmp_path: Path, capsys, changes: dict, fragment: str | None
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_report(**changes)))
    status = main(["plot", "--breakdown", str(path), "-o", str(tmp_path / "b.png")])
    if fragment is None:
        assert status == 0
        return
    assert status == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(path) in line and fragment in line


def test_breakdown_draws_at_most_max_groups_reports(tmp_path: Path, capsys) -> None:
    paths = []
    for number in range(3):
        path = tmp_path / f"report{number}.json"
        path.write_text(json.dumps(_report()))
        paths.append(str(path))
    out = tmp_path / "b.svg"
    assert main(["plot", "--breakdown", *paths, "-o", str(out), "--max-groups", "2"]) == 0
    assert "drew 2 of 3 reports" in capsys.readouterr().out
    assert "busiest component (1 more reports not drawn)" in _svg_texts(out)


def test_numbers_past_the_float_range_are_left_out_not_a_traceback(tmp_path: Path) -> None:
    rows = [
        {"size_B": 4096, "busbw_GBps": 1.0},
        {"size_B": 8192, "busbw_GBps": 2.0},
        {"size_B": 10**400, "busbw_GBps": 3.0},
    ]
    summary = plot_results(rows, tmp_path / "x.png")
    assert (summary.groups, summary.drawn, summary.format) == (1, 1, "png")


def test_group_values_that_are_lists_from_several_files(tmp_path: Path, capsys) -> None:
    rows = [
        {"algorithm": [1, 2], "size_B": 4096, "busbw_GBps": 1.0},
        {"algorithm": [3], "size_B": 8192, "busbw_GBps": 2.0},
    ]
    paths = []
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps({"rows": rows}))
        paths.append(str(tmp_path / name))
    assert main(["plot", *paths, "-o", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").read_bytes().startswith(PNG_SIGNATURE)


def test_the_help_gives_the_default_group_limit(capsys) -> None:
    assert main(["plot", "--help"]) == 0
    assert f"default {MAX_GROUPS}." in " ".join(capsys.readouterr().out.split())


def test_dollar_signs_in_names_values_and_title_are_drawn_as_written(tmp_path: Path) -> None:
    """Mathtext would parse "$$" (or "$\\alpha$") from the data and fail while drawing."""
    path = tmp_path / "in.csv"
    path.write_text("op,size_B,$\\x$\n$$$$,4096,1\n$$$$,8192,2\n$a$,4096,3\n")
    out = tmp_path / "p.svg"
    status = main(["plot", str(path), "-o", str(out), "--y", "$\\x$", "--title", "$\\alpha$ $$"])
    assert status == 0
    texts = _svg_texts(out)
    assert {"$\\alpha$ $$", "$$$$", "$a$"} <= set(texts)


def test_dollar_signs_in_a_breakdown_are_drawn_as_written(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    busiest = {"name": "$$x$$", "busy_ps": 10**7, "utilisation": 0.1}
    path.write_text(json.dumps(_report(bytes_by_link_class={"$$": 5}, busiest_component=busiest)))
    out = tmp_path / "b.svg"
    assert main(["plot", "--breakdown", str(path), "-o", str(out)]) == 0
    assert "$$" in _svg_texts(out)


def test_numbers_whose_span_overflows_are_left_out_not_exit_70(tmp_path: Path, capsys) -> None:
    """-1e308 and 1e308 are finite, but the axis between them is not."""
    path = tmp_path / "in.csv"
    path.write_text("size_B,busbw_GBps\n4096,-1e308\n8192,1e308\n16384,2\n32768,3\n")
    assert main(["plot", str(path), "-o", str(tmp_path / "p.png")]) == 0
    path.write_text("size_B,busbw_GBps\n-1e308,1\n1e308,2\n")
    assert main(["plot", str(path), "-o", str(tmp_path / "p.png")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == (
        "error: no row has numbers in both 'size_B' and 'busbw_GBps' "
        "(finite, of magnitude at most 1e+300: larger ones are left out)"
    )
