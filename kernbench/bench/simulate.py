"""Run a distributed function on a simulated machine and summarise where time went."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernbench.bench.trace import TraceCollector
from kernbench.distributed.world import World
from kernbench.errors import SimulationLimitError
from kernbench.machine import TraceRow
from kernbench.machine.observe import LinkBytes
from kernbench.runtime import RuntimeContext, use_context
from kernbench.topology import Topology, load_topology, names
from kernbench.units import PS_PER_S

__all__ = ["SimResult", "collective_time_ps", "simulate", "run_report", "trace_digest"]


@dataclass
class SimResult:
    """What a run gives back: per-rank return values, simulated time, trace, report."""

    returns: list[Any]
    elapsed_ps: int
    per_rank_ps: list[int]
    trace: list[TraceRow]
    report: dict[str, Any]
    context: RuntimeContext = field(repr=False)
    # Link, engine and queue activity, when the run asked for a trace (``detail``).
    detail: TraceCollector | None = field(default=None, repr=False)
    # Bytes every link of the machine carried (by link index).
    link_bytes: list[int] = field(default_factory=list, repr=False)


def simulate(
    fn: Callable[..., Any],
    *,
    topology: Topology | str | Path,
    world_size: int | None = None,
    timing_only: bool = False,
    overrides: Iterable[str] | None = None,
    args: tuple = (),
    rank_args: bool = False,
    seed: int = 0,
    detail: bool = False,
    max_sim_time_ps: int | None = None,
    max_wall_s: float | None = None,
) -> SimResult:
    """Run ``fn(*args)`` once per rank (``fn(rank, world_size, *args)`` with ``rank_args``).

    ``seed`` seeds every rank's default random generator (``torch.rand`` and friends),
    so the same seed gives the same values and the same trace.
    """
    from kernbench.ccl.settings import CclSettings, split_overrides, use_settings
    from kernbench.torch import random as torch_random

    overrides = tuple(overrides or ())
    topology_overrides, ccl_overrides = split_overrides(overrides)
    if not isinstance(topology, Topology):
        topology = load_topology(topology, topology_overrides)
    ctx = RuntimeContext(topology, timing_only=timing_only)
    use_settings(ctx, CclSettings.from_overrides(ccl_overrides))
    link_bytes = LinkBytes(len(ctx.machine.graph.edges))
    ctx.machine.observers.add(link_bytes)
    collector = None
    if detail:
        collector = TraceCollector()
        ctx.machine.observers.add(collector)
    world = World(ctx, ctx.num_devices if world_size is None else world_size)
    size = world.world_size
    world.scheduler.max_sim_ps = max_sim_time_ps
    world.scheduler.max_wall_s = max_wall_s
    finished = [0] * size
    torch_random.manual_seed(seed)  # outside ranks: the seed every rank's generator starts from

    def body(rank: int) -> Any:
        value = fn(rank, size, *args) if rank_args else fn(*args)
        finished[rank] = ctx.now
        return value

    with use_context(ctx):
        try:
            returns = world.run(body)
        except SimulationLimitError as exc:
            exc.report = run_report(ctx, world, finished, link_bytes)
            exc.report["stopped"] = str(exc).splitlines()[0]
            raise
    report = run_report(ctx, world, finished, link_bytes)
    report["overrides"] = list(overrides)
    report["seed"] = seed
    rows = next((r for r in returns if _is_rows(r)), None)
    if rows is not None:
        report["results"] = rows
    return SimResult(
        returns, ctx.now, finished, ctx.trace, report, ctx, collector, link_bytes.carried
    )


def trace_digest(rows: Iterable[TraceRow]) -> str:
    """A content hash of a run's trace: same inputs and seed, same digest."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(
            f"{row.kind}|{row.src}|{row.dst}|{row.start_ps}|{row.end_ps}|{row.nbytes}|"
            f"{row.tag}\n".encode()
        )
    return digest.hexdigest()[:32]


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def run_report(
    ctx: RuntimeContext, world: World | None, per_rank: list[int], link_bytes: LinkBytes
) -> dict[str, Any]:
    """Simulated time, per-rank time, collectives and their time, bytes per link class, and
    the busiest component: overall, outside the host links, and of the host links."""
    edges = ctx.machine.graph.edges
    by_class: dict[str, int] = defaultdict(int)
    busiest = None
    busiest_of: dict[bool, tuple] = {}  # host link or not -> (edge, busy, carried)
    for edge, carried in zip(edges, link_bytes.carried, strict=True):
        if not carried:
            continue
        by_class[edge.link_class] += carried
        busy = carried * PS_PER_S / edge.bandwidth
        if busiest is None or busy > busiest[1]:
            busiest = (edge, busy, carried)
        host = names.HOST in (edge.src, edge.dst)
        if host not in busiest_of or busy > busiest_of[host][1]:
            busiest_of[host] = (edge, busy, carried)
    elapsed = ctx.now
    collectives = world.collectives if world else []
    report: dict[str, Any] = {
        "trace_digest": trace_digest(ctx.trace),
        "topology": ctx.topology.name,
        "world_size": world.world_size if world else 1,
        "timing_only": ctx.timing_only,
        "simulated_time_ps": elapsed,
        "per_rank_time_ps": list(per_rank),
        "bytes_by_link_class": dict(sorted(by_class.items())),
        "requests": len(ctx.trace),
        "collectives": [
            {
                "op": c.op,
                "config": c.config_name,
                "algorithm": c.config.module,
                "bytes": c.nbytes,
                "launch_ps": c.launch_ps,
                "start_ps": c.algo_start_ps,
                "end_ps": c.end_ps,
            }
            for c in collectives
        ],
        "collective_time_ps": collective_time_ps(collectives),
        "ipcq_messages": ctx.machine.ipcq_messages,
    }
    for key, found in (
        ("busiest_component", busiest),
        ("busiest_fabric_component", busiest_of.get(False)),
        ("busiest_host_link", busiest_of.get(True)),
    ):
        if found is not None:
            edge, busy, carried = found
            report[key] = {
                "name": edge.name,
                "class": edge.link_class,
                "bytes": carried,
                "busy_ps": round(busy),
                "utilisation": round(busy / elapsed, 4) if elapsed else 0.0,
            }
    return report


def collective_time_ps(collectives: Iterable[Any]) -> int:
    """Simulated time with at least one collective in flight (from its launch to its end).

    Launch is when the last rank of the group called it; the time covers the
    neighbour-table install, the launch overhead and the algorithm, and counts
    overlapping collectives once.  Host work between calls is outside it.
    """
    spans = sorted((c.launch_ps, c.end_ps) for c in collectives if c.end_ps is not None)
    total, reach = 0, None
    for start, end in spans:
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total
