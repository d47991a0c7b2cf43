"""The schedule cost model: an algorithm's schedule laid on the machine, in picoseconds.

An algorithm describes a run of an op as a schedule
(:mod:`kernbench.ccl.algorithms.schedule`): phases of steps, a step being
the messages in flight together and the local work alongside and after
them, each rank running one program or a few side by side (lanes).
:func:`price` lays it on the machine: ranks on their PEs; a message on its
route from the sender's memory (the HBM slice its PE's partition starts in)
to the receiver's buffer (TCM, cube SRAM or HBM, as the configuration says);
a reduction, placement or copy on the streams it makes between the memory
ports and the PE, as :class:`~kernbench.ccl.comm.Comm` makes them.  The
resources are the graph's links and memory ports (bytes at a bandwidth),
the IPCQ channels (one message at a time, each paying the endpoint overhead
o and its bytes, then arriving its route's latency and its first packet's fill
later, while the channel's next message goes) and the programs (one work
item at a time).

**Following a schedule.**  Time is kept per program, so ranks of a tree or
of unequal groups go at their own pace:

* A message leaves when its sender enters the step and its channel is free
  (the channel's previous message has left; its latency overlaps this one).
  The step's flows (its messages, and the streams of work alongside them)
  move as the fabric moves them, sharing links max-min fairly
  (:mod:`kernbench.ccl.fluid`); a symmetric step (every message leaving at
  once, one per channel, no work alongside), or one with too many flows to
  follow, takes each message's latency plus its most loaded link's load over
  its bandwidth: exact when the step's flows are alike.
* Work after the messages waits for the program's incoming messages (its
  i-th item for its i-th message when they pair up, else for all) and takes
  the longer of its vector-engine time and its busiest port's time, the
  port shared with the other programs working through it in the step.
* A step repeated k times is followed until it moves every program and
  channel on by the same time, then extended by that (at most a few times,
  then at the pace of the slowest program or channel).
* At the end of a phase every program has drained its sends, and a rank's
  lanes join.
* A phase of C pieces is a pipeline: its steps are followed for one piece,
  then each resource needs its time per piece b for each further piece,
  less the idle slack it left inside the first piece's span, as far as the
  later pieces' work fills it; the phase takes as much longer as the
  resource for which that is the most.  In the steady state a link is shared
  as processor sharing shares it: a user (a channel, a program's work
  streams) moving b bytes over it per piece takes Σ_g min(b_g, b) over its
  users at its bandwidth; a channel adds its endpoint overheads to its share among
  the users in step with it (in flight with it in the first piece, or
  chained to it at a rank), while the others only fill the link while it
  waits.  And the phase takes no less than its steps as pipeline stages: all
  of them, latencies included, for the first piece, the slowest stage's
  time per piece (its latency overlapped) for each further one, a stage
  sharing its links with the channels chained to it (a chain's stages share
  the ports between them from the second piece on).  Only the first stage's
  first piece goes alone: behind it, each stage's first piece leaves a rank
  while the next piece lands there, less the route tail the landing started
  ahead (a chain broadcast over HBM slices: each rank's slice takes the
  landing and the leaving piece at once).  Nor less than the pieces through
  the steps in rounds (piece k at step r - k in round r), a round as long as
  its busiest link, port or program over the steps active in it: a tree's
  interior rank takes the next piece in from its children, reduces it and
  sends the last one on in the same round.

The op ends when the last program is done and the last message has arrived,
after the PEs' launch overhead.

**The bound.**  Under every prediction lies what physics allows
(:attr:`Priced.bound_ps`): the launch overhead plus the op's bytes on its
busiest link or port over that link's bandwidth (after the endpoint overhead
when only messages use the link), and no less than its fastest message.
The bytes per link come from the schedule and the graph's routes
(:attr:`Priced.link_bytes`); they are the bytes the simulation moves.

**Extending it.**  A new algorithm gets a price by giving a schedule;
new machine behaviour belongs in the shapes (:func:`_shape`: what a step
puts on which links) or in the following (:func:`_advance`).  Known to be
off (benchmarks/collectives_quality.py, RESULTS.md): flows of different
steps that overlap in time do not share links (a tree's deep and shallow
leaves on a ring or a mesh, one piece or a few: up to ~20% under), and
channels in step on a multi-hop route pipelined in a few pieces are taken
to leave the link idle while all of them wait out their latencies (direct
sends on a ring, ring reduce-scatter on a mesh at 64 KiB-1 MiB: up to ~25%
over; direct sends in a few pieces at 64 KiB-1 MiB on ring8 and fc8: up to
~17% under, the receivers taking the pieces peer by peer); a tree reduce
pipelined on a mesh is
priced as if its interior ranks kept their ports busy every round (10-16%
under); a ring in one piece through a switch among hops inside a chip is
priced as if its ranks kept in step, while the ranks behind the slow hop
share their ports with the next step's landing (rack.yaml, 256-1024 PE
ranks: 8-11% under).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from typing import Any

import numpy as np

from kernbench.ccl.algorithms.schedule import Message, Schedule, Step, Work
from kernbench.ccl.buffers import buffer_node, memory_node
from kernbench.ccl.catalogue import AlgorithmConfig
from kernbench.ccl.fluid import Flow, follow
from kernbench.runtime import RuntimeContext
from kernbench.units import PS_PER_S

__all__ = ["Priced", "Pricing", "price", "route_hops"]

# A step whose ranks move on by the same time, within this (ps), is symmetric.
_UNIFORM_PS = 1e-3
# Times a non-symmetric repeated step is followed before the rest is extrapolated.
_FOLLOWED_REPEATS = 4
# ... or as many as it has programs, up to this many (a turn of a ring) and up to
# this many messages followed in all (the pricing of a big group stays quick).
_FOLLOWED_TURN = 64
_FOLLOWED_MESSAGES = 1024
# Steps with more flows than this are priced as if all were in flight together.
_FLUID_FLOWS = 512


@dataclass(frozen=True)
class Priced:
    """A schedule's time (``model_ps``, launch to end) and the physics bound under it."""

    model_ps: float
    bound_ps: float
    busiest: str  # the link or port with the most time's worth of bytes ("" if none)
    link_bytes: dict[str, float]  # bytes the op puts on each link or port, by name


