"""The fast backend against the detailed one, and the pieces it is made of.

The cross-validation matrix runs every catalogue configuration and every op
it serves at several group sizes on both backends (kernbench.bench.crossval):
where no link carried two flows at once the simulated times agree within
0.1%, elsewhere within 5%.  The big machines and group sizes are ``slow``.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import kernbench
from kernbench.bench.crossval import EXACT, SHARED, compare
from kernbench.bench.runner import LISTED_RANKS, format_run_summary
from kernbench.ccl.algorithms import get_algorithm
from kernbench.ccl.catalogue import load_catalogue
from kernbench.ccl.comm import LaneBuffer
from kernbench.ccl.launch import OVERLAPPING
from kernbench.ccl.record import SYMMETRY_FROM, record_lane, record_ranks
from kernbench.errors import ConfigError
from kernbench.fabric import Fabric
from kernbench.fast import FastMachine
from kernbench.fast.evaluate import BACKLOG, CREDITS, DRIFT_BOUND
from kernbench.fast.machine import UNALIGNED
from kernbench.machine.programs import Op, RankShift, relative, shifted
from kernbench.runtime import RuntimeContext
from kernbench.runtime.dtypes import as_dtype
from kernbench.topology import load_topology

CONFIGS = sorted(load_catalogue().configs)
SMALL = (2, 3, 4, 5, 7, 8)
# (topology, overrides, group sizes in the default run, the rest of the sizes: slow)
MACHINES = {
    "ring8": ("ring8", [], SMALL, ()),
    "fc8": ("fc8", [], SMALL, ()),
    "multi_sip": ("multi_sip", ["system.device_level=cube"], (4, 7, 16), (2, 3, 5, 8, 64)),
    "small_rack": (
        "rack",
        ["system.sips.count=2", "system.device_level=cube"],
        (3, 5, 8, 16),
        (2, 4, 7, 32),
    ),
}


def _check(points) -> None:
    assert points, "no collective ran"
    bad = [
        f"{pt.config} {pt.op} p={pt.p}: detailed {pt.detailed_ps} ps, fast {pt.fast_ps} ps "
        f"({pt.error:.3%} > {pt.bound:.1%}, shared={pt.shared})"
        for pt in points
        if pt.error > pt.bound
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_cross_validation_matrix(machine: str) -> None:
    topology, overrides, sizes, _ = MACHINES[machine]
    points = []
    for config in CONFIGS:
        points += compare(topology, config, sizes, overrides=overrides, nbytes=64 * 1024)
    _check(points)
    # The step-wide evaluator priced the SPMD ones itself (the others ran message by message).
    evaluated = {pt.config for pt in points if pt.evaluated}
    assert {"ring", "recursive_doubling", "direct", "hierarchical"} <= evaluated


@pytest.mark.slow
@pytest.mark.parametrize("machine", ["multi_sip", "small_rack"])
def test_cross_validation_matrix_big_groups(machine: str) -> None:
    topology, overrides, _, sizes = MACHINES[machine]
    points = []
    for config in CONFIGS:
        points += compare(topology, config, sizes, overrides=overrides)
    _check(points)


def test_aligned_ring_is_exact_and_evaluated() -> None:
    # 32 KiB: blocks of 4 KiB, a packet, so the tuner keeps one piece.
    points = compare("ring8", "ring", (8,), nbytes=32 * 1024)
    (point,) = [pt for pt in points if pt.op == "all_reduce"]
    assert point.evaluated
    assert point.fast_ps == point.detailed_ps


def test_crossvalidation_takes_a_drift_setting_for_the_fast_runs_only() -> None:
    # The detailed backend refuses simulation.drift; its runs go without it.
    points = compare("ring8", "ring", (8,), overrides=["simulation.drift=exact"], nbytes=32 * 1024)
    (point,) = [pt for pt in points if pt.op == "all_reduce"]
    assert point.fast_ps == point.detailed_ps


def test_unaligned_programs_run_on_the_fabric_exactly() -> None:
    points = compare("ring8", "binomial", (5, 8))
    assert points and not any(pt.evaluated for pt in points)
    assert all(pt.fast_ps == pt.detailed_ps for pt in points)


def test_bounds_are_the_documented_ones() -> None:
    assert (EXACT, SHARED) == (0.001, 0.05)


# -- choosing the backend ------------------------------------------------------------
def test_backend_comes_from_the_topology() -> None:
    fast = RuntimeContext(load_topology("ring8", ["simulation.backend=fast"]), timing_only=True)
    detailed = RuntimeContext(load_topology("ring8"), timing_only=True)
    assert isinstance(fast.machine, FastMachine) and fast.machine.evaluates_programs
    assert type(detailed.machine) is Fabric and not detailed.machine.evaluates_programs


def test_unknown_backend_names_key_and_choices() -> None:
    with pytest.raises(ConfigError) as err:
        load_topology("ring8", ["simulation.backend=quick"])
    message = str(err.value)
    assert "simulation.backend" in message and "detailed" in message and "fast" in message


def _all_reduce(n: int, algorithm: str) -> np.ndarray:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist
    from kernbench.runtime import current_context

    dist.init_process_group()
    rank = dist.get_rank()
    t = torch.from_numpy(np.arange(n, dtype=np.float32) * (rank + 1))
    dist.all_reduce(t, algorithm=algorithm)
    return None if current_context().timing_only else t.numpy()


@pytest.mark.parametrize("algorithm", ["ring", "direct", "recursive_doubling", "binomial"])
def test_values_on_fast_match_numpy(algorithm: str) -> None:
    p, n = 8, 1003
    result = kernbench.simulate(
        _all_reduce,
        topology="fc8",
        world_size=p,
        overrides=["simulation.backend=fast"],
        args=(n, algorithm),
    )
    want = np.arange(n, dtype=np.float32) * sum(range(1, p + 1))
    for got in result.returns:
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_same_time_functional_and_timing_only_on_fast() -> None:
    rows = []
    for timing_only in (False, True):
        result = kernbench.simulate(
            _all_reduce,
            topology="ring8",
            world_size=8,
            timing_only=timing_only,
            overrides=["simulation.backend=fast"],
            args=(4096, "ring"),
        )
        rows.append([(r.src, r.start_ps, r.end_ps) for r in result.trace if r.kind == "collective"])
    assert len(rows[0]) == 8 and rows[0] == rows[1]


# -- recording ------------------------------------------------------------------------
def _lane(p: int, count: int):
    pes = [f"sip{r}.cube0.pe0" for r in range(p)]
    nodes = [f"sip{r}.cube0.pe0.tcm" for r in range(p)]
    memory = [f"sip{r}.cube0.hbm0" for r in range(p)]
    dtype = as_dtype("float32")
    buffers = [LaneBuffer(pes[r], memory[r], dtype, count, None) for r in range(p)]
    return pes, nodes, memory, buffers


def _programs(module: str, op: str, buffers):
    from kernbench.ccl.algorithms import OpArgs

    body = get_algorithm(module).programs[op]
    return [lambda c, b=b: body(c, OpArgs(buf=b.region())) for b in buffers]


def test_symmetric_lane_is_recorded_one_period_long() -> None:
    p = SYMMETRY_FROM
    pes, nodes, memory, buffers = _lane(p, 64 * p)
    programs = _programs("ring", "all_reduce", buffers)
    lane = record_lane(programs, pes, nodes, memory, op="sum", depth=None, params={"chunks": 1})
    assert lane.period == 1 and len(lane.ranks) == 1
    full = record_ranks(programs, pes, nodes, range(p), op="sum", depth=None, params={"chunks": 1})
    for r in (0, 1, p // 2, p - 1):
        assert shifted(lane.ranks[0].strands, lane.shift_of(r), lane.roles) == full[r].strands


def test_rank_shift_moves_groups_and_ranks_within_them() -> None:
    # 12 ranks in groups of 4, a period of 2: row 7 (group 1, rank 3 within) runs
    # rank 1's program with groups moved by 1 and ranks within by 2
    move = RankShift.of_row(12, 4, 2, 7)
    assert (move.across, move.within) == (1, 2)
    assert [move(x) for x in range(12)] == [6, 7, 4, 5, 10, 11, 8, 9, 2, 3, 0, 1]
    assert [move.inverse()(move(x)) for x in range(12)] == list(range(12))
    # one group of every rank: the plain rotation by the row's period start
    plain = RankShift.of_row(12, 12, 2, 7)
    assert [plain(x) for x in range(12)] == [(x + 6) % 12 for x in range(12)]


def test_composition_is_recorded_one_rank_long_shifted_within_sips(monkeypatch) -> None:
    """A hierarchical all-reduce on two SIPs of rack.yaml (a ring inside each SIP of 128
    PEs, a ring across the two) repeats every rank when ranks move within their SIP:
    one program is recorded, not one SIP's 128, every rank's program is the shifted
    one exactly, and the times are those of every rank recorded."""
    import kernbench.ccl.launch as launch_module
    import kernbench.ccl.record as record_module

    seen: list[tuple] = []

    def spy(programs, pes, nodes, memory, **kwargs):
        lane = record_lane(programs, pes, nodes, memory, **kwargs)
        seen.append((programs, pes, nodes, memory, kwargs, lane))
        return lane

    def run() -> tuple[int, list[int]]:
        result = kernbench.simulate(
            _all_reduce_with,
            topology="rack",
            overrides=["system.device_level=pe", "simulation.backend=fast"],
            world_size=256,
            args=("hierarchical", 1 << 18),
            timing_only=True,
        )
        call = result.report["collectives"][-1]
        assert call["priced"] == "step-wide"
        return call["end_ps"] - call["start_ps"], list(result.per_rank_ps)

    monkeypatch.setattr(launch_module, "record_lane", spy)
    grouped = run()
    programs, pes, nodes, memory, kwargs, lane = seen[-1]
    assert (lane.period, lane.group, len(lane.ranks)) == (1, 128, 1)
    full = record_ranks(programs, pes, nodes, range(len(pes)), **kwargs)
    for r, exact in enumerate(full):
        assert shifted(lane.ranks[0].strands, lane.shift_of(r), lane.roles) == exact.strands
    monkeypatch.setattr(record_module, "SYMMETRY_FROM", 1 << 20)  # every rank recorded
    assert run() == grouped
    assert seen[-1][-1].period is None


def test_a_sample_moved_back_in_one_pass_is_the_relative_form_shifted() -> None:
    """The symmetry check's one pass equals relative() then shifted(), for every rank of
    a ring whose memories are shared by pairs of ranks (nodes named by another rank),
    moved by a plain rotation and by groups; a node outside the lane gives None."""
    p = 16
    pes, nodes, _, _ = _lane(p, 4 * p)
    memory = [f"sip{r // 2}.cube0.hbm0" for r in range(p)]
    dtype = as_dtype("float32")
    buffers = [LaneBuffer(pes[r], memory[r], dtype, 4 * p + 3, None) for r in range(p)]
    programs = _programs("ring", "all_reduce", buffers)
    full = record_ranks(programs, pes, nodes, range(p), op="sum", depth=None, params={"chunks": 2})
    roles = (pes, nodes, memory)
    where: dict = {}
    for role, names_ in enumerate(roles):
        for rank, name in enumerate(names_):
            where.setdefault(name, (role, rank))
    for r, recorded in enumerate(full):
        for move in (RankShift.of_row(p, p, 1, r), RankShift.of_row(p, 4, 2, r)):
            back = relative(recorded.strands, where, roles, r, move.inverse())
            expected = shifted(relative(recorded.strands, where, roles, r), move.inverse(), None)
            assert back == expected
    stray = [
        [(*op[:4], "elsewhere", *op[5:]) if op[0] in (Op.SEND, Op.POST) else op for op in strand]
        for strand in full[3].strands
    ]
    assert relative(stray, where, roles, 3, RankShift.of_row(p, p, 1, 3)) is None


def test_ragged_ring_is_recorded_one_period_long_at_its_widest() -> None:
    # blocks of 64 or 65 elements: rank r's program is rank 0's shifted up to one
    # element per operation, so one period is recorded with the larger sizes
    p = SYMMETRY_FROM
    pes, nodes, memory, buffers = _lane(p, 64 * p + 5)
    programs = _programs("ring", "all_reduce", buffers)
    kwargs = {"op": "sum", "depth": None, "params": {"chunks": 1}}
    lane = record_lane(programs, pes, nodes, memory, **kwargs)
    assert lane.period == 1 and len(lane.ranks) == 1
    full = record_ranks(programs, pes, nodes, range(p), **kwargs)
    sends = [op for op in lane.ranks[0].strands[0] if op[0] == Op.SEND or op[0] == Op.POST]
    assert {op[3] for op in sends} == {65 * 4}
    for r in range(p):
        concrete = shifted(lane.ranks[0].strands, lane.shift_of(r), lane.roles)[0]
        for got, exact in zip(concrete, full[r].strands[0], strict=True):
            assert got[0] == exact[0]
            if got[0] == Op.SEND or got[0] == Op.POST:
                assert got[:3] == exact[:3] and got[4:] == exact[4:]
                assert 0 <= got[3] - exact[3] <= 4


def _sizes_by_rank(nbytes):
    def program(comm):
        yield from comm.send((comm.rank + 1) % comm.size, None, nbytes(comm.rank))
        yield from comm.recv((comm.rank - 1) % comm.size)

    return program


def test_lane_whose_sizes_differ_widely_is_recorded_rank_by_rank() -> None:
    p = SYMMETRY_FROM
    pes, nodes, memory, _ = _lane(p, p)
    kwargs = {"op": "sum", "depth": None, "params": {}}
    lane = record_lane([_sizes_by_rank(lambda r: 512 * r)] * p, pes, nodes, memory, **kwargs)
    assert lane.period is None and len(lane.ranks) == p
    assert [rank.strands[0][0][3] for rank in lane.ranks] == [512 * r for r in range(p)]
    # sizes that repeat every two ranks: an exact period of 2
    lane = record_lane(
        [_sizes_by_rank(lambda r: 4096 * (r % 2) + 8)] * p, pes, nodes, memory, **kwargs
    )
    assert lane.period == 2 and [r.strands[0][0][3] for r in lane.ranks] == [8, 4104]


def test_ragged_lane_crossvalidates_within_its_bound() -> None:
    # 100 elements over 64 ranks (blocks of 1 or 2): priced at the widest block
    points = compare("multi_sip", "ring", (64,), overrides=["system.device_level=cube"], nbytes=400)
    by_op = {p.op: p for p in points}
    # The ragged one (blocks of 1 or 2 elements) step-wide, to the picosecond but for
    # rounding.  The others cross SIP links among hops inside a SIP, with links
    # shared: step-wide within the bound of shared links, or (where sharing costs)
    # message by message, exactly.
    assert by_op["all_reduce"].evaluated
    assert by_op["all_reduce"].error <= 0.001, by_op["all_reduce"]
    for op in ("reduce_scatter", "all_gather"):
        point = by_op[op]
        assert point.error <= point.bound if point.evaluated else point.error == 0, point


def test_recording_leaves_values_alone() -> None:
    p = 4
    pes, nodes, memory, _ = _lane(p, 8)
    dtype = as_dtype("float32")
    stores = [np.full(8, r + 1, dtype=np.float32) for r in range(p)]
    buffers = [LaneBuffer(pes[r], memory[r], dtype, 8, stores[r]) for r in range(p)]
    records = record_ranks(
        _programs("ring", "all_reduce", buffers),
        pes,
        nodes,
        range(p),
        op="sum",
        depth=None,
        params={"chunks": 1},
    )
    assert all(np.all(stores[r] == r + 1) for r in range(p))
    kinds = {op[0] for op in records[0].strands[0]}
    assert {Op.POST, Op.RECV, Op.STREAM} <= kinds


# -- reports of big runs -----------------------------------------------------------------
def test_summary_digests_per_rank_times_of_big_runs() -> None:
    times = [1000 + r for r in range(LISTED_RANKS + 4)]
    times[7] = 5
    result = types.SimpleNamespace(
        elapsed_ps=max(times),
        per_rank_ps=times,
        report={
            "topology": "x",
            "world_size": len(times),
            "timing_only": True,
            "bytes_by_link_class": {},
        },
    )
    line = format_run_summary(result).splitlines()[1]
    assert line.startswith("per-rank time: min 5ps (rank 7)")
    assert f"(rank {len(times) - 1})" in line and f"over {len(times)} ranks" in line


def test_repeated_collective_reuses_its_recording() -> None:
    from kernbench.ccl.record import record_cache
    from kernbench.ccl.settings import CclSettings, use_settings
    from kernbench.distributed.world import World
    from kernbench.runtime import use_context

    topo = load_topology("multi_sip", ["system.device_level=cube", "simulation.backend=fast"])
    ctx = RuntimeContext(topo, timing_only=True)
    use_settings(ctx, CclSettings.from_overrides([]))
    world = World(ctx, 64)

    def body(rank: int) -> None:
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        dist.init_process_group()
        a, b = torch.empty(4096), torch.empty(8192)
        for t in (a, a, b, a):
            dist.all_reduce(t, algorithm="ring")

    with use_context(ctx):
        world.run(body)
    spans = [c.end_ps - c.algo_start_ps for c in world.collectives]
    assert all(c.evaluated for c in world.collectives)
    # the second and fourth calls reuse the first's recording; the third is new
    assert record_cache(ctx.machine).hits == 2
    assert spans[0] == spans[1] == spans[3] and spans[2] > spans[0]


def _rack_ring(n: int) -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    dist.all_reduce(torch.empty(n), algorithm="ring")


def _last_call(
    body, topology: str, overrides: list[str], args: tuple, world_size: int | None = None
) -> tuple[dict, kernbench.SimResult]:
    """The report entry of the run's last collective, timing-only, and the run."""
    result = kernbench.simulate(
        body,
        topology=topology,
        overrides=overrides,
        world_size=world_size,
        args=args,
        timing_only=True,
    )
    return result.report["collectives"][-1], result


