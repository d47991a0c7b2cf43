"""Kernel dispatch: a cube's M_CPU starts kernel programs on its PEs.

The host sends :class:`RunPrograms` to an M_CPU, which takes its command
latency, then sends each PE its programs; a PE runs them one after another,
each paying the PE's launch overhead, its memory traffic and engine work
overlapping (ADR 0006).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from functools import partial

import simpy

from kernbench.fabric.flows import Delivery
from kernbench.fabric.pe import PeEngines, PeUnit
from kernbench.machine import ProgramWork, RunPrograms
from kernbench.machine.messages import TraceRow

__all__ = ["KernelDispatch"]


class KernelDispatch:
    """Serves :class:`RunPrograms`: dispatch, then each PE's programs in order."""

    def __init__(
        self,
        env: simpy.Environment,
        transfer: Callable[..., simpy.Event],
        send: Callable[[str, str, int, simpy.Event | Callable[[], None], int], None],
        engines: PeEngines,
        record: Callable[..., TraceRow],
        command_latency_ps: int,
    ) -> None:
        self.env = env
        self.transfer = transfer
        self.send = send  # (src, dst, nbytes, done, after), as Fabric.send
        self.engines = engines
        self.record = record
        self.command_latency_ps = command_latency_ps

    def serve(self, msg: RunPrograms) -> Generator:
        # The command reaches the M_CPU, which takes its latency.
        yield self.transfer(msg.src, msg.dst, msg.nbytes, after=self.command_latency_ps)
        runs = [
            self.env.process(self._run_on_pe(msg, pe, programs))
            for pe, programs in msg.programs.items()
        ]
        yield self.env.all_of(runs)

    def _run_on_pe(self, msg: RunPrograms, pe: str, programs: list) -> Generator:
        unit = self.engines.unit(pe)
        overhead = unit.launch_overhead_ps if programs else 0
        # The programs reach the PE, and the first pays its launch overhead.
        yield self.transfer(msg.dst, pe, msg.nbytes, after=overhead)
        start, moved = self.env.now - overhead, 0
        for i, program in enumerate(programs):
            if i:
                yield self.env.timeout(overhead)
            work = program()
            moved += sum(n for _, n in work.loads) + sum(n for _, n in work.stores)
            yield self.env.all_of(list(self._program_events(unit, work)))
        self.record("programs", msg.dst, pe, start, moved, f"{msg.tag} x{len(programs)}")

    def _program_events(self, unit: PeUnit, work: ProgramWork) -> Generator:
        """Events for one program's memory traffic and engine work, which overlap."""
        pe = unit.name
        for node, nbytes in work.loads:
            # The request travels to the memory (latency only), then the data comes back.
            loaded = Delivery(self.env)
            self.send(pe, node, 0, partial(self.send, node, pe, nbytes, loaded, 0), 0)
            yield loaded
        for node, nbytes in work.stores:
            yield self.transfer(unit.name, node, nbytes)
        for engine, flops in (("matrix", work.matrix_flops), ("vector", work.vector_flops)):
            if flops:
                yield self.engines.compute(unit, engine, flops)
