"""Physical memory allocators: one byte range, and the whole machine's memories.

:class:`RangeAllocator` hands out aligned pieces of ``[0, capacity)`` first-fit
and coalesces free neighbours, so freeing everything always gives back a single
block.  :class:`MachineMemory` owns one allocator per memory of the machine (a
partition of cube HBM per PE, a TCM per PE, an SRAM per cube) and speaks in
:class:`~kernbench.memory.address.PhysAddr`.

The HBM of a cube is split equally among its PEs: PE ``p`` of ``P`` owns
``[p*H/P, (p+1)*H/P)``.  With as many HBM slices as PEs, PE ``p``'s partition
is exactly slice ``p``.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from kernbench.errors import AllocationError, ConfigError, OutOfMemoryError
from kernbench.memory.address import FIELD_BITS, OFFSET_BITS, MemoryKind, PhysAddr
from kernbench.topology import names
from kernbench.units import format_size

__all__ = ["RangeAllocator", "MachineMemory", "MemoryUsage"]


def _check_positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_power_of_two(name: str, value: object) -> int:
    _check_positive(name, value)
    assert isinstance(value, int)
    if value & (value - 1):
        raise ConfigError(f"{name} must be a power of two (such as 256 or 4096), got {value}")
    return value


class RangeAllocator:
    """First-fit allocator over ``[0, capacity)`` with coalescing free list.

    ``name`` appears in every error message, so make it say which memory this
    is (``"sip0.cube3.pe5 HBM partition"``).
    """

    def __init__(self, capacity: int, *, alignment: int = 256, name: str) -> None:
        self.capacity = _check_positive("capacity", capacity)
        self.alignment = _check_power_of_two("alignment", alignment)
        self.name = name
        # Free blocks as two parallel lists sorted by start, so bisect finds a
        # freed block's neighbours without scanning.
        self._free_starts: list[int] = [0]
        self._free_sizes: list[int] = [capacity]
        self._allocated: dict[int, tuple[int, str]] = {}
        self._used = 0

    @property
    def used(self) -> int:
        """Bytes currently allocated, after rounding up to the alignment."""
        return self._used

    @property
    def free_bytes(self) -> int:
        return self.capacity - self._used

    @property
    def largest_free(self) -> int:
        """Size of the largest free block: the biggest allocation that can succeed."""
        return max(self._free_sizes, default=0)

    def _round(self, nbytes: int) -> int:
        return -(-nbytes // self.alignment) * self.alignment

    def alloc(self, nbytes: int, *, owner: str = "") -> int:
        """Allocate ``nbytes`` (rounded up to the alignment); return the offset."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
            what = f" for {owner}" if owner else ""
            raise AllocationError(
                f"{self.name}: allocation size{what} must be a positive number of bytes, "
                f"got {nbytes!r}"
            )
        size = self._round(nbytes)
        for index, block in enumerate(self._free_sizes):
            if block >= size:
                start = self._free_starts[index]
                if block == size:
                    del self._free_starts[index]
                    del self._free_sizes[index]
                else:
                    self._free_starts[index] = start + size
                    self._free_sizes[index] = block - size
                self._allocated[start] = (size, owner)
                self._used += size
                return start
        what = f" for {owner}" if owner else ""
        raise OutOfMemoryError(
            f"{self.name}: cannot allocate {format_size(nbytes)} ({nbytes} B){what}; "
            f"capacity {format_size(self.capacity)}, in use {format_size(self._used)}, "
            f"largest free block {format_size(self.largest_free)}"
        )

    def free(self, offset: int) -> None:
        """Give back the allocation that starts at ``offset``."""
        entry = self._allocated.pop(offset, None)
        if entry is None:
            raise AllocationError(
                f"{self.name}: offset {offset:#x} is not the start of a live allocation "
                f"(double free, or an address this allocator did not hand out)"
            )
        size, _ = entry
        self._used -= size
        starts, sizes = self._free_starts, self._free_sizes
        index = bisect_left(starts, offset)
        merges_prev = index > 0 and starts[index - 1] + sizes[index - 1] == offset
        merges_next = index < len(starts) and offset + size == starts[index]
        if merges_prev and merges_next:
            sizes[index - 1] += size + sizes[index]
            del starts[index]
            del sizes[index]
        elif merges_prev:
            sizes[index - 1] += size
        elif merges_next:
            starts[index] = offset
            sizes[index] += size
        else:
            starts.insert(index, offset)
            sizes.insert(index, size)

    def size_of(self, offset: int) -> int:
        """Rounded size of the live allocation at ``offset``."""
        entry = self._allocated.get(offset)
        if entry is None:
            raise AllocationError(f"{self.name}: no live allocation at offset {offset:#x}")
        return entry[0]

    def free_blocks(self) -> list[tuple[int, int]]:
        """The free list as ``(start, size)`` pairs, sorted by start."""
        return list(zip(self._free_starts, self._free_sizes, strict=True))


