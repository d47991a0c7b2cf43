"""``@jit`` kernels, launch grids and the pluggable launcher.

``kernel[grid](*args, **meta)`` binds the arguments (NumPy arrays become
:class:`ArrayBuffer` objects named after their parameter), resolves the grid
and hands a frozen :class:`KernelLaunch` to the current *launcher*. The default
launcher, :func:`run_on_host`, runs every program with the
:class:`Interpreter` and returns a :class:`LaunchRecord`; the runtime installs
its own launcher (``set_launcher`` / ``use_launcher``) to run programs on
simulated PEs, calling ``launch.run_program(pid, recorder)`` for the programs
each PE owns.

Program order: row-major over the grid with the *last* axis fastest, as
Triton's interpreter does (``for x: for y: for z:``), so a grid ``(2, 3)`` runs
``(0,0) (0,1) (0,2) (1,0) (1,1) (1,2)``.

SPMD grids (after NKI): an entry ``spmd_dim(g, nc(k))`` makes that axis
``g * k`` programs long, spread over ``k`` cores; program ``n`` on that axis
belongs to core ``n % k``. Programs of grids without one are on core 0. At
most one axis may be split this way.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import operator
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.kernels import language as tl
from kernbench.kernels.interpreter import (
    ArrayBuffer,
    Interpreter,
    LaunchRecord,
    ProgramCost,
    ProgramRecorder,
)

__all__ = [
    "MAX_GRID_PROGRAMS",
    "NC",
    "Grid",
    "JITFunction",
    "KernelLaunch",
    "Launcher",
    "SpmdDim",
    "get_launcher",
    "jit",
    "nc",
    "reset_launcher",
    "run_on_host",
    "set_launcher",
    "spmd_dim",
    "use_launcher",
]

#: The most programs one launch may have.  The interpreter runs programs one at a
#: time on the host (in timing-only mode too, to count their work), at thousands
#: per second, so a larger grid would run for hours; no bundled bench or test
#: comes near it (the largest launches a few thousand programs).
MAX_GRID_PROGRAMS = 2**20

# Launch keywords Triton accepts that mean nothing to the interpreter; kept in
# ``KernelLaunch.options`` for whoever wants them.
LAUNCH_OPTIONS = frozenset(
    {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug", "stream"}
)


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise KernelError(f"{what} must be a positive integer, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise KernelError(f"{what} must be a positive integer, got {value!r}") from None
    if n <= 0:
        raise KernelError(f"{what} must be a positive integer, got {n}")
    return n


@dataclass(frozen=True, slots=True)
class NC:
    """A number of cores to spread one grid axis over (``nc(2)``)."""

    count: int

    def __post_init__(self) -> None:
        _positive_int(self.count, "nc() core count")


def nc(count: int) -> NC:
    return NC(_positive_int(count, "nc() core count"))


@dataclass(frozen=True, slots=True)
class SpmdDim:
    """A grid entry of ``size * cores.count`` programs spread over the cores."""

    size: int
    cores: NC

    def __post_init__(self) -> None:
        _positive_int(self.size, "spmd_dim() size")
        if not isinstance(self.cores, NC):
            raise KernelError(f"spmd_dim() needs nc(k) as its second argument, got {self.cores!r}")


def spmd_dim(size: int, cores: NC) -> SpmdDim:
    return SpmdDim(_positive_int(size, "spmd_dim() size"), cores)


@dataclass(frozen=True, slots=True)
class Grid:
    """A resolved launch grid: 1 to 3 axis lengths, and the SPMD core split if any."""

    dims: tuple[int, ...]
    spmd_axis: int | None = None
    num_cores: int = 1

    @classmethod
    def resolve(cls, spec: Any, kernel: str = "?") -> Grid:
        """A grid from a launch spec: an int, a ``spmd_dim`` or a tuple of them."""
        entries = tuple(spec) if isinstance(spec, tuple | list) else (spec,)
        if not 1 <= len(entries) <= 3:
            raise KernelError(
                f"kernel {kernel!r}: grid {spec!r} has {len(entries)} dimensions; a grid has 1 to 3"
            )
        dims: list[int] = []
        spmd_axis, num_cores = None, 1
        for axis, entry in enumerate(entries):
            if isinstance(entry, SpmdDim):
                if spmd_axis is not None:
                    raise KernelError(
                        f"kernel {kernel!r}: grid {spec!r} splits axes {spmd_axis} and {axis} "
                        "over cores; at most one axis may be a spmd_dim"
                    )
                spmd_axis, num_cores = axis, entry.cores.count
                dims.append(entry.size * entry.cores.count)
                continue
            try:
                dims.append(_positive_int(entry, f"axis {axis}"))
            except KernelError as exc:
                raise KernelError(f"kernel {kernel!r}: grid {spec!r}: {exc}") from None
        return cls(tuple(dims), spmd_axis, num_cores)

    @property
    def num_programs(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def check_size(self, kernel: str = "?") -> None:
        """Refuse, before any program runs, a grid with more than MAX_GRID_PROGRAMS programs."""
        if self.num_programs > MAX_GRID_PROGRAMS:
            raise KernelError(
                f"kernel {kernel!r}: grid {self.dims} has {self.num_programs} programs; the "
                f"interpreter runs programs one at a time (in timing-only mode too), so a launch "
                f"may have at most {MAX_GRID_PROGRAMS} programs; use a smaller grid (more "
                "elements per program)"
            )

    def program_ids(self) -> Iterator[tuple[int, ...]]:
        """Every program id in program order (last axis fastest)."""
        return itertools.product(*(range(d) for d in self.dims))

    def check_pid(self, pid: Any) -> tuple[int, ...]:
        pid = tuple(int(p) for p in (pid if isinstance(pid, tuple | list) else (pid,)))
        inside = len(pid) == len(self.dims) and all(
            0 <= p < d for p, d in zip(pid, self.dims, strict=True)
        )
        if not inside:
            raise KernelError(f"program id {pid} is not in grid {self.dims}")
        return pid

    def core_of(self, pid: tuple[int, ...]) -> int:
        """The core a program belongs to: its index on the SPMD axis modulo the cores."""
        return 0 if self.spmd_axis is None else pid[self.spmd_axis] % self.num_cores

    def programs_on_core(self, core: int) -> tuple[tuple[int, ...], ...]:
        return tuple(p for p in self.program_ids() if self.core_of(p) == core)


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    """One launch, ready to run: the kernel, its grid and its bound arguments."""

    kernel: JITFunction
    grid: Grid
    args: tuple[Any, ...]  # run-time arguments, in parameter order (buffers wrapped)
    meta: Mapping[str, Any]  # constexpr meta-parameters by name
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def arguments(self) -> Mapping[str, Any]:
        """Every parameter by name: what the kernel function is called with."""
        values = dict(zip(self.kernel.runtime_params, self.args, strict=True))
        values.update(self.meta)
        return MappingProxyType(values)

    def run_program(
        self, pid: tuple[int, ...], recorder: ProgramRecorder | None = None
    ) -> ProgramCost:
        """Run one program on the host; an executor calls this for the programs it owns."""
        return Interpreter().run_program(self, pid, recorder)

    def run(self) -> LaunchRecord:
        return Interpreter().run(self)


Launcher = Callable[[KernelLaunch], Any]


def run_on_host(launch: KernelLaunch) -> LaunchRecord:
    """The default launcher: every program in order, on the host."""
    return Interpreter().run(launch)


_LAUNCHER: ContextVar[Launcher] = ContextVar("kernbench_kernel_launcher", default=run_on_host)


def get_launcher() -> Launcher:
    return _LAUNCHER.get()


def set_launcher(launcher: Launcher) -> Token[Launcher]:
    """Route ``kernel[grid](...)`` to ``launcher``; ``reset_launcher(token)`` undoes it."""
    if not callable(launcher):
        raise KernelError(f"a launcher must be callable with a KernelLaunch, got {launcher!r}")
    return _LAUNCHER.set(launcher)


def reset_launcher(token: Token[Launcher]) -> None:
    _LAUNCHER.reset(token)


@contextmanager
def use_launcher(launcher: Launcher):
    token = set_launcher(launcher)
    try:
        yield launcher
    finally:
        reset_launcher(token)


def _is_constexpr(annotation: Any) -> bool:
    if annotation is tl.constexpr:
        return True
    return isinstance(annotation, str) and annotation.rpartition(".")[2] == "constexpr"


class JITFunction:
    """A kernel: launch it with ``kernel[grid](*args, **meta)``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        for p in self.signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise KernelError(f"kernel {self.name!r}: *args and **kwargs are not supported")
        self.params = tuple(self.signature.parameters)
        self.constexprs = frozenset(
            n for n, p in self.signature.parameters.items() if _is_constexpr(p.annotation)
        )
        self.runtime_params = tuple(n for n in self.params if n not in self.constexprs)
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"JITFunction({self.name})"

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.launch, grid)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if tl.current_program() is None:
            raise KernelError(f"kernel {self.name!r}: launch it with {self.name}[grid](...)")
        return self.fn(*args, **kwargs)  # a device function called from another kernel

    def prepare(self, grid: Any, *args: Any, **kwargs: Any) -> KernelLaunch:
        """Bind arguments and resolve ``grid`` (a spec or a callable of the meta dict)."""
        options = {k: kwargs.pop(k) for k in LAUNCH_OPTIONS & kwargs.keys() if k not in self.params}
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise KernelError(
                f"kernel {self.name!r}: {exc}; its parameters are {', '.join(self.params)}"
            ) from None
        bound.apply_defaults()
        values = {name: self._kernel_value(name, v) for name, v in bound.arguments.items()}
        spec = grid(MappingProxyType(values)) if callable(grid) else grid
        return KernelLaunch(
            kernel=self,
            grid=Grid.resolve(spec, self.name),
            args=tuple(values[n] for n in self.runtime_params),
            meta=MappingProxyType({n: values[n] for n in self.params if n in self.constexprs}),
            options=MappingProxyType(options),
        )

    def launch(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        """Prepare a launch and hand it to the current launcher; return what it returns.

        With the default launcher, an argument whose type defines
        ``__kernel_launch__(value, launch)`` (a device tensor) claims the launch,
        so kernels on device tensors run on the simulated machine.
        """
        launch = self.prepare(grid, *args, **kwargs)
        launcher = get_launcher()
        if launcher is run_on_host:
            for value in launch.args:
                claim = getattr(type(value), "__kernel_launch__", None)
                if claim is not None:
                    return claim(value, launch)
        return launcher(launch)

    def run_program(
        self,
        pid: tuple[int, ...],
        args: tuple[Any, ...],
        meta: Mapping[str, Any],
        recorder: ProgramRecorder | None = None,
        *,
        grid: Any,
    ) -> ProgramCost:
        """Run just program ``pid`` of ``self[grid](*args, **meta)`` on the host."""
        return self.prepare(grid, *args, **meta).run_program(pid, recorder)

    @staticmethod
    def _kernel_value(name: str, value: Any) -> Any:
        if isinstance(value, tl.constexpr):
            return value.value
        unwrap = getattr(type(value), "__kernel_arg__", None)
        if unwrap is not None:  # a wrapper (a torch-like tensor) passes what it wraps
            value = unwrap(value)
        if isinstance(value, np.ndarray):
            return ArrayBuffer(name, value)
        return value


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Make ``fn`` a kernel; ``@jit`` and ``@jit(...)`` both work (options are ignored)."""

    def wrap(f: Callable[..., Any]) -> JITFunction:
        return JITFunction(f)

    return wrap if fn is None else wrap(fn)
