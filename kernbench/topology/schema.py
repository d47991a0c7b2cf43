"""The topology schema: every key, its type, unit, default and meaning.

The YAML a user writes is validated against these frozen models (unknown keys
are errors, and so are keys written where the machine's kind or backend would
ignore them; units are parsed by :mod:`kernbench.units`).  Field names that
existing bench code relies on (``system.sips.count``, ``sip.cube_mesh.{w,h}``,
``cube.pe_layout``, ``cube.memory_map``, ``pe_tcm.attrs.size_mb``,
``pe_mmu.attrs.page_size``) keep their names; see ADR 0002.  Sizes are
checked against :mod:`kernbench.topology.limits` here, from the counts alone,
before any graph is built.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictBool,
    field_validator,
    model_serializer,
    model_validator,
)

from kernbench.errors import UnitError, shown
from kernbench.topology.clos_spec import ClosSpec
from kernbench.topology.limits import (
    MAX_CUBES_PER_SIP,
    MAX_DIRECT_SIP_LINKS,
    MAX_HBM_SLICES,
    MAX_HBM_SLICES_PER_CUBE,
    MAX_LEAF_SPINE_LINKS,
    MAX_MEMORY_BYTES,
    MAX_PAGE_SIZE,
    MAX_PES,
    MAX_PES_PER_CUBE,
    MAX_SIPS,
    MAX_SLOWDOWN,
)
from kernbench.topology.quantities import Bandwidth, Count, LinkSpec, Time, checked
from kernbench.units import (
    MAX_QUANTITY,
    format_size,
    parse_frequency,
    parse_size,
    scale_exact,
)
from kernbench.validation import KeyedValueError, StrictModel

__all__ = ["Topology", "KeyedValueError"]


def _decimal_unit_size(factor: int, unit: str):
    """A size written as a plain number in the key's own unit, or with a unit."""

    def validate(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"expected a number of {unit} or a size such as '16MiB'")
        try:
            if isinstance(value, int | float):
                if not value > 0:  # also refuses nan
                    raise UnitError(f"must be positive (got {value!r})")
                return scale_exact(value, factor, what=f"{value!r} {unit}", base="bytes")
            return parse_size(value)
        except UnitError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(validate)


Size = Annotated[int, checked(parse_size), Field(gt=0)]
Frequency = Annotated[int, checked(parse_frequency)]
Index = Annotated[int, Field(strict=True, ge=0, le=MAX_QUANTITY)]
Slowdown = Annotated[float, Field(ge=1.0, le=MAX_SLOWDOWN, allow_inf_nan=False)]


def _at_most(limit: int, what: str, reason: str):
    """A count's limit (:mod:`kernbench.topology.limits`), saying why it is there."""

    def check(value: int) -> int:
        if value > limit:
            raise ValueError(f"at most {limit} {what} ({reason}); got {value}")
        return value

    return AfterValidator(check)


_ADDRESS = "the physical address's {} field holds {}"


def _memory_fits(value: int) -> int:
    if value > MAX_MEMORY_BYTES:
        raise ValueError(
            f"{format_size(value)} ({value} bytes) is larger than one memory can be: at most "
            f"{format_size(MAX_MEMORY_BYTES)} (the physical address's offset field)"
        )
    return value


MemorySize = Annotated[int, checked(parse_size), Field(gt=0), AfterValidator(_memory_fits)]
SipCount = Annotated[
    int, Field(strict=True, gt=0), _at_most(MAX_SIPS, "SIPs", _ADDRESS.format("sip", MAX_SIPS))
]
MeshSide = Annotated[
    int,
    Field(strict=True, gt=0),
    _at_most(MAX_CUBES_PER_SIP, "cubes", _ADDRESS.format("cube", MAX_CUBES_PER_SIP)),
]


class InterSipLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field("100GB/s", description="bytes per second in each direction")
    latency: Time = Field("1us", description="time of flight per hop")


class HostLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field("64GB/s", description="bytes per second in each direction")
    latency: Time = Field("1us", description="time of flight")


class CubeLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field("256GB/s", description="bytes per second in each direction")
    latency: Time = Field("20ns", description="time of flight per hop")


class SipsSpec(StrictModel):
    count: SipCount = Field(description="number of SIPs (chips) in the system")


