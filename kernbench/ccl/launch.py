"""Turn a collective call into per-rank, per-lane programs on the PEs.

A device tensor takes part *shard-lane by shard-lane*: lane j of a tensor is
its j-th distinct region (replica 0).  Elementwise collectives (all-reduce,
broadcast, reduce, send/recv) run one independent instance per lane, on the
PEs holding that lane on every rank; collectives that change shapes (gathers,
scatters, all-to-all) need tensors with a single lane.

A launch (1) picks the algorithm configuration (explicit, the run's choice,
or the tuner's for ``auto``) and lays its ranks over the machine
(:mod:`kernbench.ccl.mapping`: algorithm rank i is played by user rank
``order[i]``, which gets its own buffers, so blocks, roots and outputs stay
the user's), (2) installs the IPCQ neighbour tables the
algorithm needs on every PE, once per (configuration, PEs) — timed messages
host -> M_CPU -> PE, (3) pays the PEs' launch overhead and runs the programs,
(4) refreshes replicas of regions it changed.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Generator, Sequence
from typing import TypeVar

import numpy as np

from kernbench.ccl.algorithms import Algorithm, OpArgs, get_algorithm
from kernbench.ccl.buffers import buffer_node
from kernbench.ccl.catalogue import AlgorithmConfig
from kernbench.ccl.comm import Comm, LaneBuffer, Region
from kernbench.ccl.mapping import algorithm_order, is_identity
from kernbench.ccl.ops import check_op
from kernbench.ccl.record import record_cache, record_lane, run_for_values
from kernbench.ccl.settings import ccl_settings
from kernbench.ccl.tuner import PieceChoice, auto_choice, unfit, with_choice
from kernbench.distributed.world import set_p2p_launch
from kernbench.errors import DistributedError, KernBenchError
from kernbench.machine import IpcqInstall
from kernbench.machine.api import Clock, Event, Machine
from kernbench.machine.observe import CollectiveRefused
from kernbench.machine.programs import RecordedCollective
from kernbench.runtime import RuntimeContext
from kernbench.runtime.tensor import DeviceTensor
from kernbench.topology import names

__all__ = ["lanes_of", "single_lane", "CollectiveLauncher"]

INSTALL_ENTRY_BYTES = 16

# Why a machine that prices collectives step-wide runs one message by message when
# another collective is in flight: a collective priced step-wide is priced alone, so
# the flows of two overlapping ones would not share the links they both cross (two
# rings on the odd and the even chips of ring8 came out 47% fast).  On the fabric
# their flows share the links exactly.
OVERLAPPING = "other collectives in flight at the same time"

# Per machine: the collectives started (``finish``) and not yet ended.  Held weakly: one
# that never ends (its run stopped or failed) must not keep its tensors, or the machine
# its launcher refers to, alive.
_IN_FLIGHT: weakref.WeakKeyDictionary[Machine, weakref.WeakSet[CollectiveLauncher]] = (
    weakref.WeakKeyDictionary()
)

# Routes listed at most to tell whether two collectives in flight cross a common link.
LINKS_MAX_ROUTES = 200_000
_UNKNOWN = object()

T = TypeVar("T")


def lanes_of(tensor: DeviceTensor) -> list[LaneBuffer]:
    """One :class:`LaneBuffer` per distinct region of ``tensor`` (its replica 0)."""
    store = tensor.context.store
    lanes = []
    for p in tensor.placements:
        if p.shard.replica:
            continue
        count = int(np.prod(p.shard.shape, dtype=np.int64))
        storage = None
        if store.stores_bytes and p.pa is not None:
            storage = store.view(p.pa, p.shard.nbytes).view(tensor.dtype.storage)
        lanes.append(
            LaneBuffer(
                p.pe_name, p.memory_node, tensor.dtype, count, storage, tensor.name, owner=tensor
            )
        )
    return lanes


def single_lane(tensor: DeviceTensor, op: str) -> LaneBuffer:
    lanes = lanes_of(tensor)
    if len(lanes) != 1:
        raise DistributedError(
            f"{op}: tensor {tensor.name!r} is split over {len(lanes)} PEs; this collective "
            "needs tensors held whole by one PE (create them without dp=, or with "
            "num_pes=1 at every split level)"
        )
    return lanes[0]


def choose(
    ctx: RuntimeContext, op: str, requested: str | None, size: int, nbytes: int, pes: Sequence[str]
) -> tuple[str, AlgorithmConfig, Algorithm]:
    """The configuration a call runs with, checked against the group size."""
    name, config, algorithm, _ = _choice(ctx, op, requested, size, nbytes, pes)
    return name, config, algorithm


def _choice(
    ctx: RuntimeContext, op: str, requested: str | None, size: int, nbytes: int, pes: Sequence[str]
) -> tuple[str, AlgorithmConfig, Algorithm, PieceChoice]:
    """:func:`choose`, and how the call's piece count came about."""
    settings = ccl_settings(ctx)
    choice = settings.choice(op) if requested is None else requested  # "" is not a choice
    if choice == "auto":
        choice = auto_choice(ctx, op, size, nbytes, list(pes))
    name, config = settings.resolve(choice)
    algorithm = get_algorithm(config.module)
    reason = unfit(config, op, pes)
    if reason:
        raise DistributedError(
            f"{op}: configuration {name!r} cannot run on this group of {size} ranks: {reason}; "
            "choose another (or auto)"
        )
    tuned, pieces = with_choice(ctx, op, config, pes, nbytes)
    return name, tuned, algorithm, pieces


