"""The machine API: the one interface above the simulation (ADR 0014).

Runtime, kernels, collectives and the tuner are written against
:class:`Machine`; a backend (the detailed SimPy fabric, a fast one) implements
it.  Like ASTRA-sim's network API it is small: a clock with events, requests
submitted and waited for, IPCQ sends and receives, streams of memory traffic
and engine work on a PE, the cost of a route, trace rows and observation
hooks.  Its types are protocols of this module, not SimPy's: an event is
anything with the :class:`Event` surface (SimPy's events have it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from kernbench.machine.messages import Completion, Message, TraceRow
from kernbench.machine.observe import Observers
from kernbench.machine.programs import RecordedCollective
from kernbench.topology.graph import Edge, MachineGraph
from kernbench.topology.schema import Topology
from kernbench.units import PS_PER_S

__all__ = [
    "Event",
    "Handle",
    "Clock",
    "PeSpec",
    "RouteCost",
    "Stream",
    "Machine",
]


@runtime_checkable
class Event(Protocol):
    """Something that happens at a simulated time; callbacks run when it does."""

    callbacks: list[Callable[[Any], None]] | None

    @property
    def triggered(self) -> bool: ...

    @property
    def processed(self) -> bool: ...

    @property
    def ok(self) -> bool: ...

    @property
    def value(self) -> Any: ...

    def succeed(self, value: Any = None) -> Event: ...

    def fail(self, exception: BaseException) -> Event: ...


class Handle(Protocol):
    """A submitted request: done once its completion is available."""

    request_id: int
    msg: Message
    event: Event

    @property
    def done(self) -> bool: ...


class Clock(Protocol):
    """The simulated clock, in integer picoseconds, and events on it."""

    @property
    def now(self) -> int: ...

    def event(self) -> Event:
        """An event that fires when someone succeeds or fails it."""
        ...

    def timeout(self, delay_ps: int) -> Event:
        """An event that fires ``delay_ps`` from now."""
        ...

    def process(self, body: Generator) -> Event:
        """Run a generator that yields events; the returned event fires when it returns."""
        ...

    def all_of(self, events: Iterable[Event]) -> Event:
        """An event that fires when every one of ``events`` has."""
        ...

    def peek(self) -> float:
        """The time of the next scheduled event (``inf`` when nothing is scheduled)."""
        ...

    def step(self) -> None:
        """Process the next scheduled event."""
        ...


@dataclass(frozen=True, slots=True)
class PeSpec:
    """What a PE is, as callers above the machine need it."""

    name: str
    flops_per_s: dict[str, int]  # engine -> FLOP per second (after any straggler slowdown)
    launch_overhead_ps: int


class RouteCost:
    """The static part of a route's cost, computed once per (route, size class)."""

    __slots__ = ("edges", "latency_ps", "bottleneck", "fill_ps_per_byte")

    def __init__(self, edges: Sequence[Edge]) -> None:
        self.edges = tuple(e.index for e in edges)
        self.latency_ps = sum(e.latency_ps for e in edges)
        self.bottleneck = min((e.bandwidth for e in edges), default=0)
        # ps per byte of the first packet, summed over the non-bottleneck hops.
        per_byte = sum(PS_PER_S / e.bandwidth for e in edges)
        self.fill_ps_per_byte = per_byte - (PS_PER_S / self.bottleneck if edges else 0.0)

    def idle_ps(self, nbytes: int, packet_bytes: int) -> int:
        """Time on an otherwise idle network (what the closed forms assume)."""
        if not self.edges:
            return 0
        stream = -(-nbytes * PS_PER_S // self.bottleneck) if nbytes else 0
        return stream + self.tail_ps(nbytes, packet_bytes)

    def tail_ps(self, nbytes: int, packet_bytes: int) -> int:
        """What follows a transfer's last byte leaving: the route's latency and the
        store-and-forward fill of its first packet."""
        return self.latency_ps + self.tail_fill_ps(nbytes, packet_bytes)

    def tail_fill_ps(self, nbytes: int, packet_bytes: int) -> int:
        first_packet = min(nbytes, packet_bytes)
        return math.ceil(first_packet * self.fill_ps_per_byte - ROUNDING_SLACK)


# Completion times are rounded up to whole picoseconds; a rate computed from
# exact integer bandwidths may land a hair above an integer, which must not
# cost an extra picosecond.
ROUNDING_SLACK = 1e-6

# (memory node, bytes) a PE reads or writes while it works.
Stream = tuple[str, int]


class Machine(Protocol):
    """A simulated machine, whatever simulates it."""

    topology: Topology
    graph: MachineGraph
    clock: Clock
    observers: Observers
    store: Any  # where functional-mode bytes live (kernbench.memory), set by the runtime

    @property
    def now(self) -> int: ...

    # -- requests (host <-> components) -------------------------------------------------------
    def submit(self, msg: Message) -> Handle:
        """Start serving ``msg``; its handle completes when the work is done."""
        ...

    def wait(self, handle: Handle) -> Completion:
        """Block until ``handle`` is done (through the waiter); raise its error if it failed."""
        ...

    def set_waiter(self, waiter: Callable[[Handle], None]) -> Callable[[Handle], None]:
        """Who blocks for a handle (the distributed scheduler yields a rank); returns the old."""
        ...

    def record(
        self, kind: str, src: str, dst: str, start_ps: int, nbytes: int = 0, tag: str = ""
    ) -> TraceRow:
        """A trace row for work a component did on its own, ending now."""
        ...

    # -- the PEs -------------------------------------------------------------------------------
    def pe_spec(self, pe: str) -> PeSpec: ...

    def stream(
        self,
        pe: str,
        loads: Sequence[Stream],
        stores: Sequence[Stream],
        flops: int,
        on_done: Callable[[], None],
    ) -> None:
        """``pe`` streams ``loads`` and ``stores`` while its vector engine does ``flops``;
        ``on_done`` is called when all of it is done (memory latency hidden, ADR 0008)."""
        ...

    def transfer(self, src: str, dst: str, nbytes: int) -> Event:
        """``nbytes`` from node ``src`` to node ``dst`` over their route."""
        ...

    def route_cost(self, src: str, dst: str) -> RouteCost:
        """The static cost of the route from node ``src`` to node ``dst``."""
        ...

    # -- IPCQ ------------------------------------------------------------------------------------
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
        """Queue an IPCQ message (credits, endpoint overhead, the route); ``on_sent`` when it
        is in the receiver's queue."""
        ...

    def receive(self, src_pe: str, dst_pe: str, channel: Any, depth: int | None) -> Generator:
        """Process body: the next message from ``src_pe`` on ``channel`` (its ``payload``)."""
        ...

    def close_channels(self, root: Any) -> None:
        """Forget the channels of one finished collective."""
        ...

    @property
    def ipcq_messages(self) -> int: ...

    # A backend that prices a collective's recorded programs step-wide says so
    # (False on the detailed fabric, which runs them message by message).
    evaluates_programs: bool

    def evaluate_programs(self, collective: RecordedCollective) -> list[list[int]] | None:
        """Each lane's ranks' times (ps from the programs' start), or ``None`` when the
        programs must run message by message (ADR 0015).  A backend whose times are
        approximate for this collective says so in ``collective.meta`` (``"drift"``, or
        ``"bound"``: the largest share by which a rank's time may be longer);
        one that refuses it says why there (``"refused"``, a phrase for reports)."""
        ...