def _took(call: dict) -> int:
    return call["end_ps"] - call["start_ps"]


def test_drifting_ranks_run_exactly_unless_the_topology_accepts_approximate_times() -> None:
    """A ring over the 128 cubes of rack.yaml: ranks behind the SIP crossings fall behind,
    and their flows on shared links overlap other steps' (ADR 0015), by more than
    DRIFT_BOUND could cover.  By default the fast backend runs it message by message,
    exactly; ``simulation.drift: approximate`` prices it step-wide and says so
    (measured 19.2% fast here, within the 20% asserted)."""
    n = 4 << 20  # 16 MiB
    # In one piece (the tuner would take two: pipelined channels, refused for that).
    machine = ["system.device_level=cube", "ccl.configs.ring.chunks=1"]

    def run(*overrides: str) -> tuple[dict, kernbench.SimResult]:
        return _last_call(_rack_ring, "rack", [*machine, *overrides], (n,), 128)

    detailed, _ = run()
    exact, exact_result = run("simulation.backend=fast")
    approximate, result = run("simulation.backend=fast", "simulation.drift=approximate")
    took = _took

    assert "priced" not in detailed and "refused" not in detailed
    assert exact["priced"] == "message by message" and took(exact) == took(detailed)
    # the report and the summary say why, and what would price it step-wide
    assert exact["refused"] == (
        "ranks drifting apart (simulation.drift=approximate prices them step-wide)"
    )
    assert (
        "    message by message for ranks drifting apart "
        "(simulation.drift=approximate prices them step-wide): 1"
    ) in format_run_summary(exact_result).splitlines()
    assert "refused" not in approximate
    assert approximate["priced"] == "step-wide, drifting"
    assert abs(took(approximate) / took(detailed) - 1) < 0.20
    assert (
        "  fast backend: 1 of 1 calls priced step-wide, 0 run message by message; 1 with "
        "ranks drifting apart, approximate (simulation.drift=exact runs them message by message)"
    ) in format_run_summary(result).splitlines()


