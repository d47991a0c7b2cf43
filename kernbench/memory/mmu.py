"""Per-PE page tables: virtual pages to physical addresses.

A :class:`PageTable` is what a PE's MMU consults.  Mappings are kept as extents
``(first VA, page count, first PA)`` in a list sorted by VA, so mapping a
1 GiB tensor with 4 KiB pages is one entry, not 262,144, and a lookup is a
``bisect``.  Within an extent, consecutive virtual pages map to consecutive
physical pages.
"""

from __future__ import annotations

from bisect import bisect_right

from kernbench.errors import AllocationError, MemoryFaultError
from kernbench.memory.address import OFFSET_BITS, PhysAddr
from kernbench.memory.va import check_page_size

__all__ = ["PageTable"]


class PageTable:
    """VA page -> PA mapping of one PE; ``name`` is the MMU's, e.g. ``sip0.cube0.pe1.mmu``."""

    def __init__(self, page_size: int, name: str) -> None:
        self.page_size = check_page_size(page_size)
        self.name = name
        # Parallel lists sorted by VA; PAs are kept encoded so that
        # "physically contiguous" is integer arithmetic.
        self._va: list[int] = []
        self._npages: list[int] = []
        self._pa: list[int] = []

    @property
    def mapped_pages(self) -> int:
        return sum(self._npages)

    @property
    def extent_count(self) -> int:
        """Number of stored extents (a measure of bookkeeping cost, not of mapped size)."""
        return len(self._va)

    def _npages_for(self, va: int, nbytes: int, operation: str) -> int:
        if isinstance(va, bool) or not isinstance(va, int) or va < 0 or va % self.page_size:
            raise AllocationError(
                f"{self.name}: cannot {operation} VA {va!r}: it must be a non-negative multiple "
                f"of the page size ({self.page_size})"
            )
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
            raise AllocationError(
                f"{self.name}: cannot {operation} {nbytes!r} bytes at VA {va:#x}; "
                f"the size must be a positive number of bytes"
            )
        return -(-nbytes // self.page_size)

    def _end(self, index: int) -> int:
        return self._va[index] + self._npages[index] * self.page_size

    def map(self, va: int, pa: PhysAddr, nbytes: int) -> None:
        """Map the pages covering ``[va, va+nbytes)`` onto consecutive memory from ``pa``."""
        npages = self._npages_for(va, nbytes, "map")
        span = npages * self.page_size
        if pa.offset + span > 1 << OFFSET_BITS:
            raise AllocationError(
                f"{self.name}: cannot map {span} B at {pa}: the range runs past the largest "
                f"offset a physical address can hold ({(1 << OFFSET_BITS) - 1:#x})"
            )
        index = bisect_right(self._va, va)
        if index > 0 and self._end(index - 1) > va:
            clash = va
        elif index < len(self._va) and self._va[index] < va + span:
            clash = self._va[index]
        else:
            clash = None
        if clash is not None:
            raise AllocationError(
                f"{self.name}: cannot map VA {va:#x}..{va + span:#x}: page {clash:#x} is "
                f"already mapped (unmap it first)"
            )
        self._va.insert(index, va)
        self._npages.insert(index, npages)
        self._pa.insert(index, pa.encode())

    def unmap(self, va: int, nbytes: int) -> None:
        """Remove the mappings of every page covering ``[va, va+nbytes)``; all must be mapped."""
        npages = self._npages_for(va, nbytes, "unmap")
        end = va + npages * self.page_size
        first = bisect_right(self._va, va) - 1
        cursor, index = va, first
        while cursor < end:
            if (
                index < 0
                or index >= len(self._va)
                or not (self._va[index] <= cursor < self._end(index))
            ):
                raise AllocationError(
                    f"{self.name}: cannot unmap VA {va:#x}..{end:#x}: page {cursor:#x} "
                    f"is not mapped"
                )
            cursor = self._end(index)
            index += 1
        last = index - 1
        kept: list[tuple[int, int, int]] = []
        if self._va[first] < va:
            kept.append(
                (self._va[first], (va - self._va[first]) // self.page_size, self._pa[first])
            )
        tail = self._end(last)
        if tail > end:
            moved = end - self._va[last]
            kept.append((end, (tail - end) // self.page_size, self._pa[last] + moved))
        self._va[first : last + 1] = [extent[0] for extent in kept]
        self._npages[first : last + 1] = [extent[1] for extent in kept]
        self._pa[first : last + 1] = [extent[2] for extent in kept]

    def is_mapped(self, va: int) -> bool:
        index = bisect_right(self._va, va) - 1
        return index >= 0 and va < self._end(index)

    def translate(self, va: int, nbytes: int, *, what: str = "") -> list[tuple[PhysAddr, int]]:
        """Physical pieces ``(pa, nbytes)`` of the access ``[va, va+nbytes)``, in VA order.

        Pieces that are physically contiguous are merged, so an access inside
        one mapping gives one piece.  Any unmapped byte is a MemoryFaultError.
        """
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise MemoryFaultError(
                f"{self.name}: access size {nbytes!r} must be a non-negative number of bytes"
            )
        end = va + nbytes
        index = bisect_right(self._va, va) - 1
        runs: list[list[int]] = []
        cursor = va
        while cursor < end:
            if (
                index < 0
                or index >= len(self._va)
                or not (self._va[index] <= cursor < self._end(index))
            ):
                raise self._fault(cursor, va, nbytes, what)
            take = min(end, self._end(index)) - cursor
            start = self._pa[index] + (cursor - self._va[index])
            previous = runs[-1] if runs else None
            # Contiguous integers are contiguous bytes only within one memory;
            # the offset field must not have carried into the fields above it.
            if (
                previous is not None
                and previous[0] + previous[1] == start
                and previous[0] >> OFFSET_BITS == start >> OFFSET_BITS
            ):
                previous[1] += take
            else:
                runs.append([start, take])
            cursor += take
            index += 1
        return [(PhysAddr.decode(start), length) for start, length in runs]

    def _fault(self, fault_va: int, va: int, nbytes: int, what: str) -> MemoryFaultError:
        page = fault_va - fault_va % self.page_size
        subject = f" of {what}" if what else ""
        return MemoryFaultError(
            f"{self.name}: page fault at VA {fault_va:#x} (page {page:#x} is not mapped) "
            f"during the access{subject} to VA {va:#x}..{va + nbytes:#x} ({nbytes} B)"
        )
