"""Virtual address allocation in whole pages."""

from __future__ import annotations

import pytest

from kernbench.errors import AllocationError, ConfigError, OutOfMemoryError
from kernbench.memory import VirtualAllocator

PAGE = 4096


def test_allocations_are_page_aligned_and_whole_pages() -> None:
    vas = VirtualAllocator(PAGE)
    a = vas.alloc(1)
    b = vas.alloc(PAGE + 1)
    c = vas.alloc(PAGE)
    assert a == 1 << 32
    assert b == a + PAGE
    assert c == b + 2 * PAGE
    assert all(va % PAGE == 0 for va in (a, b, c))
    assert vas.size_of(b) == 2 * PAGE
    assert vas.used == 4 * PAGE


def test_free_coalesces_and_reuses() -> None:
    vas = VirtualAllocator(PAGE, base=0x10000, size=4 * PAGE)
    a, b, c, d = (vas.alloc(PAGE) for _ in range(4))
    with pytest.raises(OutOfMemoryError):
        vas.alloc(1)
    vas.free(b)
    vas.free(c)
    assert vas.alloc(2 * PAGE) == b
    vas.free(b)
    vas.free(a)
    vas.free(d)
    assert vas.alloc(4 * PAGE) == 0x10000


def test_double_free_names_the_va() -> None:
    vas = VirtualAllocator(PAGE)
    va = vas.alloc(100)
    vas.free(va)
    with pytest.raises(AllocationError, match=f"{va:#x}"):
        vas.free(va)
    with pytest.raises(AllocationError, match="outside"):
        vas.free(0)


@pytest.mark.parametrize("page_size", [0, 3000, -4096, 4096.0])
def test_page_size_must_be_power_of_two(page_size: object) -> None:
    with pytest.raises(ConfigError, match=r"page_size.*4096"):
        VirtualAllocator(page_size)  # type: ignore[arg-type]


def test_base_must_be_page_aligned() -> None:
    with pytest.raises(ConfigError, match="base"):
        VirtualAllocator(PAGE, base=100)


def test_pages_helper() -> None:
    vas = VirtualAllocator(PAGE)
    assert list(vas.pages(0x1000, 1)) == [0x1000]
    assert list(vas.pages(0x1FFF, 2)) == [0x1000, 0x2000]
    assert list(vas.pages(0x2000, 2 * PAGE)) == [0x2000, 0x3000]
    assert len(vas.pages(0, 1 << 30)) == (1 << 30) // PAGE
    assert list(vas.pages(0x1000, 0)) == []
