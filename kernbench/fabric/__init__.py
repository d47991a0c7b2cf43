"""The detailed backend: the SimPy fabric, exact to the picosecond (ADR 0005, 0014).

Components (links, PE engines, memories, the M_CPUs, IPCQ) each serve the
messages they register; :class:`Fabric` composes them and implements the
machine API of :mod:`kernbench.machine`.
"""

from typing import Any

from kernbench.fabric.engine import Fabric, Handle
from kernbench.fabric.flows import FlowNetwork
from kernbench.machine.backends import register_backend
from kernbench.topology.schema import Topology

__all__ = ["Fabric", "FlowNetwork", "Handle", "BACKEND"]

BACKEND = "detailed"


def _build(topology: Topology, store: Any) -> Fabric:
    return Fabric(topology, store=store)


register_backend(BACKEND, _build)
