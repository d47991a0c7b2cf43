"""Range allocator and the machine's per-PE / per-cube memories."""

from __future__ import annotations

import random

import pytest

from kernbench.errors import AllocationError, ConfigError, OutOfMemoryError
from kernbench.memory import MachineMemory, MemoryKind, PhysAddr, RangeAllocator

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


def test_alignment_and_rounding() -> None:
    allocator = RangeAllocator(64 * KiB, alignment=256, name="t")
    a = allocator.alloc(1)
    b = allocator.alloc(300)
    c = allocator.alloc(256)
    assert (a, b, c) == (0, 256, 768)
    assert allocator.used == 1024
    assert allocator.free_bytes == 63 * KiB
    assert allocator.size_of(b) == 512


def test_reuse_after_free_is_first_fit() -> None:
    allocator = RangeAllocator(4 * KiB, alignment=256, name="t")
    offsets = [allocator.alloc(256) for _ in range(4)]
    allocator.free(offsets[1])
    assert allocator.alloc(200) == offsets[1]
    assert allocator.alloc(256) == 1024


def test_free_coalesces_both_neighbours() -> None:
    allocator = RangeAllocator(1024, alignment=256, name="t")
    a, b, c, d = (allocator.alloc(256) for _ in range(4))
    allocator.free(a)
    allocator.free(c)
    assert allocator.free_blocks() == [(0, 256), (512, 256)]
    allocator.free(b)
    assert allocator.free_blocks() == [(0, 768)]
    allocator.free(d)
    assert allocator.free_blocks() == [(0, 1024)]
    assert allocator.largest_free == 1024


def test_random_alloc_free_restores_one_full_block() -> None:
    rng = random.Random(1234)
    capacity = 1 * MiB
    allocator = RangeAllocator(capacity, alignment=64, name="t")
    live: list[int] = []
    for _ in range(3000):
        if live and (rng.random() < 0.45 or allocator.largest_free < 8 * KiB):
            allocator.free(live.pop(rng.randrange(len(live))))
        else:
            live.append(allocator.alloc(rng.randint(1, 8 * KiB)))
        blocks = allocator.free_blocks()
        assert sum(size for _, size in blocks) == allocator.free_bytes
        # Coalescing means no two free blocks ever touch.
        assert all(s1 + z1 < s2 for (s1, z1), (s2, _) in zip(blocks, blocks[1:], strict=False))
    for offset in live:
        allocator.free(offset)
    assert allocator.free_blocks() == [(0, capacity)]
    assert allocator.used == 0


def test_out_of_memory_message_and_earlier_allocations_intact() -> None:
    name = "sip0.cube3.pe5 HBM partition"
    allocator = RangeAllocator(4 * MiB, alignment=256, name=name)
    first = allocator.alloc(3 * MiB, owner="weights")
    with pytest.raises(OutOfMemoryError) as info:
        allocator.alloc(2 * MiB, owner="activations")
    message = str(info.value)
    assert name in message
    assert "2MiB" in message and "activations" in message
    assert "capacity 4MiB" in message
    assert "in use 3MiB" in message
    assert "largest free block 1MiB" in message
    assert allocator.used == 3 * MiB
    assert allocator.size_of(first) == 3 * MiB
    assert allocator.alloc(1 * MiB) == 3 * MiB


def test_double_free_and_unknown_offset() -> None:
    allocator = RangeAllocator(4096, name="sip0.cube0.pe0 TCM")
    offset = allocator.alloc(100)
    allocator.free(offset)
    with pytest.raises(AllocationError, match=r"sip0\.cube0\.pe0 TCM: offset 0x0"):
        allocator.free(offset)
    with pytest.raises(AllocationError, match="0x80"):
        allocator.free(0x80)


@pytest.mark.parametrize("nbytes", [0, -5])
def test_nonpositive_alloc_is_an_error(nbytes: int) -> None:
    with pytest.raises(AllocationError, match="positive"):
        RangeAllocator(4096, name="t").alloc(nbytes)


def test_bad_capacity_and_alignment() -> None:
    with pytest.raises(ConfigError, match="capacity"):
        RangeAllocator(0, name="t")
    with pytest.raises(ConfigError, match="alignment"):
        RangeAllocator(4096, alignment=48, name="t")


def _machine(**overrides: int) -> MachineMemory:
    counts = dict(
        sips=2,
        cubes_per_sip=4,
        pes_per_cube=8,
        hbm_bytes_per_cube=8 * GiB,
        hbm_slices_per_cube=8,
        sram_bytes_per_cube=64 * MiB,
        tcm_bytes_per_pe=16 * MiB,
    )
    counts.update(overrides)
    return MachineMemory(**counts)


