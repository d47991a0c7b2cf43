"""Hardware layer: the SimPy engine, components, links and messages."""

from kernbench.fabric.engine import Fabric, Handle
from kernbench.fabric.flows import FlowNetwork, RouteCost
from kernbench.fabric.messages import (
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
    "Completion",
    "Compute",
    "Delay",
    "Fabric",
    "FlowNetwork",
    "Handle",
    "IpcqInstall",
    "MemoryRead",
    "MemoryWrite",
    "Message",
    "MmuMap",
    "MmuUnmap",
    "ProgramWork",
    "RouteCost",
    "RunPrograms",
    "TraceRow",
    "Transfer",
]
