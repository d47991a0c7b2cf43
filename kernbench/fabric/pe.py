"""PEs: matrix and vector engines that turn FLOPs into time, and the streams a PE works through.

Each engine serves one piece of work at a time, first come first served, so
work queued on one engine serialises while the two engines of a PE, and all
PEs, run in parallel on the simulated clock.  Because a piece of work's
duration is known when it is queued, an engine is just the time it becomes
free: queuing is a reservation, not a SimPy resource (the same schedule as a
capacity-one FIFO resource, without its request and release events).

A PE working through memory (a reduction, a copy: ADR 0008) streams bytes
between its memories and itself while its vector engine computes; the
streams and the engine overlap, and the access latency is hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING

import simpy

from kernbench.errors import KernBenchError, RouteError
from kernbench.fabric.flows import Timer
from kernbench.machine import Compute
from kernbench.machine.api import PeSpec, Stream
from kernbench.machine.observe import EngineBusy, Observers
from kernbench.topology.graph import MachineGraph
from kernbench.topology.schema import PeCoreAttrs
from kernbench.units import PS_PER_S

if TYPE_CHECKING:
    from kernbench.fabric.flows import FlowNetwork

__all__ = ["PeUnit", "PeEngines"]

ENGINES = ("matrix", "vector")


class PeUnit:
    """State of one PE: when each of its engines is free."""

    __slots__ = ("name", "free_at", "flops_per_s", "launch_overhead_ps")

    def __init__(self, name: str, core: PeCoreAttrs, slowdown: float = 1.0) -> None:
        self.name = name
        # When each engine has finished the work queued on it so far.
        self.free_at = dict.fromkeys(ENGINES, 0)
        # A straggler (faults.pes) runs its engines ``slowdown`` times slower.
        self.flops_per_s = {
            "matrix": max(1, int(core.matrix_flops_per_cycle * core.clock / slowdown)),
            "vector": max(1, int(core.vector_flops_per_cycle * core.clock / slowdown)),
        }
        self.launch_overhead_ps = core.launch_overhead

    def compute_ps(self, engine: str, flops: int) -> int:
        """Time for ``flops`` on ``engine`` when it is free, rounded up to a picosecond."""
        return -(-flops * PS_PER_S // self.flops_per_s[engine])

    def reserve(self, engine: str, flops: int, now: int) -> tuple[int, int]:
        """Queue ``flops`` on ``engine`` at ``now``: the (start, end) it gets."""
        start = max(now, self.free_at[engine])
        end = start + self.compute_ps(engine, flops)
        self.free_at[engine] = end
        return start, end


def _succeed_at(env: simpy.Environment, event: simpy.Event, at: int) -> None:
    """Succeed ``event`` now, or at ``at`` if that is later."""
    if at > env.now:
        Timer(env, at - env.now, lambda _ev: event.succeed())
    else:
        event.succeed()


class PeEngines:
    """Every PE's engines (made on first use); serves :class:`Compute` messages."""

    def __init__(
        self,
        env: simpy.Environment,
        graph: MachineGraph,
        links: FlowNetwork,
        core: PeCoreAttrs,
        observers: Observers,
    ) -> None:
        self.env = env
        self.graph = graph
        self.links = links
        self.core = core
        self.observers = observers
        self._units: dict[str, PeUnit] = {}

    def unit(self, name: str) -> PeUnit:
        unit = self._units.get(name)
        if unit is None:
            if self.graph.check_name(name).kind != "pe":
                raise RouteError(f"{name!r} is not a PE; PE names look like 'sip0.cube0.pe0'")
            unit = self._units[name] = PeUnit(name, self.core, self.graph.pe_slowdown(name))
        return unit

    def spec(self, name: str) -> PeSpec:
        unit = self.unit(name)
        return PeSpec(name, dict(unit.flops_per_s), unit.launch_overhead_ps)

    def serve_compute(self, msg: Compute) -> Generator:
        unit = self.unit(msg.dst)
        if msg.engine not in unit.free_at:
            raise KernBenchError(f"unknown engine {msg.engine!r}; valid: {', '.join(ENGINES)}")
        yield self.compute(unit, msg.engine, msg.flops)

    def compute_end(self, unit: PeUnit, engine: str, flops: int) -> int:
        """Queue ``flops`` on one of ``unit``'s engines; the time it will be done (no event)."""
        start, end = unit.reserve(engine, flops, self.env.now)
        if self.observers.engine_busy:
            self._busy(unit, engine, start, end, flops)
        return end

    def compute(self, unit: PeUnit, engine: str, flops: int) -> simpy.Event:
        """An event for ``flops`` on one of ``unit``'s engines, queued behind its earlier work."""
        now = self.env.now
        start, end = unit.reserve(engine, flops, now)
        if self.observers.engine_busy:
            self._busy(unit, engine, start, end, flops)
        return self.env.timeout(end - now)

    def _busy(self, unit: PeUnit, engine: str, start: int, end: int, flops: int) -> None:
        record = EngineBusy(unit.name, engine, start, end, flops)
        for hook in self.observers.engine_busy:
            hook(record)

    def stream(
        self,
        pe: str,
        loads: Sequence[Stream],
        stores: Sequence[Stream],
        flops: int,
        on_done: Callable[[], None],
    ) -> None:
        """Memory traffic and vector work on ``pe``, overlapped; ``on_done`` when all are done.

        Identical streams (the same route and size, two reads of one memory)
        move as one weighted flow: they would get equal shares and end together.
        The engine's end is known when the work is queued: once the last
        stream ends, what is left of it is waited for (usually nothing:
        reductions are memory-bound).
        """
        route = self.graph.route
        streams: dict[tuple[tuple[int, ...], int], int] = {}
        for node, n in loads:
            if n:
                key = (route(node, pe), n)
                streams[key] = streams.get(key, 0) + 1
        for node, n in stores:
            if n:
                key = (route(pe, node), n)
                streams[key] = streams.get(key, 0) + 1
        engine_end = self.compute_end(self.unit(pe), "vector", flops) if flops else 0
        env = self.env
        if not streams:
            if engine_end > env.now:
                Timer(env, engine_end - env.now, lambda _ev: on_done())
            else:
                on_done()
            return
        left = [len(streams)]

        def one_done() -> None:
            left[0] -= 1
            if not left[0]:
                if engine_end > env.now:
                    Timer(env, engine_end - env.now, lambda _ev: on_done())
                else:
                    on_done()

        self.links.start_streams(
            [(path, n, weight) for (path, n), weight in streams.items()], one_done
        )
