"""Where a collective's data sits: a PE's own HBM slice, and the buffer its messages land in."""

from __future__ import annotations

from kernbench.topology import Topology, names

__all__ = ["memory_node", "buffer_node"]


def memory_node(topology: Topology, pe: str) -> str:
    """The HBM slice where a PE's tensors live: the one its partition starts in.

    PE p of P owns [p·H/P, (p+1)·H/P) of its cube's HBM (kernbench.memory), and
    a slice is H/S of it: the partition starts in slice ⌊p·S/P⌋.
    """
    s, c, p = names.pe_coordinates(pe)
    slices = topology.cube.memory_map.hbm_slices_per_cube
    return names.hbm(s, c, p * slices // topology.pes_per_cube)


def buffer_node(pe: str, memory_node: str, buffer: str) -> str:
    """Where messages to ``pe`` land for a configuration's ``buffer`` location."""
    if buffer == "tcm":
        return names.tcm_of(pe)
    if buffer == "sram":
        return names.sram_of(pe)
    return memory_node
