"""``import kernbench.triton as triton``: Triton's Python API on the simulated machine.

A Triton program runs here with only its imports changed
(``import kernbench.triton as triton``, ``import kernbench.triton.language
as tl``, ``import kernbench.torch as torch``): ``@triton.jit`` kernels
launched on ``kernbench.torch`` tensors run on the simulated PEs and cost
simulated time.

* ``jit``, ``cdiv``, ``next_power_of_2`` -- :mod:`kernbench.triton.jit` and
  the kernel language's helpers.
* ``autotune``, ``Config``, ``heuristics`` -- configs are tuned by *simulated*
  time (:mod:`kernbench.triton.autotuner`).
* ``testing`` -- ``do_bench`` returns simulated milliseconds; ``perf_report``
  and ``Benchmark`` sweep, print, save and plot (:mod:`kernbench.triton.testing`).
* ``runtime.driver.active`` -- the device, its target and its properties in
  Triton's terms (:mod:`kernbench.triton.runtime.active_driver`).
* ``kernel.warmup(...)`` -- compiles without running; its ``n_regs``,
  ``n_spills`` and ``metadata.shared`` are simulated-machine figures
  (:mod:`kernbench.triton.compiled`).
* ``language`` -- ``tl``: :mod:`kernbench.kernels.language` plus ``tl.range``,
  ``tl.static_range``, ``tl.assume``, ``tl.math`` (:mod:`kernbench.triton.language`)
  and ``tl.rand`` and the other Philox functions (:mod:`kernbench.triton.random`).
"""

from typing import Any

from kernbench.errors import unsupported_name
from kernbench.kernels.language import cdiv, next_power_of_2
from kernbench.triton import language, runtime, testing
from kernbench.triton.autotuner import Autotuner, autotune
from kernbench.triton.compiled import CompiledKernel
from kernbench.triton.config import Config, TuningRecord
from kernbench.triton.heuristics import Heuristics, heuristics
from kernbench.triton.jit import JITFunction, KernelInterface, jit

# The release whose API this package mirrors (its defaults: Triton 3.2's), marked as KernBench's
# own build, as a local version label does (programs compare or print it).
__version__ = "3.2.0+kernbench"

__all__ = [
    "Autotuner",
    "CompiledKernel",
    "Config",
    "Heuristics",
    "JITFunction",
    "KernelInterface",
    "TuningRecord",
    "autotune",
    "cdiv",
    "heuristics",
    "jit",
    "language",
    "next_power_of_2",
    "runtime",
    "testing",
]

_HINTS = {
    "set_allocator": (
        "tensor descriptors (TMA) are not modelled, so there is nothing to allocate; "
        "address tiles with pointer arithmetic (ptr + offsets) and masks"
    ),
    "compile": "kernel.warmup(*args, grid=...) compiles without running",
}


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.triton", "triton", name, __all__, _HINTS)