# Interconnect keys that only some kinds read (kernbench.topology.graph builds the
# links); written for another kind, such a key would be silently ignored.
_KIND_ONLY_KEYS: dict[str, tuple[str, ...]] = {
    "link": ("ring", "switch", "fully_connected"),
    "switch_latency": ("switch",),
    "clos": ("clos",),
}
_CLOS_INSTEAD = {
    "link": "whose links are clos.node.link, clos.leaf.link and clos.spine.link",
    "switch_latency": "whose switch latencies are clos.node.switch_latency, "
    "clos.leaf.switch_latency and clos.spine.switch_latency",
}


def _not_for_kind(key: str, kinds: tuple[str, ...], kind: str) -> str:
    """Why an interconnect key written for another kind is refused, and what to do."""
    named = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"
    instead = f", {_CLOS_INSTEAD[key]}" if kind == "clos" and key in _CLOS_INSTEAD else ""
    fix = f"set kind: {named}" if len(kinds) == 1 else "set one of those kinds"
    return (
        f"applies only to kind: {named} (this interconnect is kind: {kind}{instead}); "
        f"remove it or {fix}"
    )


class InterconnectSpec(StrictModel):
    kind: Literal["ring", "switch", "fully_connected", "clos"] = Field(
        "ring",
        description="how SIPs are joined: a bidirectional ring, one switch, all pairs, or a "
        "cluster of nodes, leaf and spine switches (the 'clos' section)",
    )
    link: InterSipLinkSpec = Field(
        InterSipLinkSpec(),
        description="each inter-SIP link (for a switch: each SIP-to-switch link); not for "
        "clos, whose links are in its section",
    )
    switch_latency: Time = Field(
        "0ns",
        description="kind 'switch' only: the switch's own latency, paid once per crossing "
        "(on the link out of it)",
    )
    attach_cube: Index = Field(0, description="cube whose router hosts the SIP's external ports")
    clos: ClosSpec | None = Field(
        None,
        description="kind 'clos' only: nodes, leaf and spine switches (defaults: a DGX "
        "SuperPOD H100; see kernbench.topology.clos_spec)",
    )

    @model_validator(mode="after")
    def _keys_of_this_kind(self) -> InterconnectSpec:
        for key, kinds in _KIND_ONLY_KEYS.items():
            if key in self.model_fields_set and self.kind not in kinds:
                raise KeyedValueError(key, _not_for_kind(key, kinds, self.kind))
        if self.kind == "clos" and self.clos is None:
            # Filled here, not as a field default, so other machines' dumps (and digests)
            # do not change.
            object.__setattr__(self, "clos", ClosSpec())
        return self

    @model_serializer(mode="wrap")
    def _without_absent_clos(self, handler) -> dict[str, Any]:
        dumped = handler(self)
        if self.clos is None:
            dumped.pop("clos", None)
        return dumped


class SystemSpec(StrictModel):
    sips: SipsSpec
    interconnect: InterconnectSpec = Field(InterconnectSpec(), description="inter-SIP network")
    host_link: HostLinkSpec = Field(
        HostLinkSpec(),
        description="host to each SIP (attached at the SIP's attach_cube)",
    )
    device_level: Literal["sip", "cube", "pe"] = Field(
        "sip", description="which level is one device (one rank) for the distributed API"
    )


class CubeMeshSpec(StrictModel):
    w: MeshSide = Field(description="cubes per row of the SIP's mesh")
    h: MeshSide = Field(description="rows of cubes in the SIP's mesh")
    torus: StrictBool = Field(False, description="wrap-around links in both dimensions")
    link: CubeLinkSpec = Field(CubeLinkSpec(), description="each cube-to-cube link")

    @model_validator(mode="after")
    def _fits_address(self) -> CubeMeshSpec:
        cubes = self.w * self.h
        if cubes > MAX_CUBES_PER_SIP:
            raise ValueError(
                f"w x h = {self.w} x {self.h} = {cubes} cubes per SIP; at most "
                f"{MAX_CUBES_PER_SIP} ({_ADDRESS.format('cube', MAX_CUBES_PER_SIP)})"
            )
        return self


class SipSpec(StrictModel):
    cube_mesh: CubeMeshSpec


Corner = Literal["NW", "NE", "SW", "SE"]


