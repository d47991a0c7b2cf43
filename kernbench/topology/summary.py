"""Plain-data summaries of machines, for ``kernbench topo show``/``topo list`` and reports."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kernbench.topology.bundled import bundled_names, bundled_path
from kernbench.topology.graph import MachineGraph
from kernbench.topology.loader import load_topology
from kernbench.topology.metrics import bisection_bandwidth, clos_shape, diameter_hops
from kernbench.topology.schema import Topology
from kernbench.units import format_bandwidth, format_size, format_time

__all__ = ["summarize", "format_summary", "machine_counts", "bundled_machines", "format_machines"]


def machine_counts(topology: Topology) -> dict[str, Any]:
    """SIPs, cubes and PEs, and how many devices (ranks) the device level makes."""
    device_level = topology.system.device_level
    devices = {"sip": topology.num_sips, "cube": topology.num_cubes, "pe": topology.num_pes}
    return {
        "sips": topology.num_sips,
        "cube_mesh": [topology.sip.cube_mesh.w, topology.sip.cube_mesh.h],
        "cubes_per_sip": topology.cubes_per_sip,
        "cubes": topology.num_cubes,
        "pes_per_cube": topology.pes_per_cube,
        "pes": topology.num_pes,
        "device_level": device_level,
        "devices": devices[device_level],
    }


def summarize(topology: Topology, graph: MachineGraph) -> dict[str, Any]:
    """Counts, memory per level, compute, link classes and network metrics (SI units)."""
    cube = topology.cube
    comps = cube.pe_template.components
    core = comps.pe_core.attrs
    hbm_per_cube = cube.memory_map.hbm_total_gb_per_cube
    slices = cube.memory_map.hbm_slices_per_cube
    link_classes: dict[str, dict[str, Any]] = {}
    counts = Counter(edge.link_class for edge in graph.edges)
    for edge in graph.edges:
        entry = link_classes.setdefault(
            edge.link_class,
            {
                "directed_links": counts[edge.link_class],
                "bandwidth_Bps": edge.bandwidth,
                "latency_ps": edge.latency_ps,
            },
        )
        if entry["bandwidth_Bps"] != edge.bandwidth or entry["latency_ps"] != edge.latency_ps:
            entry["mixed"] = True
            # the range of latencies (a switch's links: its own latency on the way out)
            low = min(entry.get("latency_min_ps", entry["latency_ps"]), edge.latency_ps)
            high = max(entry.get("latency_max_ps", entry["latency_ps"]), edge.latency_ps)
            entry["latency_min_ps"], entry["latency_max_ps"] = low, high
    bisection = bisection_bandwidth(graph)
    return {
        "name": topology.name,
        "description": topology.description,
        "counts": machine_counts(topology),
        "memory_bytes": {
            "hbm_per_cube": hbm_per_cube,
            "hbm_slices_per_cube": slices,
            "hbm_slice": hbm_per_cube // slices,
            "hbm_per_sip": hbm_per_cube * topology.cubes_per_sip,
            "hbm_total": hbm_per_cube * topology.num_cubes,
            "sram_per_cube": cube.sram.size,
            "sram_total": cube.sram.size * topology.num_cubes,
            "tcm_per_pe": comps.pe_tcm.attrs.size_mb,
            "tcm_total": comps.pe_tcm.attrs.size_mb * topology.num_pes,
        },
        "compute_per_pe": {
            "clock_Hz": core.clock,
            "matrix_flops_per_s": core.matrix_flops_per_cycle * core.clock,
            "vector_flops_per_s": core.vector_flops_per_cycle * core.clock,
        },
        "links": link_classes,
        "interconnect": topology.system.interconnect.kind if topology.num_sips > 1 else "none",
        "packet_bytes": topology.fabric.packet_bytes,
        "network": {
            "diameter_hops": diameter_hops(graph),
            "bisection_Bps": bisection["machine"],
            "bisection_detail_Bps": bisection,
            **_cluster(topology),
        },
    }


def _cluster(topology: Topology) -> dict[str, Any]:
    """A clos interconnect's levels and its leaves' oversubscription (down over up)."""
    clos = topology.system.interconnect.clos
    if clos is None or topology.num_sips < 2:
        return {}
    nodes, leaves, spines = clos_shape(clos, topology.num_sips)
    down = clos.node.sips * clos.leaf.nodes * clos.leaf.link.bandwidth
    up = spines * clos.spine.link.bandwidth
    return {
        "cluster": {
            "nodes": nodes,
            "sips_per_node": clos.node.sips,
            "leaves": leaves,
            "nodes_per_leaf": clos.leaf.nodes,
            "spines": spines,
            "leaf_oversubscription": down / up if up else None,
        }
    }


def format_summary(summary: dict[str, Any]) -> str:
    c, m, p = summary["counts"], summary["memory_bytes"], summary["compute_per_pe"]
    w, h = c["cube_mesh"]
    lines = [
        f"{summary['name']}: {summary['description']}".rstrip(": "),
        f"  SIPs {c['sips']} x cubes {w}x{h} ({c['cubes_per_sip']}) x PEs {c['pes_per_cube']}"
        f" = {c['pes']} PEs in {c['cubes']} cubes; a device is a {c['device_level']}"
        f" ({c['devices']} devices)",
        "memory",
        f"  HBM   {format_size(m['hbm_per_cube'])} per cube in {m['hbm_slices_per_cube']} slices"
        f" of {format_size(m['hbm_slice'])}; {format_size(m['hbm_per_sip'])} per SIP;"
        f" {format_size(m['hbm_total'])} total",
        f"  SRAM  {format_size(m['sram_per_cube'])} per cube; {format_size(m['sram_total'])} total",
        f"  TCM   {format_size(m['tcm_per_pe'])} per PE; {format_size(m['tcm_total'])} total",
        "compute per PE",
        f"  clock {p['clock_Hz'] / 1e9:.4g} GHz; matrix {p['matrix_flops_per_s'] / 1e12:.4g}"
        f" TFLOP/s; vector {p['vector_flops_per_s'] / 1e12:.4g} TFLOP/s",
        "links (each direction)",
    ]
    for name, link in summary["links"].items():
        mixed = " (mixed)" if link.get("mixed") else ""
        latency = format_time(link["latency_ps"])
        if link.get("latency_min_ps", link["latency_ps"]) != link.get(
            "latency_max_ps", link["latency_ps"]
        ):
            latency = f"{format_time(link['latency_min_ps'])}-{format_time(link['latency_max_ps'])}"
        lines.append(
            f"  {name:<10} {link['directed_links']:>6} x "
            f"{format_bandwidth(link['bandwidth_Bps']):>9}"
            f"  latency {latency}{mixed}"
        )
    net = summary["network"]
    lines += [
        "network",
        f"  inter-SIP: {summary['interconnect']}; packet {format_size(summary['packet_bytes'])}",
        *_format_cluster(net.get("cluster")),
        f"  diameter: {net['diameter_hops']} links PE to PE",
        "  bisection: "
        + ", ".join(f"{k} {format_bandwidth(v)}" for k, v in net["bisection_detail_Bps"].items())
        + " (each direction)",
    ]
    return "\n".join(lines)


def _format_cluster(cluster: dict[str, Any] | None) -> list[str]:
    if cluster is None:
        return []
    ratio = cluster["leaf_oversubscription"]
    spines = (
        f"{cluster['spines']} spines; leaf oversubscription {ratio:.3g}:1"
        if ratio is not None
        else "no spines (one leaf)"
    )
    return [
        f"  cluster: {cluster['nodes']} nodes of {cluster['sips_per_node']} SIPs;"
        f" {cluster['leaves']} leaves of {cluster['nodes_per_leaf']} nodes; {spines}"
    ]


def bundled_machines() -> list[dict[str, Any]]:
    """Every bundled machine by name: its file, description and :func:`machine_counts`."""
    machines = []
    for name in bundled_names():
        path = bundled_path(name)
        topology = load_topology(path)
        machines.append(
            {
                "name": name,
                "file": str(path),
                "description": topology.description,
                **machine_counts(topology),
            }
        )
    return machines


def format_machines(machines: list[dict[str, Any]]) -> str:
    """A table of :func:`bundled_machines`: name, SIPs x cubes x PEs, PEs, devices, description."""
    header = ("machine", "SIPs x cubes x PEs", "PEs", "devices", "description")
    rows = [header] + [
        (
            m["name"],
            f"{m['sips']} x {m['cubes_per_sip']} x {m['pes_per_cube']}",
            str(m["pes"]),
            f"{m['devices']} ({m['device_level']})",
            m["description"],
        )
        for m in machines
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    return "\n".join(
        f"{name:<{widths[0]}}  {shape:<{widths[1]}}  {pes:>{widths[2]}}  "
        f"{devices:<{widths[3]}}  {description}".rstrip()
        for name, shape, pes, devices, description in rows
    )
