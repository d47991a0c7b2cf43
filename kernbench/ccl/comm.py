"""What a collective algorithm sees: regions of buffers, and timed primitives.

An algorithm is a generator per rank (a SimPy process body running on the
rank's PE) written against :class:`Comm`: ``send`` / ``recv`` over IPCQ,
``reduce`` and ``copy`` on the PE.  Values move for real in functional mode
(payloads are copies of the region at send time); in timing-only mode only
sizes move.  Every primitive costs time through the fabric, so the same
algorithm gives the same time in both modes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernbench.ccl.ops import combine, finish_average, premultiply
from kernbench.machine.api import Clock, Event, Machine, Stream
from kernbench.runtime.dtypes import DType

__all__ = ["LaneBuffer", "Region", "Comm"]


@dataclass(eq=False)
class LaneBuffer:
    """One shard of one rank's tensor: where it lives and (functional) its values.

    ``owner`` is the tensor the shard belongs to: while a collective holds the
    buffer, the tensor (so its memory) stays alive, as torch.distributed keeps
    the tensors of an operation in flight.
    """

    pe: str
    memory_node: str
    dtype: DType
    count: int
    storage: np.ndarray | None  # flat storage-dtype view into the memory store
    name: str = ""
    owner: Any = field(default=None, repr=False)

    def region(self, start: int = 0, stop: int | None = None) -> Region:
        return Region(self, start, self.count if stop is None else stop)


@dataclass(frozen=True, eq=False, slots=True)
class Region:
    """Elements ``[start, stop)`` of a lane buffer.

    Slotted: a ring over p ranks holds p regions per rank while it runs
    (a million at 1024 ranks), so their size is the run's memory.
    """

    buffer: LaneBuffer
    start: int
    stop: int

    @property
    def count(self) -> int:
        return self.stop - self.start

    @property
    def nbytes(self) -> int:
        # Not through ``count``: asked for by every message and stream a program records.
        return (self.stop - self.start) * self.buffer.dtype.itemsize

    def sub(self, start: int, stop: int) -> Region:
        return Region(self.buffer, self.start + start, self.start + stop)

    def read(self) -> np.ndarray | None:
        """A copy of the values (value dtype), or None in timing-only mode."""
        if self.buffer.storage is None:
            return None
        return self.buffer.dtype.from_storage(self.buffer.storage[self.start : self.stop]).copy()

    def write(self, values: np.ndarray | None) -> None:
        if self.buffer.storage is None or values is None:
            return
        self.buffer.storage[self.start : self.stop] = self.buffer.dtype.to_storage(values)

    def stored(self) -> np.ndarray | None:
        """A writable view of the stored values when they are stored as themselves.

        ``None`` in timing-only mode and for bfloat16 (stored as bits), where
        values must go through :meth:`read` and :meth:`write`.
        """
        if self.buffer.storage is None or self.buffer.dtype.name == "bfloat16":
            return None
        return self.buffer.storage[self.start : self.stop]

    def combine_from(self, op: str, src: Region, incoming: np.ndarray) -> None:
        """``self = src op incoming`` on the values, in place when the dtype allows."""
        out, left = self.stored(), src.stored()
        if out is not None and left is not None:
            combine(op, left, incoming, out=out)
            return
        current = src.read()
        if current is not None:
            self.write(combine(op, current, incoming))


@functools.lru_cache(maxsize=16)
def chunk_bounds(count: int, parts: int) -> tuple[tuple[int, int], ...]:
    """``parts`` contiguous ranges covering ``count`` (sizes differ by at most one).

    Remembered: every rank's program cuts its buffer alike, and its blocks into
    pieces of one or two sizes.
    """
    if parts == 1:
        return ((0, count),)
    base, extra = divmod(count, parts)
    bounds, start = [], 0
    for i in range(parts):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return tuple(bounds)


class Comm:
    """One rank's view of one lane of a collective (or of a subgroup of it).

    ``pes[i]`` is the PE of rank i; ``nodes[i]`` the memory where messages to
    rank i land (its IPCQ buffer: TCM, cube SRAM or HBM).  Work on the PE
    (reductions, copies) streams through memory: it costs bandwidth on the
    memories it touches and vector-engine time, overlapped, with the access
    latency hidden (ADR 0008).  Everything goes through the machine API
    (:class:`~kernbench.machine.api.Machine`), so an algorithm runs on any
    backend.
    """

    def __init__(
        self,
        machine: Machine | None,
        rank: int,
        pes: list[str],
        nodes: list[str],
        *,
        op: str = "sum",
        key: Any = None,
        depth: int | None = None,
        params: Any = None,
    ) -> None:
        self.machine = machine
        # No machine: a recording communicator (ccl.record), which times nothing.
        self.clock: Clock = machine.clock if machine is not None else None
        self.rank = rank
        self.size = len(pes)
        self.pes = pes
        self.nodes = nodes
        self.pe = pes[rank]
        self.op = op
        self.key = key
        self.depth = depth
        self.params = params
        # Whether the work primitives compute values (a recording that only
        # times a program leaves the buffers alone).
        self.values = True
        self._unsent = 0  # messages posted and not yet in their receiver's queue
        self._drained: Event | None = None

    def sub(self, ranks: list[int], tag: Any) -> Comm:
        """A communicator over ``ranks`` (this rank must be one), numbered in list order."""
        return Comm(
            self.machine,
            ranks.index(self.rank),
            [self.pes[r] for r in ranks],
            [self.nodes[r] for r in ranks],
            op=self.op,
            key=(self.key, tag),
            depth=self.depth,
            params=self.params,
        )

    @property
    def buffer_node(self) -> str:
        # The work primitives below read ``nodes[rank]`` themselves: a property read
        # costs a call, and they run for every operation a recorded program makes.
        return self.nodes[self.rank]

    # -- communication -------------------------------------------------------------
    def post_send(self, peer: int, region: Region | None, nbytes: int | None = None) -> None:
        """Start sending ``region`` (or ``nbytes`` of nothing) to ``peer``; don't wait.

        The payload is read when the message gets its credit, so a region may
        be posted only once its values are final.
        """
        self._post(peer, region, nbytes, self._sent)

    def _post(
        self,
        peer: int,
        region: Region | None,
        nbytes: int | None,
        on_sent: Callable[[], None],
    ) -> None:
        size = region.nbytes if region is not None else (nbytes or 0)
        source = region.buffer.memory_node if region is not None else self.pe
        self._unsent += 1
        self.machine.post(
            self.pe,
            self.pes[peer],
            size,
            src_node=source,
            dst_node=self.nodes[peer],
            channel=self.key,
            payload_fn=(region.read if region is not None else None),
            depth=self.depth,
            on_sent=on_sent,
        )

    def _sent(self) -> None:
        self._unsent -= 1
        if not self._unsent and self._drained is not None:
            drained, self._drained = self._drained, None
            drained.succeed()

    def send(self, peer: int, region: Region | None, nbytes: int | None = None) -> Generator:
        """Send and wait until the message is in ``peer``'s queue."""
        sent = self.clock.event()

        def on_sent() -> None:
            self._sent()
            sent.succeed()

        self._post(peer, region, nbytes, on_sent)
        yield sent

    def recv(self, peer: int) -> Generator:
        """The next payload from ``peer`` (values, or None in timing-only mode)."""
        return (yield from self.machine.receive(self.pes[peer], self.pe, self.key, self.depth))

    def drain(self) -> Generator:
        """Wait until every send this rank posted has been delivered."""
        if self._unsent:
            self._drained = self.clock.event()
            yield self._drained

    def concurrently(self, bodies: Iterable[Generator]) -> Generator:
        """Run program bodies side by side on this rank's PE; wait for all of them."""
        processes = [self.clock.process(body) for body in bodies]
        if processes:
            yield self.clock.all_of(processes)

    # -- work on the PE ----------------------------------------------------------------
    def _stream(self, loads: Sequence[Stream], stores: Sequence[Stream], flops: int) -> Iterable:
        """Memory traffic and vector work, overlapped; resumes when all are done.

        The work primitives ``yield from`` it: a communicator with nothing to wait
        for (a recording) may return an empty iterable instead of a generator.
        """
        if not flops and not any(n for _, n in loads) and not any(n for _, n in stores):
            return
        done = self.clock.event()
        self.machine.stream(self.pe, loads, stores, flops, done.succeed)
        yield done

    def reduce(self, region: Region, incoming: np.ndarray | None) -> Generator:
        """``region = region op incoming`` (incoming sits in this rank's buffer memory)."""
        buffer, node, n = self.nodes[self.rank], region.buffer.memory_node, region.nbytes
        yield from self._stream(((buffer, n), (node, n)), ((node, n),), region.count)
        if incoming is not None and self.values:
            region.combine_from(self.op, region, incoming)

    def reduce_into(self, dst: Region, src: Region, incoming: np.ndarray | None) -> Generator:
        """``dst = src op incoming``: the same traffic as :meth:`reduce`, into another region."""
        n = dst.nbytes
        yield from self._stream(
            ((self.nodes[self.rank], n), (src.buffer.memory_node, n)),
            ((dst.buffer.memory_node, n),),
            dst.count,
        )
        if incoming is not None and self.values:
            dst.combine_from(self.op, src, incoming)

    def place(self, region: Region, incoming: np.ndarray | None) -> Generator:
        """Put received data in ``region``; free when it already landed there (HBM buffer)."""
        buffer, node = self.nodes[self.rank], region.buffer.memory_node
        if node != buffer:
            n = region.nbytes
            yield from self._stream(((buffer, n),), ((node, n),), 0)
        if self.values:
            region.write(incoming)

    def copy(self, dst: Region, src: Region) -> Generator:
        """Local copy on the PE: reads ``src``, writes ``dst``."""
        yield from self._stream(
            ((src.buffer.memory_node, src.nbytes),), ((dst.buffer.memory_node, dst.nbytes),), 0
        )
        if self.values:
            dst.write(src.read())

    def premultiply(self, regions: Sequence[Region], count: int) -> list[np.ndarray | None]:
        """Scale floating inputs by 1/``count`` before an AVG sums them (values only: NCCL
        folds it into the reduction's loads); returns what they held, to restore."""
        held: list[np.ndarray | None] = []
        for region in regions:
            values = region.read() if self.values else None
            held.append(values)
            if values is not None:
                region.write(premultiply(values, count))
        return held

    def average(self, region: Region, count: int) -> Generator:
        """The last step of AVG: an integer sum divided by ``count`` (floats were
        premultiplied); it costs a pass over the region either way."""
        node, n = region.buffer.memory_node, region.nbytes
        yield from self._stream(((node, n),), ((node, n),), region.count)
        values = region.read() if self.values else None
        if values is not None:
            region.write(finish_average(values, count))

    def scratch(self, like: Region, count: int | None = None, node: str | None = None) -> Region:
        """A working region of ``like``'s dtype, zero-filled, in ``node`` (by default
        ``like``'s memory; this rank's buffer memory is ``self.nodes[self.rank]``)."""
        buf = like.buffer
        count = like.count if count is None else count
        values = buf.storage is not None and self.values
        storage = np.zeros(count, dtype=buf.dtype.storage) if values else None
        where = buf.memory_node if node is None else node
        return LaneBuffer(buf.pe, where, buf.dtype, count, storage, buf.name).region()
