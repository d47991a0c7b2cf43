"""Which configurations can serve a group: one check (``tuner.unfit``) for auto, tune and runs.

A configuration cannot serve a group when it is pinned to another world size,
when its algorithm does not serve the op on that many ranks, or when the
algorithm cannot run on where the group's PEs sit with the configuration's
parameters: a hierarchical composition whose levels split the ranks into
unequal groups (at any level, on any of the communicators it recurses into)
or hand a level an algorithm that cannot run its op there, a mesh whose grid
does not hold the ranks.  auto and ``kernbench tune`` never choose such a
configuration; asking for one by name is an error saying why, before anything runs.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
from kernbench.bench.tune import tune
from kernbench.ccl.settings import CclSettings, ccl_settings, use_settings
from kernbench.ccl.tuner import auto_choice, candidates, unfit
from kernbench.errors import DistributedError, KernBenchError
from kernbench.runtime import RuntimeContext
from kernbench.topology import load_topology

TOPOLOGY = "multi_sip"
# 2 SIPs x 2 cubes x 2 PEs, one rank per PE: ranks 0-3 on SIP 0 (cubes 0, 1), 4-7 on SIP 1.
SMALL = [
    "system.sips.count=2",
    "system.device_level=pe",
    "sip.cube_mesh.w=2",
    "sip.cube_mesh.h=1",
    "cube.pe_layout.corners=[NW, NE]",
    "cube.pe_layout.pe_per_corner=1",
]
PES = [f"sip{s}.cube{c}.pe{p}" for s in range(2) for c in range(2) for p in range(2)]


def _context(ccl: list[str] = ()) -> RuntimeContext:
    ctx = RuntimeContext(load_topology(TOPOLOGY, SMALL), timing_only=True)
    use_settings(ctx, CclSettings.from_overrides(ccl))
    return ctx


def _all_reduce(rank: int, size: int, nbytes: int, algorithm: str) -> float:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    x = torch.from_numpy(np.full(nbytes // 4, rank + 1, dtype=np.float32))
    dist.all_reduce(x, algorithm=algorithm)
    return float(x.numpy()[0])


def _run(size: int, nbytes: int, algorithm: str, ccl: list[str] = ()):
    return kernbench.simulate(
        _all_reduce,
        topology=TOPOLOGY,
        overrides=[*SMALL, *(f"ccl.{o}" for o in ccl)],
        world_size=size,
        rank_args=True,
        args=(nbytes, algorithm),
    )


def test_hierarchical_on_5_ranks_of_a_2x2x2_machine_is_no_candidate():
    """Cubes hold 2, 2 and 1 of the ranks, SIPs 4 and 1: neither level splits them evenly."""
    ctx = _context()
    names = [name for name, _ in candidates(ctx, "all_reduce", PES[:5])]
    assert "hierarchical" not in names and "multi_cube" not in names
    assert {"ring", "recursive_doubling", "rabenseifner"} <= set(names)
    configs = ccl_settings(ctx).catalogue.configs
    assert "unequal groups {'sip0.cube0': 2, 'sip0.cube1': 2, 'sip1.cube0': 1}" in unfit(
        configs["multi_cube"], "all_reduce", PES[:5]
    )
    assert "unequal groups {'sip0': 4, 'sip1': 1}" in unfit(
        configs["hierarchical"], "all_reduce", PES[:5]
    )
    # On all 8 ranks both fit.
    names = [name for name, _ in candidates(ctx, "all_reduce", PES)]
    assert {"hierarchical", "multi_cube"} <= set(names)


@pytest.mark.parametrize("nbytes", [4 << 10, 1 << 20, 64 << 20])
def test_auto_on_5_ranks_runs_a_configuration_that_fits(nbytes):
    result = _run(5, nbytes, "auto")
    assert result.returns == [15.0] * 5  # 1 + 2 + 3 + 4 + 5
    assert result.report["collectives"][0]["config"] not in ("hierarchical", "multi_cube")


def test_tune_on_5_ranks_measures_only_configurations_that_fit():
    table = tune(TOPOLOGY, sizes=[4 << 10, 64 << 10], world_size=5, overrides=SMALL)
    for row in table["results"]:
        assert row["world_size"] == 5
        assert not {"hierarchical", "multi_cube"} & set(row["times_ps"])
        assert {"ring", "recursive_doubling"} <= set(row["times_ps"])
        assert row["winner"] in row["times_ps"]


def test_a_tune_table_winner_that_does_not_fit_is_not_used(tmp_path):
    """A table measured on 8 ranks, read for 5: its winner does not fit them."""
    from kernbench.topology import topology_digest

    path = tmp_path / "table.yaml"
    topology = load_topology(TOPOLOGY, SMALL)
    path.write_text(
        f"topology: {topology.name}\ntopology_digest: '{topology_digest(topology)}'\n"
        "world_size: 5\nresults:\n"
        "  - {op: all_reduce, world_size: 5, bytes: 4096, winner: multi_cube,\n"
        "     times_ps: {multi_cube: 1, ring: 2}}\n"
    )
    ctx = _context([f"tune_table={path}"])
    choice = auto_choice(ctx, "all_reduce", 5, 4096, PES[:5])
    assert choice not in ("hierarchical", "multi_cube")


# (catalogue entry, world size, what unfit and the error say)
MISFITS = [
    ("{module: hierarchical, params: {levels: [sip]}}", 5, "unequal groups {'sip0': 4, 'sip1': 1}"),
    (
        "{module: hierarchical, params: {levels: [cube, sip]}}",
        5,
        "level 0 splits the ranks into unequal groups",
    ),
    # Cubes hold 2 ranks each, but the ranks across them (0, 2, 4) sit 2 on SIP 0, 1 on SIP 1.
    (
        "{module: hierarchical, params: {levels: [cube, sip]}}",
        6,
        "level 1 splits the ranks into unequal groups {'sip0': 2, 'sip1': 1}",
    ),
    ("{module: mesh2d, params: {rows: 2, cols: 3}}", 8, "a 2x3 grid does not hold 8 ranks"),
    ("{module: ring, world_size: 4}", 8, "it is for 4 ranks, the group has 8"),
    ("{module: recursive_doubling, world_size: 8}", 5, "it is for 8 ranks, the group has 5"),
]

# Configurations whose parameters no group could run: the catalogue refuses them when it
# loads, naming the parameter, so they can never be chosen (or asked for).
REFUSED_AT_LOAD = [
    (
        "{module: hierarchical, params: {levels: [cube], algorithms: [recursive_doubling, ring]}}",
        "recursive_doubling does not serve reduce_scatter",
    ),
    (
        "{module: hierarchical, params: {levels: [sip], algorithms: [ring, bruck]}}",
        "bruck does not serve all_reduce",
    ),
    (
        "{module: hierarchical, params: {levels: [sip], algorithms: [ring, hierarchical]}}",
        "hierarchical composes other algorithms itself",
    ),
    ("{module: hierarchical, params: {levels: [rack]}}", "levels.0"),
    (
        "{module: mesh2d, params: {algorithms: [rabenseifner, ring]}}",
        "rabenseifner does not serve all_gather",
    ),
    ("{module: mesh2d, params: {rows: -2, cols: -4}}", "params.rows"),
    ("{module: mesh2d, params: {rows: '2', cols: '4'}}", "params.rows"),
    ("{module: mesh2d, params: {rows: 2.0, cols: 4}}", "params.rows"),
    ("{module: ring, chunks: 2, params: {chunks: many}}", "takes no parameters"),
    ("{module: hierarchical, params: {levels: [sip], chunks: lots}}", "params.chunks"),
    ("{module: bruck, params: {pack_bytes: [1]}}", "params.pack_bytes"),
]


@pytest.mark.parametrize(("entry", "size", "reason"), MISFITS)
def test_a_configuration_that_cannot_serve_the_group_is_never_chosen(entry, size, reason):
    ccl = [f"configs.misfit={entry}"]
    ctx = _context(ccl)
    config = ccl_settings(ctx).catalogue.configs["misfit"]
    assert reason in unfit(config, "all_reduce", PES[:size])
    assert "misfit" not in [name for name, _ in candidates(ctx, "all_reduce", PES[:size])]
    for nbytes in (4 << 10, 16 << 20):
        assert auto_choice(ctx, "all_reduce", size, nbytes, PES[:size]) != "misfit"
    # Asked for by name, it fails before running, saying why.
    with pytest.raises(KernBenchError) as info:
        _run(size, 4096, "misfit", ccl)
    assert isinstance(info.value.original, DistributedError)
    assert "configuration 'misfit' cannot run on this group" in str(info.value)
    assert reason in str(info.value)


@pytest.mark.parametrize(("entry", "fragment"), REFUSED_AT_LOAD)
def test_parameters_no_group_could_run_are_refused_when_the_catalogue_loads(entry, fragment):
    from kernbench.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        _context([f"configs.misfit={entry}"])
    assert "configs.misfit" in str(info.value) and fragment in str(info.value)


# Configurations that do fit these groups: unfit agrees with the programs.
FITS = [
    ("{module: hierarchical, params: {levels: [cube, sip]}}", 8),
    ("{module: hierarchical, params: {levels: [cube, sip]}}", 4),  # SIP level does not split
    ("{module: hierarchical, params: {levels: [sip], algorithms: [bidirectional_ring, ring]}}", 8),
    ("{module: mesh2d, params: {rows: 2, cols: 3}}", 6),
    ("{module: ring, chunks: 3}", 8),
    ("{module: mesh2d, params: {algorithms: [bidirectional_ring, recursive_doubling]}}", 8),
    ("{module: ring, world_size: 5}", 5),
]


@pytest.mark.parametrize(("entry", "size"), FITS)
def test_a_configuration_that_fits_runs(entry, size):
    ccl = [f"configs.fit={entry}"]
    ctx = _context(ccl)
    assert unfit(ccl_settings(ctx).catalogue.configs["fit"], "all_reduce", PES[:size]) is None
    assert "fit" in [name for name, _ in candidates(ctx, "all_reduce", PES[:size])]
    result = _run(size, 4096, "fit", ccl)
    assert result.returns == [size * (size + 1) / 2] * size