class CollectiveLauncher:
    """Runs one collective's programs on the machine; ``finish()`` fires when all finish."""

    _ids = itertools.count()

    def __init__(
        self, ctx: RuntimeContext, op: str, name: str, config: AlgorithmConfig, algorithm: Algorithm
    ) -> None:
        self.ctx = ctx
        self.machine: Machine = ctx.machine
        self.env: Clock = ctx.machine.clock
        self.op = op
        self.config_name = name
        self.config = config
        self.algorithm = algorithm
        self.key = (op, next(self._ids))
        self.launch_ps = self.env.now
        self.algo_start_ps: int | None = None
        self.end_ps: int | None = None
        self.nbytes = 0
        self.ranks = 0  # ranks of the widest lane
        self.evaluated = False  # priced step-wide by the machine (not run message by message)
        # When priced although its ranks drift apart (simulation.drift: approximate): how
        # many message times apart flows sharing a link started; 0.0 otherwise.
        self.drift = 0.0
        # When priced although its ranks drift apart or its channels keep a backlog,
        # because that can make no rank's time longer by more than a bound: that
        # share; None otherwise.
        self.bound: float | None = None
        # Why a machine that prices programs step-wide ran this one message by message.
        self.refused = ""
        # Priced step-wide, alone, and another collective then started before it ended:
        # its time leaves that collective's traffic out (and that one's leaves it out).
        self.overlapped = False
        self._crossed: frozenset[int] | None | object = _UNKNOWN  # see _links
        # The pieces an algorithm that pipelines cut the data into, and how that count
        # came about (kernbench.ccl.tuner.chunk_choice); None when not chosen per call.
        self.pieces: PieceChoice | None = None
        # Per lane: its communicators, programs and each rank's memory node.
        self._lanes: list[tuple[list[Comm], list[Callable[[Comm], Generator]], list[str]]] = []
        # Per lane: algorithm rank i is played by user rank order[i] (kernbench.ccl.mapping).
        self.orders: list[tuple[int, ...]] = []
        self._refresh: list[DeviceTensor] = []

    def lane(
        self,
        programs: Sequence[Callable[[Comm], Generator]],
        pes: list[str],
        memory_nodes: list[str],
        *,
        op: str = "sum",
        lane: int = 0,
        order: Sequence[int] | None = None,
    ) -> None:
        """One program per rank of one lane; rank i runs ``programs[i]`` on ``pes[i]``.

        ``order``: the user rank each algorithm rank plays (default: itself), for the
        trace and the report.
        """
        nodes = [
            buffer_node(pe, node, self.config.buffer)
            for pe, node in zip(pes, memory_nodes, strict=True)
        ]
        params = {"chunks": self.config.chunks, **self.config.params}
        comms = [
            Comm(
                self.machine,
                rank,
                pes,
                nodes,
                op=op,
                key=(self.key, lane),
                depth=self.config.queue_depth,
                params=params,
            )
            for rank in range(len(pes))
        ]
        self._lanes.append((comms, list(programs), list(memory_nodes)))
        self.orders.append(tuple(range(len(pes)) if order is None else order))
        self.ranks = max(self.ranks, len(pes))

    def order_of(self, pes: Sequence[str], root: int = 0) -> tuple[int, ...]:
        """The order this launch's algorithm runs the user ranks on ``pes`` in."""
        return algorithm_order(self.machine, self.algorithm.mapping, pes, root)

    @property
    def order(self) -> tuple[int, ...] | None:
        """The first lane's order when it is not the user's (for reports), else None."""
        if not self.orders or is_identity(self.orders[0]):
            return None
        return self.orders[0]

    def refresh_replicas(self, tensor: DeviceTensor) -> None:
        self._refresh.append(tensor)

    def finish(self) -> Event:
        """Start the programs now (a group's earlier collective may have held this one back)."""
        self.launch_ps = self.env.now
        done = self.env.event()
        in_flight = _IN_FLIGHT.setdefault(self.machine, weakref.WeakSet())
        in_flight.add(self)

        def body() -> Generator:
            yield from self._install()
            overhead = max(
                (
                    self.machine.pe_spec(c.pe).launch_overhead_ps
                    for comms, _, _ in self._lanes
                    for c in comms
                ),
                default=0,
            )
            yield self.env.timeout(overhead)
            self.algo_start_ps = self.env.now
            times = self._evaluated()
            if times is None:
                processes = [
                    self.env.process(self._on_pe(comm, program, user))
                    for (comms, programs, _), order in zip(self._lanes, self.orders, strict=True)
                    for comm, program, user in zip(comms, programs, order, strict=True)
                ]
            else:
                processes = [
                    self.env.process(self._timed(comm, ps, user))
                    for (comms, _, _), order, lane_times in zip(
                        self._lanes, self.orders, times, strict=True
                    )
                    for comm, ps, user in zip(comms, lane_times, order, strict=True)
                ]
            yield self.env.all_of(processes)
            yield from self._refresh_all()
            self.end_ps = self.env.now
            in_flight.discard(self)
            self.machine.close_channels(self.key)
            # The launcher stays on as the run's record of this collective: it must not
            # keep the tensors (and their memory) alive once they are done with.
            self._lanes.clear()
            self._refresh.clear()
            done.succeed()

        self.env.process(body())
        return done

    def _evaluated(self) -> list[list[int]] | None:
        """Each rank's time from the machine's step-wide evaluation of the recorded
        programs (values computed alongside), or ``None``: run them on the machine."""
        if not self.machine.evaluates_programs:
            return None
        others = [
            c for c in _IN_FLIGHT.get(self.machine, ()) if c is not self and self._shares_with(c)
        ]
        if others:
            for other in others:
                other.overlapped = other.overlapped or other.evaluated
            self._refuse(OVERLAPPING)
            return None
        cache = record_cache(self.machine)
        lanes = []
        for comms, programs, memory in self._lanes:
            c = comms[0]
            signatures = [getattr(program, "signature", None) for program in programs]
            key = None
            if None not in signatures:
                key = (c.op, c.depth, repr(sorted(c.params.items())), tuple(c.pes))
                key += (tuple(c.nodes), tuple(memory), tuple(signatures))
            found, lane = cache.get(key)
            if not found:
                lane = record_lane(
                    programs, c.pes, c.nodes, memory, op=c.op, depth=c.depth, params=c.params
                )
                cache.put(key, lane)
            lanes.append(lane)
        if any(lane is None for lane in lanes):
            self._refuse("programs too irregular to record")
            return None  # run it on the machine
        recorded = RecordedCollective(lanes, tag=f"{self.op} {self.config_name}")
        times = self.machine.evaluate_programs(recorded)
        self.evaluated = times is not None
        self.drift = float(recorded.meta.get("drift", 0.0))
        bound = recorded.meta.get("bound")
        self.bound = None if bound is None else float(bound)
        if times is None:
            self._refuse(str(recorded.meta.get("refused", "")))
        if times is not None and self.ctx.store.stores_bytes:
            for comms, programs, _ in self._lanes:
                c = comms[0]
                run_for_values(programs, c.pes, c.nodes, op=c.op, depth=c.depth, params=c.params)
        return times

    def _shares_with(self, other: CollectiveLauncher) -> bool:
        """Whether ``other``'s messages or memory streams may cross a link this one's do
        (so one priced alone would leave the other's traffic out)."""
        mine, theirs = self._links(), other._links()
        return mine is None or theirs is None or not mine.isdisjoint(theirs)

    def _links(self) -> frozenset[int] | None:
        """The links this collective's messages and memory streams can cross: the routes
        from every rank (its PE and buffer) to the peers of its neighbour table, and
        between its PE, buffer and memory.  ``None`` when not known (its tables not yet
        installed, a route down, or more than :data:`LINKS_MAX_ROUTES` routes): take it
        as crossing every link."""
        if self._crossed is not _UNKNOWN:
            return self._crossed
        plans = ccl_settings(self.ctx).plans
        pairs: set[tuple[str, str]] = set()
        for comms, _, memory in self._lanes:
            table = plans.get((self.config_name, self.op, tuple(c.pe for c in comms)))
            if not isinstance(table, dict):
                return None  # not installed yet: known once its programs start
            place = {pe: rank for rank, pe in enumerate(comms[0].pes)}
            for comm, home in zip(comms, memory, strict=True):
                node = comm.nodes[comm.rank]
                for a, b in ((comm.pe, node), (comm.pe, home), (node, home)):
                    pairs.update(((a, b), (b, a)))
                for peer in table.get(comm.pe, ()):
                    pairs.update(((comm.pe, peer), (node, comm.nodes[place[peer]])))
                if len(pairs) > LINKS_MAX_ROUTES:
                    return None
        links: set[int] = set()
        try:
            for src, dst in pairs:
                if src != dst:
                    links.update(self.machine.route_cost(src, dst).edges)
        except KernBenchError:
            return None
        self._crossed = frozenset(links)
        return self._crossed

    def _refuse(self, reason: str) -> None:
        """Note (and tell the machine's observers) why this call runs message by message."""
        self.refused = reason
        hooks = self.machine.observers.refused
        if hooks:
            record = CollectiveRefused(self.op, self.config_name, self.ranks, reason)
            for hook in hooks:
                hook(record)

    def _timed(self, comm: Comm, ps: int, user: int) -> Generator:
        start = self.env.now
        yield self.env.timeout(ps)
        self._record(comm, start, user)

    def _on_pe(self, comm: Comm, program: Callable[[Comm], Generator], user: int) -> Generator:
        start = self.env.now
        yield from program(comm)
        self._record(comm, start, user)

    def _record(self, comm: Comm, start: int, user: int) -> None:
        self.machine.record(
            "collective",
            comm.pe,
            comm.pe,
            start,
            self.nbytes,  # the call's, as the report gives it
            f"{self.op} {self.config_name} rank {user} lane {comm.key[1]}",
        )

    def _install(self) -> Generator:
        """Install the neighbour tables this configuration needs, once per set of PEs."""
        plans = ccl_settings(self.ctx).plans
        installs = []
        for comms, _, _ in self._lanes:
            pes = tuple(c.pe for c in comms)
            key = (self.config_name, self.op, pes)
            if key in plans:
                continue
            table = {}
            params = comms[0].params or {}
            on = self.algorithm.peers_on
            every = on(self.op, comms[0].pes, params) if on is not None else None
            for comm in comms:
                peers = (
                    every[comm.rank]
                    if every is not None
                    else self.algorithm.neighbours(self.op, comm.size, comm.rank)
                )
                entries = tuple(sorted(comm.pes[p] for p in peers))
                table[comm.pe] = entries
                installs.append(
                    self.machine.submit(
                        IpcqInstall(
                            src=names.HOST,
                            dst=names.m_cpu_of(comm.pe),
                            targets=(comm.pe,),
                            entries=entries,
                            nbytes=INSTALL_ENTRY_BYTES * max(1, len(entries)),
                            tag=f"{self.config_name} plan",
                        )
                    ).event
                )
            plans[key] = table
        if installs:
            yield self.env.all_of(installs)

    def _refresh_all(self) -> Generator:
        copies = []
        for tensor in self._refresh:
            primaries = {
                tuple((s.start, s.stop) for s in p.shard.index): p
                for p in tensor.placements
                if p.shard.replica == 0
            }
            for p in tensor.placements:
                if p.shard.replica == 0 or p.pa is None:
                    continue
                source = primaries[tuple((s.start, s.stop) for s in p.shard.index)]
                copies.append(
                    self.machine.transfer(source.memory_node, p.memory_node, p.shard.nbytes)
                )
                store = tensor.context.store
                if store.stores_bytes:
                    store.write(p.pa, store.read(source.pa, p.shard.nbytes))
        if copies:
            yield self.env.all_of(copies)


