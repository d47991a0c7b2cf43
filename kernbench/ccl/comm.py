"""What a collective algorithm sees: regions of buffers, and timed primitives.

An algorithm is a generator per rank (a SimPy process body running on the
rank's PE) written against :class:`Comm`: ``send`` / ``recv`` over IPCQ,
``reduce`` and ``copy`` on the PE.  Values move for real in functional mode
(payloads are copies of the region at send time); in timing-only mode only
sizes move.  Every primitive costs time through the fabric, so the same
algorithm gives the same time in both modes.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from kernbench.ccl.ops import combine, finish_average
from kernbench.runtime.dtypes import DType

__all__ = ["LaneBuffer", "Region", "Comm"]


@dataclass(eq=False)
class LaneBuffer:
    """One shard of one rank's tensor: where it lives and (functional) its values."""

    pe: str
    memory_node: str
    dtype: DType
    count: int
    storage: np.ndarray | None  # flat storage-dtype view into the memory store
    name: str = ""

    def region(self, start: int = 0, stop: int | None = None) -> Region:
        return Region(self, start, self.count if stop is None else stop)


@dataclass(frozen=True, eq=False)
class Region:
    """Elements ``[start, stop)`` of a lane buffer."""

    buffer: LaneBuffer
    start: int
    stop: int

    @property
    def count(self) -> int:
        return self.stop - self.start

    @property
    def nbytes(self) -> int:
        return self.count * self.buffer.dtype.itemsize

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


def chunk_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges covering ``count`` (sizes differ by at most one)."""
    base, extra = divmod(count, parts)
    bounds, start = [], 0
    for i in range(parts):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


class Comm:
    """One rank's view of one lane of a collective."""

    def __init__(
        self,
        fabric: Any,
        rank: int,
        pes: list[str],
        nodes: list[str],
        *,
        op: str = "sum",
        key: Any = None,
    ) -> None:
        self.fabric = fabric
        self.env: simpy.Environment = fabric.env
        self.rank = rank
        self.size = len(pes)
        self.pes = pes  # PE of each rank in this lane
        self.nodes = nodes  # memory node that receives each rank's messages
        self.pe = pes[rank]
        self.op = op
        self.key = key
        self._sends: list[simpy.Process] = []
        self._unit = fabric.pe(self.pe)

    # -- communication -------------------------------------------------------------
    def post_send(self, peer: int, region: Region | None, nbytes: int | None = None) -> None:
        """Start sending ``region`` (or ``nbytes`` of nothing) to ``peer``; don't wait."""
        size = region.nbytes if region is not None else (nbytes or 0)
        source = region.buffer.memory_node if region is not None else self.pe
        process = self.env.process(
            self.fabric.ipcq.send(
                self.pe,
                self.pes[peer],
                size,
                src_node=source,
                dst_node=self.nodes[peer],
                key=self.key,
                payload_fn=(region.read if region is not None else None),
            )
        )
        self._sends.append(process)

    def send(self, peer: int, region: Region | None, nbytes: int | None = None) -> Generator:
        self.post_send(peer, region, nbytes)
        yield self._sends[-1]

    def recv(self, peer: int) -> Generator:
        """The next payload from ``peer`` (values, or None in timing-only mode)."""
        message = yield from self.fabric.ipcq.recv(self.pes[peer], self.pe, self.key)
        return message.payload

    def drain(self) -> Generator:
        """Wait until every send this rank posted has been delivered."""
        if self._sends:
            yield self.env.all_of(self._sends)
            self._sends = []

    # -- work on the PE ----------------------------------------------------------------
    def _pe_work(self, region: Region, loads: int, stores: int, flops: int) -> Generator:
        node = region.buffer.memory_node
        events = []
        if loads:
            events.append(self.fabric.transfer(node, self.pe, loads))
        if stores:
            events.append(self.fabric.transfer(self.pe, node, stores))
        if flops:
            events.append(self.env.process(self.fabric._compute(self._unit, "vector", flops)))
        if events:
            yield self.env.all_of(events)

    def reduce(self, region: Region, incoming: np.ndarray | None) -> Generator:
        """``region = region op incoming``: reads both, writes one, one op per element."""
        yield from self._pe_work(region, 2 * region.nbytes, region.nbytes, region.count)
        if incoming is not None:
            current = region.read()
            if current is not None:
                region.write(combine(self.op, current, incoming))

    def place(self, region: Region, incoming: np.ndarray | None) -> None:
        """Received data lands in ``region`` directly (the transfer already paid for it)."""
        region.write(incoming)

    def copy(self, dst: Region, src: Region) -> Generator:
        """Local copy on the PE: reads ``src``, writes ``dst``."""
        yield from self._pe_work(dst, src.nbytes, dst.nbytes, 0)
        dst.write(src.read())

    def average(self, region: Region, count: int) -> Generator:
        """Divide by ``count`` in place (the last step of AVG)."""
        yield from self._pe_work(region, region.nbytes, region.nbytes, region.count)
        values = region.read()
        if values is not None:
            region.write(finish_average(values, count))
