"""The command line: help, topo show and topo list on the bundled machines, user errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernbench.cli import main
from kernbench.topology import bundled_names, bundled_path

TOPOLOGIES = [bundled_path(name) for name in bundled_names()]


def test_every_bundled_topology_is_listed() -> None:
    names = {p.stem for p in TOPOLOGIES}
    assert {"tiny", "default", "multi_sip", "rack", "ring8"} <= names


@pytest.mark.parametrize(
    "path",
    # The 131,072-PE machine takes seconds; its own timed run is in test_topology_clos.py.
    [pytest.param(p, marks=pytest.mark.slow) if p.stem == "cluster128k" else p for p in TOPOLOGIES],
    ids=lambda p: p.stem,
)
def test_topo_show_works_on_every_bundled_topology(path: Path, capsys) -> None:
    assert main(["topo", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "PEs" in out and "bisection" in out and "diameter" in out


def test_topo_show_json_has_counts_memory_links_and_metrics(capsys) -> None:
    assert main(["topo", "show", "default", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"]["sips"] == 1
    assert summary["counts"]["cubes"] == 16
    assert summary["counts"]["pes"] == 128
    assert summary["memory_bytes"]["hbm_per_cube"] == 48 * 10**9
    assert summary["memory_bytes"]["tcm_per_pe"] == 16 * 10**6
    assert summary["links"]["cube_link"]["bandwidth_Bps"] == 256 * 10**9
    assert summary["links"]["cube_link"]["directed_links"] == 2 * (3 * 4 + 4 * 3)
    assert summary["network"]["diameter_hops"] == 8  # 3 + 3 mesh hops + 2 PE ports
    assert summary["network"]["bisection_Bps"] == 4 * 256 * 10**9


def test_set_overrides_apply(capsys) -> None:
    args = ["topo", "show", "default", "--json", "--set", "system.sips.count=4"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["pes"] == 512


def test_user_error_is_one_line_without_traceback_and_exit_2() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernbench.cli",
            "topo",
            "show",
            "topologies/default.yaml",
            "--set",
            "sip.cube_mesh.w=0",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        "error: topologies/default.yaml: sip.cube_mesh.w: must be > 0 (got 0)"
    )


def test_unknown_key_error_lists_valid_keys(tmp_path: Path, capsys, bundled_topology) -> None:
    bad = tmp_path / "bad.yaml"
    parent = bundled_topology("tiny")
    bad.write_text(f"extends: {parent}\nsystem:\n  sipz: 3\n")
    assert main(["topo", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "system.sipz: unknown key 'sipz'" in err
    assert "sips, interconnect, host_link, device_level" in err


@pytest.mark.parametrize(
    "argv", [["--help"], ["topo", "--help"], ["topo", "show", "--help"], ["topo", "list", "--help"]]
)
def test_help_explains_itself(argv: list[str], capsys) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Usage:" in out and len(out.splitlines()) > 4


def test_usage_errors_exit_2(capsys) -> None:
    assert main(["topo", "show"]) == 2
    assert "Missing argument" in capsys.readouterr().err


def test_topo_list_names_every_bundled_machine_with_its_shape_and_devices(capsys) -> None:
    assert main(["topo", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["machine", "SIPs"] and lines[0].endswith("description")
    rows = {line.split()[0]: line for line in lines[1:]}
    assert sorted(rows) == bundled_names()
    assert rows["rack"].split()[1:8] == ["8", "x", "16", "x", "8", "1024", "8"]
    assert rows["tiny"].split()[1:8] == ["1", "x", "1", "x", "4", "4", "1"]
    assert rows["ring8"].endswith("8 PEs in a bidirectional ring (one PE per SIP)")


def test_topo_list_json_matches_each_machine_as_topo_show_counts_it(capsys) -> None:
    assert main(["topo", "list", "--json"]) == 0
    machines = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in machines] == bundled_names()
    for machine in machines:
        assert Path(machine["file"]) == bundled_path(machine["name"])
        assert main(["topo", "show", machine["name"], "--json"]) == 0
        counts = json.loads(capsys.readouterr().out)["counts"]
        assert {key: machine[key] for key in counts} == counts
    default = next(m for m in machines if m["name"] == "default")
    assert (default["sips"], default["cubes_per_sip"], default["pes_per_cube"]) == (1, 16, 8)
    assert (default["device_level"], default["devices"]) == ("sip", 1)


def test_a_bundled_name_works_wherever_a_topology_file_does(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no topologies/ here
    assert main(["topo", "show", "ring8"]) == 0
    by_name = capsys.readouterr().out
    assert main(["topo", "show", "ring8.yaml"]) == 0
    assert capsys.readouterr().out == by_name
    assert by_name.startswith("ring8: ")


def test_an_ignored_key_from_set_is_a_user_error_naming_it(capsys) -> None:
    args = ["topo", "show", "multi_sip", "--set", "system.interconnect.switch_latency=300ns"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "system.interconnect.switch_latency: applies only to kind: switch" in err
    assert "Traceback" not in err
