"""Turn a collective call into per-rank, per-lane programs on the PEs.

A device tensor takes part *shard-lane by shard-lane*: lane j of a tensor is
its j-th distinct region (replica 0).  Elementwise collectives (all-reduce,
broadcast, reduce, send/recv) run one independent instance per lane, on the
PEs holding that lane on every rank; collectives that change shapes (gathers,
scatters, all-to-all) need tensors with a single lane.  Replicas of a region
are refreshed from the lane after the algorithm.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np
import simpy

from kernbench.ccl import basic
from kernbench.ccl.comm import Comm, LaneBuffer, Region
from kernbench.ccl.ops import check_op
from kernbench.errors import DistributedError
from kernbench.runtime.tensor import DeviceTensor

__all__ = ["lanes_of", "single_lane", "CollectiveLauncher"]

Program = Callable[[Comm], Generator]


def lanes_of(tensor: DeviceTensor) -> list[LaneBuffer]:
    """One :class:`LaneBuffer` per distinct region of ``tensor`` (its replica 0)."""
    store = tensor._ctx.store
    lanes = []
    for p in tensor.placements:
        if p.shard.replica:
            continue
        count = int(np.prod(p.shard.shape, dtype=np.int64))
        storage = None
        if store.stores_bytes and p.pa is not None:
            storage = store.view(p.pa, p.shard.nbytes).view(tensor.dtype.storage)
        lanes.append(
            LaneBuffer(p.pe_name, p.memory_node, tensor.dtype, count, storage, tensor.name)
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


def scratch_like(lane: LaneBuffer, count: int | None = None) -> LaneBuffer:
    """A working buffer beside ``lane`` (the staging area the PE's collectives use)."""
    count = lane.count if count is None else count
    storage = None if lane.storage is None else np.zeros(count, dtype=lane.dtype.storage)
    return LaneBuffer(lane.pe, lane.memory_node, lane.dtype, count, storage, lane.name)


class CollectiveLauncher:
    """Runs one collective's programs on the machine; ``done`` fires when all finish."""

    _ids = itertools.count()

    def __init__(self, ctx: Any, name: str) -> None:
        self.ctx = ctx
        self.fabric = ctx.fabric
        self.env: simpy.Environment = ctx.fabric.env
        self.name = name
        self.key = (name, next(self._ids))
        self.start_ps = self.env.now
        self.end_ps: int | None = None
        self._processes: list[simpy.Process] = []
        self._refresh: list[DeviceTensor] = []

    def lane(
        self,
        programs: Sequence[Program],
        pes: list[str],
        nodes: list[str],
        *,
        op: str = "sum",
        lane: int = 0,
    ) -> None:
        """Start one program per rank of one lane (rank i runs ``programs[i]`` on ``pes[i]``)."""
        for rank, program in enumerate(programs):
            comm = Comm(self.fabric, rank, pes, nodes, op=op, key=(self.key, lane))
            self._processes.append(self.env.process(self._on_pe(comm, program)))

    def refresh_replicas(self, tensor: DeviceTensor) -> None:
        self._refresh.append(tensor)

    def _on_pe(self, comm: Comm, program: Program) -> Generator:
        start = self.env.now
        yield self.env.timeout(self.fabric.pe(comm.pe).launch_overhead_ps)
        yield from program(comm)
        lane = comm.key[1]
        self.fabric.record(
            "collective", comm.pe, comm.pe, start, 0, f"{self.name} rank {comm.rank} lane {lane}"
        )

    def finish(self) -> simpy.Event:
        done = self.env.event()

        def body() -> Generator:
            yield self.env.all_of(self._processes)
            yield from self._refresh_all()
            self.end_ps = self.env.now
            done.succeed()

        self.env.process(body())
        return done

    def _refresh_all(self) -> Generator:
        copies = []
        for tensor in self._refresh:
            primaries = {p.shard: p for p in tensor.placements if p.shard.replica == 0}
            by_region: dict[tuple, Any] = {
                tuple((s.start, s.stop) for s in shard.index): placement
                for shard, placement in primaries.items()
            }
            for p in tensor.placements:
                if p.shard.replica == 0 or p.pa is None:
                    continue
                source = by_region[tuple((s.start, s.stop) for s in p.shard.index)]
                copies.append(
                    self.fabric.transfer(source.memory_node, p.memory_node, p.shard.nbytes)
                )
                store = tensor._ctx.store
                if store.stores_bytes:
                    store.write(p.pa, store.read(source.pa, p.shard.nbytes))
        if copies:
            yield self.env.all_of(copies)


def _lane_table(tensors: Sequence[DeviceTensor], op: str) -> list[list[LaneBuffer]]:
    """lanes[rank][lane], checking that every rank's tensor splits the same way."""
    table = [lanes_of(t) for t in tensors]
    counts = {len(lanes) for lanes in table}
    sizes = {tuple(lane.count for lane in lanes) for lanes in table}
    if len(counts) != 1 or len(sizes) != 1:
        detail = ", ".join(
            f"rank {r}: {[lane.count for lane in lanes]}" for r, lanes in enumerate(table)
        )
        raise DistributedError(f"{op}: ranks' tensors are split differently ({detail})")
    return table


def all_reduce(ctx: Any, tensors: Sequence[DeviceTensor], op: str) -> CollectiveLauncher:
    check_op(op, tensors[0].dtype.value)
    launcher = CollectiveLauncher(ctx, "all_reduce")
    table = _lane_table(tensors, "all_reduce")
    p = len(tensors)
    for j in range(len(table[0])):
        lanes = [table[r][j] for r in range(p)]

        def program(c: Comm, lanes=lanes) -> Generator:
            region = lanes[c.rank].region()
            yield from basic.ring_all_reduce(c, region)
            if op == "avg":
                yield from c.average(region, c.size)

        launcher.lane(
            [program] * p,
            [lane.pe for lane in lanes],
            [lane.memory_node for lane in lanes],
            op=op,
            lane=j,
        )
    for t in tensors:
        launcher.refresh_replicas(t)
    return launcher


def broadcast(ctx: Any, tensors: Sequence[DeviceTensor], root: int) -> CollectiveLauncher:
    launcher = CollectiveLauncher(ctx, "broadcast")
    table = _lane_table(tensors, "broadcast")
    p = len(tensors)
    for j in range(len(table[0])):
        lanes = [table[r][j] for r in range(p)]

        def program(c: Comm, lanes=lanes) -> Generator:
            yield from basic.tree_broadcast(c, lanes[c.rank].region(), root)

        launcher.lane(
            [program] * p, [lane.pe for lane in lanes], [lane.memory_node for lane in lanes], lane=j
        )
    for t in tensors:
        launcher.refresh_replicas(t)
    return launcher


def reduce(ctx: Any, tensors: Sequence[DeviceTensor], root: int, op: str) -> CollectiveLauncher:
    check_op(op, tensors[0].dtype.value)
    launcher = CollectiveLauncher(ctx, "reduce")
    table = _lane_table(tensors, "reduce")
    p = len(tensors)
    for j in range(len(table[0])):
        lanes = [table[r][j] for r in range(p)]

        def program(c: Comm, lanes=lanes) -> Generator:
            mine = lanes[c.rank]
            yield from basic.tree_reduce(c, mine.region(), scratch_like(mine).region(), root)
            if op == "avg" and c.rank == root:
                yield from c.average(mine.region(), c.size)

        launcher.lane(
            [program] * p,
            [lane.pe for lane in lanes],
            [lane.memory_node for lane in lanes],
            op=op,
            lane=j,
        )
    launcher.refresh_replicas(tensors[root])
    return launcher


def _blocks(lane: LaneBuffer, parts: int, op: str) -> list[Region]:
    if lane.count % parts:
        raise DistributedError(
            f"{op}: tensor {lane.name!r} has {lane.count} elements, not a multiple of the "
            f"group size {parts}"
        )
    size = lane.count // parts
    return [lane.region(i * size, (i + 1) * size) for i in range(parts)]


def all_gather(
    ctx: Any,
    outputs: Sequence[Sequence[DeviceTensor] | DeviceTensor],
    inputs: Sequence[DeviceTensor],
) -> CollectiveLauncher:
    """``outputs[r]`` is a list of p tensors or one tensor of p blocks."""
    launcher = CollectiveLauncher(ctx, "all_gather")
    p = len(inputs)
    ins = [single_lane(t, "all_gather") for t in inputs]
    outs = []
    for out in outputs:
        if isinstance(out, DeviceTensor):
            outs.append(_blocks(single_lane(out, "all_gather"), p, "all_gather_into_tensor"))
        else:
            outs.append([single_lane(t, "all_gather").region() for t in out])

    def program(c: Comm) -> Generator:
        yield from basic.ring_all_gather(c, ins[c.rank].region(), outs[c.rank])

    launcher.lane([program] * p, [lane.pe for lane in ins], [lane.memory_node for lane in ins])
    return launcher


def reduce_scatter(
    ctx: Any,
    outputs: Sequence[DeviceTensor],
    inputs: Sequence[Sequence[DeviceTensor] | DeviceTensor],
    op: str,
) -> CollectiveLauncher:
    """``inputs[r]`` is a list of p tensors or one tensor of p blocks."""
    check_op(op, outputs[0].dtype.value)
    launcher = CollectiveLauncher(ctx, "reduce_scatter")
    p = len(outputs)
    outs = [single_lane(t, "reduce_scatter") for t in outputs]
    ins = []
    for inp in inputs:
        if isinstance(inp, DeviceTensor):
            ins.append(_blocks(single_lane(inp, "reduce_scatter"), p, "reduce_scatter_tensor"))
        else:
            ins.append([single_lane(t, "reduce_scatter").region() for t in inp])

    def program(c: Comm) -> Generator:
        out = outs[c.rank]
        scratch = scratch_like(out, out.count * c.size)
        blocks = [scratch.region(i * out.count, (i + 1) * out.count) for i in range(c.size)]
        yield from basic.ring_reduce_scatter(c, ins[c.rank], out.region(), blocks)
        if op == "avg":
            yield from c.average(out.region(), c.size)

    launcher.lane(
        [program] * p, [lane.pe for lane in outs], [lane.memory_node for lane in outs], op=op
    )
    return launcher


def gather(
    ctx: Any, inputs: Sequence[DeviceTensor], blocks: Sequence[DeviceTensor] | None, root: int
) -> CollectiveLauncher:
    launcher = CollectiveLauncher(ctx, "gather")
    ins = [single_lane(t, "gather") for t in inputs]
    regions = [single_lane(t, "gather").region() for t in blocks or ()]

    def program(c: Comm) -> Generator:
        yield from basic.direct_gather(
            c, ins[c.rank].region(), regions if c.rank == root else None, root
        )

    launcher.lane(
        [program] * len(ins), [lane.pe for lane in ins], [lane.memory_node for lane in ins]
    )
    return launcher


def scatter(
    ctx: Any, outputs: Sequence[DeviceTensor], blocks: Sequence[DeviceTensor] | None, root: int
) -> CollectiveLauncher:
    launcher = CollectiveLauncher(ctx, "scatter")
    outs = [single_lane(t, "scatter") for t in outputs]
    regions = [single_lane(t, "scatter").region() for t in blocks or ()]

    def program(c: Comm) -> Generator:
        yield from basic.direct_scatter(
            c, regions if c.rank == root else None, outs[c.rank].region(), root
        )

    launcher.lane(
        [program] * len(outs), [lane.pe for lane in outs], [lane.memory_node for lane in outs]
    )
    return launcher


def all_to_all(
    ctx: Any, sends: Sequence[Sequence[Region]], recvs: Sequence[Sequence[Region]]
) -> CollectiveLauncher:
    """``sends[r][j]`` goes from rank r to rank j, into ``recvs[j][r]``."""
    launcher = CollectiveLauncher(ctx, "all_to_all")
    p = len(sends)
    pes = [recvs[r][0].buffer.pe for r in range(p)]
    nodes = [recvs[r][0].buffer.memory_node for r in range(p)]

    def program(c: Comm) -> Generator:
        yield from basic.direct_all_to_all(c, sends[c.rank], recvs[c.rank])

    launcher.lane([program] * p, pes, nodes)
    return launcher


def barrier(ctx: Any, pes: list[str]) -> CollectiveLauncher:
    launcher = CollectiveLauncher(ctx, "barrier")
    launcher.lane([basic.dissemination_barrier] * len(pes), pes, pes)
    return launcher


def send_recv(ctx: Any, src: DeviceTensor, dst: DeviceTensor) -> CollectiveLauncher:
    """Point to point: ``src``'s lanes into ``dst``'s (same split)."""
    launcher = CollectiveLauncher(ctx, "send_recv")
    table = _lane_table([src, dst], "send/recv")
    for j in range(len(table[0])):
        a, b = table[0][j], table[1][j]

        def sender(c: Comm, a=a) -> Generator:
            yield from c.send(1, a.region())

        def receiver(c: Comm, b=b) -> Generator:
            c.place(b.region(), (yield from c.recv(0)))

        launcher.lane([sender, receiver], [a.pe, b.pe], [a.memory_node, b.memory_node], lane=j)
    launcher.refresh_replicas(dst)
    return launcher
