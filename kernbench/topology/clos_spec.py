"""The keys of a multi-level cluster interconnect (``system.interconnect.kind: clos``).

Chips (SIPs) are grouped into *nodes* whose chips share a fast intra-node
fabric (one switch per node, as NVLink and NVSwitch join the 8 GPUs of a DGX or
HGX node).  Every chip also has a network port (its NIC) to a *leaf* switch; a
leaf serves ``leaf.nodes`` whole nodes.  With more than one leaf, every leaf has
one link to every *spine* switch: a two-level leaf/spine Clos (fat tree).

The defaults follow the NVIDIA DGX SuperPOD with DGX H100 systems (reference
architecture RA-11333-001, 4 scalable units): 8 H100 GPUs per node, NVLink 4 at
900 GB/s per GPU in both directions together (450 GB/s each way), one NDR
InfiniBand port of 400 Gb/s (50 GB/s each way) per GPU, and 32 leaf and 16
spine switches (Quantum-2 QM9700, 64 ports of 400 Gb/s) for 128 nodes: each
leaf has 32 GPU ports down and 32 ports up, so a leaf serves 4 nodes here and
its 32 uplinks to 16 spines make 2 links (100 GB/s) per leaf-spine pair, a
non-blocking 1:1 fabric.  The real fabric is rail-optimised (GPU *i* of every
node of a scalable unit goes to leaf *i*); this model attaches whole nodes to a
leaf instead, keeping the port counts and bandwidths.  Latencies are not
published as single figures; the defaults are assumptions inside the public
ranges: 300 ns through an InfiniBand switch (vendors quote 130 to 400 ns
port to port), 500 ns for a NIC and its cable, 100 ns for 20 m of fibre between
leaf and spine, 100 ns per NVLink hop and through the NVSwitch.

A switch's latency is charged on the links *leaving* it, so a route pays it
once per switch it crosses.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from kernbench.topology.quantities import Bandwidth, LinkSpec, Time
from kernbench.validation import StrictModel

__all__ = ["ClosSpec", "NodeFabricSpec", "LeafSpec", "SpineSpec"]

_SwitchCount = Annotated[int, Field(strict=True, gt=0, le=2**16)]


class NodeLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field(
        "450GB/s", description="each chip to its node switch, each direction (NVLink 4: 450GB/s)"
    )
    latency: Time = Field("100ns", description="time of flight of a chip-to-node-switch hop")


class LeafLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field(
        "50GB/s", description="each chip's NIC to its leaf, each direction (NDR 400Gb/s: 50GB/s)"
    )
    latency: Time = Field("500ns", description="time of flight through the NIC and its cable")


class SpineLinkSpec(LinkSpec):
    bandwidth: Bandwidth = Field(
        "100GB/s",
        description="each leaf-to-spine link, each direction: all the parallel cables between "
        "one leaf and one spine together (2 x NDR 400Gb/s: 100GB/s)",
    )
    latency: Time = Field("100ns", description="time of flight of a leaf-spine cable")


class NodeFabricSpec(StrictModel):
    """The intra-node fabric: every chip of a node linked to the node's switch."""

    sips: _SwitchCount = Field(8, description="chips (SIPs) per node (a DGX H100 has 8 GPUs)")
    link: NodeLinkSpec = Field(NodeLinkSpec(), description="each chip-to-node-switch link")
    switch_latency: Time = Field("100ns", description="latency through the node switch")


class LeafSpec(StrictModel):
    """Leaf switches: every chip's NIC linked to the leaf of its node."""

    nodes: _SwitchCount = Field(
        4, description="whole nodes per leaf switch (4 x 8 = 32 GPU ports of a 64-port leaf)"
    )
    link: LeafLinkSpec = Field(LeafLinkSpec(), description="each chip-to-leaf link")
    switch_latency: Time = Field("300ns", description="latency through a leaf switch")


class SpineSpec(StrictModel):
    """Spine switches: every leaf linked to every spine (built only with 2 leaves or more)."""

    count: _SwitchCount = Field(16, description="spine switches (16 in a 4-SU DGX SuperPOD)")
    link: SpineLinkSpec = Field(SpineLinkSpec(), description="each leaf-to-spine link")
    switch_latency: Time = Field("300ns", description="latency through a spine switch")


class ClosSpec(StrictModel):
    """Chips -> nodes -> leaf switches -> spine switches; see the module docstring."""

    node: NodeFabricSpec = Field(NodeFabricSpec(), description="the intra-node fabric")
    leaf: LeafSpec = Field(LeafSpec(), description="the leaf (first) level of switches")
    spine: SpineSpec = Field(SpineSpec(), description="the spine (second) level of switches")
