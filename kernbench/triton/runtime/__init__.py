"""``triton.runtime``: the driver, and the kernel classes under their Triton names."""

from kernbench.triton.autotuner import Autotuner
from kernbench.triton.compiled import CompiledKernel
from kernbench.triton.config import Config
from kernbench.triton.heuristics import Heuristics
from kernbench.triton.jit import JITFunction, KernelInterface
from kernbench.triton.runtime.active_driver import GPUTarget, driver

__all__ = [
    "Autotuner",
    "CompiledKernel",
    "Config",
    "GPUTarget",
    "Heuristics",
    "JITFunction",
    "KernelInterface",
    "driver",
]
