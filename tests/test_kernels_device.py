"""Kernels launched on device tensors: where programs run, what they cost, what they compute.

A ``@jit`` kernel whose arguments include device tensors runs on the
simulated PEs (kernbench/kernels/device.py) and returns a
``DeviceLaunchResult``.  These tests pin its behaviour from the outside:
time against the topology's numbers (memory-bound and compute scaling, PEs in
parallel, programs on one PE in sequence), placement of programs on the PEs
holding the data and on SPMD cores, equal timing in functional and
timing-only mode, errors, and stores into replicated tensors.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import kernbench.kernels.language as tl
from kernbench.errors import KernelError, UnsupportedNameError
from kernbench.kernels import cdiv, jit, nc, spmd_dim
from kernbench.kernels.device import DeviceLaunchResult
from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext

TINY = "tiny"
DEFAULT = "default"
PS_PER_S = 10**12

SHARDED = DPPolicy(cube="row_wise", pe="row_wise")


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@jit
def copy_unmasked(src_ptr, dst_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets))


@jit
def fill_kernel(out_ptr, value, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK,), tl.float32) + value, mask=offsets < n)


@jit
def rows_from_vector(out_ptr, src_ptr, n, BLOCK: tl.constexpr):
    # Row ``pid`` of ``out`` (shape (programs, n)) gets a copy of the vector ``src``.
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    row = tl.load(src_ptr + offsets, mask=mask)
    tl.store(out_ptr + tl.program_id(0) * n + offsets, row, mask=mask)


@jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # Row-major A (M, K), B (K, N), C (M, N).
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None] * K + ks[None, :],
            mask=(rm[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + rn[None, :],
            mask=(ks[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def vector_add(
    ctx: RuntimeContext, n: int, block: int, dp: DPPolicy | None = None, values: bool = False
) -> tuple[DeviceLaunchResult, list]:
    tensors = [ctx.empty(n, "float32", dp=dp, name=name) for name in ("x", "y", "out")]
    if values:
        rng = np.random.default_rng(0)
        for t in tensors[:2]:
            t.copy_(rng.random(n, dtype=np.float32))
    result = add_kernel[(cdiv(n, block),)](*tensors, n, BLOCK=block)
    return result, tensors


def matmul_time(size: int, block: tuple[int, int, int]) -> int:
    ctx = RuntimeContext(TINY, timing_only=True)
    a, b, c = (ctx.empty((size, size), "float32") for _ in range(3))
    bm, bn, bk = block
    result = matmul_kernel[(cdiv(size, bm), cdiv(size, bn))](
        a, b, c, size, size, size, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk
    )
    return result.elapsed_ps


def pe_of(placement) -> str:
    return placement.pe_name


# ----------------------------------------------------------------------------- results


def test_a_launch_on_device_tensors_returns_a_device_launch_result():
    ctx = RuntimeContext(TINY)
    before = ctx.now
    result, (x, y, out) = vector_add(ctx, 1000, 256, values=True)
    assert isinstance(result, DeviceLaunchResult)
    assert result.start_ps >= before
    assert result.end_ps == ctx.now
    assert result.elapsed_ps == result.end_ps - result.start_ps > 0
    assert result.record.kernel == "add_kernel"
    assert [p.pid for p in result.record.programs] == [(0,), (1,), (2,), (3,)]
    # The ragged last block: 1000 - 3*256 = 232 active lanes of 256.
    assert result.record.programs[3].lanes_loaded == 2 * 232
    assert result.record.bytes_loaded == 2 * 1000 * 4
    assert result.record.bytes_stored == 1000 * 4
    np.testing.assert_array_equal(out.numpy(), x.numpy() + y.numpy())


# ----------------------------------------------------------------------------- time


def test_memory_bound_kernel_runs_at_the_hbm_slice_bandwidth():
    # Three tensors on one PE share that PE's HBM slice port; reads and writes
    # share it too, so 3·n·4 bytes cross one port of slice_bandwidth.
    ctx = RuntimeContext(DEFAULT, timing_only=True)
    n = 2**22
    result, tensors = vector_add(ctx, n, 2**16)
    nodes = {p.memory_node for t in tensors for p in t.placements}
    assert len(nodes) == 1
    bandwidth = ctx.topology.cube.hbm.slice_bandwidth
    ideal_ps = 3 * n * 4 * PS_PER_S / bandwidth
    assert ideal_ps <= result.elapsed_ps <= 1.10 * ideal_ps


def test_matmul_time_scales_8x_when_m_n_k_double():
    # Work (FLOPs and bytes) grows 8x; the fixed costs of a launch (dispatch) and
    # of each program (launch overhead, memory latency) grow at most 4x, so the
    # sizes are large enough for them to be small.
    block = (128, 128, 64)
    small, large = matmul_time(512, block), matmul_time(1024, block)
    assert large / small == pytest.approx(8, rel=0.15)


def test_matmul_time_ratio_approaches_8_as_fixed_costs_are_amortised():
    block = (64, 64, 32)
    t = {s: matmul_time(s, block) for s in (64, 128, 256, 512)}
    ratios = [t[2 * s] / t[s] for s in (64, 128, 256)]
    assert ratios == sorted(ratios)
    assert all(r < 8 for r in ratios)


def test_pes_run_in_parallel():
    n, block = 2**20, 2**15
    one, _ = vector_add(RuntimeContext(TINY, timing_only=True), n, block)
    two, _ = vector_add(
        RuntimeContext(TINY, timing_only=True), n, block, DPPolicy(pe="row_wise", num_pes=2)
    )
    assert len(one.placement) == 1
    assert len(two.placement) == 2
    assert two.elapsed_ps / one.elapsed_ps == pytest.approx(0.5, rel=0.20)


def test_programs_on_one_pe_run_one_after_another():
    block = 2**14
    elapsed = {}
    for programs in (1, 2, 4, 8, 16):
        result, _ = vector_add(RuntimeContext(TINY, timing_only=True), programs * block, block)
        assert list(result.placement) == ["sip0.cube0.pe0"]
        elapsed[programs] = result.elapsed_ps
    per_program = [(elapsed[2 * g] - elapsed[g]) / g for g in (1, 2, 4, 8)]
    assert per_program[0] > 0
    assert max(per_program) == pytest.approx(min(per_program), rel=0.01)


def test_functional_and_timing_only_modes_give_the_same_time():
    def launches(ctx: RuntimeContext) -> list[DeviceLaunchResult]:
        results = [vector_add(ctx, 1000, 256)[0], vector_add(ctx, 4096, 256, SHARDED)[0]]
        x = ctx.empty((37, 100), "float32")
        y = ctx.empty((37, 100), "float32")
        results.append(softmax_kernel[(37,)](y, x, 100, BLOCK=128))
        a, b, c = ctx.empty((100, 50)), ctx.empty((50, 70)), ctx.empty((100, 70))
        grid = (cdiv(100, 32), cdiv(70, 32))
        results.append(
            matmul_kernel[grid](a, b, c, 100, 70, 50, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
        )
        return results

    functional = launches(RuntimeContext(DEFAULT))
    timing_only = launches(RuntimeContext(DEFAULT, timing_only=True))
    for f, t in zip(functional, timing_only, strict=True):
        assert f.elapsed_ps == t.elapsed_ps
        assert f.placement == t.placement
        assert f.record.programs == t.record.programs


# ----------------------------------------------------------------------------- placement


def test_sharded_programs_run_on_the_pe_holding_their_block():
    ctx = RuntimeContext(DEFAULT)
    pes = ctx.topology.num_pes
    n, block = pes * 1024, 1024
    result, (x, _, _) = vector_add(ctx, n, block, SHARDED, values=True)
    holders = {pe_of(p): p.shard.index[0] for p in x.placements}
    assert set(result.placement) == set(holders)  # every shard holder, nothing else
    for pe, pids in result.placement.items():
        assert len(pids) == 1  # one block per PE
        rows = holders[pe]
        assert (rows.start, rows.stop) == (pids[0][0] * block, (pids[0][0] + 1) * block)


def test_sharded_programs_are_spread_in_contiguous_runs():
    ctx = RuntimeContext(DEFAULT)
    result, (x, _, _) = vector_add(ctx, 98432, 1024, SHARDED)  # 97 programs, 128 shards
    holders = {pe_of(p) for p in x.placements}
    assert set(result.placement) <= holders
    assert len(result.placement) == 97  # no PE runs two of the 97 programs
    order = [pid for pids in result.placement.values() for pid in pids]
    assert sorted(order) == [(i,) for i in range(97)]


def test_spmd_dim_puts_even_programs_on_one_pe_and_odd_on_another():
    ctx = RuntimeContext(TINY)
    n = 8 * 256
    x = ctx.zeros(n)
    out = ctx.empty(n)
    result = copy_unmasked[(spmd_dim(4, nc(2)),)](x, out, BLOCK=256)
    assert result.record.grid.dims == (8,)
    assert result.placement == {
        "sip0.cube0.pe0": ((0,), (2,), (4,), (6,)),
        "sip0.cube0.pe1": ((1,), (3,), (5,), (7,)),
    }
    assert result.record.cores == (0, 1, 0, 1, 0, 1, 0, 1)


def test_spmd_dim_on_a_2d_grid_splits_only_its_axis():
    ctx = RuntimeContext(TINY)
    a = ctx.zeros((4, 3 * 128))
    out = ctx.empty((4, 3 * 128))

    @jit
    def tile_copy(src_ptr, dst_ptr, n_cols, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * n_cols + tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets))

    result = tile_copy[(spmd_dim(2, nc(2)), 3)](a, out, 3 * 128, BLOCK=128)
    by_pe = {pe: {pid[0] for pid in pids} for pe, pids in result.placement.items()}
    assert by_pe == {"sip0.cube0.pe0": {0, 2}, "sip0.cube0.pe1": {1, 3}}
    assert all(len(pids) == 6 for pids in result.placement.values())


def test_the_language_module_has_nkis_grid_helpers_as_nl_spmd_dim_and_nl_nc():
    """NKI writes its grid with the language module's helpers; so does a ported kernel."""
    ctx = RuntimeContext(TINY)
    x = ctx.zeros(8 * 256)
    out = ctx.empty(8 * 256)
    result = copy_unmasked[tl.spmd_dim(4, tl.nc(2)),](x, out, BLOCK=256)
    assert result.record.cores == (0, 1, 0, 1, 0, 1, 0, 1)


