"""The topology schema: every key, its type, unit, default and meaning.

The YAML a user writes is validated against these frozen models (unknown keys
are errors, units are parsed by :mod:`kernbench.units`).  Field names that
existing bench code relies on (``system.sips.count``, ``sip.cube_mesh.{w,h}``,
``cube.pe_layout``, ``cube.memory_map``, ``pe_tcm.attrs.size_mb``,
``pe_mmu.attrs.page_size``) keep their names; see ADR 0002.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from kernbench.errors import UnitError
from kernbench.units import (
    parse_bandwidth,
    parse_frequency,
    parse_size,
    parse_time,
)

__all__ = ["Topology", "KeyedValueError"]


class KeyedValueError(ValueError):
    """A cross-field check's failure, pointing at the key (relative path) at fault."""

    def __init__(self, subpath: str, message: str) -> None:
        super().__init__(message)
        self.subpath = subpath


def _checked(parse):
    def validate(value: Any) -> int:
        try:
            return parse(value)
        except UnitError as exc:
            # pydantic only attaches the key path to ValueError.
            raise ValueError(str(exc)) from None

    return BeforeValidator(validate)


def _decimal_unit_size(factor: int, unit: str):
    """A size written as a plain number in the key's own unit, or with a unit."""

    def validate(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"expected a number of {unit} or a size such as '16MiB'")
        if isinstance(value, int | float):
            if value <= 0:
                raise ValueError(f"must be positive (got {value!r})")
            nbytes = Decimal(str(value)) * factor
            if nbytes != nbytes.to_integral_value():
                raise ValueError(f"{value!r} {unit} is not a whole number of bytes")
            return int(nbytes)
        try:
            return parse_size(value)
        except UnitError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(validate)


Time = Annotated[int, _checked(parse_time), Field(ge=0)]
Size = Annotated[int, _checked(parse_size), Field(gt=0)]
Bandwidth = Annotated[int, _checked(parse_bandwidth)]
Frequency = Annotated[int, _checked(parse_frequency)]
Count = Annotated[int, Field(strict=True, gt=0)]
Index = Annotated[int, Field(strict=True, ge=0)]


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class LinkSpec(Spec):
    """One direction of a link; links are full duplex, each direction its own."""

    bandwidth: Bandwidth = Field(description="bytes per second in each direction, e.g. '50GB/s'")
    latency: Time = Field(description="time of flight per hop, e.g. '500ns'")


class InterSipLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field("100GB/s", description="bytes per second in each direction")
    latency: Time = Field("1us", description="time of flight per hop")


class HostLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field("64GB/s", description="bytes per second in each direction")
    latency: Time = Field("1us", description="time of flight")


class CubeLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field("256GB/s", description="bytes per second in each direction")
    latency: Time = Field("20ns", description="time of flight per hop")


class SipsSpec(Spec):
    count: Count = Field(description="number of SIPs (chips) in the system")


class InterconnectSpec(Spec):
    kind: Literal["ring", "switch", "fully_connected"] = Field(
        "ring", description="how SIPs are joined: a bidirectional ring, one switch, or all pairs"
    )
    link: InterSipLinkSpec = Field(
        InterSipLinkSpec(),
        description="each inter-SIP link (for a switch: each SIP-to-switch link)",
    )
    switch_latency: Time = Field("0ns", description="extra latency through the switch")
    attach_cube: Index = Field(0, description="cube whose router hosts the SIP's external ports")


class SystemSpec(Spec):
    sips: SipsSpec
    interconnect: InterconnectSpec = Field(InterconnectSpec(), description="inter-SIP network")
    host_link: HostLinkSpec = Field(
        HostLinkSpec(),
        description="host to each SIP (attached at the SIP's attach_cube)",
    )
    device_level: Literal["sip", "cube", "pe"] = Field(
        "sip", description="which level is one device (one rank) for the distributed API"
    )


class CubeMeshSpec(Spec):
    w: Count = Field(description="cubes per row of the SIP's mesh")
    h: Count = Field(description="rows of cubes in the SIP's mesh")
    torus: bool = Field(False, description="wrap-around links in both dimensions")
    link: CubeLinkSpec = Field(CubeLinkSpec(), description="each cube-to-cube link")


class SipSpec(Spec):
    cube_mesh: CubeMeshSpec


Corner = Literal["NW", "NE", "SW", "SE"]


class PeLayoutSpec(Spec):
    corners: list[Corner] = Field(
        ["NW", "NE", "SW", "SE"], min_length=1, description="corners of the cube that hold PEs"
    )
    pe_per_corner: Count = Field(2, description="PEs at each listed corner")

    @field_validator("corners")
    @classmethod
    def _unique_corners(cls, corners: list[str]) -> list[str]:
        if len(set(corners)) != len(corners):
            raise ValueError(f"corners must not repeat (got {corners})")
        return corners


