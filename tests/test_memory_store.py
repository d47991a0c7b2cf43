"""Functional and timing-only memory stores."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from kernbench.errors import AllocationError, MemoryFaultError
from kernbench.memory import MemoryKind, MemoryStore, NullStore, PhysAddr

BASE = PhysAddr(0, 0, 1, 2, MemoryKind.HBM, 0x10000)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16, np.float32, np.float64, bool])
def test_write_read_round_trip(dtype: type) -> None:
    store = MemoryStore()
    store.create(BASE, 4096)
    data = (np.arange(24).reshape(4, 6) % 7).astype(dtype)
    store.write(BASE + 64, data)
    raw = store.read(BASE + 64, data.nbytes)
    assert raw.dtype == np.uint8
    np.testing.assert_array_equal(raw.view(dtype).reshape(4, 6), data)


def test_non_contiguous_arrays_and_bytes() -> None:
    store = MemoryStore()
    store.create(BASE, 256)
    matrix = np.arange(16, dtype=np.int16).reshape(4, 4)
    store.write(BASE, matrix.T)
    np.testing.assert_array_equal(store.read(BASE, 32).view(np.int16).reshape(4, 4), matrix.T)
    store.write(BASE + 100, b"\x01\x02\x03")
    assert store.read(BASE + 99, 5).tolist() == [0, 1, 2, 3, 0]


def test_unwritten_memory_reads_zero_and_read_is_a_copy() -> None:
    store = MemoryStore()
    store.create(BASE, 128)
    assert store.read(BASE, 128).tolist() == [0] * 128
    copy = store.read(BASE, 4)
    copy[:] = 9
    assert store.read(BASE, 4).tolist() == [0] * 4


def test_view_is_writable_in_place() -> None:
    store = MemoryStore()
    store.create(BASE, 64)
    store.view(BASE + 8, 8).view(np.float32)[:] = [1.5, -2.0]
    assert store.read(BASE + 8, 8).view(np.float32).tolist() == [1.5, -2.0]


def test_segments_are_independent() -> None:
    store = MemoryStore()
    other = PhysAddr(0, 0, 1, 3, MemoryKind.HBM, 0x10000)
    store.create(BASE, 16)
    store.create(other, 16)
    store.write(BASE, np.full(16, 7, np.uint8))
    assert store.read(other, 16).tolist() == [0] * 16


@pytest.mark.parametrize("store", [MemoryStore(), NullStore()], ids=["memory", "null"])
def test_out_of_segment_access_faults_and_names_nearest(store: MemoryStore | NullStore) -> None:
    store.create(BASE, 256, label="weights")
    with pytest.raises(MemoryFaultError) as info:
        store.write(BASE + 200, np.zeros(64, np.uint8))
    message = str(info.value)
    assert str(BASE + 200) in message
    assert "nearest segment: sip0.cube1.pe2.hbm+0x10000" in message
    assert "weights" in message
    with pytest.raises(MemoryFaultError, match="nearest segment"):
        store.read(BASE + (-1), 1)
    with pytest.raises(MemoryFaultError, match="nearest segment"):
        store.read(BASE + 256, 1)
    store.release(BASE)
    with pytest.raises(MemoryFaultError, match="no segments are live"):
        store.read(BASE, 1)


def test_access_spanning_two_segments_faults() -> None:
    store = MemoryStore()
    store.create(BASE, 256)
    store.create(BASE + 256, 256)
    with pytest.raises(MemoryFaultError):
        store.read(BASE + 200, 100)


def test_create_and_release_errors() -> None:
    store = MemoryStore()
    store.create(BASE, 256)
    with pytest.raises(AllocationError, match="overlaps"):
        store.create(BASE + 128, 256)
    with pytest.raises(AllocationError, match="overlaps"):
        store.create(BASE + (-128), 256)
    with pytest.raises(AllocationError, match="positive"):
        store.create(BASE + 1024, 0)
    store.release(BASE)
    with pytest.raises(AllocationError, match="no live segment"):
        store.release(BASE)
    store.create(BASE + 128, 256)


def test_release_drops_bytes() -> None:
    store = MemoryStore()
    store.create(BASE, 16)
    store.write(BASE, np.full(16, 5, np.uint8))
    store.release(BASE)
    store.create(BASE, 16)
    assert store.read(BASE, 16).tolist() == [0] * 16


def test_null_store_checks_but_keeps_no_bytes() -> None:
    store = NullStore()
    assert not store.stores_bytes and MemoryStore().stores_bytes
    gib = 1 << 30
    tracemalloc.start()
    try:
        store.create(BASE, gib)
        store.write(BASE, np.broadcast_to(np.float32(1.0), (gib // 4,)))
        store.check(BASE, gib, operation="write")
        result = store.read(BASE, gib)
        view = store.view(BASE, gib)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result is None and view is None
    assert peak < 10 * 2**20
    with pytest.raises(MemoryFaultError):
        store.write(BASE + 1, np.broadcast_to(np.float32(1.0), (gib // 4,)))


def test_memory_store_untouched_big_segment_costs_nothing() -> None:
    store = MemoryStore()
    tracemalloc.start()
    try:
        store.create(BASE, 1 << 30)
        store.read(BASE + 4096, 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20


def test_a_kept_array_filling_a_fresh_segment_becomes_its_bytes() -> None:
    store = MemoryStore()
    store.create(BASE, 64)
    data = np.arange(16, dtype=np.float32)
    store.write(BASE, data, keep=True)
    assert np.shares_memory(store.view(BASE, 64), data)  # held, not copied
    store.view(BASE, 4)[:] = 0  # in-place work on the segment lands in it
    np.testing.assert_array_equal(store.read(BASE, 64).view(np.float32)[1:], data[1:])
    assert store.read(BASE, 4).view(np.float32)[0] == 0


@pytest.mark.parametrize(
    ("size", "offset", "written_before", "keep"),
    [(64, 0, False, False), (128, 0, False, True), (128, 64, False, True), (64, 0, True, True)],
    ids=["not-kept", "part-of-segment", "at-an-offset", "segment-already-written"],
)
def test_other_writes_copy(size: int, offset: int, written_before: bool, keep: bool) -> None:
    store = MemoryStore()
    store.create(BASE, size)
    if written_before:
        store.write(BASE, np.ones(64, dtype=np.uint8))
    data = np.arange(16, dtype=np.float32)
    store.write(BASE + offset, data, keep=keep)
    assert not np.shares_memory(store.view(BASE + offset, 64), data)
    data[:] = -1  # the caller's array is its own again
    np.testing.assert_array_equal(
        store.read(BASE + offset, 64).view(np.float32), np.arange(16, dtype=np.float32)
    )
