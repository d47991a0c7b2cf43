"""The fused mode of a mixed handler: one WORLD launch of a pipelined program per rank.

Each rank's program runs the op's phases (:data:`~.pipeline.PHASES`) on
sub-communicators of its TP and DP groups, with the algorithm configuration
the two-step mode's ``torch.distributed`` call would run each phase with (the
catalogue's choice for the op, ``auto`` resolved for the group and the full
size).  With k pieces it is a two-stage software pipeline on the PEs over
IPCQ: stage s runs phase 1 of piece s and phase 2 of piece s-1 side by side
(:meth:`~kernbench.ccl.comm.Comm.concurrently`), each piece on channels of
its own, so the fabric prices whatever links the two phases share.  With one
piece it is the two-step schedule in one launch: each rank starts phase 2 as
soon as its own phase 1 is done.  :func:`~.pipeline.plan_pieces` picks k.
The launch reports itself as ``mixed_fused``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs
from kernbench.ccl.buffers import buffer_node
from kernbench.ccl.catalogue import AlgorithmConfig
from kernbench.ccl.comm import Comm, Region, chunk_bounds
from kernbench.ccl.launch import CollectiveLauncher, choose, single_lane
from kernbench.torch.distributed.mixed.layout import MixedLayout
from kernbench.torch.distributed.mixed.pipeline import PHASES, groups_of, phase_nbytes, plan_pieces

__all__ = ["FUSED_CONFIG", "launch_fused"]

FUSED_CONFIG = "mixed_fused"  # the configuration name fused launches report


@dataclass(frozen=True)
class _PhaseRun:
    """How one rank runs one phase: its group (world ranks), program and configuration."""

    group: tuple[int, ...]
    program: Callable[[Comm, OpArgs], Generator]
    config: AlgorithmConfig
    nodes: tuple[str, ...]  # where messages to each group member land, by group rank


def _blocks(region: Region, parts: int) -> list[Region]:
    size = region.count // parts
    return [region.sub(i * size, (i + 1) * size) for i in range(parts)]


def _phase_args(
    op: str, index: int, x: Region, out: Region, layout: MixedLayout
) -> Callable[[int, int], OpArgs]:
    """Elements ``[a, b)`` of the piece grid -> the phase's buffers for that piece."""
    tp, dp = layout.tp_size, layout.dp_size
    if op in ("all_reduce", "all_reduce_all_gather") and index == 0:
        return lambda a, b: OpArgs(buf=x.sub(a, b))  # in place (x is a working copy)
    if op == "all_gather":
        outs = _blocks(out, tp)
        return lambda a, b: OpArgs(inp=x.sub(a, b), blocks=tuple(o.sub(a, b) for o in outs))
    if op == "all_reduce_all_gather":
        outs = _blocks(out, dp)
        return lambda a, b: OpArgs(inp=x.sub(a, b), blocks=tuple(o.sub(a, b) for o in outs))
    if op in ("reduce_scatter", "reduce_scatter_all_reduce") and index == 0:
        ins = _blocks(x, tp if op == "reduce_scatter" else dp)
        return lambda a, b: OpArgs(blocks=tuple(i.sub(a, b) for i in ins), out=out.sub(a, b))
    return lambda a, b: OpArgs(buf=out.sub(a, b))  # reduce_scatter_all_reduce's all-reduce


def _fused_program(
    op: str,
    x: Region,
    out: Region,
    layout: MixedLayout,
    runs: Sequence[_PhaseRun],
    pieces: int,
) -> Callable[[Comm], Generator]:
    """One rank's program: stage s runs phase i of piece s - i for every phase that has one."""
    scattered = {"reduce_scatter": layout.tp_size, "reduce_scatter_all_reduce": layout.dp_size}
    bounds = chunk_bounds(x.count // scattered.get(op, 1), pieces)
    args = [_phase_args(op, i, x, out, layout) for i in range(len(runs))]

    def phase(c: Comm, i: int, piece: int) -> Generator:
        run = runs[i]
        sub = c.sub(list(run.group), (i, piece))
        # The phase runs with its own configuration's parameters, queue depth and buffers.
        sub.params = {"chunks": run.config.chunks, **run.config.params}
        sub.depth = run.config.queue_depth
        sub.nodes = list(run.nodes)
        yield from run.program(sub, args[i](*bounds[piece]))

    def program(c: Comm) -> Generator:
        for stage in range(pieces + len(runs) - 1):
            bodies = [phase(c, i, stage - i) for i in range(len(runs)) if 0 <= stage - i < pieces]
            if len(bodies) == 1:
                yield from bodies[0]
            else:
                yield from c.concurrently(bodies)

    return program


def launch_fused(
    ctx: Any,
    op: str,
    layout: MixedLayout,
    payloads: list[tuple[Any, Any]],
    min_pieces: int,
    max_pieces: int,
) -> tuple[CollectiveLauncher, int]:
    """The WORLD launch of a fused op (run by the last rank to arrive) and its piece count.

    ``payloads[w]``: world rank w's (input, output) device tensors; the pieces
    are planned by :func:`~.pipeline.plan_pieces` within the bounds given.
    """
    ins = [single_lane(x, op) for x, _ in payloads]
    outs = [single_lane(o, op) for _, o in payloads]
    pes = [lane.pe for lane in ins]
    memory = [lane.memory_node for lane in ins]
    world = layout.world_size
    x_nbytes = ins[0].region().nbytes
    itemsize = ins[0].dtype.itemsize
    pieces = plan_pieces(ctx, op, layout, pes, x_nbytes, itemsize, max_pieces, min_pieces).pieces
    # runs[w][i]: how world rank w runs phase i; the algorithm per group, as two-step picks it.
    runs: list[list[_PhaseRun]] = [[] for _ in range(world)]
    algorithms: list[list[tuple[Algorithm, tuple[int, ...]]]] = [[] for _ in range(world)]
    for i, phase in enumerate(PHASES[op]):
        nbytes = phase_nbytes(op, i, layout, x_nbytes)
        for group in groups_of(layout, phase.group):
            _, config, algorithm = choose(
                ctx, phase.op, None, len(group), nbytes, [pes[w] for w in group]
            )
            nodes = tuple(buffer_node(pes[w], memory[w], config.buffer) for w in group)
            run = _PhaseRun(group, algorithm.programs[phase.op], config, nodes)
            for w in group:
                runs[w].append(run)
                algorithms[w].append((algorithm, group))

    def peers(_op: str, _size: int, rank: int) -> set[int]:
        found: set[int] = set()
        for i, (algorithm, group) in enumerate(algorithms[rank]):
            mine = group.index(rank)
            found |= {group[p] for p in algorithm.neighbours(PHASES[op][i].op, len(group), mine)}
        return found - {rank}

    first = runs[0][0]
    algorithm = Algorithm(
        name=FUSED_CONFIG,
        programs={},
        description="TP and DP phases pipelined in pieces, each with the two-step configuration",
        peers=peers,
    )
    launcher = CollectiveLauncher(ctx, op, FUSED_CONFIG, first.config, algorithm)
    launcher.nbytes = max(x_nbytes, outs[0].region().nbytes)
    programs = [
        _fused_program(op, ins[w].region(), outs[w].region(), layout, runs[w], pieces)
        for w in range(world)
    ]
    launcher.lane(programs, pes, memory)
    for _, o in payloads:
        launcher.refresh_replicas(o)
    return launcher, pieces
