"""Tensors: host tensors (NumPy arrays waiting to be copied in) and device tensors.

A :class:`DeviceTensor` is a shape, a dtype and a list of shards, each shard a
block of the tensor held in one PE's HBM partition, mapped into every PE of its
cube at a virtual address.  Data moves in and out only through the machine.
Kernels take device tensors as arguments; the kernel layer recognises them
itself, so this module needs nothing from it.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.memory import PhysAddr
from kernbench.placement import DPPolicy, ShardSpec
from kernbench.runtime.dtypes import DType
from kernbench.topology import names

if TYPE_CHECKING:
    from kernbench.runtime.context import RuntimeContext

__all__ = ["HostTensor", "DeviceTensor", "ShardPlacement", "Allocation"]


@dataclass(frozen=True)
class ShardPlacement:
    """Where one shard lives: its PE, physical and virtual address, HBM slice node."""

    shard: ShardSpec
    pa: PhysAddr | None  # None for an empty shard
    va: int
    memory_node: str  # e.g. "sip0.cube3.hbm2"

    @property
    def pe_name(self) -> str:
        s = self.shard
        return names.pe(s.sip, s.cube, s.pe)


@dataclass
class Allocation:
    """What a device tensor holds on the machine; released once."""

    name: str
    va_base: int
    va_bytes: int
    placements: list[ShardPlacement]
    released: bool = False  # unmapped, and its memory and addresses given back
    memory_returned: bool = False  # its physical memory given back (it may still be mapped)
    layout: Any = None  # element -> shard map, built by the kernel layer on first launch
    # (the owner's DeviceMemoryStats, requested bytes, rounded bytes) per placed shard,
    # given back when the memory is
    charges: tuple = ()


class HostTensor:
    """A tensor in host memory (``from_numpy``): values to copy into device tensors."""

    def __init__(self, array: np.ndarray, dtype: DType) -> None:
        self.dtype = dtype
        self._storage = dtype.to_storage(array)
        self.shape: tuple[int, ...] = tuple(self._storage.shape)

    @property
    def storage(self) -> np.ndarray:
        return self._storage

    def numpy(self) -> np.ndarray:
        return self.dtype.from_storage(self._storage).copy()

    @property
    def nbytes(self) -> int:
        return self._storage.nbytes

    def __repr__(self) -> str:
        return f"HostTensor(shape={self.shape}, dtype={self.dtype.name})"


class DeviceTensor:
    """A tensor placed on the simulated machine."""

    def __init__(
        self,
        ctx: RuntimeContext,
        name: str,
        shape: tuple[int, ...],
        dtype: DType,
        policy: DPPolicy,
        allocation: Allocation,
    ) -> None:
        self._ctx = ctx
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.policy = policy
        self._allocation = allocation
        self._finalizer: Any = None

    # -- state ------------------------------------------------------------------
    @property
    def context(self) -> RuntimeContext:
        """The runtime context the tensor was created in (its machine and clock)."""
        return self._ctx

    @property
    def is_freed(self) -> bool:
        return self._allocation.released

    def live_allocation(self) -> Allocation:
        """What the tensor holds on the machine; a TensorError once it was freed."""
        if self._allocation.released:
            raise TensorError(f"tensor {self.name!r} was freed; it can no longer be used")
        return self._allocation

    @property
    def placements(self) -> list[ShardPlacement]:
        return self.live_allocation().placements

    @property
    def shards(self) -> list[ShardSpec]:
        return [p.shard for p in self.live_allocation().placements]

    @property
    def va_base(self) -> int:
        return self.live_allocation().va_base

    @property
    def numel(self) -> int:
        return int(math.prod(self.shape))  # a Python product: np.prod costs microseconds

    @property
    def nbytes(self) -> int:
        """Bytes of one copy of the tensor (not counting replicas)."""
        return self.numel * self.dtype.itemsize

    # -- data movement ------------------------------------------------------------
    def copy_(self, src: HostTensor | np.ndarray) -> DeviceTensor:
        """Scatter ``src`` into this tensor's shards through the machine."""
        self._ctx.copy_in(self, src)
        return self

    def numpy(self) -> np.ndarray:
        """Gather the tensor back to the host through the machine."""
        return self._ctx.copy_out(self)

    def on_drop(self, callback: Callable[..., Any], *args: Any) -> None:
        """Call ``callback(*args)`` when the tensor is garbage (not when it is freed)."""
        self._finalizer = weakref.finalize(self, callback, *args)

    def free(self) -> None:
        """Unmap and return the tensor's memory now.  Freeing twice is an error."""
        if self._allocation.released:
            raise TensorError(f"tensor {self.name!r} was already freed (double free)")
        if self._finalizer is not None:
            self._finalizer.detach()
        self._ctx.release(self._allocation)

    def __repr__(self) -> str:
        state = " freed" if self.is_freed else ""
        return (
            f"DeviceTensor({self.name!r}, shape={self.shape}, dtype={self.dtype.name}, "
            f"shards={len(self._allocation.placements)}{state})"
        )
