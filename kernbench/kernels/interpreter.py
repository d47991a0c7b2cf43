"""Runs kernel programs on the host over NumPy and records what each one did.

A kernel's buffer arguments are :class:`KernelBuffer` objects. Two come with
the package: :class:`ArrayBuffer` (a NumPy array, functional mode) and
:class:`ShapeOnlyBuffer` (a size and a dtype, timing-only mode: bounds are
checked, loads give zeros, stores are dropped, nothing of ``numel`` elements is
ever allocated).

The :class:`Interpreter` runs one program at a time with a
:class:`ProgramRecorder` collecting its work; the recorder freezes what it
counted into a :class:`ProgramCounts`, and a whole launch gives a
:class:`LaunchRecord` with one ``ProgramCounts`` per program in program order.
A cost model turns those counts into time; it can also subclass
``ProgramRecorder`` to see each load, store, dot and vector op as it happens.

The interpreter runs any :class:`ProgramLaunch` (what ``@jit`` launches are),
so it needs nothing from the ``jit`` module that builds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kernbench.errors import KernBenchError, KernelError, exception_text
from kernbench.kernels import language as tl
from kernbench.kernels.grid import Grid
from kernbench.kernels.program import ProgramState, running_program

__all__ = [
    "ArrayBuffer",
    "Interpreter",
    "KernelBuffer",
    "LaunchRecord",
    "LaunchedKernel",
    "MemoryTraffic",
    "ProgramCounts",
    "ProgramLaunch",
    "ProgramRecorder",
    "ShapeOnlyBuffer",
]


def _itemsize(buffer: Any) -> int:
    declared = getattr(buffer, "element_type", None)
    return declared.itemsize if declared is not None else np.dtype(buffer.dtype).itemsize


@runtime_checkable
class KernelBuffer(Protocol):
    """What a kernel's pointer argument must provide.

    ``load`` and ``store`` get flat int64 element indices that are already
    masked and bounds-checked; ``memory`` ("hbm", "tcm", "sram", ...) only
    labels the traffic for the cost model.  A buffer may also declare an
    ``element_type`` (a ``tl`` dtype) when its NumPy dtype does not say it, as
    for bfloat16 values held in float32 arrays.
    """

    name: str
    dtype: np.dtype
    numel: int
    memory: str

    def load(self, indices: np.ndarray) -> np.ndarray: ...

    def store(self, indices: np.ndarray, values: np.ndarray) -> None: ...


_BUFFER_TYPES: dict[type, bool] = {}


def _is_buffer(value: Any) -> bool:
    """``isinstance(value, KernelBuffer)``, decided once per type: a runtime protocol
    check looks up every member each time (tens of microseconds, per argument and
    program)."""
    kind = type(value)
    known = _BUFFER_TYPES.get(kind)
    if known is None:
        known = _BUFFER_TYPES[kind] = isinstance(value, KernelBuffer)
    return known


class ArrayBuffer:
    """A kernel buffer over a C-contiguous NumPy array; stores write through."""

    def __init__(self, name: str, array: np.ndarray, memory: str = "hbm") -> None:
        if not isinstance(array, np.ndarray):
            raise KernelError(f"buffer {name!r}: expected a NumPy array, got {type(array)}")
        if not array.flags.c_contiguous:
            raise KernelError(
                f"buffer {name!r}: the array must be C-contiguous (pass np.ascontiguousarray "
                "and copy results back), since kernels address it by flat element offset"
            )
        self.name = name
        self.array = array
        self.flat = array.reshape(-1)
        self.dtype = array.dtype
        self.numel = int(array.size)
        self.memory = memory

    def load(self, indices: np.ndarray) -> np.ndarray:
        return self.flat[indices]

    def store(self, indices: np.ndarray, values: np.ndarray) -> None:
        self.flat[indices] = values

    def __repr__(self) -> str:
        return f"ArrayBuffer({self.name!r}, {self.dtype}, numel={self.numel}, {self.memory})"


class ShapeOnlyBuffer:
    """A buffer with a size but no bytes, for timing-only runs."""

    def __init__(self, name: str, dtype: Any, numel: int, memory: str = "hbm") -> None:
        if int(numel) < 0:
            raise KernelError(f"buffer {name!r}: numel must be >= 0, got {numel}")
        self.name = name
        self.dtype = np.dtype(dtype)
        self.numel = int(numel)
        self.memory = memory

    def load(self, indices: np.ndarray) -> np.ndarray:
        # a read-only broadcast of one zero: no memory per lane
        return np.broadcast_to(np.zeros((), dtype=self.dtype), indices.shape)

    def store(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Timing-only: the values are dropped."""

    def __repr__(self) -> str:
        return f"ShapeOnlyBuffer({self.name!r}, {self.dtype}, numel={self.numel}, {self.memory})"


