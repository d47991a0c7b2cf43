"""What each rank has allocated, device by device: the counters behind ``torch.cuda``'s
memory calls.

A :class:`MemoryLedger` belongs to one rank (the greenlet that made the
tensors, as :meth:`RuntimeContext.set_device` binds one) and keeps a
:class:`DeviceMemoryStats` per device index that rank has allocated on.  A
tensor's shards are charged to the device whose memories hold them (a tensor
placed by a ``DPPolicy`` across devices is charged to each in part) when its
memory is allocated, and given back when its memory is returned: at once when
the last reference to it goes (or ``free()``), or, when the reference went in
the middle of the runtime changing memory (a garbage collection), as soon as
anyone asks for the counts.

Bytes are the allocator's: a shard's size rounded up to the allocator's
alignment (``MachineMemory.alignment``, 256 B), as torch's ``allocated_bytes``
count rounded blocks; ``requested`` is the size the tensor asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DeviceMemoryStats", "MemoryLedger", "Stat"]


@dataclass(slots=True)
class Stat:
    """One counter as torch's allocator keeps it: the value now, its peak since the start
    or the last reset, and what was ever added and taken away since the last reset."""

    current: int = 0
    peak: int = 0
    allocated: int = 0
    freed: int = 0

    def add(self, amount: int) -> None:
        self.current += amount
        self.allocated += amount
        self.peak = max(self.peak, self.current)

    def remove(self, amount: int) -> None:
        self.current -= amount
        self.freed += amount


@dataclass(slots=True)
class DeviceMemoryStats:
    """One rank's allocations on one device: how many, their bytes (rounded and as asked),
    and the allocations it asked for that did not fit."""

    allocations: Stat = field(default_factory=Stat)
    allocated_bytes: Stat = field(default_factory=Stat)
    requested_bytes: Stat = field(default_factory=Stat)
    num_ooms: int = 0

    def stats(self) -> tuple[Stat, Stat, Stat]:
        return self.allocations, self.allocated_bytes, self.requested_bytes

    def charge(self, requested: int, rounded: int) -> None:
        self.allocations.add(1)
        self.allocated_bytes.add(rounded)
        self.requested_bytes.add(requested)

    def give_back(self, requested: int, rounded: int) -> None:
        self.allocations.remove(1)
        self.allocated_bytes.remove(rounded)
        self.requested_bytes.remove(requested)

    def reset_peak(self) -> None:
        """Peaks start again from the current values."""
        for stat in self.stats():
            stat.peak = stat.current

    def reset_accumulated(self) -> None:
        """The totals added and taken away, and the count of failed allocations, start
        again from zero."""
        for stat in self.stats():
            stat.allocated = stat.freed = 0
        self.num_ooms = 0


class MemoryLedger:
    """One rank's :class:`DeviceMemoryStats`, by device index."""

    __slots__ = ("_devices", "__weakref__")

    def __init__(self) -> None:
        self._devices: dict[int, DeviceMemoryStats] = {}

    def device(self, index: int) -> DeviceMemoryStats:
        """The counters of device ``index`` (all zero before the rank allocates there)."""
        stats = self._devices.get(index)
        if stats is None:
            stats = self._devices[index] = DeviceMemoryStats()
        return stats
