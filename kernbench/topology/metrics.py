"""Figures of a machine graph: its diameter in hops and its bisection bandwidth."""

from __future__ import annotations

from kernbench.topology.graph import MachineGraph

__all__ = ["diameter_hops", "bisection_bandwidth"]


def diameter_hops(graph: MachineGraph) -> int:
    """Longest PE-to-PE route, in links (routes as the machine takes them).

    Every SIP's mesh is the same, and a route between SIPs runs from its
    cube to the attach cube, across the SIPs, then on to its cube; so the
    longest route is either inside one SIP or the farthest cube from the
    attach cube, the longest SIP-to-SIP path and the farthest cube again.
    That is O(cubes per SIP^2) work, not O((SIPs x cubes)^2).
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
        across = max(len(graph.router.sip_path(0, s)) - 1 for s in range(1, graph.num_sips))
        longest = max(longest, out + across + back)
    return longest + 2


def bisection_bandwidth(graph: MachineGraph) -> dict[str, int]:
    """Bytes/s across the narrowest cut that halves the machine, each direction.

    ``sip_mesh``: the cut across one SIP's cube mesh (perpendicular to its
    longer side); ``system``: the cut that halves the SIPs (when there are
    more than one); ``machine``: the smaller of what applies.
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
        if spec.kind == "ring":
            links = 1 if n == 2 else 2
        elif spec.kind == "switch":
            links = half
        else:
            links = half * (n - half)
        result["system"] = links * spec.link.bandwidth
        result["machine"] = min(result["system"], result.get("sip_mesh", result["system"]))
    else:
        result["machine"] = result.get("sip_mesh", 0)
    return result
