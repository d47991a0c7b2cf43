"""The two-level leaf/spine cluster interconnect (kind: clos): graph, routes, figures, machines."""

from __future__ import annotations

import itertools
import resource
import subprocess
import sys
import time
from collections import Counter

import pytest

from kernbench.errors import ConfigError, RouteError
from kernbench.topology import build_graph, load_topology, names, topology_digest, validate_topology
from kernbench.topology.graph import MachineGraph
from kernbench.topology.metrics import (
    bisection_bandwidth,
    clos_bisection,
    diameter_hops,
    sip_hops_max,
)
from kernbench.topology.summary import bundled_machines, machine_counts, summarize

GB = 10**9
NS = 1000  # ps


def clos_document(
    sips: int = 16,
    per_node: int = 2,
    per_leaf: int = 2,
    spines: int = 3,
    node_bw: str = "400GB/s",
    leaf_bw: str = "50GB/s",
    spine_bw: str = "100GB/s",
    mesh: tuple[int, int] = (1, 1),
) -> dict:
    return {
        "system": {
            "sips": {"count": sips},
            "interconnect": {
                "kind": "clos",
                "clos": {
                    "node": {
                        "sips": per_node,
                        "link": {"bandwidth": node_bw, "latency": "100ns"},
                        "switch_latency": "10ns",
                    },
                    "leaf": {
                        "nodes": per_leaf,
                        "link": {"bandwidth": leaf_bw, "latency": "500ns"},
                        "switch_latency": "300ns",
                    },
                    "spine": {
                        "count": spines,
                        "link": {"bandwidth": spine_bw, "latency": "200ns"},
                        "switch_latency": "250ns",
                    },
                },
            },
        },
        "sip": {"cube_mesh": {"w": mesh[0], "h": mesh[1]}},
        "cube": {
            "pe_layout": {"corners": ["NW"], "pe_per_corner": 1},
            "memory_map": {"hbm_total_gb_per_cube": 16, "hbm_slices_per_cube": 1},
        },
    }


def clos_graph(**shape) -> MachineGraph:
    return build_graph(validate_topology(clos_document(**shape)))


def route_names(g: MachineGraph, src: str, dst: str) -> list[str]:
    return [g.edges[i].name for i in g.route(src, dst)]


def route_latency_ps(g: MachineGraph, src: str, dst: str) -> int:
    return sum(g.edges[i].latency_ps for i in g.route(src, dst))


# --- names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "index"),
    [("node5.switch", "node_switch", 5), ("leaf0", "leaf", 0), ("spine17", "spine", 17)],
)
def test_cluster_switch_names_round_trip(name, kind, index):
    node = names.parse(name)
    assert (node.kind, node.index) == (kind, index)
    assert str(node) == name
    assert names.within_cube(name) is None
    with pytest.raises(ValueError):
        names.cube_of(name)


@pytest.mark.parametrize("bad", ["leaf", "leaf01", "spine-1", "node3", "node3.sw", "nodex.switch"])
def test_malformed_cluster_switch_names_are_refused(bad):
    with pytest.raises(ValueError):
        names.parse(bad)


# --- schema -------------------------------------------------------------------------


def test_kind_clos_alone_takes_the_superpod_defaults():
    document = clos_document()
    del document["system"]["interconnect"]["clos"]
    document["system"]["sips"]["count"] = 64
    clos = validate_topology(document).system.interconnect.clos
    assert (clos.node.sips, clos.leaf.nodes, clos.spine.count) == (8, 4, 16)
    assert clos.node.link.bandwidth == 450 * GB and clos.leaf.link.bandwidth == 50 * GB
    assert clos.spine.link.bandwidth == 100 * GB


def test_other_machines_dump_and_digest_as_before():
    ring8 = load_topology("ring8")
    assert "clos" not in ring8.model_dump(mode="json")["system"]["interconnect"]
    assert topology_digest(ring8) == "ecad3e0f654b7e6e"  # as before the clos kind existed