@dataclass(frozen=True, slots=True)
class _Path:
    """A message's way between two ranks: its route, latency and fill, the latency of
    the credit's way back, and the ps per byte of its slowest link."""

    route: tuple[int, ...]
    latency_ps: int
    fill_ps_per_byte: float
    back_ps: int
    slowest_ps_per_byte: float


class _Machine:
    """A configuration's view of the machine: routes, latencies and rates for its ranks."""

    def __init__(
        self, ctx: RuntimeContext, config: AlgorithmConfig, pes: Sequence[str], itemsize: int
    ) -> None:
        machine = ctx.machine
        self.machine = machine
        self.graph = machine.graph
        self.packet_bytes = ctx.topology.fabric.packet_bytes
        self.edges = self.graph.edges
        ipcq = ctx.topology.cube.pe_template.components.pe_ipcq.attrs
        self.overhead_ps = ipcq.endpoint_overhead
        self.depth = config.queue_depth or ipcq.depth  # IPCQ credits per channel
        specs = [machine.pe_spec(pe) for pe in pes]
        self.launch_ps = max(spec.launch_overhead_ps for spec in specs)
        self.pes = list(pes)
        self.memory = [memory_node(ctx.topology, pe) for pe in pes]
        self.buffer = [
            buffer_node(pe, node, config.buffer) for pe, node in zip(pes, self.memory, strict=True)
        ]
        self.signal_buffer = [buffer_node(pe, pe, config.buffer) for pe in pes]
        self.element_ps = [PS_PER_S / spec.flops_per_s["vector"] for spec in specs]
        self.itemsize = itemsize
        # ps per byte of every link on a route looked up so far (route() notes them).
        self.ppb: dict[int, float] = {}
        self._streams: dict[
            tuple[int, str], tuple[tuple[tuple[int, ...], ...], dict[int, int]]
        ] = {}
        # Per (sender, receiver, signal): a message's route, and its costs.
        self._routes: dict[tuple[int, int, bool], tuple[int, ...]] = {}
        self._paths: dict[tuple[int, int, bool], _Path] = {}
        # The messages of the step last laid out, whether it drains, and its shape.
        self.laid: tuple[tuple[Message, ...], bool, _Shape] | None = None

    def route(self, src: str, dst: str) -> tuple[int, ...]:
        """The graph's route from ``src`` to ``dst``, its links' ps per byte noted in ``ppb``."""
        route = self.graph.route(src, dst)
        ppb = self.ppb
        for e in route:
            if e not in ppb:
                ppb[e] = PS_PER_S / self.edges[e].bandwidth
        return route

    def _ends(self, m: Message) -> tuple[str, str]:
        if m.signal:  # no region: from the PE to the buffer of the PE (its memory is itself)
            return self.pes[m.src], self.signal_buffer[m.dst]
        source = self.buffer if m.source == "buffer" else self.memory
        return source[m.src], self.buffer[m.dst]

    def message_route(self, m: Message) -> tuple[int, ...]:
        """The route of a message: from its sender's memory to its receiver's buffer."""
        key = (m.src, m.dst, m.signal, m.source)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self.route(*self._ends(m))
        return route

    def path(self, m: Message) -> _Path:
        """A message's route and what it costs, looked up once per pair of ranks."""
        key = (m.src, m.dst, m.signal, m.source)
        path = self._paths.get(key)
        if path is None:
            route = self.message_route(m)
            cost = self.machine.route_cost(*self._ends(m))
            back = self.machine.route_cost(self.pes[m.dst], self.pes[m.src])
            slowest = max((self.ppb[e] for e in route), default=0.0)
            path = _Path(route, cost.latency_ps, cost.fill_ps_per_byte, back.latency_ps, slowest)
            self._paths[key] = path
        return path

    def streams(self, w: Work) -> tuple[tuple[tuple[int, ...], ...], dict[int, int]]:
        """The routes of the memory streams a work item makes (as Comm makes them), and
        how many of them cross each link."""
        key = (w.rank, w.kind, w.local, w.into)
        found = self._streams.get(key)
        if found is None:
            route = self.route
            pe, memory, buffer = self.pes[w.rank], self.memory[w.rank], self.buffer[w.rank]
            local = buffer if w.local == "buffer" else memory
            into = buffer if w.into == "buffer" else memory
            if w.kind == "reduce":
                pairs = [(buffer, pe), (local, pe), (pe, into)]
            elif w.kind == "copy":
                pairs = [(local, pe), (pe, into)]
            else:  # place: free when the message landed where it belongs
                pairs = [(buffer, pe), (pe, into)] if buffer != into else []
            routes = tuple(route(a, b) for a, b in pairs)
            crossing: dict[int, int] = defaultdict(int)
            for r in routes:
                for e in r:
                    crossing[e] += 1
            found = self._streams[key] = routes, dict(crossing)
        return found


Thread = tuple[int, Hashable]  # (rank, lane): one program on one rank


@dataclass(slots=True)
class _Item:
    """A work item: its streams' routes, bytes per link or port, vector-engine time, and
    how many of its streams cross each link."""

    routes: tuple[tuple[int, ...], ...]
    nbytes: float
    load: dict[int, float]
    compute_ps: float
    streams: dict[int, int]