class PeLayoutSpec(StrictModel):
    corners: list[Corner] = Field(
        ["NW", "NE", "SW", "SE"],
        min_length=1,
        max_length=4,
        description="corners of the cube that hold PEs",
    )
    pe_per_corner: Annotated[
        int,
        Field(strict=True, gt=0),
        _at_most(MAX_PES_PER_CUBE, "PEs", _ADDRESS.format("pe", MAX_PES_PER_CUBE)),
    ] = Field(2, description="PEs at each listed corner")

    @field_validator("corners")
    @classmethod
    def _unique_corners(cls, corners: list[str]) -> list[str]:
        if len(set(corners)) != len(corners):
            raise ValueError(f"corners must not repeat (got {corners})")
        return corners

    @model_validator(mode="after")
    def _fits_address(self) -> PeLayoutSpec:
        pes = len(self.corners) * self.pe_per_corner
        if pes > MAX_PES_PER_CUBE:
            raise KeyedValueError(
                "pe_per_corner",
                f"{len(self.corners)} corners x {self.pe_per_corner} = {pes} PEs per cube; at "
                f"most {MAX_PES_PER_CUBE} ({_ADDRESS.format('pe', MAX_PES_PER_CUBE)})",
            )
        return self


class MemoryMapSpec(StrictModel):
    hbm_total_gb_per_cube: Annotated[
        int, _decimal_unit_size(10**9, "GB"), AfterValidator(_memory_fits)
    ] = Field(48, description="HBM per cube; a number is GB (10^9 bytes), or a size like '48GiB'")
    hbm_slices_per_cube: Annotated[
        int,
        Field(strict=True, gt=0),
        _at_most(
            MAX_HBM_SLICES_PER_CUBE,
            "HBM slices per cube",
            "each slice is a node and a memory port of the machine's graph",
        ),
    ] = Field(8, description="independent HBM slices per cube")


class HbmSpec(StrictModel):
    slice_bandwidth: Bandwidth = Field("128GB/s", description="bandwidth of one HBM slice")
    latency: Time = Field("100ns", description="access latency of an HBM slice")


class SramSpec(StrictModel):
    size: MemorySize = Field("32MiB", description="cube SRAM shared by the cube's PEs")
    bandwidth: Bandwidth = Field("1TB/s", description="cube SRAM port bandwidth")
    latency: Time = Field("10ns", description="cube SRAM access latency")


class NocSpec(StrictModel):
    bandwidth: Bandwidth = Field("512GB/s", description="each PE's and M_CPU's port to the router")
    latency: Time = Field("5ns", description="latency of a port to the cube router")


class MCpuSpec(StrictModel):
    command_latency: Time = Field("200ns", description="time the M_CPU takes per command")


class PeCoreAttrs(StrictModel):
    clock: Frequency = Field("1.5GHz", description="PE clock")
    matrix_flops_per_cycle: Count = Field(2048, description="matrix engine FLOP per cycle")
    vector_flops_per_cycle: Count = Field(256, description="vector engine FLOP per cycle")
    launch_overhead: Time = Field("100ns", description="fixed cost to start one kernel program")


class PeCoreSpec(StrictModel):
    attrs: PeCoreAttrs = PeCoreAttrs()


class TcmAttrs(StrictModel):
    size_mb: Annotated[int, _decimal_unit_size(10**6, "MB"), AfterValidator(_memory_fits)] = Field(
        16, description="TCM per PE; a number is MB (10^6 bytes), or a size like '16MiB'"
    )
    bandwidth: Bandwidth = Field("2TB/s", description="TCM bandwidth")
    latency: Time = Field("2ns", description="TCM access latency")


class TcmSpec(StrictModel):
    attrs: TcmAttrs = TcmAttrs()


class MmuAttrs(StrictModel):
    page_size: Size = Field(
        4096, description="page size, a power of two up to 4GiB; a number is bytes, or e.g. '64KiB'"
    )
    map_latency_per_page: Time = Field("1ns", description="time to install or remove one page")

    @field_validator("page_size")
    @classmethod
    def _power_of_two(cls, page_size: int) -> int:
        if page_size & (page_size - 1):
            raise ValueError(f"page_size must be a power of two, e.g. 4096 (got {page_size})")
        if page_size > MAX_PAGE_SIZE:
            raise ValueError(
                f"page_size must be at most {format_size(MAX_PAGE_SIZE)}, where the virtual "
                f"address space starts (got {format_size(page_size)})"
            )
        return page_size


class MmuSpec(StrictModel):
    attrs: MmuAttrs = MmuAttrs()


class IpcqAttrs(StrictModel):
    depth: Count = Field(8, description="slots per queue (credits)")
    slot_bytes: Size = Field(
        "64KiB",
        description="bytes per slot; not in the timing yet: a message moves as one transfer "
        "whatever its size (ADR 0008)",
    )
    endpoint_overhead: Time = Field("100ns", description="fixed cost per message (alpha)")
    install_latency_per_entry: Time = Field(
        "20ns", description="time to install one neighbour-table entry"
    )