def _lane_table(tensors: Sequence[DeviceTensor], op: str) -> list[list[LaneBuffer]]:
    """lanes[rank][lane], checking that every rank's tensor splits the same way."""
    table = [lanes_of(t) for t in tensors]
    sizes = {tuple(lane.count for lane in lanes) for lanes in table}
    if len(sizes) != 1:
        detail = ", ".join(
            f"rank {r}: {[lane.count for lane in lanes]}" for r, lanes in enumerate(table)
        )
        raise DistributedError(f"{op}: ranks' tensors are split differently ({detail})")
    return table


def _region_key(region: Region | None) -> tuple | None:
    if region is None:
        return None
    b = region.buffer
    return (b.pe, b.memory_node, b.dtype.name, b.count, region.start, region.stop)


def _args_key(args: OpArgs) -> tuple:
    """What a program's recording depends on: where its regions live and their sizes."""
    return (
        _region_key(args.buf),
        _region_key(args.inp),
        _region_key(args.out),
        tuple(map(_region_key, args.blocks)),
        tuple(map(_region_key, args.sends)),
        tuple(map(_region_key, args.recvs)),
        args.root,
    )


def _mapped(items: Sequence[T], order: Sequence[int]) -> list[T]:
    """``items`` (one per user rank) in algorithm-rank order: item i is ``items[order[i]]``."""
    return [items[r] for r in order]


