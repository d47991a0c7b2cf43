"""The fused mode of a mixed handler: one WORLD launch of a pipelined program per rank.

Each rank's program cuts its data into pieces and runs piece k's first phase
on a TP (or DP) sub-communicator, then piece k's second phase as a separate
SimPy process on the other sub-communicator, overlapping piece k+1's first
phase.  Every phase is the registry's ``ring`` program with the catalogue's
``ring`` configuration; the launch reports itself as ``mixed_fused``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, get_algorithm
from kernbench.ccl.comm import Comm, Region, chunk_bounds
from kernbench.ccl.launch import CollectiveLauncher, single_lane
from kernbench.ccl.settings import ccl_settings
from kernbench.torch.distributed.mixed.layout import FUSED_OPS, MixedLayout

__all__ = ["FUSED_CONFIG", "launch_fused"]

FUSED_CONFIG = "mixed_fused"  # the configuration name fused launches report


def _fused_program(
    op: str,
    x: Region,
    out: Region,
    tp_ranks: list[int],
    dp_ranks: list[int],
    steps: int,
) -> Callable[[Comm], Generator]:
    """One rank's fused program: ``steps`` pieces, phase 2 of piece k overlapping phase 1 of k+1."""
    ring = get_algorithm("ring").programs
    tp_size, dp_size = len(tp_ranks), len(dp_ranks)

    def blocks(region: Region, parts: int) -> list[Region]:
        size = region.count // parts
        return [region.sub(i * size, (i + 1) * size) for i in range(parts)]

    # The piece grid: the extent every block is cut along.
    extent = x.count // {"reduce_scatter": tp_size, "reduce_scatter_all_reduce": dp_size}.get(op, 1)
    bounds = chunk_bounds(extent, steps)

    def program(c: Comm) -> Generator:
        tail = []
        for k, (a, b) in enumerate(bounds):
            tpc = c.sub(tp_ranks, ("tp", k))
            if op == "all_reduce":  # in place: x is the output
                yield from ring["all_reduce"](tpc, OpArgs(buf=x.sub(a, b)))
            elif op == "all_gather":
                args = OpArgs(
                    inp=x.sub(a, b), blocks=tuple(o.sub(a, b) for o in blocks(out, tp_size))
                )
                yield from ring["all_gather"](tpc, args)
            elif op == "reduce_scatter":
                args = OpArgs(
                    blocks=tuple(i.sub(a, b) for i in blocks(x, tp_size)), out=out.sub(a, b)
                )
                yield from ring["reduce_scatter"](tpc, args)
            elif op == "all_reduce_all_gather":  # x is a working copy, reduced in place
                piece = x.sub(a, b)
                yield from ring["all_reduce"](tpc, OpArgs(buf=piece))
                args = OpArgs(inp=piece, blocks=tuple(o.sub(a, b) for o in blocks(out, dp_size)))
                tail.append(c.clock.process(ring["all_gather"](c.sub(dp_ranks, ("dp", k)), args)))
            else:  # reduce_scatter_all_reduce
                piece = out.sub(a, b)
                args = OpArgs(blocks=tuple(i.sub(a, b) for i in blocks(x, dp_size)), out=piece)
                yield from ring["reduce_scatter"](c.sub(dp_ranks, ("dp", k)), args)
                tail.append(c.clock.process(ring["all_reduce"](tpc, OpArgs(buf=piece))))
        if tail:
            yield c.clock.all_of(tail)

    return program


def _ring_neighbours(group: Sequence[int], rank: int) -> set[int]:
    i = list(group).index(rank)
    return {group[(i + 1) % len(group)], group[(i - 1) % len(group)]} - {rank}


def launch_fused(
    ctx: Any, op: str, layout: MixedLayout, payloads: list[tuple[Any, Any]], steps: int
) -> CollectiveLauncher:
    """The WORLD launch of a fused op: one program per rank (run by the last rank to arrive)."""
    name, config = ccl_settings(ctx).resolve("ring")
    tp_of = [layout.tp_group_of(w) for w in range(layout.world_size)]
    dp_of = [layout.dp_group_of(w) for w in range(layout.world_size)]

    def peers(_op: str, _size: int, rank: int) -> set[int]:
        found = _ring_neighbours(tp_of[rank], rank)
        if op in FUSED_OPS:
            found |= _ring_neighbours(dp_of[rank], rank)
        return found

    algorithm = Algorithm(
        name=FUSED_CONFIG,
        programs={},
        description=f"pipelined TP/DP phases over the {name!r} ring configuration",
        peers=peers,
    )
    launcher = CollectiveLauncher(ctx, op, FUSED_CONFIG, config, algorithm)
    ins = [single_lane(x, op) for x, _ in payloads]
    outs = [single_lane(o, op) for _, o in payloads]
    launcher.nbytes = max(ins[0].region().nbytes, outs[0].region().nbytes)
    programs = [
        _fused_program(op, ins[w].region(), outs[w].region(), list(tp_of[w]), list(dp_of[w]), steps)
        for w in range(layout.world_size)
    ]
    launcher.lane(programs, [x.pe for x in ins], [x.memory_node for x in ins])
    for _, o in payloads:
        launcher.refresh_replicas(o)
    return launcher
