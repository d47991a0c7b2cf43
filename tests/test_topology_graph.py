"""The expanded machine graph: node and link names, routes, and metrics."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from functools import cache

import pytest

from kernbench.errors import KernBenchError, RouteError
from kernbench.topology import MachineGraph, build_graph, load_topology
from kernbench.topology.bundled import BUNDLED_DIR
from kernbench.topology.metrics import bisection_bandwidth, diameter_hops

TOPOLOGIES = BUNDLED_DIR  # the machines that ship in the package
GB = 10**9


@cache
def graph(name: str, *overrides: str) -> MachineGraph:
    return build_graph(load_topology(TOPOLOGIES / f"{name}.yaml", list(overrides)))


def route_names(g: MachineGraph, src: str, dst: str) -> list[str]:
    return [g.edges[i].name for i in g.route(src, dst)]


def sip_hops(g: MachineGraph, src: str, dst: str) -> list[str]:
    return [g.edges[i].name for i in g.route(src, dst) if g.edges[i].link_class == "sip_link"]


def edge(g: MachineGraph, name: str):
    matches = [e for e in g.edges if e.name == name]
    assert len(matches) == 1, f"{name} appears {len(matches)} times"
    return matches[0]


def assert_connected(g: MachineGraph, src: str, dst: str) -> None:
    """The route's links chain from src to dst with no gap."""
    here = src
    for e in (g.edges[i] for i in g.route(src, dst)):
        if e.src == here:
            here = e.dst
        else:  # a memory port is one edge for both directions
            assert e.name.startswith("port:") and e.dst == here
            here = e.src
    assert here == dst


# --- expansion ------------------------------------------------------------------


def expected_edges(sips, w, h, pes, slices, sip_links):
    # m_cpu link (2 directions), one shared port each for sram, hbm slices and tcms,
    # pe link (2 directions)
    per_cube = 2 + 1 + slices + 2 * pes + pes
    mesh = 2 * (h * (w - 1) + w * (h - 1))
    return sips * (w * h * per_cube + mesh) + sip_links + 2 * sips  # + host links


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("tiny", expected_edges(1, 1, 1, 4, 4, 0)),
        ("default", expected_edges(1, 4, 4, 8, 8, 0)),
        ("multi_sip", expected_edges(4, 4, 4, 8, 8, 8)),
        ("rack", expected_edges(8, 4, 4, 8, 8, 16)),
        ("ring8", expected_edges(8, 1, 1, 1, 1, 16)),
    ],
)
def test_edge_count(name, count):
    g = graph(name)
    assert len(g.edges) == count


def test_edge_counts_literal():
    assert len(graph("tiny").edges) == 21
    assert len(graph("default").edges) == 610
    assert len(graph("rack").edges) == 4896
    assert len(graph("ring8").edges) == 88


@pytest.mark.parametrize("name", ["tiny", "default", "multi_sip", "rack", "ring8"])
def test_edge_names_unique_and_indexed(name):
    g = graph(name)
    names = [e.name for e in g.edges]
    assert len(set(names)) == len(names)
    assert [e.index for e in g.edges] == list(range(len(g.edges)))
    assert all(e.name.startswith(("link:", "port:")) for e in g.edges)
    ports = [e for e in g.edges if e.name.startswith("port:")]
    assert {e.link_class for e in ports} == {"hbm_port", "sram_port", "tcm_port"}
    assert all(e.bandwidth > 0 and e.latency_ps >= 0 for e in g.edges)


@pytest.mark.parametrize("name", ["tiny", "default", "multi_sip", "rack", "ring8"])
def test_every_link_is_full_duplex(name):
    g = graph(name)
    ends = {(e.src, e.dst): e for e in g.edges}
    for e in g.edges:
        if e.name.startswith("port:"):
            continue  # memories are half duplex: reads and writes share one port
        back = ends[(e.dst, e.src)]
        assert back.index != e.index
        assert back.bandwidth == e.bandwidth
        # a switch's own latency is on the links leaving it, once per crossing
        if "switch" not in (e.src, e.dst):
            assert back.latency_ps == e.latency_ps
        assert back.link_class == e.link_class


