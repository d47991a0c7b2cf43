"""The fast backend's machine: the detailed fabric, with collectives evaluated step-wide.

:class:`FastMachine` is a :class:`~kernbench.fabric.Fabric` (requests, kernels,
memory, point-to-point all keep their detailed, exact semantics) that also
prices a collective's recorded programs in one NumPy pass per operation
(:mod:`kernbench.fast.evaluate`).  Programs that do not align (ranks running
different operation sequences), whose receives do not pair up the same way on
every rank, or whose sends need IPCQ credits from receives the rounds have not
reached are refused, and the launcher runs them message by message on the
fabric, exactly (ADR 0015).  Programs whose ranks drift apart, or whose
channels keep a backlog (pipelined programs), are priced step-wide when bounds
on those rounds' link sharing stay within 1% of the price (``meta["bound"]``
says how far, when not 0), and refused otherwise; with
``simulation.drift: approximate`` drifting programs are priced step-wide
anyway, and the collective's ``meta["drift"]`` says how far apart (in message
times) flows sharing a link started.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import simpy

from kernbench.fabric import Fabric
from kernbench.fast.columns import build
from kernbench.fast.evaluate import evaluate
from kernbench.fast.tables import MESSAGES, TIME_LIMIT_PS, Column, Tables, TimesTooLong
from kernbench.machine.observe import FlowStarted
from kernbench.machine.programs import Op, RecordedCollective
from kernbench.topology import names
from kernbench.topology.schema import Topology

# Why a collective runs message by message (``collective.meta["refused"]``), besides
# the evaluator's reasons (kernbench.fast.evaluate.STRANDS, ...).
DEPTHS = "lanes with different IPCQ depths"
UNALIGNED = (
    "programs that differ from rank to rank (a send and its receive, a tree's root and leaves)"
)
TOO_LONG = f"times that could reach {TIME_LIMIT_PS} ps (2**62), past 64-bit arithmetic"
# One rank's memory slowed by a fault makes its streams and the messages landing in
# that memory share the port in a way the step-wide rounds do not follow: ring
# all-reduces over ring8 came out 25-38% fast against the fabric.  Only collectives
# whose messages or streams cross such a port are refused.
SLOWED_PORT = "a fault slows memory port {port}, which the step-wide model does not follow"

__all__ = ["FastMachine"]


class FastMachine(Fabric):
    """A fabric whose collectives are evaluated, not run message by message."""

    evaluates_programs = True

    def __init__(
        self, topology: Topology, *, store: Any = None, env: simpy.Environment | None = None
    ) -> None:
        super().__init__(topology, store=store, env=env)
        self._tables: Tables | None = None
        self.evaluated = 0  # collectives priced step-wide (the others ran on the fabric)
        # Prices of recently evaluated collectives, by the identity of their recorded
        # lanes: a collective repeated on the same tensors reuses its recording
        # (kernbench.ccl.record.RecordCache), and its price depends on nothing else.
        self._priced: OrderedDict[tuple[int, ...], tuple[tuple, list | None, dict]] = OrderedDict()
        slowed = {
            f.link
            for f in topology.faults.links
            if names.is_port(f.link) and f.slowdown != 1 and not f.down
        }
        # link index -> name of every memory port a fault slows
        self._slowed_ports = (
            {edge.index: edge.name for edge in self.graph.edges if edge.name in slowed}
            if slowed
            else {}
        )

    def tables(self) -> Tables:
        if self._tables is None:
            links = self.links
            self._tables = Tables(
                route=self.graph.route,
                route_cost=links.route_cost,
                capacity=np.asarray(links.capacity, dtype=np.float64),
                packet_bytes=links.packet_bytes,
                endpoint_overhead_ps=self.ipcq.endpoint_overhead_ps,
                vector_flops_per_s=lambda pe: self.pe_spec(pe).flops_per_s["vector"],
            )
        return self._tables

    def evaluate_programs(self, collective: RecordedCollective) -> list[list[int]] | None:
        lanes = collective.lanes
        if not lanes:
            return []
        depths = {lane.depth for lane in lanes}
        if len(depths) != 1:
            collective.meta["refused"] = DEPTHS
            return None
        key = tuple(map(id, lanes))
        known = self._priced.get(key)
        if known is None or not all(a is b for a, b in zip(known[0], lanes, strict=True)):
            notes: dict[str, Any] = {}
            out = self._evaluate(lanes, depths.pop(), notes)
            # lanes kept: ids stay theirs
            known = (tuple(lanes), out, notes)
            self._priced[key] = known
            while len(self._priced) > 16:
                self._priced.popitem(last=False)
        _, out, notes = known
        if out is None:
            collective.meta["refused"] = notes.get("refused", "")
            return None
        self.evaluated += 1
        if self.observers.flow:
            # The bytes the priced messages and streams put on each link, for the
            # report's bytes per link class and busiest component (no flow runs).
            for link, nbytes in notes.get("carried", ()):
                record = FlowStarted((link,), nbytes)
                for hook in self.observers.flow:
                    hook(record)
        if notes.get("skew"):
            collective.meta["drift"] = notes["skew"]
        if "bound" in notes:
            collective.meta["bound"] = notes["bound"]
        return [list(times) for times in out]

    def _evaluate(
        self, lanes: list, depth: int | None, notes: dict[str, Any]
    ) -> list[list[int]] | None:
        """Each lane's times; ``notes`` gets the skew of a program priced although its
        ranks drift apart (``"skew"``, with ``simulation.drift: approximate``), the
        bound of one priced within :data:`~kernbench.fast.evaluate.DRIFT_BOUND`
        (``"bound"``), or why it is refused (``"refused"``)."""
        depth = depth or self.ipcq.default_depth
        try:
            ends = self._ends(lanes, depth, notes)
        except TimesTooLong:  # the fabric's clock is a Python integer: exact at any length
            notes["refused"] = TOO_LONG
            return None
        if ends is None:
            notes.setdefault("refused", "")
            return None
        out, base = [], 0
        for lane in lanes:
            out.append(ends[base : base + len(lane.pes)].tolist())
            base += len(lane.pes)
        return out

    def _ends(self, lanes: list, depth: int, notes: dict[str, Any]) -> np.ndarray | None:
        """Every row's end time, or ``None`` with ``notes["refused"]`` set."""
        tables = self.tables()
        built = build(lanes, tables)
        if built is None:
            notes["refused"] = UNALIGNED
            return None
        shape, pes = built
        if self._slowed_ports:
            port = self._slowed_port_crossed(shape, tables)
            if port is not None:
                notes["refused"] = SLOWED_PORT.format(port=port)
                return None
        if self.observers.flow:  # only a run that counts bytes per link needs them
            notes["carried"] = _carried(shape, tables)
        approximate = self.topology.simulation.drift == "approximate"
        # Rows a period apart (a group apart, when the lane shifts within groups) may
        # keep the same clocks.
        period = (lanes[0].group or lanes[0].period) if len(lanes) == 1 else None
        return evaluate(
            shape, len(pes), tables, pes, depth, approximate=approximate, period=period, notes=notes
        )

    def _slowed_port_crossed(self, shape: list[list[Column]], tables: Tables) -> str | None:
        """The first slowed memory port (by link index) a message or stream of the
        program crosses, else ``None``; a stream priced alone (no per-flow routes) may
        cross any, so it answers the first."""
        routes = []
        for strand in shape:
            for col in strand:
                if col.route is not None:
                    routes.append(col.route)
                if col.kind == Op.STREAM:
                    if not col.flows and col.stream_ps is not None:
                        return self._slowed_ports[min(self._slowed_ports)]
                    routes.extend(route for route, _ in col.flows)
        if not routes:
            return None
        links = tables.edges()[np.unique(np.concatenate(routes))]
        crossed = np.intersect1d(links[links >= 0], np.fromiter(self._slowed_ports, np.intp))
        return self._slowed_ports[int(crossed[0])] if crossed.size else None


def _carried(shape: list[list[Column]], tables: Tables) -> list[tuple[int, int]]:
    """(link, bytes) of every link the program's messages and stream flows cross, as
    the fabric's flows would count them; a stream priced alone (no flows) counts none.
    Columns share their route and size arrays per pattern (kernbench.fast.columns), so
    each distinct pair is counted once, times how often it recurs."""
    pairs: dict[tuple[int, int], list] = {}
    for strand in shape:
        for col in strand:
            flows = col.flows if col.kind == Op.STREAM else ()
            if col.kind in MESSAGES:
                flows = ((col.route, col.nbytes),)
            for route, nbytes in flows:
                found = pairs.setdefault((id(route), id(nbytes)), [route, nbytes, 0])
                found[2] += 1
    if not pairs:
        return []
    edges = tables.edges()
    totals = np.zeros(len(tables.capacity), dtype=np.int64)
    for route, nbytes, times in pairs.values():
        crossed = edges[route]
        size = np.broadcast_to(np.asarray(nbytes, dtype=np.int64)[:, None], crossed.shape)
        kept = crossed >= 0
        np.add.at(totals, crossed[kept], size[kept] * times)
    return [(int(link), int(totals[link])) for link in np.flatnonzero(totals)]