@dataclass
class _Shape:
    """What does not depend on when ranks enter a step: routes, latencies, loads."""

    src: list[Thread] = field(default_factory=list)
    channel: list[tuple] = field(default_factory=list)
    route: list[tuple[int, ...]] = field(default_factory=list)
    nbytes: list[float] = field(default_factory=list)
    tail: list[float] = field(default_factory=list)  # route latency + first packet's fill
    back: list[float] = field(default_factory=list)  # latency of the credit's way back
    alone: list[float] = field(default_factory=list)  # bytes at the route's slowest link
    incoming: dict[Thread, list[int]] = field(default_factory=dict)  # its messages
    alongside: dict[Thread, list[_Item]] = field(default_factory=dict)
    after: dict[Thread, list[_Item]] = field(default_factory=dict)
    load: dict[int, float] = field(default_factory=dict)  # bytes per link: messages
    alongside_load: dict[int, float] = field(default_factory=dict)
    after_load: dict[int, float] = field(default_factory=dict)
    fastest: float = math.inf  # the lowest o + route latency of its messages
    threads: tuple[Thread, ...] = ()  # the programs that work or receive in the step
    outgoing: dict[Thread, list[int]] = field(default_factory=dict)  # to drain, if drain
    # Each channel's first message, each message's successor on its channel, and each
    # channel's last message (channels in the order they first send).
    first: dict[tuple, int] = field(default_factory=dict)
    successor: dict[int, int] = field(default_factory=dict)
    last: list[int] = field(default_factory=list)
    streams: int = 0  # the streams of the work alongside the messages
    # Per thread, in order: its messages to drain, whether it works alongside the
    # messages, and its work after them, each item taking its time (sharing its ports
    # with the programs working through them too): paired with its incoming messages
    # (the i-th item handles the i-th message), else (None) all of them after all of its
    # incoming messages, then those messages and the items' time in all.
    programs: list[
        tuple[Thread, list[int], bool, list[tuple[int, float]] | None, list[int], float]
    ] = field(default_factory=list)
    # With all the step's flows in flight together (:func:`_at_once`, worked out when
    # first asked): each message's time on its busiest link, each program's on its
    # busiest port alongside.
    at_once: tuple[list[float], dict[Thread, float]] | None = None


def _items(machine: _Machine, works: Sequence[Work]) -> dict[Thread, list[_Item]]:
    items: dict[Thread, list[_Item]] = {}
    for w in works:
        routes, streams = machine.streams(w)
        load: dict[int, float] = defaultdict(float)
        for route in routes:
            for e in route:
                load[e] += w.nbytes
        compute = 0.0
        if w.kind == "reduce":
            compute = w.nbytes / machine.itemsize * machine.element_ps[w.rank]
        item = _Item(routes, w.nbytes, dict(load), compute, streams)
        items.setdefault((w.rank, w.lane), []).append(item)
    return items


def _total(items: dict[Thread, list[_Item]]) -> dict[int, float]:
    load: dict[int, float] = defaultdict(float)
    for thread_items in items.values():
        for item in thread_items:
            for e, b in item.load.items():
                load[e] += b
    return dict(load)


def _lay_messages(machine: _Machine, shape: _Shape, step: Step) -> None:
    """Fill in what a step's messages fix: their routes, latencies and loads."""
    packet = machine.packet_bytes
    messages = step.messages
    paths = [machine.path(m) for m in messages]
    shape.src = [(m.src, m.lane) for m in messages]
    shape.channel = [(m.src, m.dst, m.channel) for m in messages]
    shape.route = [path.route for path in paths]
    shape.nbytes = [m.nbytes for m in messages]
    shape.tail = [
        path.latency_ps + min(m.nbytes, packet) * path.fill_ps_per_byte
        for m, path in zip(messages, paths, strict=True)
    ]
    shape.back = [path.back_ps for path in paths]
    # Rounding is monotonic: the bytes times the slowest link's ps per byte are the
    # largest of the bytes times each link's.
    shape.alone = [
        m.nbytes * path.slowest_ps_per_byte for m, path in zip(messages, paths, strict=True)
    ]
    shape.fastest = min([math.inf, *(machine.overhead_ps + path.latency_ps for path in paths)])
    load: dict[int, float] = defaultdict(float)
    for i, m in enumerate(messages):
        shape.incoming.setdefault((m.dst, m.lane), []).append(i)
        if step.drain:
            shape.outgoing.setdefault((m.src, m.lane), []).append(i)
        for e in shape.route[i]:
            load[e] += m.nbytes
    shape.load = dict(load)
    shape.first, shape.successor, shape.last = _channels(shape)


# The parts of a step's shape that its messages (and whether it drains) fix.
_MESSAGE_PARTS = (
    *("src", "channel", "route", "nbytes", "tail", "back", "alone", "fastest"),
    *("incoming", "outgoing", "load", "first", "successor", "last"),
)


def _shape(machine: _Machine, step: Step) -> _Shape:
    shape = _Shape()
    # Steps that share their messages (a ring's) share what the messages fix.
    laid = machine.laid
    if laid is not None and laid[0] is step.messages and laid[1] == step.drain:
        for part in _MESSAGE_PARTS:
            setattr(shape, part, getattr(laid[2], part))
    else:
        _lay_messages(machine, shape, step)
        machine.laid = (step.messages, step.drain, shape)
    shape.alongside = _items(machine, step.alongside)
    shape.after = _items(machine, step.work)
    shape.alongside_load = _total(shape.alongside)
    shape.after_load = _total(shape.after)
    shape.threads = tuple(
        dict.fromkeys([*shape.alongside, *shape.after, *shape.incoming, *shape.outgoing])
    )
    shape.streams = sum(len(item.routes) for items in shape.alongside.values() for item in items)
    ppb = machine.ppb
    sharers: dict[int, int] = defaultdict(int)  # threads working through each link at once
    for thread_items in shape.after.values():
        for e in {e for item in thread_items for e in item.load}:
            sharers[e] += 1
    no_messages: list[int] = []
    for thread in shape.threads:
        after = []
        for item in shape.after.get(thread, ()):
            port = 0.0  # its busiest port's time, shared with the other programs on it
            if item.load:
                port = max([b * sharers[e] * ppb[e] for e, b in item.load.items()])
            after.append(max(item.compute_ps, port))
        incoming = shape.incoming.get(thread, no_messages)
        outgoing = shape.outgoing.get(thread, no_messages)
        alongside = thread in shape.alongside
        if len(incoming) == len(after):
            paired = list(zip(incoming, after, strict=True))
            shape.programs.append((thread, outgoing, alongside, paired, incoming, 0.0))
        else:
            shape.programs.append((thread, outgoing, alongside, None, incoming, sum(after)))
    return shape


