"""Loading topology files: extends, overrides, digests, and the bundled machines."""

from __future__ import annotations

import copy
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from kernbench.errors import ConfigError
from kernbench.topology import (
    apply_overrides,
    build_graph,
    document_digest,
    load_topology,
    load_topology_document,
    validate_topology,
)
from kernbench.topology.bundled import BUNDLED_DIR
from kernbench.topology.loader import MAX_EXTENDS_DEPTH, deep_merge, parse_override

TOPOLOGIES = BUNDLED_DIR  # the machines that ship in the package

PARENT = {
    "name": "parent",
    "description": "the parent",
    "system": {
        "sips": {"count": 2},
        "interconnect": {"kind": "ring", "link": {"bandwidth": "100GB/s", "latency": "1us"}},
    },
    "sip": {"cube_mesh": {"w": 2, "h": 2, "link": {"bandwidth": "256GB/s", "latency": "20ns"}}},
    "cube": {
        "pe_layout": {"corners": ["NW", "NE"], "pe_per_corner": 2},
        "memory_map": {"hbm_total_gb_per_cube": 16, "hbm_slices_per_cube": 4},
    },
}


def write(path: Path, document) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


# --- extends --------------------------------------------------------------------


def test_extends_deep_merges(tmp_path):
    write(tmp_path / "parent.yaml", PARENT)
    child = write(
        tmp_path / "child.yaml",
        {
            "extends": "parent.yaml",
            "name": "child",
            "system": {"interconnect": {"link": {"latency": "500ns"}}},
            "cube": {"pe_layout": {"pe_per_corner": 4}},
        },
    )
    topo = load_topology(child)
    assert topo.name == "child"
    assert topo.description == "the parent"
    # the one nested key the child overrides ...
    assert topo.system.interconnect.link.latency == 500_000
    assert topo.cube.pe_layout.pe_per_corner == 4
    # ... and its siblings, kept from the parent
    assert topo.system.interconnect.link.bandwidth == 100 * 10**9
    assert topo.system.interconnect.kind == "ring"
    assert topo.system.sips.count == 2
    assert topo.cube.pe_layout.corners == ["NW", "NE"]
    assert topo.cube.memory_map.hbm_slices_per_cube == 4
    assert topo.sip.cube_mesh.w == 2
    assert topo.pes_per_cube == 8


def test_extends_document_is_resolved_and_extends_removed(tmp_path):
    write(tmp_path / "parent.yaml", PARENT)
    child = write(tmp_path / "child.yaml", {"extends": "parent.yaml", "name": "child"})
    document = load_topology_document(child)
    assert "extends" not in document
    expected = copy.deepcopy(PARENT)
    expected["name"] = "child"
    assert document == expected


def test_child_list_replaces_parent_list(tmp_path):
    write(tmp_path / "parent.yaml", PARENT)
    child = write(
        tmp_path / "child.yaml",
        {"extends": "parent.yaml", "cube": {"pe_layout": {"corners": ["SE"]}}},
    )
    topo = load_topology(child)
    assert topo.cube.pe_layout.corners == ["SE"]
    assert topo.pes_per_cube == 2


def test_null_in_a_child_removes_the_parents_key(tmp_path):
    write(tmp_path / "parent.yaml", PARENT)
    child = {"extends": "parent.yaml", "system": {"interconnect": {"link": None}}}
    document = load_topology_document(write(tmp_path / "child.yaml", child))
    assert document["system"]["interconnect"] == {"kind": "ring"}
    assert deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"b": None}, "d": None}) == {"a": {"c": 2}}


def test_extends_chain_of_three(tmp_path):
    write(tmp_path / "a.yaml", PARENT)
    write(tmp_path / "b.yaml", {"extends": "a.yaml", "name": "b", "sip": {"cube_mesh": {"w": 4}}})
    c = write(tmp_path / "c.yaml", {"extends": "b.yaml", "system": {"sips": {"count": 3}}})
    topo = load_topology(c)
    assert topo.name == "b"
    assert topo.sip.cube_mesh.w == 4
    assert topo.sip.cube_mesh.h == 2
    assert topo.num_sips == 3


