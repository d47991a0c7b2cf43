"""``triton.runtime.driver``: the simulated machine seen as Triton's active device driver.

``driver.active`` answers for the current context
(:func:`kernbench.runtime.current_context`):

* ``get_active_torch_device()`` -- ``kernbench.torch.device("ahbm", i)`` for the
  calling rank's current device; ``get_current_device()`` is ``i``.
* ``get_current_target()`` -- ``GPUTarget(backend="ahbm", arch=<topology name>,
  warp_size=1)``.  The backend is neither ``"cuda"`` nor ``"hip"``, so code
  that branches on it takes its non-CUDA path.
* ``utils.get_device_properties(index)`` -- a device (``system.device_level``:
  a SIP, a cube or a PE) described in Triton's keys:

  ============================  ==============================================
  ``multiprocessor_count``      PEs in the device (a PE runs programs)
  ``max_shared_mem``            one PE's TCM, bytes (Triton: shared memory)
  ``max_num_regs``              TCM bytes / 4: blocks live in TCM, counted in
                                32-bit words (see :mod:`kernbench.triton.compiled`)
  ``warpSize``                  1: a PE runs a program as one instruction stream
  ``max_threads_per_sm``        1: a PE runs one program at a time
  ``sm_clock_rate``             PE clock, kHz (as CUDA reports it)
  ``max_shared_mem_per_block``  as ``max_shared_mem``
  ``tcm_bytes``                 one PE's TCM, bytes
  ``sram_bytes``                cube SRAM of the device, bytes
  ``hbm_bytes``                 HBM of the device, bytes
  ``hbm_bandwidth``             HBM bandwidth of the device, bytes/s
  ============================  ==============================================

* ``get_benchmarker()`` -- :func:`kernbench.triton.testing.do_bench`.
* ``get_device_interface()`` -- ``kernbench.torch.ahbm`` (``torch.cuda``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import kernbench.torch as torch
from kernbench.runtime import RuntimeContext, current_context
from kernbench.torch.device_properties import device_scope
from kernbench.triton.compiled import THREADS_PER_WARP
from kernbench.triton.testing import do_bench

__all__ = ["ActiveDriver", "DriverConfig", "GPUTarget", "device_properties", "driver"]

BACKEND = "ahbm"


@dataclass(frozen=True, slots=True)
class GPUTarget:
    """What a kernel is compiled for: a backend, an architecture and the warp size."""

    backend: str
    arch: str
    warp_size: int


def device_properties(ctx: RuntimeContext, index: int) -> dict[str, Any]:
    """Triton's device-property dict for device ``index`` of ``ctx`` (see the module doc)."""
    pes, cubes = device_scope(ctx, index)
    cube = ctx.topology.cube
    tcm = int(cube.pe_template.components.pe_tcm.attrs.size_mb)
    clock_hz = int(cube.pe_template.components.pe_core.attrs.clock)
    # A PE-level device shares its cube's SRAM and HBM; it is counted once here.
    return {
        "multiprocessor_count": pes,
        "max_shared_mem": tcm,
        "max_shared_mem_per_block": tcm,
        "max_num_regs": tcm // 4,
        "warpSize": THREADS_PER_WARP,
        "max_threads_per_sm": 1,
        "sm_clock_rate": clock_hz // 1000,
        "tcm_bytes": tcm,
        "sram_bytes": int(cube.sram.size) * cubes,
        "hbm_bytes": int(cube.memory_map.hbm_total_gb_per_cube) * cubes,
        "hbm_bandwidth": int(cube.hbm.slice_bandwidth)
        * int(cube.memory_map.hbm_slices_per_cube)
        * cubes,
    }


class _Utils:
    """``driver.active.utils``."""

    def get_device_properties(self, device: int) -> dict[str, Any]:
        return device_properties(current_context(), device)


class ActiveDriver:
    """The driver of the simulated machine (``triton.runtime.driver.active``)."""

    def __init__(self) -> None:
        self.utils = _Utils()

    def is_active(self) -> bool:
        return True

    def get_current_device(self) -> int:
        return torch.ahbm.current_device()

    def set_current_device(self, device: int) -> None:
        torch.ahbm.set_device(device)

    def get_active_torch_device(self) -> torch.device:
        return torch.device("ahbm", self.get_current_device())

    def get_current_stream(self, device: int | None = None) -> int:
        """0: each device has one stream, and work is done when its call returns."""
        return 0

    def get_current_target(self) -> GPUTarget:
        return GPUTarget(BACKEND, current_context().topology.name, THREADS_PER_WARP)

    def get_device_interface(self) -> Any:
        return torch.ahbm

    def get_benchmarker(self) -> Any:
        return do_bench

    def __repr__(self) -> str:
        return "<triton driver for the KernBench simulated machine>"


class DriverConfig:
    """``triton.runtime.driver``: ``active`` is the simulated machine's driver."""

    def __init__(self) -> None:
        self.default = ActiveDriver()
        self._active: Any = None

    @property
    def active(self) -> Any:
        return self.default if self._active is None else self._active

    def set_active(self, driver: Any) -> None:
        self._active = driver

    def reset_active(self) -> None:
        self._active = None


driver = DriverConfig()