@pytest.mark.parametrize("switch_latency", ["0ns", "250ns"])
def test_a_switch_is_crossed_at_its_latency_once(switch_latency):
    """SIP to SIP through the switch: two links and the switch's latency once."""
    topo = load_topology("rack", [f"system.interconnect.switch_latency={switch_latency}"])
    g = build_graph(topo)
    link = topo.system.interconnect.link.latency
    route = g.route("sip0.cube0.noc", "sip1.cube0.noc")
    assert [g.edges[e].name for e in route] == ["link:sip0->switch", "link:switch->sip1"]
    extra = topo.system.interconnect.switch_latency
    assert sum(g.edges[e].latency_ps for e in route) == 2 * link + extra
    assert extra == {"0ns": 0, "250ns": 250_000}[switch_latency]


def test_default_link_classes():
    counts = Counter(e.link_class for e in graph("default").edges)
    assert counts == {
        "cube_link": 48,  # 24 mesh links in a 4x4 mesh, both directions
        "pe_port": 256,
        "tcm_port": 128,
        "hbm_port": 128,
        "sram_port": 16,
        "mcpu_port": 32,
        "host_link": 2,
    }


def test_default_pe_names():
    names = graph("default").pe_names()
    assert len(names) == 128
    assert names[0] == "sip0.cube0.pe0"
    assert names[7] == "sip0.cube0.pe7"
    assert names[8] == "sip0.cube1.pe0"
    assert names[-1] == "sip0.cube15.pe7"
    assert len(set(names)) == 128


def test_rack_pe_names():
    names = graph("rack").pe_names()
    assert len(names) == 1024
    assert names[-1] == "sip7.cube15.pe7"


def test_cube_link_names_and_attributes():
    g = graph("default")
    forward = edge(g, "link:sip0.cube3->sip0.cube7")
    backward = edge(g, "link:sip0.cube7->sip0.cube3")
    assert (forward.src, forward.dst) == ("sip0.cube3.noc", "sip0.cube7.noc")
    assert (backward.src, backward.dst) == ("sip0.cube7.noc", "sip0.cube3.noc")
    for e in (forward, backward):
        assert e.bandwidth == 256 * GB
        assert e.latency_ps == 20_000
        assert e.link_class == "cube_link"
    assert forward.index != backward.index


def test_mesh_neighbours_are_row_major():
    # cube index = y * w + x in a 4-wide mesh: cube3 ends row 0, cube4 starts row 1.
    names = {e.name for e in graph("default").edges}
    for a, b in [(0, 1), (2, 3), (4, 5), (3, 7), (0, 4), (11, 15), (14, 15)]:
        assert f"link:sip0.cube{a}->sip0.cube{b}" in names
        assert f"link:sip0.cube{b}->sip0.cube{a}" in names
    for a, b in [(3, 4), (7, 8), (0, 5), (0, 3), (0, 12)]:
        assert f"link:sip0.cube{a}->sip0.cube{b}" not in names


def test_component_link_names():
    g = graph("default")
    pe = edge(g, "link:sip0.cube3.pe5->sip0.cube3.noc")
    assert pe.bandwidth == 512 * GB and pe.latency_ps == 5_000 and pe.link_class == "pe_port"
    tcm = edge(g, "port:sip0.cube3.pe5.tcm")
    assert tcm.bandwidth == 2 * 10**12 and tcm.latency_ps == 2_000
    hbm = edge(g, "port:sip0.cube3.hbm2")
    assert hbm.bandwidth == 128 * GB and hbm.latency_ps == 100_000
    assert hbm.link_class == "hbm_port"
    sram = edge(g, "port:sip0.cube3.sram")
    assert sram.bandwidth == 10**12 and sram.latency_ps == 10_000
    mcpu = edge(g, "link:sip0.cube3.m_cpu->sip0.cube3.noc")
    assert mcpu.link_class == "mcpu_port"
    host = edge(g, "link:host->sip0")
    assert (host.src, host.dst) == ("host", "sip0.cube0.noc")
    assert host.bandwidth == 64 * GB and host.latency_ps == 1_000_000
    edge(g, "link:sip0->host")


