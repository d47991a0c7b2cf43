"""Running kernels on the simulated PEs: device buffers, program placement, launch.

A launch whose arguments include device tensors runs on the machine: this
module registers the runtime's :class:`~kernbench.runtime.tensor.DeviceTensor`
with ``jit`` as an argument that claims launches (the runtime knows nothing of
kernels).

* **Placement.** Programs go to the PEs that hold the first device tensor's
  shards (one copy of each block, in (sip, cube, pe) order), in contiguous
  runs of program order: with G programs over P PEs, program i runs on PE
  ``floor(i·P/G)``.  A grid with ``spmd_dim(g, nc(k))`` puts core c's programs
  on the c-th of those PEs (continuing with the next PEs of the same cube when
  the tensor lives on fewer than k).
* **Values.** A program runs functionally when its PE starts it; a
  :class:`DeviceBuffer` maps each global element index to the shard holding it
  and reads or writes the memory store.  A load reads the copy nearest the
  PE; a store writes every copy, so replicas stay equal.
* **Time** (ADR 0006).  Each program pays the PE's launch overhead, then its
  memory traffic (one flow per memory node it touched, loads after a request
  latency) and its engine work (matrix FLOPs on the matrix engine, vector FLOPs
  on the vector engine) overlap; the program ends when all are done.  Programs
  on one PE run one after another; PEs run in parallel.
* **Addresses.** An address a kernel loads (a ``tensor.data_ptr()`` value kept
  in an int64 tensor, as Triton's group-GEMM tutorial does) and converts with
  ``.to(tl.pointer_type(ty))`` becomes a pointer into the live tensor whose
  virtual addresses hold it (:class:`AddressSpace`), read and written through a
  :class:`DeviceBuffer` as an argument's are and costing the same.  It needs the
  values, so timing-only runs refuse it.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.kernels import language as tl
from kernbench.kernels.dtypes import element_type
from kernbench.kernels.interpreter import Interpreter, LaunchRecord, ProgramCounts
from kernbench.kernels.jit import KernelLaunch, register_argument_launcher
from kernbench.kernels.program import where_am_i
from kernbench.machine import ProgramWork, RunPrograms
from kernbench.runtime.tensor import DeviceTensor, ShardPlacement
from kernbench.topology import names

if TYPE_CHECKING:
    from kernbench.runtime.context import RuntimeContext

__all__ = [
    "AddressSpace",
    "DeviceBuffer",
    "DeviceLaunchResult",
    "launch_on_device",
    "plan_programs",
]

# Bytes of the launch command the host sends (arguments, grid, kernel handle).
LAUNCH_COMMAND_BYTES = 256


class _Layout:
    """Where each element of a tensor lives: a regular grid of blocks, each with its copies."""

    def __init__(self, tensor: DeviceTensor) -> None:
        self.shape = tensor.shape
        blocks: dict[tuple, list[ShardPlacement]] = {}
        for p in tensor.placements:
            key = tuple((s.start, s.stop) for s in p.shard.index)
            blocks.setdefault(key, []).append(p)
        self.ndim = len(self.shape)
        self.split_dims = [0] if self.ndim == 1 else ([0, self.ndim - 1] if self.ndim else [])
        # Python lists and bisect here: a layout is made for every allocation a kernel
        # touches, and NumPy's per-call cost would dominate on these few blocks.
        starts = [sorted({key[d][0] for key in blocks}) for d in self.split_dims]
        self.starts = [np.array(s, dtype=np.int64) for s in starts]
        self.replicas: list[list[ShardPlacement]] = [
            [] for _ in range(math.prod(len(s) for s in starts))
        ]
        for key, placements in blocks.items():
            block_id = 0
            for d, dim_starts in zip(self.split_dims, starts, strict=True):
                block_id = block_id * len(dim_starts) + bisect.bisect_left(dim_starts, key[d][0])
            self.replicas[block_id] = placements
        self.block_shape = next(iter(blocks.values()))[0].shard.shape if blocks else ()
        # One block covering the tensor (copies of it aside): a flat index is its own
        # index in the block, and loads and stores need no sorting by block.
        self.single = (
            len(self.replicas) == 1
            and bool(self.replicas[0])
            and tuple(self.block_shape) == tuple(self.shape)
        )
        self._nearest: dict[tuple[int, int, int], list[ShardPlacement | None]] = {}

    def nearest(self, pe: tuple[int, int, int]) -> list[ShardPlacement | None]:
        """Each block's copy nearest to ``pe`` (None for a block without copies)."""
        nearest = self._nearest.get(pe)
        if nearest is None:  # once per PE: a layout serves every launch on its allocation
            nearest = self._nearest[pe] = [
                min(replicas, key=lambda p: _distance(pe, p)) if replicas else None
                for replicas in self.replicas
            ]
        return nearest

    def locate(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(block id, flat index inside the block's shard) of global flat indices."""
        if self.ndim == 0:
            return np.zeros_like(flat), np.zeros_like(flat)
        multi = list(np.unravel_index(flat, self.shape))
        block_ids = np.zeros_like(flat)
        for d, starts in zip(self.split_dims, self.starts, strict=True):
            block = np.searchsorted(starts, multi[d], side="right") - 1
            block_ids = block_ids * len(starts) + block
            multi[d] = multi[d] - starts[block]
        local = np.ravel_multi_index(tuple(multi), self.block_shape)
        return block_ids, local


def _distance(pe: tuple[int, int, int], placement: ShardPlacement) -> int:
    s = placement.shard
    return (s.sip != pe[0]) * 4 + (s.cube != pe[1]) * 2 + (s.pe != pe[2])


class DeviceBuffer:
    """A device tensor seen from one PE, for the kernel interpreter (KernelBuffer)."""

    memory = "hbm"

    def __init__(self, tensor: DeviceTensor, pe: tuple[int, int, int], traffic: _Traffic) -> None:
        ctx = tensor.context
        self.name = tensor.name
        self._tensor_dtype = tensor.dtype
        self.dtype = tensor.dtype.value
        self.element_type = tl.bfloat16 if tensor.dtype.name == "bfloat16" else None
        self.numel = tensor.numel
        self._layout = _layout_of(tensor)
        self._store = ctx.store if ctx.store.stores_bytes else None
        self._traffic = traffic
        self._itemsize = tensor.dtype.itemsize
        self._nearest = self._layout.nearest(pe)
        self._views: dict[int, np.ndarray] = {}

    def _view(self, placement: ShardPlacement) -> np.ndarray:
        view = self._views.get(id(placement))
        if view is None:
            raw = self._store.view(placement.pa, placement.shard.nbytes)
            view = self._views[id(placement)] = raw.view(self._tensor_dtype.storage)
        return view

    def load(self, indices: np.ndarray) -> np.ndarray:
        if self._layout.single and indices.size:
            placement = self._nearest[0]
            self._traffic.loads[placement.memory_node] += indices.size * self._itemsize
            out = np.zeros(indices.shape, dtype=self.dtype)
            if self._store is not None:
                out[...] = self._tensor_dtype.from_storage(self._view(placement)[indices])
            return out
        block_ids, local = self._layout.locate(indices)
        out = np.zeros(indices.shape, dtype=self.dtype)
        for block in np.unique(block_ids):
            chosen = block_ids == block
            placement = self._nearest[block]
            self._traffic.loads[placement.memory_node] += int(chosen.sum()) * self._itemsize
            if self._store is not None:
                stored = self._view(placement)[local[chosen]]
                out[chosen] = self._tensor_dtype.from_storage(stored)
        return out

    def store(self, indices: np.ndarray, values: np.ndarray) -> None:
        values = np.broadcast_to(np.asarray(values), indices.shape)
        if self._layout.single and indices.size:
            flat = indices.reshape(-1)
            stored = None
            if self._store is not None:
                stored = self._tensor_dtype.to_storage(values.reshape(-1))
            for placement in self._layout.replicas[0]:
                self._traffic.stores[placement.memory_node] += flat.size * self._itemsize
                if stored is not None:
                    self._view(placement)[flat] = stored
            return
        block_ids, local = self._layout.locate(indices)
        for block in np.unique(block_ids):
            chosen = block_ids == block
            count = int(chosen.sum())
            stored = None
            if self._store is not None:
                stored = self._tensor_dtype.to_storage(values[chosen])
            for placement in self._layout.replicas[block]:
                self._traffic.stores[placement.memory_node] += count * self._itemsize
                if stored is not None:
                    self._view(placement)[local[chosen]] = stored

    def __repr__(self) -> str:
        return f"DeviceBuffer({self.name!r}, numel={self.numel})"


def _layout_of(tensor: DeviceTensor) -> _Layout:
    """The tensor's layout, kept with its allocation (it lives exactly as long)."""
    allocation = tensor.live_allocation()
    if allocation.layout is None:
        allocation.layout = _Layout(tensor)
    return allocation.layout


class _Traffic:
    """Bytes one program moved, per memory node."""

    def __init__(self) -> None:
        self.loads: dict[str, int] = defaultdict(int)
        self.stores: dict[str, int] = defaultdict(int)

    def take(self) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]:
        loads, stores = tuple(self.loads.items()), tuple(self.stores.items())
        self.loads.clear()
        self.stores.clear()
        return loads, stores


class AddressSpace:
    """The machine's virtual addresses seen from one PE's programs.

    :meth:`pointer` turns addresses (what ``data_ptr()`` gives: a tensor's base
    plus element index times item size) into a pointer into the tensor holding
    them.  A pointer here is one tensor plus element offsets, so the addresses of
    one block must lie in one tensor, and the pointer must be to the tensor's own
    element type (its values are held by that type).
    """

    def __init__(self, ctx: RuntimeContext, pe: tuple[int, int, int], traffic: _Traffic) -> None:
        self._ctx = ctx
        self._pe = pe
        self._traffic = traffic
        self._buffers: dict[int, tuple[DeviceTensor, DeviceBuffer]] = {}

    def pointer(self, addresses: np.ndarray, element_ty: tl.dtype) -> tl.Pointer:
        what = f"{where_am_i()}: converting addresses to tl.pointer_type({element_ty!r})"
        if not self._ctx.store.stores_bytes:
            raise KernelError(
                f"{what}: a timing-only run carries no values, so an address loaded from "
                "memory cannot be followed; run this kernel functionally (without timing-only)"
            )
        values = np.asarray(addresses).astype(np.int64)
        if values.size == 0:
            raise KernelError(f"{what}: there are no addresses in an empty block")
        low, high = int(values.min()), int(values.max())
        tensor = self._ctx.tensor_at(low)
        if tensor is None:
            raise KernelError(
                f"{what}: address {low:#x} is in no live tensor of this machine; an address "
                "must come from data_ptr() of a tensor that is still alive"
            )
        if self._ctx.tensor_at(high) is not tensor:
            raise KernelError(
                f"{what}: addresses {low:#x} and {high:#x} are in different tensors; a pointer "
                f"here is one tensor plus offsets, so convert each tensor's address on its own "
                "(a scalar load a tensor, as tutorials do)"
            )
        buffer = self._buffer(tensor)
        held = element_type(buffer)
        if element_ty is not held:
            raise KernelError(
                f"{what}: address {low:#x} is in tensor {tensor.name!r} of {held!r}; the "
                f"machine holds a tensor's values by its own type, so convert to "
                f"tl.pointer_type({held!r}) (or cast the tensor on the host first)"
            )
        byte_offsets = values - tensor.va_base
        itemsize = tensor.dtype.itemsize
        if np.any(byte_offsets % itemsize):
            raise KernelError(
                f"{what}: an address is not on an element boundary of tensor {tensor.name!r} "
                f"({itemsize}-byte elements from {tensor.va_base:#x})"
            )
        return tl.Pointer(buffer, byte_offsets // itemsize)

    def _buffer(self, tensor: DeviceTensor) -> DeviceBuffer:
        known = self._buffers.get(id(tensor))
        if known is None or known[0] is not tensor:
            known = self._buffers[id(tensor)] = (
                tensor,
                DeviceBuffer(tensor, self._pe, self._traffic),
            )
        return known[1]


def plan_programs(launch: KernelLaunch, anchor: DeviceTensor) -> dict[str, list[tuple]]:
    """PE name -> the program ids it runs, in program order."""
    grid = launch.grid
    pids = list(grid.program_ids())
    seen: dict[tuple[int, int, int], None] = {}
    for p in anchor.placements:
        if p.shard.replica == 0 and p.shard.nbytes:
            seen.setdefault(p.shard.coord)
    home = list(seen) or [anchor.placements[0].shard.coord]
    plan: dict[str, list[tuple]] = {}
    if grid.num_cores > 1:
        topo = anchor.context.topology
        cores = list(home[: grid.num_cores])
        sip, cube, pe = home[0]
        step = 1
        while len(cores) < grid.num_cores:
            candidate = (sip, cube, (pe + step) % topo.pes_per_cube)
            step += 1
            if step > topo.pes_per_cube:
                raise KernelError(
                    f"kernel {launch.kernel.name!r}: nc({grid.num_cores}) needs "
                    f"{grid.num_cores} PEs but a cube has {topo.pes_per_cube}"
                )
            if candidate not in cores:
                cores.append(candidate)
        for pid in pids:
            plan.setdefault(_pe_name(cores[grid.core_of(pid)]), []).append(pid)
        return plan
    for i, pid in enumerate(pids):
        plan.setdefault(_pe_name(home[i * len(home) // len(pids)]), []).append(pid)
    return plan


def _pe_name(coord: tuple[int, int, int]) -> str:
    return names.pe(*coord)


@dataclass(frozen=True)
class DeviceLaunchResult:
    """A finished launch: what each program did, where it ran and when."""

    record: LaunchRecord
    placement: dict[str, tuple[tuple[int, ...], ...]]
    start_ps: int
    end_ps: int

    @property
    def elapsed_ps(self) -> int:
        return self.end_ps - self.start_ps


def launch_on_device(ctx: RuntimeContext, launch: KernelLaunch, *, wait: bool = True) -> Any:
    """Run ``launch`` on the PEs of ``ctx``; returns a :class:`DeviceLaunchResult`."""
    tensors = [a for a in launch.args if isinstance(a, DeviceTensor)]
    if not tensors:
        raise KernelError(f"kernel {launch.kernel.name!r}: no device tensor among its arguments")
    for t in tensors:
        if t.context is not ctx:
            raise KernelError(
                f"kernel {launch.kernel.name!r}: tensor {t.name!r} belongs to another context"
            )
        t.live_allocation()
    launch.grid.check_size(launch.kernel.name)
    plan = plan_programs(launch, tensors[0])
    counts: dict[tuple, ProgramCounts] = {}
    programs: dict[str, list[Callable[[], ProgramWork]]] = {}
    for pe, pids in plan.items():
        traffic = _Traffic()
        coord = names.pe_coordinates(pe)
        args = tuple(
            DeviceBuffer(a, coord, traffic) if isinstance(a, DeviceTensor) else a
            for a in launch.args
        )
        space = AddressSpace(ctx, coord, traffic)
        local = dataclasses.replace(launch, args=args, address_space=space)
        arguments = _SharedArguments(local)
        programs[pe] = [_program(local, pid, traffic, counts, arguments) for pid in pids]
    first_pe = next(iter(plan))
    start = ctx.now
    handle = ctx.submit(
        RunPrograms(
            src="host",
            dst=names.m_cpu_of(first_pe),
            nbytes=LAUNCH_COMMAND_BYTES,
            programs=programs,
            tag=launch.kernel.name,
        )
    )
    if not wait:
        return handle
    ctx.wait(handle)
    order = list(launch.grid.program_ids())
    record = LaunchRecord(launch.kernel.name, launch.grid, tuple(counts[p] for p in order))
    return DeviceLaunchResult(
        record, {pe: tuple(pids) for pe, pids in plan.items()}, start, ctx.now
    )


class _SharedArguments:
    """The kernel arguments of one PE's programs (pointers, typed scalars), made when the
    first of them runs and passed to all, as the host interpreter passes one set to every
    program of a launch: making them costs more than many a small program."""

    def __init__(self, launch: KernelLaunch) -> None:
        self._launch = launch
        self._values: dict[str, Any] | None = None

    def values(self) -> dict[str, Any]:
        if self._values is None:
            self._values = Interpreter().kernel_args(self._launch)
        return self._values


def _program(
    launch: KernelLaunch,
    pid: tuple,
    traffic: _Traffic,
    counts: dict[tuple, ProgramCounts],
    arguments: _SharedArguments,
) -> Callable[[], ProgramWork]:
    def run() -> ProgramWork:
        program = Interpreter().run_program(launch, pid, kernel_args=arguments.values())
        counts[pid] = program
        loads, stores = traffic.take()
        return ProgramWork(loads, stores, program.matrix_flops, program.vector_flops)

    return run


def _launch_on_tensor_context(tensor: DeviceTensor, launch: KernelLaunch) -> Any:
    """A launch claimed by a device tensor runs on the machine of that tensor's context."""
    return launch_on_device(tensor.context, launch)


register_argument_launcher(DeviceTensor, _launch_on_tensor_context)
