"""``torch.cuda``'s memory counters, from the simulator's allocator: the calling rank's
live tensors on a device, in the allocator's rounded bytes."""

from __future__ import annotations

import gc
import warnings

import pytest

import kernbench
import kernbench.torch as torch
from kernbench.errors import OutOfMemoryError, PlacementError
from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext, current_context, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _rounded(ctx, nbytes: int) -> int:
    """A shard's bytes as the allocator holds them (rounded up to its alignment)."""
    align = ctx.memory.alignment
    return -(-nbytes // align) * align


def test_allocated_bytes_follow_tensors_made_and_dropped(ctx):
    assert ctx.memory.alignment == 256
    assert torch.cuda.memory_allocated() == 0
    a = torch.empty(1000)  # 4000 B, held as 4096
    b = torch.zeros(3, 5, dtype=torch.int64)  # 120 B, held as 256
    c = torch.ones(64, dtype=torch.float64)  # 512 B exactly
    held = [_rounded(ctx, t.numel() * t.element_size()) for t in (a, b, c)]
    assert held == [4096, 256, 512]
    assert torch.cuda.memory_allocated() == sum(held)
    stats = torch.cuda.memory_stats()
    assert stats["requested_bytes.all.current"] == 4000 + 120 + 512
    assert stats["allocation.all.current"] == 3
    view = a[10:20]
    del a  # the view keeps the memory, as in torch
    assert torch.cuda.memory_allocated() == sum(held)
    del view
    assert torch.cuda.memory_allocated() == held[1] + held[2]
    c.free()
    assert torch.cuda.memory_allocated() == held[1]
    assert torch.cuda.max_memory_allocated() == sum(held)
    assert torch.cuda.memory_reserved() == held[1]  # no caching allocator
    assert torch.cuda.max_memory_reserved() == sum(held)
    assert ctx.memory.used_bytes() == held[1]


def test_peak_holds_after_a_free_until_reset(ctx):
    a = torch.empty(1024)  # 4096 B
    b = torch.empty(2048)  # 8192 B
    assert torch.cuda.max_memory_allocated() == 4096 + 8192
    del b
    assert (torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated()) == (4096, 12288)
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == 4096
    c = torch.empty(256)  # 1024 B
    assert torch.cuda.max_memory_allocated() == 4096 + 1024
    d = c + 1  # a result made and kept
    assert torch.cuda.max_memory_allocated() == 4096 + 2048
    stats = torch.cuda.memory_stats()
    assert stats["allocated_bytes.all.freed"] == 8192
    assert stats["allocated_bytes.all.allocated"] == 4096 + 8192 + 1024 + 1024
    torch.cuda.reset_accumulated_memory_stats()
    stats = torch.cuda.memory_stats()
    assert (stats["allocated_bytes.all.allocated"], stats["allocated_bytes.all.freed"]) == (0, 0)
    assert stats["allocated_bytes.all.current"] == 4096 + 2048
    del a, c, d


def test_deprecated_names_warn_as_torch(ctx):
    keep = torch.empty(8)
    with pytest.warns(FutureWarning, match="reset_max_memory_allocated now calls"):
        torch.cuda.reset_max_memory_allocated()
    with pytest.warns(FutureWarning, match="renamed to `torch.cuda.memory_reserved`"):
        assert torch.cuda.memory_cached() == 256
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.cuda.max_memory_reserved() == 256
    del keep


def test_device_argument_as_torch_takes_it():
    with use_context(RuntimeContext("tiny", overrides=["system.device_level=pe"])) as ctx:
        on_two = torch.empty(100, device="cuda:2")  # 400 B -> 512
        for spelling in (2, "cuda:2", "ahbm:2", torch.device("cuda", 2)):
            assert torch.cuda.memory_allocated(spelling) == 512
        assert torch.cuda.memory_allocated() == 0  # the current device is 0
        torch.cuda.set_device(2)
        assert torch.cuda.memory_allocated() == torch.cuda.memory_allocated("cuda") == 512
        with pytest.raises(
            PlacementError,
            match=r"torch.cuda.memory_allocated: device 4 does not exist: .* \(valid: 0\.\.3\)",
        ):
            torch.cuda.memory_allocated(4)
        with pytest.raises(PlacementError, match=r"mem_get_info: expected an accelerator.*cpu"):
            torch.cuda.mem_get_info("cpu")
        with pytest.raises(PlacementError, match=r"max_memory_allocated: device -1 does not"):
            torch.cuda.max_memory_allocated(-1)
        # A tensor split across the four PE devices counts on each for its shard.
        split = torch.empty(4, 64, dp=DPPolicy(pe="row_wise"))  # 256 B a PE
        assert [torch.cuda.memory_allocated(d) for d in range(4)] == [256, 256, 768, 256]
        free, total = torch.cuda.mem_get_info(1)
        assert total == ctx.memory.hbm_partition_bytes == 10**9  # tiny: 4 GB a cube, 4 PEs
        assert free == total - 256
        del on_two, split


def test_mem_get_info_is_the_devices_hbm_and_summary_reads(ctx):
    total = ctx.topology.cube.memory_map.hbm_total_gb_per_cube  # tiny: one cube a device
    assert torch.cuda.mem_get_info() == (total, total)
    keep = torch.empty(1000)
    assert torch.cuda.mem_get_info(0) == (total - 4096, total)
    summary = torch.cuda.memory_summary()
    assert "memory summary, device ID 0" in summary
    row = next(line for line in summary.splitlines() if "Allocated memory" in line)
    assert row.split("|")[2:4] == ["   4.000KiB ", "   4.000KiB "]
    del keep


def test_a_tensor_that_does_not_fit_counts_as_an_oom():
    with use_context(RuntimeContext("tiny", timing_only=True)) as ctx:
        partition = ctx.memory.hbm_partition_bytes
        with pytest.raises(OutOfMemoryError, match="does not fit"):
            torch.empty(partition // 4 + 1)
        stats = torch.cuda.memory_stats()
        assert (stats["num_ooms"], stats["allocated_bytes.all.current"]) == (1, 0)
        keep = torch.empty(10)  # timing-only runs count too
        assert torch.cuda.memory_allocated() == 256
        del keep


def test_memory_dropped_in_a_collection_is_counted_free_when_asked(ctx):
    a = torch.empty(1000)
    cycle = [a]
    cycle.append(cycle)  # freed only by the cyclic collector
    del a
    assert torch.cuda.memory_allocated() == 4096
    with ctx._changing_memory():  # noqa: SLF001 - a collection while memory is changed
        del cycle
        gc.collect()
    assert torch.cuda.memory_allocated() == 0


def _rank_memory(rank: int, world: int) -> dict:
    torch.distributed.init_process_group()
    n = 1024 * (rank + 1)  # float32: 4 KiB on rank 0, 8 KiB on rank 1
    mine = torch.empty(n)
    split = None
    if rank == 0:  # one 256 B row on each rank's SIP
        split = torch.empty(
            world, 64, dp=DPPolicy(sip="row_wise", num_sips=world, num_cubes=1, num_pes=1)
        )
    topo = current_context().topology
    torch.distributed.barrier()  # every tensor made before anyone looks
    seen = {
        "own": torch.cuda.memory_allocated(),
        "by_device": [torch.cuda.memory_allocated(d) for d in range(world)],
        "free_total": torch.cuda.mem_get_info(),
        "capacity": topo.cubes_per_sip * topo.cube.memory_map.hbm_total_gb_per_cube,
    }
    torch.distributed.barrier()  # and none dropped before everyone has looked
    del mine, split
    seen["after"] = torch.cuda.memory_allocated()
    seen["peak"] = torch.cuda.max_memory_allocated()
    return seen


def test_each_rank_sees_its_own_counts():
    world = 2
    result = kernbench.simulate(
        _rank_memory, topology="multi_sip", world_size=world, rank_args=True
    )
    zero, one = result.returns
    assert zero["own"] == 4096 + 256  # its tensor and its row of the split one
    assert zero["by_device"] == [4096 + 256, 256]
    assert one["own"] == 8192 and one["by_device"] == [0, 8192]
    capacity = zero["capacity"]
    # the driver's view: every rank's tensors on the device
    assert zero["free_total"] == (capacity - 4096 - 256, capacity)
    assert one["free_total"] == (capacity - 8192 - 256, capacity)
    assert (zero["after"], zero["peak"]) == (0, 4096 + 256)
    assert (one["after"], one["peak"]) == (0, 8192)
