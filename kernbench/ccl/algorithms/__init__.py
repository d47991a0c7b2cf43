"""The collective algorithm registry.

An :class:`Algorithm` is a set of per-rank programs, one per collective op it
serves, each a state machine over a logical topology written against
:class:`~kernbench.ccl.comm.Comm` (ASTRA-sim style: send, recv, reduce, now).
It also says which rank counts it handles (``requires``) and which groups of
PEs with which parameters it can run on (``fits``, for algorithms that care
where ranks sit), which peers each rank talks to (the IPCQ neighbour table to
install), per op its closed-form α-β-γ cost (reference/collective-costs.md),
and its :mod:`~kernbench.ccl.algorithms.schedule`: the messages and local work
of every step, which the tuner's cost model prices on the machine.
Algorithms are chosen by name.

An algorithm declares the catalogue parameters it takes (``params:`` of a
configuration) as a :class:`Params` model; the catalogue validates every
configuration's parameters against it when it is loaded, so a bad parameter is
a configuration error naming the key, never a crash inside the simulation.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernbench.ccl.algorithms.schedule import Schedule
from kernbench.ccl.comm import Comm, Region
from kernbench.ccl.mapping import MappingKind
from kernbench.ccl.ops import COLLECTIVE_OPS
from kernbench.errors import DistributedError
from kernbench.validation import StrictModel

__all__ = [
    "OPS",
    "OpArgs",
    "Params",
    "Algorithm",
    "register",
    "get_algorithm",
    "algorithms",
    "power_of_two",
]

OPS = COLLECTIVE_OPS

# Modules whose import registers their algorithms.
_MODULES = (
    "ring",
    "binomial",
    "direct",
    "dissemination",
    "bidirectional_ring",
    "binary_tree",
    "double_binary_tree",
    "recursive_doubling",
    "rabenseifner",
    "bruck",
    "hierarchical",
    "mesh2d",
    "leader",
)


@dataclass(frozen=True)
class OpArgs:
    """One rank's buffers for one collective op.

    * all_reduce, broadcast, reduce: ``buf`` (in place; reduce may use ``scratch``)
    * all_gather: ``inp`` -> ``blocks`` (p regions, block i from rank i)
    * reduce_scatter: ``blocks`` (p input regions) -> ``out`` (block ``rank`` reduced)
    * gather: ``inp`` -> ``blocks`` on ``root``; scatter: ``blocks`` on ``root`` -> ``out``
    * all_to_all: ``sends[j]`` to rank j, ``recvs[j]`` from rank j
    """

    buf: Region | None = None
    inp: Region | None = None
    out: Region | None = None
    blocks: tuple[Region, ...] = ()
    sends: tuple[Region, ...] = ()
    recvs: tuple[Region, ...] = ()
    root: int = 0


class Params(StrictModel):
    """An algorithm's catalogue parameters: frozen, and unknown keys are errors.

    This base takes none; an algorithm with parameters declares a subclass
    (each field with a type, a default and a description).  It is validated
    with ``context={"world_size": ...}``: the configuration's world size, or
    ``None`` when it is for any.
    """


Program = Callable[[Comm, OpArgs], Generator]
# cost(p, nbytes, alpha, beta, gamma) -> seconds; nbytes as in reference/collective-costs.md
Cost = Callable[[int, float, float, float, float], float]
# fits(op, pes, params) -> why the algorithm cannot run op on these PEs, or None
Fits = Callable[[str, Sequence[str], Mapping[str, Any]], str | None]
# schedule(op, pes, nbytes, params) -> the steps of one run (nbytes as for Cost)
Scheduler = Callable[[str, Sequence[str], float, Mapping[str, Any]], Schedule]


@dataclass(frozen=True)
class Algorithm:
    name: str
    programs: Mapping[str, Program]
    description: str = ""
    costs: Mapping[str, Cost] = field(default_factory=dict)
    requires: Callable[[str, int], str | None] | None = None
    peers: Callable[[str, int, int], set[int]] | None = None
    # Whom each rank sends to at once in a typical step (for the cost model's
    # count of flows sharing a link or a memory port); default: its neighbours.
    pattern: Callable[[int, int], list[int]] | None = None
    # The catalogue parameters it takes (the base class: none).
    params: type[Params] = Params
    fits: Fits | None = None
    schedule: Scheduler | None = None
    # Whether its ``chunks`` parameter (or the parameter ``pieces`` names) cuts the
    # data into pieces that flow as a pipeline: a configuration that leaves it out
    # gets the tuner's count.
    pipelines: bool = False
    pieces: str = "chunks"
    # Every rank's peers on these PEs with these params, for an algorithm whose peers
    # depend on where its ranks sit (a composition); it wins over ``peers``.
    peers_on: Callable[[str, Sequence[str], Mapping[str, Any]], list[set[int]]] | None = None
    # How its ranks are laid over the machine (kernbench.ccl.mapping): ``cycle``,
    # ``tree`` or ``rooted``; None keeps the group's order.
    mapping: MappingKind | None = None

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(op for op in OPS if op in self.programs)

    def check(self, op: str, size: int) -> None:
        """Raise unless this algorithm serves ``op`` on ``size`` ranks."""
        if op not in self.programs:
            raise DistributedError(
                f"algorithm {self.name!r} does not serve {op}; it serves {', '.join(self.ops)}"
            )
        reason = self.requires(op, size) if self.requires else None
        if reason:
            raise DistributedError(
                f"algorithm {self.name!r} cannot run {op} on {size} ranks: {reason}"
            )

    def serves(self, op: str, size: int) -> bool:
        try:
            self.check(op, size)
        except DistributedError:
            return False
        return True

    def unfit(self, op: str, pes: Sequence[str], params: Mapping[str, Any]) -> str | None:
        """Why this algorithm cannot run ``op`` on exactly these PEs with ``params`` (None: it can).

        The rank count (``requires``) and, for algorithms that care where ranks
        sit or read parameters that must match the group, ``fits``.
        """
        try:
            self.check(op, len(pes))
        except DistributedError as exc:
            return str(exc)
        reason = self.fits(op, pes, params) if self.fits else None
        if reason:
            return f"algorithm {self.name!r} cannot run {op} on these {len(pes)} ranks: {reason}"
        return None

    def step_targets(self, op: str, size: int, rank: int) -> list[int]:
        """The ranks ``rank`` sends to concurrently in a typical step."""
        if self.pattern is not None:
            return [t for t in self.pattern(size, rank) if t != rank]
        return sorted(self.neighbours(op, size, rank))

    def neighbours(self, op: str, size: int, rank: int) -> set[int]:
        """Peers ``rank`` exchanges messages with (default: everyone)."""
        if self.peers is not None:
            return self.peers(op, size, rank)
        return set(range(size)) - {rank}


_REGISTRY: dict[str, Algorithm] = {}
_loaded = False


def register(algorithm: Algorithm) -> Algorithm:
    if algorithm.name in _REGISTRY:
        raise ValueError(f"algorithm {algorithm.name!r} registered twice")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in _MODULES:
        try:
            importlib.import_module(f"kernbench.ccl.algorithms.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"kernbench.ccl.algorithms.{module}":
                raise


def algorithms() -> dict[str, Algorithm]:
    _load()
    return dict(_REGISTRY)


def get_algorithm(name: str) -> Algorithm:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DistributedError(
            f"unknown collective algorithm {name!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def power_of_two(op: str, size: int) -> str | None:
    """A ``requires`` for algorithms that need a power-of-two rank count."""
    return None if size & (size - 1) == 0 else "needs a power-of-two number of ranks"


def lg(size: int) -> int:
    """ceil(log2(size))."""
    return max(0, (size - 1).bit_length())
