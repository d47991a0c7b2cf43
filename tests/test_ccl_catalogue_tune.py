"""The catalogue file, run-level choices (--set ccl.*), kernbench tune and auto with a table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.catalogue import load_catalogue
from kernbench.errors import ConfigError

REQUIRED = ["ring_tcm_8", "ring_hbm_8", "ring_sram_8", "multi_cube", "mesh_2x2", "tree_binary_7"]


def test_bundled_catalogue_names_the_expected_configurations():
    catalogue = load_catalogue()
    assert set(REQUIRED) <= set(catalogue.configs)
    modules = {c.module for c in catalogue.configs.values()}
    assert {
        "ring",
        "bidirectional_ring",
        "binary_tree",
        "double_binary_tree",
        "recursive_doubling",
        "rabenseifner",
        "bruck",
        "mesh2d",
        "hierarchical",
        "direct",
    } <= modules
    assert catalogue.configs["ring_tcm_8"].buffer == "tcm"
    assert catalogue.configs["tree_binary_7"].world_size == 7


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("configs:\n  x: {module: ring, chunkz: 2}\n", "configs.x.chunkz: unknown key 'chunkz'"),
        ("configs:\n  x: {module: warp_drive}\n", "unknown algorithm 'warp_drive'"),
        ("configs:\n  x: {module: ring, buffer: l3}\n", "configs.x.buffer"),
        ("configs:\n  x: {module: ring, chunks: 0}\n", "configs.x.chunks: must be > 0"),
        (
            "defaults:\n  algorithm: {all_reduce: nope}\nconfigs: {}\n",
            "defaults.algorithm.all_reduce",
        ),
        ("configs:\n  x: {module: recursive_doubling, world_size: 6}\n", "cannot run on 6 ranks"),
    ],
)
def test_bad_catalogues_name_the_key(tmp_path, text, needle):
    path = tmp_path / "ccl.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_catalogue(path)
    assert needle in str(info.value)


def _all_reduce(nbytes: int) -> None:
    dist.init_process_group()
    t = torch.empty(nbytes // 4)
    for _ in range(2):
        dist.all_reduce(t)


def test_set_ccl_chooses_the_configuration_for_a_run():
    result = kernbench.simulate(
        _all_reduce,
        topology="topologies/ring8.yaml",
        timing_only=True,
        overrides=["ccl.all_reduce=ring_tcm_8"],
        args=(1 << 16,),
    )
    assert {c["config"] for c in result.report["collectives"]} == {"ring_tcm_8"}
    with pytest.raises(ConfigError, match="ccl.all_reduce"):
        kernbench.simulate(
            _all_reduce,
            topology="topologies/ring8.yaml",
            timing_only=True,
            overrides=["ccl.all_reduce=warp_drive"],
            args=(4096,),
        )


def test_buffer_location_changes_the_time():
    times = {}
    for config in ("ring_tcm_8", "ring_hbm_8", "ring_sram_8"):
        result = kernbench.simulate(
            _all_reduce,
            topology="topologies/ring8.yaml",
            timing_only=True,
            overrides=[f"ccl.all_reduce={config}", "cube.hbm.slice_bandwidth=100GB/s"],
            args=(8 << 20,),
        )
        record = result.report["collectives"][-1]
        times[config] = record["end_ps"] - record["start_ps"]
    # With slow HBM, landing messages in TCM or SRAM takes traffic off the HBM port.
    assert times["ring_tcm_8"] < times["ring_hbm_8"]
    assert times["ring_sram_8"] < times["ring_hbm_8"]


def test_first_call_pays_the_install_plan_later_calls_do_not():
    result = kernbench.simulate(
        _all_reduce, topology="topologies/ring8.yaml", timing_only=True, args=(4096,)
    )
    first, second = result.report["collectives"][:2]
    assert first["start_ps"] - first["launch_ps"] > second["start_ps"] - second["launch_ps"]
    installs = [row for row in result.trace if row.kind == "ipcq_install"]
    assert len(installs) == 8  # one neighbour table per PE, once


def test_kernbench_tune_writes_a_table_that_auto_uses(tmp_path):
    table_path = tmp_path / "table.yaml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernbench.cli",
            "tune",
            "--topology",
            "topologies/multi_sip.yaml",
            "--min-size",
            "4KiB",
            "--max-size",
            "16KiB",
            "-o",
            str(table_path),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    table = yaml.safe_load(table_path.read_text())
    rows = table["results"]
    assert [row["bytes"] for row in rows] == [4096, 8192, 16384]
    for row in rows:
        assert row["winner"] == min(row["times_ps"], key=row["times_ps"].get)
        assert len(row["times_ps"]) >= 5  # every candidate was measured
        assert set(row["predicted_ps"]) <= set(row["times_ps"])
    # auto with the table runs the measured winner at the nearest size.
    run = kernbench.simulate(
        _all_reduce,
        topology="topologies/multi_sip.yaml",
        timing_only=True,
        args=(8192,),
        overrides=["ccl.all_reduce=auto", f"ccl.tune_table={table_path}"],
    )
    assert run.report["collectives"][-1]["config"] == rows[1]["winner"]


def test_tune_table_that_cannot_be_read_is_a_clear_error(tmp_path):
    missing = Path(tmp_path) / "missing.yaml"
    with pytest.raises(Exception, match="cannot read tune table"):
        kernbench.simulate(
            _all_reduce,
            topology="topologies/ring8.yaml",
            timing_only=True,
            args=(4096,),
            overrides=["ccl.all_reduce=auto", f"ccl.tune_table={missing}"],
        )


def test_tune_measures_the_catalogue_as_its_runs_see_it():
    """--set ccl.configs... reaches the candidates as well as the measured runs."""
    from kernbench.bench.tune import tune

    table = tune(
        "topologies/ring8.yaml",
        sizes=[4096],
        overrides=[
            "ccl.configs.ring_in_halves={module: ring, chunks: 2}",
            "ccl.configs.bidirectional_ring.world_size=4",
        ],
    )
    (row,) = table["results"]
    assert "ring_in_halves" in row["times_ps"] and "ring_in_halves" in row["predicted_ps"]
    assert "bidirectional_ring" not in row["times_ps"]
