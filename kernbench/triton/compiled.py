"""``kernel.warmup(...)``: compile a kernel without running it, and what the result says.

Warmup binds the arguments with every tensor replaced by a shape-only buffer
(:func:`kernbench.kernels.compile.shape_only_inputs`), runs program 0 of the
grid on the host to check that it runs and to measure its footprint, and
returns a :class:`CompiledKernel`.  Nothing runs on the simulated machine, so
warmup costs no simulated time and writes no tensor.

What the compiled kernel's figures mean on the simulated machine, where a PE
(Triton's "multiprocessor", see :mod:`kernbench.triton.runtime.driver`) runs
one program at a time and keeps its blocks in its TCM:

* ``metadata.shared`` -- bytes of TCM the program's tiles take: per buffer, the
  largest tile one ``tl.load`` issues (lanes issued x element size), summed
  over the buffers it loads, times ``num_stages`` (a pipelined loop keeps one
  copy per stage in flight, as Triton's shared memory does).  At least 1.
* ``n_regs`` -- 32-bit registers per thread: the elements of the largest block
  the program made (a load, a store, an elementwise result or a ``tl.dot``
  operand or result) spread over ``num_warps`` x ``warpSize`` threads
  (``warpSize`` is 1 here), rounded up.  With ``max_num_regs`` = TCM bytes / 4,
  ``max_num_regs // (n_regs * warpSize * num_warps)`` is how many such blocks
  fit in TCM.
* ``n_spills`` -- always 0: blocks live in TCM, there is no register file to
  spill from.

Calling it -- ``compiled[grid](*args)`` with every argument, constexprs
included, positionally or by name -- launches the kernel with the warmup's
launch options; a constexpr that differs from the one compiled is an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.kernels.compile import shape_only_inputs
from kernbench.kernels.interpreter import KernelBuffer, ProgramCounts, ProgramRecorder
from kernbench.kernels.jit import LAUNCH_OPTIONS, KernelLaunch

if TYPE_CHECKING:
    from kernbench.triton.jit import JITFunction

__all__ = ["THREADS_PER_WARP", "CompiledKernel", "KernelMetadata", "compile_kernel"]

#: A PE runs a program as one stream of block instructions: one "thread" per warp.
THREADS_PER_WARP = 1

# Triton's defaults for the launch options the figures depend on.
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3
DEFAULT_NUM_CTAS = 1


def _itemsize(buffer: KernelBuffer) -> int:
    declared = getattr(buffer, "element_type", None)
    return declared.itemsize if declared is not None else np.dtype(buffer.dtype).itemsize


class FootprintRecorder(ProgramRecorder):
    """Counts a program's work and also the largest block and tile it made."""

    def __init__(self) -> None:
        super().__init__()
        self.largest_block = 0  # elements
        self.tile_bytes: dict[str, int] = {}  # per buffer loaded: the largest single load

    def _block(self, elements: int) -> None:
        self.largest_block = max(self.largest_block, int(elements))

    def record_load(self, buffer: KernelBuffer, *, lanes_issued: int, lanes_active: int) -> None:
        super().record_load(buffer, lanes_issued=lanes_issued, lanes_active=lanes_active)
        self._block(lanes_issued)
        tile = lanes_issued * _itemsize(buffer)
        self.tile_bytes[buffer.name] = max(self.tile_bytes.get(buffer.name, 0), tile)

    def record_store(self, buffer: KernelBuffer, *, lanes_issued: int, lanes_active: int) -> None:
        super().record_store(buffer, lanes_issued=lanes_issued, lanes_active=lanes_active)
        self._block(lanes_issued)

    def record_dot(self, m: int, n: int, k: int, batch: int = 1) -> None:
        super().record_dot(m, n, k, batch)
        self._block(batch * max(m * n, m * k, k * n))

    def record_vector(self, elements: int, *, floating: bool, transcendental: bool = False) -> None:
        super().record_vector(elements, floating=floating, transcendental=transcendental)
        self._block(elements)