def test_a_name_the_language_lacks_is_an_error_saying_what_to_use():
    with pytest.raises(UnsupportedNameError, match=r"tl\.shared_hbm is not in KernBench; make"):
        _ = tl.shared_hbm
    with pytest.raises(UnsupportedNameError, match=r"tl\.affine_range .*Python's range"):
        _ = tl.affine_range
    assert not hasattr(tl, "no_such_name")


# ----------------------------------------------------------------------------- errors


@jit
def nki_indexed_copy(a, c):
    ix = tl.arange(0, 4)[:, None]
    iy = tl.arange(0, 8)[None, :]
    tl.store(c[ix, iy], tl.load(a[ix, iy]))


def test_a_pointer_indexed_with_index_blocks_as_nki_indexes_says_to_offset_it():
    ctx = RuntimeContext(TINY)
    a, c = ctx.zeros((4, 8)), ctx.empty((4, 8))
    with pytest.raises(KernelError, match=r"program \(0,\): a pointer is indexed only with None"):
        nki_indexed_copy[(1,)](a, c)


def test_an_unmasked_out_of_bounds_load_names_kernel_program_and_offset():
    ctx = RuntimeContext(TINY)
    src = ctx.zeros(1000, name="src")
    dst = ctx.empty(1024, name="dst")
    with pytest.raises(KernelError) as info:
        copy_unmasked[(4,)](src, dst, BLOCK=256)
    message = str(info.value)
    assert "copy_unmasked" in message
    assert "program (3,)" in message
    assert "offset 1000" in message
    assert "'src'" in message
    # The context is still usable after the failed launch.
    result, (x, y, out) = vector_add(ctx, 1000, 256, values=True)
    np.testing.assert_array_equal(out.numpy(), x.numpy() + y.numpy())