class _Clock:
    """Where every program and channel stands in time while a schedule is followed.

    A rank's lanes start from where the rank stood at the end of the last phase
    and join again at the end of each phase, once every message they sent has
    arrived (a program drains its sends before it ends).
    """

    def __init__(self, size: int) -> None:
        self.base = [0.0] * size
        self.lanes: dict[Thread, float] = {}
        self.sent = [0.0] * size  # each rank's last arrival of the phase
        self.free: dict[tuple, float] = {}  # when each channel can send again
        self.last = 0.0  # the last arrival so far
        # While a pipelined phase's first piece is followed: when each resource (link,
        # channel, program) is first and last active.
        self.windows: dict[Any, list[float]] | None = None

    def at(self, thread: Thread) -> float:
        return self.lanes.get(thread, self.base[thread[0]])

    def shift(self, delta: float, channels: Iterable[tuple]) -> None:
        self.base = [t + delta for t in self.base]
        self.sent = [t + delta for t in self.sent]
        self.lanes = {thread: t + delta for thread, t in self.lanes.items()}
        for key in set(channels):
            self.free[key] = self.free.get(key, 0.0) + delta
        self.last += delta

    def join(self) -> None:
        for (rank, _), t in self.lanes.items():
            self.base[rank] = max(self.base[rank], t)
        self.base = [max(t, sent) for t, sent in zip(self.base, self.sent, strict=True)]
        self.lanes = {}


def _channels(shape: _Shape) -> tuple[dict[tuple, int], dict[int, int], list[int]]:
    """Each channel's first message, each message's successor on its channel, and
    each channel's last message (channels in the order they first send)."""
    first: dict[tuple, int] = {}
    successor: dict[int, int] = {}
    last: dict[tuple, int] = {}
    for i, key in enumerate(shape.channel):
        if key in last:
            successor[last[key]] = i
        else:
            first[key] = i
        last[key] = i
    return first, successor, list(last.values())


def _fluid(
    machine: _Machine, shape: _Shape, clock: _Clock
) -> tuple[list[float], list[float], dict[Thread, float]]:
    """Follow a step's flows in time, sharing links max-min fairly as the fabric does.

    A message's flow starts o after its sender enters the step and its channel
    is free (the channel's previous last byte left), and arrives its route's
    latency (and first packet's fill) after its last byte left, not before the
    channel's previous message; work alongside streams from the step's start.
    Returns each message's arrival and when its last byte left, and each
    working thread's end of work alongside.
    """
    capacity: dict[int, float] = {}

    def bytes_per_ps(e: int) -> float:
        rate = capacity.get(e)
        if rate is None:
            rate = capacity[e] = machine.edges[e].bandwidth / PS_PER_S
        return rate

    first, successor = shape.first, shape.successor
    arrivals = [0.0] * len(shape.src)
    left = [0.0] * len(shape.src)
    previous = {j: i for i, j in successor.items()}
    beside: dict[Thread, float] = {}

    def send(i: int, at: float) -> tuple[float, Flow]:
        return at + machine.overhead_ps, Flow(shape.nbytes[i], shape.route[i], i)

    starts = [
        send(i, max(clock.at(shape.src[i]), clock.free.get(key, 0.0))) for key, i in first.items()
    ]
    for thread, items in shape.alongside.items():
        at = clock.at(thread)
        beside[thread] = at + sum(item.compute_ps for item in items)
        starts += [
            (at, Flow(item.nbytes, route, thread)) for item in items for route in item.routes
        ]

    def finished(flow: Flow, t: float) -> list[tuple[float, Flow]]:
        if not isinstance(flow.tag, int):  # a stream of work alongside
            beside[flow.tag] = max(beside[flow.tag], t)
            return []
        i = flow.tag
        left[i] = t
        arrivals[i] = t + shape.tail[i]
        if i in previous:  # a channel's messages arrive in order
            arrivals[i] = max(arrivals[i], arrivals[previous[i]])
        return [send(successor[i], t)] if i in successor else []

    follow(starts, bytes_per_ps, finished)
    return arrivals, left, beside


def _at_once(
    machine: _Machine, shape: _Shape, clock: _Clock, starts: list[float] | None = None
) -> tuple[list[float], list[float], dict[Thread, float]]:
    """The step's flows as if all in flight together: each link's load shared by all.

    Exact for a symmetric step (every message leaving at once, one per
    channel, on equally loaded routes); the shortcut for steps with too many
    flows to follow one by one.  ``starts``: when each message can leave, if the
    caller has worked it out (a step of one message per channel).
    """
    if shape.at_once is None:
        ppb = machine.ppb
        load = defaultdict(float, shape.load)
        for e, b in shape.alongside_load.items():
            load[e] += b
        on_route = [max((load[e] * ppb[e] for e in route), default=0.0) for route in shape.route]
        ports = {}
        for thread, items in shape.alongside.items():
            edges = {e for item in items for e in item.load}
            ports[thread] = max((load[e] * ppb[e] for e in edges), default=0.0)
        shape.at_once = on_route, ports
    on_route, ports = shape.at_once
    successor = shape.successor
    arrivals = [0.0] * len(shape.src)
    left = [0.0] * len(shape.src)
    for key, i in shape.first.items():
        if starts is None:
            at = max(clock.at(shape.src[i]), clock.free.get(key, 0.0))
        else:
            at = starts[i]
        arrived = 0.0
        while True:
            at = left[i] = at + machine.overhead_ps + on_route[i]
            arrived = arrivals[i] = max(at + shape.tail[i], arrived)
            if i not in successor:
                break
            i = successor[i]
    beside = {}
    for thread, items in shape.alongside.items():
        compute = sum(item.compute_ps for item in items)
        beside[thread] = clock.at(thread) + max(compute, ports[thread])
    return arrivals, left, beside