def _hierarchical(n: int) -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    dist.all_reduce(torch.empty(n), algorithm="hierarchical")


# cluster128k cut to two nodes of 8 chips (one leaf each, two spines), 16 PEs a chip:
# the ring across chips crosses the leaves twice among NVLink hops, so its ranks drift.
_SMALL_CLUSTER = [
    "system.device_level=pe",
    "system.sips.count=16",
    "system.interconnect.clos.leaf.nodes=1",
    "system.interconnect.clos.spine.count=2",
    "cube.pe_layout.pe_per_corner=1",
]


def test_drift_that_cannot_move_a_time_by_more_than_the_bound_is_priced_step_wide() -> None:
    """A hierarchical all-reduce over 256 PE ranks of a small cluster: the ring across
    chips drifts (hops through the leaves among NVLink hops), but it moves 1/16 of the
    data, and pricing its rounds as slow as link sharing could make them moves no
    rank's end by more than DRIFT_BOUND.  So it is priced step-wide by default and
    says so.  The bound is one-sided (drift cannot make the call slower by more);
    here the price is above the exact time (0.42%): drifting flows overlap less than
    the rounds assume."""
    n = 4 << 20  # 16 MiB

    def run(*overrides: str) -> tuple[dict, kernbench.SimResult]:
        return _last_call(_hierarchical, "cluster128k", [*_SMALL_CLUSTER, *overrides], (n,), 256)

    detailed, _ = run()
    fast, result = run("simulation.backend=fast")
    took = _took

    assert fast["priced"] == "step-wide, bounded" and "refused" not in fast
    bound = fast["bound"]
    assert 0 < bound <= DRIFT_BOUND
    assert 0 <= took(fast) / took(detailed) - 1 < DRIFT_BOUND
    assert (
        "  fast backend: 1 of 1 calls priced step-wide, 0 run message by message; 1 bounded "
        f"(ranks drifting apart or pipelined channels can add at most {bound:.2%} to a "
        "rank's time)"
    ) in format_run_summary(result).splitlines()