def test_hbm_partition_is_slice_of_same_index() -> None:
    memory = _machine()
    for pe in range(8):
        pa = memory.alloc(MemoryKind.HBM, 1, 2, pe, 4096, owner=f"t{pe}")
        assert pa == PhysAddr(0, 1, 2, pe, MemoryKind.HBM, pe * GiB)
        assert memory.hbm_slice_of(pa) == pe
        assert memory.hbm_slice_of(pa + (GiB - 1)) == pe


def test_partition_spans_several_slices() -> None:
    memory = _machine(pes_per_cube=2, hbm_slices_per_cube=8)
    pa = memory.alloc(MemoryKind.HBM, 0, 0, 1, 4096)
    assert pa.offset == 4 * GiB
    assert memory.hbm_slice_of(pa) == 4
    assert memory.hbm_slice_of(pa + 3 * GiB) == 7


def test_partitions_are_independent_and_oom_names_the_pe() -> None:
    memory = _machine()
    memory.alloc(MemoryKind.HBM, 0, 3, 5, GiB)
    with pytest.raises(OutOfMemoryError, match=r"sip0\.cube3\.pe5 HBM partition"):
        memory.alloc(MemoryKind.HBM, 0, 3, 5, 1)
    assert memory.alloc(MemoryKind.HBM, 0, 3, 6, GiB).offset == 6 * GiB


def test_sram_tcm_alloc_free_and_usage() -> None:
    memory = _machine()
    sram = memory.alloc(MemoryKind.SRAM, 0, 1, 7, 1000)
    tcm = memory.alloc(MemoryKind.TCM, 0, 1, 7, 1000)
    assert sram == PhysAddr(0, 0, 1, 0, MemoryKind.SRAM, 0)
    assert tcm == PhysAddr(0, 0, 1, 7, MemoryKind.TCM, 0)
    assert memory.used_bytes(MemoryKind.SRAM) == 1024
    assert memory.used_bytes() == 2048
    rows = {row.name: row for row in memory.usage()}
    assert rows["sip0.cube1 SRAM"].used == 1024
    assert rows["sip0.cube1.pe7 TCM"].capacity == 16 * MiB
    memory.free(sram)
    memory.free(tcm)
    assert memory.used_bytes() == 0
    with pytest.raises(AllocationError):
        memory.free(tcm)


def test_free_hbm_round_trip() -> None:
    memory = _machine()
    pa = memory.alloc(MemoryKind.HBM, 0, 0, 3, 4096)
    memory.free(pa)
    assert memory.alloc(MemoryKind.HBM, 0, 0, 3, 4096) == pa
    with pytest.raises(AllocationError, match="outside the HBM partition of pe2"):
        memory.free(PhysAddr(0, 0, 0, 2, MemoryKind.HBM, pa.offset))


def test_rounded_size_and_usage_by_place() -> None:
    memory = _machine()
    a = memory.alloc(MemoryKind.HBM, 1, 2, 3, 1000)
    b = memory.alloc(MemoryKind.HBM, 1, 3, 0, 300)
    memory.alloc(MemoryKind.HBM, 0, 2, 3, 256)
    assert (memory.size_of(a), memory.size_of(b)) == (1024, 512)
    assert memory.used_bytes(MemoryKind.HBM, sip=1) == 1536
    assert memory.used_bytes(MemoryKind.HBM, sip=1, cube=2) == 1024
    assert memory.used_bytes(MemoryKind.HBM, cube=2, pe=3) == 1280
    assert memory.used_bytes(MemoryKind.HBM, sip=1, cube=2, pe=4) == 0
    memory.free(a)
    with pytest.raises(AllocationError, match="no live allocation"):
        memory.size_of(a)


def test_large_machine_is_cheap_to_build() -> None:
    memory = _machine(sips=16, cubes_per_sip=8, pes_per_cube=8)
    assert memory.usage() == []
    memory.alloc(MemoryKind.TCM, 15, 7, 7, 1)
    assert len(memory.usage()) == 1


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("sips", 0),
        ("cubes_per_sip", -1),
        ("pes_per_cube", 0),
        ("hbm_bytes_per_cube", 0),
        ("hbm_slices_per_cube", 0),
        ("sram_bytes_per_cube", 0),
        ("tcm_bytes_per_pe", 0),
        ("sips", 100_000),
        ("hbm_slices_per_cube", 3),
    ],
)
def test_bad_counts_name_the_argument(argument: str, value: int) -> None:
    with pytest.raises(ConfigError, match=argument):
        _machine(**{argument: value})


def test_location_out_of_machine() -> None:
    with pytest.raises(AllocationError, match=r"pe=8 .*valid: 0\.\.7"):
        _machine().alloc(MemoryKind.TCM, 0, 0, 8, 16)


def test_unknown_kind_is_an_allocation_error() -> None:
    with pytest.raises(AllocationError, match="kind=7"):
        _machine().alloc(7, 0, 0, 0, 16)  # type: ignore[arg-type]