@dataclass(frozen=True, slots=True)
class KernelMetadata:
    """What Triton's ``compiled.metadata`` holds that means something here."""

    name: str
    num_warps: int
    num_stages: int
    num_ctas: int
    shared: int  # bytes of TCM the program's tiles take (see the module docstring)


def _positive_option(options: dict[str, Any], name: str, default: int, kernel: str) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise KernelError(f"kernel {kernel!r}: {name} must be a positive integer, got {value!r}")
    return value


class CompiledKernel:
    """A kernel compiled by ``warmup``: its footprint figures, and launchable."""

    def __init__(
        self,
        fn: JITFunction,
        launch: KernelLaunch,
        program: ProgramCounts,
        recorder: FootprintRecorder,
        options: dict[str, Any],
    ) -> None:
        self.fn = fn
        self.name = fn.name
        self.grid = launch.grid
        self.constants: dict[str, Any] = dict(launch.meta)
        self.options = MappingProxyType(dict(options))
        self.program = program  # what program 0 did, counted on shape-only buffers
        knobs = {**launch.meta, **options}
        num_warps = _positive_option(knobs, "num_warps", DEFAULT_NUM_WARPS, self.name)
        num_stages = _positive_option(knobs, "num_stages", DEFAULT_NUM_STAGES, self.name)
        num_ctas = _positive_option(knobs, "num_ctas", DEFAULT_NUM_CTAS, self.name)
        shared = max(1, sum(recorder.tile_bytes.values()) * num_stages)
        self.metadata = KernelMetadata(self.name, num_warps, num_stages, num_ctas, shared)
        threads = num_warps * THREADS_PER_WARP
        self.n_regs: int = max(1, math.ceil(recorder.largest_block / threads))
        self.n_spills: int = 0
        self.n_max_threads: int = threads

    def __repr__(self) -> str:
        return (
            f"CompiledKernel({self.name}, n_regs={self.n_regs}, "
            f"shared={self.metadata.shared}, num_warps={self.metadata.num_warps})"
        )

    def _init_handles(self) -> None:
        """Nothing to load: the kernel runs in the interpreter."""

    def __getitem__(self, grid: Any):
        def runner(*args: Any, **kwargs: Any) -> Any:
            return self.launch(grid, *args, **kwargs)

        return runner

    def launch(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        """Run on the machine like ``fn[grid](*args, **kwargs)`` with the warmup's options."""
        merged = {**self.options, **kwargs}
        launch = self.fn.prepare(grid, *args, **merged)
        for name, compiled in self.constants.items():
            given = launch.meta.get(name)
            if given != compiled:
                raise KernelError(
                    f"kernel {self.name!r} was compiled with {name}={compiled!r} but launched "
                    f"with {name}={given!r}; call warmup again for the new value"
                )
        return self.fn.launch(grid, *args, **merged)


def compile_kernel(
    fn: JITFunction, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> CompiledKernel:
    """``fn.warmup(*args, grid=grid, **kwargs)``: program 0 on shape-only buffers."""
    if grid is None:
        raise KernelError(f"kernel {fn.name!r}: warmup needs grid=, e.g. grid=(1,)")
    options = {k: kwargs.pop(k) for k in LAUNCH_OPTIONS & kwargs.keys() if k not in fn.params}
    kwargs.pop("stream", None)
    try:
        bound = fn.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise KernelError(
            f"kernel {fn.name!r}: warmup: {exc}; its parameters are {', '.join(fn.params)}"
        ) from None
    bound.apply_defaults()
    ordered = [bound.arguments[name] for name in fn.params]
    traced = shape_only_inputs(fn, ordered)
    launch = fn.prepare(grid, *traced, **options)
    recorder = FootprintRecorder()
    first = next(iter(launch.grid.program_ids()))
    try:
        program = launch.run_program(first, recorder)
    except KernelError as exc:
        raise KernelError(f"warmup of kernel {fn.name!r} failed: {exc}") from exc
    return CompiledKernel(fn, launch, program, recorder, options)
