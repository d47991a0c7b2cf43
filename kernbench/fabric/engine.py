"""The SimPy engine: build the fabric from a topology, submit messages, wait.

``submit(msg) -> Handle`` starts serving a message; ``wait(handle)`` advances
the clock until it is done (the distributed scheduler replaces the waiter so
that a waiting rank yields instead); ``completion(handle)`` gives the
:class:`Completion` and the request's :class:`TraceRow`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from kernbench.errors import KernBenchError, RouteError
from kernbench.fabric.flows import FlowNetwork
from kernbench.fabric.pe import PeUnit
from kernbench.machine.messages import (
    Completion,
    Compute,
    Delay,
    IpcqInstall,
    MemoryRead,
    MemoryWrite,
    Message,
    MmuMap,
    MmuUnmap,
    RunPrograms,
    TraceRow,
    Transfer,
)
from kernbench.topology.graph import MachineGraph, build_graph
from kernbench.topology.schema import Topology

__all__ = ["Fabric", "Handle"]

# Bytes one page-table entry takes in an MMU command.
MMU_ENTRY_BYTES = 16


class Handle:
    """A submitted request.  ``done`` once its completion is available."""

    __slots__ = ("request_id", "msg", "event", "start_ps", "completion", "trace")

    def __init__(self, request_id: int, msg: Message, event: simpy.Event, start_ps: int) -> None:
        self.request_id = request_id
        self.msg = msg
        self.event = event
        self.start_ps = start_ps
        self.completion: Completion | None = None
        self.trace: TraceRow | None = None

    @property
    def done(self) -> bool:
        return self.event.triggered

    def __repr__(self) -> str:
        state = "done" if self.done else "pending"
        return f"<Handle {self.request_id} {self.msg.kind} {self.msg.src}->{self.msg.dst} {state}>"


class Fabric:
    """The simulated machine: components, links, and the clock they share."""

    def __init__(
        self,
        topology: Topology,
        *,
        graph: MachineGraph | None = None,
        store: Any = None,
        env: simpy.Environment | None = None,
    ) -> None:
        self.topology = topology
        self.graph = graph or build_graph(topology)
        self.env = env or simpy.Environment()
        self.network = FlowNetwork(self.env, self.graph.edges, topology.fabric.packet_bytes)
        self.store = store
        self._pes: dict[str, PeUnit] = {}
        self.trace: list[TraceRow] = []
        self._next_id = 0
        self._known_endpoints: set[str] = set()
        self._ipcq = None
        self.detail = False  # record engine, IPCQ and link activity (for traces)
        self.waiter: Callable[[Handle], None] = self._run_until
        self._handlers: dict[type, Callable[[Message], Generator]] = {
            Transfer: self._serve_transfer,
            MemoryWrite: self._serve_write,
            MemoryRead: self._serve_read,
            MmuMap: self._serve_mmu,
            MmuUnmap: self._serve_mmu,
            Compute: self._serve_compute,
            Delay: self._serve_delay,
            RunPrograms: self._serve_programs,
            IpcqInstall: self._serve_install,
        }

    # -- components -------------------------------------------------------------
    def pe(self, name: str) -> PeUnit:
        unit = self._pes.get(name)
        if unit is None:
            if self.graph.check_name(name).kind != "pe":
                raise RouteError(f"{name!r} is not a PE; PE names look like 'sip0.cube0.pe0'")
            core = self.topology.cube.pe_template.components.pe_core.attrs
            unit = self._pes[name] = PeUnit(name, core, self.graph.pe_slowdown(name))
        return unit

    def page_table(self, pe_name: str):
        unit = self.pe(pe_name)
        if unit.page_table is None:
            from kernbench.memory.mmu import PageTable

            page_size = self.topology.cube.pe_template.components.pe_mmu.attrs.page_size
            unit.page_table = PageTable(page_size, name=f"{pe_name}.mmu")
        return unit.page_table

    @property
    def ipcq(self):
        """The inter-PE queues (created on first use)."""
        if self._ipcq is None:
            from kernbench.fabric.ipcq import Ipcq

            self._ipcq = Ipcq(self)
        return self._ipcq

    @property
    def now(self) -> int:
        return self.env.now

    # -- the engine contract ----------------------------------------------------
    def submit(self, msg: Message) -> Handle:
        handler = self._handlers.get(type(msg))
        if handler is None:
            raise TypeError(f"no component serves {type(msg).__name__}")
        self._check_endpoint(msg.src)
        self._check_endpoint(msg.dst)
        handle = Handle(self._next_id, msg, self.env.event(), self.env.now)
        self._next_id += 1
        if type(msg) is Transfer or type(msg) is MemoryWrite:
            # The hot path: a single flow, finished by a callback rather than a process.
            delivered = self.transfer(msg.src, msg.dst, msg.nbytes)
            delivered.callbacks.append(lambda _ev: self._delivered(handle))
        else:
            self.env.process(self._serve(handle, handler))
        return handle

    def _delivered(self, handle: Handle) -> None:
        msg = handle.msg
        try:
            if isinstance(msg, MemoryWrite):
                self._store_write(msg)
        except KernBenchError as exc:
            handle.event.fail(exc)
            handle.event.defused = True
            return
        self._complete(handle, None)

    def _check_endpoint(self, name: str) -> None:
        if name not in self._known_endpoints:
            self.graph.check_name(name)  # raises RouteError naming the valid forms
            self._known_endpoints.add(name)

    def wait(self, handle: Handle) -> Completion:
        if not handle.done:
            self.waiter(handle)
        if not handle.event.ok:
            raise handle.event.value
        return handle.completion

    def wait_all(self, handles: list[Handle]) -> list[Completion]:
        return [self.wait(h) for h in handles]

    def completion(self, handle: Handle) -> tuple[Completion, TraceRow]:
        if not handle.done:
            raise KernBenchError(f"request {handle.request_id} has not completed; wait() on it")
        return handle.completion, handle.trace

    def record(
        self, kind: str, src: str, dst: str, start_ps: int, nbytes: int = 0, tag: str = ""
    ) -> TraceRow:
        """Add a trace row for work a component did on its own (a collective's program
        on one PE, a PE's share of a kernel), ending now."""
        row = TraceRow(self._next_id, kind, src, dst, start_ps, self.env.now, nbytes, tag)
        self._next_id += 1
        self.trace.append(row)
        return row

    def run(self, until: int | None = None) -> None:
        self.env.run(until=until)

    def _run_until(self, handle: Handle) -> None:
        while not handle.event.triggered:
            if not self.env._queue:  # noqa: SLF001 - SimPy has no public "is idle"
                raise KernBenchError(
                    f"request {handle.request_id} ({handle.msg.kind} {handle.msg.src} -> "
                    f"{handle.msg.dst}) can never complete: nothing else is scheduled"
                )
            self.env.step()

    def _serve(self, handle: Handle, handler: Callable[[Message], Generator]) -> Generator:
        msg = handle.msg
        try:
            data = yield from handler(msg)
        except KernBenchError as exc:
            handle.event.fail(exc)
            handle.event.defused = True
            return
        self._complete(handle, data)

    def _complete(self, handle: Handle, data: Any) -> None:
        msg = handle.msg
        end = self.env.now
        handle.completion = Completion(handle.request_id, end, data)
        handle.trace = TraceRow(
            handle.request_id,
            msg.kind,
            msg.src,
            msg.dst,
            handle.start_ps,
            end,
            msg.nbytes,
            msg.tag,
        )
        self.trace.append(handle.trace)
        handle.event.succeed(handle.completion)

    # -- handlers -----------------------------------------------------------------
    def transfer(self, src: str, dst: str, nbytes: int, *, stream: bool = False) -> simpy.Event:
        """An event for moving ``nbytes`` from ``src`` to ``dst`` (for components).

        ``stream=True``: bandwidth only, the access latency hidden (see FlowNetwork).
        """
        return self.network.transfer(self.graph.route(src, dst), nbytes, stream=stream)

    def _serve_transfer(self, msg: Transfer) -> Generator:
        yield self.transfer(msg.src, msg.dst, msg.nbytes)

    def _serve_write(self, msg: MemoryWrite) -> Generator:
        yield self.transfer(msg.src, msg.dst, msg.nbytes)
        self._store_write(msg)

    def _store_write(self, msg: MemoryWrite) -> None:
        if msg.data is not None and self.store is not None and self.store.stores_bytes:
            self.store.write(msg.addr, msg.data, keep=msg.handed_over)

    def _serve_read(self, msg: MemoryRead) -> Generator:
        yield self.transfer(msg.src, msg.dst, 0)
        data = None
        if self.store is not None and self.store.stores_bytes and msg.addr is not None:
            data = self.store.read(msg.addr, msg.nbytes)
        yield self.transfer(msg.dst, msg.src, msg.nbytes)
        return data

    def _serve_mmu(self, msg: MmuMap | MmuUnmap) -> Generator:
        yield self.transfer(msg.src, msg.dst, msg.nbytes)
        cube = self.topology.cube
        yield self.env.timeout(cube.m_cpu.command_latency)
        per_page = cube.pe_template.components.pe_mmu.attrs.map_latency_per_page
        page_size = cube.pe_template.components.pe_mmu.attrs.page_size
        pages = sum(-(-entry[-1] // page_size) for entry in msg.entries)
        installs = [
            self.env.process(self._install(msg, target, pages * per_page)) for target in msg.targets
        ]
        yield self.env.all_of(installs)
        for process in installs:  # surface a fault from any target
            if not process.ok:
                raise process.value

    def _install(self, msg: MmuMap | MmuUnmap, target: str, install_ps: int) -> Generator:
        yield self.transfer(msg.dst, target, msg.nbytes)
        yield self.env.timeout(install_ps)
        table = self.page_table(target)
        if isinstance(msg, MmuMap):
            for va, pa, nbytes in msg.entries:
                table.map(va, pa, nbytes)
        else:
            for va, nbytes in msg.entries:
                table.unmap(va, nbytes)

    def _serve_install(self, msg: IpcqInstall) -> Generator:
        yield self.transfer(msg.src, msg.dst, msg.nbytes)
        yield self.env.timeout(self.topology.cube.m_cpu.command_latency)
        per_entry = self.topology.cube.pe_template.components.pe_ipcq.attrs
        installs = []
        for target in msg.targets:
            installs.append(self.transfer(msg.dst, target, msg.nbytes))
        yield self.env.all_of(installs)
        yield self.env.timeout(per_entry.install_latency_per_entry * len(msg.entries))

    def _serve_compute(self, msg: Compute) -> Generator:
        unit = self.pe(msg.dst)
        if msg.engine not in unit.free_at:
            raise KernBenchError(f"unknown engine {msg.engine!r}; valid: matrix, vector")
        yield self.compute(unit, msg.engine, msg.flops)

    def _serve_delay(self, msg: Delay) -> Generator:
        yield self.env.timeout(msg.duration_ps)

    def _serve_programs(self, msg: RunPrograms) -> Generator:
        """Dispatch (host -> M_CPU -> each PE), then each PE runs its programs in order."""
        yield self.transfer(msg.src, msg.dst, msg.nbytes)
        yield self.env.timeout(self.topology.cube.m_cpu.command_latency)
        runs = [
            self.env.process(self._run_on_pe(msg, pe, programs))
            for pe, programs in msg.programs.items()
        ]
        yield self.env.all_of(runs)

    def _run_on_pe(self, msg: RunPrograms, pe: str, programs: list) -> Generator:
        unit = self.pe(pe)
        yield self.transfer(msg.dst, pe, msg.nbytes)
        start, moved = self.env.now, 0
        for program in programs:
            yield self.env.timeout(unit.launch_overhead_ps)
            work = program()
            moved += sum(n for _, n in work.loads) + sum(n for _, n in work.stores)
            yield self.env.all_of(list(self._program_events(unit, work)))
        self.record("programs", msg.dst, pe, start, moved, f"{msg.tag} x{len(programs)}")

    def _program_events(self, unit: PeUnit, work) -> Generator:
        """Events for one program's memory traffic and engine work, which overlap."""
        for node, nbytes in work.loads:
            yield self.env.process(self._load(unit.name, node, nbytes))
        for node, nbytes in work.stores:
            yield self.transfer(unit.name, node, nbytes)
        for engine, flops in (("matrix", work.matrix_flops), ("vector", work.vector_flops)):
            if flops:
                yield self.compute(unit, engine, flops)

    def _load(self, pe: str, node: str, nbytes: int) -> Generator:
        # The request travels to the memory (latency only), then the data comes back.
        yield self.transfer(pe, node, 0)
        yield self.transfer(node, pe, nbytes)

    def compute_end(self, unit: PeUnit, engine: str, flops: int) -> int:
        """Queue ``flops`` on one of ``unit``'s engines; the time it will be done (no event)."""
        return unit.reserve(engine, flops, self.env.now)[1]

    def compute(self, unit: PeUnit, engine: str, flops: int) -> simpy.Event:
        """An event for ``flops`` on one of ``unit``'s engines, queued behind its earlier work."""
        now = self.env.now
        start, end = unit.reserve(engine, flops, now)
        done = self.env.timeout(end - now)
        if self.detail:
            tag = f"{flops} FLOP"
            done.callbacks.append(
                lambda _ev: self.record("engine", unit.name, f"{unit.name}.{engine}", start, 0, tag)
            )
        return done

    def enable_detail(self) -> None:
        """Record engine, IPCQ and per-link activity from now on (costs memory and time)."""
        self.detail = True
        if self.network.link_log is None:
            self.network.link_log = []