def _program(
    algorithm: Algorithm,
    op: str,
    args: OpArgs,
    after: Callable[[Comm], Generator] | None = None,
    averaged: _Premultiplied | None = None,
) -> Callable[[Comm], Generator]:
    """The rank's program: ``averaged`` scales its inputs first (values only) and puts
    back afterwards what is not the result; ``after`` runs last."""
    body = algorithm.programs[op]

    def program(c: Comm) -> Generator:
        if averaged is not None:
            averaged.scale(c)
        yield from body(c, args)
        if after is not None:
            yield from after(c)
        if averaged is not None:
            averaged.restore()

    # Two programs with equal signatures record the same operations (RecordCache);
    # premultiplying changes values, not operations.
    tail = getattr(after, "signature", None) if after is not None else ()
    if tail is not None:
        program.signature = (algorithm.name, op, _args_key(args), tail)  # type: ignore[attr-defined]
    return program


class _Premultiplied:
    """A floating AVG's inputs of one rank, scaled by 1/p before the reduction as NCCL
    does (PreMulSum), and those that are inputs only put back when it is over."""

    def __init__(self, inputs: Sequence[Region], count: int, keep: Region | None) -> None:
        self.inputs, self.count, self.keep = list(inputs), count, keep
        self.held: list[np.ndarray | None] = []

    def scale(self, c: Comm) -> None:
        self.held = c.premultiply(self.inputs, self.count)

    def restore(self) -> None:
        for region, values in zip(self.inputs, self.held, strict=True):
            if values is not None and not _overlaps(region, self.keep):
                region.write(values)
        self.held = []


