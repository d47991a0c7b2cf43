"""The memory layer: physical addresses, allocators, page tables and the byte store.

* :mod:`~kernbench.memory.address`: :class:`PhysAddr` and its 64-bit encoding.
* :mod:`~kernbench.memory.allocator`: :class:`RangeAllocator` and
  :class:`MachineMemory` (per-PE HBM partitions and TCMs, per-cube SRAM).
* :mod:`~kernbench.memory.va`: :class:`VirtualAllocator`, page-granular.
* :mod:`~kernbench.memory.mmu`: :class:`PageTable`, extent-based VA -> PA.
* :mod:`~kernbench.memory.store`: :class:`MemoryStore` (real bytes) and
  :class:`NullStore` (timing-only, no bytes).
"""

from kernbench.memory.address import PA_BITS, MemoryKind, PhysAddr
from kernbench.memory.allocator import MachineMemory, MemoryUsage, RangeAllocator
from kernbench.memory.mmu import PageTable
from kernbench.memory.store import MemoryStore, NullStore, Store
from kernbench.memory.va import VirtualAllocator, check_page_size

__all__ = [
    "PA_BITS",
    "MemoryKind",
    "PhysAddr",
    "RangeAllocator",
    "MachineMemory",
    "MemoryUsage",
    "VirtualAllocator",
    "check_page_size",
    "PageTable",
    "Store",
    "MemoryStore",
    "NullStore",
]
