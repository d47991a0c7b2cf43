"""Run a distributed function on a simulated machine and summarise where time went."""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernbench import limit_blas_threads
from kernbench.bench.rows import check_rows, is_rows
from kernbench.bench.trace import TraceCollector
from kernbench.ccl.mapping import describe_order
from kernbench.distributed.world import World, run_settings
from kernbench.errors import SimulationLimitError
from kernbench.machine import TraceRow
from kernbench.machine.observe import LinkBytes
from kernbench.runtime import RuntimeContext, use_context
from kernbench.topology import Topology, load_topology, names, override_texts
from kernbench.torch import multiprocessing as mp
from kernbench.units import PS_PER_S

__all__ = ["Run", "SimResult", "collective_time_ps", "simulate", "run_report", "trace_digest"]


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


class Run:
    """One run's machine, built before any script code runs, and what watches it.

    ``kernbench run`` makes the machine first and imports the script inside it
    (:meth:`active`), so that module-level code (tensors made at import, kernels
    launched at module level, ``torch.cuda.device_count()``) runs on the
    requested topology and on the run's clock; then it runs the ranks
    (:meth:`ranks`) or the script's ``__main__`` block (:meth:`script_main`).
    """

    def __init__(
        self,
        topology: Topology | str | Path,
        *,
        world_size: int | None = None,
        timing_only: bool = False,
        overrides: Iterable[str] | None = None,
        seed: int = 0,
        detail: bool = False,
        max_sim_time_ps: int | None = None,
        max_wall_s: float | None = None,
        check_rows: bool = False,
    ) -> None:
        """``check_rows``: the result rows go on to a report or CSV, so each rank's are
        checked as it returns them (see :func:`kernbench.bench.rows.check_rows`)."""
        from kernbench.ccl.settings import CclSettings, split_overrides, use_settings
        from kernbench.ccl.tuner import check_run_table
        from kernbench.torch import random as torch_random

        limit_blas_threads()
        self.overrides = override_texts(overrides)
        self.seed = seed
        self.check_rows = check_rows
        topology_overrides, ccl_overrides = split_overrides(self.overrides)
        if not isinstance(topology, Topology):
            topology = load_topology(topology, topology_overrides)
        ctx = self.ctx = RuntimeContext(topology, timing_only=timing_only)
        use_settings(ctx, CclSettings.from_overrides(ccl_overrides))
        check_run_table(ctx)  # a missing or malformed tune table is an error before anything runs
        self.link_bytes = LinkBytes(len(ctx.machine.graph.edges))
        ctx.machine.observers.add(self.link_bytes)
        self.collector = None
        if detail:
            self.collector = TraceCollector()
            ctx.machine.observers.add(self.collector)
        self.world_size = world_size
        settings = run_settings(ctx)
        settings.max_sim_ps, settings.max_wall_s = max_sim_time_ps, max_wall_s
        # Outside ranks: the seed every rank's generator starts from (and module-level code's).
        torch_random.manual_seed(seed)

    def active(self) -> AbstractContextManager[RuntimeContext]:
        """The ``with`` block in which the run's machine is the current context."""
        return use_context(self.ctx)

    def ranks(self, fn: Callable[..., Any], args: tuple = (), rank_args: bool = False) -> SimResult:
        """Run ``fn(*args)`` once per rank (``fn(rank, world_size, *args)`` with ``rank_args``)."""
        ctx = self.ctx
        world = World(ctx, ctx.num_devices if self.world_size is None else self.world_size)
        size = world.world_size

        def body(rank: int) -> Any:
            returned = fn(rank, size, *args) if rank_args else fn(*args)
            if self.check_rows and is_rows(returned):  # as the rank hands them over
                check_rows(returned, f"rank {rank}'s return")
            return returned

        with use_context(ctx):
            returns = self._stopped_with_report(lambda: world.run(body))
        return self._result(returns)

    def script_main(self, main: Callable[[], Any]) -> SimResult:
        """Run ``main()`` (a script's ``__main__`` block) on this machine, outside any rank.

        The ranks are whatever worlds it starts (``torch.multiprocessing``); the
        report covers them all, and ``returns`` holds the last world's results.
        With a ``world_size``, ``$WORLD_SIZE`` holds it while ``main`` runs (as
        ``torchrun`` sets it) and a world of another size is an error.
        """
        settings = run_settings(self.ctx)
        settings.world_size = self.world_size
        saved = os.environ.get("WORLD_SIZE")
        if self.world_size is not None:
            os.environ["WORLD_SIZE"] = str(self.world_size)
        try:
            with use_context(self.ctx):
                self._stopped_with_report(main)
                self._stopped_with_report(mp.join_unjoined)
        finally:
            mp.forget_unjoined()
            settings.world_size = None
            if saved is None:
                os.environ.pop("WORLD_SIZE", None)
            else:
                os.environ["WORLD_SIZE"] = saved
        return self._result(settings.worlds[-1].returns if settings.worlds else [])

    def _stopped_with_report(self, body: Callable[[], Any]) -> Any:
        try:
            return body()
        except SimulationLimitError as exc:
            exc.report = run_report(self.ctx, self._worlds(), self.link_bytes)
            exc.report["stopped"] = str(exc).splitlines()[0]
            raise

    def _worlds(self) -> list[World]:
        return list(run_settings(self.ctx).worlds)

    def _result(self, returns: list[Any]) -> SimResult:
        ctx = self.ctx
        report = run_report(ctx, self._worlds(), self.link_bytes)
        report["overrides"] = list(self.overrides)
        report["seed"] = self.seed
        rows = next((r for r in returns if is_rows(r)), None)
        if rows is not None:
            if self.check_rows:  # the rows of ranks torch.multiprocessing started
                check_rows(rows, "the ranks' returns")
            report["results"] = rows
        return SimResult(
            returns,
            ctx.now,
            report["per_rank_time_ps"],
            ctx.trace,
            report,
            ctx,
            self.collector,
            self.link_bytes.carried,
        )


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
    run = Run(
        topology,
        world_size=world_size,
        timing_only=timing_only,
        overrides=overrides,
        seed=seed,
        detail=detail,
        max_sim_time_ps=max_sim_time_ps,
        max_wall_s=max_wall_s,
    )
    return run.ranks(fn, args, rank_args)


