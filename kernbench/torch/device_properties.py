"""``torch.cuda.get_device_properties``: a device of the simulated machine in torch's terms.

A device is a SIP, a cube or a PE (``system.device_level``); a PE runs one
program at a time, so it is what CUDA calls a multiprocessor:

=====================================  =========================================
``name``                               as ``torch.cuda.get_device_name``
``multi_processor_count``              PEs in the device
``total_memory``                       HBM of the device, bytes
``shared_memory_per_block``            one PE's TCM, bytes (also ``_optin`` and
                                       ``shared_memory_per_multiprocessor``)
``regs_per_multiprocessor``            TCM bytes / 4 (blocks live in TCM)
``warp_size``                          1 (a program is one instruction stream)
``max_threads_per_multi_processor``    1
``L2_cache_size``                      cube SRAM of the device, bytes
``clock_rate``                         PE clock, kHz
=====================================  =========================================

There is no compute capability: ``major`` and ``minor`` are refused, as
``torch.cuda.get_device_capability`` is.  Triton's
``driver.active.utils.get_device_properties`` describes the same device from
:func:`device_scope`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernbench.errors import PlacementError, unsupported_name
from kernbench.runtime import RuntimeContext

__all__ = ["DeviceProperties", "device_properties", "device_scope"]

_NO_CAPABILITY = (
    "there is no compute capability on this machine; the other fields describe the device "
    "(multi_processor_count, total_memory, shared_memory_per_block ...)"
)


def device_scope(ctx: RuntimeContext, index: int) -> tuple[int, int]:
    """(PEs, cubes) of device ``index`` of ``ctx``."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise PlacementError(f"get_device_properties needs a device index, got {index!r}")
    if not 0 <= index < ctx.num_devices:
        raise PlacementError(
            f"get_device_properties: device {index} does not exist; valid: "
            f"0..{ctx.num_devices - 1} ({ctx.topology.system.device_level}s of "
            f"{ctx.topology.name})"
        )
    topo = ctx.topology
    level = topo.system.device_level
    if level == "sip":
        return topo.cubes_per_sip * topo.pes_per_cube, topo.cubes_per_sip
    if level == "cube":
        return topo.pes_per_cube, 1
    return 1, 1


@dataclass(frozen=True)
class DeviceProperties:
    """What ``torch.cuda.get_device_properties(device)`` returns (see the module doc)."""

    name: str
    multi_processor_count: int
    total_memory: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    shared_memory_per_multiprocessor: int
    regs_per_multiprocessor: int
    warp_size: int
    max_threads_per_multi_processor: int
    L2_cache_size: int  # noqa: N815 - torch's name
    clock_rate: int
    is_integrated: bool = False
    is_multi_gpu_board: bool = False

    def __getattr__(self, name: str) -> Any:
        hints = {"major": _NO_CAPABILITY, "minor": _NO_CAPABILITY}
        raise unsupported_name(
            "torch.cuda._CudaDeviceProperties",
            "properties",
            name,
            self.__dataclass_fields__,
            hints,
        )


def device_properties(ctx: RuntimeContext, index: int, name: str) -> DeviceProperties:
    """The properties of device ``index`` of ``ctx``, called ``name``."""
    pes, cubes = device_scope(ctx, index)
    cube = ctx.topology.cube
    tcm = int(cube.pe_template.components.pe_tcm.attrs.size_mb)
    return DeviceProperties(
        name=name,
        multi_processor_count=pes,
        total_memory=int(cube.memory_map.hbm_total_gb_per_cube) * cubes,
        shared_memory_per_block=tcm,
        shared_memory_per_block_optin=tcm,
        shared_memory_per_multiprocessor=tcm,
        regs_per_multiprocessor=tcm // 4,
        warp_size=1,
        max_threads_per_multi_processor=1,
        L2_cache_size=int(cube.sram.size) * cubes,
        clock_rate=int(cube.pe_template.components.pe_core.attrs.clock) // 1000,
    )
