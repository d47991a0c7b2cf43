"""Cross-validation of simulation backends: the same collectives on ``detailed`` and ``fast``.

For one topology and one catalogue configuration, one run per backend calls
every op the configuration serves on groups of each requested size (ranks
0 .. p-1 of the world, the others idle), timing-only, and keeps each
collective's simulated time.  The detailed run also records, per collective,
whether any link carried two flows at once (its ``LinkBusy`` spans overlap):
where none did, the backends must agree within 0.1%; elsewhere within 5%
(ADR 0015).  ``benchmarks/crossval.py`` prints the worst case per algorithm;
``tests/test_fast_crossval.py`` asserts the bounds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kernbench.ccl.algorithms import get_algorithm
from kernbench.ccl.catalogue import load_catalogue
from kernbench.ccl.settings import CclSettings, use_settings
from kernbench.distributed.world import World
from kernbench.machine.observe import LinkBusy
from kernbench.runtime import RuntimeContext, use_context
from kernbench.topology import load_topology

__all__ = ["Point", "compare", "served_ops", "EXACT", "SHARED"]

EXACT = 0.001  # no link carried two flows at once
SHARED = 0.05  # some link was shared by concurrent flows


@dataclass(frozen=True)
class Point:
    """One collective on both backends."""

    topology: str
    config: str
    op: str
    p: int
    detailed_ps: int
    fast_ps: int
    shared: bool  # some link carried two flows at once (detailed run)
    evaluated: bool  # the fast backend priced it step-wide (else ran it message by message)

    @property
    def error(self) -> float:
        return abs(self.fast_ps - self.detailed_ps) / max(self.detailed_ps, 1)

    @property
    def bound(self) -> float:
        return SHARED if self.shared else EXACT


def served_ops(config: str, p: int) -> tuple[str, ...]:
    """The ops catalogue configuration ``config`` runs on ``p`` ranks."""
    entry = load_catalogue().configs[config]
    if entry.world_size is not None and entry.world_size != p:
        return ()
    algorithm = get_algorithm(entry.module)
    return tuple(op for op in algorithm.ops if algorithm.serves(op, p))


class _Spans:
    """Every link's busy spans (detailed runs): which windows had a link shared."""

    def __init__(self) -> None:
        self.by_edge: dict[int, list[tuple[int, int]]] = defaultdict(list)

    def on_link_busy(self, span: LinkBusy) -> None:
        self.by_edge[span.edge].append((span.start_ps, span.end_ps))

    def shared(self, start: int, end: int) -> bool:
        for spans in self.by_edge.values():
            inside = sorted((a, b) for a, b in spans if a < end and b > start)
            for (_, b0), (a1, _) in zip(inside, inside[1:], strict=False):
                if a1 < b0:
                    return True
        return False


def _program(config: str, sizes: tuple[int, ...], count: int):
    def rank_body(rank: int, world: int) -> None:
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        dist.init_process_group()
        for p in sizes:
            group = dist.new_group(list(range(p)))
            if rank >= p:
                continue
            for op in served_ops(config, p):
                _call(torch, dist, op, group, rank, p, count, config)

    return rank_body


def _call(torch: Any, dist: Any, op: str, group: Any, rank: int, p: int, n: int, name: str):
    kw = {"group": group, "algorithm": name}
    if op == "all_reduce":
        dist.all_reduce(torch.empty(n), **kw)
    elif op == "broadcast":
        dist.broadcast(torch.empty(n), src=0, **kw)
    elif op == "reduce":
        dist.reduce(torch.empty(n), dst=0, **kw)
    elif op == "all_gather":
        dist.all_gather_into_tensor(torch.empty(n * p), torch.empty(n), **kw)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(torch.empty(n), torch.empty(n * p), **kw)
    elif op == "gather":
        blocks = [torch.empty(n) for _ in range(p)] if rank == 0 else None
        dist.gather(torch.empty(n), blocks, dst=0, **kw)
    elif op == "scatter":
        blocks = [torch.empty(n) for _ in range(p)] if rank == 0 else None
        dist.scatter(torch.empty(n), blocks, src=0, **kw)
    elif op == "all_to_all":
        dist.all_to_all_single(torch.empty(n * p), torch.empty(n * p), **kw)
    elif op == "barrier":
        dist.barrier(**kw)


def _run(
    topology: str, overrides: list[str], backend: str, config: str, sizes: tuple[int, ...], n: int
) -> tuple[list[Any], _Spans]:
    # The detailed backend has no drift setting (the schema refuses one written for it).
    drop = ["simulation.drift=null"] if backend == "detailed" else []
    topo = load_topology(topology, [*overrides, f"simulation.backend={backend}", *drop])
    ctx = RuntimeContext(topo, timing_only=True)
    use_settings(ctx, CclSettings.from_overrides([]))
    spans = _Spans()
    if backend == "detailed":
        ctx.machine.observers.add(spans)
    world = World(ctx, max(sizes))
    body = _program(config, sizes, n)
    with use_context(ctx):
        world.run(lambda rank: body(rank, world.world_size))
    return list(world.collectives), spans


def compare(
    topology: str,
    config: str,
    sizes: tuple[int, ...],
    *,
    overrides: list[str] | None = None,
    nbytes: int = 256 * 1024,
) -> list[Point]:
    """Every op ``config`` serves at every size in ``sizes``, on both backends."""
    overrides = list(overrides or [])
    n = max(1, nbytes // 4)
    detailed, spans = _run(topology, overrides, "detailed", config, sizes, n)
    fast, _ = _run(topology, overrides, "fast", config, sizes, n)
    points = []
    for a, b in zip(detailed, fast, strict=True):
        points.append(
            Point(
                topology,
                config,
                a.op,
                a.ranks,
                a.end_ps - a.algo_start_ps,
                b.end_ps - b.algo_start_ps,
                spans.shared(a.algo_start_ps, a.end_ps),
                b.evaluated,
            )
        )
    return points