def test_no_hbm_slice_beyond_the_configured_count():
    names = {e.name for e in graph("default").edges}
    assert "port:sip0.cube0.hbm7" in names
    assert "port:sip0.cube0.hbm8" not in names
    assert "link:sip0.cube0.pe7->sip0.cube0.noc" in names
    assert "link:sip0.cube0.pe8->sip0.cube0.noc" not in names


def test_multi_sip_ring_links():
    g = graph("multi_sip")
    names = {e.name for e in g.edges}
    for a, b in [(0, 1), (1, 2), (2, 3), (3, 0)]:
        there = edge(g, f"link:sip{a}->sip{b}")
        back = edge(g, f"link:sip{b}->sip{a}")
        assert there.bandwidth == back.bandwidth == 100 * GB
        assert there.latency_ps == back.latency_ps == 1_000_000
        assert there.link_class == "sip_link"
        assert (there.src, there.dst) == (f"sip{a}.cube0.noc", f"sip{b}.cube0.noc")
    assert "link:sip0->sip2" not in names
    assert "link:sip1->sip3" not in names
    assert sum(e.link_class == "sip_link" for e in g.edges) == 8


def test_ring8_links():
    g = graph("ring8")
    for s in range(8):
        t = (s + 1) % 8
        for a, b in [(s, t), (t, s)]:
            e = edge(g, f"link:sip{a}->sip{b}")
            assert e.bandwidth == 50 * GB
            assert e.latency_ps == 500_000
    assert sum(e.link_class == "sip_link" for e in g.edges) == 16


def test_two_sip_ring_has_one_link_pair():
    g = graph("multi_sip", "system.sips.count=2")
    sip_links = sorted(e.name for e in g.edges if e.link_class == "sip_link")
    assert sip_links == ["link:sip0->sip1", "link:sip1->sip0"]


def test_rack_switch_links():
    g = graph("rack")
    for s in range(8):
        up = edge(g, f"link:sip{s}->switch")
        down = edge(g, f"link:switch->sip{s}")
        assert (up.src, up.dst) == (f"sip{s}.cube0.noc", "switch")
        assert up.bandwidth == down.bandwidth == 200 * GB
        # the link's latency into the switch; out of it, plus the switch's own latency
        assert up.latency_ps == 1_000_000
        assert down.latency_ps == 1_300_000
    assert sum(e.link_class == "sip_link" for e in g.edges) == 16
    assert not any(e.name == "link:sip0->sip1" for e in g.edges)


def test_fully_connected_links():
    g = graph("multi_sip", "system.interconnect.kind=fully_connected")
    names = {e.name for e in g.edges if e.link_class == "sip_link"}
    assert len(names) == 12
    for a, b in itertools.permutations(range(4), 2):
        assert f"link:sip{a}->sip{b}" in names


def test_attach_cube_moves_external_ports():
    g = graph("multi_sip", "system.interconnect.attach_cube=5")
    e = edge(g, "link:sip0->sip1")
    assert (e.src, e.dst) == ("sip0.cube5.noc", "sip1.cube5.noc")
    assert edge(g, "link:host->sip2").dst == "sip2.cube5.noc"


def test_torus_adds_wraparound_links():
    g = graph("default", "sip.cube_mesh.torus=true")
    names = {e.name for e in g.edges}
    assert sum(e.link_class == "cube_link" for e in g.edges) == 64
    assert "link:sip0.cube3->sip0.cube0" in names
    assert "link:sip0.cube0->sip0.cube3" in names
    assert "link:sip0.cube12->sip0.cube0" in names