def _tree_and_pipelined_ring() -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    tensor = torch.empty(1 << 16)
    dist.broadcast(tensor, src=0, algorithm="binomial")
    dist.all_reduce(tensor, algorithm="ring")


def test_message_by_message_calls_say_why() -> None:
    """A rooted tree's programs differ from rank to rank; a ring in 16 pieces posts
    more of them than its queues have credits before the first is received; a ring in
    4 pieces over PEs that share HBM slices and cube links keeps flows moving across
    steps where that costs.  All run message by message, and the report says why."""

    def run(topology: str, *overrides: str) -> kernbench.SimResult:
        return kernbench.simulate(
            _tree_and_pipelined_ring,
            topology=topology,
            overrides=["simulation.backend=fast", *overrides],
            world_size=8,
            timing_only=True,
        )

    result = run("ring8", "ccl.configs.ring.chunks=16")
    calls = [c for c in result.report["collectives"] if c["op"] != "barrier"]
    assert [(c["op"], c["priced"], c.get("refused")) for c in calls] == [
        ("broadcast", "message by message", UNALIGNED),
        ("all_reduce", "message by message", CREDITS),
    ]
    summary = format_run_summary(result).splitlines()
    assert f"    message by message for {UNALIGNED}: 1" in summary
    assert f"    message by message for {CREDITS}: 1" in summary
    shared = run("multi_sip", "system.device_level=pe", "ccl.configs.ring.chunks=4")
    call = shared.report["collectives"][-1]
    assert (call["op"], call["priced"], call["refused"]) == (
        "all_reduce",
        "message by message",
        BACKLOG,
    )