@pytest.mark.parametrize(
    ("change", "key", "fragment"),
    [
        ({"kind": "ring"}, "system.interconnect.clos", "applies only to kind: clos"),
        ({"clos.node.sips": 3}, "system.interconnect.clos.node.sips", "whole number of nodes"),
        ({"clos.leaf.nodes": 3}, "system.interconnect.clos.leaf.nodes", "whole leaves"),
        (
            {"clos.spine.count": 65_536, "clos.node.sips": 1, "clos.leaf.nodes": 1},
            "system.interconnect.clos.spine.count",
            "at most 1048576",
        ),
    ],
)
def test_a_cluster_that_does_not_fit_names_the_key(change, key, fragment):
    document = clos_document(sips=32)
    for path, value in change.items():
        node = document["system"]["interconnect"]
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    start = time.process_time()  # CPU time: a loaded machine must not fail it
    with pytest.raises(ConfigError) as info:
        validate_topology(document)
    assert time.process_time() - start < 1.0
    assert info.value.key_path == key
    assert fragment in str(info.value)


# --- graph ---------------------------------------------------------------------------


def test_switch_and_link_counts_per_level():
    g = clos_graph()  # 16 SIPs, nodes of 2, leaves of 2 nodes: 8 nodes, 4 leaves, 3 spines
    classes = Counter(e.link_class for e in g.edges)
    assert classes["node_link"] == 2 * 16
    assert classes["leaf_link"] == 2 * 16
    assert classes["spine_link"] == 2 * 4 * 3
    assert "sip_link" not in classes
    switches = {kind: len(_ends(g, kind)) for kind in names.CLOS_SWITCH_KINDS}
    assert switches == {"node_switch": 8, "leaf": 4, "spine": 3}
    for name in ("node7.switch", "leaf3", "spine2"):
        assert g.check_name(name).kind in names.CLOS_SWITCH_KINDS
    for name in ("node8.switch", "leaf4", "spine3", "switch"):
        with pytest.raises(RouteError):
            g.check_name(name)


def _ends(g: MachineGraph, kind: str) -> set[str]:
    return {
        end
        for e in g.edges
        for end in (e.src, e.dst)
        if not end.startswith("sip") and end != "host" and names.parse(end).kind == kind
    }


def test_one_leaf_builds_no_spines():
    g = clos_graph(sips=8, per_node=2, per_leaf=4)
    classes = Counter(e.link_class for e in g.edges)
    assert classes["spine_link"] == 0 and classes["leaf_link"] == 16
    with pytest.raises(RouteError):
        g.check_name("spine0")


def test_switch_latency_is_paid_once_per_switch_crossed():
    g = clos_graph()
    assert next(e for e in g.edges if e.name == "link:sip0->leaf0").latency_ps == 500 * NS
    assert next(e for e in g.edges if e.name == "link:leaf0->sip0").latency_ps == 800 * NS
    assert next(e for e in g.edges if e.name == "link:leaf0->spine1").latency_ps == 500 * NS
    assert next(e for e in g.edges if e.name == "link:spine1->leaf0").latency_ps == 450 * NS


# --- routes --------------------------------------------------------------------------

PE = names.pe


def test_chips_of_one_node_talk_through_the_node_switch():
    g = clos_graph()
    assert route_names(g, PE(2, 0, 0), PE(3, 0, 0)) == [
        "link:sip2.cube0.pe0->sip2.cube0.noc",
        "link:sip2->node1.switch",
        "link:node1.switch->sip3",
        "link:sip3.cube0.noc->sip3.cube0.pe0",
    ]
    assert route_latency_ps(g, PE(2, 0, 0), PE(3, 0, 0)) == (5 + 100 + 110 + 5) * NS


def test_nodes_of_one_leaf_talk_through_the_leaf():
    g = clos_graph()
    assert route_names(g, PE(0, 0, 0), PE(3, 0, 0))[1:-1] == [
        "link:sip0->leaf0",
        "link:leaf0->sip3",
    ]


def test_leaves_talk_through_the_spine_the_destination_picks():
    g = clos_graph()
    assert route_names(g, PE(0, 0, 0), PE(13, 0, 0))[1:-1] == [
        "link:sip0->leaf0",
        "link:leaf0->spine1",  # 13 mod 3 spines
        "link:spine1->leaf3",
        "link:leaf3->sip13",
    ]
    assert route_latency_ps(g, PE(0, 0, 0), PE(13, 0, 0)) == (5 + 500 + 500 + 450 + 800 + 5) * NS


