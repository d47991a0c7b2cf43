"""Fuzzing: mutated topologies, catalogues and overrides load or fail with a KernBenchError.

Never another exception, never a hang.  Each property runs a bounded number of
examples (the counts are in the settings below).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.ccl.catalogue import Catalogue
from kernbench.errors import ConfigError, KernBenchError
from kernbench.topology import (
    build_graph,
    bundled_names,
    bundled_path,
    load_topology_document,
    validate_topology,
)
from kernbench.topology.loader import apply_overrides
from kernbench.topology.metrics import diameter_hops

TOPOLOGIES = [bundled_path(name) for name in bundled_names()]
DOCUMENTS = [load_topology_document(p) for p in TOPOLOGIES]
REPO = Path(__file__).resolve().parents[1]
CATALOGUE = yaml.safe_load((REPO / "ccl" / "ccl.yaml").read_text())

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "50GB/s",
            "500ns",
            "1.5GHz",
            "16MiB",
            "0ps",
            "-3ns",
            "1e3GB/s",
            "12 parsecs",
            "ring",
            "switch",
            "NW",
            "cube",
            "pe",
            "",
            "0x10",
        ]
    ),
    st.lists(st.integers(min_value=-3, max_value=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    return found


@st.composite
def mutated(draw: Any, documents: list[dict]) -> dict:
    doc = copy.deepcopy(draw(st.sampled_from(documents)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add", "rename"]))
        if action == "replace":
            parent[path[-1]] = draw(VALUES)
        elif action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent.get(path[-1]), dict):
            parent[path[-1]][draw(st.text(min_size=1, max_size=8))] = draw(VALUES)
        elif action == "rename":
            parent[f"{path[-1]}_"] = parent.pop(path[-1])
    return doc


def _check_topology(doc: dict) -> None:
    try:
        topology = validate_topology(doc, source="fuzz")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz: ")  # names where, then the key path
        assert exc.key_path or "<top>" in str(exc)
        return
    if topology.num_pes <= 4096:  # building is linear in the machine; keep runs short
        try:
            diameter_hops(build_graph(topology))
        except KernBenchError:
            pass


@FUZZ
@given(mutated(DOCUMENTS))
def test_mutated_topologies_load_or_fail_cleanly(doc):
    _check_topology(doc)


KEYS = st.sampled_from(
    [
        "system.sips.count",
        "sip.cube_mesh.w",
        "sip.cube_mesh.h",
        "sip.cube_mesh.torus",
        "sip.cube_mesh.link.bandwidth",
        "system.interconnect.kind",
        "system.device_level",
        "cube.pe_layout.pe_per_corner",
        "cube.memory_map.hbm_slices_per_cube",
        "cube.pe_template.components.pe_mmu.attrs.page_size",
        "fabric.packet_bytes",
        "cube.hbm.latency",
        "nope.key",
        "system",
        "system.sips.count.x",
        "",
    ]
)
OVERRIDE_VALUES = st.sampled_from(
    [
        "4",
        "0",
        "-1",
        "true",
        "ring",
        "switch",
        "2GB/s",
        "5 parsecs",
        "[1, 2]",
        "{a: 1}",
        "",
        "null",
        "1.5",
        "x: y",
    ]
)


@FUZZ
@given(
    st.lists(st.tuples(KEYS, OVERRIDE_VALUES), min_size=1, max_size=3), st.sampled_from(DOCUMENTS)
)
def test_random_overrides_load_or_fail_cleanly(pairs, base):
    overrides = [f"{key}={value}" for key, value in pairs]
    try:
        doc = apply_overrides(base, overrides)
    except ConfigError:
        return
    _check_topology(doc)


@FUZZ
@given(mutated([CATALOGUE]))
def test_mutated_catalogues_load_or_fail_cleanly(doc):
    from pydantic import ValidationError

    from kernbench.topology.loader import format_validation_error

    try:
        Catalogue.model_validate(doc)
    except ValidationError as exc:
        error = format_validation_error(exc, "fuzz", Catalogue)
        assert isinstance(error, ConfigError) and str(error).startswith("fuzz: ")
        assert error.key_path or "<top>" in str(error)


SWEEP = {
    "bench": "../benches/allreduce_perf.py",
    "topologies": ["../topologies/ring8.yaml", "../topologies/fc8.yaml"],
    "set": {"ccl.all_reduce": ["ring", "recursive_doubling"]},
    "args": {"-b": ["4KiB"], "-e": ["16KiB"]},
    "timing_only": True,
}


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated([SWEEP]))
def test_mutated_sweep_files_load_or_fail_cleanly(tmp_path_factory, doc):
    from kernbench.bench.sweep import load_sweep

    folder = tmp_path_factory.mktemp("sweep") / "examples"
    folder.mkdir()
    for name in ("benches", "topologies"):  # the relative paths resolve to the real files
        (folder.parent / name).symlink_to(REPO / name)
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    try:
        load_sweep(path)
    except KernBenchError as exc:
        assert str(exc)