def _timed_all_reduce(n: int, algorithm: str) -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    dist.all_reduce(torch.empty(n), algorithm=algorithm)


@pytest.mark.parametrize(
    ("topology", "algorithm", "overrides", "n"),
    [
        ("ring8", "ring", ["ccl.configs.ring.chunks=4"], 4 << 20),
        ("fc8", "ring_pipelined", [], 4 << 20),
        # queues of one or two slots: sends wait for credits (with and without a backlog)
        ("ring8", "ring", ["ccl.configs.ring.queue_depth=1", "ccl.configs.ring.chunks=1"], 64),
        ("ring8", "ring", ["ccl.configs.ring.queue_depth=2", "ccl.configs.ring.chunks=2"], 64),
        ("ring8", "ring", ["ccl.configs.ring.queue_depth=2", "ccl.configs.ring.chunks=2"], 4 << 20),
    ],
)
def test_pipelined_rings_on_links_of_their_own_are_priced_exactly(
    topology: str, algorithm: str, overrides: list[str], n: int
) -> None:
    """A ring in pieces keeps several messages on a channel at once (a backlog), so
    its flows run on across steps; where every link carries one channel (8 chips in a
    ring or fully connected, 16 MiB in 4 or 8 pieces), no overlap can change a rate,
    the bound is 0 and the step-wide price is the fabric's to the picosecond.  With
    queues of one or two slots, sends wait for their credits as on the fabric."""

    def took(*more: str) -> tuple[int, dict]:
        call, _ = _last_call(_timed_all_reduce, topology, [*overrides, *more], (n, algorithm))
        return _took(call), call

    detailed, _ = took()
    fast, call = took("simulation.backend=fast")
    assert call["priced"] == "step-wide" and "bound" not in call
    assert fast == detailed