def test_extends_relative_to_child_directory(tmp_path, monkeypatch):
    write(tmp_path / "base" / "parent.yaml", PARENT)
    child = write(
        tmp_path / "machines" / "child.yaml",
        {"extends": "../base/parent.yaml", "name": "child"},
    )
    # The working directory must not matter.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    topo = load_topology(child)
    assert topo.name == "child"
    assert topo.num_sips == 2


def test_extends_sibling_file_from_another_cwd(tmp_path, monkeypatch):
    write(tmp_path / "dir" / "parent.yaml", PARENT)
    child = write(tmp_path / "dir" / "child.yaml", {"extends": "parent.yaml"})
    # A parent.yaml in the working directory must not be picked instead.
    write(tmp_path / "parent.yaml", {**PARENT, "name": "wrong"})
    monkeypatch.chdir(tmp_path)
    assert load_topology(child).name == "parent"


def test_extends_bundled_default(tmp_path):
    child = write(
        tmp_path / "mine.yaml",
        {"extends": str(TOPOLOGIES / "default.yaml"), "sip": {"cube_mesh": {"w": 2}}},
    )
    topo = load_topology(child)
    assert topo.name == "default"
    assert topo.sip.cube_mesh.w == 2
    assert topo.sip.cube_mesh.h == 4
    assert topo.num_pes == 2 * 4 * 8


def test_deep_merge_does_not_mutate_inputs():
    base = {"a": {"b": 1, "c": [1, 2]}}
    override = {"a": {"b": 2}}
    merged = deep_merge(base, override)
    assert merged == {"a": {"b": 2, "c": [1, 2]}}
    assert base == {"a": {"b": 1, "c": [1, 2]}}
    merged["a"]["c"].append(3)
    assert base["a"]["c"] == [1, 2]


def test_deep_merge_scalar_replaces_mapping_and_back():
    assert deep_merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}
    assert deep_merge({"a": 5}, {"a": {"b": 1}}) == {"a": {"b": 1}}


# --- overrides --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "keys", "value"),
    [
        ("system.sips.count=4", ["system", "sips", "count"], 4),
        (
            "sip.cube_mesh.link.bandwidth=50GB/s",
            ["sip", "cube_mesh", "link", "bandwidth"],
            "50GB/s",
        ),
        ("sip.cube_mesh.torus=true", ["sip", "cube_mesh", "torus"], True),
        ("sip.cube_mesh.torus=false", ["sip", "cube_mesh", "torus"], False),
        ("name=my machine", ["name"], "my machine"),
        (
            "cube.memory_map.hbm_total_gb_per_cube=0.5",
            ["cube", "memory_map", "hbm_total_gb_per_cube"],
            0.5,
        ),
        ("cube.pe_layout.corners=[NW, SE]", ["cube", "pe_layout", "corners"], ["NW", "SE"]),
        (" system.sips.count = 4 ", ["system", "sips", "count"], 4),
        ("description=a=b", ["description"], "a=b"),
        ("description=", ["description"], ""),
    ],
)
def test_parse_override(text, keys, value):
    assert parse_override(text) == (keys, value)


@pytest.mark.parametrize("text", ["system.sips.count", "=4", "system..count=4", "system.sips.=4"])
def test_malformed_override(text):
    with pytest.raises(ConfigError) as info:
        parse_override(text)
    assert "key.path=value" in str(info.value) or "empty key" in str(info.value)


def test_override_without_equals_is_rejected_by_load(tmp_path):
    path = write(tmp_path / "t.yaml", PARENT)
    with pytest.raises(ConfigError, match="must look like key.path=value"):
        load_topology(path, ["system.sips.count"])


def test_overrides_applied_to_loaded_file(tmp_path):
    path = write(tmp_path / "t.yaml", PARENT)
    topo = load_topology(
        path,
        [
            "system.sips.count=4",
            "sip.cube_mesh.link.bandwidth=50GB/s",
            "sip.cube_mesh.link.latency=500ns",
            "sip.cube_mesh.torus=true",
            "system.interconnect.kind=switch",
            "name=overridden",
        ],
    )
    assert topo.num_sips == 4
    assert topo.sip.cube_mesh.link.bandwidth == 50 * 10**9
    assert topo.sip.cube_mesh.link.latency == 500_000
    assert topo.sip.cube_mesh.torus is True
    assert topo.system.interconnect.kind == "switch"
    assert topo.name == "overridden"
    # untouched keys stay
    assert topo.sip.cube_mesh.w == 2
    assert topo.system.interconnect.link.bandwidth == 100 * 10**9


