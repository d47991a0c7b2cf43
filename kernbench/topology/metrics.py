"""Figures of a machine graph: its diameter in hops and its bisection bandwidth.

Both are closed forms over the counts (tests check them against brute force on
small machines), so they cost nothing on a machine of 65,536 SIPs.
"""

from __future__ import annotations

from kernbench.topology.clos_spec import ClosSpec
from kernbench.topology.graph import MachineGraph

__all__ = ["diameter_hops", "bisection_bandwidth", "sip_hops_max", "clos_bisection", "clos_shape"]


def sip_hops_max(graph: MachineGraph) -> int:
    """Most inter-SIP links a route between two SIPs crosses (0 with one SIP)."""
    n = graph.num_sips
    if n < 2:
        return 0
    kind = graph.interconnect
    if kind == "ring":
        return n // 2
    if kind == "switch":
        return 2
    if kind == "fully_connected":
        return 1
    _, leaves, _ = clos_shape(graph.topology.system.interconnect.clos, n)
    return 4 if leaves > 1 else 2


def clos_shape(clos: ClosSpec, sips: int) -> tuple[int, int, int]:
    """(nodes, leaves, spines) of a cluster of ``sips`` chips (no spines with one leaf)."""
    nodes = sips // clos.node.sips
    leaves = nodes // clos.leaf.nodes
    return nodes, leaves, clos.spine.count if leaves > 1 else 0


def clos_bisection(clos: ClosSpec, sips: int) -> int:
    """Bytes/s (each direction) across the narrowest cut of a cluster into halves of SIPs.

    Put ``t`` whole leaves (with their nodes) on the smaller side and take the
    rest of its ``sips // 2`` chips from other leaves: each such chip's leaf
    link crosses the cut, a node split by it crosses on the fewer of its chips'
    node links, and each spine crosses on its links to the leaves of the other
    side (``min(t, leaves - t)`` of them).  The cost is linear in ``t`` but for
    the node split, so every ``t`` is tried: O(leaves).
    """
    per_node = clos.node.sips
    per_leaf = per_node * clos.leaf.nodes
    _, leaves, spines = clos_shape(clos, sips)
    half = sips // 2
    spine_pair = spines * clos.spine.link.bandwidth
    best = None
    for whole in range(half // per_leaf + 1):
        moved = half - whole * per_leaf
        split = moved % per_node
        cost = (
            moved * clos.leaf.link.bandwidth
            + min(split, per_node - split) * clos.node.link.bandwidth
            + min(whole, leaves - whole) * spine_pair
        )
        best = cost if best is None else min(best, cost)
    return best


def diameter_hops(graph: MachineGraph) -> int:
    """Longest PE-to-PE route, in links (routes as the machine takes them).

    Every SIP's mesh is the same, and a route between SIPs runs from its
    cube to the attach cube, across the SIPs, then on to its cube; so the
    longest route is either inside one SIP or the farthest cube from the
    attach cube, the longest SIP-to-SIP path (:func:`sip_hops_max`) and the
    farthest cube again.  That is O(cubes per SIP^2) work, not
    O((SIPs x cubes)^2).
    """
    cubes = range(graph.cubes_per_sip)
    longest = max(
        (len(graph.router.mesh_path(0, a, b)) - 1 for a in cubes for b in cubes if a < b),
        default=0,
    )
    if graph.num_sips > 1:
        attach = graph.attach_cube
        out = max(len(graph.router.mesh_path(0, c, attach)) - 1 for c in cubes)
        back = max(len(graph.router.mesh_path(0, attach, c)) - 1 for c in cubes)
        longest = max(longest, out + sip_hops_max(graph) + back)
    return longest + 2


def bisection_bandwidth(graph: MachineGraph) -> dict[str, int]:
    """Bytes/s across the narrowest cut that halves the machine, each direction.

    ``sip_mesh``: the cut across one SIP's cube mesh (perpendicular to its
    longer side); ``system``: the cut that halves the SIPs (when there are
    more than one); ``machine``: the narrower of the two ways to halve the
    whole machine: between SIPs (the system cut, plus one SIP's mesh when
    their number is odd), or through every SIP's mesh (n sip_mesh cuts).
    """
    mesh = graph.topology.sip.cube_mesh
    w, h = mesh.w, mesh.h
    long_side, short_side = (w, h) if w >= h else (h, w)
    result: dict[str, int] = {}
    if long_side > 1:
        links = short_side * (2 if graph.torus and long_side > 2 else 1)
        result["sip_mesh"] = links * mesh.link.bandwidth
    n = graph.num_sips
    spec = graph.topology.system.interconnect
    if n > 1:
        half = n // 2
        if spec.kind == "clos":
            result["system"] = clos_bisection(spec.clos, n)
        else:
            if spec.kind == "ring":
                links = 1 if n == 2 else 2
            elif spec.kind == "switch":
                links = half
            else:
                links = half * (n - half)
            result["system"] = links * spec.link.bandwidth
        mesh_cut = result.get("sip_mesh")
        between = result["system"] + ((mesh_cut or 0) if n % 2 else 0)
        result["machine"] = between if mesh_cut is None else min(between, n * mesh_cut)
    else:
        result["machine"] = result.get("sip_mesh", 0)
    return result
