"""Rank placement from the machine graph (kernbench.ccl.mapping) and what it changes.

The orders themselves (every rank once, deterministic, gateways first, trees
in stretches of the cycle, the user's order kept where one level is spanned),
the values of every algorithm against NumPy on machines where the order
changes (odd world sizes, every root), and the links a ring crosses: on a
multi-SIP machine behind a switch a ring crosses each SIP's links once per
direction per step.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_ccl_algorithms import ALGORITHMS, _data, _rank, _record, _served, _verify

import kernbench
from kernbench.ccl.algorithms.hierarchical import across_group
from kernbench.ccl.mapping import (
    algorithm_order,
    describe_order,
    gateway_cube,
    mesh_cycle,
    ring_order,
    rooted_order,
    tree_order,
)
from kernbench.runtime import RuntimeContext
from kernbench.topology import load_topology, names

# 4 SIPs behind a switch, each a 2x2 mesh of cubes with 2 PEs: 32 ranks at PE level.
RACKLET = [
    "system.sips.count=4",
    "system.interconnect.kind=switch",
    "system.device_level=pe",
    "sip.cube_mesh.w=2",
    "sip.cube_mesh.h=2",
    "cube.pe_layout.corners=[NW, NE]",
    "cube.pe_layout.pe_per_corner=1",
]


def _machine(topology: str, overrides: list[str]):
    return RuntimeContext(load_topology(f"topologies/{topology}.yaml", overrides)).machine


@pytest.fixture(scope="module")
def multi_sip():
    return _machine("multi_sip", [])


@pytest.fixture(scope="module")
def racklet():
    return _machine("multi_sip", RACKLET)


def _cube_pes(machine, sips: int) -> list[str]:
    """pe0 of every cube of the first ``sips`` SIPs, in name order (ranks at cube level)."""
    cubes = machine.topology.cubes_per_sip
    return [names.pe(s, c, 0) for s in range(sips) for c in range(cubes)]


def _xy(cube: int, w: int) -> tuple[int, int]:
    return cube % w, cube // w


@pytest.mark.parametrize(("w", "h"), [(4, 4), (2, 2), (4, 3), (3, 4), (2, 6), (1, 5), (5, 1)])
def test_mesh_cycle_visits_every_cube_once_through_neighbours(w: int, h: int) -> None:
    cycle = mesh_cycle(w, h)
    assert sorted(cycle) == list(range(w * h))
    steps = list(zip(cycle, cycle[1:] + cycle[:1], strict=True))
    if w > 1 and h > 1:  # a Hamiltonian cycle: every step, the closing one too, is one hop
        steps_apart = {
            abs(_xy(a, w)[0] - _xy(b, w)[0]) + abs(_xy(a, w)[1] - _xy(b, w)[1]) for a, b in steps
        }
        assert steps_apart == {1}
    else:
        assert list(cycle) == list(range(w * h))  # a line end to end


def test_ring_order_snakes_through_the_mesh_from_the_gateway(multi_sip) -> None:
    pes = _cube_pes(multi_sip, 4)
    order = ring_order(multi_sip, pes)
    assert sorted(order) == list(range(len(pes)))
    assert order == ring_order(multi_sip, list(pes))  # deterministic
    cubes = [names.pe_coordinates(pes[r])[:2] for r in order]
    # Each SIP is one stretch (entered and left once), starting at its gateway.
    assert [s for s, _ in cubes] == [s for s in range(4) for _ in range(16)]
    assert [cubes[16 * s][1] for s in range(4)] == [gateway_cube(multi_sip, s) for s in range(4)]
    # Consecutive cubes of a SIP are mesh neighbours, and the last is next to the gateway.
    for s in range(4):
        stretch = [c for _, c in cubes[16 * s : 16 * s + 16]]
        for a, b in zip(stretch, stretch[1:] + stretch[:1], strict=True):
            (ax, ay), (bx, by) = _xy(a, 4), _xy(b, 4)
            assert abs(ax - bx) + abs(ay - by) == 1


def test_gateway_is_where_the_sip_links_leave() -> None:
    machine = _machine("multi_sip", ["system.interconnect.attach_cube=5"])
    assert [gateway_cube(machine, s) for s in range(4)] == [5, 5, 5, 5]
    pes = _cube_pes(machine, 2)
    order = ring_order(machine, pes)
    # The first member of each SIP's stretch (the leader of the level above) is the gateway.
    assert names.pe_coordinates(pes[order[0]])[1] == 5
    assert names.pe_coordinates(pes[order[16]])[1] == 5


def test_order_does_not_depend_on_the_order_of_the_pes(racklet) -> None:
    pes = [names.pe(s, c, p) for s in range(4) for c in range(4) for p in range(2)]
    shuffled = list(np.random.default_rng(3).permutation(pes))
    by_pe = [pes[r] for r in ring_order(racklet, pes)]
    assert [shuffled[r] for r in ring_order(racklet, shuffled)] == by_pe


@pytest.mark.parametrize(("topology", "count"), [("ring8", 8), ("fc8", 8), ("default", 8)])
def test_groups_spanning_one_level_keep_their_order(topology: str, count: int) -> None:
    """One PE per SIP (ring8, fc8) or all in one cube: every kind is the identity."""
    machine = _machine(topology, [] if topology != "default" else ["system.device_level=pe"])
    pes = machine.graph.pe_names()[:count]
    for kind in ("cycle", "tree", "rooted", None):
        for root in (0, 3):
            assert algorithm_order(machine, kind, pes, root) == tuple(range(count))


def _stretch(v: int, tree: tuple[int, ...], at: dict[int, int]) -> list[int]:
    """Cycle positions of the subtree at heap position ``v``, pre-order."""
    kids = [c for c in (2 * v + 1, 2 * v + 2) if c < len(tree)]
    return [at[tree[v]]] + [i for k in kids for i in _stretch(k, tree, at)]


def test_tree_order_puts_children_in_their_parents_stretch(racklet) -> None:
    pes = [names.pe(s, c, p) for s in range(4) for c in range(4) for p in range(2)]
    for root in (0, 5, 31):
        cycle = rooted_order(racklet, pes, root)
        tree = tree_order(racklet, pes, root)
        assert tree[0] == root and sorted(tree) == list(range(32))
        at = {rank: i for i, rank in enumerate(cycle)}

        for v in range(32):  # every subtree is one stretch of the cycle, parent first
            span = _stretch(v, tree, at)
            assert sorted(span) == list(range(span[0], span[0] + len(span)))
            if 2 * v + 1 < 32:  # the first child comes right after its parent
                assert at[tree[2 * v + 1]] == at[tree[v]] + 1


def test_rings_across_groups_alternate_direction() -> None:
    groups = {"a": [0, 1], "b": [2, 3], "c": [4, 5]}
    assert across_group(groups, 0, True) == [0, 2, 4]
    assert across_group(groups, 1, True) == [5, 3, 1]
    assert across_group(groups, 1, False) == [1, 3, 5]
    assert across_group({"a": [0, 1], "b": [2, 3]}, 1, True) == [1, 3]  # two: no direction


def test_describe_order_is_compact() -> None:
    assert describe_order(range(8)) == "0-7"
    assert describe_order([0, 1, 2, 3, 7, 6, 5, 4, 8]) == "0-3,7-4,8"
    long = describe_order([i ^ 1 for i in range(200)], limit=6)
    assert "runs)" in long and len(long) < 60


# -- values: every algorithm where the order changes ---------------------------------------
MAPPED_SIZES = (7, 13)


def _mapped_cases() -> list[tuple[str, int]]:
    """Algorithms that map their ranks, at odd sizes (SIP groups of the hierarchical
    composition must be equal: 16 ranks, two SIPs of 8, instead of 13)."""
    return [
        (name, 16 if name == "hierarchical" and p == 13 else p)
        for name, algorithm in sorted(ALGORITHMS.items())
        for p in MAPPED_SIZES
        if algorithm.mapping and any(algorithm.serves(op, p) for op in algorithm.ops)
    ]


@pytest.mark.parametrize(
    ("name", "p"), _mapped_cases(), ids=[f"{n}-{p}" for n, p in _mapped_cases()]
)
def test_values_unchanged_where_the_order_changes(
    name: str, p: int, racklet, monkeypatch: pytest.MonkeyPatch
) -> None:
    pes = racklet.graph.pe_names()[:p]
    roots = {0, 1, p - 1}
    kind = ALGORITHMS[name].mapping
    assert any(algorithm_order(racklet, kind, pes, r) != tuple(range(p)) for r in roots)
    ops = _served(name, p)
    data = _data(p, seed=7)
    seen = _record(monkeypatch)
    result = kernbench.simulate(
        _rank,
        topology="multi_sip",
        overrides=RACKLET,
        world_size=p,
        args=(name, ops, data, True),
        rank_args=True,
    )
    _verify(result, seen, name, name, p, ops, data)


def _every_root(rank: int, size: int, name: str, ops: tuple[str, ...]) -> dict:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    out = {}
    for root in range(size):
        if "broadcast" in ops:
            t = torch.from_numpy(np.arange(5, dtype=np.float32) + 10 * rank)
            dist.broadcast(t, src=root, algorithm=name)
            out[("broadcast", root)] = t.numpy()
        if "reduce" in ops:
            t = torch.from_numpy(np.arange(5, dtype=np.float32) * (rank + 1))
            dist.reduce(t, dst=root, algorithm=name)
            out[("reduce", root)] = t.numpy()
    return out


@pytest.mark.parametrize("name", ["ring", "binomial", "binary_tree", "double_binary_tree"])
def test_every_root(name: str) -> None:
    p = 7
    ops = _served(name, p)
    result = kernbench.simulate(
        _every_root,
        topology="multi_sip",
        overrides=RACKLET,
        world_size=p,
        args=(name, ops),
        rank_args=True,
    )
    total = np.arange(5, dtype=np.float32) * sum(range(1, p + 1))
    for root in range(p):
        for r in range(p):
            got = result.returns[r]
            if "broadcast" in ops:
                want = np.arange(5, dtype=np.float32) + 10 * root
                np.testing.assert_array_equal(got[("broadcast", root)], want)
            if "reduce" in ops:
                own = np.arange(5, dtype=np.float32) * (r + 1)
                want = total if r == root else own
                np.testing.assert_array_equal(got[("reduce", root)], want)


# -- links a ring crosses ------------------------------------------------------------------
def _all_reduce(nbytes: int, algorithm: str):
    def body() -> None:
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        dist.init_process_group()
        dist.all_reduce(torch.empty(nbytes // 4), algorithm=algorithm)

    return body


def test_ring_crosses_each_sip_link_once_per_direction_per_step() -> None:
    """32 ranks over 4 SIPs: every SIP's up and down link carries one chunk per step."""
    p, nbytes = 32, 1 << 20
    result = kernbench.simulate(
        _all_reduce(nbytes, "ring"), topology="multi_sip", overrides=RACKLET, timing_only=True
    )
    edges = result.context.machine.graph.edges
    sip_links = [
        b for e, b in zip(edges, result.link_bytes, strict=True) if e.link_class == "sip_link"
    ]
    assert len(sip_links) == 8
    assert sip_links == [2 * (p - 1) * nbytes // p] * 8
    order = result.report["collectives"][-1]["rank_order"]
    assert order.startswith("0-3,6,7,4,5,8-11")  # cubes 0, 1, then 3 (a mesh neighbour), 2


def test_hierarchical_beats_the_ring_across_the_sips_of_multi_sip() -> None:
    """Cube level on multi_sip: the composition is faster than the flat ring and every
    SIP's links carry less."""
    runs = {
        name: kernbench.simulate(
            _all_reduce(1 << 20, name),
            topology="multi_sip",
            overrides=["system.device_level=cube"],
            timing_only=True,
        )
        for name in ("ring", "multi_cube")
    }
    spans = {
        name: r.report["collectives"][-1]["end_ps"] - r.report["collectives"][-1]["start_ps"]
        for name, r in runs.items()
    }
    sip_bytes = {n: r.report["bytes_by_link_class"]["sip_link"] for n, r in runs.items()}
    assert spans["multi_cube"] < spans["ring"]
    assert sip_bytes["multi_cube"] < sip_bytes["ring"]


def test_a_level_that_does_not_split_is_skipped() -> None:
    """default.yaml at cube level has one SIP: the hierarchical all-reduce is the flat ring."""
    runs = [
        kernbench.simulate(
            _all_reduce(1 << 16, name),
            topology="default",
            overrides=["system.device_level=cube"],
            timing_only=True,
        )
        for name in ("ring", "hierarchical")
    ]
    ring, hierarchical = (r.report for r in runs)
    # The same messages over the same links, in the same time (only the neighbour
    # tables installed before differ).
    ring_run, hierarchical_run = (r["collectives"][-1] for r in (ring, hierarchical))
    assert (
        ring_run["end_ps"] - ring_run["start_ps"]
        == hierarchical_run["end_ps"] - hierarchical_run["start_ps"]
    )
    assert ring["ipcq_messages"] == hierarchical["ipcq_messages"]
    assert ring["collectives"][-1]["rank_order"] == hierarchical["collectives"][-1]["rank_order"]