def test_overrides_apply_after_extends(tmp_path):
    write(tmp_path / "parent.yaml", PARENT)
    child = write(tmp_path / "child.yaml", {"extends": "parent.yaml", "name": "child"})
    topo = load_topology(child, ["name=from-cli", "cube.pe_layout.pe_per_corner=1"])
    assert topo.name == "from-cli"
    assert topo.pes_per_cube == 2


def test_overrides_apply_in_order():
    document = apply_overrides(PARENT, ["system.sips.count=3", "system.sips.count=5"])
    assert document["system"]["sips"]["count"] == 5


def test_apply_overrides_does_not_mutate_input():
    before = copy.deepcopy(PARENT)
    after = apply_overrides(PARENT, ["system.sips.count=9", "cube.sram.size=1MiB"])
    assert PARENT == before
    assert after["system"]["sips"]["count"] == 9
    assert after["cube"]["sram"] == {"size": "1MiB"}


@pytest.mark.parametrize("null", ["null", "~"])
def test_an_override_of_null_removes_the_key(null):
    document = apply_overrides(PARENT, [f"system.interconnect.link={null}"])
    assert document["system"]["interconnect"] == {"kind": "ring"}
    topo = load_topology("rack", [f"system.interconnect.switch_latency={null}"])
    assert topo.system.interconnect.switch_latency == 0  # the default, as if never written
    assert "switch_latency" not in topo.system.interconnect.model_fields_set


def test_override_creates_missing_section_for_a_known_key():
    document = apply_overrides(PARENT, ["cube.hbm.latency=50ns"])
    topo = validate_topology(document)
    assert topo.cube.hbm.latency == 50_000
    assert topo.cube.hbm.slice_bandwidth == 128 * 10**9  # default kept


def test_override_creating_unknown_key_is_rejected(tmp_path):
    path = write(tmp_path / "t.yaml", PARENT)
    with pytest.raises(ConfigError) as info:
        load_topology(path, ["cube.pe_template.components.pe_tcm.attrs.sizee_mb=4"])
    assert info.value.key_path == "cube.pe_template.components.pe_tcm.attrs.sizee_mb"
    assert "cube.pe_template.components.pe_tcm.attrs.sizee_mb" in str(info.value)
    assert "size_mb" in str(info.value)


def test_override_creating_unknown_section_is_rejected(tmp_path):
    path = write(tmp_path / "t.yaml", PARENT)
    with pytest.raises(ConfigError) as info:
        load_topology(path, ["cube.foo.bar=1"])
    assert info.value.key_path == "cube.foo"
    assert "unknown key 'foo'" in str(info.value)
    assert "pe_layout" in str(info.value)


def test_override_through_a_scalar_is_rejected():
    with pytest.raises(ConfigError) as info:
        apply_overrides(PARENT, ["system.sips.count.x=1"])
    assert info.value.key_path == "system.sips.count"
    assert info.value.source == "--set"
    assert "system.sips.count" in str(info.value)
    assert "not a section" in str(info.value)


def test_override_with_bad_value_is_validated(tmp_path):
    path = write(tmp_path / "t.yaml", PARENT)
    with pytest.raises(ConfigError) as info:
        load_topology(path, ["sip.cube_mesh.link.bandwidth=50 parsecs"])
    assert info.value.key_path == "sip.cube_mesh.link.bandwidth"
    with pytest.raises(ConfigError) as info:
        load_topology(path, ["sip.cube_mesh.w=four"])
    assert info.value.key_path == "sip.cube_mesh.w"


def test_override_one_field_of_a_defaulted_link_keeps_the_other():
    minimal = {"system": {"sips": {"count": 1}}, "sip": {"cube_mesh": {"w": 1, "h": 1}}}
    topo = validate_topology(apply_overrides(minimal, ["system.host_link.latency=2us"]))
    assert topo.system.host_link.latency == 2_000_000
    assert topo.system.host_link.bandwidth == 64 * 10**9


# --- digest ---------------------------------------------------------------------


def test_document_digest_is_stable():
    digest = document_digest(PARENT)
    assert digest == document_digest(copy.deepcopy(PARENT))
    assert len(digest) == 16
    int(digest, 16)  # hexadecimal
    # key order does not matter
    reordered = dict(reversed(list(PARENT.items())))
    assert document_digest(reordered) == digest


