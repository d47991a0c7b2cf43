"""Configuration layer: topology YAML -> validated spec -> graph of named nodes and links."""

from kernbench.topology.bundled import bundled_names, bundled_path, resolve_topology_path
from kernbench.topology.graph import Edge, MachineGraph, build_graph
from kernbench.topology.loader import (
    apply_overrides,
    document_digest,
    load_topology,
    load_topology_document,
    load_topology_sources,
    override_texts,
    parse_override,
    topology_digest,
    validate_topology,
)
from kernbench.topology.schema import Topology

__all__ = [
    "Edge",
    "MachineGraph",
    "Topology",
    "apply_overrides",
    "build_graph",
    "bundled_names",
    "bundled_path",
    "resolve_topology_path",
    "document_digest",
    "load_topology",
    "load_topology_document",
    "load_topology_sources",
    "override_texts",
    "parse_override",
    "topology_digest",
    "validate_topology",
]