def test_routes_cross_the_mesh_to_and_from_the_attach_cube():
    g = clos_graph(mesh=(2, 1))
    assert route_names(g, PE(0, 1, 0), PE(5, 1, 0))[1:-1] == [
        "link:sip0.cube1->sip0.cube0",
        "link:sip0->leaf0",
        "link:leaf0->spine2",
        "link:spine2->leaf1",
        "link:leaf1->sip5",
        "link:sip5.cube0->sip5.cube1",
    ]


def test_routes_are_deterministic_and_spread_over_the_spines():
    first, second = clos_graph(), clos_graph()
    used = Counter()
    for a, b in itertools.permutations(range(16), 2):
        route = first.route(PE(a, 0, 0), PE(b, 0, 0))
        assert route == second.route(PE(a, 0, 0), PE(b, 0, 0))
        spines = [first.edges[i].dst for i in route if first.edges[i].dst.startswith("spine")]
        if a // 4 == b // 4:
            assert spines == []
        else:
            assert spines == [names.spine(b % 3)]
            used[spines[0]] += 1
    # 16 x 12 cross-leaf pairs over 3 spines: destinations 0..15 mod 3 give 6, 5, 5 of them.
    assert used == {"spine0": 12 * 6, "spine1": 12 * 5, "spine2": 12 * 5}


def test_a_switch_is_not_an_endpoint():
    g = clos_graph()
    with pytest.raises(RouteError, match="not an endpoint"):
        g.route("leaf0", PE(0, 0, 0))


def test_a_route_goes_around_a_spine_link_that_is_down():
    document = clos_document()
    document["faults"] = {"links": [{"link": "link:leaf0->spine1", "down": True}]}
    g = build_graph(validate_topology(document))
    hops = route_names(g, PE(0, 0, 0), PE(13, 0, 0))[1:-1]
    assert "link:leaf0->spine1" not in hops
    assert hops[0] == "link:sip0->leaf0" and hops[-1] == "link:leaf3->sip13"
    assert len(hops) == 4  # another spine, same number of hops


# --- figures: closed forms against brute force ---------------------------------------------


def _brute_force_diameter(g: MachineGraph) -> int:
    return max(len(g.route(a, b)) for a in g.pe_names() for b in g.pe_names() if a != b)


@pytest.mark.parametrize(
    "shape",
    [
        {},
        {"mesh": (2, 2)},
        {"sips": 8, "per_node": 2, "per_leaf": 4},  # one leaf
        {"sips": 4, "per_node": 4, "per_leaf": 1},  # one node
    ],
)
def test_diameter_closed_form_matches_every_route(shape):
    g = clos_graph(**shape)
    assert diameter_hops(g) == _brute_force_diameter(g)


@pytest.mark.parametrize(
    "document",
    [
        {"system": {"sips": {"count": n}, "interconnect": {"kind": kind}}}
        for kind in ("ring", "switch", "fully_connected")
        for n in (1, 2, 3, 7, 8)
    ],
    ids=lambda d: f"{d['system']['interconnect']['kind']}-{d['system']['sips']['count']}",
)
def test_sip_hops_closed_form_matches_every_sip_path(document):
    document = {**document, "sip": {"cube_mesh": {"w": 1, "h": 1}}}
    g = build_graph(validate_topology(document))
    n = g.num_sips
    brute = max((len(g.router.sip_path(0, s)) - 1 for s in range(1, n)), default=0)
    assert sip_hops_max(g) == brute