def test_torus_of_width_two_adds_nothing():
    g = graph("default", "sip.cube_mesh.torus=true", "sip.cube_mesh.w=2", "sip.cube_mesh.h=2")
    assert sum(e.link_class == "cube_link" for e in g.edges) == 8


# --- routes -----------------------------------------------------------------------


def test_route_dimension_order_example():
    g = graph("default")
    # cube5 = (x1, y1), cube10 = (x2, y2): X first to cube6, then Y to cube10.
    assert route_names(g, "sip0.cube5.pe3", "sip0.cube10.hbm2") == [
        "link:sip0.cube5.pe3->sip0.cube5.noc",
        "link:sip0.cube5->sip0.cube6",
        "link:sip0.cube6->sip0.cube10",
        "port:sip0.cube10.hbm2",
    ]
    assert_connected(g, "sip0.cube5.pe3", "sip0.cube10.hbm2")


def test_route_x_then_y_corner_to_corner():
    g = graph("default")
    assert route_names(g, "sip0.cube0.pe0", "sip0.cube15.pe1") == [
        "link:sip0.cube0.pe0->sip0.cube0.noc",
        "link:sip0.cube0->sip0.cube1",
        "link:sip0.cube1->sip0.cube2",
        "link:sip0.cube2->sip0.cube3",
        "link:sip0.cube3->sip0.cube7",
        "link:sip0.cube7->sip0.cube11",
        "link:sip0.cube11->sip0.cube15",
        "link:sip0.cube15.noc->sip0.cube15.pe1",
    ]
    # The way back also goes X first, so it is not the reverse path.
    back = route_names(g, "sip0.cube15.pe1", "sip0.cube0.pe0")
    assert back[1:4] == [
        "link:sip0.cube15->sip0.cube14",
        "link:sip0.cube14->sip0.cube13",
        "link:sip0.cube13->sip0.cube12",
    ]
    assert back[4:7] == [
        "link:sip0.cube12->sip0.cube8",
        "link:sip0.cube8->sip0.cube4",
        "link:sip0.cube4->sip0.cube0",
    ]


