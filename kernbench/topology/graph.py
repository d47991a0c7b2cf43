"""Expand a validated :class:`Topology` into named nodes, links and routes.

Nodes are the places bytes come from or go to (PEs, TCMs, HBM slices, cube
SRAM, M_CPUs, cube routers, the host, a switch; on a cluster, node, leaf and
spine switches).  Links are directed (each
direction of a full-duplex link is its own :class:`Edge`); a memory's port
(HBM slice, SRAM, TCM) is one edge that reads and writes share.  Routes are
taken by :mod:`kernbench.topology.routing` and the diameter and bisection by
:mod:`kernbench.topology.metrics`.  See ADR 0004.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kernbench.errors import RouteError, TopologyError, shown
from kernbench.topology import names
from kernbench.topology.names import NodeName
from kernbench.topology.routing import Router
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
        self.edge_by_ends: dict[tuple[str, str], int] = {}
        self._checked: dict[str, NodeName] = {}
        self.down: set[int] = set()
        self._pe_slowdowns = {fault.pe: fault.slowdown for fault in topology.faults.pes}
        self._build()
        self._apply_faults()
        self.router = Router(self)

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
        self._add_directed(a, b, bandwidth, latency_ps, link_class, a_label, b_label)
        self._add_directed(b, a, bandwidth, latency_ps, link_class, b_label, a_label)

    def _add_directed(
        self,
        src: str,
        dst: str,
        bandwidth: int,
        latency_ps: int,
        link_class: str,
        src_label: str | None = None,
        dst_label: str | None = None,
    ) -> None:
        index = len(self.edges)
        name = names.link(src_label or src, dst_label or dst)
        self.edges.append(Edge(index, name, src, dst, bandwidth, latency_ps, link_class))
        self.edge_by_ends[(src, dst)] = index

    def _add_port(
        self, outside: str, memory: str, bandwidth: int, latency_ps: int, link_class: str
    ) -> None:
        """A memory's port: one edge that reads and writes share (a memory is half duplex)."""
        index = len(self.edges)
        self.edges.append(
            Edge(index, names.port(memory), outside, memory, bandwidth, latency_ps, link_class)
        )
        self.edge_by_ends[(outside, memory)] = index
        self.edge_by_ends[(memory, outside)] = index

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

        if spec.kind == "clos":
            self._build_clos()
        elif spec.kind == "switch":
            # The switch's own latency once per crossing: on the way out of it (as clos).
            for s in range(n):
                self._add_directed(attach(s), names.SWITCH, bw, lat, "sip_link", names.sip(s))
                self._add_directed(
                    names.SWITCH,
                    attach(s),
                    bw,
                    lat + spec.switch_latency,
                    "sip_link",
                    names.SWITCH,
                    names.sip(s),
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

    def _build_clos(self) -> None:
        """Chip to node switch and chip to leaf links, then every leaf to every spine.

        A switch's latency is on the links leaving it, so a route pays it once
        per switch crossed (see :mod:`kernbench.topology.clos_spec`).
        """
        clos = self.topology.system.interconnect.clos
        node, leaf, spine = clos.node, clos.leaf, clos.spine
        for s in range(self.num_sips):
            attach, label = router_name(s, self.attach_cube), names.sip(s)
            n = s // node.sips
            for switch, link, switch_latency, link_class in (
                (names.node_switch(n), node.link, node.switch_latency, "node_link"),
                (names.leaf(n // leaf.nodes), leaf.link, leaf.switch_latency, "leaf_link"),
            ):
                bw, lat = link.bandwidth, link.latency
                self._add_directed(attach, switch, bw, lat, link_class, label)
                self._add_directed(
                    switch, attach, bw, lat + switch_latency, link_class, None, label
                )
        leaves = self.num_sips // (node.sips * leaf.nodes)
        if leaves < 2:
            return
        bw, lat = spine.link.bandwidth, spine.link.latency
        for k in range(leaves):
            for j in range(spine.count):
                up, down = names.leaf(k), names.spine(j)
                self._add_directed(up, down, bw, lat + leaf.switch_latency, "spine_link")
                self._add_directed(down, up, bw, lat + spine.switch_latency, "spine_link")

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
        if node.kind in names.CLOS_SWITCH_KINDS:
            return self._clos_switch_exists(node)
        if node.kind in ("sip", "cube"):  # groups of components, not endpoints
            return False
        if not (0 <= node.sip < self.num_sips and 0 <= node.cube < self.cubes_per_sip):
            return False
        if node.kind in ("pe", "tcm"):
            return 0 <= node.pe < self.pes_per_cube
        if node.kind == "hbm":
            return 0 <= node.index < self.hbm_slices
        return True

    def _clos_switch_exists(self, node: NodeName) -> bool:
        clos = self.topology.system.interconnect.clos
        if clos is None or self.num_sips < 2:
            return False
        nodes = self.num_sips // clos.node.sips
        leaves = nodes // clos.leaf.nodes
        count = {"node_switch": nodes, "leaf": leaves, "spine": clos.spine.count}[node.kind]
        if node.kind == "spine" and leaves < 2:
            count = 0
        return 0 <= node.index < count

    # -- routing --------------------------------------------------------------
    def route(self, src: str, dst: str) -> tuple[int, ...]:
        """Edge indices from ``src`` to ``dst`` (cached; see :mod:`kernbench.topology.routing`)."""
        return self.router.route(src, dst)

    # -- faults -----------------------------------------------------------------
    def _apply_faults(self) -> None:
        """Slow links down and take them out of service, as ``faults`` says (ADR 0010)."""
        faults = self.topology.faults
        # Only a file that names links needs the index by name (a dict of every link).
        by_name = {edge.name: edge.index for edge in self.edges} if faults.links else {}
        for i, fault in enumerate(faults.links):
            index = by_name.get(fault.link)
            if index is None:
                raise TopologyError(
                    f"unknown link {shown(repr(fault.link), 100)}; links are named like "
                    "'link:sip0->sip1', 'link:sip0.cube0->sip0.cube1', "
                    "'link:sip0.cube0.pe0->sip0.cube0.noc', "
                    "'link:host->sip0', 'link:leaf0->spine1' or 'port:sip0.cube0.hbm0' "
                    "(see `kernbench topo show`)",
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


def build_graph(topology: Topology) -> MachineGraph:
    return MachineGraph(topology)