def _brute_force_bisection(g: MachineGraph) -> int:
    """The smallest bandwidth across any cut of the SIPs into halves, switches on either side.

    A node switch links only its node's chips, so its best side is the one
    with more of them (counted directly); leaves and spines are enumerated.
    """
    links: dict[tuple[str, str], int] = {}
    for e in g.edges:
        if e.link_class in ("node_link", "leaf_link", "spine_link"):
            links[tuple(sorted((e.src, e.dst)))] = e.bandwidth
    n = g.num_sips
    chips = [names.noc(s, g.attach_cube) for s in range(n)]
    switches = sorted({end for pair in links for end in pair if end not in chips})
    node_switches = [s for s in switches if names.parse(s).kind == "node_switch"]
    others = [s for s in switches if s not in node_switches]
    best = None
    for side_a in itertools.combinations(chips, n // 2):
        a = set(side_a)
        for assignment in itertools.product((True, False), repeat=len(others)):
            on_a = a | {s for s, here in zip(others, assignment, strict=True) if here}
            for switch in node_switches:
                members = [
                    c for (x, y) in links for c in (x, y) if switch in (x, y) and c != switch
                ]
                if 2 * sum(c in on_a for c in members) > len(members):
                    on_a = on_a | {switch}
            cut = sum(bw for (x, y), bw in links.items() if (x in on_a) != (y in on_a))
            best = cut if best is None else min(best, cut)
    return best


@pytest.mark.parametrize(
    "shape",
    [
        {"sips": 8, "per_node": 2, "per_leaf": 2, "spines": 2},  # 2 leaves, 1:1
        {"sips": 8, "per_node": 2, "per_leaf": 2, "spines": 1, "spine_bw": "20GB/s"},  # 5:1
        {"sips": 12, "per_node": 2, "per_leaf": 2, "spines": 2, "spine_bw": "30GB/s"},  # 3 leaves
        {"sips": 6, "per_node": 2, "per_leaf": 3},  # one leaf, an odd number of nodes
        {"sips": 4, "per_node": 4, "per_leaf": 1},  # one node
        {"sips": 6, "per_node": 3, "per_leaf": 1, "spines": 2, "node_bw": "10GB/s"},
    ],
)
def test_bisection_closed_form_matches_brute_force(shape):
    g = clos_graph(**shape)
    clos = g.topology.system.interconnect.clos
    assert clos_bisection(clos, g.num_sips) == _brute_force_bisection(g)
    assert bisection_bandwidth(g)["system"] == _brute_force_bisection(g)


def test_summary_shows_the_cluster_and_its_oversubscription():
    g = clos_graph(sips=16, spines=1, spine_bw="100GB/s")
    summary = summarize(g.topology, g)
    assert summary["interconnect"] == "clos"
    assert summary["network"]["cluster"] == {
        "nodes": 8,
        "sips_per_node": 2,
        "leaves": 4,
        "nodes_per_leaf": 2,
        "spines": 1,
        "leaf_oversubscription": 2.0,  # 4 chips x 50GB/s down, 1 x 100GB/s up
    }
    assert summary["links"]["spine_link"]["directed_links"] == 8


# --- the bundled machines ---------------------------------------------------------------


def test_pod16k_loads_shows_and_is_a_superpod():
    topology = load_topology("pod16k")
    assert machine_counts(topology) | {"cube_mesh": None} == {
        "sips": 1024,
        "cube_mesh": None,
        "cubes_per_sip": 4,
        "cubes": 4096,
        "pes_per_cube": 4,
        "pes": 16_384,
        "device_level": "sip",
        "devices": 1024,
    }
    pe_level = load_topology("pod16k", ["system.device_level=pe"])
    assert machine_counts(pe_level)["devices"] == 16_384
    assert "SuperPOD" in topology.description
    start = time.perf_counter()
    g = build_graph(topology)
    summary = summarize(topology, g)
    assert time.perf_counter() - start < 10
    assert summary["network"]["cluster"]["leaves"] == 32
    assert summary["network"]["cluster"]["spines"] == 16
    assert summary["network"]["cluster"]["leaf_oversubscription"] == 1.0
    assert summary["network"]["bisection_detail_Bps"]["system"] == 512 * 50 * GB


def test_cluster128k_loads_with_4096_chips_and_131072_pes():
    start = time.perf_counter()
    topology = load_topology("cluster128k")
    assert time.perf_counter() - start < 2  # validation only; no graph
    counts = machine_counts(topology)
    assert (counts["sips"], counts["pes"], counts["devices"]) == (4096, 131_072, 4096)
    assert "SuperPOD" in topology.description
    clos = topology.system.interconnect.clos
    assert (clos.node.sips, clos.leaf.nodes, clos.spine.count) == (8, 4, 64)


def test_topo_list_shows_both_clusters():
    listed = {m["name"]: m for m in bundled_machines()}
    assert listed["pod16k"]["pes"] == 16_384
    assert listed["cluster128k"]["pes"] == 131_072


@pytest.mark.slow
def test_topo_show_on_131072_pes_within_10_s_and_2_gib():
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "topo", "show", "cluster128k"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stderr
    assert "131072 PEs" in result.stdout and "64 spines" in result.stdout
    assert elapsed <= 10
    # ru_maxrss is the largest child so far (KiB on Linux): this run, unless an earlier was bigger.
    assert max(before.ru_maxrss, after.ru_maxrss) <= 2 * 2**20
