"""What deploying, mapping and moving tensors costs in simulated time.

Expected times are closed forms written from the topology's numbers (the
YAML files' bandwidths and latencies), pinned to the picosecond.  Time is an
integer number of picoseconds; a bandwidth of B bytes/s moves S bytes in
ceil(S * 10**12 / B) ps.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernbench.errors import TensorError
from kernbench.machine.api import RouteCost
from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext

DEFAULT = "default"
TINY = "tiny"
RING8 = "ring8"
ROOT = Path(__file__).resolve().parents[1]

PS = 10**12  # picoseconds per second
NS = 1_000
US = 1_000_000
GB = 10**9
MiB = 1 << 20

# default.yaml (and tiny.yaml, which extends it)
HOST_BW, HOST_LAT = 64 * GB, 1 * US
HBM_BW, HBM_LAT = 128 * GB, 100 * NS
NOC_BW, NOC_LAT = 512 * GB, 5 * NS
M_CPU_COMMAND = 200 * NS
MAP_PER_PAGE = 1 * NS
PAGE = 4096
PACKET = 4096
MMU_ENTRY = 16  # bytes of one page-table entry in an MMU command


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def stream(nbytes: int, bandwidth: int) -> int:
    return ceil_div(nbytes * PS, bandwidth)


def rows_of(ctx: RuntimeContext, kind: str, tag: str):
    return [row for row in ctx.trace if row.kind == kind and row.tag == tag]


def route_cost(ctx: RuntimeContext, src: str, dst: str) -> RouteCost:
    graph = ctx.machine.graph
    return RouteCost([graph.edges[i] for i in graph.route(src, dst)])


# -- deploying bytes to one HBM slice --------------------------------------------------


def test_zeros_into_one_hbm_slice_costs_the_host_link_bottleneck():
    size = 4 * MiB
    ctx = RuntimeContext(DEFAULT)
    t = ctx.zeros((size // 4,), "float32")  # dp=None: all of it on sip0.cube0.pe0
    assert [p.memory_node for p in t.placements] == ["sip0.cube0.hbm0"]
    (write,) = rows_of(ctx, "mem_write", t.name)
    assert (write.src, write.dst, write.nbytes) == ("host", "sip0.cube0.hbm0", size)
    # host -> cube0 router (64GB/s, 1us) -> HBM slice 0 (128GB/s, 100ns).  The host link is
    # the bottleneck; the first packet still has to cross the HBM port after it.
    expected = HOST_LAT + HBM_LAT + stream(size, HOST_BW) + stream(PACKET, HBM_BW)
    assert expected == 66_668_000
    assert write.duration_ps == expected
    assert write.duration_ps == route_cost(ctx, "host", "sip0.cube0.hbm0").idle_ps(size, PACKET)
    classes = [
        ctx.machine.graph.edges[i].link_class
        for i in ctx.machine.graph.route("host", t.placements[0].memory_node)
    ]
    assert classes == ["host_link", "hbm_port"]
    # The write starts once the mapping is installed, and the clock stops when it ends.
    (mapping,) = rows_of(ctx, "mmu_map", t.name)
    assert write.start_ps == mapping.end_ps
    assert ctx.now == write.end_ps


def test_zeros_into_one_hbm_slice_costs_the_slice_bandwidth_when_it_is_the_bottleneck():
    size = 4 * MiB
    slice_bw = 10 * GB
    ctx = RuntimeContext(DEFAULT, overrides=["cube.hbm.slice_bandwidth=10GB/s"])
    t = ctx.zeros((size // 4,), "float32")
    (write,) = rows_of(ctx, "mem_write", t.name)
    # Now the HBM port is the bottleneck; the first packet fills the host link before it.
    expected = HOST_LAT + HBM_LAT + stream(size, slice_bw) + stream(PACKET, HOST_BW)
    assert expected == 420_594_400
    assert write.duration_ps == expected
    assert write.duration_ps == route_cost(ctx, "host", "sip0.cube0.hbm0").idle_ps(size, PACKET)


def test_shards_written_together_share_the_host_link():
    size = 4 * MiB
    ctx = RuntimeContext(DEFAULT)
    t = ctx.zeros((8, size // 32), "float32", dp=DPPolicy(pe="row_wise", num_cubes=1))
    writes = rows_of(ctx, "mem_write", t.name)
    assert sorted(w.dst for w in writes) == [f"sip0.cube0.hbm{k}" for k in range(8)]
    # Eight flows of S/8 share the 64GB/s host link (8GB/s each, below each 128GB/s
    # slice): together they take as long as one flow of S alone.
    expected = HOST_LAT + HBM_LAT + stream(size, HOST_BW) + stream(PACKET, HBM_BW)
    for w in writes:
        assert w.nbytes == size // 8
        assert w.duration_ps == expected


def test_reading_back_costs_a_request_then_the_data_over_the_reverse_route():
    size = 1 * MiB
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((size // 4,), "float32")
    t.numpy()
    (read,) = rows_of(ctx, "mem_read", t.name)
    assert (read.src, read.dst, read.nbytes) == ("host", "sip0.cube0.hbm0", size)
    latency = HOST_LAT + HBM_LAT
    # Request header: latency only.  Data: slice 0 -> router -> host, host link bottleneck.
    expected = latency + latency + stream(size, HOST_BW) + stream(PACKET, HBM_BW)
    assert read.duration_ps == expected


# -- mapping costs time ----------------------------------------------------------------


def map_ps(pes_in_cube: int, pages: int, entries: int = 1) -> int:
    """An MmuMap/MmuUnmap of ``entries`` extents covering ``pages`` pages into one cube.

    host -> M_CPU (host link, then the M_CPU's NoC port), the M_CPU's command
    latency, then the command fans out to every PE of the cube: the copies
    share the M_CPU -> router port and each crosses its PE's port, and each PE
    installs the pages.
    """
    command = MMU_ENTRY * entries
    to_m_cpu = HOST_LAT + NOC_LAT + stream(command, HOST_BW) + stream(command, NOC_BW)
    fan_out = 2 * NOC_LAT + stream(pes_in_cube * command, NOC_BW) + stream(command, NOC_BW)
    return to_m_cpu + M_CPU_COMMAND + fan_out + pages * MAP_PER_PAGE


def test_empty_costs_the_mmu_map_and_nothing_else():
    ctx = RuntimeContext(TINY)
    assert ctx.now == 0
    t = ctx.empty((4, 8), "int32")  # 128 B: one page
    (mapping,) = rows_of(ctx, "mmu_map", t.name)
    assert (mapping.src, mapping.dst, mapping.nbytes) == ("host", "sip0.cube0.m_cpu", MMU_ENTRY)
    assert mapping.start_ps == 0
    assert map_ps(4, pages=1) == 1_216_439
    assert ctx.now == mapping.end_ps == map_ps(4, pages=1)
    assert rows_of(ctx, "mem_write", t.name) == []


def test_mapping_cost_grows_with_the_pages_mapped():
    ctx = RuntimeContext(TINY)
    before = ctx.now
    ctx.empty((MiB // 4,), "float32")  # 256 pages
    assert ctx.now - before == map_ps(4, pages=256)
    assert map_ps(4, pages=256) - map_ps(4, pages=1) == 255 * MAP_PER_PAGE


def test_mapping_on_default_fans_out_to_eight_pes():
    ctx = RuntimeContext(DEFAULT)
    t = ctx.empty((4 * MiB // 4,), "float32")  # 1024 pages
    (mapping,) = rows_of(ctx, "mmu_map", t.name)
    assert mapping.duration_ps == map_ps(8, pages=1024) == 2_239_564


def test_free_costs_the_mmu_unmap():
    ctx = RuntimeContext(TINY)
    t = ctx.empty((4, 8), "int32")
    before = ctx.now
    t.free()
    (unmap,) = rows_of(ctx, "mmu_unmap", t.name)
    assert (unmap.start_ps, unmap.end_ps) == (before, ctx.now)
    assert ctx.now - before == map_ps(4, pages=1)


def test_a_tensor_split_over_pes_maps_one_extent_per_shard():
    ctx = RuntimeContext(TINY)
    t = ctx.empty((4, 1024), "float32", dp=DPPolicy(pe="row_wise"))  # 4 KiB (1 page) per PE
    (mapping,) = rows_of(ctx, "mmu_map", t.name)
    assert mapping.nbytes == 4 * MMU_ENTRY
    assert mapping.duration_ps == map_ps(4, pages=4, entries=4)


# -- functional and timing-only modes give the same times; runs are deterministic -------


def script(ctx: RuntimeContext, sip_policies: bool) -> list:
    """Several tensors with different policies: zeros, copy_ from host, device to device, free."""
    shape = (16, 32)
    values = np.arange(16 * 32, dtype=np.float32).reshape(shape) / 4
    level = "sip" if sip_policies else "pe"
    a = ctx.zeros(shape, "float32", dp=DPPolicy(**{level: "row_wise"}))
    a.copy_(values)
    b = ctx.empty(shape, "bfloat16", dp=DPPolicy(**{level: "column_wise"}))
    b.copy_(a)
    c = ctx.zeros(shape, "float32")
    c.copy_(ctx.from_numpy(values))
    d = ctx.zeros(shape, "int16", dp=DPPolicy())  # replicated everywhere
    a.free()
    d.copy_(c)
    e = ctx.zeros((8, 8), "uint8", dp=DPPolicy(**{level: "row_wise"}))
    del e  # freed when the next tensor is made
    f = ctx.zeros(shape, "float16", dp=DPPolicy(**{level: "row_wise"}))
    f.copy_(b)
    ctx.cleanup()
    return [(r.kind, r.src, r.dst, r.start_ps, r.end_ps, r.nbytes) for r in ctx.trace]


@pytest.mark.parametrize(
    ("topology", "sip_policies"), [(TINY, False), (RING8, True)], ids=["tiny", "ring8"]
)
def test_timing_only_mode_gives_the_same_times_as_functional_mode(topology, sip_policies):
    functional = RuntimeContext(topology)
    timing = RuntimeContext(topology, timing_only=True)
    rows = script(functional, sip_policies)
    assert script(timing, sip_policies) == rows
    assert timing.now == functional.now > 0
    kinds = {row[0] for row in rows}
    assert kinds == {"mmu_map", "mmu_unmap", "mem_write", "mem_read"}
    assert timing.memory.used_bytes() == functional.memory.used_bytes() == 0


def test_the_same_script_twice_gives_the_same_trace():
    first, second = RuntimeContext(RING8), RuntimeContext(RING8)
    script(first, sip_policies=True)
    script(second, sip_policies=True)
    assert first.trace == second.trace  # ids, tags and times, bit for bit
    assert first.now == second.now


def test_timing_only_tensors_have_no_values():
    ctx = RuntimeContext(TINY, timing_only=True)
    t = ctx.zeros((4, 8), "float32", name="sized")
    t.copy_(np.ones((4, 8), dtype=np.float32))
    with pytest.raises(TensorError, match=r"tensor 'sized' has no values in timing-only mode"):
        t.numpy()
    with pytest.raises(TensorError, match="does not match"):
        t.copy_(np.ones((8, 4), dtype=np.float32))


# -- a 1 GiB tensor in timing-only mode -----------------------------------------------


def test_a_one_gib_timing_only_tensor_on_a_rack_costs_no_memory():
    script_path = ROOT / "benchmarks" / "timing_only_memory.py"
    done = subprocess.run(
        [sys.executable, str(script_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    match = re.search(r"peak RSS: (\d+) KiB", done.stdout)
    assert match, done.stdout
    assert int(match.group(1)) * 1024 < 1 << 30
    simulated = re.search(r"simulated time: (\d+) ps", done.stdout)
    assert simulated and int(simulated.group(1)) > 0


def test_a_clashing_map_fails_its_command_at_the_first_install_and_the_machine_goes_on():
    """Mapping a page already mapped fails the MmuMap with the PE's MMU and the page named,
    when the first PE's install would have finished; every PE clashes, and the fabric
    neither stops nor lets the other faults escape.  Later commands run as usual."""
    from kernbench.errors import AllocationError
    from kernbench.machine import MmuMap

    ctx = RuntimeContext(TINY)
    t = ctx.empty((4, 8), "int32")  # one page, mapped on the cube's four PEs
    (placement,) = t.placements
    again = MmuMap(
        src="host",
        dst="sip0.cube0.m_cpu",
        nbytes=MMU_ENTRY,
        targets=tuple(f"sip0.cube0.pe{k}" for k in range(4)),
        entries=((placement.va, placement.pa, 128),),
        tag="again",
    )
    machine = ctx.machine
    start = ctx.now
    handle = machine.submit(again)
    with pytest.raises(
        AllocationError, match=r"sip0\.cube0\.pe0\.mmu: cannot map VA .* already mapped"
    ):
        machine.wait(handle)
    assert ctx.now - start == map_ps(4, pages=1)
    before = ctx.now
    t.free()  # the mapping the failed command left alone is still there to unmap
    assert ctx.now - before == map_ps(4, pages=1)
