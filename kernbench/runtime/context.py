"""The runtime context: tensors on the simulated machine, and the engine handles.

``RuntimeContext`` owns the machine (:mod:`kernbench.machine`), the
allocators, the virtual address space and the memory store.  Creating a
tensor resolves its DP placement, allocates each shard in its PE's HBM
partition, maps it (host -> M_CPU -> every PE of the cube) through the machine
and, for ``zeros``, writes it; ``copy_`` scatters host data into the shards
and ``numpy`` gathers them back, all as timed messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from greenlet import getcurrent

import kernbench.fabric  # noqa: F401 - registers the detailed backend
import kernbench.fast  # noqa: F401 - registers the fast backend
from kernbench.errors import (
    ConfigError,
    KernelError,
    OutOfMemoryError,
    PlacementError,
    TensorError,
)
from kernbench.machine import MMU_ENTRY_BYTES, MemoryRead, MemoryWrite, Message, MmuMap, MmuUnmap
from kernbench.machine.api import Handle, Machine
from kernbench.machine.backends import build_machine
from kernbench.machine.observe import RowRecorder
from kernbench.memory import MachineMemory, MemoryKind, MemoryStore, NullStore, VirtualAllocator
from kernbench.placement import DPPolicy, gather, plan_shards, scatter, unique_blocks
from kernbench.runtime import sizes
from kernbench.runtime.device_namespaces import AcceleratorNamespace, AhbmNamespace
from kernbench.runtime.dtypes import DType, as_dtype
from kernbench.runtime.ipcq_install import ipcq_installer
from kernbench.runtime.memory_stats import DeviceMemoryStats, MemoryLedger
from kernbench.runtime.tensor import Allocation, DeviceTensor, HostTensor, ShardPlacement
from kernbench.topology import Topology, load_topology, names
from kernbench.units import format_size
from kernbench.validation import shown_value

__all__ = ["RuntimeContext"]

_LEVELS = ("sip", "cube", "pe")


# The smallest virtual address space (64 TiB); a machine with more memory gets the
# power of two at least twice its memory, so every byte can be mapped (and then some)
# whatever its size: 131,072 PEs with a 1 GiB tensor each need 128 TiB.
MIN_VA_BYTES = 1 << 46


def _va_size(memory_bytes: int, page_size: int) -> int:
    """Bytes of virtual address space for a machine of ``memory_bytes`` (see
    :data:`MIN_VA_BYTES`)."""
    size = max(MIN_VA_BYTES, 1 << (2 * memory_bytes - 1).bit_length())
    return max(size, page_size)


class RuntimeContext:
    """Tensors, launches and requests on one simulated machine."""

    def __init__(
        self,
        topology: Topology | str | Path,
        *,
        timing_only: bool = False,
        overrides: Iterable[str] = (),
        machine: Machine | None = None,
        host_memory_limit: int | None = None,
    ) -> None:
        """``host_memory_limit``: bytes of tensor values a functional run may hold on the
        host (default: :func:`~kernbench.runtime.sizes.available_host_memory` when the
        context is made)."""
        if not isinstance(timing_only, bool | np.bool_):
            # "no" would be true: a timing-only run, reported as timing_only: "no"
            raise ConfigError(f"timing_only must be True or False (got {shown_value(timing_only)})")
        timing_only = bool(timing_only)
        if not isinstance(topology, Topology):
            topology = load_topology(topology, overrides)
        self.topology = topology
        self.timing_only = timing_only
        self.store = NullStore() if timing_only else MemoryStore()
        if timing_only:
            self.host_memory_limit = None
        else:
            limit = (
                sizes.available_host_memory() if host_memory_limit is None else host_memory_limit
            )
            self.host_memory_limit = int(limit)
        self._host_bytes = 0  # bytes of values the live tensors may hold (functional mode)
        if machine is None:
            machine = build_machine(topology, store=self.store, backend=topology.simulation.backend)
        else:
            machine.store = self.store
        self.machine: Machine = machine
        self._rows = RowRecorder()
        self.machine.observers.add(self._rows)
        # Per-run state the layers above keep on the context (the collectives'
        # settings, ...), by layer: the runtime knows nothing of what is in it.
        self.extensions: dict[str, Any] = {}
        cube = topology.cube
        components = cube.pe_template.components
        self.memory = MachineMemory(
            sips=topology.num_sips,
            cubes_per_sip=topology.cubes_per_sip,
            pes_per_cube=topology.pes_per_cube,
            hbm_bytes_per_cube=cube.memory_map.hbm_total_gb_per_cube,
            hbm_slices_per_cube=cube.memory_map.hbm_slices_per_cube,
            sram_bytes_per_cube=cube.sram.size,
            tcm_bytes_per_pe=components.pe_tcm.attrs.size_mb,
        )
        self.page_size = components.pe_mmu.attrs.page_size
        self.va = VirtualAllocator(
            self.page_size, size=_va_size(self.memory.total_bytes, self.page_size)
        )
        self._devices: dict[Any, int] = {}
        # Each rank's (greenlet's) allocation counters, as torch's allocator keeps them
        # per process: weakly, so a finished rank's go with it.
        self._ledgers: weakref.WeakKeyDictionary[Any, MemoryLedger] = weakref.WeakKeyDictionary()
        self._tensor_count = 0
        self._live: dict[int, Allocation] = {}
        # The tensor each live allocation belongs to, weakly (tensor_at maps addresses back).
        self._owners: dict[int, weakref.ref[DeviceTensor]] = {}
        self._pending_release: list[Allocation] = []
        # True while the allocators or the store are being changed: a tensor dropped by a
        # garbage collection then must not change them under the running code.
        self._bookkeeping = False
        self._pending: dict[int, Handle] = {}
        # The runtime API's device namespaces (ctx.ahbm.set_device, ...) and the kernels
        # launched by name with launch(), last launch wins.
        self.ahbm = AhbmNamespace(self)
        self.accelerator = AcceleratorNamespace(self.ahbm)
        self.kernels: dict[str, Any] = {}

    # -- the runtime API: IPCQ install plans and named launches -----------------------
    def install_ipcq(
        self,
        algorithm: str | None = None,
        ccl_yaml: str | Path | None = None,
        world_size_override: int | None = None,
        rank_to_pe: Sequence[tuple[int, int, int]] | None = None,
    ) -> dict[str, Any]:
        """Install the IPCQ neighbour tables of a collective configuration; return its plan.

        ``algorithm``: a configuration of the catalogue (``ccl_yaml``, default the
        run's), default the run's all-reduce choice; ``world_size_override``: the
        number of ranks (default: the configuration's, else ``len(rank_to_pe)``,
        else one per device); ``rank_to_pe``: each rank's (sip, cube, pe) (default:
        each device's first PE, where collectives run).  The plan maps
        ``rank_to_pe`` (rank -> (sip, cube, pe)) and ``neighbors`` (rank -> peer
        ranks, over every op the configuration serves), and says whether this call
        ``installed`` anything: a plan already installed (by an earlier call or a
        collective) sends nothing, and a collective that runs after this install
        finds its tables in place.  A different plan installs beside it.
        """
        return ipcq_installer()(
            self,
            algorithm=algorithm,
            ccl_yaml=ccl_yaml,
            world_size_override=world_size_override,
            rank_to_pe=rank_to_pe,
        )

    def launch(
        self, kernel_name: str, kernel_fn: Any, *args: Any, grid: Any = (1,), **kwargs: Any
    ) -> Any:
        """Register ``kernel_fn`` as ``kernel_name`` and launch it: ``kernel_fn[grid](*args,
        **kwargs)``, on the PEs holding its first device tensor (costs time).

        ``kernel_fn`` is a ``@kernbench.kernels.jit`` kernel; ``self.kernels`` maps each
        name to the kernel last launched under it.  Returns what the launch returns
        (a ``DeviceLaunchResult`` for a kernel on device tensors).
        """
        if not isinstance(kernel_name, str) or not kernel_name:
            raise KernelError(f"launch: kernel_name must be a non-empty str (got {kernel_name!r})")
        if not hasattr(kernel_fn, "__getitem__"):
            raise KernelError(
                f"launch({kernel_name!r}): kernel_fn must be a @jit kernel, launched as "
                f"kernel[grid](...) (got {type(kernel_fn).__name__})"
            )
        self.kernels[kernel_name] = kernel_fn
        return kernel_fn[grid](*args, **kwargs)

    # -- clock and requests --------------------------------------------------------
    @property
    def trace(self) -> list:
        """Every request and component work row so far, in order (the run's trace)."""
        return self._rows.rows

    @property
    def now(self) -> int:
        """The simulated clock, in picoseconds."""
        return self.machine.now

    def submit(self, msg: Message) -> Handle:
        handle = self.machine.submit(msg)
        self._pending[handle.request_id] = handle
        return handle

    def wait(self, handle: Handle):
        # Forget the handle first: a waited request (even a failed one) is no longer pending,
        # and holding it would keep its payloads alive.
        self._pending.pop(handle.request_id, None)
        return self.machine.wait(handle)

    def wait_all(self, handles: Sequence[Handle] | None = None) -> list:
        """Wait for ``handles``, or for every request submitted here and not yet waited on."""
        pending = list(self._pending.values() if handles is None else handles)
        return [self.wait(h) for h in pending]

    # -- devices ---------------------------------------------------------------------
    @property
    def num_devices(self) -> int:
        level = self.topology.system.device_level
        return {
            "sip": self.topology.num_sips,
            "cube": self.topology.num_cubes,
            "pe": self.topology.num_pes,
        }[level]

    def set_device(self, device: int) -> None:
        """Bind the calling rank (greenlet) to a device; new tensors live there."""
        self._check_device(device)
        self._devices[getcurrent()] = device

    def unbind_device(self) -> None:
        """Undo :meth:`set_device` for the calling greenlet (``torch.cuda.device`` restoring
        "no device" on leaving its block)."""
        self._devices.pop(getcurrent(), None)

    def check_device(self, device: int) -> None:
        """Raise :class:`PlacementError` unless ``device`` is one of this machine's devices."""
        self._check_device(device)

    def _check_device(self, device: int) -> None:
        if isinstance(device, bool) or not isinstance(device, int):
            raise PlacementError(f"device must be an int index (got {device!r})")
        if not 0 <= device < self.num_devices:
            level = self.topology.system.device_level
            raise PlacementError(
                f"device {device} does not exist: this machine has {self.num_devices} "
                f"devices at level {level!r} (valid: 0..{self.num_devices - 1})"
            )

    def current_device(self) -> int | None:
        return self._devices.get(getcurrent())

    def device_coords(self, device: int) -> tuple[int, int | None, int | None]:
        """(sip, cube or None, pe or None) of a device at the topology's device level."""
        level = self.topology.system.device_level
        cps, ppc = self.topology.cubes_per_sip, self.topology.pes_per_cube
        if level == "sip":
            return device, None, None
        if level == "cube":
            return device // cps, device % cps, None
        return device // (cps * ppc), (device // ppc) % cps, device % ppc

    def device_of(self, sip: int, cube: int, pe: int) -> int:
        """The device (at the topology's device level) that holds PE ``(sip, cube, pe)``."""
        level = self.topology.system.device_level
        cps, ppc = self.topology.cubes_per_sip, self.topology.pes_per_cube
        if level == "sip":
            return sip
        if level == "cube":
            return sip * cps + cube
        return (sip * cps + cube) * ppc + pe

    def device_pe(self, device: int) -> str:
        """The PE a device's tensors and collectives start on (its first PE)."""
        sip, cube, pe = self.device_coords(device)
        return names.pe(sip, cube or 0, pe or 0)

    def _scope(
        self, dp: DPPolicy | None, device: int | None = None
    ) -> tuple[DPPolicy, dict[str, int]]:
        """The policy and base coordinates a tensor is resolved with.

        No policy: the whole tensor on the first PE of the current device.  A
        policy whose levels down to the device level are plain ``replicate``
        stays inside the current device; otherwise it spans the machine.
        """
        if device is None:
            device = self.current_device()
        else:
            self._check_device(device)
        coords = self.device_coords(device) if device is not None else (0, 0, 0)
        bases = {"sip": 0, "cube": 0, "pe": 0}
        if dp is None:
            policy = DPPolicy(num_sips=1, num_cubes=1, num_pes=1)
            for level, coord in zip(_LEVELS, coords, strict=True):
                bases[level] = coord or 0
            return policy, bases
        if not isinstance(dp, DPPolicy):
            raise PlacementError(f"dp must be a DPPolicy (got {type(dp).__name__})")
        if device is None:
            return dp, bases
        changes: dict[str, int] = {}
        for level, coord in zip(_LEVELS, coords, strict=True):
            if coord is None:
                break
            count_key = f"num_{level}s"
            if getattr(dp, level) == "replicate" and getattr(dp, count_key) is None:
                changes[count_key] = 1
                bases[level] = coord
        return dataclasses.replace(dp, **changes), bases

    # -- tensor creation -------------------------------------------------------------
    def zeros(
        self,
        shape: Sequence[int] | int,
        dtype: Any = "float32",
        *,
        dp: DPPolicy | None = None,
        name: str | None = None,
        device: int | None = None,
    ) -> DeviceTensor:
        """A tensor of zeros, written to its HBM through the fabric (costs time).

        ``device`` places it on that device instead of the current one.
        """
        tensor = self._create(shape, dtype, dp, name, device)
        self._write_shards(tensor, pieces=None)
        return tensor

    def empty(
        self,
        shape: Sequence[int] | int,
        dtype: Any = "float32",
        *,
        dp: DPPolicy | None = None,
        name: str | None = None,
        device: int | None = None,
    ) -> DeviceTensor:
        """A tensor whose memory is allocated and mapped but not written."""
        return self._create(shape, dtype, dp, name, device)

    def from_numpy(self, array: np.ndarray, dtype: Any = None) -> HostTensor:
        """A host tensor holding ``array`` (converted to ``dtype`` if given)."""
        array = np.asarray(array)
        return HostTensor(array, as_dtype(array.dtype if dtype is None else dtype))

    def _create(
        self,
        shape: Sequence[int] | int,
        dtype: Any,
        dp: DPPolicy | None,
        name: str | None,
        device: int | None = None,
    ) -> DeviceTensor:
        self._drain_releases()
        shape = sizes.checked_shape(shape)
        dtype = as_dtype(dtype)
        self._tensor_count += 1
        name = name or f"t{self._tensor_count}"
        policy, bases = self._scope(dp, device)
        topo = self.topology
        shards = plan_shards(
            policy,
            shape,
            dtype.itemsize,
            num_sips=topo.num_sips,
            cubes_per_sip=topo.cubes_per_sip,
            pes_per_cube=topo.pes_per_cube,
            sip_base=bases["sip"],
            cube_base=bases["cube"],
            pe_base=bases["pe"],
        )
        host_bytes = self._check_host_memory(name, shape, dtype, shards)
        allocation = self._allocate(name, shape, dtype, shards)
        self._host_bytes += host_bytes
        self._mmu(allocation, unmap=False)
        tensor = DeviceTensor(self, name, shape, dtype, policy, allocation)
        # Weakly: the finalizer registry is a root, and a context it held would live on
        # with every tensor its stopped run left (a run stopped inside a collective).
        tensor.on_drop(_dropped_from, weakref.ref(self), allocation)
        self._live[id(allocation)] = allocation
        self._owners[id(allocation)] = weakref.ref(tensor)
        return tensor

    def tensor_at(self, address: int) -> DeviceTensor | None:
        """The live tensor whose virtual addresses hold ``address`` (as ``data_ptr()``
        gives them: its base plus the element index times the item size), or None."""
        for key, allocation in self._live.items():
            if allocation.va_base <= address < allocation.va_base + allocation.va_bytes:
                owner = self._owners.get(key)
                tensor = owner() if owner is not None else None
                if tensor is not None and not allocation.released:
                    return tensor
        return None

    def _check_host_memory(
        self, name: str, shape: tuple[int, ...], dtype: DType, shards: list
    ) -> int:
        """The host bytes a functional tensor's values take; refused past the limit."""
        if self.host_memory_limit is None:
            return 0
        need = sum(s.nbytes for s in shards)
        if self._host_bytes + need > self.host_memory_limit:
            raise OutOfMemoryError(
                f"tensor {name!r} (shape {shape}, {dtype.name}, {format_size(need)} with its "
                f"replicas) does not fit in host memory: functional mode keeps every tensor's "
                f"values on the host, and this run has {format_size(self.host_memory_limit)} of "
                f"host memory ({format_size(self._host_bytes)} held by live tensors); run with "
                "--timing-only (sizes, not bytes) or use smaller tensors"
            )
        return need

    def _dropped(self, allocation: Allocation) -> None:
        """The last reference to a tensor went: its memory is given back now.

        The unmap is timed messages, which cannot be sent from wherever the
        reference went (a garbage collection may run anywhere, even in the
        scheduler), so it waits until the next tensor is made or ``cleanup``.
        """
        if not self._bookkeeping:
            self._give_back(allocation)
        self._pending_release.append(allocation)

    @contextlib.contextmanager
    def _changing_memory(self) -> Iterator[None]:
        previous, self._bookkeeping = self._bookkeeping, True
        try:
            yield
        finally:
            self._bookkeeping = previous

    def _allocate(
        self, name: str, shape: tuple[int, ...], dtype: DType, shards: list
    ) -> Allocation:
        with self._changing_memory():
            placements: list[ShardPlacement] = []
            page = self.page_size
            ledger = self._ledger()
            charges = []
            try:
                for shard in shards:
                    pa = None
                    node = names.hbm(shard.sip, shard.cube, 0)
                    if shard.nbytes:
                        stats = ledger.device(self.device_of(shard.sip, shard.cube, shard.pe))
                        try:
                            pa = self.memory.alloc(
                                MemoryKind.HBM,
                                shard.sip,
                                shard.cube,
                                shard.pe,
                                shard.nbytes,
                                owner=name,
                            )
                        except OutOfMemoryError:
                            stats.num_ooms += 1
                            raise
                        charges.append((stats, shard.nbytes, self.memory.size_of(pa)))
                        slice_index = self.memory.hbm_slice_of(pa)
                        node = names.hbm(shard.sip, shard.cube, slice_index)
                    placements.append(ShardPlacement(shard, pa, 0, node))
            except OutOfMemoryError as exc:
                for placement in placements:
                    if placement.pa is not None:
                        self.memory.free(placement.pa)
                raise OutOfMemoryError(
                    f"tensor {name!r} (shape {shape}, {dtype.name}) does not fit: {exc}"
                ) from None
            for stats, requested, rounded in charges:
                stats.charge(requested, rounded)
            va_bytes = sum(-(-p.shard.nbytes // page) * page for p in placements)
            va_base = self.va.alloc(va_bytes, owner=name) if va_bytes else 0
            offset = 0
            for i, placement in enumerate(placements):
                placements[i] = dataclasses.replace(placement, va=va_base + offset)
                offset += -(-placement.shard.nbytes // page) * page
                if placement.pa is not None:
                    self.store.create(
                        placement.pa, placement.shard.nbytes, label=f"{name}@{placement.pe_name}"
                    )
            return Allocation(name, va_base, va_bytes, placements, charges=tuple(charges))

    def _by_cube(self, allocation: Allocation) -> dict[tuple[int, int], list[ShardPlacement]]:
        groups: dict[tuple[int, int], list[ShardPlacement]] = defaultdict(list)
        for p in allocation.placements:
            if p.pa is not None:
                groups[(p.shard.sip, p.shard.cube)].append(p)
        return groups

    def _cube_pes(self, sip: int, cube: int) -> tuple[str, ...]:
        return tuple(names.pe(sip, cube, p) for p in range(self.topology.pes_per_cube))

    def _mmu(self, allocation: Allocation, unmap: bool) -> None:
        """One MmuMap (or MmuUnmap) per cube holding shards: host -> M_CPU -> every PE."""
        handles = []
        for (sip, cube), group in self._by_cube(allocation).items():
            if unmap:
                msg_type, entries = MmuUnmap, tuple((p.va, p.shard.nbytes) for p in group)
            else:
                msg_type, entries = MmuMap, tuple((p.va, p.pa, p.shard.nbytes) for p in group)
            handles.append(
                self.machine.submit(
                    msg_type(
                        src="host",
                        dst=names.m_cpu(sip, cube),
                        nbytes=MMU_ENTRY_BYTES * len(entries),
                        targets=self._cube_pes(sip, cube),
                        entries=entries,
                        tag=allocation.name,
                    )
                )
            )
        [self.machine.wait(h) for h in handles]

    # -- data movement ---------------------------------------------------------------
    def _write_shards(self, tensor: DeviceTensor, pieces: dict | None) -> None:
        """Write every placed shard; ``pieces`` (fresh arrays from ``scatter``, one per
        PE, so one per placement) are handed over to the store."""
        handles = []
        for p in tensor.placements:
            if p.pa is None:
                continue
            data = None if pieces is None else pieces[p.shard.coord]
            handles.append(
                self.machine.submit(
                    MemoryWrite(
                        src="host",
                        dst=p.memory_node,
                        nbytes=p.shard.nbytes,
                        addr=p.pa,
                        data=data,
                        handed_over=data is not None,
                        tag=tensor.name,
                    )
                )
            )
        [self.machine.wait(h) for h in handles]

    def copy_in(self, tensor: DeviceTensor, src: Any) -> None:
        tensor.live_allocation()
        if isinstance(src, DeviceTensor):
            # Staged through the host: a device-side copy kernel is the faster path.
            self._check_copy_shape(tensor, src.shape)
            if self.timing_only:
                self._read_regions(src)
                self._write_shards(tensor, pieces=None)
                return
            src = self.from_numpy(src.numpy(), src.dtype)
        if self.timing_only:
            # Sizes, not bytes: the source is never converted (a broadcast view stays one).
            shape = src.shape if isinstance(src, HostTensor) else np.shape(src)
            self._check_copy_shape(tensor, tuple(shape))
            self._write_shards(tensor, pieces=None)
            return
        try:
            if isinstance(src, HostTensor):
                same = src.dtype == tensor.dtype
                values = src if same else HostTensor(src.numpy(), tensor.dtype)
            else:
                values = HostTensor(np.asarray(src), tensor.dtype)
            self._check_copy_shape(tensor, values.shape)
            pieces = scatter(values.storage, tensor.shards)
        except MemoryError:
            raise self._host_out_of_memory(tensor, "copying values into") from None
        self._write_shards(tensor, pieces)

    def _host_out_of_memory(self, tensor: DeviceTensor, doing: str) -> OutOfMemoryError:
        return OutOfMemoryError(
            f"{doing} tensor {tensor.name!r} (shape {tensor.shape}, {tensor.dtype.name}, "
            f"{format_size(tensor.nbytes)}) ran out of host memory; run with --timing-only "
            "(sizes, not bytes) or use smaller tensors"
        )

    @staticmethod
    def _check_copy_shape(tensor: DeviceTensor, shape: tuple[int, ...]) -> None:
        if shape != tensor.shape:
            raise TensorError(
                f"copy_ into tensor {tensor.name!r}: source shape {shape} does not match "
                f"the tensor's shape {tensor.shape}"
            )

    def _read_regions(self, tensor: DeviceTensor) -> dict[tuple[int, int, int], Any]:
        """Read one copy of every region to the host; shard coord -> raw bytes or None."""
        regions = {id(s) for s in unique_blocks(tensor.shards)}
        reads = []
        for p in tensor.placements:
            if id(p.shard) not in regions:
                continue
            handle = None
            if p.pa is not None:
                handle = self.machine.submit(
                    MemoryRead(
                        src="host",
                        dst=p.memory_node,
                        nbytes=p.shard.nbytes,
                        addr=p.pa,
                        tag=tensor.name,
                    )
                )
            reads.append((p.shard, handle))
        return {
            shard: (None if handle is None else self.machine.wait(handle).data)
            for shard, handle in reads
        }

    def copy_out(self, tensor: DeviceTensor) -> np.ndarray:
        tensor.live_allocation()
        if self.timing_only:
            raise TensorError(
                f"tensor {tensor.name!r} has no values in timing-only mode (it carries sizes, "
                f"not bytes); run in functional mode to read it"
            )
        storage = tensor.dtype.storage
        pieces = {}
        raw_by_shard = self._read_regions(tensor)
        try:
            for shard, raw in raw_by_shard.items():
                if raw is None:
                    pieces[shard.coord] = np.zeros(shard.shape, dtype=storage)
                else:
                    pieces[shard.coord] = raw.view(storage).reshape(shard.shape)
            stored = gather(list(raw_by_shard), pieces, tensor.shape, storage)
            return tensor.dtype.from_storage(stored)
        except MemoryError:
            raise self._host_out_of_memory(tensor, "reading back") from None

    def read_back(self, tensor: DeviceTensor) -> np.ndarray | None:
        """:meth:`copy_out`'s values; in timing-only mode ``None``, after a read that
        costs the same time (it carries sizes, not bytes)."""
        if not self.timing_only:
            return self.copy_out(tensor)
        tensor.live_allocation()
        self._read_regions(tensor)
        return None

    def peek(self, tensor: DeviceTensor) -> np.ndarray:
        """The values as the memories hold them now, read without the machine: no
        simulated time passes and the rank does not yield (printing, debugging).
        :meth:`copy_out` is the costed read a program makes."""
        tensor.live_allocation()
        if self.timing_only:
            raise TensorError(
                f"tensor {tensor.name!r} has no values in timing-only mode (it carries sizes, "
                f"not bytes); run in functional mode to read it"
            )
        storage = tensor.dtype.storage
        regions = {id(s) for s in unique_blocks(tensor.shards)}
        pieces: dict[tuple[int, int, int], np.ndarray] = {}
        shards = []
        for p in tensor.placements:
            if id(p.shard) not in regions or p.shard.coord in pieces:
                continue
            shards.append(p.shard)
            raw = None if p.pa is None else self.store.read(p.pa, p.shard.nbytes)
            if raw is None:
                pieces[p.shard.coord] = np.zeros(p.shard.shape, dtype=storage)
            else:
                pieces[p.shard.coord] = raw.view(storage).reshape(p.shard.shape)
        return tensor.dtype.from_storage(gather(shards, pieces, tensor.shape, storage))

    # -- memory counters (torch.cuda.memory_allocated and its kin) ----------------------
    def _ledger(self) -> MemoryLedger:
        """The calling rank's counters (made on its first allocation or question)."""
        rank = getcurrent()
        ledger = self._ledgers.get(rank)
        if ledger is None:
            ledger = self._ledgers[rank] = MemoryLedger()
        return ledger

    def memory_stats(self, device: int) -> DeviceMemoryStats:
        """The calling rank's allocation counters on ``device``: the tensors it made there
        and has not dropped (see :mod:`kernbench.runtime.memory_stats`).

        Tensors dropped while memory was being changed, whose memory would otherwise
        come back with the next tensor, are given back first (no simulated time passes).
        """
        self._check_device(device)
        if not self._bookkeeping:
            for allocation in self._pending_release:
                self._give_back(allocation)
        return self._ledger().device(device)

    def device_memory(self, device: int) -> tuple[int, int]:
        """``(used, capacity)`` bytes of ``device``'s HBM: the partitions of all its PEs,
        ``used`` by every rank's tensors (rounded to the allocator's alignment)."""
        self._check_device(device)
        sip, cube, pe = self.device_coords(device)
        topo = self.topology
        pes = (
            1
            if pe is not None
            else topo.pes_per_cube * (1 if cube is not None else topo.cubes_per_sip)
        )
        used = self.memory.used_bytes(MemoryKind.HBM, sip=sip, cube=cube, pe=pe)
        return used, pes * self.memory.hbm_partition_bytes

    # -- release -----------------------------------------------------------------------
    def _give_back(self, allocation: Allocation) -> None:
        """Return an allocation's physical memory and stored bytes (once)."""
        if allocation.memory_returned:
            return
        allocation.memory_returned = True
        with self._changing_memory():
            for p in allocation.placements:
                if p.pa is not None:
                    self.store.release(p.pa)
                    self.memory.free(p.pa)
                    if self.host_memory_limit is not None:
                        self._host_bytes -= p.shard.nbytes
            for stats, requested, rounded in allocation.charges:
                stats.give_back(requested, rounded)
            allocation.charges = ()

    def release(self, allocation: Allocation) -> None:
        if allocation.released:
            return
        self._mmu(allocation, unmap=True)
        self._give_back(allocation)
        if allocation.va_bytes:
            self.va.free(allocation.va_base)
        allocation.released = True
        self._live.pop(id(allocation), None)
        self._owners.pop(id(allocation), None)

    def _drain_releases(self) -> None:
        while self._pending_release:
            self.release(self._pending_release.pop(0))

    def cleanup(self) -> None:
        """Free every tensor this context still holds (unmap, return PA and VA)."""
        self._drain_releases()
        for allocation in list(self._live.values()):
            self.release(allocation)

    def __enter__(self) -> RuntimeContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def _dropped_from(context: weakref.ref[RuntimeContext], allocation: Allocation) -> None:
    """A tensor of ``context`` is garbage: its memory is given back (if the context lives)."""
    ctx = context()
    if ctx is not None:
        ctx._dropped(allocation)  # noqa: SLF001 - the context's own finalizer, held weakly