def _overlaps(region: Region, other: Region | None) -> bool:
    """Whether two regions share elements (the result must not be put back over)."""
    if other is None:
        return False
    a, b = region.buffer.storage, other.buffer.storage
    if a is None or b is None:
        return False
    return bool(np.shares_memory(a[region.start : region.stop], b[other.start : other.stop]))


def _launcher(
    ctx: RuntimeContext, op: str, algorithm: str | None, size: int, nbytes: int, pes: Sequence[str]
) -> CollectiveLauncher:
    name, config, algo, pieces = _choice(ctx, op, algorithm, size, nbytes, pes)
    launcher = CollectiveLauncher(ctx, op, name, config, algo)
    launcher.nbytes = nbytes
    launcher.pieces = pieces
    return launcher


def _average(region: Region, size: int) -> Callable[[Comm], Generator]:
    def after(c: Comm) -> Generator:
        yield from c.average(region, size)

    after.signature = ("average", _region_key(region), size)  # type: ignore[attr-defined]
    return after


def elementwise(
    ctx: RuntimeContext,
    op: str,
    tensors: Sequence[DeviceTensor],
    *,
    redop: str = "sum",
    root: int = 0,
    algorithm: str | None = None,
) -> CollectiveLauncher:
    """all_reduce, broadcast and reduce: one instance per lane."""
    if op != "broadcast":
        check_op(redop, tensors[0].dtype.value)
    table = _lane_table(tensors, op)
    p = len(tensors)
    launcher = _launcher(
        ctx, op, algorithm, p, tensors[0].nbytes, [lane.pe for lane in (row[0] for row in table)]
    )
    for j in range(len(table[0])):
        lanes = [table[r][j] for r in range(p)]
        order = launcher.order_of([x.pe for x in lanes], root)
        args_root = order.index(root)
        programs = []
        premul = redop == "avg" and tensors[0].dtype.is_floating_point
        for r in order:
            region = lanes[r].region()
            result = op == "all_reduce" or r == root
            after = _average(region, p) if redop == "avg" and result else None
            scaled = _Premultiplied([region], p, region if result else None) if premul else None
            programs.append(
                _program(launcher.algorithm, op, OpArgs(buf=region, root=args_root), after, scaled)
            )
        mapped = [lanes[r] for r in order]
        launcher.lane(
            programs,
            [x.pe for x in mapped],
            [x.memory_node for x in mapped],
            op=redop,
            lane=j,
            order=order,
        )
    for r, t in enumerate(tensors):
        if op != "reduce" or r == root:
            launcher.refresh_replicas(t)
    return launcher