def test_route_lengths_in_a_mesh_are_manhattan_distance():
    g = graph("default")
    for a, b in itertools.product(range(16), repeat=2):
        hops = abs(a % 4 - b % 4) + abs(a // 4 - b // 4)
        path = g.route(f"sip0.cube{a}.pe0", f"sip0.cube{b}.pe1")
        assert len(path) == hops + 2


def test_pe_to_own_tcm_is_one_link():
    g = graph("default")
    assert route_names(g, "sip0.cube3.pe5", "sip0.cube3.pe5.tcm") == ["port:sip0.cube3.pe5.tcm"]
    assert route_names(g, "sip0.cube3.pe5.tcm", "sip0.cube3.pe5") == ["port:sip0.cube3.pe5.tcm"]


def test_pe_to_another_pes_tcm_goes_through_the_router():
    g = graph("default")
    assert route_names(g, "sip0.cube0.pe0", "sip0.cube0.pe1.tcm") == [
        "link:sip0.cube0.pe0->sip0.cube0.noc",
        "link:sip0.cube0.noc->sip0.cube0.pe1",
        "port:sip0.cube0.pe1.tcm",
    ]
    path = route_names(g, "sip0.cube0.pe0.tcm", "sip0.cube1.pe0.tcm")
    assert len(path) == 5
    assert path[0] == "port:sip0.cube0.pe0.tcm"
    assert path[-1] == "port:sip0.cube1.pe0.tcm"
    assert_connected(g, "sip0.cube0.pe0.tcm", "sip0.cube1.pe0.tcm")


@pytest.mark.parametrize(
    ("src", "dst", "length"),
    [
        ("sip0.cube0.pe0", "sip0.cube0.pe1", 2),
        ("sip0.cube0.pe0", "sip0.cube0.hbm3", 2),
        ("sip0.cube0.hbm0", "sip0.cube0.hbm1", 2),
        ("sip0.cube0.pe0", "sip0.cube0.sram", 2),
        ("sip0.cube0.m_cpu", "sip0.cube0.pe0", 2),
        ("sip0.cube0.noc", "sip0.cube1.noc", 1),
        ("sip0.cube0.sram", "sip0.cube15.hbm7", 8),
        ("host", "sip0.cube0.pe0", 2),
        ("host", "sip0.cube15.hbm0", 8),
        ("sip0.cube15.pe0.tcm", "host", 9),
    ],
)
def test_route_lengths(src, dst, length):
    g = graph("default")
    assert len(g.route(src, dst)) == length
    assert_connected(g, src, dst)


def test_route_from_host():
    g = graph("default")
    assert route_names(g, "host", "sip0.cube5.pe0") == [
        "link:host->sip0",
        "link:sip0.cube0->sip0.cube1",
        "link:sip0.cube1->sip0.cube5",
        "link:sip0.cube5.noc->sip0.cube5.pe0",
    ]


def test_route_to_self_is_empty():
    assert graph("default").route("sip0.cube0.pe0", "sip0.cube0.pe0") == ()


def test_route_is_deterministic():
    g1 = graph("multi_sip")
    g2 = build_graph(load_topology(TOPOLOGIES / "multi_sip.yaml"))
    for src, dst in [("sip0.cube5.pe1", "sip3.cube10.hbm2"), ("host", "sip2.cube15.pe7")]:
        assert g1.route(src, dst) == g2.route(src, dst)
        assert g1.route(src, dst) == g1.route(src, dst)


def test_multi_sip_route_goes_through_attach_cubes():
    g = graph("multi_sip")
    assert route_names(g, "sip2.cube5.pe1", "sip1.cube10.pe0") == [
        "link:sip2.cube5.pe1->sip2.cube5.noc",
        "link:sip2.cube5->sip2.cube4",
        "link:sip2.cube4->sip2.cube0",
        "link:sip2->sip1",
        "link:sip1.cube0->sip1.cube1",
        "link:sip1.cube1->sip1.cube2",
        "link:sip1.cube2->sip1.cube6",
        "link:sip1.cube6->sip1.cube10",
        "link:sip1.cube10.noc->sip1.cube10.pe0",
    ]
    assert_connected(g, "sip2.cube5.pe1", "sip1.cube10.pe0")


@pytest.mark.parametrize(
    ("a", "b", "sips"),
    [
        (0, 1, [0, 1]),
        (0, 3, [0, 3]),  # backwards is shorter
        (3, 0, [3, 0]),
        (0, 2, [0, 1, 2]),  # tie: towards increasing index
        (1, 3, [1, 2, 3]),
        (3, 1, [3, 0, 1]),
    ],
)
def test_multi_sip_ring_routes(a, b, sips):
    g = graph("multi_sip")
    expected = [f"link:sip{x}->sip{y}" for x, y in itertools.pairwise(sips)]
    assert sip_hops(g, f"sip{a}.cube0.pe0", f"sip{b}.cube0.pe0") == expected


@pytest.mark.parametrize(
    ("a", "b", "sips"),
    [
        (0, 3, [0, 1, 2, 3]),
        (0, 5, [0, 7, 6, 5]),
        (0, 4, [0, 1, 2, 3, 4]),  # tie
        (4, 0, [4, 5, 6, 7, 0]),  # tie, also towards increasing index
        (2, 6, [2, 3, 4, 5, 6]),
        (7, 1, [7, 0, 1]),
        (1, 7, [1, 0, 7]),
        (6, 5, [6, 5]),
    ],
)
def test_ring8_routes(a, b, sips):
    g = graph("ring8")
    src, dst = f"sip{a}.cube0.pe0", f"sip{b}.cube0.pe0"
    expected = [f"link:sip{x}->sip{y}" for x, y in itertools.pairwise(sips)]
    assert sip_hops(g, src, dst) == expected
    names = route_names(g, src, dst)
    assert names[0] == f"link:sip{a}.cube0.pe0->sip{a}.cube0.noc"
    assert names[-1] == f"link:sip{b}.cube0.noc->sip{b}.cube0.pe0"
    assert len(names) == len(expected) + 2
    assert_connected(g, src, dst)


def test_ring8_every_route_takes_the_shorter_way():
    g = graph("ring8")
    for a, b in itertools.permutations(range(8), 2):
        d = (b - a) % 8
        assert len(sip_hops(g, f"sip{a}.cube0.pe0", f"sip{b}.cube0.pe0")) == min(d, 8 - d)


def test_rack_route_goes_through_the_switch():
    g = graph("rack")
    assert route_names(g, "sip0.cube0.pe0", "sip5.cube3.pe1") == [
        "link:sip0.cube0.pe0->sip0.cube0.noc",
        "link:sip0->switch",
        "link:switch->sip5",
        "link:sip5.cube0->sip5.cube1",
        "link:sip5.cube1->sip5.cube2",
        "link:sip5.cube2->sip5.cube3",
        "link:sip5.cube3.noc->sip5.cube3.pe1",
    ]


def test_rack_every_inter_sip_route_crosses_the_switch_once():
    g = graph("rack")
    for a, b in itertools.permutations(range(8), 2):
        path = [g.edges[i] for i in g.route(f"sip{a}.cube7.pe2", f"sip{b}.cube9.hbm1")]
        assert sum(e.dst == "switch" for e in path) == 1
        assert sum(e.src == "switch" for e in path) == 1
        assert [e.name for e in path if e.link_class == "sip_link"] == [
            f"link:sip{a}->switch",
            f"link:switch->sip{b}",
        ]


def test_switch_is_an_endpoint_on_a_switched_machine():
    g = graph("rack")
    assert route_names(g, "switch", "sip3.cube0.pe0") == [
        "link:switch->sip3",
        "link:sip3.cube0.noc->sip3.cube0.pe0",
    ]
    with pytest.raises(RouteError, match="no route"):
        g.route("host", "switch")


def test_fully_connected_route_is_direct():
    g = graph("multi_sip", "system.interconnect.kind=fully_connected")
    assert sip_hops(g, "sip0.cube0.pe0", "sip2.cube0.pe0") == ["link:sip0->sip2"]
    assert sip_hops(g, "sip3.cube0.pe0", "sip1.cube0.pe0") == ["link:sip3->sip1"]


def test_torus_route_takes_the_wraparound():
    g = graph("default", "sip.cube_mesh.torus=true")
    assert route_names(g, "sip0.cube0.noc", "sip0.cube3.noc") == ["link:sip0.cube0->sip0.cube3"]
    # x 0 -> 3 backwards over the wrap, then y 0 -> 3 backwards over the wrap
    assert route_names(g, "sip0.cube0.noc", "sip0.cube15.noc") == [
        "link:sip0.cube0->sip0.cube3",
        "link:sip0.cube3->sip0.cube15",
    ]
    for a, b in itertools.product(range(16), repeat=2):
        dx, dy = abs(a % 4 - b % 4), abs(a // 4 - b // 4)
        hops = min(dx, 4 - dx) + min(dy, 4 - dy)
        assert len(g.route(f"sip0.cube{a}.noc", f"sip0.cube{b}.noc")) == hops


@pytest.mark.parametrize(
    "bad",
    [
        "sip1.cube0.pe0",
        "sip0.cube16.pe0",
        "sip0.cube0.pe8",
        "sip0.cube0.hbm8",
        "sip0.cube0.pe0.mmu",
        "sip0.cube0",
        "bogus",
        "switch",  # default is not a switched machine
        "sip0.cubeX.pe0",
        "",
    ],
)
def test_unknown_endpoint(bad):
    g = graph("default")
    for src, dst in [(bad, "sip0.cube0.pe0"), ("sip0.cube0.pe0", bad)]:
        with pytest.raises(RouteError) as info:
            g.route(src, dst)
        message = str(info.value)
        assert "unknown endpoint" in message
        assert repr(bad) in message
        for form in ("sip0.cube0.pe0", "sip0.cube0.pe0.tcm", "sip0.cube0.hbm0", "host"):
            assert f"'{form}'" in message
        assert "1 SIPs x 16 cubes x 8 PEs" in message


def test_route_error_is_a_kernbench_error():
    assert issubclass(RouteError, KernBenchError)


@pytest.mark.parametrize("bad", ["sip00.cube0.pe0", "sip0.cube0.hbm01", "sip0.cube+1.pe0"])
@pytest.mark.parametrize("to_self", [True, False])
def test_non_canonical_endpoint_names_are_unknown(bad, to_self):
    g = graph("default")
    with pytest.raises(RouteError, match="unknown endpoint"):
        g.route(bad, bad if to_self else "sip0.cube5.pe0")


# --- metrics ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "hops"),
    [
        ("tiny", 2),  # PE -> router -> PE
        ("default", 8),  # 6 mesh hops corner to corner + 2
        ("ring8", 6),  # 4 ring hops + 2
        ("multi_sip", 16),  # 6 + 2 ring + 6 + 2
        ("rack", 16),  # 6 + 2 through the switch + 6 + 2
    ],
)
def test_diameter_hops(name, hops):
    assert diameter_hops(graph(name)) == hops


@pytest.mark.parametrize("name", ["tiny", "ring8", "default"])
def test_diameter_is_longest_pe_route(name):
    g = graph(name)
    pes = g.pe_names()
    longest = max(len(g.route(a, b)) for a in pes for b in pes)
    assert diameter_hops(g) == longest


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("multi_sip", ()),
        ("multi_sip", ("system.interconnect.attach_cube=5", "sip.cube_mesh.torus=true")),
        ("multi_sip", ("system.sips.count=5", "sip.cube_mesh.w=3", "sip.cube_mesh.h=5")),
        ("multi_sip", ("system.interconnect.kind=fully_connected", "sip.cube_mesh.w=2")),
        ("rack", ("system.interconnect.attach_cube=9",)),
        ("ring8", ("system.sips.count=7",)),
    ],
)
def test_diameter_matches_every_pair_of_routers(name, overrides):
    """The closed form over one SIP equals the longest route over every pair of cubes."""
    g = graph(name, *overrides)
    pes = [f"sip{s}.cube{c}.pe0" for s in range(g.num_sips) for c in range(g.cubes_per_sip)]
    longest = max(len(g.route(a, b)) for a, b in itertools.combinations(pes, 2))
    assert diameter_hops(g) == longest


