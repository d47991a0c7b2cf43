"""How large a machine KernBench builds, and why: every size limit in one place.

The schema checks these when a topology is validated, from the counts alone,
before any graph is built, so a mistyped ``system.sips.count=100000`` (or
10^20) is a one-line error naming the key and the limit, not minutes of
building or a MemoryError.

Most limits come from the physical-address layout
(:mod:`kernbench.memory.address`: 16 bits of SIP, 7 of cube, 7 of PE): a
machine that does not fit it could not address its memory.  A test checks that
these numbers fit the layout.  The whole-machine PE limit (2^20) bounds the
graph, which is built eagerly: a few directed links per PE (about 4.7 on the
bundled machines), so ``kernbench topo show`` on 2^17 PEs takes about 3.5 s and
350 MB and on 2^20 PEs over a minute and about 2 GB.  The schema's check is
arithmetic on the counts, so refusing 10^20 PEs costs nothing.  Raising a limit
means widening the address fields (or making the graph lazy) first, then
changing the number here.
"""

from __future__ import annotations

__all__ = [
    "MAX_SIPS",
    "MAX_CUBES_PER_SIP",
    "MAX_PES_PER_CUBE",
    "MAX_PES",
    "MAX_HBM_SLICES_PER_CUBE",
    "MAX_HBM_SLICES",
    "MAX_LEAF_SPINE_LINKS",
    "MAX_DIRECT_SIP_LINKS",
    "MAX_MEMORY_BYTES",
    "MAX_SLOWDOWN",
    "MAX_PAGE_SIZE",
]

#: SIPs in a system: the physical address's sip field is 16 bits (65,536 chips,
#: past the 4,096 to 16,384 GPUs of the largest two-level leaf/spine clusters).
MAX_SIPS = 2**16
#: Cubes in one SIP's mesh (w x h): the address's cube field is 7 bits.
MAX_CUBES_PER_SIP = 128
#: PEs in one cube (corners x pe_per_corner): the address's pe field is 7 bits.
MAX_PES_PER_CUBE = 128
#: PEs in the whole machine (1,048,576): the graph holds every PE, port and link,
#: about 5 directed links per PE, built eagerly (see the module docstring).
MAX_PES = 2**20
#: Leaf-to-spine links of a clos interconnect (leaves x spines): each is two
#: directed links of the graph, so as many as the machine's PEs at most; real
#: two-level fabrics have a few thousand (128 leaves x 64 spines).
MAX_LEAF_SPINE_LINKS = 2**20
#: SIP-to-SIP links of a fully connected interconnect (n(n-1)/2 for n SIPs): each is
#: two directed links of the graph, as with leaf-spine links (1,448 SIPs; 2,048
#: took 25 s to build and 65,536 would need 2^31).
MAX_DIRECT_SIP_LINKS = 2**20
#: HBM slices per cube: each is a node and a memory port in the graph.
MAX_HBM_SLICES_PER_CUBE = 128
#: HBM slices in the whole machine (cubes x slices per cube): each is a node and a
#: memory port of the eagerly built graph, so as many as the machine's PEs at most
#: (2^20 at 128 per cube would be 2^27 ports, about 70 GB and 20 minutes to build).
MAX_HBM_SLICES = 2**20
#: Bytes of one memory (a cube's HBM, its SRAM, a PE's TCM): the address's
#: offset field is 38 bits (256 GiB).
MAX_MEMORY_BYTES = 2**38
#: A fault's slowdown: past a million times slower a link or PE is as good as
#: down (use ``down: true``), and larger factors only push times past 2^63 ps.
MAX_SLOWDOWN = 1e6
#: An MMU page: the virtual address space starts at 4 GiB (so that 0 or a small
#: offset mistaken for an address is never in it; :mod:`kernbench.memory.va`), and
#: that start must be a page boundary.
MAX_PAGE_SIZE = 2**32
