"""The functional memory store: the bytes that live at physical addresses.

Memory is a set of *segments*, one per allocation, each registered with
:meth:`Store.create` and dropped with :meth:`Store.release`.  Every access must
fall wholly inside one live segment; anything else is a
:class:`~kernbench.errors.MemoryFaultError` naming the address and the nearest
segment, which is how an out-of-bounds kernel access is caught.

Two stores share that bookkeeping:

* :class:`MemoryStore` (functional mode) keeps real bytes, a NumPy ``uint8``
  buffer per segment, allocated zero-filled on first use so that reserving a
  large tensor that is never touched costs nothing.
* :class:`NullStore` (timing-only mode) keeps no bytes at all: writes are
  bounds-checked and dropped, reads return ``None``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_right

import numpy as np

from kernbench.errors import AllocationError, MemoryFaultError, TensorError
from kernbench.memory.address import OFFSET_BITS, PhysAddr
from kernbench.units import format_size

__all__ = ["Store", "MemoryStore", "NullStore"]


def _as_bytes(data: np.ndarray | bytes | bytearray | memoryview) -> np.ndarray:
    if isinstance(data, bytes | bytearray | memoryview):
        return np.frombuffer(data, dtype=np.uint8)
    array = np.asarray(data)
    if array.dtype.hasobject:
        raise TensorError(f"cannot store an array of dtype {array.dtype}: it holds no raw bytes")
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


class Store(ABC):
    """Segment bookkeeping shared by the functional and the timing-only store."""

    #: Whether reads return the bytes that were written.
    stores_bytes: bool = False

    def __init__(self) -> None:
        # Segments keyed by encoded start address, sorted, so that the segment
        # holding an address is found with one bisect.
        self._starts: list[int] = []
        self._sizes: dict[int, int] = {}
        self._labels: dict[int, str] = {}

    @property
    def segment_count(self) -> int:
        return len(self._starts)

    def create(self, pa: PhysAddr, nbytes: int, *, label: str = "") -> None:
        """Register a segment of ``nbytes`` at ``pa``; it reads as zeros until written."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
            raise AllocationError(f"segment at {pa} must have a positive size, got {nbytes!r}")
        if pa.offset + nbytes > 1 << OFFSET_BITS:
            raise AllocationError(
                f"segment of {format_size(nbytes)} at {pa} runs past the largest offset a "
                f"physical address can hold"
            )
        start = pa.encode()
        index = bisect_right(self._starts, start)
        if index > 0:
            before = self._starts[index - 1]
            if before + self._sizes[before] > start:
                raise AllocationError(
                    f"segment at {pa} overlaps the live segment {self._describe(before)}"
                )
        if index < len(self._starts) and self._starts[index] < start + nbytes:
            raise AllocationError(
                f"segment at {pa} ({format_size(nbytes)}) overlaps the live segment "
                f"{self._describe(self._starts[index])}"
            )
        self._starts.insert(index, start)
        self._sizes[start] = nbytes
        if label:
            self._labels[start] = label

    def release(self, pa: PhysAddr) -> None:
        """Drop the segment that starts at ``pa`` and its bytes."""
        start = pa.encode()
        if start not in self._sizes:
            raise AllocationError(
                f"no live segment starts at {pa} (released twice, or never created)"
            )
        del self._starts[bisect_right(self._starts, start) - 1]
        del self._sizes[start]
        self._labels.pop(start, None)
        self._forget(start)

    def check(self, pa: PhysAddr, nbytes: int, *, operation: str = "access") -> None:
        """Raise MemoryFaultError unless ``[pa, pa+nbytes)`` lies inside one live segment.

        Timing-only callers that carry sizes but no data use this in place of a write.
        """
        self._locate(pa, nbytes, operation)

    def _forget(self, start: int) -> None:  # noqa: B027 - optional hook, not abstract
        """Hook for subclasses that keep per-segment data."""

    def _describe(self, start: int) -> str:
        size = self._sizes[start]
        label = self._labels.get(start)
        named = f" '{label}'" if label else ""
        return f"{PhysAddr.decode(start)}..+{size:#x}{named} ({format_size(size)})"

    def _locate(self, pa: PhysAddr, nbytes: int, operation: str) -> tuple[int, int]:
        """Return ``(segment start, offset in segment)`` of an in-bounds access."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise MemoryFaultError(
                f"{operation} at {pa}: size must be a non-negative number of bytes, got {nbytes!r}"
            )
        address = pa.encode()
        index = bisect_right(self._starts, address) - 1
        if index >= 0:
            start = self._starts[index]
            size = self._sizes[start]
            if address < start + size and address + nbytes <= start + size:
                return start, address - start
        raise MemoryFaultError(
            f"{operation} of {nbytes} B at {pa} is not inside one live segment; "
            f"{self._nearest(address, index)}"
        )

    def _nearest(self, address: int, index: int) -> str:
        candidates = [self._starts[i] for i in (index, index + 1) if 0 <= i < len(self._starts)]
        if not candidates:
            return "no segments are live"

        def distance(start: int) -> int:
            end = start + self._sizes[start]
            return 0 if start <= address < end else min(abs(address - start), abs(address - end))

        return f"nearest segment: {self._describe(min(candidates, key=distance))}"

    @abstractmethod
    def write(
        self, pa: PhysAddr, data: np.ndarray | bytes | bytearray | memoryview, *, keep: bool = False
    ) -> None:
        """Store the raw bytes of ``data`` at ``pa``.

        ``keep=True``: the caller hands the array over and never touches it
        again, so a store may hold it as the segment's bytes instead of a copy.
        """

    @abstractmethod
    def read(self, pa: PhysAddr, nbytes: int) -> np.ndarray | None:
        """The bytes at ``pa``, or ``None`` from a store that keeps none."""

    @abstractmethod
    def view(self, pa: PhysAddr, nbytes: int) -> np.ndarray | None:
        """A writable view of the bytes at ``pa``, or ``None`` from a store that keeps none."""


class MemoryStore(Store):
    """Functional-mode store: real bytes, checkable against NumPy."""

    stores_bytes = True

    def __init__(self) -> None:
        super().__init__()
        self._buffers: dict[int, np.ndarray] = {}

    def _forget(self, start: int) -> None:
        self._buffers.pop(start, None)

    def _buffer(self, start: int) -> np.ndarray:
        buffer = self._buffers.get(start)
        if buffer is None:
            buffer = np.zeros(self._sizes[start], dtype=np.uint8)
            self._buffers[start] = buffer
        return buffer

    def write(
        self, pa: PhysAddr, data: np.ndarray | bytes | bytearray | memoryview, *, keep: bool = False
    ) -> None:
        """Store the raw bytes of ``data`` (any dtype, C order) starting at ``pa``.

        A kept array that fills a segment not yet written becomes its bytes:
        no zeroed buffer is made and nothing is copied.
        """
        raw = _as_bytes(data)
        start, offset = self._locate(pa, raw.size, "write")
        if (
            keep
            and isinstance(data, np.ndarray)
            and start not in self._buffers
            and raw.size == self._sizes[start]
            and raw.flags.writeable
        ):
            self._buffers[start] = raw
            return
        self._buffer(start)[offset : offset + raw.size] = raw

    def read(self, pa: PhysAddr, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes at ``pa`` as ``uint8``."""
        start, offset = self._locate(pa, nbytes, "read")
        buffer = self._buffers.get(start)
        if buffer is None:
            # Reading untouched memory must not make the store hold the whole segment.
            return np.zeros(nbytes, dtype=np.uint8)
        return buffer[offset : offset + nbytes].copy()

    def view(self, pa: PhysAddr, nbytes: int) -> np.ndarray:
        """A writable ``uint8`` view of ``nbytes`` at ``pa``, for kernels that work in place."""
        start, offset = self._locate(pa, nbytes, "view")
        return self._buffer(start)[offset : offset + nbytes]


class NullStore(Store):
    """Timing-only store: checks every access like :class:`MemoryStore`, keeps no bytes."""

    stores_bytes = False

    def write(
        self, pa: PhysAddr, data: np.ndarray | bytes | bytearray | memoryview, *, keep: bool = False
    ) -> None:
        """Check that ``data`` fits at ``pa``, then drop it."""
        nbytes = data.nbytes if isinstance(data, np.ndarray | memoryview) else len(data)
        self._locate(pa, nbytes, "write")

    def read(self, pa: PhysAddr, nbytes: int) -> None:
        self._locate(pa, nbytes, "read")
        return None

    def view(self, pa: PhysAddr, nbytes: int) -> None:
        self._locate(pa, nbytes, "view")
        return None
