"""The command line: help, topo show on every bundled topology, user errors."""

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


@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda p: p.stem)
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


@pytest.mark.parametrize("argv", [["--help"], ["topo", "--help"], ["topo", "show", "--help"]])
def test_help_explains_itself(argv: list[str], capsys) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Usage:" in out and len(out.splitlines()) > 4


def test_usage_errors_exit_2(capsys) -> None:
    assert main(["topo", "show"]) == 2
    assert "Missing argument" in capsys.readouterr().err