def test_document_digest_is_sensitive_to_changes():
    digest = document_digest(PARENT)
    changed = apply_overrides(PARENT, ["sip.cube_mesh.link.latency=21ns"])
    assert document_digest(changed) != digest
    renamed = apply_overrides(PARENT, ["name=other"])
    assert document_digest(renamed) != digest
    assert document_digest(changed) != document_digest(renamed)


def test_document_digest_of_equivalent_files(tmp_path):
    # Same content through extends or written out gives the same digest.
    write(tmp_path / "parent.yaml", PARENT)
    child = write(tmp_path / "child.yaml", {"extends": "parent.yaml"})
    flat = write(tmp_path / "flat.yaml", PARENT)
    assert document_digest(load_topology_document(child)) == document_digest(
        load_topology_document(flat)
    )


# --- the bundled topologies -------------------------------------------------------


def test_bundled_topology_files_present():
    names = sorted(p.stem for p in TOPOLOGIES.glob("*.yaml"))
    for name in ("default", "multi_sip", "rack", "ring8", "tiny"):
        assert name in names


@pytest.mark.parametrize("name", ["default", "multi_sip", "rack", "ring8", "tiny"])
def test_bundled_topology_name_matches_file(name):
    assert load_topology(TOPOLOGIES / f"{name}.yaml").name == name


def test_tiny():
    topo = load_topology(TOPOLOGIES / "tiny.yaml")
    assert (topo.num_sips, topo.cubes_per_sip, topo.pes_per_cube) == (1, 1, 4)
    assert topo.num_cubes == 1
    assert topo.num_pes == 4
    assert topo.cube.memory_map.hbm_total_gb_per_cube == 4 * 10**9
    assert topo.cube.memory_map.hbm_slices_per_cube == 4


def test_default():
    topo = load_topology(TOPOLOGIES / "default.yaml")
    assert topo.num_sips == 1
    assert (topo.sip.cube_mesh.w, topo.sip.cube_mesh.h) == (4, 4)
    assert topo.cubes_per_sip == 16
    assert topo.num_cubes == 16
    assert topo.pes_per_cube == 8
    assert topo.num_pes == 128
    assert topo.cube.pe_layout.corners == ["NW", "NE", "SW", "SE"]
    assert topo.cube.pe_layout.pe_per_corner == 2
    assert topo.cube.memory_map.hbm_total_gb_per_cube == 48 * 10**9
    assert topo.cube.memory_map.hbm_slices_per_cube == 8
    assert topo.cube.pe_template.components.pe_tcm.attrs.size_mb == 16 * 10**6
    assert topo.cube.pe_template.components.pe_mmu.attrs.page_size == 4096
    assert topo.cube.pe_template.components.pe_core.attrs.clock == 1_500_000_000
    assert topo.sip.cube_mesh.link.bandwidth == 256 * 10**9
    assert topo.sip.cube_mesh.link.latency == 20_000
    assert topo.system.host_link.bandwidth == 64 * 10**9
    assert topo.fabric.packet_bytes == 4096


def test_multi_sip():
    topo = load_topology(TOPOLOGIES / "multi_sip.yaml")
    assert topo.num_sips == 4
    assert topo.system.interconnect.kind == "ring"
    assert topo.cubes_per_sip == 16
    assert topo.pes_per_cube == 8
    assert topo.num_pes == 512
    assert topo.system.interconnect.link.bandwidth == 100 * 10**9
    assert topo.system.interconnect.link.latency == 1_000_000


def test_rack_and_its_graph_is_fast():
    start = time.perf_counter()
    topo = load_topology(TOPOLOGIES / "rack.yaml")
    graph = build_graph(topo)
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0
    assert topo.num_sips == 8
    assert topo.system.interconnect.kind == "switch"
    assert topo.num_cubes == 128
    assert topo.num_pes == 1024
    assert len(graph.pe_names()) == 1024
    assert topo.system.interconnect.link.bandwidth == 200 * 10**9
    assert topo.system.interconnect.switch_latency == 300_000