def test_sends_further_ahead_than_their_credits_run_on_the_fabric() -> None:
    """A ring in 4 pieces over queues of 3 slots posts its fourth piece before the
    first is received: its credit comes from a receive the rounds have not reached,
    so the program runs message by message, exactly, and says why."""
    detailed, fast = (
        _last_call(
            _timed_all_reduce,
            "ring8",
            ["ccl.configs.ring.queue_depth=3", "ccl.configs.ring.chunks=4", *more],
            (4 << 20, "ring"),
        )[0]
        for more in ([], ["simulation.backend=fast"])
    )
    assert (fast["priced"], fast["refused"]) == ("message by message", CREDITS)
    assert _took(detailed) == _took(fast)


def test_run_tells_large_message_by_message_calls_as_they_start(
    tmp_path, monkeypatch, capsys
) -> None:
    """``kernbench run`` says on standard error, once per op, configuration and reason,
    which calls over many ranks run message by message (they can take minutes, and
    the summary comes only at the end); smaller calls are left to the summary."""
    import kernbench.bench.runner as runner

    script = tmp_path / "trees.py"
    script.write_text(
        "import kernbench.torch as torch\n"
        "import kernbench.torch.distributed as dist\n\n"
        "def main():\n"
        "    dist.init_process_group()\n"
        "    t = torch.empty(1 << 12)\n"
        "    for _ in range(3):\n"
        "        dist.broadcast(t, src=0, algorithm='binomial')\n"
    )

    def run() -> str:
        runner.run_script(
            str(script),
            topology="ring8",
            overrides=["simulation.backend=fast"],
            timing_only=True,
            echo=lambda _line: None,
        )
        return capsys.readouterr().err

    assert "note:" not in run()  # 8 ranks: below the threshold
    monkeypatch.setattr(runner, "NOTE_REFUSED_FROM", 8)
    err = run()
    assert err.count("note:") == 1, err
    assert (
        f"note: broadcast (binomial) over 8 ranks runs message by message on the fast "
        f"backend: {UNALIGNED}"
    ) in err


def test_drift_setting_names_its_choices() -> None:
    with pytest.raises(ConfigError, match=r"simulation\.drift.*'exact'.*'approximate'"):
        load_topology("ring8", ["simulation.drift=roughly"])
    assert load_topology("ring8").simulation.drift == "exact"


def _all_reduce_with(algorithm: str, n: int) -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    dist.all_reduce(torch.empty(n), algorithm=algorithm)


# The rings move 256 KiB (blocks of a packet: the tuner keeps one piece, and the
# evaluator prices programs without a backlog on any channel); the others 1 MiB.
@pytest.mark.parametrize(
    ("topology", "overrides", "world", "algorithm", "folded"),
    [
        ("ring8", ["system.sips.count=64"], 64, "ring", True),
        ("ring8", ["system.sips.count=64"], 64, "recursive_doubling", True),
        ("rack", ["system.device_level=pe"], 256, "hierarchical", True),
        ("multi_sip", ["system.device_level=cube"], 64, "recursive_doubling", True),
        # one slow PE: rows a period apart reduce at different rates, nothing is folded
        (
            "ring8",
            ["system.sips.count=64", "faults.pes=[{pe: sip5.cube0.pe0, slowdown: 2}]"],
            64,
            "ring",
            False,
        ),
    ],
)
def test_rows_a_period_apart_are_folded_without_changing_a_time(
    monkeypatch, topology, overrides, world, algorithm, folded
) -> None:
    """Where every row one period apart is priced alike, the round loop keeps one period
    of rows; the times are those of the loop over every row, to the picosecond."""
    import kernbench.fast.evaluate as evaluate_module
    import kernbench.fast.machine as machine_module

    def run() -> tuple[int, list[int]]:
        result = kernbench.simulate(
            _all_reduce_with,
            topology=topology,
            overrides=[*overrides, "simulation.backend=fast"],
            world_size=world,
            args=(algorithm, 1 << 16 if algorithm == "ring" else 1 << 18),
            timing_only=True,
        )
        call = result.report["collectives"][-1]
        assert call["priced"] == "step-wide"
        return call["end_ps"] - call["start_ps"], list(result.per_rank_ps)

    kept: list[tuple[int, int]] = []
    real_fold = evaluate_module._Fold

    class Spy(real_fold):
        def __init__(self, n: int, period: int) -> None:
            super().__init__(n, period)
            kept.append((n, period))

    monkeypatch.setattr(evaluate_module, "_Fold", Spy)
    with_fold = run()
    # folded: the period's rows alone finished the loop (no second, unfolded run)
    assert (kept[-1][1] < kept[-1][0]) == folded, kept
    real_evaluate = machine_module.evaluate
    monkeypatch.setattr(
        machine_module, "evaluate", lambda *a, period=None, **k: real_evaluate(*a, **k)
    )
    kept.clear()
    assert run() == with_fold
    assert all(m == n for n, m in kept)


