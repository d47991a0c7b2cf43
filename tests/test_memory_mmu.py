"""Page tables: map, translate with run merging, unmap, and faults."""

from __future__ import annotations

import tracemalloc

import pytest

from kernbench.errors import AllocationError, MemoryFaultError
from kernbench.memory import MemoryKind, PageTable, PhysAddr

PAGE = 4096
VA = 0x1_0000_0000


def hbm(offset: int, pe: int = 1) -> PhysAddr:
    return PhysAddr(0, 0, 0, pe, MemoryKind.HBM, offset)


def test_translate_within_one_mapping_is_one_run() -> None:
    table = PageTable(PAGE, "sip0.cube0.pe1.mmu")
    table.map(VA, hbm(0x10000), 3 * PAGE)
    assert table.translate(VA + 100, 2 * PAGE) == [(hbm(0x10000 + 100), 2 * PAGE)]
    assert table.mapped_pages == 3


def test_partial_last_page_is_mapped_whole() -> None:
    table = PageTable(PAGE, "t")
    table.map(VA, hbm(0), PAGE + 1)
    assert table.mapped_pages == 2
    assert table.translate(VA + 2 * PAGE - 1, 1) == [(hbm(2 * PAGE - 1), 1)]


def test_contiguous_neighbours_merge_and_scattered_pages_split() -> None:
    table = PageTable(PAGE, "t")
    table.map(VA, hbm(0x8000), PAGE)
    table.map(VA + PAGE, hbm(0x9000), PAGE)  # physically follows the first page
    table.map(VA + 2 * PAGE, hbm(0x2000), PAGE)  # does not
    table.map(VA + 3 * PAGE, PhysAddr(0, 0, 0, 0, MemoryKind.TCM, 0x3000), PAGE)
    runs = table.translate(VA + 10, 4 * PAGE - 20)
    assert runs == [
        (hbm(0x8000 + 10), 2 * PAGE - 10),
        (hbm(0x2000), PAGE),
        (PhysAddr(0, 0, 0, 0, MemoryKind.TCM, 0x3000), PAGE - 10),
    ]
    assert sum(n for _, n in runs) == 4 * PAGE - 20


def test_no_merge_across_memories_when_encodings_touch() -> None:
    table = PageTable(PAGE, "t")
    last_hbm_page = PhysAddr(0, 0, 0, 0, MemoryKind.HBM, (1 << 38) - PAGE)
    first_sram_page = PhysAddr(0, 0, 0, 0, MemoryKind.SRAM, 0)
    # The offset field is the lowest, so these two pages have adjacent encodings.
    assert last_hbm_page.encode() + PAGE == first_sram_page.encode()
    table.map(VA, last_hbm_page, PAGE)
    table.map(VA + PAGE, first_sram_page, PAGE)
    assert table.translate(VA, 2 * PAGE) == [(last_hbm_page, PAGE), (first_sram_page, PAGE)]


def test_fault_names_table_va_and_tensor() -> None:
    table = PageTable(PAGE, "sip0.cube0.pe1.mmu")
    table.map(VA, hbm(0), PAGE)
    with pytest.raises(MemoryFaultError) as info:
        table.translate(VA + PAGE - 8, 16, what="tensor 'x'")
    message = str(info.value)
    assert "sip0.cube0.pe1.mmu" in message
    assert f"{VA + PAGE:#x}" in message
    assert "tensor 'x'" in message
    with pytest.raises(MemoryFaultError, match=f"{VA - 1:#x}"):
        table.translate(VA - 1, 1)


def test_map_errors() -> None:
    table = PageTable(PAGE, "t")
    table.map(VA, hbm(0), 2 * PAGE)
    with pytest.raises(AllocationError, match="multiple of the page size"):
        table.map(VA + 1, hbm(0), PAGE)
    with pytest.raises(AllocationError, match=f"page {VA + PAGE:#x} is already mapped"):
        table.map(VA + PAGE, hbm(0x10000), PAGE)
    with pytest.raises(AllocationError, match=f"page {VA:#x} is already mapped"):
        table.map(VA - PAGE, hbm(0x10000), 2 * PAGE)
    with pytest.raises(AllocationError, match="positive"):
        table.map(VA + 4 * PAGE, hbm(0), 0)


def test_unmap_middle_splits_the_extent() -> None:
    table = PageTable(PAGE, "t")
    table.map(VA, hbm(0), 4 * PAGE)
    table.unmap(VA + PAGE, 2 * PAGE)
    assert table.mapped_pages == 2
    assert table.translate(VA + 3 * PAGE, PAGE) == [(hbm(3 * PAGE), PAGE)]
    assert table.translate(VA, PAGE) == [(hbm(0), PAGE)]
    with pytest.raises(MemoryFaultError, match=f"{VA + PAGE:#x}"):
        table.translate(VA, 2 * PAGE)
    with pytest.raises(AllocationError, match=f"page {VA + PAGE:#x} is not mapped"):
        table.unmap(VA, 2 * PAGE)
    table.map(VA + PAGE, hbm(0x100000), 2 * PAGE)
    table.unmap(VA, 4 * PAGE)
    assert table.mapped_pages == 0
    assert table.extent_count == 0


def test_large_mapping_is_one_extent_and_cheap() -> None:
    table = PageTable(PAGE, "t")
    tracemalloc.start()
    try:
        table.map(VA, hbm(0), 1 << 30)
        runs = table.translate(VA, 1 << 30)
        table.unmap(VA + (1 << 29), PAGE)
        split = table.translate(VA, 1 << 29)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert runs == [(hbm(0), 1 << 30)]
    assert split == [(hbm(0), 1 << 29)]
    assert table.extent_count == 2
    assert peak < 64 * 1024
