"""Virtual address space allocation, in whole pages.

Every allocation starts on a page boundary and covers whole pages, so it maps
onto page-table entries with nothing shared between two allocations.  The
space starts at ``base`` (4 GiB by default) so that small integers such as 0 or
an offset mistaken for an address never fall inside it.
"""

from __future__ import annotations

from kernbench.errors import AllocationError, ConfigError
from kernbench.memory.allocator import RangeAllocator

__all__ = ["VirtualAllocator", "check_page_size"]


def check_page_size(page_size: object) -> int:
    """Return ``page_size`` if it is a positive power of two, else raise ConfigError."""
    if (
        isinstance(page_size, bool)
        or not isinstance(page_size, int)
        or page_size <= 0
        or page_size & (page_size - 1)
    ):
        raise ConfigError(
            f"page_size must be a positive power of two number of bytes (such as 4096), "
            f"got {page_size!r}"
        )
    return page_size


class VirtualAllocator:
    """Page-granular allocator of virtual addresses in ``[base, base + size)``."""

    def __init__(
        self,
        page_size: int,
        base: int = 1 << 32,
        size: int = 1 << 46,
        *,
        name: str = "virtual address space",
    ) -> None:
        self.page_size = check_page_size(page_size)
        if isinstance(base, bool) or not isinstance(base, int) or base < 0 or base % page_size:
            raise ConfigError(
                f"base must be a non-negative multiple of page_size ({page_size}), got {base!r}"
            )
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0 or size % page_size:
            raise ConfigError(
                f"size must be a positive multiple of page_size ({page_size}), got {size!r}"
            )
        self.base = base
        self.size = size
        self.name = name
        self._ranges = RangeAllocator(size, alignment=page_size, name=name)

    @property
    def used(self) -> int:
        """Bytes of address space allocated, in whole pages."""
        return self._ranges.used

    def alloc(self, nbytes: int, *, owner: str = "") -> int:
        """Reserve whole pages covering ``nbytes``; return the first page's address."""
        return self.base + self._ranges.alloc(nbytes, owner=owner)

    def free(self, va: int) -> None:
        """Release the allocation that starts at ``va``."""
        if not isinstance(va, int) or not self.base <= va < self.base + self.size:
            raise AllocationError(
                f"{self.name}: {va!r} is outside [{self.base:#x}, {self.base + self.size:#x})"
            )
        try:
            self._ranges.free(va - self.base)
        except AllocationError:
            raise AllocationError(
                f"{self.name}: VA {va:#x} is not the start of a live allocation "
                f"(double free, or an address this allocator did not hand out)"
            ) from None

    def size_of(self, va: int) -> int:
        """Size in bytes (whole pages) of the live allocation at ``va``."""
        try:
            return self._ranges.size_of(va - self.base)
        except AllocationError:
            raise AllocationError(f"{self.name}: no live allocation at VA {va:#x}") from None

    def pages(self, va: int, nbytes: int) -> range:
        """Page-aligned addresses of every page the byte range ``[va, va+nbytes)`` touches."""
        if nbytes <= 0:
            return range(0)
        first = va - va % self.page_size
        return range(first, va + nbytes, self.page_size)
