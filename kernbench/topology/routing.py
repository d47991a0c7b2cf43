"""Routes through a machine graph: deterministic, and around links that are down.

Dimension-order (X then Y) inside a SIP's cube mesh (the shorter way round on
a torus), the shorter way round an inter-SIP ring (ties go to increasing SIP
index), through the switch, or direct on a fully connected system.  On a
leaf/spine cluster (``clos``) a route climbs only as high as it must: through
the node switch between chips of one node, through their leaf between nodes of
one leaf, else leaf -> spine -> leaf, the spine chosen by the destination
(spine = destination SIP mod spines, the D-mod-k rule of InfiniBand fat trees),
so routes are deterministic and spread over the spines.  Inter-SIP
and host traffic enters and leaves a SIP at its ``attach_cube``.  A route that
would cross a link that is down takes the fewest-hop path around it instead
(ADR 0010).  See ADR 0004.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernbench.errors import RouteError
from kernbench.topology import names

if TYPE_CHECKING:
    from kernbench.topology.graph import MachineGraph

__all__ = ["Router"]

# Kinds of node that pass traffic on: a route around a link that is down may stop
# at these, never at the host, a PE or a memory.
_RELAYS = frozenset(("noc", names.SWITCH, *names.CLOS_SWITCH_KINDS))


class Router:
    """The routes of one machine graph, computed on demand and cached."""

    def __init__(self, graph: MachineGraph) -> None:
        self.graph = graph
        self.mesh_w, self.mesh_h, self.torus = graph.mesh_w, graph.mesh_h, graph.torus
        self.num_sips = graph.num_sips
        self.attach_cube = graph.attach_cube
        self.interconnect = graph.interconnect
        self.clos = graph.topology.system.interconnect.clos
        self._cache: dict[tuple[str, str], tuple[int, ...]] = {}
        self._adjacency: dict[str, list[tuple[str, int]]] | None = None

    def route(self, src: str, dst: str) -> tuple[int, ...]:
        """Edge indices from ``src`` to ``dst``."""
        key = (src, dst)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        graph = self.graph
        nodes = self._route_nodes(src, dst)
        try:
            path = tuple(
                self.graph.edge_by_ends[(a, b)] for a, b in zip(nodes, nodes[1:], strict=False)
            )
        except KeyError as exc:  # pragma: no cover - a bug in the router, not the user
            raise RouteError(f"no link {exc.args[0]} on the route {src} -> {dst}") from None
        if graph.down and any(i in graph.down for i in path):
            path = self._detour(src, dst, path)
        self._cache[key] = path
        return path

    def _detour(self, src: str, dst: str, blocked: tuple[int, ...]) -> tuple[int, ...]:
        """The fewest-hop path around links that are down (breadth first, by edge order).

        Only cube routers and the switch relay traffic; the host, a PE or a memory
        is never a stop on the way.
        """
        if self._adjacency is None:
            self._adjacency = {}
            for edge in self.graph.edges:
                for a, b in ((edge.src, edge.dst), (edge.dst, edge.src)):
                    if self.graph.edge_by_ends.get((a, b)) == edge.index:
                        self._adjacency.setdefault(a, []).append((b, edge.index))
        previous: dict[str, tuple[str, int] | None] = {src: None}
        frontier = [src]
        while frontier and dst not in previous:
            following = []
            for node in frontier:
                if node != src and self.graph.check_name(node).kind not in _RELAYS:
                    continue
                for nxt, index in self._adjacency.get(node, ()):
                    if index in self.graph.down or nxt in previous:
                        continue
                    previous[nxt] = (node, index)
                    following.append(nxt)
            frontier = following
        if dst not in previous:
            down = ", ".join(self.graph.edges[i].name for i in blocked if i in self.graph.down)
            raise RouteError(
                f"no route from {src} to {dst}: {down} is down and no other route exists"
            )
        path = []
        node = dst
        while previous[node] is not None:
            node, index = previous[node]
            path.append(index)
        return tuple(reversed(path))

    def _uplink(self, name: str) -> tuple[list[str], tuple[int, int] | None]:
        """Nodes from ``name`` up to its cube router, and that router's (sip, cube)."""
        node = self.graph.check_name(name)
        kind, s, c = node.kind, node.sip, node.cube
        if kind in (names.HOST, names.SWITCH):
            return [kind], None
        if kind in names.CLOS_SWITCH_KINDS:
            raise RouteError(
                f"{name} is a switch of the cluster's network, not an endpoint; route between "
                "PEs, memories, M_CPUs, routers or the host"
            )
        router = names.noc(s, c)
        if kind == "noc":
            return [router], (s, c)
        if kind == "tcm":
            return [name, names.pe(s, c, node.pe), router], (s, c)
        return [name, router], (s, c)

    def _route_nodes(self, src: str, dst: str) -> list[str]:
        if src == dst:
            self.graph.check_name(src)
            return [src]
        a, b = self.graph.check_name(src), self.graph.check_name(dst)
        # A PE reaches its own TCM directly, not through the router.
        if {a.kind, b.kind} == {"tcm", "pe"} and (a.sip, a.cube, a.pe) == (b.sip, b.cube, b.pe):
            return [src, dst]
        up, src_router = self._uplink(src)
        down, dst_router = self._uplink(dst)
        middle = self._router_path(src, src_router, dst, dst_router)
        nodes = up[:-1] + middle + list(reversed(down))[1:]
        return nodes

    def _router_path(
        self, src: str, a: tuple[int, int] | None, dst: str, b: tuple[int, int] | None
    ) -> list[str]:
        if a is None and b is None:
            raise RouteError(f"no route between {src!r} and {dst!r}")
        if a is None:  # from the host or the switch
            entry = self._entry(src, b[0])
            return entry + self.mesh_path(b[0], self.attach_cube, b[1])[1:]
        if b is None:
            exit_ = list(reversed(self._entry(dst, a[0])))
            return self.mesh_path(a[0], a[1], self.attach_cube) + exit_[1:]
        if a[0] == b[0]:
            return self.mesh_path(a[0], a[1], b[1])
        return (
            self.mesh_path(a[0], a[1], self.attach_cube)
            + self.sip_path(a[0], b[0])[1:-1]
            + self.mesh_path(b[0], self.attach_cube, b[1])
        )

    def _entry(self, outside: str, sip: int) -> list[str]:
        """Nodes from the host or switch to ``sip``'s attach router."""
        if outside == "host":
            return ["host", names.noc(sip, self.attach_cube)]
        return ["switch", names.noc(sip, self.attach_cube)]

    def sip_path(self, a: int, b: int) -> list[str]:
        def attach(s: int) -> str:
            return names.noc(s, self.attach_cube)

        if self.interconnect == "switch":
            return [attach(a), "switch", attach(b)]
        if self.interconnect == "fully_connected":
            return [attach(a), attach(b)]
        if self.interconnect == "clos":
            return [attach(a), *self.clos_switches(a, b), attach(b)]
        n = self.num_sips
        forward = (b - a) % n
        step = 1 if forward <= n - forward else -1
        path, s = [attach(a)], a
        while s != b:
            s = (s + step) % n
            path.append(attach(s))
        return path

    def clos_switches(self, a: int, b: int) -> list[str]:
        """The switches a route from SIP ``a`` to SIP ``b`` crosses on a cluster."""
        clos = self.clos
        node_a, node_b = a // clos.node.sips, b // clos.node.sips
        if node_a == node_b:
            return [names.node_switch(node_a)]
        leaf_a, leaf_b = node_a // clos.leaf.nodes, node_b // clos.leaf.nodes
        if leaf_a == leaf_b:
            return [names.leaf(leaf_a)]
        spine = b % clos.spine.count
        return [names.leaf(leaf_a), names.spine(spine), names.leaf(leaf_b)]

    def mesh_path(self, s: int, c1: int, c2: int) -> list[str]:
        w, h = self.mesh_w, self.mesh_h
        x, y = c1 % w, c1 // w
        x2, y2 = c2 % w, c2 // w
        path = [names.noc(s, c1)]
        for size, axis in ((w, 0), (h, 1)):
            here, goal = (x, x2) if axis == 0 else (y, y2)
            step = 1 if goal >= here else -1
            if self.torus and size > 2:
                forward = (goal - here) % size
                step = 1 if forward <= size - forward else -1
            while here != goal:
                here = (here + step) % size if self.torus and size > 2 else here + step
                if axis == 0:
                    x = here
                else:
                    y = here
                path.append(names.noc(s, y * w + x))
        return path
