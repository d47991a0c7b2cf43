"""Component names: built and parsed in one module, round trip exactly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernbench.errors import RouteError
from kernbench.topology import build_graph, load_topology, names


@pytest.mark.parametrize(
    ("name", "kind", "coords"),
    [
        ("host", "host", (-1, -1, -1, -1)),
        ("switch", "switch", (-1, -1, -1, -1)),
        ("sip3", "sip", (3, -1, -1, -1)),
        ("sip3.cube12", "cube", (3, 12, -1, -1)),
        ("sip0.cube3.pe5", "pe", (0, 3, 5, -1)),
        ("sip0.cube3.pe5.tcm", "tcm", (0, 3, 5, -1)),
        ("sip1.cube0.hbm7", "hbm", (1, 0, -1, 7)),
        ("sip1.cube0.sram", "sram", (1, 0, -1, -1)),
        ("sip1.cube0.m_cpu", "m_cpu", (1, 0, -1, -1)),
        ("sip1.cube0.noc", "noc", (1, 0, -1, -1)),
    ],
)
def test_parse_and_format_round_trip(name, kind, coords):
    node = names.parse(name)
    assert node.kind == kind and (node.sip, node.cube, node.pe, node.index) == coords
    assert str(node) == name


def test_builders_match_the_documented_forms():
    assert names.pe(0, 3, 5) == "sip0.cube3.pe5"
    assert names.tcm_of("sip0.cube3.pe5") == "sip0.cube3.pe5.tcm"
    assert names.sram_of("sip0.cube3.pe5") == "sip0.cube3.sram"
    assert names.m_cpu_of("sip0.cube3.hbm1") == "sip0.cube3.m_cpu"
    assert names.cube_of("sip0.cube3.pe5.tcm") == "sip0.cube3"
    assert names.sip_of("sip2.cube3.pe5") == "sip2"
    assert names.link("sip0", "switch") == "link:sip0->switch"
    assert names.port("sip0.cube0.hbm0") == "port:sip0.cube0.hbm0"
    assert names.pe_coordinates("sip4.cube1.pe2") == (4, 1, 2)
    assert names.within_cube("sip0.cube3.pe5.vector") == ("sip0.cube3", "pe5.vector")
    assert names.within_cube("sip0.cube3") == ("sip0.cube3", "")
    assert names.within_cube("interconnect") is None


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "sip",
        "sip-1",
        "sip01",
        "sip1.cube",
        "sip1.cube1.pe",
        "sip1.cube1.pe1.x",
        "sip1.cube1.hbm",
        "sip1.cube1.gpu",
        " sip1",
        "sip1.cube1.pe+1",
        "sip١",
    ],
)
def test_malformed_names_are_value_errors(bad):
    with pytest.raises(ValueError):
        names.parse(bad)


def test_cube_and_sip_of_refuse_names_outside_them():
    with pytest.raises(ValueError):
        names.cube_of("sip0")
    with pytest.raises(ValueError):
        names.sip_of("host")
    with pytest.raises(ValueError):
        names.pe_coordinates("sip0.cube0.hbm0")


def test_the_graph_checks_names_against_the_machine():
    graph = build_graph(load_topology("tiny"))
    assert graph.check_name("sip0.cube0.pe3").kind == "pe"
    for missing in ("sip0.cube0.pe4", "sip1.cube0.pe0", "sip0.cube0.hbm9", "switch", "sip0"):
        with pytest.raises(RouteError, match="unknown endpoint"):
            graph.check_name(missing)


# A name built by hand: sip/cube/pe/hbm with a brace, or a component suffix on a name.
HAND_BUILT = re.compile(
    r"""f["'][^"']*(sip\{|cube\{|\.pe\{|\.hbm\{)|["']\.(m_cpu|sram|tcm|noc)["']|"""
    r"""rsplit\(\s*["']\.["']|split\(\s*["']\.["']\s*\)\s*$"""
)


def test_no_module_but_names_builds_or_splits_a_component_name():
    package = Path(names.__file__).resolve().parents[1]
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "names.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if HAND_BUILT.search(line) and "key" not in line:
                offenders.append(f"{path.relative_to(package)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