def test_a_four_dimensional_grid_is_a_kernel_error():
    ctx = RuntimeContext(TINY)
    x, out = ctx.zeros(256), ctx.empty(256)
    with pytest.raises(KernelError, match="4 dimensions"):
        copy_unmasked[(1, 1, 1, 1)](x, out, BLOCK=256)


def test_a_non_power_of_two_arange_is_a_kernel_error():
    ctx = RuntimeContext(TINY)
    x, out = ctx.zeros(300), ctx.empty(300)
    with pytest.raises(KernelError, match="not a power of two"):
        copy_unmasked[(1,)](x, out, BLOCK=300)


def test_tensors_of_another_context_are_a_kernel_error():
    ctx, other = RuntimeContext(TINY), RuntimeContext(TINY)
    x = ctx.zeros(256, name="mine")
    out = other.empty(256, name="theirs")
    with pytest.raises(KernelError, match="'theirs' belongs to another context"):
        copy_unmasked[(1,)](x, out, BLOCK=256)


# ----------------------------------------------------------------------------- replicas


def test_a_store_into_a_replicated_tensor_updates_every_copy():
    ctx = RuntimeContext(TINY)
    n = 256
    t = ctx.empty(n, "float32", dp=DPPolicy(), name="replicated")  # replicate at every level
    assert len(t.placements) == ctx.topology.num_pes

    def copies() -> list[np.ndarray]:
        return [ctx.store.view(p.pa, p.shard.nbytes).view(np.float32).copy() for p in t.placements]

    fill_kernel[(1,)](t, 3.5, n, BLOCK=256)
    for copy in copies():
        np.testing.assert_array_equal(copy, np.full(n, 3.5, np.float32))
    np.testing.assert_array_equal(t.numpy(), np.full(n, 3.5, np.float32))

    # Each PE reads its own copy: make copy 2 differ behind the kernel's back, then
    # read the tensor from every PE (program i runs on PE i, the holder of row i).
    pe2 = t.placements[2]
    ctx.store.write(pe2.pa, np.full(n, 7.0, np.float32).view(np.uint8))
    rows = ctx.empty((4, n), "float32", dp=DPPolicy(pe="row_wise"))
    result = rows_from_vector[(4,)](rows, t, n, BLOCK=256)
    assert result.placement == {f"sip0.cube0.pe{i}": ((i,),) for i in range(4)}
    seen = rows.numpy()[:, 0]
    np.testing.assert_array_equal(seen, [3.5, 3.5, 7.0, 3.5])

    # A kernel store writes every copy again, so they agree once more.
    fill_kernel[(1,)](t, -1.25, n, BLOCK=256)
    for copy in copies():
        np.testing.assert_array_equal(copy, np.full(n, -1.25, np.float32))
    rows_from_vector[(4,)](rows, t, n, BLOCK=256)
    np.testing.assert_array_equal(rows.numpy(), np.full((4, n), -1.25, np.float32))


