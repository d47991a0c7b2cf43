"""The detailed backend: the SimPy fabric, exact to the picosecond (ADR 0005, 0014).

Components (links, PE engines, memories, the M_CPUs, IPCQ) each serve the
messages they register; :class:`Fabric` composes them and implements the
machine API of :mod:`kernbench.machine`.
"""

from kernbench.fabric.engine import Fabric, Handle
from kernbench.fabric.flows import FlowNetwork, RouteCost

__all__ = ["Fabric", "FlowNetwork", "Handle", "RouteCost"]