class IpcqSpec(StrictModel):
    attrs: IpcqAttrs = IpcqAttrs()


class PeComponents(StrictModel):
    pe_core: PeCoreSpec = PeCoreSpec()
    pe_tcm: TcmSpec = TcmSpec()
    pe_mmu: MmuSpec = MmuSpec()
    pe_ipcq: IpcqSpec = IpcqSpec()


class PeTemplateSpec(StrictModel):
    components: PeComponents = PeComponents()


class CubeSpec(StrictModel):
    pe_layout: PeLayoutSpec = PeLayoutSpec()
    memory_map: MemoryMapSpec = MemoryMapSpec()
    hbm: HbmSpec = HbmSpec()
    sram: SramSpec = SramSpec()
    noc: NocSpec = NocSpec()
    m_cpu: MCpuSpec = MCpuSpec()
    pe_template: PeTemplateSpec = PeTemplateSpec()

    @model_validator(mode="after")
    def _slices_divide(self) -> CubeSpec:
        hbm = self.memory_map.hbm_total_gb_per_cube
        slices = self.memory_map.hbm_slices_per_cube
        if hbm % slices:
            raise KeyedValueError(
                "memory_map.hbm_slices_per_cube",
                f"hbm_total_gb_per_cube ({hbm} bytes) must divide into "
                f"hbm_slices_per_cube ({slices}) equal slices",
            )
        return self

    @property
    def pes_per_cube(self) -> int:
        return len(self.pe_layout.corners) * self.pe_layout.pe_per_corner


class FabricSpec(StrictModel):
    packet_bytes: Size = Field(
        "4KiB", description="packet size at which multi-hop routes are pipelined"
    )


class LinkFault(StrictModel):
    link: str = Field(description="a directed link or a memory port, e.g. 'link:sip0->sip1'")
    slowdown: Slowdown = Field(1.0, description="the link's bandwidth is divided by this")
    down: StrictBool = Field(False, description="the link carries nothing; routes avoid it")

    @model_validator(mode="after")
    def _slowdown_of_a_link_in_service(self) -> LinkFault:
        if self.down and "slowdown" in self.model_fields_set:
            raise KeyedValueError(
                "slowdown",
                "applies only to a link in service (this link is down: true and carries "
                "nothing); remove it or set down: false",
            )
        return self


class PeFault(StrictModel):
    pe: str = Field(description="a PE, e.g. 'sip0.cube0.pe0'")
    slowdown: Slowdown = Field(description="the PE's engines take this many times longer")


class FaultsSpec(StrictModel):
    links: list[LinkFault] = Field(default_factory=list, description="slow or broken links")
    pes: list[PeFault] = Field(default_factory=list, description="straggler PEs")

    @model_validator(mode="after")
    def _each_target_once(self) -> FaultsSpec:
        # A rule listed twice would be applied twice (a link slowed down twice);
        # one rule per target says what is meant.
        for kind, rules, key in (("link", self.links, "link"), ("PE", self.pes, "pe")):
            first: dict[str, int] = {}
            for index, rule in enumerate(rules):
                target = getattr(rule, key)
                if target in first:
                    raise KeyedValueError(
                        f"{kind.lower()}s.{index}.{key}",
                        f"{kind} {shown(repr(target), 100)} is already listed at "
                        f"faults.{kind.lower()}s.{first[target]}; list each {kind} once",
                    )
                first[target] = index
        return self


class SimulationSpec(StrictModel):
    backend: Literal["detailed", "fast"] = Field(
        "detailed",
        description="detailed: every message on the SimPy fabric, exact to the picosecond; "
        "fast: collectives evaluated step-wide for 1k-100k ranks (ADR 0015)",
    )
    drift: Literal["exact", "approximate"] = Field(
        "exact",
        description="backend 'fast' only: a collective whose ranks drift apart (flows that "
        "share a link start over a message time apart) runs message by message (exact), or is "
        "priced step-wide anyway (approximate: much faster at scale; measured from -12% to +1% "
        "off, ADR 0015)",
    )

    @model_validator(mode="after")
    def _drift_for_fast(self) -> SimulationSpec:
        if "drift" in self.model_fields_set and self.backend != "fast":
            raise KeyedValueError(
                "drift",
                f"applies only to backend: fast (this machine's backend is {self.backend}, "
                "which runs every message exactly); remove it or set backend: fast",
            )
        return self