# ----------------------------------------------------------------- regressions of fixed bugs


def test_launch_record_counts_bfloat16_elements_as_two_bytes():
    ctx = RuntimeContext(TINY)
    src = ctx.zeros(1024, "bfloat16")
    dst = ctx.empty(1024, "bfloat16")
    result = copy_unmasked[(4,)](src, dst, BLOCK=256)
    assert result.record.bytes_loaded == 1024 * 2
    assert result.record.bytes_stored == 1024 * 2


def test_a_bfloat16_device_pointer_has_bfloat16_element_type():
    ctx = RuntimeContext(TINY)
    src = ctx.zeros(256, "bfloat16")
    seen = []

    @jit
    def element_type(ptr, BLOCK: tl.constexpr):
        seen.append(ptr.dtype.element_ty)

    element_type[(1,)](src, BLOCK=256)
    assert seen == [tl.bfloat16]


def test_freed_tensors_memory_is_returned_after_launches():
    ctx = RuntimeContext(TINY)
    n = 2**20  # 4 MiB of float32
    ones = np.ones(n, np.float32)
    tracemalloc.start()
    try:
        for _ in range(6):
            t = ctx.empty(n, "float32")
            t.copy_(ones)
            copy_unmasked[(1,)](t, t, BLOCK=256)
            t.free()
            del t
        ctx.empty(1)  # drains pending releases
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 2 * n * 4