@dataclass(frozen=True, slots=True)
class MemoryTraffic:
    """One program's traffic to one buffer in one memory."""

    buffer: str
    memory: str
    bytes_loaded: int
    bytes_stored: int
    loads: int
    stores: int


@dataclass(frozen=True, slots=True)
class ProgramCounts:
    """Everything one program did, as counts (see ``language`` for what is counted)."""

    pid: tuple[int, ...]
    core: int
    loads: int  # tl.load instructions
    stores: int  # tl.store instructions
    bytes_loaded: int  # active lanes * itemsize, over all buffers
    bytes_stored: int
    lanes_loaded: int  # active (mask true) lanes
    lanes_stored: int
    lanes_masked_off: int  # lanes issued but masked off, loads and stores
    dots: int  # tl.dot instructions
    matrix_flops: int  # 2*M*N*K per dot, of the blocks as issued
    vector_flops: int  # floating elementwise ops and reduction inputs
    transcendental_ops: int  # the exp/log/sqrt/... part of vector_flops
    int_ops: int  # integer and boolean elementwise ops (index and mask math)
    traffic: tuple[MemoryTraffic, ...]  # per (buffer, memory), in first-touch order

    @property
    def bytes_moved(self) -> int:
        return self.bytes_loaded + self.bytes_stored


class ProgramRecorder:
    """Counts one program's work; the ``record_*`` methods are the hook points."""

    def __init__(self) -> None:
        self._traffic: dict[tuple[str, str], list[int]] = {}
        self.lanes_loaded = 0
        self.lanes_stored = 0
        self.lanes_masked_off = 0
        self.dots = 0
        self.matrix_flops = 0
        self.vector_flops = 0
        self.transcendental_ops = 0
        self.int_ops = 0

    def _entry(self, buffer: KernelBuffer) -> list[int]:
        key = (buffer.name, buffer.memory)
        entry = self._traffic.get(key)
        if entry is None:
            entry = self._traffic[key] = [0, 0, 0, 0]
        return entry

    def record_load(self, buffer: KernelBuffer, *, lanes_issued: int, lanes_active: int) -> None:
        entry = self._entry(buffer)
        entry[0] += lanes_active * _itemsize(buffer)
        entry[2] += 1
        self.lanes_loaded += lanes_active
        self.lanes_masked_off += lanes_issued - lanes_active

    def record_store(self, buffer: KernelBuffer, *, lanes_issued: int, lanes_active: int) -> None:
        entry = self._entry(buffer)
        entry[1] += lanes_active * _itemsize(buffer)
        entry[3] += 1
        self.lanes_stored += lanes_active
        self.lanes_masked_off += lanes_issued - lanes_active

    def record_dot(self, m: int, n: int, k: int, batch: int = 1) -> None:
        self.dots += 1
        self.matrix_flops += 2 * m * n * k * batch

    def record_vector(self, elements: int, *, floating: bool, transcendental: bool = False) -> None:
        if floating:
            self.vector_flops += elements
            if transcendental:
                self.transcendental_ops += elements
        else:
            self.int_ops += elements

    def counts(self, pid: tuple[int, ...], core: int = 0) -> ProgramCounts:
        """What the program did, frozen."""
        traffic = tuple(
            MemoryTraffic(name, memory, *counts) for (name, memory), counts in self._traffic.items()
        )
        return ProgramCounts(
            pid=tuple(pid),
            core=core,
            loads=sum(t.loads for t in traffic),
            stores=sum(t.stores for t in traffic),
            bytes_loaded=sum(t.bytes_loaded for t in traffic),
            bytes_stored=sum(t.bytes_stored for t in traffic),
            lanes_loaded=self.lanes_loaded,
            lanes_stored=self.lanes_stored,
            lanes_masked_off=self.lanes_masked_off,
            dots=self.dots,
            matrix_flops=self.matrix_flops,
            vector_flops=self.vector_flops,
            transcendental_ops=self.transcendental_ops,
            int_ops=self.int_ops,
            traffic=traffic,
        )


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    """What a launch did: one :class:`ProgramCounts` per program, in program order."""

    kernel: str
    grid: Grid
    programs: tuple[ProgramCounts, ...]

    @property
    def cores(self) -> tuple[int, ...]:
        """The core each program is assigned to, in program order."""
        return tuple(p.core for p in self.programs)

    def on_core(self, core: int) -> tuple[ProgramCounts, ...]:
        return tuple(p for p in self.programs if p.core == core)

    @property
    def bytes_loaded(self) -> int:
        return sum(p.bytes_loaded for p in self.programs)

    @property
    def bytes_stored(self) -> int:
        return sum(p.bytes_stored for p in self.programs)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_loaded + self.bytes_stored

    @property
    def matrix_flops(self) -> int:
        return sum(p.matrix_flops for p in self.programs)

    @property
    def vector_flops(self) -> int:
        return sum(p.vector_flops for p in self.programs)


