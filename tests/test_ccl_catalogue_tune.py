"""The catalogue file, run-level choices (--set ccl.*), kernbench tune and auto with a table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.catalogue import load_catalogue
from kernbench.errors import ConfigError, KernBenchError

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
        # YAML's true is not a count (pydantic's lax ints would take it as 1)
        (
            "configs:\n  x: {module: ring, chunks: true}\n",
            "configs.x.chunks: expected a whole number (got True)",
        ),
        (
            "configs:\n  x: {module: ring, queue_depth: true}\n",
            "configs.x.queue_depth: expected a whole number (got True)",
        ),
        (
            "configs:\n  x: {module: ring, world_size: true}\n",
            "configs.x.world_size: expected a whole number (got True)",
        ),
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


def _all_reduce_with(algorithm: str) -> None:
    dist.init_process_group()
    dist.all_reduce(torch.empty(4), algorithm=algorithm)


@pytest.mark.parametrize("bad", ["", "warp_drive"])
def test_an_unknown_algorithm_names_the_configurations_too(bad):
    # "" was taken as no choice (the catalogue's default ran); configurations such as
    # ring_pipelined are valid names as much as the algorithms are.
    with pytest.raises(KernBenchError) as info:  # the rank that raised it, around it
        kernbench.simulate(_all_reduce_with, topology="ring8", timing_only=True, args=(bad,))
    message = str(info.value)
    assert (
        f"raised DistributedError: unknown collective algorithm {bad!r}; "
        "use a configuration or an algorithm ("
    ) in message
    assert "ring_pipelined" in message and "rabenseifner" in message and "'auto'" in message


def test_set_ccl_chooses_the_configuration_for_a_run():
    result = kernbench.simulate(
        _all_reduce,
        topology="ring8",
        timing_only=True,
        overrides=["ccl.all_reduce=ring_tcm_8"],
        args=(1 << 16,),
    )
    assert {c["config"] for c in result.report["collectives"]} == {"ring_tcm_8"}
    with pytest.raises(ConfigError, match="ccl.all_reduce"):
        kernbench.simulate(
            _all_reduce,
            topology="ring8",
            timing_only=True,
            overrides=["ccl.all_reduce=warp_drive"],
            args=(4096,),
        )


def test_buffer_location_changes_the_time():
    times = {}
    for config in ("ring_tcm_8", "ring_hbm_8", "ring_sram_8"):
        result = kernbench.simulate(
            _all_reduce,
            topology="ring8",
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
    result = kernbench.simulate(_all_reduce, topology="ring8", timing_only=True, args=(4096,))
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
            "multi_sip",
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
        topology="multi_sip",
        timing_only=True,
        args=(8192,),
        overrides=["ccl.all_reduce=auto", f"ccl.tune_table={table_path}"],
    )
    assert run.report["collectives"][-1]["config"] == rows[1]["winner"]


def test_tune_table_that_cannot_be_read_is_a_clear_error(tmp_path):
    missing = Path(tmp_path) / "missing.yaml"
    with pytest.raises(KernBenchError, match="tune table not found"):
        kernbench.simulate(
            _all_reduce,
            topology="ring8",
            timing_only=True,
            args=(4096,),
            overrides=["ccl.all_reduce=auto", f"ccl.tune_table={missing}"],
        )


# --- algorithm parameters are declared and checked when the catalogue loads ----------


@pytest.mark.parametrize(
    ("override", "key", "fragment"),
    [
        ("configs.mesh2d.params.algorithms=[]", "configs.mesh2d.params.algorithms", "at least 1"),
        ("configs.mesh2d.params.algorithms=[ring, ring, ring]", "algorithms", "at most 2"),
        ("configs.mesh2d.params.algorithms=[bruck]", "algorithms.0", "reduce_scatter"),
        ("configs.mesh2d.params.algorithms=[ring, dissemination]", "algorithms.1", "all_reduce"),
        ("configs.mesh2d.params.algorithms=[ring, mesh2d]", "algorithms.1", "composes"),
        ("configs.mesh2d.params.algorithms=ring", "configs.mesh2d.params.algorithms", "list"),
        ("configs.mesh2d.params.rows=3", "configs.mesh2d.params", "rows and cols together"),
        ("configs.mesh2d.params.rows=0", "configs.mesh2d.params.rows", "> 0"),
        ("configs.mesh_2x2.params.rows=3", "configs.mesh_2x2.params", "3 x 2 grid"),
        ("configs.hierarchical.params.levels=5", "configs.hierarchical.params.levels", "list"),
        ("configs.hierarchical.params.levels=[rack]", "levels.0", "'cube' or 'sip'"),
        ("configs.hierarchical.params.levels=[sip, sip]", "levels", "twice"),
        ("configs.hierarchical.params.levels=[]", "levels", "at least 1"),
        ("configs.hierarchical.params.algorithms=[warp]", "algorithms.0", "unknown algorithm"),
        ("configs.hierarchical.params.algorithms=[bruck, ring]", "algorithms.0", "reduce_scatter"),
        ("configs.hierarchical.params.algorithms=[ring, hierarchical]", "algorithms.1", "composes"),
        ("configs.hierarchical.params.algorithms=[ring, ring, ring]", "algorithms", "at most 2"),
        ("configs.multi_cube.params.algorithms=[ring, binomial, ring]", "algorithms.1", "reduce"),
        ("configs.hierarchical.params.depth=3", "params.depth", "unknown key 'depth'"),
        ("configs.ring.params.chunks=x", "configs.ring.params.chunks", "takes no parameters"),
        ("configs.bruck.params.pack_bytes=-1", "configs.bruck.params.pack_bytes", ">= 0"),
        ("configs.bruck.params.pack_bytes=lots", "configs.bruck.params.pack_bytes", "whole"),
    ],
)
def test_bad_algorithm_params_name_the_config_and_the_param(override, key, fragment):
    from kernbench.ccl.settings import CclSettings

    with pytest.raises(ConfigError) as info:
        CclSettings.from_overrides([override])
    message = str(info.value)
    assert key in message and fragment in message
    # the override's value is at fault, not the bundled file: named as --set ccl.<key>
    assert info.value.key_path.startswith("ccl.configs.") and info.value.source == "--set"
    assert "ccl.yaml" not in message


def test_catalogue_entries_with_bad_params_name_the_file(tmp_path):
    path = tmp_path / "ccl.yaml"
    path.write_text("configs:\n  h: {module: hierarchical, params: {levels: 5}}\n")
    with pytest.raises(ConfigError) as info:
        load_catalogue(path)
    assert str(path) in str(info.value)
    assert "configs.h.params.levels" in str(info.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["ccl.configs.mesh2d.params.algorithms=[]", "ccl.all_reduce=mesh2d"],
        ["ccl.configs.hierarchical.params.levels=5", "ccl.all_reduce=hierarchical"],
        ["ccl.configs.hierarchical.params.algorithms=[ring, hierarchical]", "ccl.all=hierarchical"],
    ],
)
def test_params_that_used_to_crash_inside_the_simulation_fail_before_it(overrides):
    with pytest.raises(ConfigError, match="configs"):
        kernbench.simulate(
            _all_reduce,
            topology="multi_sip",
            timing_only=True,
            overrides=overrides,
            args=(4096,),
        )


def test_valid_params_still_run():
    result = kernbench.simulate(
        _all_reduce,
        topology="ring8",
        timing_only=True,
        overrides=[
            "ccl.configs.mesh2d.params={rows: 2, cols: 4, algorithms: [ring, recursive_doubling]}",
            "ccl.configs.bruck.params.pack_bytes=0",
            "ccl.all_reduce=mesh2d",
        ],
        args=(1 << 16,),
    )
    assert {c["config"] for c in result.report["collectives"]} == {"mesh2d"}


# --- tune tables are validated like topologies ---------------------------------------


def _valid_table(topology: str = "ring8", world_size: int = 8) -> dict:
    from kernbench.topology import load_topology, topology_digest

    topo = load_topology(topology)
    return {
        "topology": topo.name,
        "topology_digest": topology_digest(topo),
        "world_size": world_size,
        "overrides": [],
        "results": [
            {
                "op": "all_reduce",
                "world_size": world_size,
                "bytes": 4096,
                "winner": "recursive_doubling",
                "times_ps": {"ring": 20, "recursive_doubling": 10},
                "predicted_ps": {"ring": 21, "recursive_doubling": 11},
            },
            {
                "op": "all_reduce",
                "world_size": world_size,
                "bytes": 1 << 20,
                "winner": "ring",
                "times_ps": {"ring": 20, "recursive_doubling": 30},
                "predicted_ps": {},
            },
        ],
    }


def _with(path: str, value, table: dict | None = None) -> dict:
    import copy

    table = copy.deepcopy(table or _valid_table())
    node = table
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return table


_DELETE = object()
_BOMB = "\n".join(
    ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    + ["results: *a8"]
)


def _auto_with_table(table_path, nbytes: int = 4096, topology: str = "ring8"):
    return kernbench.simulate(
        _all_reduce,
        topology=topology,
        timing_only=True,
        args=(nbytes,),
        overrides=["ccl.all_reduce=auto", f"ccl.tune_table={table_path}"],
    )


def test_a_valid_table_is_used(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_valid_table()))
    assert _auto_with_table(path, 4096).report["collectives"][-1]["config"] == "recursive_doubling"
    assert _auto_with_table(path, 1 << 20).report["collectives"][-1]["config"] == "ring"


@pytest.mark.parametrize(
    ("table", "key", "fragment"),
    [
        (_with("topology", _DELETE), "topology", "required key is missing"),
        (_with("topology_digest", _DELETE), "topology_digest", "required key is missing"),
        (_with("world_size", _DELETE), "world_size", "required key is missing"),
        (_with("results", _DELETE), "results", "required key is missing"),
        (_with("results", {"op": "all_reduce"}), "results", "list"),
        (_with("results", []), "results", "at least 1"),
        (_with("extra", 1), "extra", "unknown key 'extra'"),
        (_with("world_size", 0), "world_size", "> 0"),
        (_with("world_size", True), "world_size", "whole number"),
        (_with("topology", ["ring8"]), "topology", "string"),
        (_with("topology_digest", "nothex"), "topology_digest", "16 hexadecimal"),
        (_with("results.0", "all_reduce"), "results.0", "section of keys"),
        (_with("results.0.winner", _DELETE), "results.0.winner", "required key is missing"),
        (_with("results.0.winner", "bruck"), "results.0.winner", "not one of the measured"),
        (_with("results.0.op", "all_reduse"), "results.0.op", "'all_reduce'"),
        (_with("results.0.bytes", "4KiB"), "results.0.bytes", "whole number"),
        (_with("results.0.bytes", -5), "results.0.bytes", "> 0"),
        (_with("results.1.bytes", 4096), "results.1", "results.0"),
        (_with("results.0.world_size", 4), "results.0.world_size", "8"),
        (_with("results.0.times_ps", {}), "results.0.times_ps", "at least 1"),
        (_with("results.0.times_ps.ring", -1), "results.0.times_ps.ring", ">= 0"),
        (_with("results.0.times_ps.ring", "fast"), "results.0.times_ps.ring", "whole number"),
        (_with("results.0.times_ps", [1, 2]), "results.0.times_ps", "section of keys"),
        (_with("results.0.predicted_ps.ring", 1.5), "results.0.predicted_ps.ring", "whole"),
        (_with("results.0.rank", 3), "results.0.rank", "unknown key 'rank'"),
        (_with("overrides", "x=1"), "overrides", "list"),
    ],
)
def test_malformed_tables_name_the_key(tmp_path, table, key, fragment):
    from kernbench.ccl.tune_table import load_tune_table

    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(table))
    with pytest.raises(ConfigError) as info:
        load_tune_table(path)
    message = str(info.value)
    assert str(path) in message
    assert f"{key}: " in message and fragment in message, message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "top level must be a mapping"),
        ("- 1\n- 2\n", "not a list"),
        ("results: [1\n", "invalid YAML at line"),
        (_BOMB, "aliases expand to more than"),
    ],
)
def test_tables_that_are_not_tables(tmp_path, text, fragment):
    from kernbench.ccl.tune_table import load_tune_table

    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        load_tune_table(path)


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "latin1", "utf16"])
def test_tables_that_cannot_be_read(tmp_path, target):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "latin1").write_bytes("topology: café\n".encode("latin-1"))
    (tmp_path / "utf16").write_bytes("topology: x\n".encode("utf-16"))
    path = target if target.startswith("/") else tmp_path / target
    start = time.perf_counter()
    with pytest.raises(KernBenchError) as info:
        _auto_with_table(path)
    assert time.perf_counter() - start < 5
    assert "tune table" in str(info.value)


def test_a_table_for_another_machine_is_refused(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_valid_table("fc8")))
    with pytest.raises(KernBenchError) as info:
        _auto_with_table(path)
    message = str(info.value)
    assert "measured on topology 'fc8'" in message and "'ring8'" in message
    assert "kernbench tune" in message


def test_a_table_for_the_same_name_but_another_machine_is_refused(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_valid_table()))
    with pytest.raises(KernBenchError, match="digest") as info:
        kernbench.simulate(
            _all_reduce,
            topology="ring8",
            timing_only=True,
            args=(4096,),
            overrides=[
                "ccl.all_reduce=auto",
                f"ccl.tune_table={path}",
                "system.interconnect.link.latency=2us",
            ],
        )
    assert "ring8" in str(info.value)


def test_a_table_for_another_world_size_is_refused(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_valid_table(world_size=4)))
    with pytest.raises(KernBenchError) as info:
        _auto_with_table(path)
    assert "world size 4" in str(info.value) and "8 ranks" in str(info.value)


def test_a_table_whose_winner_is_not_in_the_catalogue_is_refused(tmp_path):
    path = tmp_path / "t.yaml"
    table = _with("results.0.winner", "warp", _with("results.0.times_ps.warp", 1))
    path.write_text(yaml.safe_dump(table))
    with pytest.raises(KernBenchError) as info:
        _auto_with_table(path)
    assert "results.0.winner" in str(info.value) and "'warp'" in str(info.value)


def test_tune_measures_the_catalogue_as_its_runs_see_it():
    """--set ccl.configs... reaches the candidates as well as the measured runs."""
    from kernbench.bench.tune import tune

    table = tune(
        "ring8",
        sizes=[4096],
        overrides=[
            "ccl.configs.ring_in_halves={module: ring, chunks: 2}",
            "ccl.configs.bidirectional_ring.world_size=4",
        ],
    )
    (row,) = table["results"]
    assert "ring_in_halves" in row["times_ps"] and "ring_in_halves" in row["predicted_ps"]
    assert "bidirectional_ring" not in row["times_ps"]


@pytest.mark.parametrize(
    ("world_size", "fragment"),
    [(0, "at least 1 (got 0)"), (-2, "at least 1 (got -2)"), (9, "world size 9 does not fit")],
)
def test_tune_refuses_a_world_size_the_machine_cannot_run(world_size, fragment):
    """0 is not "every device": it is refused, as `kernbench run --world-size 0` refuses it,
    and before anything is measured."""
    from kernbench.bench.tune import tune

    measured = []
    with pytest.raises(KernBenchError, match=re.escape(fragment)):
        tune("ring8", sizes=[4096], world_size=world_size, progress=measured.append)
    assert measured == []


def test_a_bad_tune_table_is_refused_before_anything_runs(tmp_path):
    """Checked when the run is made, not at the first auto collective (after the bench
    had printed its header): here no collective runs at all."""
    from kernbench.errors import ConfigError

    table = tmp_path / "table.yaml"
    table.write_text("results: []\n")
    ran = []
    with pytest.raises(ConfigError, match="topology: required key is missing"):
        kernbench.simulate(
            lambda: ran.append(1), topology="ring8", overrides=[f"ccl.tune_table={table}"]
        )
    assert ran == []


def test_a_table_for_another_world_size_neither_stops_tuning_nor_runs_without_auto(tmp_path):
    """Only auto reads the table, so only auto checks that it fits: tuning anew (its
    measured runs name their algorithms) and runs that pick no algorithm by it go on."""
    from kernbench.bench.tune import tune

    table = tmp_path / "eight.yaml"
    table.write_text(yaml.safe_dump(tune("ring8", sizes=[4096], world_size=8)))
    retuned = tune("ring8", sizes=[4096], world_size=4, overrides=[f"ccl.tune_table={table}"])
    assert retuned["world_size"] == 4
    run = kernbench.simulate(
        _all_reduce_body,
        topology="ring8",
        world_size=4,
        overrides=[f"ccl.tune_table={table}", "ccl.all_reduce=ring"],
    )
    assert [c["config"] for c in run.report["collectives"]] == ["ring"]


def _all_reduce_body() -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    dist.all_reduce(torch.ones(16))


def test_tune_records_the_settings_it_measured_each_configuration_with():
    from kernbench.bench.tune import tune

    table = tune("ring8", sizes=[4096], overrides=["ccl.configs.ring.chunks=2"])
    assert table["configs"]["ring"] == {
        "module": "ring",
        "world_size": None,
        "buffer": "hbm",
        "chunks": 2,
        "queue_depth": None,
        "params": {},
    }
    assert set(table["configs"]) == set(table["results"][0]["times_ps"])


def test_a_table_measured_with_other_settings_of_its_winner_is_refused(tmp_path):
    # a table measured with ring in two pieces said nothing of ring in one
    ring = {"module": "ring", "buffer": "hbm", "chunks": 2, "params": {}}
    table = _with("configs", {"ring": ring, "recursive_doubling": {"module": "recursive_doubling"}})
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(table))
    with pytest.raises(KernBenchError) as info:
        _auto_with_table(path, 1 << 20)
    message = str(info.value)
    assert "configs.ring" in message and "measured configuration 'ring'" in message
    assert "chunks 2 then, None now" in message and "kernbench tune" in message
    # the same settings as the run's catalogue: used
    same = _with("configs.ring.chunks", None, table)
    path.write_text(yaml.safe_dump(same))
    assert _auto_with_table(path, 1 << 20).report["collectives"][-1]["config"] == "ring"
    assert _auto_with_table(path, 4096).report["collectives"][-1]["config"] == "recursive_doubling"


def test_set_ccl_null_removes_the_setting_as_every_set_does(tmp_path):
    # `--set key=null` removes a key (README); ccl.tune_table=null used to be read as a
    # file named "null", and ccl.<op>=null as an algorithm named "null".
    from kernbench.ccl.settings import CclSettings, named_tune_table

    table = str(tmp_path / "t.yaml")
    assert CclSettings.from_overrides([f"tune_table={table}", "tune_table=null"]).tune_table is None
    assert CclSettings.from_overrides(["tune_table=~"]).tune_table is None
    assert named_tune_table([f"ccl.tune_table={table}", "ccl.tune_table=null"]) is None
    settings = CclSettings.from_overrides(["all=ring", "all_reduce=null", "broadcast=~"])
    assert "all_reduce" not in settings.choices and "broadcast" not in settings.choices
    assert settings.choices["all_gather"] == "ring"
    assert CclSettings.from_overrides(["all=ring", "all=null"]).choices == {}
    chosen = kernbench.simulate(
        _all_reduce,
        topology="ring8",
        timing_only=True,
        overrides=["ccl.all_reduce=ring_tcm_8", "ccl.all_reduce=null", "ccl.tune_table=null"],
        args=(4096,),
    )
    default = kernbench.simulate(_all_reduce, topology="ring8", timing_only=True, args=(4096,))
    assert chosen.report["collectives"] == default.report["collectives"]