def test_topo_summary_of_a_large_machine_is_fast():
    from kernbench.topology.summary import summarize

    # 256 SIPs x 16 cubes: 4096 routers, 8 million pairs (27 s before the closed form).
    topo = load_topology(TOPOLOGIES / "rack.yaml", ["system.sips.count=256"])
    g = build_graph(topo)
    start = time.perf_counter()
    summary = summarize(topo, g)
    assert time.perf_counter() - start < 2.0
    assert summary["network"]["diameter_hops"] == 16


def test_a_fault_rule_for_every_pe_is_cheap_to_look_up():
    from kernbench.topology import apply_overrides, load_topology_document, validate_topology

    document = apply_overrides(
        load_topology_document(TOPOLOGIES / "rack.yaml"), ["system.sips.count=64"]
    )
    pes = [f"sip{s}.cube{c}.pe{p}" for s in range(64) for c in range(16) for p in range(8)]
    document["faults"] = {"pes": [{"pe": pe, "slowdown": 1 + i % 3} for i, pe in enumerate(pes)]}
    g = build_graph(validate_topology(document))
    start = time.perf_counter()
    slowdowns = [g.pe_slowdown(pe) for pe in pes]
    assert time.perf_counter() - start < 1.0
    assert slowdowns == [1 + i % 3 for i in range(len(pes))]
    assert g.pe_slowdown("sip0.cube0.pe99") == 1.0