def _pad3(values: tuple[int, ...], fill: int) -> tuple[int, int, int]:
    padded = tuple(values) + (fill,) * (3 - len(values))
    return padded[0], padded[1], padded[2]


class LaunchedKernel(Protocol):
    """The kernel of a launch, as the interpreter sees it: a name and a function."""

    @property
    def name(self) -> str: ...

    @property
    def fn(self) -> Callable[..., Any]: ...


class ProgramLaunch(Protocol):
    """A launch the interpreter can run (``@jit``'s ``KernelLaunch`` is one)."""

    @property
    def kernel(self) -> LaunchedKernel: ...

    @property
    def grid(self) -> Grid: ...

    @property
    def arguments(self) -> Mapping[str, Any]:
        """Every parameter by name: what the kernel function is called with."""
        ...


class Interpreter:
    """Runs the programs of a launch one at a time on the host."""

    def kernel_args(self, launch: ProgramLaunch) -> dict[str, Any]:
        """The launch's arguments by parameter name, buffers turned into pointers."""
        values = launch.arguments
        return {name: tl.Pointer(v) if _is_buffer(v) else v for name, v in values.items()}

    def run_program(
        self,
        launch: ProgramLaunch,
        pid: tuple[int, ...],
        recorder: ProgramRecorder | None = None,
        *,
        kernel_args: dict[str, Any] | None = None,
    ) -> ProgramCounts:
        """Run program ``pid`` of ``launch`` and return what it did."""
        grid = launch.grid
        pid = grid.check_pid(pid)
        recorder = ProgramRecorder() if recorder is None else recorder
        args = self.kernel_args(launch) if kernel_args is None else kernel_args
        name = launch.kernel.name
        space = getattr(launch, "address_space", None)  # a device launch has one
        state = ProgramState(name, _pad3(pid, 0), _pad3(grid.dims, 1), recorder, pid, space)
        with running_program(state):
            try:
                launch.kernel.fn(**args)
            except KernBenchError:
                raise
            except Exception as exc:
                raise KernelError(
                    f"kernel {name!r} program {pid}: {type(exc).__name__}: {exception_text(exc)}"
                ) from exc
        return recorder.counts(pid, grid.core_of(pid))

    def iter_programs(self, launch: ProgramLaunch) -> Iterator[ProgramCounts]:
        launch.grid.check_size(launch.kernel.name)  # before the first program runs
        args = self.kernel_args(launch)
        for pid in launch.grid.program_ids():
            yield self.run_program(launch, pid, kernel_args=args)

    def run(self, launch: ProgramLaunch) -> LaunchRecord:
        """Run every program in program order."""
        programs = tuple(self.iter_programs(launch))
        return LaunchRecord(kernel=launch.kernel.name, grid=launch.grid, programs=programs)