def _blocks(lane: LaneBuffer, parts: int, op: str) -> list[Region]:
    if lane.count % parts:
        raise DistributedError(
            f"{op}: tensor {lane.name!r} has {lane.count} elements, not a multiple of the "
            f"group size {parts}"
        )
    size = lane.count // parts
    return [lane.region(i * size, (i + 1) * size) for i in range(parts)]


def _block_list(value: Sequence[DeviceTensor] | DeviceTensor, parts: int, op: str) -> list[Region]:
    if isinstance(value, DeviceTensor):
        return _blocks(single_lane(value, op), parts, op)
    return [single_lane(t, op).region() for t in value]


def all_gather(
    ctx: RuntimeContext,
    outputs: Sequence[Sequence[DeviceTensor] | DeviceTensor],
    inputs: Sequence[DeviceTensor],
    algorithm: str | None = None,
) -> CollectiveLauncher:
    """``outputs[r]`` is a list of p tensors or one tensor of p blocks."""
    p = len(inputs)
    ins = [single_lane(t, "all_gather") for t in inputs]
    launcher = _launcher(ctx, "all_gather", algorithm, p, inputs[0].nbytes * p, [x.pe for x in ins])
    order = launcher.order_of([x.pe for x in ins])
    programs = [
        _program(
            launcher.algorithm,
            "all_gather",
            OpArgs(
                inp=ins[r].region(),
                blocks=tuple(_mapped(_block_list(outputs[r], p, "all_gather"), order)),
            ),
        )
        for r in order
    ]
    mapped = _mapped(ins, order)
    launcher.lane(programs, [x.pe for x in mapped], [x.memory_node for x in mapped], order=order)
    return launcher


def reduce_scatter(
    ctx: RuntimeContext,
    outputs: Sequence[DeviceTensor],
    inputs: Sequence[Sequence[DeviceTensor] | DeviceTensor],
    redop: str,
    algorithm: str | None = None,
) -> CollectiveLauncher:
    """``inputs[r]`` is a list of p tensors or one tensor of p blocks."""
    check_op(redop, outputs[0].dtype.value)
    p = len(outputs)
    outs = [single_lane(t, "reduce_scatter") for t in outputs]
    launcher = _launcher(
        ctx, "reduce_scatter", algorithm, p, outputs[0].nbytes * p, [x.pe for x in outs]
    )
    order = launcher.order_of([x.pe for x in outs])
    premul = redop == "avg" and outputs[0].dtype.is_floating_point
    programs = []
    for r in order:
        out = outs[r].region()
        blocks = tuple(_mapped(_block_list(inputs[r], p, "reduce_scatter"), order))
        after = _average(out, p) if redop == "avg" else None
        scaled = _Premultiplied(blocks, p, out) if premul else None
        programs.append(
            _program(
                launcher.algorithm, "reduce_scatter", OpArgs(out=out, blocks=blocks), after, scaled
            )
        )
    mapped = _mapped(outs, order)
    launcher.lane(
        programs, [x.pe for x in mapped], [x.memory_node for x in mapped], op=redop, order=order
    )
    return launcher


