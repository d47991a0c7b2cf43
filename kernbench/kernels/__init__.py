"""The kernel layer: a Triton-style kernel language, its interpreter and launches.

Write kernels with ``@jit`` and ``import kernbench.kernels.language as tl``;
launch them with ``kernel[grid](*args, **meta)``, or trace one for an input
signature with ``DeviceKernel.compile_and_load``. A launch whose arguments
include device tensors runs on the simulated machine (``kernels.device``) and
returns a :class:`DeviceLaunchResult`. The built-in flat-buffer kernels
(elementwise, scalar, fill, copy, reduce) and their ``launch_*`` helpers back
tensor arithmetic and the collectives. ``cdiv`` and ``next_power_of_2`` stand
in for ``triton.cdiv`` and ``triton.next_power_of_2``.

The layers above register what the kernel layer cannot import: the process
group ``compile_and_load`` asks for its rank (:func:`set_rank_provider`).
"""

from kernbench.kernels import language
from kernbench.kernels.builtins import (
    BUILTIN_BLOCK,
    copy_kernel,
    elementwise_kernel,
    fill_kernel,
    launch_copy,
    launch_elementwise,
    launch_fill,
    launch_reduce,
    launch_scalar,
    reduce_kernel,
    scalar_kernel,
)
from kernbench.kernels.compile import CompileStats, DeviceKernel, clear_cache

# Importing the device module registers device tensors as arguments that claim launches.
from kernbench.kernels.device import DeviceLaunchResult, launch_on_device
from kernbench.kernels.grid import MAX_GRID_PROGRAMS, NC, Grid, SpmdDim, nc, spmd_dim
from kernbench.kernels.interpreter import (
    ArrayBuffer,
    Interpreter,
    KernelBuffer,
    LaunchRecord,
    MemoryTraffic,
    ProgramCounts,
    ProgramRecorder,
    ShapeOnlyBuffer,
)
from kernbench.kernels.jit import (
    JITFunction,
    KernelLaunch,
    Launcher,
    get_launcher,
    jit,
    reset_launcher,
    run_on_host,
    set_launcher,
    use_launcher,
)
from kernbench.kernels.language import MAX_BLOCK_ELEMENTS, cdiv, next_power_of_2
from kernbench.kernels.ranks import (
    DistributedState,
    RankProvider,
    distributed_state,
    set_rank_provider,
)

__all__ = [
    "BUILTIN_BLOCK",
    "MAX_BLOCK_ELEMENTS",
    "MAX_GRID_PROGRAMS",
    "NC",
    "ArrayBuffer",
    "CompileStats",
    "DeviceKernel",
    "DeviceLaunchResult",
    "DistributedState",
    "Grid",
    "Interpreter",
    "JITFunction",
    "KernelBuffer",
    "KernelLaunch",
    "LaunchRecord",
    "Launcher",
    "MemoryTraffic",
    "ProgramCounts",
    "ProgramRecorder",
    "RankProvider",
    "ShapeOnlyBuffer",
    "SpmdDim",
    "cdiv",
    "clear_cache",
    "copy_kernel",
    "distributed_state",
    "elementwise_kernel",
    "fill_kernel",
    "get_launcher",
    "jit",
    "language",
    "launch_copy",
    "launch_elementwise",
    "launch_fill",
    "launch_on_device",
    "launch_reduce",
    "launch_scalar",
    "nc",
    "next_power_of_2",
    "reduce_kernel",
    "reset_launcher",
    "run_on_host",
    "scalar_kernel",
    "set_launcher",
    "set_rank_provider",
    "spmd_dim",
    "use_launcher",
]
