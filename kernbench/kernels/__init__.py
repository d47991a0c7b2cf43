"""The kernel layer: a Triton-style kernel language, its interpreter and launches.

Write kernels with ``@jit`` and ``import kernbench.kernels.language as tl``;
launch them with ``kernel[grid](*args, **meta)``. ``cdiv`` and
``next_power_of_2`` stand in for ``triton.cdiv`` and ``triton.next_power_of_2``.
"""

from kernbench.kernels import language
from kernbench.kernels.interpreter import (
    ArrayBuffer,
    Interpreter,
    KernelBuffer,
    LaunchRecord,
    MemoryTraffic,
    ProgramCost,
    ProgramRecorder,
    ShapeOnlyBuffer,
)
from kernbench.kernels.jit import (
    NC,
    Grid,
    JITFunction,
    KernelLaunch,
    Launcher,
    SpmdDim,
    get_launcher,
    jit,
    nc,
    reset_launcher,
    run_on_host,
    set_launcher,
    spmd_dim,
    use_launcher,
)
from kernbench.kernels.language import cdiv, next_power_of_2

__all__ = [
    "NC",
    "ArrayBuffer",
    "Grid",
    "Interpreter",
    "JITFunction",
    "KernelBuffer",
    "KernelLaunch",
    "LaunchRecord",
    "Launcher",
    "MemoryTraffic",
    "ProgramCost",
    "ProgramRecorder",
    "ShapeOnlyBuffer",
    "SpmdDim",
    "cdiv",
    "get_launcher",
    "jit",
    "language",
    "next_power_of_2",
    "nc",
    "reset_launcher",
    "run_on_host",
    "set_launcher",
    "spmd_dim",
    "use_launcher",
]