def _rooted(
    ctx: RuntimeContext,
    op: str,
    mine: Sequence[DeviceTensor],
    blocks: Sequence[DeviceTensor] | None,
    root: int,
    algorithm: str | None,
    field: str,
) -> CollectiveLauncher:
    """gather (``field="inp"``) and scatter (``field="out"``): root holds one block per rank."""
    lanes = [single_lane(t, op) for t in mine]
    p = len(lanes)
    launcher = _launcher(ctx, op, algorithm, p, mine[0].nbytes * p, [x.pe for x in lanes])
    order = launcher.order_of([x.pe for x in lanes], root)
    regions = tuple(_mapped([single_lane(t, op).region() for t in blocks or ()], order))
    programs = [
        _program(
            launcher.algorithm,
            op,
            OpArgs(
                **{field: lanes[r].region()},
                blocks=regions if r == root else (),
                root=order.index(root),
            ),
        )
        for r in order
    ]
    mapped = _mapped(lanes, order)
    launcher.lane(programs, [x.pe for x in mapped], [x.memory_node for x in mapped], order=order)
    return launcher


def gather(
    ctx: RuntimeContext,
    inputs: Sequence[DeviceTensor],
    blocks: Sequence[DeviceTensor] | None,
    root: int,
    algorithm: str | None = None,
) -> CollectiveLauncher:
    """Every rank's ``inputs[r]`` into the root's ``blocks[r]``."""
    return _rooted(ctx, "gather", inputs, blocks, root, algorithm, "inp")


def scatter(
    ctx: RuntimeContext,
    outputs: Sequence[DeviceTensor],
    blocks: Sequence[DeviceTensor] | None,
    root: int,
    algorithm: str | None = None,
) -> CollectiveLauncher:
    """The root's ``blocks[r]`` into every rank's ``outputs[r]``."""
    return _rooted(ctx, "scatter", outputs, blocks, root, algorithm, "out")


def all_to_all(
    ctx: RuntimeContext,
    sends: Sequence[Sequence[Region]],
    recvs: Sequence[Sequence[Region]],
    algorithm: str | None = None,
) -> CollectiveLauncher:
    """``sends[r][j]`` goes from rank r to rank j, into ``recvs[j][r]``."""
    p = len(sends)
    pes = [recvs[r][0].buffer.pe for r in range(p)]
    nodes = [recvs[r][0].buffer.memory_node for r in range(p)]
    nbytes = sum(region.nbytes for region in sends[0])
    launcher = _launcher(ctx, "all_to_all", algorithm, p, nbytes, pes)
    order = launcher.order_of(pes)
    programs = [
        _program(
            launcher.algorithm,
            "all_to_all",
            OpArgs(sends=tuple(_mapped(sends[r], order)), recvs=tuple(_mapped(recvs[r], order))),
        )
        for r in order
    ]
    launcher.lane(programs, _mapped(pes, order), _mapped(nodes, order), order=order)
    return launcher


def barrier(
    ctx: RuntimeContext, pes: list[str], algorithm: str | None = None
) -> CollectiveLauncher:
    launcher = _launcher(ctx, "barrier", algorithm, len(pes), 0, pes)
    order = launcher.order_of(pes)
    programs = [_program(launcher.algorithm, "barrier", OpArgs()) for _ in pes]
    mapped = _mapped(pes, order)
    launcher.lane(programs, mapped, mapped, order=order)
    return launcher


def send_recv(ctx: RuntimeContext, src: DeviceTensor, dst: DeviceTensor) -> CollectiveLauncher:
    """Point to point: ``src``'s lanes into ``dst``'s (same split)."""
    table = _lane_table([src, dst], "send/recv")
    launcher = CollectiveLauncher(
        ctx, "send_recv", "p2p", AlgorithmConfig(module="direct"), get_algorithm("direct")
    )
    launcher.nbytes = src.nbytes  # the message's, as a collective's call bytes
    for j in range(len(table[0])):
        a, b = table[0][j], table[1][j]

        def sender(c: Comm, a=a) -> Generator:
            yield from c.send(1, a.region())

        def receiver(c: Comm, b=b) -> Generator:
            yield from c.place(b.region(), (yield from c.recv(0)))

        launcher.lane([sender, receiver], [a.pe, b.pe], [a.memory_node, b.memory_node], lane=j)
    launcher.refresh_replicas(dst)
    return launcher


set_p2p_launch(send_recv)  # worlds run point-to-point transfers with it
