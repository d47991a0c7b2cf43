"""A number a user passes never sizes unbounded work: it works, or fails fast and clearly.

Tensor sizes (timing-only carries sizes, not bytes; functional mode holds real
bytes on the host, within the host memory available), kernel grids (the
interpreter runs programs one at a time), block sizes inside kernels, world
sizes and group sizes are each bounded where they enter.
"""

from __future__ import annotations

import os
import time
import tracemalloc

import numpy as np
import pytest

import kernbench
import kernbench.kernels.language as tl
import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.multiprocessing as mp
from kernbench.errors import (
    DistributedError,
    KernBenchError,
    KernelError,
    OutOfMemoryError,
    RankError,
    TensorError,
)
from kernbench.kernels import MAX_BLOCK_ELEMENTS, MAX_GRID_PROGRAMS, ShapeOnlyBuffer, jit
from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext, sizes, use_context

DEFAULT = "default"
TINY = "tiny"
GiB = 2**30
# default.yaml: 16 cubes x 8 PEs of 6 GB each; 128 one-GiB shards fit.
SPREAD = DPPolicy(cube="row_wise", pe="row_wise")
FLOATS_128GIB = 128 * GiB // 4


def _in_rank(fn, *, timing_only: bool, topology: str = DEFAULT):
    """``fn()`` on one rank; its return value, or the error it raised (unwrapped)."""
    try:
        result = kernbench.simulate(fn, topology=topology, world_size=1, timing_only=timing_only)
    except RankError as exc:
        return exc.original
    return result.returns[0]