def test_ring8():
    topo = load_topology(TOPOLOGIES / "ring8.yaml")
    assert topo.num_sips == 8
    assert topo.system.interconnect.kind == "ring"
    assert topo.cubes_per_sip == 1
    assert topo.pes_per_cube == 1
    assert topo.num_pes == 8
    assert topo.system.interconnect.link.bandwidth == 50 * 10**9
    assert topo.system.interconnect.link.latency == 500_000
    assert topo.cube.memory_map.hbm_slices_per_cube == 1
    assert topo.cube.noc.bandwidth == 2 * 10**12


def test_bundled_file_with_override():
    topo = load_topology(TOPOLOGIES / "ring8.yaml", ["system.sips.count=4"])
    assert topo.num_pes == 4
    assert topo.system.interconnect.link.bandwidth == 50 * 10**9


# --- hostile inputs: every one a ConfigError, at once ------------------------------


def _quick_config_error(fn, *args) -> ConfigError:
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        fn(*args)
    assert time.perf_counter() - start < 1.0
    return info.value


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "fifo", "dir"])
def test_extends_a_special_file_is_refused_without_reading_it(tmp_path, target):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    child = write(tmp_path / "child.yaml", {"extends": target, "name": "child"})
    error = _quick_config_error(load_topology, child)
    assert error.key_path == "extends"
    assert str(child) in str(error) and target in str(error)
    assert "regular file" in str(error) or "directory" in str(error)


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_special_file_as_the_topology_is_refused(tmp_path, target):
    os.mkfifo(tmp_path / "fifo")
    path = target if target.startswith("/") else str(tmp_path / target)
    error = _quick_config_error(load_topology, path)
    assert "only regular files are read" in str(error)


def test_a_long_extends_chain_is_refused(tmp_path):
    write(tmp_path / "t0.yaml", PARENT)
    for i in range(1, 5000):
        (tmp_path / f"t{i}.yaml").write_text(f"extends: t{i - 1}.yaml\n")
    error = _quick_config_error(load_topology, tmp_path / "t4999.yaml")
    assert error.key_path == "extends"
    assert f"more than {MAX_EXTENDS_DEPTH} files" in str(error)


def test_an_extends_chain_at_the_limit_loads(tmp_path):
    write(tmp_path / "t0.yaml", PARENT)
    for i in range(1, MAX_EXTENDS_DEPTH):
        (tmp_path / f"t{i}.yaml").write_text(f"extends: t{i - 1}.yaml\nname: t{i}\n")
    assert load_topology(tmp_path / f"t{MAX_EXTENDS_DEPTH - 1}.yaml").num_sips == 2


def test_extends_errors_never_echo_the_file_they_read(tmp_path):
    secret = "root:$6$SECRETSALT$hashhashhash:19000:0:99999:7:::"
    # /etc/shadow's lines end in ':', so YAML reads each line as a key.
    shadow = write(tmp_path / "shadow", f"{secret}\ndaemon:*:19000:0:99999:7:::\n")
    child = write(tmp_path / "child.yaml", {"extends": str(shadow), **PARENT})
    error = _quick_config_error(load_topology, child)
    assert "SECRET" not in str(error) and "daemon" not in str(error)
    assert "unknown key" in str(error)
    token = write(tmp_path / "token", "SECRETTOKEN-0123456789abcdef\n")
    child = write(tmp_path / "child1.yaml", {"extends": str(token)})
    error = _quick_config_error(load_topology, child)
    assert "SECRET" not in str(error) and "not a str" in str(error)
    broken = write(tmp_path / "broken", f"a: [1\nb: '{secret}\n")
    child = write(tmp_path / "child2.yaml", {"extends": str(broken)})
    error = _quick_config_error(load_topology, child)
    assert "SECRET" not in str(error) and "invalid YAML at line" in str(error)


def test_an_alias_bomb_topology_is_refused(tmp_path):
    bomb = "\n".join(
        ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    )
    # On its own the bomb is cheap (aliases share one list); echoing it is not.
    bomb += "\nsystem: {sips: {count: 1}}\nsip: {cube_mesh: *a9}\n"
    error = _quick_config_error(load_topology, write(tmp_path / "bomb.yaml", bomb))
    assert "aliases expand to more than" in str(error) and len(str(error)) < 500