def test_bisection_default():
    # 4x4 mesh: the cut between columns 1 and 2 crosses 4 links of 256 GB/s.
    assert bisection_bandwidth(graph("default")) == {
        "sip_mesh": 4 * 256 * GB,
        "machine": 4 * 256 * GB,
    }


def test_bisection_ring8():
    # cutting a ring in two crosses 2 links of 50 GB/s; a 1x1 mesh has no cut.
    assert bisection_bandwidth(graph("ring8")) == {"system": 2 * 50 * GB, "machine": 100 * GB}


def test_bisection_rack():
    # switch: half of the 8 SIPs' links to the switch, 4 x 200 GB/s.
    result = bisection_bandwidth(graph("rack"))
    assert result["system"] == 4 * 200 * GB
    assert result["machine"] == 800 * GB
    assert result["sip_mesh"] == 4 * 256 * GB


def test_bisection_multi_sip():
    result = bisection_bandwidth(graph("multi_sip"))
    assert result["system"] == 2 * 100 * GB
    assert result["machine"] == 200 * GB


def test_bisection_two_sip_ring_is_one_link():
    assert bisection_bandwidth(graph("multi_sip", "system.sips.count=2"))["system"] == 100 * GB


def test_bisection_fully_connected():
    result = bisection_bandwidth(graph("multi_sip", "system.interconnect.kind=fully_connected"))
    assert result["system"] == 4 * 100 * GB  # 2 x 2 pairs cross the cut