# -- a 128 GiB tensor -----------------------------------------------------------------------
def test_a_128_gib_tensor_in_timing_only_mode_allocates_nothing():
    def body() -> tuple:
        t = torch.empty(FLOATS_128GIB, dp=SPREAD)
        z = torch.zeros(FLOATS_128GIB, dp=SPREAD)
        r = torch.rand(FLOATS_128GIB, dp=SPREAD)
        return t.nbytes, z.nbytes, r.nbytes

    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = _in_rank(body, timing_only=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result == (128 * GiB,) * 3
    assert peak < 64 * 2**20
    assert time.perf_counter() - started < 10


def test_a_128_gib_tensor_in_functional_mode_is_an_out_of_memory_error(monkeypatch):
    monkeypatch.setattr("kernbench.runtime.sizes.available_host_memory", lambda: 16 * GiB)
    error = _in_rank(lambda: torch.empty(FLOATS_128GIB, dp=SPREAD), timing_only=False)
    assert isinstance(error, OutOfMemoryError)
    text = str(error)
    assert "tensor 't1'" in text and "128GiB" in text
    assert "16GiB of host memory" in text
    assert "--timing-only" in text


def test_the_host_memory_budget_counts_live_tensors_and_frees_them():
    ctx = RuntimeContext(TINY, host_memory_limit=3 * 2**20)
    first = ctx.empty((2**20,), "uint8")
    second = ctx.empty((2**20,), "uint16")
    with pytest.raises(OutOfMemoryError) as info:
        ctx.empty((2**20,), "uint8")
    text = str(info.value)
    assert "tensor 't3'" in text and "1MiB" in text
    assert "3MiB of host memory" in text and "3MiB held by live tensors" in text
    del second
    third = ctx.empty((2**20,), "uint16")  # the dropped tensor's bytes are back
    assert not first.is_freed and not third.is_freed


def test_the_default_host_memory_budget_is_what_the_host_has_available():
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < sizes.available_host_memory() <= physical
    assert 0 < RuntimeContext(TINY).host_memory_limit <= physical


def test_a_timing_only_context_has_no_host_memory_budget():
    ctx = RuntimeContext(TINY, timing_only=True, host_memory_limit=1)
    assert ctx.empty((2**20,), "float32").nbytes == 4 * 2**20


def test_timing_only_copy_in_does_not_materialise_a_broadcast_source():
    ctx = RuntimeContext(DEFAULT, timing_only=True)
    t = ctx.empty((2**30,), "bfloat16", dp=SPREAD)
    tracemalloc.start()
    try:
        t.copy_(np.broadcast_to(np.float32(1), (2**30,)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


# -- shapes ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((0, 10**30), f"dimension 1 is {10**30};"),
        ((2**32, 2**32), "has 18446744073709551616 elements"),
        ((1,) * 65, "65 dimensions"),
    ],
    ids=["huge-dim", "numel-overflow", "too-many-dims"],
)
def test_shapes_beyond_64_bit_sizes_are_refused(shape, message):
    ctx = RuntimeContext(TINY, timing_only=True)
    with pytest.raises(TensorError) as info:
        ctx.empty(shape)
    assert message in str(info.value)


@pytest.mark.parametrize("timing_only", [False, True], ids=["functional", "timing-only"])
def test_torch_empty_of_10_to_the_20_is_refused_at_once(timing_only: bool):
    error = _in_rank(lambda: torch.empty(10**20), timing_only=timing_only)
    assert isinstance(error, TensorError)
    assert "dimension 0 is 100000000000000000000; sizes are 64-bit" in str(error)


@pytest.mark.parametrize("timing_only", [False, True], ids=["functional", "timing-only"])
def test_torch_empty_of_10_to_the_18_is_an_out_of_memory_error(timing_only: bool):
    error = _in_rank(lambda: torch.empty(10**18), timing_only=timing_only)
    assert isinstance(error, OutOfMemoryError)
    assert "tensor 't1' (shape (1000000000000000000,), float32" in str(error)


def test_torch_arithmetic_on_more_elements_than_32_bit_offsets_fails_up_front():
    def body() -> None:
        t = torch.empty(2**31, dp=SPREAD)
        t.fill_(1)

    started = time.perf_counter()
    error = _in_rank(body, timing_only=True)
    assert time.perf_counter() - started < 5
    assert isinstance(error, KernBenchError)
    assert "2147483648 elements" in str(error) and "2147483647" in str(error)


# -- kernel grids ----------------------------------------------------------------------------------
@jit
def _store_pid(out_ptr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, pid)


def test_a_huge_grid_on_the_host_is_refused_before_any_program_runs():
    out = ShapeOnlyBuffer("out", np.int32, 10**12)
    started = time.perf_counter()
    with pytest.raises(KernelError) as info:
        _store_pid[(10**12,)](out)
    assert time.perf_counter() - started < 1
    text = str(info.value)
    assert "kernel '_store_pid'" in text and "1000000000000 programs" in text
    assert f"at most {MAX_GRID_PROGRAMS} programs" in text and "smaller grid" in text


@pytest.mark.parametrize("timing_only", [False, True], ids=["functional", "timing-only"])
def test_a_huge_grid_on_the_device_is_refused_before_any_program_runs(timing_only: bool):
    def body() -> None:
        out = torch.empty(1024, dtype=torch.int32)
        _store_pid[(10**6, 10**6)](out)

    started = time.perf_counter()
    error = _in_rank(body, timing_only=timing_only)
    assert time.perf_counter() - started < 5
    assert isinstance(error, KernelError)
    assert "1000000000000 programs" in str(error)
    assert f"at most {MAX_GRID_PROGRAMS} programs" in str(error)


def test_a_grid_at_the_limit_is_accepted():
    from kernbench.kernels import Grid

    grid = Grid.from_spec((MAX_GRID_PROGRAMS // 4, 4), "k")
    assert grid.num_programs == MAX_GRID_PROGRAMS
    grid.check_size("k")
    with pytest.raises(KernelError):
        Grid.from_spec((MAX_GRID_PROGRAMS + 1,), "k").check_size("k")


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ((-1,), "axis 0 must be a positive integer, got -1"),
        ((0,), "axis 0 must be a positive integer, got 0"),
        ((4, 0), "axis 1 must be a positive integer, got 0"),
        ((2.5,), "axis 0 must be a positive integer, got 2.5"),
        ((np.float32(2),), "axis 0 must be a positive integer, got np.float32(2.0)"),
        ((True,), "axis 0 must be a positive integer, got True"),
        (("3",), "axis 0 must be a positive integer, got '3'"),
        ((1, 2, 3, 4), "has 4 dimensions; a grid has 1 to 3"),
    ],
)
def test_a_grid_of_bad_dimensions_is_a_clear_error(grid, message):
    out = np.zeros(8, np.int32)
    with pytest.raises(KernelError) as info:
        _store_pid[grid](out)
    assert message in str(info.value)
    assert "_store_pid" in str(info.value)


# -- blocks inside a kernel ------------------------------------------------------------------
@jit
def _makes_block(out_ptr, WHAT: tl.constexpr, N: tl.constexpr):
    if WHAT == "arange":
        values = tl.arange(0, N)
    elif WHAT == "zeros":
        values = tl.zeros((N, N), tl.float32)
    elif WHAT == "broadcast":
        column = tl.arange(0, N)
        values = column[:, None] + column[None, :]
    elif WHAT == "pointer":
        column = tl.arange(0, N)
        values = tl.load(out_ptr + column[:, None] + column[None, :])
    else:
        values = tl.full((N, -1), 0, tl.float32)
    tl.store(out_ptr, tl.sum(values))


@pytest.mark.parametrize(
    ("what", "n", "elements"),
    [
        ("arange", 2**40, 2**40),
        ("zeros", 2**20, 2**40),
        ("broadcast", 2**20, 2**40),
        ("pointer", 2**20, 2**40),
    ],
)
def test_a_block_larger_than_the_limit_is_refused_before_it_is_made(what, n, elements):
    out = np.zeros(1, np.float32)
    started = time.perf_counter()
    with pytest.raises(KernelError) as info:
        _makes_block[(1,)](out, WHAT=what, N=n)
    assert time.perf_counter() - started < 2
    assert f"{elements} elements" in str(info.value)
    assert f"at most {MAX_BLOCK_ELEMENTS}" in str(info.value)


def test_a_block_with_a_negative_dimension_is_a_clear_error():
    with pytest.raises(KernelError, match="block dimension -1 is negative"):
        _makes_block[(1,)](np.zeros(1, np.float32), WHAT="negative", N=4)


# -- world and group sizes -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("size", "message"),
    [
        (10**12, "world size 1000000000000 does not fit"),
        (2.5, "world size must be a whole number of ranks, got 2.5"),
        (True, "world size must be a whole number of ranks, got True"),
        (-3, "world size must be at least 1"),
    ],
)
def test_bad_world_sizes_are_refused(size, message):
    with pytest.raises(KernBenchError, match=message):
        kernbench.simulate(lambda: None, topology=TINY, world_size=size)