class Topology(StrictModel):
    """A whole machine.  Build one with :func:`kernbench.topology.load_topology`."""

    name: str = Field("unnamed", description="short name used in reports")
    description: str = Field("", description="free text")
    system: SystemSpec
    sip: SipSpec
    cube: CubeSpec = CubeSpec()
    fabric: FabricSpec = FabricSpec()
    faults: FaultsSpec = Field(FaultsSpec(), description="injected faults and stragglers")
    simulation: SimulationSpec = Field(
        SimulationSpec(), description="how the machine is simulated (the backend)"
    )

    @model_validator(mode="after")
    def _fits_limits(self) -> Topology:
        if self.num_pes > MAX_PES:
            raise KeyedValueError(
                "system.sips.count",
                f"{self.num_sips} SIPs x {self.cubes_per_sip} cubes x {self.pes_per_cube} PEs = "
                f"{self.num_pes} PEs; at most {MAX_PES} PEs in a machine (its graph is built "
                "whole; see kernbench.topology.limits)",
            )
        slices = self.num_cubes * self.cube.memory_map.hbm_slices_per_cube
        if slices > MAX_HBM_SLICES:
            raise KeyedValueError(
                "cube.memory_map.hbm_slices_per_cube",
                f"{self.num_cubes} cubes x {self.cube.memory_map.hbm_slices_per_cube} HBM "
                f"slices = {slices} memories; at most {MAX_HBM_SLICES} in a machine (each is a "
                "port of its graph, built whole; see kernbench.topology.limits): use fewer "
                "slices per cube",
            )
        return self

    @model_validator(mode="after")
    def _direct_links_fit(self) -> Topology:
        sips = self.num_sips
        if self.system.interconnect.kind == "fully_connected":
            pairs = sips * (sips - 1) // 2
            if pairs > MAX_DIRECT_SIP_LINKS:
                raise KeyedValueError(
                    "system.sips.count",
                    f"{sips} fully connected SIPs need {pairs} SIP-to-SIP links; at most "
                    f"{MAX_DIRECT_SIP_LINKS} (1448 SIPs; each is two links of the machine's "
                    "graph; see kernbench.topology.limits): use kind switch or clos for more",
                )
        return self

    @model_validator(mode="after")
    def _clos_fits(self) -> Topology:
        clos = self.system.interconnect.clos
        if clos is None:
            return self
        key = "system.interconnect.clos"
        sips, per_node = self.num_sips, clos.node.sips
        if sips % per_node:
            raise KeyedValueError(
                f"{key}.node.sips",
                f"system.sips.count ({sips}) must be a whole number of nodes of {per_node} SIPs",
            )
        nodes, per_leaf = sips // per_node, clos.leaf.nodes
        if nodes % per_leaf:
            raise KeyedValueError(
                f"{key}.leaf.nodes",
                f"the {nodes} nodes ({sips} SIPs / {per_node}) must fill whole leaves of "
                f"{per_leaf} nodes",
            )
        leaves = nodes // per_leaf
        if leaves > 1 and leaves * clos.spine.count > MAX_LEAF_SPINE_LINKS:
            raise KeyedValueError(
                f"{key}.spine.count",
                f"{leaves} leaves x {clos.spine.count} spines = {leaves * clos.spine.count} "
                f"leaf-spine links; at most {MAX_LEAF_SPINE_LINKS} (each is two links of the "
                "machine's graph; see kernbench.topology.limits)",
            )
        return self

    @model_validator(mode="after")
    def _attach_cube_exists(self) -> Topology:
        cubes = self.sip.cube_mesh.w * self.sip.cube_mesh.h
        attach = self.system.interconnect.attach_cube
        if attach >= cubes:
            raise KeyedValueError(
                "system.interconnect.attach_cube",
                f"attach_cube is {attach} but a SIP has {cubes} cubes (valid: 0..{cubes - 1})",
            )
        return self

    @property
    def num_sips(self) -> int:
        return self.system.sips.count

    @property
    def cubes_per_sip(self) -> int:
        return self.sip.cube_mesh.w * self.sip.cube_mesh.h

    @property
    def pes_per_cube(self) -> int:
        return self.cube.pes_per_cube

    @property
    def num_cubes(self) -> int:
        return self.num_sips * self.cubes_per_sip

    @property
    def num_pes(self) -> int:
        return self.num_cubes * self.pes_per_cube
