"""Launch grids: how many programs a launch has and which core each belongs to.

A grid is 1 to 3 axis lengths, row-major with the *last* axis fastest, as
Triton's interpreter runs them (``for x: for y: for z:``), so a grid ``(2, 3)``
runs ``(0,0) (0,1) (0,2) (1,0) (1,1) (1,2)``.

SPMD grids (after NKI): an entry ``spmd_dim(g, nc(k))`` makes that axis
``g * k`` programs long, spread over ``k`` cores; program ``n`` on that axis
belongs to core ``n % k``. Programs of grids without one are on core 0. At
most one axis may be split this way.

Both the interpreter (which runs a grid's programs) and ``@jit`` launches
(which build grids from launch specs) use this module; it needs neither.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kernbench.errors import KernelError

__all__ = ["MAX_GRID_PROGRAMS", "NC", "Grid", "SpmdDim", "nc", "spmd_dim"]

#: The most programs one launch may have.  The interpreter runs programs one at a
#: time on the host (in timing-only mode too, to count their work), at thousands
#: per second, so a larger grid would run for hours; no bundled bench or test
#: comes near it (the largest launches a few thousand programs).
MAX_GRID_PROGRAMS = 2**20


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
    """A launch grid: 1 to 3 axis lengths, and the SPMD core split if any."""

    dims: tuple[int, ...]
    spmd_axis: int | None = None
    num_cores: int = 1

    @classmethod
    def from_spec(cls, spec: Any, kernel: str = "?") -> Grid:
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