@dataclass(frozen=True, slots=True)
class MemoryUsage:
    """Usage of one memory at one moment."""

    name: str
    kind: MemoryKind
    capacity: int
    used: int
    largest_free: int


class MachineMemory:
    """All physical memories of a machine, each with its own allocator.

    Allocators are created the first time a memory is used, so building a
    machine with thousands of PEs costs nothing until it allocates.
    """

    def __init__(
        self,
        *,
        sips: int,
        cubes_per_sip: int,
        pes_per_cube: int,
        hbm_bytes_per_cube: int,
        hbm_slices_per_cube: int,
        sram_bytes_per_cube: int,
        tcm_bytes_per_pe: int,
        rack: int = 0,
        alignment: int = 256,
    ) -> None:
        self.sips = _check_positive("sips", sips)
        self.cubes_per_sip = _check_positive("cubes_per_sip", cubes_per_sip)
        self.pes_per_cube = _check_positive("pes_per_cube", pes_per_cube)
        self.hbm_bytes_per_cube = _check_positive("hbm_bytes_per_cube", hbm_bytes_per_cube)
        self.hbm_slices_per_cube = _check_positive("hbm_slices_per_cube", hbm_slices_per_cube)
        self.sram_bytes_per_cube = _check_positive("sram_bytes_per_cube", sram_bytes_per_cube)
        self.tcm_bytes_per_pe = _check_positive("tcm_bytes_per_pe", tcm_bytes_per_pe)
        self.alignment = _check_power_of_two("alignment", alignment)
        if isinstance(rack, bool) or not isinstance(rack, int) or rack < 0:
            raise ConfigError(f"rack must be a non-negative integer, got {rack!r}")
        self.rack = rack
        self._check_fits_address()
        if hbm_bytes_per_cube % pes_per_cube:
            raise ConfigError(
                f"hbm_bytes_per_cube ({hbm_bytes_per_cube}) must divide equally among "
                f"pes_per_cube ({pes_per_cube}) PE partitions"
            )
        if hbm_bytes_per_cube % hbm_slices_per_cube:
            raise ConfigError(
                f"hbm_bytes_per_cube ({hbm_bytes_per_cube}) must divide equally into "
                f"hbm_slices_per_cube ({hbm_slices_per_cube}) slices"
            )
        self.hbm_partition_bytes = hbm_bytes_per_cube // pes_per_cube
        self.hbm_slice_bytes = hbm_bytes_per_cube // hbm_slices_per_cube
        if self.hbm_partition_bytes % alignment:
            raise ConfigError(
                f"each PE's HBM partition ({self.hbm_partition_bytes} B) must be a multiple "
                f"of the alignment ({alignment} B) so allocations stay aligned cube-wide"
            )
        self._allocators: dict[tuple[MemoryKind, int, int, int], RangeAllocator] = {}

    @property
    def total_bytes(self) -> int:
        """Every byte of HBM, SRAM and TCM of the machine."""
        per_cube = (
            self.hbm_bytes_per_cube
            + self.sram_bytes_per_cube
            + self.pes_per_cube * self.tcm_bytes_per_pe
        )
        return self.sips * self.cubes_per_sip * per_cube

    def _check_fits_address(self) -> None:
        # Checked here so a machine too big for the address layout fails when
        # built, not at its first allocation in a far corner.
        if self.rack >= 1 << FIELD_BITS["rack"]:
            raise ConfigError(
                f"rack={self.rack} does not fit the physical address rack field "
                f"(valid: 0..{(1 << FIELD_BITS['rack']) - 1})"
            )
        for argument, field in (("sips", "sip"), ("cubes_per_sip", "cube"), ("pes_per_cube", "pe")):
            count, limit = getattr(self, argument), 1 << FIELD_BITS[field]
            if count > limit:
                raise ConfigError(
                    f"{argument}={count} does not fit the physical address {field} field "
                    f"(at most {limit})"
                )
        for argument in ("hbm_bytes_per_cube", "sram_bytes_per_cube", "tcm_bytes_per_pe"):
            size = getattr(self, argument)
            if size > 1 << OFFSET_BITS:
                raise ConfigError(
                    f"{argument}={format_size(size)} does not fit the physical address "
                    f"offset field (at most {format_size(1 << OFFSET_BITS)})"
                )

    def _check_location(self, sip: int, cube: int, pe: int) -> None:
        for field, value, count in (
            ("sip", sip, self.sips),
            ("cube", cube, self.cubes_per_sip),
            ("pe", pe, self.pes_per_cube),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
                raise AllocationError(
                    f"{field}={value!r} is not in this machine; valid: 0..{count - 1}"
                )

    def _allocator(self, kind: MemoryKind, sip: int, cube: int, pe: int) -> RangeAllocator:
        key = (kind, sip, cube, pe)
        allocator = self._allocators.get(key)
        if allocator is None:
            if kind is MemoryKind.HBM:
                capacity = self.hbm_partition_bytes
                name = f"{names.pe(sip, cube, pe)} HBM partition"
            elif kind is MemoryKind.SRAM:
                capacity, name = self.sram_bytes_per_cube, f"{names.cube(sip, cube)} SRAM"
            else:
                capacity, name = self.tcm_bytes_per_pe, f"{names.pe(sip, cube, pe)} TCM"
            if self.rack:
                name = f"rack{self.rack}.{name}"
            allocator = RangeAllocator(capacity, alignment=self.alignment, name=name)
            self._allocators[key] = allocator
        return allocator

    def alloc(
        self, kind: MemoryKind, sip: int, cube: int, pe: int, nbytes: int, owner: str = ""
    ) -> PhysAddr:
        """Allocate in ``kind`` memory of a PE (the cube's SRAM for SRAM; ``pe`` ignored)."""
        if kind not in MemoryKind.__members__.values():
            raise AllocationError(f"kind={kind!r} is not a memory kind; valid: HBM, SRAM, TCM")
        kind = MemoryKind(kind)
        self._check_location(sip, cube, pe)
        if kind is MemoryKind.SRAM:
            pe = 0
        offset = self._allocator(kind, sip, cube, pe).alloc(nbytes, owner=owner)
        if kind is MemoryKind.HBM:
            offset += pe * self.hbm_partition_bytes
        return PhysAddr(self.rack, sip, cube, pe, kind, offset)

    def _located(self, pa: PhysAddr) -> tuple[RangeAllocator, int]:
        """The allocator that handed out ``pa`` and the offset of ``pa`` in it."""
        if pa.rack != self.rack:
            raise AllocationError(f"{pa} is in rack {pa.rack}, this machine is rack {self.rack}")
        self._check_location(pa.sip, pa.cube, pa.pe)
        offset = pa.offset
        if pa.kind is MemoryKind.HBM:
            base = pa.pe * self.hbm_partition_bytes
            if not base <= offset < base + self.hbm_partition_bytes:
                raise AllocationError(
                    f"{pa}: offset is outside the HBM partition of pe{pa.pe} "
                    f"[{base:#x}, {base + self.hbm_partition_bytes:#x})"
                )
            offset -= base
        allocator = self._allocators.get((pa.kind, pa.sip, pa.cube, pa.pe))
        if allocator is None:
            raise AllocationError(f"{pa} was never allocated (double free or foreign address)")
        return allocator, offset

    def free(self, pa: PhysAddr) -> None:
        """Free an allocation made by :meth:`alloc`, given its start address."""
        allocator, offset = self._located(pa)
        allocator.free(offset)

    def size_of(self, pa: PhysAddr) -> int:
        """Bytes the live allocation at ``pa`` holds: its size rounded up to the alignment."""
        allocator, offset = self._located(pa)
        return allocator.size_of(offset)

    def hbm_slice_of(self, pa: PhysAddr) -> int:
        """Index of the HBM slice that holds the byte at ``pa``."""
        if pa.kind is not MemoryKind.HBM:
            raise AllocationError(f"{pa} is a {pa.kind.name} address, not an HBM address")
        if pa.offset >= self.hbm_bytes_per_cube:
            raise AllocationError(
                f"{pa} is past the end of the cube's HBM ({format_size(self.hbm_bytes_per_cube)})"
            )
        return pa.offset // self.hbm_slice_bytes

    def capacity(self, kind: MemoryKind) -> int:
        """Capacity of one memory of ``kind``: an HBM partition, a TCM, or a cube SRAM."""
        return {
            MemoryKind.HBM: self.hbm_partition_bytes,
            MemoryKind.SRAM: self.sram_bytes_per_cube,
            MemoryKind.TCM: self.tcm_bytes_per_pe,
        }[MemoryKind(kind)]

    def used_bytes(
        self,
        kind: MemoryKind | None = None,
        *,
        sip: int | None = None,
        cube: int | None = None,
        pe: int | None = None,
    ) -> int:
        """Bytes in use (rounded to the alignment), in every memory or only in those of
        ``kind``; ``sip``, ``cube`` and ``pe`` narrow it to the memories at that place."""
        place = (sip, cube, pe)
        return sum(
            allocator.used
            for (alloc_kind, *where), allocator in self._allocators.items()
            if (kind is None or alloc_kind == kind)
            and all(want is None or want == have for want, have in zip(place, where, strict=True))
        )

    def usage(self) -> list[MemoryUsage]:
        """Usage of every memory ever allocated from, by kind then sip, cube and pe."""
        return [
            MemoryUsage(a.name, key[0], a.capacity, a.used, a.largest_free)
            for key, a in sorted(self._allocators.items(), key=lambda item: item[0])
        ]