def _advance(machine: _Machine, shape: _Shape, clock: _Clock) -> list[float]:
    """Follow one step from where the clock stands; where its programs, then its
    channels (in the order of ``shape.threads`` and of ``shape.last``) then stand."""
    at, free = clock.at, clock.free
    # With one message per channel, when each can leave: when its sender enters the
    # step, or its channel is free if later.
    starts = None
    if len(shape.first) == len(shape.channel):
        channels = zip(shape.src, shape.channel, strict=True)
        starts = [max(at(src), free.get(key, 0.0)) for src, key in channels]
    symmetric = (
        starts is not None
        and not shape.streams
        and (not starts or max(starts) - min(starts) <= _UNIFORM_PS)
    )
    if symmetric or len(shape.src) + shape.streams > _FLUID_FLOWS:
        arrivals, left, beside = _at_once(machine, shape, clock, starts)
    else:
        arrivals, left, beside = _fluid(machine, shape, clock)
    windows = clock.windows
    sent = clock.sent
    for i, key in enumerate(shape.channel):
        if windows is not None:
            start = max(at(shape.src[i]), free.get(key, 0.0)) if starts is None else starts[i]
            _widen_all(windows, (key, *shape.route[i]), start, arrivals[i])
        free[key] = left[i]  # the channel's next message goes once this one left
        sent[key[0]] = max(sent[key[0]], arrivals[i])
    if arrivals:
        clock.last = max(clock.last, max(arrivals))
    moved = {}
    lanes, base = clock.lanes, clock.base
    for thread, outgoing, alongside, paired, incoming, work in shape.programs:
        t = beside[thread] if alongside else lanes.get(thread, base[thread[0]])
        if outgoing:  # its own sends arrive before its work starts
            t = max(t, *(arrivals[i] for i in outgoing))
        if windows is not None and alongside:
            _widen(windows, thread, at(thread), t)
        if paired is not None:  # the i-th work item handles the i-th message
            for i, item_ps in paired:
                start = max(t, arrivals[i])
                t = start + item_ps
                if windows is not None and item_ps:
                    _widen(windows, thread, start, t)
        else:  # the work waits for all of them
            start = max([t, *(arrivals[i] for i in incoming)])
            t = start + work
            if windows is not None and work:
                _widen(windows, thread, start, t)
        moved[thread] = t
    clock.lanes.update(moved)
    return [*moved.values(), *[left[i] for i in shape.last]]


def _widen(windows: dict[Any, list[float]], resource: Any, start: float, end: float) -> None:
    """Stretch a resource's window of activity over [start, end]."""
    window = windows.get(resource)
    if window is None:
        windows[resource] = [start, end]
    else:
        window[0], window[1] = min(window[0], start), max(window[1], end)


def _widen_all(
    windows: dict[Any, list[float]], resources: Iterable[Any], start: float, end: float
) -> None:
    """:func:`_widen` for each of ``resources``."""
    for resource in resources:
        window = windows.get(resource)
        if window is None:
            windows[resource] = [start, end]
        else:
            if start < window[0]:
                window[0] = start
            if end > window[1]:
                window[1] = end


def _work_items(shape: _Shape) -> list[tuple[Thread, _Item]]:
    return [
        (thread, item)
        for group in (shape.alongside, shape.after)
        for thread, items in group.items()
        for item in items
    ]


# Links with at least this many users are summed over with array passes (_Crowd).
_CROWDED_LINK = 64


class _Alone:
    """A link's only user: each of :class:`_Few`'s sums is its own streams'."""

    __slots__ = ("per_stream", "streams")

    def __init__(self, per_stream: float, streams: int) -> None:
        self.per_stream, self.streams = per_stream, streams

    def total(self, mine: float) -> float:
        return min(self.per_stream, mine) * self.streams

    def chained_total(self, mine: float, me: tuple) -> float:
        return min(self.per_stream, mine) * self.streams

    def together_total(self, mine: float, me: tuple) -> float:
        return min(self.per_stream, mine) * self.streams


class _Few:
    """One link's users, in the order they came onto the link, for the sums of
    :func:`_pipeline_busy`: Σ min(bytes per stream, b) x streams over all of them, or
    over those chained to, or in step with, one of them (b: its bytes per stream)."""

    def __init__(
        self,
        on_link: dict[Any, float],
        width: dict[tuple[Any, int], int],
        e: int,
        latency: dict[tuple, float],
        windows: dict[Any, list[float]],
    ) -> None:
        self.users: list[tuple[Any, float, int]] = []  # (user, bytes per stream, streams)
        for u, b in on_link.items():
            n = width.get((u, e), 1)
            self.users.append((u, b / n, n))
        self.latency = latency
        self.windows = windows

    def total(self, mine: float) -> float:
        return sum([min(per_stream, mine) * n for _, per_stream, n in self.users])

    def chained_total(self, mine: float, me: tuple) -> float:
        """The sum over ``me`` and the channels of its program that meet it at a rank."""
        return sum(
            [min(per_stream, mine) * n for u, per_stream, n in self.users if self._chained(u, me)]
        )

    def together_total(self, mine: float, me: tuple) -> float:
        """The sum over ``me`` and the users chained to it or active while it was (or
        never timed)."""
        span = self.windows.get(me)
        if span is None:
            return self.total(mine)
        windows = self.windows
        return sum(
            [
                min(per_stream, mine) * n
                for u, per_stream, n in self.users
                if (window := windows.get(u)) is None
                or (window[0] < span[1] and span[0] < window[1])
                or self._chained(u, me)
            ]
        )

    def _chained(self, u: Any, me: tuple) -> bool:
        """Whether ``u`` is ``me`` or a channel of its program that meets it at a rank (a
        chain's stages: what one brings in, the next sends on)."""
        return u == me or (
            u in self.latency
            and me in self.latency
            and u[2] == me[2]
            and (u[0] in (me[0], me[1]) or u[1] in (me[0], me[1]))
        )


