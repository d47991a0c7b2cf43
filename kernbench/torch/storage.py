"""Device tensors over part of another's memory: how a contiguous view reaches kernels and links.

A view whose elements are one row-major run of its storage (``t[1:3]``,
``t[0]``, ``t.view(...)``) is the same bytes as that run.  :func:`element_range`
describes the run as a :class:`RangeDeviceTensor`: a runtime device tensor
whose shards are the pieces of the storage's shards that the run covers, at
their physical and virtual addresses, so device kernels, host reads and
collectives use exactly those bytes and nothing is copied.  The range owns no
memory: it keeps its storage alive, is freed with it, and cannot be freed
itself.

A run is expressible when every storage shard it touches is itself one run of
the storage (no ``column_wise`` split of a 2-D or larger tensor) and the
pieces are equal blocks of whole rows of the view's shape (the kernel layer
addresses shards as a regular grid).  Otherwise
:func:`element_range` returns None and the caller copies (see
:mod:`~kernbench.torch.layout`).
"""

from __future__ import annotations

import dataclasses
import math

from kernbench.errors import TensorError
from kernbench.placement import ShardSpec
from kernbench.runtime.tensor import Allocation, DeviceTensor, ShardPlacement

__all__ = ["RangeDeviceTensor", "element_range"]


class RangeDeviceTensor(DeviceTensor):
    """A device tensor over a run of elements of ``storage``'s memory (owns none itself)."""

    def __init__(
        self,
        storage: DeviceTensor,
        name: str,
        shape: tuple[int, ...],
        allocation: Allocation,
    ) -> None:
        super().__init__(storage.context, name, shape, storage.dtype, storage.policy, allocation)
        self.storage = storage

    @property
    def is_freed(self) -> bool:
        return self.storage.is_freed

    def live_allocation(self) -> Allocation:
        self.storage.live_allocation()  # a freed storage takes its views with it
        return super().live_allocation()

    def free(self) -> None:
        raise TensorError(
            f"tensor {self.name!r} is a view of {self.storage.name!r} and owns no memory; "
            "free the tensor it views"
        )


def _run_of(shard: ShardSpec) -> int | None:
    """The first storage element of ``shard`` when its block is one row-major run."""
    offset = shard.contiguous_offset_bytes
    return None if offset is None else offset // shard.itemsize


def element_range(
    storage: DeviceTensor, start: int, shape: tuple[int, ...]
) -> RangeDeviceTensor | None:
    """Storage elements ``[start, start + prod(shape))`` as a device tensor of ``shape``.

    None when the run cannot be described by shards of ``shape`` (see the
    module docstring).
    """
    count = math.prod(shape)
    itemsize = storage.dtype.itemsize
    row = math.prod(shape[1:]) if len(shape) > 1 else 1
    placements: list[ShardPlacement] = []
    for p in storage.placements:
        s = p.shard
        if s.nbytes == 0 or p.pa is None:
            continue
        first = _run_of(s)
        if first is None:
            return None
        lo, hi = max(start, first), min(start + count, first + math.prod(s.shape))
        if lo >= hi:
            continue
        a, b = lo - start, hi - start
        if a % row or b % row:
            return None
        skip = (lo - first) * itemsize
        if shape:
            index = (slice(a // row, b // row),) + tuple(slice(0, d) for d in shape[1:])
            piece = (b // row - a // row, *shape[1:])
        else:
            index, piece = (), ()
        spec = ShardSpec(
            s.sip, s.cube, s.pe, index, piece, (b - a) * itemsize, s.replica, shape, itemsize
        )
        pa = dataclasses.replace(p.pa, offset=p.pa.offset + skip)
        placements.append(ShardPlacement(spec, pa, p.va + skip, p.memory_node))
    if len({p.shard.shape for p in placements}) > 1:
        return None  # kernels address shards as a regular grid of equal blocks
    if not placements:
        if count:
            return None
        home = storage.placements[0]
        s = home.shard
        index = tuple(slice(0, d) for d in shape)
        spec = ShardSpec(s.sip, s.cube, s.pe, index, shape, 0, 0, shape, itemsize)
        placements.append(ShardPlacement(spec, None, home.va, home.memory_node))
    va_base = min(p.va for p in placements)
    name = f"{storage.name}[{start}:{start + count}]"
    allocation = Allocation(name, va_base, count * itemsize, placements)
    return RangeDeviceTensor(storage, name, shape, allocation)
