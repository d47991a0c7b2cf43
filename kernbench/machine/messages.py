"""Messages: immutable records that components exchange through the engine.

Every message names its source and destination (hierarchical names, never
object references) and carries its size in bytes; the engine gives each
submitted message an id.  Payloads (``data``) take no part in equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MMU_ENTRY_BYTES",
    "Message",
    "Transfer",
    "MemoryWrite",
    "MemoryRead",
    "MmuMap",
    "MmuUnmap",
    "IpcqInstall",
    "Compute",
    "Delay",
    "ProgramWork",
    "RunPrograms",
    "Completion",
    "TraceRow",
]


# Bytes one page-table entry takes in an MMU command.
MMU_ENTRY_BYTES = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    src: str
    dst: str
    nbytes: int = 0
    tag: str = ""  # what the request is for (a tensor, a kernel), shown in traces

    kind = "message"


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfer(Message):
    """Move ``nbytes`` from ``src`` to ``dst`` over the route between them."""

    kind = "transfer"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryWrite(Message):
    """``src`` (a PE or the host) writes ``nbytes`` into the memory ``dst`` at ``addr``.

    ``data`` (functional mode) lands in the memory store when the last byte
    arrives; in timing-only mode it is ``None``.  ``handed_over``: the sender
    never touches ``data`` again, so the store may keep that very array.
    """

    addr: Any = None  # a kernbench.memory.PhysAddr
    data: Any = field(default=None, compare=False, repr=False)
    handed_over: bool = field(default=False, compare=False, repr=False)

    kind = "mem_write"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRead(Message):
    """``src`` reads ``nbytes`` from the memory ``dst`` at ``addr``.

    A request header travels src -> dst (latency only), then the data dst -> src.
    The completion carries the bytes read (functional mode) or ``None``.
    """

    addr: Any = None

    kind = "mem_read"


@dataclass(frozen=True, slots=True, kw_only=True)
class MmuMap(Message):
    """Host -> a cube's M_CPU, which installs pages on each PE in ``targets``.

    ``entries`` are ``(va, pa, nbytes)`` with ``pa`` a PhysAddr; ``nbytes`` of
    the message is the size of the command.
    """

    targets: tuple[str, ...] = ()
    entries: tuple[tuple[int, Any, int], ...] = ()

    kind = "mmu_map"


@dataclass(frozen=True, slots=True, kw_only=True)
class MmuUnmap(Message):
    """Host -> a cube's M_CPU: remove ``(va, nbytes)`` mappings on ``targets``."""

    targets: tuple[str, ...] = ()
    entries: tuple[tuple[int, int], ...] = ()

    kind = "mmu_unmap"


@dataclass(frozen=True, slots=True, kw_only=True)
class IpcqInstall(Message):
    """Host -> a cube's M_CPU: install a neighbour table on one PE of the cube.

    ``entries`` are the neighbour PEs; installing costs the command's trip and
    ``install_latency_per_entry`` per entry on the PE.
    """

    targets: tuple[str, ...] = ()
    entries: tuple[str, ...] = ()

    kind = "ipcq_install"


@dataclass(frozen=True, slots=True, kw_only=True)
class Compute(Message):
    """Work on one PE engine (``dst`` is the PE): ``flops`` on ``engine``."""

    engine: str = "vector"  # "matrix" or "vector"
    flops: int = 0

    kind = "compute"


@dataclass(frozen=True, slots=True, kw_only=True)
class Delay(Message):
    """A fixed amount of time spent at ``dst`` (a launch overhead, a poll)."""

    duration_ps: int = 0

    kind = "delay"


@dataclass(frozen=True, slots=True)
class Completion:
    """What a finished request returns."""

    request_id: int
    end_ps: int
    data: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One finished request: who, what, when (picoseconds), how many bytes."""

    request_id: int
    kind: str
    src: str
    dst: str
    start_ps: int
    end_ps: int
    nbytes: int
    tag: str = ""

    @property
    def duration_ps(self) -> int:
        return self.end_ps - self.start_ps


@dataclass(frozen=True, slots=True)
class ProgramWork:
    """What one kernel program did, as the PE's cost model needs it.

    ``loads`` and ``stores`` are ``(memory node, bytes)`` pairs; FLOPs go to the
    PE's matrix and vector engines.
    """

    loads: tuple[tuple[str, int], ...] = ()
    stores: tuple[tuple[str, int], ...] = ()
    matrix_flops: int = 0
    vector_flops: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPrograms(Message):
    """Host -> ``dst`` (a cube's M_CPU): run kernel programs on PEs.

    ``programs`` maps a PE name to the programs it runs, in order; each program
    is a callable run when the PE starts it, returning its :class:`ProgramWork`.
    """

    programs: Any = field(default=None, compare=False, repr=False)

    kind = "kernel"