class _Crowd:
    """One link's users as arrays, in the order they came onto the link: :class:`_Few`'s
    sums as array passes (links with many users: direct sends, trees over long routes),
    in the same order and with the same arithmetic."""

    def __init__(
        self,
        on_link: dict[Any, float],
        width: dict[tuple[Any, int], int],
        e: int,
        latency: dict[tuple, float],
        windows: dict[Any, list[float]],
    ) -> None:
        keys = list(on_link)
        self.index = {u: i for i, u in enumerate(keys)}
        self.everyone = np.ones(len(keys), dtype=bool)
        counts = [width.get((u, e), 1) for u in keys]
        self.width = np.array(counts, dtype=np.float64)
        self.per_stream = np.array(
            [b / n for b, n in zip(on_link.values(), counts, strict=True)], dtype=np.float64
        )
        channel = [u in latency for u in keys]
        lanes: dict[Any, int] = {}
        self.lanes = lanes
        self.lane = np.array(
            [
                lanes.setdefault(u[2], len(lanes)) if c else -1
                for u, c in zip(keys, channel, strict=True)
            ],
            dtype=np.int64,
        )
        # A channel's two ranks (-1 for a program's work: never chained).
        self.src = np.array([u[0] if c else -1 for u, c in zip(keys, channel, strict=True)])
        self.dst = np.array([u[1] if c else -1 for u, c in zip(keys, channel, strict=True)])
        spans = [windows.get(u) for u in keys]
        self.timed = np.array([w is not None for w in spans], dtype=bool)
        self.start = np.array([w[0] if w else 0.0 for w in spans], dtype=np.float64)
        self.stop = np.array([w[1] if w else 0.0 for w in spans], dtype=np.float64)
        self.windows = windows
        self.latency = latency

    def chained(self, me: tuple) -> np.ndarray:
        """``me`` and the channels of its program that meet it at a rank."""
        if me not in self.latency:
            mask = np.zeros(len(self.index), dtype=bool)
        else:
            src, dst = self.src, self.dst
            mask = (self.lane == self.lanes.get(me[2], -2)) & (
                (src == me[0]) | (src == me[1]) | (dst == me[0]) | (dst == me[1])
            )
        mask[self.index[me]] = True
        return mask

    def together(self, me: tuple) -> np.ndarray:
        """``me`` and the users chained to it or active while it was (or never timed)."""
        span = self.windows.get(me)
        if span is None:
            return self.everyone
        mask = self.chained(me) | ~self.timed
        mask |= (self.start < span[1]) & (span[0] < self.stop)
        return mask

    def total_over(self, mask: np.ndarray, mine: float) -> float:
        """Σ min(bytes per stream, ``mine``) x streams over the users in ``mask``, summed
        one after another in the users' order (as Python's ``sum`` would)."""
        parts = np.minimum(self.per_stream[mask], mine) * self.width[mask]
        return float(np.cumsum(parts)[-1]) if len(parts) else 0

    def total(self, mine: float) -> float:
        return self.total_over(self.everyone, mine)

    def chained_total(self, mine: float, me: tuple) -> float:
        return self.total_over(self.chained(me), mine)

    def together_total(self, mine: float, me: tuple) -> float:
        return self.total_over(self.together(me), mine)


def _pipeline_busy(
    machine: _Machine,
    shapes: Sequence[tuple[_Shape, int]],
    windows: dict[Any, list[float]],
    necks: dict[Any, int],
    stages: list[tuple[float, float]],
) -> dict[Any, float]:
    """Each resource's time per piece when a phase's steps all run at once.

    ``necks`` is filled with the link that sets the time of each user held back by
    others sharing it (whose first piece went alone over it: see :func:`_pipelined_end`);
    ``stages`` with each step's time as a stage of the pipeline in its steady state
    (a step repeated r times is r stages).

    In a pipeline's steady state every step works on some piece.  A link
    carries the bytes of all steps.  Its users are the channels (messages one
    after another) and the programs' work streams (items one after another, an
    item's streams side by side) that cross it; they share it as processor
    sharing does: a user moving b bytes over it per piece takes Σ_g min(b_g, b)/B
    over every user g (B: the link's bandwidth).  A channel's time is its
    messages' latencies plus its share of its slowest link among the users it
    moved beside in the first piece (``windows``: they stay in step with it), or
    its share among all users if that is longer (the others fill the link while
    it waits out a latency); a program's is its vector-engine time or its
    slowest port's share, whichever is longer.
    """
    ppb = machine.ppb
    carried: dict[int, float] = defaultdict(float)
    latency: dict[tuple, float] = defaultdict(float)  # per channel
    # Per channel: a message's credit comes back a round trip after it left, so a
    # channel of depth d moves at most d messages per round trip.
    round_trips: dict[tuple, float] = defaultdict(float)
    users: dict[int, dict[Any, float]] = defaultdict(partial(defaultdict, float))  # bytes
    width: dict[tuple[Any, int], int] = defaultdict(int)  # a program's streams side by side
    compute: dict[Thread, float] = defaultdict(float)
    for shape, repeat in shapes:
        for total in (shape.load, shape.alongside_load, shape.after_load):
            for e, b in total.items():
                carried[e] += b * repeat
        for i, key in enumerate(shape.channel):
            latency[key] += repeat * machine.overhead_ps  # route tails overlap the next
            trip = machine.overhead_ps + shape.alone[i] + shape.tail[i] + shape.back[i]
            round_trips[key] += repeat * trip
            b = repeat * shape.nbytes[i]
            for e in shape.route[i]:
                users[e][key] += b
        for thread, item in _work_items(shape):
            compute[thread] += repeat * item.compute_ps
            for e, n in item.streams.items():
                users[e][thread] += repeat * item.load[e]
                width[thread, e] = max(width[thread, e], n)

    # Each link's users, summed over one by one or, on a link with many, as arrays.
    links: dict[int, _Alone | _Few | _Crowd] = {}

    def sharing(e: int) -> _Alone | _Few | _Crowd:
        found = links.get(e)
        if found is None:
            on_link = users[e]
            if len(on_link) == 1:
                ((u, b),) = on_link.items()
                n = width.get((u, e), 1)
                found = _Alone(b / n, n)
            else:
                kind = _Crowd if len(on_link) >= _CROWDED_LINK else _Few
                found = kind(on_link, width, e, latency, windows)
            links[e] = found
        return found

    # A user moving b bytes over a link per piece takes its share of the link with every
    # user of it: sharing(e).total(b) x ps per byte.
    busy: dict[Any, float] = {e: b * ppb[e] for e, b in carried.items()}
    for e, on_link in users.items():
        # A link's only user shares it with no one: each sum below is its own streams'
        # (as an _Alone sums them; the many links with one user make none).
        link = sharing(e) if len(on_link) > 1 else None
        for user, b in on_link.items():
            n = width.get((user, e), 1)
            mine = b / n
            t = (link.total(mine) if link else mine * n) * ppb[e]
            neck: int | None = e if t > mine * ppb[e] else None
            if user in latency:
                # The users a channel moved beside in the first piece stay in step with
                # it: they share the link while it moves and wait while it waits, so
                # its latencies add to their share.  The others fill the link while it
                # waits: they only bound it by the link's capacity.
                in_step = (link.together_total(mine, user) if link else mine * n) * ppb[e]
                if in_step + latency[user] >= t:
                    t, neck = in_step + latency[user], None
            if t > busy.get(user, 0.0):
                busy[user] = t
                if neck is None:
                    necks.pop(user, None)
                else:
                    necks[user] = neck
    for key, t in latency.items():
        busy[key] = max(busy.get(key, 0.0), t, round_trips[key] / machine.depth)
    for thread, t in compute.items():
        busy[thread] = max(busy.get(thread, 0.0), t)
    # Each step as a pipeline stage: its slowest message sharing its links with the
    # channels chained to it (a chain's stage shares its ports with the next one's);
    # ``stages`` holds (a piece's time through the stage, the stage's time per piece).
    stages.clear()
    started = False  # whether a stage with messages is in: the first goes alone
    # Each step's (alone, behind, service): a step sending the same messages as one
    # before it (a ring's steps) takes the same.
    done: list[tuple[_Shape, tuple[float, float, float]]] = []
    for shape, repeat in shapes:
        for other, times in done:
            if _same_messages(shape, other):
                alone, behind, service = times
                break
        else:
            alone = behind = service = 0.0
            for i, key in enumerate(shape.channel):
                share = max(
                    (
                        sharing(e).chained_total(shape.nbytes[i], key) * ppb[e]
                        for e in shape.route[i]
                    ),
                    default=0.0,
                )
                ahead = machine.overhead_ps + shape.tail[i]
                alone = max(alone, ahead + shape.alone[i])
                # Behind the first stage the next piece lands where this one leaves (a
                # chain's rank takes in piece k+1 while it sends piece k on): the two
                # share the rank's ports, the landing a route tail ahead, so the first
                # piece takes its share less that head start (its time alone if the
                # tail is longer).
                behind = max(behind, ahead + max(shape.alone[i], share - shape.tail[i]))
                service = max(service, machine.overhead_ps + share)
            done.append((shape, (alone, behind, service)))
        if shape.channel and not started:  # the first stage: its first piece goes alone
            stages.append((alone, service))
            repeat -= 1
            started = True
        stages.extend([(behind, service)] * repeat)
    return busy


