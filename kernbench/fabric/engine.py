"""The detailed backend's engine: components composed on one SimPy clock (ADR 0005, 0014).

A :class:`Fabric` is built from a topology: the links (a max-min fair flow
network), the PE engines, the memories, the MMUs, kernel dispatch and IPCQ,
each made from its own section of the topology.  Each component registers
the message types it serves; ``submit(msg) -> Handle`` hands a message to its
component, ``wait(handle)`` advances the clock until it is done (the
distributed scheduler replaces the waiter so that a waiting rank yields
instead), ``completion(handle)`` gives the :class:`Completion` and the
request's :class:`TraceRow`.  Trace rows, link activity, engine activity and
queue depths go to the hooks registered on :attr:`Fabric.observers`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import simpy

from kernbench.errors import KernBenchError
from kernbench.fabric.dispatch import KernelDispatch
from kernbench.fabric.flows import FlowNetwork
from kernbench.fabric.ipcq import Ipcq
from kernbench.fabric.memory import MemoryAccess
from kernbench.fabric.mmu import Mmus
from kernbench.fabric.pe import PeEngines
from kernbench.machine import (
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
from kernbench.machine.api import PeSpec, RouteCost, Stream
from kernbench.machine.observe import Observers
from kernbench.memory.mmu import PageTable
from kernbench.topology.graph import MachineGraph, build_graph
from kernbench.topology.schema import Topology

__all__ = ["Fabric", "Handle"]

# A handler serves one message: a generator function (run as a process whose
# return value is the completion's data), or, registered ``direct``, a
# function of the handle that completes or fails it itself (the hot path).
Handler = Callable[..., Any]


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

    # Collectives run message by message here (the fast backend evaluates them).
    evaluates_programs = False

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
        self.observers = Observers()
        self.links = FlowNetwork(
            self.env, self.graph.edges, topology.fabric.packet_bytes, self.observers
        )
        self._next_id = 0
        self._known_endpoints: set[str] = set()
        self._handlers: dict[type, tuple[Handler, bool]] = {}
        self.waiter: Callable[[Handle], None] = self._run_until
        cube = topology.cube
        parts = cube.pe_template.components
        command_ps = cube.m_cpu.command_latency
        self.engines = PeEngines(
            self.env, self.graph, self.links, parts.pe_core.attrs, self.observers
        )
        self.memory = MemoryAccess(self.transfer, self._complete, self._fail)
        self.memory.store = store
        self.mmus = Mmus(self.env, self.transfer, self.send, parts.pe_mmu.attrs, command_ps)
        self.dispatch = KernelDispatch(
            self.env, self.transfer, self.send, self.engines, self.record, command_ps
        )
        self.ipcq = Ipcq(
            self.env,
            self.graph,
            self.links,
            self.transfer,
            parts.pe_ipcq.attrs,
            command_ps,
            self.observers,
        )
        self.register(Transfer, self.memory.start_transfer, direct=True)
        self.register(MemoryWrite, self.memory.start_transfer, direct=True)
        self.register(MemoryRead, self.memory.serve_read)
        self.register(MmuMap, self.mmus.serve)
        self.register(MmuUnmap, self.mmus.serve)
        self.register(Compute, self.engines.serve_compute)
        self.register(Delay, self._serve_delay)
        self.register(RunPrograms, self.dispatch.serve)
        self.register(IpcqInstall, self.ipcq.serve_install)

    # -- composition ----------------------------------------------------------------------------
    def register(self, message_type: type, handler: Handler, *, direct: bool = False) -> None:
        """Make ``handler`` serve every submitted ``message_type`` (one component per type)."""
        if message_type in self._handlers:
            raise ValueError(f"{message_type.__name__} already has a component serving it")
        self._handlers[message_type] = (handler, direct)

    @property
    def clock(self) -> simpy.Environment:
        """The clock and its events (SimPy's environment has the machine API's Clock surface)."""
        return self.env

    @property
    def store(self) -> Any:
        return self.memory.store

    @store.setter
    def store(self, store: Any) -> None:
        self.memory.store = store

    @property
    def now(self) -> int:
        return self.env.now

    def pe_spec(self, pe: str) -> PeSpec:
        return self.engines.spec(pe)

    def page_table(self, pe: str) -> PageTable:
        """The MMU page table of ``pe`` (read by tests and diagnostics)."""
        return self.mmus.page_table(pe)

    def route_cost(self, src: str, dst: str) -> RouteCost:
        return self.links.route_cost(self.graph.route(src, dst))

    # -- the engine contract --------------------------------------------------------------------
    def submit(self, msg: Message) -> Handle:
        served = self._handlers.get(type(msg))
        if served is None:
            raise TypeError(f"no component serves {type(msg).__name__}")
        self._check_endpoint(msg.src)
        self._check_endpoint(msg.dst)
        handle = Handle(self._next_id, msg, self.env.event(), self.env.now)
        self._next_id += 1
        handler, direct = served
        if direct:
            handler(handle)
        else:
            self.env.process(self._serve(handle, handler))
        return handle

    def _check_endpoint(self, name: str) -> None:
        if name not in self._known_endpoints:
            self.graph.check_name(name)  # raises RouteError naming the valid forms
            self._known_endpoints.add(name)

    def set_waiter(self, waiter: Callable[[Handle], None]) -> Callable[[Handle], None]:
        previous, self.waiter = self.waiter, waiter
        return previous

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
        for hook in self.observers.row:
            hook(row)
        return row

    def evaluate_programs(self, collective: Any) -> list[list[int]] | None:
        """Never: the detailed backend runs every program message by message."""
        return None

    def run(self, until: int | None = None) -> None:
        self.env.run(until=until)

    def _run_until(self, handle: Handle) -> None:
        env = self.env
        while not handle.event.triggered:
            if env.peek() == float("inf"):
                raise KernBenchError(
                    f"request {handle.request_id} ({handle.msg.kind} {handle.msg.src} -> "
                    f"{handle.msg.dst}) can never complete: nothing else is scheduled"
                )
            env.step()

    def _serve(self, handle: Handle, handler: Handler) -> Generator:
        try:
            data = yield from handler(handle.msg)
        except KernBenchError as exc:
            self._fail(handle, exc)
            return
        self._complete(handle, data)

    def _fail(self, handle: Handle, exc: BaseException) -> None:
        handle.event.fail(exc)
        handle.event.defused = True

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
        for hook in self.observers.row:
            hook(handle.trace)
        handle.event.succeed(handle.completion)

    def _serve_delay(self, msg: Delay) -> Generator:
        yield self.env.timeout(msg.duration_ps)

    # -- services components and the layers above use -------------------------------------------
    def transfer(
        self, src: str, dst: str, nbytes: int, *, stream: bool = False, after: int = 0
    ) -> simpy.Event:
        """An event for moving ``nbytes`` from ``src`` to ``dst``, fired ``after`` ps past
        the arrival (the fixed work that follows it, for one timer).

        ``stream=True``: bandwidth only, the access latency hidden (see FlowNetwork).
        """
        return self.links.transfer(self.graph.route(src, dst), nbytes, stream=stream, after=after)

    def send(
        self, src: str, dst: str, nbytes: int, done: simpy.Event | Callable[[], None], after: int
    ) -> None:
        """Move ``nbytes`` from ``src`` to ``dst`` and succeed ``done`` (or call it) ``after``
        ps past the arrival: :meth:`transfer` with the event (or a callback) given."""
        self.links.start(self.graph.route(src, dst), nbytes, done, after=after)

    def stream(
        self,
        pe: str,
        loads: Sequence[Stream],
        stores: Sequence[Stream],
        flops: int,
        on_done: Callable[[], None],
    ) -> None:
        self.engines.stream(pe, loads, stores, flops, on_done)

    def post(
        self,
        src_pe: str,
        dst_pe: str,
        nbytes: int,
        *,
        src_node: str,
        dst_node: str,
        channel: Any,
        payload_fn: Callable[[], Any] | None,
        depth: int | None,
        on_sent: Callable[[], None] | None,
    ) -> None:
        self.ipcq.post(
            src_pe,
            dst_pe,
            nbytes,
            src_node=src_node,
            dst_node=dst_node,
            key=channel,
            payload_fn=payload_fn,
            depth=depth,
            on_sent=on_sent,
        )

    def receive(self, src_pe: str, dst_pe: str, channel: Any, depth: int | None) -> Generator:
        message = yield from self.ipcq.recv(src_pe, dst_pe, channel, depth)
        return message.payload

    def close_channels(self, root: Any) -> None:
        self.ipcq.close(root)

    @property
    def ipcq_messages(self) -> int:
        return self.ipcq.messages