class MemoryMapSpec(Spec):
    hbm_total_gb_per_cube: Annotated[int, _decimal_unit_size(10**9, "GB")] = Field(
        48, description="HBM per cube; a number is GB (10^9 bytes), or a size like '48GiB'"
    )
    hbm_slices_per_cube: Count = Field(8, description="independent HBM slices per cube")


class HbmSpec(Spec):
    slice_bandwidth: Bandwidth = Field("128GB/s", description="bandwidth of one HBM slice")
    latency: Time = Field("100ns", description="access latency of an HBM slice")


class SramSpec(Spec):
    size: Size = Field("32MiB", description="cube SRAM shared by the cube's PEs")
    bandwidth: Bandwidth = Field("1TB/s", description="cube SRAM port bandwidth")
    latency: Time = Field("10ns", description="cube SRAM access latency")


class NocSpec(Spec):
    bandwidth: Bandwidth = Field("512GB/s", description="each PE's and M_CPU's port to the router")
    latency: Time = Field("5ns", description="latency of a port to the cube router")


class MCpuSpec(Spec):
    command_latency: Time = Field("200ns", description="time the M_CPU takes per command")


class PeCoreAttrs(Spec):
    clock: Frequency = Field("1.5GHz", description="PE clock")
    matrix_flops_per_cycle: Count = Field(2048, description="matrix engine FLOP per cycle")
    vector_flops_per_cycle: Count = Field(256, description="vector engine FLOP per cycle")
    launch_overhead: Time = Field("100ns", description="fixed cost to start one kernel program")


class PeCoreSpec(Spec):
    attrs: PeCoreAttrs = PeCoreAttrs()


class TcmAttrs(Spec):
    size_mb: Annotated[int, _decimal_unit_size(10**6, "MB")] = Field(
        16, description="TCM per PE; a number is MB (10^6 bytes), or a size like '16MiB'"
    )
    bandwidth: Bandwidth = Field("2TB/s", description="TCM bandwidth")
    latency: Time = Field("2ns", description="TCM access latency")


class TcmSpec(Spec):
    attrs: TcmAttrs = TcmAttrs()


class MmuAttrs(Spec):
    page_size: Size = Field(4096, description="page size; a number is bytes, or e.g. '64KiB'")
    map_latency_per_page: Time = Field("1ns", description="time to install or remove one page")

    @field_validator("page_size")
    @classmethod
    def _power_of_two(cls, page_size: int) -> int:
        if page_size & (page_size - 1):
            raise ValueError(f"page_size must be a power of two, e.g. 4096 (got {page_size})")
        return page_size


class MmuSpec(Spec):
    attrs: MmuAttrs = MmuAttrs()


class IpcqAttrs(Spec):
    depth: Count = Field(8, description="slots per queue (credits)")
    slot_bytes: Size = Field("64KiB", description="bytes per slot")
    endpoint_overhead: Time = Field("100ns", description="fixed cost per message (alpha)")
    install_latency_per_entry: Time = Field(
        "20ns", description="time to install one neighbour-table entry"
    )


class IpcqSpec(Spec):
    attrs: IpcqAttrs = IpcqAttrs()


class PeComponents(Spec):
    pe_core: PeCoreSpec = PeCoreSpec()
    pe_tcm: TcmSpec = TcmSpec()
    pe_mmu: MmuSpec = MmuSpec()
    pe_ipcq: IpcqSpec = IpcqSpec()


class PeTemplateSpec(Spec):
    components: PeComponents = PeComponents()


class CubeSpec(Spec):
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


class FabricSpec(Spec):
    packet_bytes: Size = Field(
        "4KiB", description="packet size at which multi-hop routes are pipelined"
    )


class LinkFault(Spec):
    link: str = Field(description="a directed link or a memory port, e.g. 'link:sip0->sip1'")
    slowdown: float = Field(1.0, ge=1.0, description="the link's bandwidth is divided by this")
    down: bool = Field(False, description="the link carries nothing; routes avoid it")


class PeFault(Spec):
    pe: str = Field(description="a PE, e.g. 'sip0.cube0.pe0'")
    slowdown: float = Field(ge=1.0, description="the PE's engines take this many times longer")


class FaultsSpec(Spec):
    links: list[LinkFault] = Field(default_factory=list, description="slow or broken links")
    pes: list[PeFault] = Field(default_factory=list, description="straggler PEs")


class Topology(Spec):
    """A whole machine.  Build one with :func:`kernbench.topology.load_topology`."""

    name: str = Field("unnamed", description="short name used in reports")
    description: str = Field("", description="free text")
    system: SystemSpec
    sip: SipSpec
    cube: CubeSpec = CubeSpec()
    fabric: FabricSpec = FabricSpec()
    faults: FaultsSpec = Field(FaultsSpec(), description="injected faults and stragglers")

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