def trace_digest(rows: Iterable[TraceRow]) -> str:
    """A content hash of a run's trace: same inputs and seed, same digest.

    The rows are hashed in sorted order: rows that end at the same picosecond are
    recorded in an order that watching the links (``--trace``) may change, not what
    they say, and the digest must not depend on whether a trace was asked for.
    """
    lines = sorted(
        f"{row.kind}|{row.src}|{row.dst}|{row.start_ps}|{row.end_ps}|{row.nbytes}|{row.tag}\n"
        for row in rows
    )
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode())
    return digest.hexdigest()[:32]


def _per_rank_ps(worlds: Sequence[World]) -> list[int]:
    """When each rank returned: rank r's latest return over the worlds it was in."""
    per_rank = [0] * max((w.world_size for w in worlds), default=0)
    for world in worlds:
        for rank, ps in enumerate(world.finished_ps):
            per_rank[rank] = max(per_rank[rank], ps)
    return per_rank


def run_report(
    ctx: RuntimeContext, worlds: Sequence[World] | World | None, link_bytes: LinkBytes
) -> dict[str, Any]:
    """Simulated time, per-rank time, collectives and their time, bytes per link class, and
    the busiest component: overall, outside the host links, and of the host links.

    ``worlds``: the worlds of ranks the run started (one for ``simulate``; any
    number for a script that starts its own); the world size is the largest.
    """
    if isinstance(worlds, World):
        worlds = [worlds]
    worlds = list(worlds or ())
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
    collectives = [c for world in worlds for c in world.collectives]
    report: dict[str, Any] = {
        "trace_digest": trace_digest(ctx.trace),
        "topology": ctx.topology.name,
        "world_size": max((w.world_size for w in worlds), default=1),
        "timing_only": ctx.timing_only,
        "simulated_time_ps": elapsed,
        "per_rank_time_ps": _per_rank_ps(worlds) if worlds else [elapsed],
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
                # The order the algorithm met the user's ranks in, when it is not theirs.
                **({"rank_order": describe_order(c.order)} if c.order else {}),
                # How a backend that evaluates programs (fast) timed it.
                **({"priced": _priced(c)} if ctx.machine.evaluates_programs else {}),
                **({"refused": c.refused} if ctx.machine.evaluates_programs and c.refused else {}),
                **({"bound": round(c.bound, 6)} if c.bound is not None else {}),
                **_pieces(c),
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


def _pieces(collective: Any) -> dict[str, Any]:
    """Pieces per chunk of an algorithm that pipelines and how the count came about;
    for a count the tuner's caps kept from the cost model, also the setting for it."""
    choice = collective.pieces
    if choice is None or not choice.how:
        return {}
    found = {"pieces": choice.count, "pieces_from": choice.how}
    if choice.capped:
        found.update(pieces_capped=True, pieces_setting=choice.setting)
    return found


def _priced(collective: Any) -> str:
    """``step-wide``, ``step-wide, overlapped`` (priced alone, and another collective
    started before it ended), ``step-wide, drifting`` (approximate), ``step-wide,
    bounded`` (ranks drift apart or channels keep a backlog, and that can add at most
    a bound to a rank's time) or ``message by message``."""
    if not collective.evaluated:
        return "message by message"
    if collective.overlapped:
        return "step-wide, overlapped"
    if collective.drift:
        return "step-wide, drifting"
    return "step-wide, bounded" if collective.bound is not None else "step-wide"


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