def test_bisection_torus_doubles_the_cut():
    result = bisection_bandwidth(graph("default", "sip.cube_mesh.torus=true"))
    assert result["sip_mesh"] == 8 * 256 * GB


def test_bisection_rectangular_mesh_cuts_across_the_long_side():
    result = bisection_bandwidth(graph("default", "sip.cube_mesh.w=4", "sip.cube_mesh.h=2"))
    assert result["sip_mesh"] == 2 * 256 * GB
    result = bisection_bandwidth(graph("default", "sip.cube_mesh.w=2", "sip.cube_mesh.h=8"))
    assert result["sip_mesh"] == 2 * 256 * GB


def test_bisection_machine_is_the_narrower_cut():
    """Halving the machine through the meshes cuts every SIP's mesh, not one."""
    g = graph("multi_sip", "sip.cube_mesh.link.bandwidth=10GB/s")
    result = bisection_bandwidth(g)
    assert result["sip_mesh"] == 4 * 10 * GB
    assert result["system"] == 2 * 100 * GB
    assert result["machine"] == 4 * 40 * GB  # 4 SIPs' mesh cuts, under the 200 GB/s system cut
    g = graph("multi_sip", "sip.cube_mesh.link.bandwidth=100GB/s")
    assert bisection_bandwidth(g)["machine"] == 2 * 100 * GB  # the system cut is narrower


def test_bisection_machine_with_an_odd_number_of_sips_also_cuts_one_mesh():
    result = bisection_bandwidth(graph("multi_sip", "system.sips.count=3"))
    assert result["machine"] == min(result["system"] + result["sip_mesh"], 3 * result["sip_mesh"])
    assert result["machine"] == result["system"] + result["sip_mesh"]


def test_rack_graph_and_routes_are_fast():
    start = time.perf_counter()
    g = build_graph(load_topology(TOPOLOGIES / "rack.yaml"))
    pes = g.pe_names()
    for src in pes[::37]:
        for dst in pes[::41]:
            g.route(src, dst)
    assert time.perf_counter() - start < 10.0
