"""Hostile inputs through the command line: exit 2, one ``error:`` line, no traceback, at once.

One representative per class of input defect (the other cases of each class
are in test_yamlfile, test_topology_loader, test_topology_schema, test_units
and test_ccl_catalogue_tune).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from kernbench.cli import main
from kernbench.topology import load_topology_document

BOMB = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
)
# Used where a validation error would echo the value, and as a sweep's topologies.
TOPOLOGY_BOMB = f"{BOMB}\nsystem: {{sips: {{count: *a9}}}}\nsip: {{cube_mesh: *a9}}\n"
SWEEP_BOMB = f"{BOMB}\nbench: bench.py\ntopologies: [t.yaml]\nset: {{system.sips.count: *a9}}\n"
SECRET = "root:$6$SECRETSALT$hashhashhash:19000:0:99999:7:::"
SCRIPT = """
import kernbench.torch as torch
import kernbench.torch.distributed as dist

def main():
    dist.init_process_group()
    dist.all_reduce(torch.empty(1024))
"""


def run_cli(argv: list[str], capsys, seconds: float = 2.0) -> str:
    start = time.perf_counter()
    status = main(argv)
    elapsed = time.perf_counter() - start
    captured = capsys.readouterr()
    assert status == 2, captured
    assert elapsed < seconds
    lines = captured.err.splitlines()
    assert sum(line.startswith("error: ") for line in lines) == 1, captured.err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in captured.err
    assert len(captured.err) < 2000
    return captured.err


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "bomb.yaml").write_text(TOPOLOGY_BOMB)
    (tmp_path / "sweep.yaml").write_text(SWEEP_BOMB)
    (tmp_path / "bench.py").write_text(SCRIPT)
    (tmp_path / "shadow").write_text(f"{SECRET}\ndaemon:*:19000:0:99999:7:::\n")
    tiny = yaml.safe_dump(load_topology_document("tiny"))
    (tmp_path / "child.yaml").write_text(f"extends: {tmp_path / 'shadow'}\n{tiny}")
    (tmp_path / "latin1.yaml").write_bytes("name: café\n".encode("latin-1"))
    (tmp_path / "keys.yaml").write_text("? [a, b]\n: 1\n")
    (tmp_path / "t0.yaml").write_text("extends: ../../topologies/tiny.yaml\n")
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


def test_alias_bomb(files, capsys):
    err = run_cli(["topo", "show", str(files / "bomb.yaml")], capsys)
    assert "aliases expand to more than" in err


def test_alias_bomb_in_a_set_value(capsys):
    value = "[" + ", ".join(["&a [x, x, x, x, x, x, x, x, x, x]"] + ["*a"] * 2000) + "]"
    err = run_cli(["topo", "show", "tiny", "--set", f"description={value}"], capsys)
    assert "aliases expand to more than" in err and "--set" in err


def test_alias_bomb_in_a_sweep_file(files, capsys):
    err = run_cli(["sweep", str(files / "sweep.yaml"), "-o", str(files / "out")], capsys)
    assert "aliases expand to more than" in err


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_special_file_as_topology(files, capsys, target):
    path = target if target.startswith("/") else str(files / target)
    err = run_cli(["topo", "show", path], capsys)
    assert "only regular files are read" in err
    err = run_cli(["run", str(files / "bench.py"), "--topology", path], capsys)
    assert "only regular files are read" in err


def test_special_file_as_tune_table(files, capsys):
    argv = ["run", str(files / "bench.py"), "-t", "tiny"]
    err = run_cli(
        [*argv, "--set", "ccl.all_reduce=auto", "--set", "ccl.tune_table=/dev/zero"], capsys
    )
    assert "tune table is a device" in err


def test_malformed_tune_table(files, capsys):
    (files / "table.yaml").write_text(yaml.safe_dump({"world_size": 4, "results": []}))
    argv = ["run", str(files / "bench.py"), "-t", "tiny"]
    overrides = ["--set", "ccl.all_reduce=auto", "--set", f"ccl.tune_table={files / 'table.yaml'}"]
    err = run_cli([*argv, *overrides], capsys)
    assert "topology: required key is missing" in err


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("system.sips.count=100000", "at most 65536"),
        ("system.sips.count=100000000000000000000", "at most 65536"),
        ("sip.cube_mesh.w=100000", "at most 128"),
        ("sip.cube_mesh.link.latency=1e999999999ns", "too large"),
        ("sip.cube_mesh.link.latency=1e-999999999s", "not a whole number of ps"),
        ("cube.memory_map.hbm_total_gb_per_cube=.inf", "finite"),
        ("description=" + "[" * 100_000, "nested more than"),
        (
            "faults.pes=[{pe: sip0.cube0.pe0, slowdown: 2}, {pe: sip0.cube0.pe0, slowdown: 3}]",
            "faults.pes.0",
        ),
    ],
)
def test_bad_set_values(capsys, override, fragment):
    err = run_cli(["topo", "show", "tiny", "--set", override], capsys)
    assert fragment in err


def test_undecodable_topology(files, capsys):
    err = run_cli(["topo", "show", str(files / "latin1.yaml")], capsys)
    assert "not UTF-8" in err


def test_unhashable_key(files, capsys):
    err = run_cli(["topo", "show", str(files / "keys.yaml")], capsys)
    assert "mapping key must be a plain value" in err and "line 1" in err


def test_long_extends_chain(files, capsys, bundled_topology):
    chain = files / "chain"
    chain.mkdir()
    (chain / "t0.yaml").write_text(f"extends: {bundled_topology('tiny')}\n")
    for i in range(1, 5000):
        (chain / f"t{i}.yaml").write_text(f"extends: t{i - 1}.yaml\n")
    err = run_cli(["topo", "show", str(chain / "t4999.yaml")], capsys)
    assert "extends" in err


def test_extends_a_name_too_long_for_the_file_system(tmp_path, capsys):
    """The bundled-machine lookup of a bare name used to let ENAMETOOLONG escape (exit 70)."""
    name = "a" * 5000 + ".yaml"
    (tmp_path / "t.yaml").write_text(f"extends: {name}\n")
    err = run_cli(["topo", "show", str(tmp_path / "t.yaml")], capsys)
    assert err.startswith(f"error: {tmp_path / 't.yaml'}: extends: ")
    assert err.rstrip().endswith("cannot read topology file: File name too long")


def test_extends_does_not_echo_what_it_read(files, capsys):
    err = run_cli(["topo", "show", str(files / "child.yaml")], capsys)
    assert "SECRET" not in err and "daemon" not in err and "unknown key" in err


def test_catalogue_params_that_used_to_crash(files, capsys):
    argv = ["run", str(files / "bench.py"), "-t", "tiny"]
    overrides = ["--set", "ccl.configs.mesh2d.params.algorithms=[]", "--set", "ccl.all=mesh2d"]
    err = run_cli([*argv, *overrides], capsys)
    assert "configs.mesh2d.params.algorithms" in err