def _same_messages(a: _Shape, b: _Shape) -> bool:
    """Whether two steps send the same messages (channels, bytes and routes)."""
    return (
        a.channel == b.channel
        and a.nbytes == b.nbytes
        and a.route == b.route
        and a.tail == b.tail
        and a.alone == b.alone
    )


def _pipelined_end(
    clock: _Clock, busy: dict[Any, float], pieces: int, necks: dict[Any, int]
) -> float:
    """How much longer than its first piece a phase of ``pieces`` pieces takes.

    Every further piece costs each resource its busy time per piece b; a
    resource that was active from s to e for the first piece with idle time
    in between (e − s > b) takes the next pieces' work into that slack, so
    the phase takes (pieces − 1)·b − min(e − s − b, (pieces − 1)·b) longer,
    for the resource for which that is the most.
    A user held back by the others on a link (its ``necks`` entry) takes the
    link's idle time inside the first piece as its slack: its first piece
    crossed the link alone, the others' at other times.
    """
    longest = 0.0
    windows = clock.windows or {}
    for resource, per_piece in busy.items():
        neck = necks.get(resource)
        start, stop = windows.get(resource if neck is None else neck, (0.0, 0.0))
        # A link's idle time inside the first piece is its window less its own work.
        idle = max(0.0, stop - start - (per_piece if neck is None else busy[neck]))
        # The later pieces fill that idle time as far as their own work goes: each
        # reaches a step as the piece ahead leaves it (a ring's channel and link in
        # two pieces are busy back to back: the second piece's message goes while
        # the first one's tail and reduction run).
        slack = min(idle, (pieces - 1) * per_piece)
        longest = max(longest, (pieces - 1) * per_piece - slack)
    return longest


def _rounds(machine: _Machine, shapes: Sequence[tuple[_Shape, int]], pieces: int) -> float:
    """A pipeline's time as rounds: in round r piece k is at step r - k (the steps of
    the phase in order, a step repeated n times being n steps), every resource takes
    the work of the steps active in the round, and a round lasts as long as its
    busiest resource (a link or port: its bytes at its bandwidth; a program: its
    vector-engine time).  Latencies are left to the stages (see :func:`price`)."""
    ppb = machine.ppb
    runs: list[tuple[dict[Any, float], int]] = []
    for shape, repeat in shapes:
        work: dict[Any, float] = defaultdict(float)
        for total in (shape.load, shape.alongside_load, shape.after_load):
            for e, b in total.items():
                work[e] += b * ppb[e]
        for thread, item in _work_items(shape):
            work[thread] += item.compute_ps
        if work and repeat > 0:
            runs.append((work, repeat))
    # Each run's work as an array over the phase's resources, 0 where it has none (the
    # resource's sum then takes nothing from it: every work is a time, never below 0).
    index: dict[Any, int] = {}
    for work, _ in runs:
        for key in work:
            index.setdefault(key, len(index))
    arrays = []
    for work, _ in runs:
        array = np.zeros(len(index))
        array[[index[key] for key in work]] = list(work.values())
        arrays.append(array)
    # In round r the steps r - pieces + 1 .. r (those there are) are active: each round
    # one more step comes in (while there are more) and one goes out (once the first
    # piece is through).  A round's work depends only on how many of each run's steps
    # are active: a ring's rounds come in a few kinds.
    run_of = [j for j, (_, repeat) in enumerate(runs) for _ in range(repeat)]
    steps = len(run_of)
    counts = [0] * len(runs)
    busiest: dict[tuple[int, ...], float] = {}
    total = 0.0
    for r in range(steps + pieces - 1):
        if r < steps:
            counts[run_of[r]] += 1
        if r >= pieces:
            counts[run_of[r - pieces]] -= 1
        active = tuple(counts)
        found = busiest.get(active)
        if found is None:
            merged = np.zeros(len(index))
            for n, array in zip(active, arrays, strict=True):
                if n:
                    merged += n * array
            found = busiest[active] = float(merged.max(initial=0.0))
        total += found
    return total