def test_spawning_more_processes_than_devices_is_refused_up_front():
    ctx = RuntimeContext(TINY, timing_only=True)
    started = time.perf_counter()
    too_many = pytest.raises(DistributedError, match="nprocs 1000000000000 does not fit")
    with use_context(ctx), too_many:
        mp.spawn(lambda rank: None, nprocs=10**12)
    assert time.perf_counter() - started < 1


def test_a_group_longer_than_the_world_is_refused_without_listing_it():
    def body() -> None:
        dist.init_process_group()
        dist.new_group(range(10**15))

    started = time.perf_counter()
    error = _in_rank(body, timing_only=True, topology=TINY)
    assert time.perf_counter() - started < 5
    assert isinstance(error, DistributedError)
    assert "must be distinct and in 0..0, so at most 1 of them" in str(error)


def test_the_virtual_address_space_grows_with_the_machine():
    """64 TiB at least; a machine with more memory than half that gets the power of two
    at least twice its memory (cluster128k: 1.15 PiB of HBM, SRAM and TCM -> 4 PiB), so
    every rank of a 131,072-PE machine can hold a 1 GiB buffer."""
    from kernbench.runtime import RuntimeContext
    from kernbench.runtime.context import MIN_VA_BYTES
    from kernbench.topology import load_topology

    assert RuntimeContext(load_topology("rack"), timing_only=True).va.size == MIN_VA_BYTES
    ctx = RuntimeContext(load_topology("cluster128k"), timing_only=True)
    total = ctx.memory.total_bytes
    # 4096 chips x 4 cubes x (72 GiB HBM + 32 MiB SRAM + 8 PEs x 16 MB TCM)
    assert total == 4096 * 4 * ((72 << 30) + (32 << 20) + 8 * 16 * 10**6)
    assert ctx.va.size == 1 << 52 and 2 * total <= ctx.va.size < 4 * total
    assert ctx.va.alloc(131072 << 30) >= ctx.va.base  # 128 TiB: over the old fixed 64 TiB