@pytest.mark.parametrize(
    "override",
    [
        "description=[" + ", ".join(["&a [x, x, x, x, x, x, x, x, x, x]"] + ["*a"] * 2000) + "]",
        "description=" + "[" * 100_000 + "]" * 100_000,
        "description=" + "{a: " * 100_000 + "1" + "}" * 100_000,
        ".".join(["a"] * 100_000) + "=1",
        "description={[1]: 2}",
    ],
)
def test_hostile_overrides_are_config_errors(tmp_path, override):
    path = write(tmp_path / "t.yaml", PARENT)
    error = _quick_config_error(load_topology, path, [override])
    assert "--set" in str(error)
    assert len(str(error)) < 500


def test_an_override_that_is_not_yaml_stays_a_string():
    assert parse_override("description=a: b: c") == (["description"], "a: b: c")
    assert parse_override("name=[unclosed") == (["name"], "[unclosed")


def test_extends_names_a_bundled_machine_by_its_name(tmp_path):
    """A file of one's own may build on a bundled machine by name, as --topology takes it;
    a file of that name beside it still wins."""
    child = write(
        tmp_path / "mine.yaml", {"extends": "default.yaml", "sip": {"cube_mesh": {"w": 2}}}
    )
    topo = load_topology(child)
    assert (topo.name, topo.sip.cube_mesh.w, topo.sip.cube_mesh.h) == ("default", 2, 4)
    write(tmp_path / "default.yaml", {**PARENT, "name": "beside"})
    assert load_topology(child).name == "beside"


def test_a_missing_file_in_a_directory_is_not_the_bundled_machine_of_its_name(tmp_path):
    from kernbench.errors import InputFileError

    with pytest.raises(InputFileError, match="a bundled machine has the name 'ring8.yaml'"):
        load_topology(tmp_path / "typo_dir" / "ring8.yaml")
    assert load_topology("topologies/ring8.yaml").name == load_topology("ring8").name


def test_an_extends_cycle_says_cycle_once(tmp_path):
    write(tmp_path / "a.yaml", {"extends": "b.yaml"})
    write(tmp_path / "b.yaml", {"extends": "a.yaml"})
    with pytest.raises(ConfigError) as info:
        load_topology(tmp_path / "a.yaml")
    assert "extends: cycle" in str(info.value) and "extends: extends" not in str(info.value)


@pytest.mark.parametrize(
    ("override", "at"),
    [
        ("cube.pe_layout.corners.0=NE", "cube.pe_layout.corners"),
        ("faults.links.0.slowdown=2", "faults.links"),
    ],
)
def test_an_override_into_a_list_says_to_give_the_whole_list(override, at):
    with pytest.raises(ConfigError) as info:
        load_topology("tiny", [override])
    assert f"{at} is a list, and --set does not index lists" in str(info.value)
    assert f"--set {at}=[...]" in str(info.value)
    assert load_topology("tiny", ["cube.pe_layout.corners=[NE]"]).cube.pe_layout.corners == ["NE"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            "system.sips.count=2",
            "--set: overrides are a list of 'key.path=value' texts, not one text "
            "('system.sips.count=2'); give ['system.sips.count=2']",
        ),
        (
            ["system.sips.count=2", 5],
            "--set: override 1 must be a 'key.path=value' text (got int 5)",
        ),
        ([None], "--set: override 0 must be a 'key.path=value' text (got NoneType None)"),
        (4, "--set: overrides are a list of 'key.path=value' texts (got int 4)"),
    ],
    ids=["one-text", "a-number", "none", "not-a-list"],
)
def test_overrides_that_are_not_a_list_of_texts_are_refused(overrides, message):
    """One text used to be read character by character; a number in the list raised
    AttributeError."""
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        load_topology("tiny", overrides)


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        ("", "the topology path is empty; name a topology file or a bundled machine ("),
        (
            None,
            "topology: a topology is named by a file's path or a bundled machine's name "
            "(got NoneType None)",
        ),
        (
            5,
            "topology: a topology is named by a file's path or a bundled machine's name "
            "(got int 5)",
        ),
    ],
    ids=["empty", "none", "number"],
)
def test_a_topology_named_by_nothing_usable_is_refused(topology, message):
    """ "" used to be read as the current directory ("." is a directory), None and 5 as
    files named "None" and "5"."""
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        load_topology(topology)


def test_simulate_checks_its_overrides_the_same_way():
    import kernbench

    with pytest.raises(ConfigError, match=re.escape("override 0 must be a 'key.path=value' text")):
        kernbench.simulate(lambda: None, topology="tiny", overrides=[b"system.sips.count=2"])