def _repeat(machine: _Machine, shape: _Shape, clock: _Clock, times: int) -> None:
    """Follow a step ``times`` times, extending a symmetric one instead of following it.

    A step that moves every program and channel on by the same time is
    extended by that much per remaining repetition; one that does not is
    followed a few times (as many as it has programs, up to a limit: a turn of
    a ring) and then extended at the pace of its slowest program or channel,
    its mean per repeat after the first (a rank behind a ring's slow hop falls
    behind once; the slow hop then passes round the ring).
    """
    channels = [shape.channel[i] for i in shape.last]
    # A ring's ranks do not go in lock step: a rank behind a slow hop falls behind
    # once and the slow hop passes round, so a rank's pace is its mean over a turn
    # of the ring (up to _FOLLOWED_TURN repeats), after the first repeat.
    turn = min(len(shape.threads), _FOLLOWED_TURN, _FOLLOWED_MESSAGES // max(1, len(shape.src)))
    turn = max(_FOLLOWED_REPEATS, turn)

    before = [clock.at(thread) for thread in shape.threads] + [
        clock.free.get(key, 0.0) for key in channels
    ]
    for done in range(1, times + 1):
        after = _advance(machine, shape, clock)
        if done == 1:
            start = after  # the mean pace is taken after the first repeat
        deltas = [b - a for a, b in zip(before, after, strict=True)]
        before = after
        left = times - done
        if not left or not deltas:
            return
        uniform = max(deltas) - min(deltas) <= _UNIFORM_PS
        if uniform or done >= turn:
            if not uniform and done > 1:
                deltas = [(b - a) / (done - 1) for a, b in zip(start, after, strict=True)]
            extra = left * max(deltas)
            clock.shift(extra, shape.channel)
            if clock.windows is not None:  # the resources stay active over the repeats
                used = {*shape.channel, *shape.threads, *chain.from_iterable(shape.route)}
                for resource in used:
                    window = clock.windows.get(resource)
                    if window is not None:
                        window[1] += extra
            return


class Pricing:
    """Schedules of one configuration on one group of PEs, priced one after another.

    The ranks' routes and their costs are looked up once for all of them (the
    tuner prices a schedule in a few piece counts).  Made for one question and
    dropped after it: it keeps what it looked up from the context.
    """

    def __init__(
        self, ctx: RuntimeContext, config: AlgorithmConfig, pes: Sequence[str], itemsize: int = 4
    ) -> None:
        self._machine = _Machine(ctx, config, pes, itemsize)

    def route_hops(self, schedule: Schedule) -> int:
        """See :func:`route_hops`."""
        route = self._machine.message_route
        return sum(
            len(route(m)) for phase in schedule for step in phase.steps for m in step.messages
        )

    def price(self, schedule: Schedule) -> Priced:
        """See :func:`price`."""
        return _price(self._machine, schedule)


def route_hops(
    ctx: RuntimeContext, config: AlgorithmConfig, pes: Sequence[str], schedule: Schedule
) -> int:
    """The links the messages of ``schedule``'s steps cross, summed once per step (not
    per repeat or piece): what pricing it costs grows with this (a double binary
    tree over a ring of 1,024 chips crosses 1.06 M, a ring over 1,024 PEs of
    rack.yaml 4,384)."""
    return Pricing(ctx, config, pes).route_hops(schedule)


def price(
    ctx: RuntimeContext,
    config: AlgorithmConfig,
    pes: Sequence[str],
    schedule: Schedule,
    itemsize: int = 4,
) -> Priced:
    """The time of ``schedule`` for ``config`` on ``pes``, and the bound under it."""
    return Pricing(ctx, config, pes, itemsize).price(schedule)


def _price(machine: _Machine, schedule: Schedule) -> Priced:
    """:func:`price` on the machine's view of a configuration and its ranks."""
    clock = _Clock(len(machine.pes))
    carried: dict[int, float] = defaultdict(float)
    worked: set[int] = set()  # links and ports that local work streams through
    fastest = math.inf
    for phase in schedule:
        shapes = []
        clock.windows = {} if phase.pieces > 1 else None
        phase_start = max([clock.last, *clock.base])
        for step in phase.steps:
            shape = _shape(machine, step)
            shapes.append((shape, step.repeat))
            _repeat(machine, shape, clock, step.repeat)
            fastest = min(fastest, shape.fastest)
            for total in (shape.load, shape.alongside_load, shape.after_load):
                for e, b in total.items():
                    carried[e] += b * step.repeat * phase.pieces
            worked.update(shape.alongside_load, shape.after_load)
        if phase.pieces > 1:
            channels = [key for shape, _ in shapes for key in shape.channel]
            necks: dict[Any, int] = {}
            stages: list[tuple[float, float]] = []
            busy = _pipeline_busy(machine, shapes, clock.windows or {}, necks, stages)
            longer = _pipelined_end(clock, busy, phase.pieces, necks)
            # Stages that share a resource in the steady state do so from the second
            # piece on, so the first piece does not go alone: a pipeline of stages
            # takes them all for the first piece and its slowest for every further one.
            # A piece takes each stage's latency, the stages take it once.
            staged = sum(t for t, _ in stages) + (phase.pieces - 1) * max(
                (per_piece for _, per_piece in stages), default=0.0
            )
            first = max([clock.last, *clock.base, *clock.lanes.values()]) - phase_start
            # Nor faster than its pieces through its steps in rounds (a tree's interior
            # ranks take a piece in from their children while they send one on).
            rounds = _rounds(machine, shapes, phase.pieces)
            clock.shift(max(longer, staged - first, rounds - first), channels)
            clock.windows = None
        clock.join()
    end = max([clock.last, *clock.base])

    def needs(e: int) -> float:
        """The least time link ``e`` needs: its bytes at full bandwidth, after the endpoint
        overhead every message pays first unless local work (no overhead) uses it too."""
        return carried[e] * machine.ppb[e] + (0 if e in worked else machine.overhead_ps)

    busiest = max(carried, key=needs, default=None)
    bound = max(0.0 if busiest is None else needs(busiest), 0.0 if math.isinf(fastest) else fastest)
    name = machine.edges[busiest].name if busiest is not None else ""
    link_bytes = {machine.edges[e].name: b for e, b in carried.items()}
    return Priced(machine.launch_ps + end, machine.launch_ps + bound, name, link_bytes)
