"""auto against simulation: its predictions respect physics, its picks are near the best.

Every catalogue configuration that can run an op on a machine's default world
(ring8 and fc8: 8 ranks, multi_sip: 4 ranks, one per SIP) is measured in
timing-only mode over sizes from 4 KiB to 256 MiB, as ``kernbench tune``
measures them (the second of two calls, launch to end); auto's pick at each
size must be within 10% of the fastest.  The cost model's bytes per link must
be the bytes the simulation moves, its prediction at least what the busiest of
those links needs, and its bound no more than the simulated time.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.settings import ccl_settings
from kernbench.ccl.tuner import auto_choice, candidates, predict_detail
from kernbench.runtime import RuntimeContext
from kernbench.topology import load_topology

MACHINES = {"ring8": 8, "fc8": 8, "multi_sip": 4}  # world size at the default device level
SIZES = tuple(1 << k for k in range(12, 29))  # 4 KiB .. 256 MiB
SOME_SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20)
OPS = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "all_to_all",
    "barrier",
)


def _body(op: str, config: str, sizes: Sequence[int], calls: int) -> None:
    """``calls`` calls of ``op`` per size (n bytes: the op's whole buffer, as auto sees it)."""
    dist.init_process_group()
    p, rank = dist.get_world_size(), dist.get_rank()
    for nbytes in sizes:
        n = nbytes // 4
        whole, other, part = torch.empty(n), torch.empty(n), torch.empty(n // p)
        blocks = [torch.empty(n // p) for _ in range(p)] if rank == 0 else None
        for _ in range(calls):
            if op == "all_reduce":
                dist.all_reduce(whole, algorithm=config)
            elif op == "reduce_scatter":
                dist.reduce_scatter_tensor(part, whole, algorithm=config)
            elif op == "all_gather":
                dist.all_gather_into_tensor(whole, part, algorithm=config)
            elif op == "broadcast":
                dist.broadcast(whole, src=0, algorithm=config)
            elif op == "reduce":
                dist.reduce(whole, dst=0, algorithm=config)
            elif op == "gather":
                dist.gather(part, gather_list=blocks, dst=0, algorithm=config)
            elif op == "scatter":
                dist.scatter(part, scatter_list=blocks, src=0, algorithm=config)
            elif op == "all_to_all":
                dist.all_to_all_single(other, whole, algorithm=config)
            else:
                dist.barrier(algorithm=config)


def _simulate(machine: str, op: str, config: str, sizes: Sequence[int], calls: int, ranks: int = 0):
    return kernbench.simulate(
        _body,
        topology=machine,
        timing_only=True,
        world_size=ranks or None,
        args=(op, config, tuple(sizes), calls),
    )


@functools.cache
def _probe(machine: str, ranks: int = 0) -> tuple[RuntimeContext, list[str]]:
    ctx = RuntimeContext(load_topology(machine), timing_only=True)
    pes = [f"sip{rank}.cube0.pe0" for rank in range(ranks or MACHINES[machine])]
    return ctx, pes


def _sizes(ranks: int) -> tuple[int, ...]:
    """SIZES, cut to whole elements per rank's block when the group is not a power of two."""
    unit = 4 * ranks * ranks
    return tuple(size // unit * unit for size in SIZES)


@functools.cache
def _measured(machine: str, op: str, config: str, ranks: int = 0) -> dict[int, int]:
    """Picoseconds of the second call at each size, launch to end (as kernbench tune)."""
    sizes = _sizes(ranks or MACHINES[machine])
    sizes = sizes if op != "barrier" else sizes[:1]
    run = _simulate(machine, op, config, sizes, 2, ranks)
    records = run.report["collectives"][1::2]
    return {size: c["end_ps"] - c["launch_ps"] for size, c in zip(sizes, records, strict=True)}


# Where the tuner's pick is more than 10% off the best, and why (held to 20%): on 3 and 6
# ranks at 128-512 KiB the model takes the trees' pieces to fill the idle time of their
# first piece, while the simulation's tree ranks, serial in their receives, leave part of
# it idle (ADR 0018, 0019); the pick is a tree, the best a ring or direct sends.
KNOWN_MISSES = {
    ("ring8", "all_reduce", 131040),
    ("multi_sip", "all_reduce", 262116),
    ("multi_sip", "broadcast", 131040),
    ("multi_sip", "broadcast", 262116),
    ("multi_sip", "broadcast", 524268),  # 1.18x since ADR 0019
}


def _misses(machine: str, op: str, sizes: Sequence[int], ranks: int = 0) -> list[str]:
    ctx, pes = _probe(machine, ranks)
    names = [name for name, _ in candidates(ctx, op, pes)]
    sizes = _sizes(len(pes)) if ranks else sizes
    misses = []
    for nbytes in sizes if op != "barrier" else sizes[:1]:
        times = {name: _measured(machine, op, name, ranks)[nbytes] for name in names}
        pick = auto_choice(ctx, op, len(pes), nbytes, pes)
        best = min(times, key=times.get)
        allowed = 1.20 if (machine, op, nbytes) in KNOWN_MISSES else 1.10
        if times[pick] > allowed * times[best]:
            misses.append(
                f"{machine} {op} {nbytes} B: auto {pick} {times[pick] / 1e6:.2f} us, "
                f"best {best} {times[best] / 1e6:.2f} us ({times[pick] / times[best]:.2f}x)"
            )
    return misses


# multi_sip, the quickest, runs by default; ring8 and fc8 with -m slow.
@pytest.mark.parametrize(
    "machine",
    [m if m == "multi_sip" else pytest.param(m, marks=pytest.mark.slow) for m in MACHINES],
)
def test_auto_all_reduce_is_within_10_percent_of_the_best_at_every_size(machine):
    assert _misses(machine, "all_reduce", SIZES) == []


# Each op on one machine by default (the machines in turn, so each has two or three);
# the other pairs with -m slow, where every pair also runs at every size.
@pytest.mark.parametrize(
    ("machine", "op"),
    [
        pytest.param(
            machine,
            op,
            marks=()
            if list(MACHINES).index(machine) == index % len(MACHINES)
            else pytest.mark.slow,
        )
        for machine in MACHINES
        for index, op in enumerate(op for op in OPS if op != "all_reduce")
    ],
)
def test_auto_is_within_10_percent_of_the_best_for_every_op(machine, op):
    assert _misses(machine, op, SOME_SIZES) == []


@pytest.mark.slow
@pytest.mark.parametrize("op", [op for op in OPS if op != "all_reduce"])
@pytest.mark.parametrize("machine", MACHINES)
def test_auto_is_within_10_percent_of_the_best_for_every_op_at_every_size(machine, op):
    assert _misses(machine, op, SIZES) == []


# Each op and each machine runs by default, in four of the twelve pairs; the other
# eight with -m slow.
ODD_GROUPS_BY_DEFAULT = {
    ("multi_sip", "all_reduce"),
    ("ring8", "reduce_scatter"),
    ("fc8", "all_gather"),
    ("multi_sip", "broadcast"),
}


@pytest.mark.parametrize(
    ("machine", "ranks", "op"),
    [
        pytest.param(
            machine,
            ranks,
            op,
            marks=() if (machine, op) in ODD_GROUPS_BY_DEFAULT else pytest.mark.slow,
        )
        for machine, ranks in (("ring8", 6), ("fc8", 5), ("multi_sip", 3))
        for op in ("all_reduce", "reduce_scatter", "all_gather", "broadcast")
    ],
)
def test_auto_is_within_10_percent_of_the_best_on_groups_that_are_not_a_power_of_two(
    machine, ranks, op
):
    """Folded recursive doubling, unequal tree levels, rings that wrap unevenly."""
    assert _misses(machine, op, (), ranks) == []


def test_auto_runs_what_auto_choice_says():
    ctx, pes = _probe("ring8")
    for nbytes in (4 << 10, 16 << 20):
        run = _simulate("ring8", "all_reduce", "auto", [nbytes], 1)
        assert run.report["collectives"][0]["config"] == auto_choice(
            ctx, "all_reduce", 8, nbytes, pes
        )


# -- the cost model against the links the simulation uses --------------------------------
def _one_call_link_bytes(machine: str, op: str, config: str, nbytes: int) -> dict[str, int]:
    """Bytes one call moves over each link and memory port (two calls less one call: the
    first call's IPCQ plan install and the tensors' set-up cancel out)."""
    runs = [_simulate(machine, op, config, [nbytes], calls) for calls in (1, 2)]
    edges = runs[0].context.machine.graph.edges
    once, twice = (run.link_bytes for run in runs)
    return {edges[e].name: twice[e] - once[e] for e in range(len(edges)) if twice[e] != once[e]}


def _check_against_the_links(machine: str, nbytes: int) -> list[str]:
    ctx, pes = _probe(machine)
    graph = ctx.machine.graph
    bandwidth = {e.name: e.bandwidth for e in graph.edges}
    launch = ctx.topology.cube.pe_template.components.pe_core.attrs.launch_overhead / 1e12
    problems = []
    for op in OPS:
        for name, config in candidates(ctx, op, pes):
            if op == "barrier" and nbytes != SIZES[0]:
                continue
            simulated_bytes = _one_call_link_bytes(machine, op, name, nbytes)
            predicted = predict_detail(ctx, op, config, pes, nbytes)
            modelled = {k: round(v) for k, v in predicted.link_bytes.items() if v}
            if modelled != simulated_bytes:
                problems.append(f"{op} {name}: links {modelled} != simulated {simulated_bytes}")
            busiest = max((b / bandwidth[k] for k, b in simulated_bytes.items()), default=0.0)
            if predicted.seconds < launch + busiest:
                problems.append(f"{op} {name}: {predicted.seconds} s beats the links' bound")
            simulated = _measured(machine, op, name)[nbytes if op != "barrier" else SIZES[0]]
            if predicted.bound > simulated / 1e12:
                problems.append(f"{op} {name}: bound {predicted.bound} > simulated {simulated}")
    return problems


# Each machine is a long run (every op and candidate, simulated twice): multi_sip, the
# quickest, stays in the default suite; the others run with -m slow.
@pytest.mark.parametrize(
    "machine",
    [m if m == "multi_sip" else pytest.param(m, marks=pytest.mark.slow) for m in MACHINES],
)
def test_predictions_carry_the_simulated_bytes_and_never_beat_those_links(machine):
    assert _check_against_the_links(machine, 1 << 20) == []


@pytest.mark.slow
@pytest.mark.parametrize("nbytes", [4 << 10, 64 << 20])
@pytest.mark.parametrize("machine", MACHINES)
def test_predictions_carry_the_simulated_bytes_at_other_sizes(machine, nbytes):
    assert _check_against_the_links(machine, nbytes) == []


def test_pipelined_ring_on_ring8_is_not_predicted_faster_than_its_links_allow():
    """16 MiB all-reduce on 8 ranks of a bidirectional ring of 50 GB/s links: every byte but
    a rank's own eighth must leave it twice (reduce-scatter, all-gather) over its two
    links, so no schedule beats 2·(7/8)·16 MiB / (2·50 GB/s) = 293.6 us; the pipelined
    ring's messages all go one way, so it needs 587.2 us, and it takes 599.2 us (98% of
    that: a channel's next piece leaves while the last one is still on its way)."""
    ctx, pes = _probe("ring8")
    nbytes = 16 << 20
    config = ccl_settings(ctx).resolve("ring_pipelined")[1]
    predicted = predict_detail(ctx, "all_reduce", config, pes, nbytes)
    two_directions = 2 * 7 / 8 * nbytes / (2 * 50e9)
    one_direction = 2 * 7 / 8 * nbytes / 50e9
    assert two_directions == pytest.approx(293.6e-6, abs=1e-7)
    assert predicted.seconds >= one_direction > two_directions
    simulated = _measured("ring8", "all_reduce", "ring_pipelined")[nbytes] / 1e12
    assert simulated == pytest.approx(599.2e-6, abs=1e-7)
    assert abs(predicted.seconds - simulated) / simulated < 0.10