def test_times_past_64_bit_picoseconds_run_on_the_fabric_exactly() -> None:
    """Links of 1 B/s put a 64 MiB ring past 2**62 ps: the evaluator's int64 sums would
    wrap (it said 2,818 us for a 1 GiB call that takes 59 years), so such a program
    runs message by message, on the fabric's Python-integer clock, and says why."""
    slow = ["system.interconnect.link.bandwidth=1B/s", "ccl.configs.ring.chunks=1"]
    detailed, _ = _last_call(_rack_ring, "ring8", slow, (16 << 20,))
    fast, _ = _last_call(_rack_ring, "ring8", [*slow, "simulation.backend=fast"], (16 << 20,))
    assert _took(detailed) > 1 << 63
    assert fast["priced"] == "message by message"
    assert fast["refused"] == (
        "times that could reach 4611686018427387904 ps (2**62), past 64-bit arithmetic"
    )
    assert _took(fast) == _took(detailed)


@pytest.mark.parametrize(
    "clock",
    [
        "1.5GHz",
        # 1,000,000,001 flops/s shares only 1 with 10**12: flops * 10**12 passes int64
        # though the 8 M-element reductions' times do not (computed in Python integers)
        "1.000000001GHz",
    ],
)
def test_reductions_of_more_than_9_2_million_elements_take_their_exact_time(clock) -> None:
    """ceil(flops * 10**12 / rate) in int64 wraps past 9.2 M elements: a one-piece ring
    over 8 chips reducing 8-16 M elements a step on a slow vector engine (compute-bound,
    so a wrapped time would show) is priced step-wide to the fabric's picosecond."""
    core = "cube.pe_template.components.pe_core.attrs"
    slow = [
        f"{core}.vector_flops_per_cycle=1",
        f"{core}.clock={clock}",
        "ccl.configs.ring.chunks=1",
    ]
    n = (128 if clock == "1.5GHz" else 64) << 20  # elements: 8-16 M a block
    detailed, _ = _last_call(_rack_ring, "ring8", slow, (n,))
    fast, _ = _last_call(_rack_ring, "ring8", [*slow, "simulation.backend=fast"], (n,))
    assert fast["priced"] == "step-wide"
    assert _took(fast) == _took(detailed)


def _with_a_slowed_port(port: str, slowdown: int, world_size: int) -> dict[str, dict]:
    """The one all-reduce's report entry on each backend, with memory ``port`` slowed."""
    fault = f'faults.links=[{{link: "{port}", slowdown: {slowdown}}}]'
    calls = {}
    for backend in ("detailed", "fast"):
        result = kernbench.simulate(
            _all_reduce,
            topology="ring8",
            world_size=world_size,
            timing_only=True,
            overrides=[fault, f"simulation.backend={backend}"],
            args=(65536, "ring"),
        )
        (calls[backend],) = result.report["collectives"]
    return calls


def _took_call(call: dict) -> int:
    return call["end_ps"] - call["launch_ps"]


def test_a_slowed_memory_port_runs_message_by_message_with_the_fabrics_time() -> None:
    """One rank's memory slowed by a fault: step-wide rounds came out 25-38% fast, so
    the fast backend runs the call on the fabric and says why."""
    calls = _with_a_slowed_port("port:sip2.cube0.hbm0", 100, world_size=8)
    assert "a fault slows memory port port:sip2.cube0.hbm0" in calls["fast"]["refused"]
    assert _took_call(calls["fast"]) == _took_call(calls["detailed"])


def test_a_slowed_memory_port_no_rank_uses_leaves_collectives_step_wide() -> None:
    """The refusal is for collectives whose messages or streams cross the slowed port:
    four ranks on SIPs 0-3 of ring8, the fault on SIP 6's memory, are priced step-wide
    to the fabric's picosecond."""
    calls = _with_a_slowed_port("port:sip6.cube0.hbm0", 10, world_size=4)
    assert calls["fast"]["priced"].startswith("step-wide"), calls["fast"].get("refused")
    assert _took_call(calls["fast"]) == _took_call(calls["detailed"])


