"""Topology validation: every class of bad YAML gives a ConfigError naming the key."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pydantic
import pytest
import yaml

from kernbench.errors import ConfigError, KernBenchError, TopologyError, UnitError
from kernbench.topology import Topology, limits, load_topology, validate_topology

MINIMAL = {
    "system": {"sips": {"count": 1}},
    "sip": {"cube_mesh": {"w": 2, "h": 2}},
}

# MINIMAL with every link written out, so that changing one key of a link
# leaves the others present.
WITH_LINKS = {
    "system": {
        "sips": {"count": 1},
        "interconnect": {"link": {"bandwidth": "100GB/s", "latency": "1us"}},
    },
    "sip": {"cube_mesh": {"w": 2, "h": 2, "link": {"bandwidth": "256GB/s", "latency": "20ns"}}},
}


def with_key(path: str, value, base=MINIMAL) -> dict:
    """A copy of ``base`` with the dotted ``path`` set to ``value``."""
    document = copy.deepcopy(base)
    node = document
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return document


def write(tmp_path: Path, document, name: str = "topo.yaml") -> Path:
    path = tmp_path / name
    if isinstance(document, str):
        path.write_text(document)
    else:
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def load_error(tmp_path: Path, document) -> ConfigError:
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    return info.value


# --- a valid document ---------------------------------------------------------


def test_minimal_document_fills_defaults(tmp_path):
    topo = load_topology(write(tmp_path, MINIMAL))
    assert isinstance(topo, Topology)
    assert topo.name == "unnamed"
    assert topo.num_sips == 1
    assert topo.cubes_per_sip == 4
    assert topo.pes_per_cube == 8  # 4 corners x 2
    assert topo.num_pes == 32
    assert topo.system.interconnect.kind == "ring"
    assert topo.system.interconnect.link.bandwidth == 100 * 10**9
    assert topo.system.interconnect.link.latency == 1_000_000
    assert topo.sip.cube_mesh.link.bandwidth == 256 * 10**9
    assert topo.sip.cube_mesh.link.latency == 20_000
    assert topo.sip.cube_mesh.torus is False
    assert topo.cube.memory_map.hbm_total_gb_per_cube == 48 * 10**9
    assert topo.cube.memory_map.hbm_slices_per_cube == 8
    assert topo.cube.sram.size == 32 * 2**20
    attrs = topo.cube.pe_template.components
    assert attrs.pe_core.attrs.clock == 1_500_000_000
    assert attrs.pe_tcm.attrs.size_mb == 16 * 10**6
    assert attrs.pe_mmu.attrs.page_size == 4096
    assert attrs.pe_ipcq.attrs.slot_bytes == 65_536
    assert topo.fabric.packet_bytes == 4096


def test_units_are_parsed_into_internal_units():
    document = with_key("sip.cube_mesh.link", {"bandwidth": "12.8GB/s", "latency": "500ns"})
    document = with_key("cube.pe_template.components.pe_tcm.attrs.size_mb", "16MiB", document)
    document = with_key("cube.pe_template.components.pe_mmu.attrs.page_size", "64KiB", document)
    document = with_key("cube.memory_map.hbm_total_gb_per_cube", "16GiB", document)
    topo = validate_topology(document)
    assert topo.sip.cube_mesh.link.bandwidth == 12_800_000_000
    assert topo.sip.cube_mesh.link.latency == 500_000
    assert topo.cube.pe_template.components.pe_tcm.attrs.size_mb == 16 * 2**20
    assert topo.cube.pe_template.components.pe_mmu.attrs.page_size == 65_536
    assert topo.cube.memory_map.hbm_total_gb_per_cube == 16 * 2**30


def test_plain_numbers_in_unit_named_keys():
    # size_mb is MB (10^6) and hbm_total_gb_per_cube is GB (10^9) when a bare number.
    document = with_key("cube.pe_template.components.pe_tcm.attrs.size_mb", 2)
    document = with_key("cube.memory_map.hbm_total_gb_per_cube", 0.5, document)
    document = with_key("cube.memory_map.hbm_slices_per_cube", 4, document)
    topo = validate_topology(document)
    assert topo.cube.pe_template.components.pe_tcm.attrs.size_mb == 2_000_000
    assert topo.cube.memory_map.hbm_total_gb_per_cube == 500_000_000


def test_decimal_fraction_of_mb_is_exact():
    document = with_key("cube.pe_template.components.pe_tcm.attrs.size_mb", 4.1)
    topo = validate_topology(document)
    assert topo.cube.pe_template.components.pe_tcm.attrs.size_mb == 4_100_000


def test_fraction_that_is_not_whole_bytes_is_rejected():
    document = with_key("cube.pe_template.components.pe_tcm.attrs.size_mb", 0.0000005)
    with pytest.raises(ConfigError, match="whole number of bytes"):
        validate_topology(document)


def test_topology_is_frozen():
    topo = validate_topology(MINIMAL)
    with pytest.raises(pydantic.ValidationError):
        topo.name = "other"
    with pytest.raises(pydantic.ValidationError):
        topo.sip.cube_mesh.w = 3


def test_error_types_are_kernbench_errors():
    assert issubclass(ConfigError, KernBenchError)
    assert issubclass(TopologyError, ConfigError)
    err = ConfigError("boom", key_path="a.b", source="f.yaml")
    assert err.key_path == "a.b"
    assert err.source == "f.yaml"
    assert str(err) == "f.yaml: a.b: boom"
    assert str(ConfigError("boom")) == "boom"


# --- unknown keys -------------------------------------------------------------


def test_unknown_top_level_key(tmp_path):
    err = load_error(tmp_path, with_key("sytem", {"sips": {"count": 1}}))
    message = str(err)
    assert err.key_path == "sytem"
    assert "unknown key 'sytem'" in message
    for valid in ("name", "description", "system", "sip", "cube", "fabric"):
        assert valid in message
    assert str(tmp_path / "topo.yaml") in message  # names the file


def test_unknown_nested_key(tmp_path):
    key = "cube.pe_template.components.pe_tcm.attrs.sizee_mb"
    err = load_error(tmp_path, with_key(key, 16))
    message = str(err)
    assert err.key_path == key
    assert key in message
    assert "valid keys here: size_mb, bandwidth, latency" in message


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("system.sips.counts", ["count"]),
        ("system.interconnect.knd", ["kind", "link", "switch_latency", "attach_cube"]),
        ("sip.cube_mesh.link.bw", ["bandwidth", "latency"]),
        ("cube.pe_layuot", ["pe_layout", "memory_map", "hbm", "sram", "pe_template"]),
        ("cube.pe_template.components.pe_gpu", ["pe_core", "pe_tcm", "pe_mmu", "pe_ipcq"]),
        ("cube.pe_template.components.pe_mmu.attrs.page", ["page_size"]),
        ("fabric.packet", ["packet_bytes"]),
    ],
)
def test_unknown_key_names_path_and_valid_keys(tmp_path, key, valid):
    err = load_error(tmp_path, with_key(key, 1, WITH_LINKS))
    message = str(err)
    assert err.key_path == key
    assert f"{key}: unknown key" in message
    for name in valid:
        assert name in message


def test_extends_is_not_a_schema_key():
    with pytest.raises(ConfigError, match="unknown key 'extends'"):
        validate_topology(with_key("extends", "other.yaml"))


# --- wrong types --------------------------------------------------------------


def test_wrong_type_count(tmp_path):
    err = load_error(tmp_path, with_key("sip.cube_mesh.w", "four"))
    assert err.key_path == "sip.cube_mesh.w"
    assert "sip.cube_mesh.w" in str(err)
    assert "whole number" in str(err)
    assert "'four'" in str(err)


@pytest.mark.parametrize("value", [1.5, True, "1", None])
def test_count_must_be_a_strict_integer(value):
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key("system.sips.count", value))
    assert info.value.key_path == "system.sips.count"


def test_wrong_type_section():
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key("system.sips", 3))
    assert info.value.key_path == "system.sips"
    assert "expected a section of keys" in str(info.value)


def test_wrong_type_bool():
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key("sip.cube_mesh.torus", "maybe"))
    assert info.value.key_path == "sip.cube_mesh.torus"
    assert "true or false" in str(info.value)


def _with_bool(key: str, value) -> dict:
    if key == "faults.links.0.down":
        return with_key("faults.links", [{"link": "link:sip0.cube0->sip0.cube1", "down": value}])
    return with_key(key, value)


@pytest.mark.parametrize("value", [1, 0, 0.0, "yes", "true", "on", "1"])
@pytest.mark.parametrize("key", ["sip.cube_mesh.torus", "faults.links.0.down"])
def test_a_bool_takes_only_true_or_false(key, value):
    with pytest.raises(ConfigError) as info:
        validate_topology(_with_bool(key, value))
    assert info.value.key_path == key
    text = f"the text {value!r}; write true or false unquoted" if isinstance(value, str) else value
    assert str(info.value) == f"<topology>: {key}: expected true or false (got {text})"


@pytest.mark.parametrize(("text", "value"), [("true", True), ("false", False), ("True", True)])
def test_yaml_true_and_false_are_booleans(tmp_path, text, value):
    mesh = f"{{w: 3, h: 3, torus: {text}}}"
    path = write(tmp_path, f"system: {{sips: {{count: 1}}}}\nsip:\n  cube_mesh: {mesh}\n")
    assert load_topology(path).sip.cube_mesh.torus is value


def test_yes_is_text_and_not_a_boolean(tmp_path):
    # YAML 1.2's core schema (kernbench/yamlfile.py): yes, no, on, off are text.
    mesh = "{w: 3, h: 3, torus: yes}"
    err = load_error(tmp_path, f"system: {{sips: {{count: 1}}}}\nsip:\n  cube_mesh: {mesh}\n")
    assert err.key_path == "sip.cube_mesh.torus"
    assert "expected true or false (got the text 'yes'; write true or false unquoted)" in str(err)


def test_a_model_with_a_lax_bool_is_refused_when_declared():
    from kernbench.validation import StrictModel

    with pytest.raises(TypeError, match="Lax.flag is a lax bool; declare it StrictBool"):

        class Lax(StrictModel):
            flag: bool = False


def test_bad_corner_name_lists_valid_corners():
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key("cube.pe_layout.corners", ["NW", "XX"]))
    message = str(info.value)
    assert "cube.pe_layout.corners" in message
    assert "'XX'" in message
    for corner in ("NW", "NE", "SW", "SE"):
        assert corner in message


# --- bad units ----------------------------------------------------------------


def test_bad_bandwidth_unit(tmp_path):
    err = load_error(tmp_path, with_key("sip.cube_mesh.link.bandwidth", "50 parsecs", WITH_LINKS))
    message = str(err)
    assert err.key_path == "sip.cube_mesh.link.bandwidth"
    assert "sip.cube_mesh.link.bandwidth" in message
    assert "parsecs" in message
    assert "GB/s" in message  # lists valid units


def test_bandwidth_without_unit(tmp_path):
    err = load_error(tmp_path, with_key("sip.cube_mesh.link.bandwidth", 50, WITH_LINKS))
    message = str(err)
    assert err.key_path == "sip.cube_mesh.link.bandwidth"
    assert "sip.cube_mesh.link.bandwidth" in message
    assert "needs a unit" in message
    assert "50GB/s" in message


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("system.interconnect.link.latency", 500, "needs a unit"),
        ("system.interconnect.link.latency", "0.5ps", "whole number of ps"),
        ("system.host_link.bandwidth", "0GB/s", "positive"),
        ("cube.pe_template.components.pe_core.attrs.clock", "1.5GHzz", "unknown frequency unit"),
        ("cube.sram.size", "32MiBs", "unknown size unit"),
        ("cube.hbm.slice_bandwidth", "128GB", "unknown bandwidth unit"),
    ],
)
def test_unit_errors_name_the_key(key, value, fragment):
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key(key, value, WITH_LINKS))
    assert info.value.key_path == key
    assert key in str(info.value)
    assert fragment in str(info.value)


def test_unit_error_is_reported_as_config_error_not_pydantic():
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key("sip.cube_mesh.link.latency", "5parsecs", WITH_LINKS))
    assert not isinstance(info.value, pydantic.ValidationError)
    assert "Value error" not in str(info.value)


def test_unit_error_is_a_config_error():
    # A UnitError is-a ConfigError, so the CLI reports both the same way.
    assert issubclass(UnitError, ConfigError)


# --- impossible shapes ----------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("system.sips.count", 0),
        ("sip.cube_mesh.w", 0),
        ("sip.cube_mesh.h", -1),
        ("cube.pe_layout.pe_per_corner", 0),
        ("cube.memory_map.hbm_slices_per_cube", 0),
        ("cube.pe_template.components.pe_ipcq.attrs.depth", 0),
    ],
)
def test_counts_must_be_positive(tmp_path, key, value):
    err = load_error(tmp_path, with_key(key, value))
    assert err.key_path == key
    assert f"{key}: must be > 0 (got {value})" in str(err)


def test_page_size_zero():
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key("cube.pe_template.components.pe_mmu.attrs.page_size", 0))
    assert info.value.key_path == "cube.pe_template.components.pe_mmu.attrs.page_size"
    assert "must be > 0" in str(info.value)


def test_empty_corners(tmp_path):
    err = load_error(tmp_path, with_key("cube.pe_layout.corners", []))
    assert err.key_path == "cube.pe_layout.corners"
    assert "cube.pe_layout.corners" in str(err)
    assert "at least 1" in str(err)


def test_repeated_corners(tmp_path):
    err = load_error(tmp_path, with_key("cube.pe_layout.corners", ["NW", "SE", "NW"]))
    message = str(err)
    assert err.key_path.startswith("cube.pe_layout")
    assert "cube.pe_layout" in message
    assert "corners must not repeat" in message


def test_hbm_that_does_not_divide_into_slices(tmp_path):
    document = with_key("cube.memory_map", {"hbm_total_gb_per_cube": 4, "hbm_slices_per_cube": 3})
    err = load_error(tmp_path, document)
    message = str(err)
    assert err.key_path.startswith("cube")
    assert "hbm_total_gb_per_cube" in message
    assert "hbm_slices_per_cube" in message
    assert "4000000000" in message
    assert "divide" in message


def test_hbm_that_divides_is_accepted():
    document = with_key("cube.memory_map", {"hbm_total_gb_per_cube": 4, "hbm_slices_per_cube": 4})
    topo = validate_topology(document)
    assert topo.cube.memory_map.hbm_total_gb_per_cube // 4 == 10**9


def test_attach_cube_out_of_range(tmp_path):
    # a 2x2 mesh has cubes 0..3
    err = load_error(tmp_path, with_key("system.interconnect.attach_cube", 4))
    message = str(err)
    assert "system.interconnect.attach_cube" in message
    assert "valid: 0..3" in message


def test_attach_cube_last_cube_is_valid():
    topo = validate_topology(with_key("system.interconnect.attach_cube", 3))
    assert topo.system.interconnect.attach_cube == 3


def test_attach_cube_negative():
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key("system.interconnect.attach_cube", -1))
    assert info.value.key_path == "system.interconnect.attach_cube"
    assert ">= 0" in str(info.value)


@pytest.mark.parametrize("page_size", [3000, 4097, "3KiB", 6144])
def test_page_size_not_power_of_two(tmp_path, page_size):
    key = "cube.pe_template.components.pe_mmu.attrs.page_size"
    err = load_error(tmp_path, with_key(key, page_size))
    message = str(err)
    assert "cube.pe_template.components.pe_mmu.attrs" in message
    assert "page_size must be a power of two" in message


@pytest.mark.parametrize("page_size", [1, 4096, "64KiB", "2MiB"])
def test_page_size_power_of_two_accepted(page_size):
    key = "cube.pe_template.components.pe_mmu.attrs.page_size"
    topo = validate_topology(with_key(key, page_size))
    size = topo.cube.pe_template.components.pe_mmu.attrs.page_size
    assert size & (size - 1) == 0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("system.interconnect.attach_cube", 4),
        ("cube.pe_template.components.pe_mmu.attrs.page_size", 3000),
        ("cube.pe_layout.corners", ["NW", "NW"]),
    ],
)
def test_cross_field_errors_point_at_the_offending_key(key, value):
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key(key, value))
    assert info.value.key_path == key


def test_bad_interconnect_kind(tmp_path):
    err = load_error(tmp_path, with_key("system.interconnect.kind", "mesh"))
    message = str(err)
    assert err.key_path == "system.interconnect.kind"
    assert "system.interconnect.kind" in message
    assert "'mesh'" in message
    for kind in ("ring", "switch", "fully_connected"):
        assert kind in message


@pytest.mark.parametrize("kind", ["ring", "switch", "fully_connected"])
def test_every_interconnect_kind_is_accepted(kind):
    topo = validate_topology(with_key("system.interconnect.kind", kind))
    assert topo.system.interconnect.kind == kind


def test_bad_device_level():
    with pytest.raises(ConfigError) as info:
        validate_topology(with_key("system.device_level", "rack"))
    for level in ("sip", "cube", "pe"):
        assert level in str(info.value)


def test_several_errors_are_all_reported():
    document = with_key("sip.cube_mesh.w", 0)
    document = with_key("system.interconnect.kind", "mesh", document)
    with pytest.raises(ConfigError) as info:
        validate_topology(document)
    message = str(info.value)
    assert "sip.cube_mesh.w" in message
    assert "system.interconnect.kind" in message


# --- file-level errors ----------------------------------------------------------


def test_invalid_yaml_syntax_names_the_line(tmp_path):
    text = "system:\n  sips: {count: 1}\nsip:\n  cube_mesh: {w: [1, 2\n    h: 1\n"
    err = load_error(tmp_path, text)
    message = str(err)
    assert "invalid YAML" in message
    assert "line 5" in message
    assert str(tmp_path / "topo.yaml") in message


def test_invalid_yaml_bad_indentation_names_the_line(tmp_path):
    text = "system:\n  sips: {count: 1}\n   sip: 3\n"
    err = load_error(tmp_path, text)
    assert "invalid YAML" in str(err)
    assert "line 3" in str(err)


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "list"), ("42\n", "int")])
def test_top_level_not_a_mapping(tmp_path, text, kind):
    err = load_error(tmp_path, text)
    assert "top level must be a mapping" in str(err)
    assert kind in str(err)


def test_missing_required_section(tmp_path):
    document = {"sip": {"cube_mesh": {"w": 1, "h": 1}}}
    err = load_error(tmp_path, document)
    assert err.key_path == "system"
    assert "system: required key is missing" in str(err)


def test_missing_nested_required_key():
    with pytest.raises(ConfigError) as info:
        validate_topology({"system": {"sips": {}}, "sip": {"cube_mesh": {"w": 1}}})
    message = str(info.value)
    assert "system.sips.count: required key is missing" in message
    assert "sip.cube_mesh.h: required key is missing" in message


def test_empty_file_reports_missing_sections(tmp_path):
    err = load_error(tmp_path, "")
    assert "system" in str(err)
    assert "sip" in str(err)
    assert "required" in str(err)


def test_file_not_found(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_topology(missing)
    assert "file not found" in str(info.value)
    assert "nope.yaml" in str(info.value)


def test_extends_missing_file(tmp_path):
    write(tmp_path, {"extends": "missing_parent.yaml", **MINIMAL})
    with pytest.raises(ConfigError) as info:
        load_topology(tmp_path / "topo.yaml")
    assert info.value.key_path == "extends"
    assert "missing_parent.yaml" in str(info.value)
    assert "not found" in str(info.value)


def test_extends_cycle(tmp_path):
    write(tmp_path, {"extends": "b.yaml", **MINIMAL}, "a.yaml")
    write(tmp_path, {"extends": "a.yaml", "name": "b"}, "b.yaml")
    with pytest.raises(ConfigError) as info:
        load_topology(tmp_path / "a.yaml")
    message = str(info.value)
    assert info.value.key_path == "extends"
    assert "cycle" in message
    assert "a.yaml" in message and "b.yaml" in message


def test_extends_self_is_a_cycle(tmp_path):
    write(tmp_path, {"extends": "self.yaml", **MINIMAL}, "self.yaml")
    with pytest.raises(ConfigError, match="cycle"):
        load_topology(tmp_path / "self.yaml")


def test_extends_must_be_a_path(tmp_path):
    write(tmp_path, {"extends": 3, **MINIMAL})
    with pytest.raises(ConfigError) as info:
        load_topology(tmp_path / "topo.yaml")
    assert info.value.key_path == "extends"
    assert "path" in str(info.value)


def test_duplicate_key_is_rejected(tmp_path):
    text = (
        "system:\n  sips: {count: 1}\nsip:\n  cube_mesh: {w: 2, h: 2}\nname: first\nname: second\n"
    )
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="name"):
        load_topology(path)


# --- machine size limits (checked in the schema, before any graph is built) -------


def _time_validate(document) -> ConfigError:
    # CPU time, not wall time: other processes loading the machine must not fail it
    start = time.process_time()
    with pytest.raises(ConfigError) as info:
        validate_topology(document)
    assert time.process_time() - start < 1.0
    return info.value


@pytest.mark.parametrize(
    ("key", "value", "limit", "reason"),
    [
        ("system.sips.count", 100_000, limits.MAX_SIPS, "sip field"),
        ("system.sips.count", 10**20, limits.MAX_SIPS, "sip field"),
        ("system.sips.count", limits.MAX_SIPS + 1, limits.MAX_SIPS, "sip field"),
        ("sip.cube_mesh.w", 100_000, limits.MAX_CUBES_PER_SIP, "cube field"),
        ("sip.cube_mesh.h", 10**20, limits.MAX_CUBES_PER_SIP, "cube field"),
        ("cube.pe_layout.pe_per_corner", 10**6, limits.MAX_PES_PER_CUBE, "pe field"),
        ("cube.memory_map.hbm_slices_per_cube", 10**9, limits.MAX_HBM_SLICES_PER_CUBE, "slice"),
    ],
)
def test_sizes_past_a_limit_name_the_key_and_the_limit(key, value, limit, reason):
    error = _time_validate(with_key(key, value))
    assert error.key_path == key
    message = str(error)
    assert f"{key}: " in message
    assert f"at most {limit}" in message and str(value) in message and reason in message


def test_a_mesh_whose_product_is_too_big_names_the_mesh():
    error = _time_validate(with_key("sip.cube_mesh", {"w": 16, "h": 16}))
    assert error.key_path == "sip.cube_mesh"
    assert f"at most {limits.MAX_CUBES_PER_SIP}" in str(error) and "16 x 16 = 256" in str(error)


def test_a_machine_with_too_many_pes_names_the_limit():
    document = with_key("system.sips.count", limits.MAX_SIPS)
    document = with_key("sip.cube_mesh", {"w": 8, "h": 16}, document)
    document = with_key("cube.pe_layout.pe_per_corner", 32, document)
    error = _time_validate(document)
    assert error.key_path == "system.sips.count"
    assert f"at most {limits.MAX_PES} PEs" in str(error)
    assert "65536 SIPs x 128 cubes x 128 PEs = 1073741824" in str(error)


def test_a_machine_with_too_many_memories_names_the_limit():
    """2^20 PEs pass, but 128 HBM slices in each of their cubes would be 2^27 ports."""
    document = with_key("system.sips.count", 2048)
    document = with_key("sip.cube_mesh", {"w": 16, "h": 8}, document)
    document = with_key("cube.pe_layout", {"corners": ["NW"], "pe_per_corner": 4}, document)
    document = with_key("cube.memory_map.hbm_slices_per_cube", 128, document)
    error = _time_validate(document)
    assert error.key_path == "cube.memory_map.hbm_slices_per_cube"
    assert f"at most {limits.MAX_HBM_SLICES} in a machine" in str(error)
    assert "262144 cubes x 128 HBM slices = 33554432 memories" in str(error)


def test_a_fully_connected_machine_with_too_many_links_names_the_limit():
    # n(n-1)/2 links: the graph of 2,048 such SIPs took 25 s to build, of 65,536 forever.
    document = with_key("system.interconnect.kind", "fully_connected")
    error = _time_validate(with_key("system.sips.count", 2048, document))
    assert error.key_path == "system.sips.count"
    assert "2048 fully connected SIPs need 2096128 SIP-to-SIP links" in str(error)
    assert f"at most {limits.MAX_DIRECT_SIP_LINKS} (1448 SIPs" in str(error)
    assert "switch or clos" in str(error)
    _time_validate(with_key("system.sips.count", 1449, document))
    topo = validate_topology(with_key("system.sips.count", 1448, document))
    assert topo.num_sips * (topo.num_sips - 1) // 2 <= limits.MAX_DIRECT_SIP_LINKS


def test_the_largest_allowed_sizes_are_accepted():
    document = with_key("system.sips.count", limits.MAX_SIPS)
    document = with_key("sip.cube_mesh", {"w": 1, "h": 1}, document)
    document = with_key("cube.pe_layout.pe_per_corner", 4, document)
    document = with_key("cube.memory_map.hbm_slices_per_cube", 16, document)
    start = time.perf_counter()
    topo = validate_topology(document)
    assert time.perf_counter() - start < 1.0  # arithmetic on the counts, no graph
    assert topo.num_sips == limits.MAX_SIPS == 2**16
    assert topo.num_pes == limits.MAX_PES == 2**20
    document = with_key("sip.cube_mesh", {"w": 8, "h": 16})
    document = with_key("cube.pe_layout.pe_per_corner", 32, document)
    document = with_key(
        "cube.memory_map.hbm_slices_per_cube", limits.MAX_HBM_SLICES_PER_CUBE, document
    )
    document = with_key("cube.memory_map.hbm_total_gb_per_cube", 128, document)
    topo = validate_topology(document)
    assert topo.cubes_per_sip == limits.MAX_CUBES_PER_SIP
    assert topo.pes_per_cube == limits.MAX_PES_PER_CUBE


def test_the_limits_fit_the_physical_address_layout():
    from kernbench.memory.address import FIELD_BITS

    assert limits.MAX_SIPS <= 1 << FIELD_BITS["sip"]
    assert limits.MAX_CUBES_PER_SIP <= 1 << FIELD_BITS["cube"]
    assert limits.MAX_PES_PER_CUBE <= 1 << FIELD_BITS["pe"]
    assert limits.MAX_MEMORY_BYTES <= 1 << FIELD_BITS["offset"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("cube.memory_map.hbm_total_gb_per_cube", 9_000_000_000),
        ("cube.memory_map.hbm_total_gb_per_cube", "257GiB"),
        ("cube.sram.size", 2**63 - 1),
        ("cube.pe_template.components.pe_tcm.attrs.size_mb", "1TiB"),
    ],
)
def test_a_memory_larger_than_the_address_offset_names_the_key(key, value):
    error = _time_validate(with_key(key, value))
    assert error.key_path == key
    assert "at most 256GiB" in str(error) and "offset field" in str(error)


def test_the_largest_memory_is_accepted():
    topo = validate_topology(with_key("cube.sram.size", "256GiB"))
    assert topo.cube.sram.size == limits.MAX_MEMORY_BYTES


@pytest.mark.parametrize(
    "value",
    [float("inf"), float("-inf"), float("nan"), 1e300, 10**40],
)
def test_non_finite_or_huge_sizes_are_errors(value):
    key = "cube.memory_map.hbm_total_gb_per_cube"
    error = _time_validate(with_key(key, value))
    assert error.key_path == key


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300])
def test_non_finite_slowdowns_are_errors(value):
    document = with_key("faults.pes", [{"pe": "sip0.cube0.pe0", "slowdown": value}])
    error = _time_validate(document)
    assert error.key_path == "faults.pes.0.slowdown"


# --- duplicate fault rules ----------------------------------------------------------


def test_a_link_fault_listed_twice_names_both_indices():
    link = "link:sip0.cube0->sip0.cube1"
    document = with_key(
        "faults.links",
        [{"link": link, "slowdown": 2}, {"link": "link:sip0.cube1->sip0.cube0"}, {"link": link}],
    )
    error = _time_validate(document)
    assert error.key_path == "faults.links.2.link"
    assert "faults.links.0" in str(error) and link in str(error)


def test_a_pe_fault_listed_twice_names_both_indices():
    pe = {"pe": "sip0.cube0.pe1", "slowdown": 2}
    error = _time_validate(with_key("faults.pes", [pe, pe]))
    assert error.key_path == "faults.pes.1.pe"
    assert "faults.pes.0" in str(error)


# --- what errors echo ---------------------------------------------------------------


def test_errors_cap_what_they_echo_of_a_huge_value():
    error = _time_validate(with_key("sip.cube_mesh.w", "x" * 1_000_000))
    assert len(str(error)) < 1000
    error = _time_validate(with_key("cube.pe_layout.corners", ["NW", "XX"] * 100_000))
    assert "at most 4 item(s) (got 200000)" in str(error) and len(str(error)) < 1000
    faults = [{"pe": "x" * 1000, "slowdown": "fast"}] * 20_000
    error = _time_validate(with_key("faults.pes", faults))
    assert len(str(error)) < 5000
    assert "... and 19990 more errors" in str(error)


# --- keys the configuration would ignore -----------------------------------------


@pytest.mark.parametrize(
    ("written", "key", "message"),
    [
        (
            {"system.interconnect.switch_latency": "300ns"},
            "system.interconnect.switch_latency",
            "system.interconnect.switch_latency: applies only to kind: switch (this "
            "interconnect is kind: ring); remove it or set kind: switch",
        ),
        (
            # Written at its default value: still written, still meaningless.
            {
                "system.interconnect.kind": "fully_connected",
                "system.interconnect.switch_latency": "0ns",
            },
            "system.interconnect.switch_latency",
            "system.interconnect.switch_latency: applies only to kind: switch (this "
            "interconnect is kind: fully_connected); remove it or set kind: switch",
        ),
        (
            {
                "system.sips.count": 8,
                "system.interconnect.kind": "clos",
                "system.interconnect.link": {"bandwidth": "50GB/s", "latency": "1us"},
            },
            "system.interconnect.link",
            "system.interconnect.link: applies only to kind: ring, switch or fully_connected "
            "(this interconnect is kind: clos, whose links are clos.node.link, clos.leaf.link "
            "and clos.spine.link); remove it or set one of those kinds",
        ),
        (
            {
                "system.sips.count": 8,
                "system.interconnect.kind": "clos",
                "system.interconnect.switch_latency": "300ns",
            },
            "system.interconnect.switch_latency",
            "system.interconnect.switch_latency: applies only to kind: switch (this "
            "interconnect is kind: clos, whose switch latencies are clos.node.switch_latency, "
            "clos.leaf.switch_latency and clos.spine.switch_latency); remove it or set kind: "
            "switch",
        ),
        (
            {"system.interconnect.kind": "switch", "system.interconnect.clos": {}},
            "system.interconnect.clos",
            "system.interconnect.clos: applies only to kind: clos (this interconnect is kind: "
            "switch); remove it or set kind: clos",
        ),
        (
            {"simulation.drift": "approximate"},
            "simulation.drift",
            "simulation.drift: applies only to backend: fast (this machine's backend is "
            "detailed, which runs every message exactly); remove it or set backend: fast",
        ),
        (
            {
                "faults.links": [
                    {"link": "link:sip0.cube0->sip0.cube1", "down": True, "slowdown": 2}
                ]
            },
            "faults.links.0.slowdown",
            "faults.links.0.slowdown: applies only to a link in service (this link is down: "
            "true and carries nothing); remove it or set down: false",
        ),
    ],
)
def test_a_key_this_configuration_ignores_is_refused(written, key, message):
    document = MINIMAL
    for path, value in written.items():
        document = with_key(path, value, document)
    with pytest.raises(ConfigError) as info:
        validate_topology(document)
    assert info.value.key_path == key
    assert str(info.value) == f"<topology>: {message}"


@pytest.mark.parametrize(
    "written",
    [
        {"system.interconnect.kind": "switch", "system.interconnect.switch_latency": "300ns"},
        {"system.interconnect.kind": "fully_connected", "system.interconnect.link.latency": "2us"},
        {"system.interconnect.kind": "ring", "system.interconnect.link.bandwidth": "1GB/s"},
        {"system.interconnect.kind": "clos", "system.interconnect.attach_cube": 1},
        {"simulation.backend": "fast", "simulation.drift": "approximate"},
        {"faults.links": [{"link": "link:sip0.cube0->sip0.cube1", "down": False, "slowdown": 2}]},
        {"faults.links": [{"link": "link:sip0.cube0->sip0.cube1", "down": True}]},
    ],
)
def test_the_same_keys_where_they_apply_are_accepted(written):
    document = with_key("system.sips.count", 32)  # whole leaves of a default clos
    for path, value in written.items():
        document = with_key(path, value, document)
    validate_topology(document)


def test_an_override_that_the_configuration_ignores_is_refused():
    with pytest.raises(ConfigError) as info:
        load_topology("multi_sip", ["system.interconnect.switch_latency=300ns"])
    assert info.value.key_path == "system.interconnect.switch_latency"
    assert "applies only to kind: switch (this interconnect is kind: ring)" in str(info.value)
    topo = load_topology(
        "multi_sip", ["system.interconnect.kind=switch", "system.interconnect.switch_latency=300ns"]
    )
    assert topo.system.interconnect.switch_latency == 300_000


def test_a_child_drops_a_key_of_its_parents_kind_with_null(tmp_path):
    parent = with_key("system.interconnect.link", {"bandwidth": "50GB/s", "latency": "1us"})
    write(tmp_path, with_key("system.sips.count", 32, parent), "parent.yaml")
    child = {"extends": "parent.yaml", "system": {"interconnect": {"kind": "clos"}}}
    err = load_error(tmp_path, child)
    assert err.key_path == "system.interconnect.link"
    assert "applies only to kind: ring, switch or fully_connected" in str(err)
    child["system"]["interconnect"]["link"] = None
    topo = load_topology(write(tmp_path, child))
    assert topo.system.interconnect.kind == "clos"
    assert "link" not in topo.system.interconnect.model_fields_set


def test_an_override_of_null_removes_the_key():
    clos = ["system.sips.count=32", "system.interconnect.kind=clos"]
    with pytest.raises(ConfigError) as info:
        load_topology("multi_sip", clos)  # multi_sip.yaml writes a ring link
    assert info.value.key_path == "system.interconnect.link"
    topo = load_topology("multi_sip", [*clos, "system.interconnect.link=null"])
    assert topo.system.interconnect.clos is not None
