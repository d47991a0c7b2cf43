"""Timing semantics of links, routes and engines, pinned to the picosecond."""

from __future__ import annotations

import pytest
import simpy

from kernbench.errors import KernBenchError, RouteError
from kernbench.fabric import Fabric, FlowNetwork
from kernbench.machine import Compute, MemoryRead, MemoryWrite, Transfer
from kernbench.machine.observe import RowRecorder
from kernbench.topology import load_topology
from kernbench.topology.graph import Edge
from kernbench.units import PS_PER_S, parse_bandwidth, parse_time

MiB = 1 << 20
RING8_BW = parse_bandwidth("50GB/s")
RING8_LAT = parse_time("500ns")


@pytest.fixture
def ring8() -> Fabric:
    return Fabric(load_topology("ring8"))


def stream_ps(nbytes: int, bandwidth: int) -> int:
    return -(-nbytes * PS_PER_S // bandwidth)


def test_one_idle_link_costs_latency_plus_size_over_bandwidth(ring8: Fabric) -> None:
    h = ring8.submit(Transfer(src="sip0.cube0.noc", dst="sip1.cube0.noc", nbytes=MiB))
    ring8.wait(h)
    completion, row = ring8.completion(h)
    assert row.start_ps == 0
    assert row.end_ps == RING8_LAT + stream_ps(MiB, RING8_BW) == 21_471_520
    assert completion.end_ps == row.end_ps
    assert (row.kind, row.src, row.dst, row.nbytes) == (
        "transfer",
        "sip0.cube0.noc",
        "sip1.cube0.noc",
        MiB,
    )


def test_two_flows_on_one_link_share_its_bandwidth(ring8: Fabric) -> None:
    handles = [
        ring8.submit(Transfer(src="sip0.cube0.noc", dst="sip1.cube0.noc", nbytes=MiB))
        for _ in range(2)
    ]
    ring8.wait_all(handles)
    alone = RING8_LAT + stream_ps(MiB, RING8_BW)
    for h in handles:
        assert h.trace.end_ps == RING8_LAT + 2 * stream_ps(MiB, RING8_BW)
        assert 1.95 < h.trace.end_ps / alone < 2.0


def test_opposite_directions_do_not_share(ring8: Fabric) -> None:
    there = ring8.submit(Transfer(src="sip0.cube0.noc", dst="sip1.cube0.noc", nbytes=MiB))
    back = ring8.submit(Transfer(src="sip1.cube0.noc", dst="sip0.cube0.noc", nbytes=MiB))
    ring8.wait_all([there, back])
    assert there.trace.end_ps == back.trace.end_ps == RING8_LAT + stream_ps(MiB, RING8_BW)


def test_four_hop_route_is_pipelined_at_packet_granularity(ring8: Fabric) -> None:
    h = ring8.submit(Transfer(src="sip0.cube0.noc", dst="sip4.cube0.noc", nbytes=MiB))
    ring8.wait(h)
    packet = 4096
    expected = 4 * RING8_LAT + stream_ps(MiB, RING8_BW) + 3 * stream_ps(packet, RING8_BW)
    assert h.trace.end_ps == expected
    store_and_forward = 4 * (RING8_LAT + stream_ps(MiB, RING8_BW))
    assert h.trace.end_ps < 0.3 * store_and_forward


def test_a_late_flow_slows_an_early_one_from_its_arrival() -> None:
    env = simpy.Environment()
    edges = [Edge(0, "l", "a", "b", 10**9, 0, "x")]  # 1 GB/s = 1 byte per ns
    net = FlowNetwork(env, edges, packet_bytes=1)
    ends: dict[str, int] = {}

    def start(name: str, at: int):
        yield env.timeout(at)
        yield net.transfer((0,), 1000)
        ends[name] = env.now

    env.process(start("first", 0))
    env.process(start("second", 500_000))  # halfway through the first
    env.run()
    # first: 500 B alone, then 500 B at half rate -> 1.5 us; second: 500 B shared, 500 B alone.
    assert ends == {"first": 1_500_000, "second": 2_000_000}


def test_rates_are_max_min_fair() -> None:
    env = simpy.Environment()
    gbps = 10**9
    edges = [Edge(0, "l1", "a", "b", 3 * gbps, 0, "x"), Edge(1, "l2", "b", "c", 3 * gbps, 0, "x")]
    net = FlowNetwork(env, edges, packet_bytes=1)
    ends: dict[str, int] = {}

    def flow(name: str, route: tuple[int, ...], nbytes: int):
        yield net.transfer(route, nbytes)
        ends[name] = env.now

    # l2 carries three flows (1 GB/s each); the flow on l1 alone gets what is left: 2 GB/s.
    env.process(flow("long", (0, 1), 1000))
    env.process(flow("l2_a", (1,), 1000))
    env.process(flow("l2_b", (1,), 1000))
    env.process(flow("l1_only", (0,), 2000))
    env.run()
    assert ends["l2_a"] == ends["l2_b"] == ends["l1_only"] == 1_000_000
    # The two-hop flow also pays its first packet's store-and-forward on the other hop.
    assert ends["long"] == 1_000_000 + stream_ps(1, 3 * gbps)


def test_memory_write_and_read_between_pe_and_any_hbm_slice() -> None:
    topology = load_topology("default")
    fabric = Fabric(topology)
    src, dst = "sip0.cube5.pe3", "sip0.cube10.hbm2"
    route = fabric.graph.route(src, dst)
    names = [fabric.graph.edges[i].name for i in route]
    assert names == [
        "link:sip0.cube5.pe3->sip0.cube5.noc",
        "link:sip0.cube5->sip0.cube6",
        "link:sip0.cube6->sip0.cube10",
        "port:sip0.cube10.hbm2",
    ]
    nbytes = 256 * 1024
    write = fabric.submit(MemoryWrite(src=src, dst=dst, nbytes=nbytes))
    fabric.wait(write)
    hbm_bw = topology.cube.hbm.slice_bandwidth  # the bottleneck of this route
    latency = sum(fabric.graph.edges[i].latency_ps for i in route)
    fill = sum(stream_ps(4096, fabric.graph.edges[i].bandwidth) for i in route[:-1])
    assert write.trace.duration_ps == latency + stream_ps(nbytes, hbm_bw) + fill

    read = fabric.submit(MemoryRead(src=src, dst=dst, nbytes=nbytes))
    fabric.wait(read)
    assert read.trace.duration_ps == latency + write.trace.duration_ps


def test_compute_serialises_on_an_engine_and_engines_run_in_parallel() -> None:
    fabric = Fabric(load_topology("tiny"))
    core = fabric.topology.cube.pe_template.components.pe_core.attrs
    flops = 3 * 10**9
    one = stream_ps(flops, core.matrix_flops_per_cycle * core.clock)
    a = fabric.submit(Compute(src="host", dst="sip0.cube0.pe0", engine="matrix", flops=flops))
    b = fabric.submit(Compute(src="host", dst="sip0.cube0.pe0", engine="matrix", flops=flops))
    other_pe = fabric.submit(
        Compute(src="host", dst="sip0.cube0.pe1", engine="matrix", flops=flops)
    )
    vec = fabric.submit(Compute(src="host", dst="sip0.cube0.pe0", engine="vector", flops=flops))
    fabric.wait_all([a, b, other_pe, vec])
    assert (a.trace.end_ps, b.trace.end_ps, other_pe.trace.end_ps) == (one, 2 * one, one)
    assert vec.trace.end_ps == stream_ps(flops, core.vector_flops_per_cycle * core.clock)


def test_same_requests_give_the_same_trace() -> None:
    def run() -> list:
        fabric = Fabric(load_topology("default"))
        recorder = RowRecorder()
        fabric.observers.add(recorder)
        handles = [
            fabric.submit(
                MemoryWrite(
                    src=f"sip0.cube{c}.pe{p}",
                    dst=f"sip0.cube{15 - c}.hbm{p}",
                    nbytes=(c + 1) * 10_000,
                )
            )
            for c in range(16)
            for p in range(8)
        ]
        fabric.wait_all(handles)
        return recorder.rows

    first, second = run(), run()
    assert first == second
    assert len(first) == 128


def test_unknown_endpoint_is_a_route_error() -> None:
    fabric = Fabric(load_topology("tiny"))
    with pytest.raises(RouteError, match="unknown endpoint 'sip0.cube1.pe0'"):
        fabric.submit(Transfer(src="sip0.cube0.pe0", dst="sip0.cube1.pe0", nbytes=1))


def test_unknown_engine_is_reported_when_waited_on() -> None:
    fabric = Fabric(load_topology("tiny"))
    h = fabric.submit(Compute(src="host", dst="sip0.cube0.pe0", engine="tensor", flops=1))
    with pytest.raises(KernBenchError, match="unknown engine 'tensor'; valid: matrix, vector"):
        fabric.wait(h)