def _two_groups_at_once(n: int, stagger: bool) -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    evens, odds = dist.new_group(list(range(0, size, 2))), dist.new_group(list(range(1, size, 2)))
    tensor = torch.ones(n) * (rank + 1)
    dist.barrier()
    if stagger and rank % 2:
        tensor = tensor * 2  # the odd ranks' ring starts while the even ranks' runs
    dist.all_reduce(tensor, group=odds if rank % 2 else evens)
    want = sum(q + 1 for q in range(rank % 2, size, 2)) * (2 if stagger and rank % 2 else 1)
    assert np.array_equal(tensor.numpy(), np.full(n, want, np.float32))


def _all_reduces(stagger: bool, *overrides: str) -> tuple[list[dict], kernbench.SimResult]:
    result = kernbench.simulate(
        _two_groups_at_once,
        topology="ring8",
        overrides=["ccl.configs.ring.chunks=1", *overrides],
        args=(1 << 16, stagger),
    )
    return [c for c in result.report["collectives"] if c["op"] == "all_reduce"], result


def test_collectives_in_flight_together_run_message_by_message() -> None:
    """Rings on the even and the odd chips of ring8 cross the same links at the same
    time: priced alone, each came out 32% fast here (47% at 4 MiB).  Both run on the
    fabric, as on the detailed backend to the picosecond, and the report says why."""
    detailed, _ = _all_reduces(False)
    fast, result = _all_reduces(False, "simulation.backend=fast")
    assert [_took(c) for c in fast] == [_took(c) for c in detailed]
    assert [(c["priced"], c["refused"]) for c in fast] == [("message by message", OVERLAPPING)] * 2
    assert f"    message by message for {OVERLAPPING}: 2" in format_run_summary(result).splitlines()


def test_a_collective_priced_alone_and_then_overlapped_says_so() -> None:
    """The even ranks' ring is priced step-wide as it starts, alone; the odd ranks' starts
    before it ends, runs message by message, and the first call's entry says its
    price leaves the second's traffic out."""
    fast, result = _all_reduces(True, "simulation.backend=fast")
    assert [(c["priced"], c.get("refused")) for c in fast] == [
        ("step-wide, overlapped", None),
        ("message by message", OVERLAPPING),
    ]
    assert "1 priced alone although other collectives started before they ended" in (
        format_run_summary(result)
    )


def _all_gather(n: int) -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    out = torch.empty(n * dist.get_world_size())
    dist.all_gather_into_tensor(out, torch.empty(n))


def test_priced_collectives_count_their_bytes_per_link() -> None:
    """A priced all-gather moves no flow on the fabric; its messages' bytes still count
    in the report's bytes per link class and busiest component (they had no sip_link
    bytes at all), as the detailed backend counts them."""
    reports = [
        kernbench.simulate(
            _all_gather, topology="fc8", overrides=more, args=(1 << 14,), timing_only=True
        ).report
        for more in ([], ["simulation.backend=fast"])
    ]
    detailed, fast = reports
    assert fast["collectives"][-1]["priced"] == "step-wide"
    assert fast["bytes_by_link_class"] == detailed["bytes_by_link_class"]
    assert detailed["bytes_by_link_class"]["sip_link"] == 8 * 7 * (1 << 16)
    assert fast["busiest_fabric_component"] == detailed["busiest_fabric_component"]


def _two_pairs_at_once(n: int) -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    rank = dist.get_rank()
    pairs = [dist.new_group([0, 1]), dist.new_group([4, 5])]
    tensor = torch.ones(n) * (rank + 1)
    dist.barrier()
    if rank in (0, 1, 4, 5):
        dist.all_reduce(tensor, group=pairs[rank // 4])
        want = {0: 3, 1: 3, 4: 11, 5: 11}[rank]
        assert np.array_equal(tensor.numpy(), np.full(n, want, np.float32))


def test_collectives_in_flight_on_links_of_their_own_stay_step_wide() -> None:
    """Chips 0-1 and 4-5 of ring8 all-reduce at once over links no other message or
    memory stream of the other pair crosses: both are priced step-wide, to the
    fabric's picosecond."""
    times = {}
    for backend in ("detailed", "fast"):
        result = kernbench.simulate(
            _two_pairs_at_once,
            topology="ring8",
            overrides=["ccl.configs.ring.chunks=1", f"simulation.backend={backend}"],
            args=(1 << 16,),
        )
        calls = [c for c in result.report["collectives"] if c["op"] == "all_reduce"]
        times[backend] = [_took(c) for c in calls]
        if backend == "fast":
            assert [c["priced"] for c in calls] == ["step-wide", "step-wide"]
    assert times["fast"] == times["detailed"]
