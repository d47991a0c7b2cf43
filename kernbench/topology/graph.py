"""Expand a validated :class:`Topology` into named nodes, links and routes.

Nodes are the places bytes come from or go to (PEs, TCMs, HBM slices, cube
SRAM, M_CPUs, cube routers, the host, a switch).  Links are directed (each
direction of a full-duplex link is its own :class:`Edge`); a memory's port
(HBM slice, SRAM, TCM) is one edge that reads and writes share.  Routes are
deterministic: dimension-order (X then Y) inside a SIP's cube mesh, the
shorter way round an inter-SIP ring (ties go to increasing SIP index), through
the switch, or direct on a fully connected system.  Inter-SIP and host
traffic enters and leaves a SIP at its ``attach_cube``.  See ADR 0004.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kernbench.errors import RouteError, TopologyError, shown
from kernbench.topology import names
from kernbench.topology.names import NodeName
from kernbench.topology.schema import Topology

__all__ = ["Edge", "MachineGraph", "build_graph"]


@dataclass(frozen=True, slots=True)
class Edge:
    """One direction of a link: a bandwidth, a latency, a class for reports."""

    index: int
    name: str
    src: str
    dst: str
    bandwidth: int  # bytes per second
    latency_ps: int
    link_class: str


def pe_name(sip: int, cube: int, pe: int) -> str:
    return names.pe(sip, cube, pe)


def router_name(sip: int, cube: int) -> str:
    return names.noc(sip, cube)


class MachineGraph:
    """The machine as a graph.  Built once; read-only while the clock runs."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        mesh = topology.sip.cube_mesh
        self.mesh_w, self.mesh_h, self.torus = mesh.w, mesh.h, mesh.torus
        self.num_sips = topology.num_sips
        self.cubes_per_sip = topology.cubes_per_sip
        self.pes_per_cube = topology.pes_per_cube
        self.hbm_slices = topology.cube.memory_map.hbm_slices_per_cube
        self.attach_cube = topology.system.interconnect.attach_cube
        self.interconnect = topology.system.interconnect.kind
        self.edges: list[Edge] = []
        self._edge_by_ends: dict[tuple[str, str], int] = {}
        self._route_cache: dict[tuple[str, str], tuple[int, ...]] = {}
        self._checked: dict[str, NodeName] = {}
        self._adjacency: dict[str, list[tuple[str, int]]] | None = None
        self.down: set[int] = set()
        self._pe_slowdowns = {fault.pe: fault.slowdown for fault in topology.faults.pes}
        self._build()
        self._apply_faults()

    # -- construction -------------------------------------------------------
    def _add_link(
        self,
        a: str,
        b: str,
        bandwidth: int,
        latency_ps: int,
        link_class: str,
        a_label: str | None = None,
        b_label: str | None = None,
    ) -> None:
        for src, dst, src_label, dst_label in ((a, b, a_label, b_label), (b, a, b_label, a_label)):
            index = len(self.edges)
            name = names.link(src_label or src, dst_label or dst)
            self.edges.append(Edge(index, name, src, dst, bandwidth, latency_ps, link_class))
            self._edge_by_ends[(src, dst)] = index

    def _add_port(
        self, outside: str, memory: str, bandwidth: int, latency_ps: int, link_class: str
    ) -> None:
        """A memory's port: one edge that reads and writes share (a memory is half duplex)."""
        index = len(self.edges)
        self.edges.append(
            Edge(index, names.port(memory), outside, memory, bandwidth, latency_ps, link_class)
        )
        self._edge_by_ends[(outside, memory)] = index
        self._edge_by_ends[(memory, outside)] = index

    def _build(self) -> None:
        topo = self.topology
        cube = topo.cube
        components = cube.pe_template.components
        noc, hbm, sram = cube.noc, cube.hbm, cube.sram
        tcm = components.pe_tcm.attrs
        for s in range(self.num_sips):
            for c in range(self.cubes_per_sip):
                router = router_name(s, c)
                self._add_link(router, names.m_cpu(s, c), noc.bandwidth, noc.latency, "mcpu_port")
                self._add_port(router, names.sram(s, c), sram.bandwidth, sram.latency, "sram_port")
                for k in range(self.hbm_slices):
                    self._add_port(
                        router, names.hbm(s, c, k), hbm.slice_bandwidth, hbm.latency, "hbm_port"
                    )
                for p in range(self.pes_per_cube):
                    pe = pe_name(s, c, p)
                    self._add_link(pe, router, noc.bandwidth, noc.latency, "pe_port")
                    self._add_port(pe, names.tcm(s, c, p), tcm.bandwidth, tcm.latency, "tcm_port")
            self._build_mesh(s)
        self._build_interconnect()
        host = topo.system.host_link
        for s in range(self.num_sips):
            self._add_link(
                names.HOST,
                router_name(s, self.attach_cube),
                host.bandwidth,
                host.latency,
                "host_link",
                b_label=names.sip(s),
            )

    def _build_mesh(self, s: int) -> None:
        link = self.topology.sip.cube_mesh.link
        w, h = self.mesh_w, self.mesh_h
        seen: set[tuple[int, int]] = set()
        for y in range(h):
            for x in range(w):
                here = y * w + x
                neighbours = []
                if x + 1 < w or (self.torus and w > 2):
                    neighbours.append(y * w + (x + 1) % w)
                if y + 1 < h or (self.torus and h > 2):
                    neighbours.append(((y + 1) % h) * w + x)
                for there in neighbours:
                    pair = (min(here, there), max(here, there))
                    if here == there or pair in seen:
                        continue
                    seen.add(pair)
                    self._add_link(
                        router_name(s, here),
                        router_name(s, there),
                        link.bandwidth,
                        link.latency,
                        "cube_link",
                        names.cube(s, here),
                        names.cube(s, there),
                    )

    def _build_interconnect(self) -> None:
        spec = self.topology.system.interconnect
        n = self.num_sips
        if n == 1:
            return
        bw, lat = spec.link.bandwidth, spec.link.latency

        def attach(s: int) -> str:
            return router_name(s, self.attach_cube)

        if spec.kind == "switch":
            for s in range(n):
                self._add_link(
                    attach(s),
                    names.SWITCH,
                    bw,
                    lat + spec.switch_latency,
                    "sip_link",
                    names.sip(s),
                    names.SWITCH,
                )
        elif spec.kind == "fully_connected":
            for a in range(n):
                for b in range(a + 1, n):
                    self._add_link(
                        attach(a), attach(b), bw, lat, "sip_link", names.sip(a), names.sip(b)
                    )
        else:
            pairs = {(min(s, (s + 1) % n), max(s, (s + 1) % n)) for s in range(n)}
            for a, b in sorted(pairs):
                self._add_link(
                    attach(a), attach(b), bw, lat, "sip_link", names.sip(a), names.sip(b)
                )

    # -- naming ---------------------------------------------------------------
    def pe_names(self) -> list[str]:
        return [
            pe_name(s, c, p)
            for s in range(self.num_sips)
            for c in range(self.cubes_per_sip)
            for p in range(self.pes_per_cube)
        ]

    def check_name(self, name: str) -> NodeName:
        """The parsed name of an endpoint of this machine; raises :class:`RouteError` if none."""
        checked = self._checked.get(name)
        if checked is None:
            checked = self._checked[name] = self._check_uncached(name)
        return checked

    def _check_uncached(self, name: str) -> NodeName:
        try:
            node = names.parse(name)
        except ValueError:
            node = None
        if node is not None and self._exists(node):
            return node
        raise RouteError(
            f"unknown endpoint {shown(repr(name), 100)}; valid names look like 'sip0.cube0.pe0', "
            f"'sip0.cube0.pe0.tcm', 'sip0.cube0.hbm0', 'sip0.cube0.sram', 'sip0.cube0.m_cpu', "
            f"'host' (this machine: {self.num_sips} SIPs x {self.cubes_per_sip} cubes x "
            f"{self.pes_per_cube} PEs, {self.hbm_slices} HBM slices per cube)"
        )

    def _exists(self, node: NodeName) -> bool:
        if node.kind == names.HOST:
            return True
        if node.kind == names.SWITCH:
            return self.interconnect == "switch"
        if node.kind in ("sip", "cube"):  # groups of components, not endpoints
            return False
        if not (0 <= node.sip < self.num_sips and 0 <= node.cube < self.cubes_per_sip):
            return False
        if node.kind in ("pe", "tcm"):
            return 0 <= node.pe < self.pes_per_cube
        if node.kind == "hbm":
            return 0 <= node.index < self.hbm_slices
        return True

    # -- routing --------------------------------------------------------------
    def route(self, src: str, dst: str) -> tuple[int, ...]:
        """Edge indices from ``src`` to ``dst`` (cached)."""
        key = (src, dst)
        cached = self._route_cache.get(key)
        if cached is not None:
            return cached
        nodes = self._route_nodes(src, dst)
        try:
            path = tuple(self._edge_by_ends[(a, b)] for a, b in zip(nodes, nodes[1:], strict=False))
        except KeyError as exc:  # pragma: no cover - a bug in the router, not the user
            raise RouteError(f"no link {exc.args[0]} on the route {src} -> {dst}") from None
        if self.down and any(i in self.down for i in path):
            path = self._detour(src, dst, path)
        self._route_cache[key] = path
        return path

    # -- faults -----------------------------------------------------------------
    def _apply_faults(self) -> None:
        """Slow links down and take them out of service, as ``faults`` says (ADR 0010)."""
        faults = self.topology.faults
        by_name = {edge.name: edge.index for edge in self.edges}
        for i, fault in enumerate(faults.links):
            index = by_name.get(fault.link)
            if index is None:
                raise TopologyError(
                    f"unknown link {shown(repr(fault.link), 100)}; links are named like "
                    "'link:sip0->sip1', 'link:sip0.cube0->sip0.cube1', "
                    "'link:sip0.cube0.pe0->sip0.cube0.noc', "
                    "'link:host->sip0' or 'port:sip0.cube0.hbm0' (see `kernbench topo show`)",
                    key_path=f"faults.links.{i}.link",
                )
            edge = self.edges[index]
            if fault.slowdown != 1.0:
                bandwidth = max(1, int(edge.bandwidth / fault.slowdown))
                self.edges[index] = dataclasses.replace(edge, bandwidth=bandwidth)
            if fault.down:
                self.down.add(index)
        for i, fault in enumerate(faults.pes):
            try:
                kind = self.check_name(fault.pe).kind
            except RouteError:
                kind = None
            if kind != "pe":
                raise TopologyError(
                    f"unknown PE {shown(repr(fault.pe), 100)}; PEs are named like 'sip0.cube0.pe0' "
                    f"({self.num_sips} SIPs x {self.cubes_per_sip} cubes x "
                    f"{self.pes_per_cube} PEs)",
                    key_path=f"faults.pes.{i}.pe",
                )

    def pe_slowdown(self, pe: str) -> float:
        """How many times slower a PE's engines are (1.0: healthy)."""
        # A dict, not a scan of the rules: a file may list a rule for every PE.
        return self._pe_slowdowns.get(pe, 1.0)

    def _detour(self, src: str, dst: str, blocked: tuple[int, ...]) -> tuple[int, ...]:
        """The fewest-hop path around links that are down (breadth first, by edge order).

        Only cube routers and the switch relay traffic; the host, a PE or a memory
        is never a stop on the way.
        """
        if self._adjacency is None:
            self._adjacency = {}
            for edge in self.edges:
                for a, b in ((edge.src, edge.dst), (edge.dst, edge.src)):
                    if self._edge_by_ends.get((a, b)) == edge.index:
                        self._adjacency.setdefault(a, []).append((b, edge.index))
        previous: dict[str, tuple[str, int] | None] = {src: None}
        frontier = [src]
        while frontier and dst not in previous:
            following = []
            for node in frontier:
                if node != src and node != names.SWITCH and self.check_name(node).kind != "noc":
                    continue
                for nxt, index in self._adjacency.get(node, ()):
                    if index in self.down or nxt in previous:
                        continue
                    previous[nxt] = (node, index)
                    following.append(nxt)
            frontier = following
        if dst not in previous:
            down = ", ".join(self.edges[i].name for i in blocked if i in self.down)
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
        node = self.check_name(name)
        kind, s, c = node.kind, node.sip, node.cube
        if kind in (names.HOST, names.SWITCH):
            return [kind], None
        router = router_name(s, c)
        if kind == "noc":
            return [router], (s, c)
        if kind == "tcm":
            return [name, pe_name(s, c, node.pe), router], (s, c)
        return [name, router], (s, c)

    def _route_nodes(self, src: str, dst: str) -> list[str]:
        if src == dst:
            self.check_name(src)
            return [src]
        a, b = self.check_name(src), self.check_name(dst)
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
            return entry + self._mesh_path(b[0], self.attach_cube, b[1])[1:]
        if b is None:
            exit_ = list(reversed(self._entry(dst, a[0])))
            return self._mesh_path(a[0], a[1], self.attach_cube) + exit_[1:]
        if a[0] == b[0]:
            return self._mesh_path(a[0], a[1], b[1])
        return (
            self._mesh_path(a[0], a[1], self.attach_cube)
            + self._sip_path(a[0], b[0])[1:-1]
            + self._mesh_path(b[0], self.attach_cube, b[1])
        )

    def _entry(self, outside: str, sip: int) -> list[str]:
        """Nodes from the host or switch to ``sip``'s attach router."""
        if outside == "host":
            return ["host", router_name(sip, self.attach_cube)]
        return ["switch", router_name(sip, self.attach_cube)]

    def _sip_path(self, a: int, b: int) -> list[str]:
        def attach(s: int) -> str:
            return router_name(s, self.attach_cube)

        if self.interconnect == "switch":
            return [attach(a), "switch", attach(b)]
        if self.interconnect == "fully_connected":
            return [attach(a), attach(b)]
        n = self.num_sips
        forward = (b - a) % n
        step = 1 if forward <= n - forward else -1
        path, s = [attach(a)], a
        while s != b:
            s = (s + step) % n
            path.append(attach(s))
        return path

    def _mesh_path(self, s: int, c1: int, c2: int) -> list[str]:
        w, h = self.mesh_w, self.mesh_h
        x, y = c1 % w, c1 // w
        x2, y2 = c2 % w, c2 // w
        path = [router_name(s, c1)]
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
                path.append(router_name(s, y * w + x))
        return path

    # -- metrics ----------------------------------------------------------------
    def diameter_hops(self) -> int:
        """Longest PE-to-PE route, in links (routes as the machine takes them).

        Every SIP's mesh is the same, and a route between SIPs runs from its
        cube to the attach cube, across the SIPs, then on to its cube; so the
        longest route is either inside one SIP or the farthest cube from the
        attach cube, the longest SIP-to-SIP path and the farthest cube again.
        That is O(cubes per SIP^2) work, not O((SIPs x cubes)^2).
        """
        cubes = range(self.cubes_per_sip)
        longest = max(
            (len(self._mesh_path(0, a, b)) - 1 for a in cubes for b in cubes if a < b),
            default=0,
        )
        if self.num_sips > 1:
            attach = self.attach_cube
            out = max(len(self._mesh_path(0, c, attach)) - 1 for c in cubes)
            back = max(len(self._mesh_path(0, attach, c)) - 1 for c in cubes)
            across = max(len(self._sip_path(0, s)) - 1 for s in range(1, self.num_sips))
            longest = max(longest, out + across + back)
        return longest + 2

    def bisection_bandwidth(self) -> dict[str, int]:
        """Bytes/s across the narrowest cut that halves the machine, each direction.

        ``sip_mesh``: the cut across one SIP's cube mesh (perpendicular to its
        longer side); ``system``: the cut that halves the SIPs (when there are
        more than one); ``machine``: the smaller of what applies.
        """
        mesh = self.topology.sip.cube_mesh
        w, h = mesh.w, mesh.h
        long_side, short_side = (w, h) if w >= h else (h, w)
        result: dict[str, int] = {}
        if long_side > 1:
            links = short_side * (2 if self.torus and long_side > 2 else 1)
            result["sip_mesh"] = links * mesh.link.bandwidth
        n = self.num_sips
        spec = self.topology.system.interconnect
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


def build_graph(topology: Topology) -> MachineGraph:
    return MachineGraph(topology)
