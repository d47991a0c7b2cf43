"""The machine API: what every layer above the simulation talks to, whatever simulates it.

Messages (frozen records the host and components exchange), the typed
:class:`~kernbench.machine.api.Machine` protocol a backend implements, the
records a backend emits to observation hooks, the max-min solver both
backends share, and the registry that builds a run's backend from
``simulation.backend`` (ADR 0014).
"""

from kernbench.machine.backends import build_machine, register_backend
from kernbench.machine.messages import (
    MMU_ENTRY_BYTES,
    Completion,
    Compute,
    Delay,
    IpcqInstall,
    MemoryRead,
    MemoryWrite,
    Message,
    MmuMap,
    MmuUnmap,
    ProgramWork,
    RunPrograms,
    TraceRow,
    Transfer,
)

__all__ = [
    "build_machine",
    "register_backend",
    "MMU_ENTRY_BYTES",
    "Completion",
    "Compute",
    "Delay",
    "IpcqInstall",
    "MemoryRead",
    "MemoryWrite",
    "Message",
    "MmuMap",
    "MmuUnmap",
    "ProgramWork",
    "RunPrograms",
    "TraceRow",
    "Transfer",
]
