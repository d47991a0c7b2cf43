"""What the interpreter records per program, timing-only buffers, SPMD grids, launchers."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from test_kernels_lang import MATMUL_BLOCKS, add_kernel, run_matmul

import kernbench.kernels.language as tl
from kernbench.errors import KernelError
from kernbench.kernels import (
    ArrayBuffer,
    Grid,
    KernelLaunch,
    LaunchRecord,
    ProgramRecorder,
    ShapeOnlyBuffer,
    cdiv,
    get_launcher,
    jit,
    nc,
    run_on_host,
    spmd_dim,
    use_launcher,
)


def launch_add(x, y, out, n, block):
    return add_kernel[lambda meta: (cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=block)


@pytest.mark.parametrize("n", [98432, 1000])
def test_vector_add_records_exactly_three_n_itemsize_bytes(n):
    x = np.ones(n, np.float32)
    record = launch_add(x, x, np.empty_like(x), n, 1024)
    assert isinstance(record, LaunchRecord)
    programs = cdiv(n, 1024)
    assert len(record.programs) == programs
    assert record.bytes_loaded == 2 * n * 4
    assert record.bytes_stored == n * 4
    assert record.bytes_moved == 3 * n * x.itemsize
    assert sum(p.loads for p in record.programs) == 2 * programs
    assert sum(p.stores for p in record.programs) == programs
    assert sum(p.lanes_masked_off for p in record.programs) == 3 * (programs * 1024 - n)
    # one float add per issued lane; index and mask math is integer work
    assert record.vector_flops == programs * 1024
    assert all(p.int_ops == 1 + 5 * 1024 for p in record.programs)
    last = record.programs[-1]
    assert [(t.buffer, t.memory) for t in last.traffic] == [
        ("x_ptr", "hbm"),
        ("y_ptr", "hbm"),
        ("out_ptr", "hbm"),
    ]


def test_matmul_records_flops_of_the_issued_blocks():
    rng = np.random.default_rng(4)
    M, N, K = 100, 70, 50
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    _, record = run_matmul(a, b)
    bm, bn, bk = MATMUL_BLOCKS["BLOCK_M"], MATMUL_BLOCKS["BLOCK_N"], MATMUL_BLOCKS["BLOCK_K"]
    padded = (cdiv(M, bm) * bm, cdiv(N, bn) * bn, cdiv(K, bk) * bk)
    assert padded == (128, 96, 64)
    assert record.matrix_flops == 2 * 128 * 96 * 64
    assert sum(p.dots for p in record.programs) == 4 * 3 * cdiv(K, bk)
    # masked-off lanes move no bytes: every element of A is read once per column block
    assert record.bytes_loaded == (M * K * cdiv(N, bn) + K * N * cdiv(M, bm)) * 2
    assert record.bytes_stored == M * N * 2


def test_softmax_counts_transcendentals_and_reductions():
    @jit
    def row_softmax(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + cols, mask=cols < n, other=-float("inf"))
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(out_ptr + cols, e / tl.sum(e, axis=0), mask=cols < n)

    x = np.zeros(5, np.float32)
    (cost,) = row_softmax[(1,)](x, np.empty_like(x), 5, BLOCK=8).programs
    assert cost.transcendental_ops == 8
    # max (8 inputs) + subtract (8) + exp (8) + sum (8) + divide (8)
    assert cost.vector_flops == 40


def test_shape_only_buffers_run_a_huge_vector_add_without_its_bytes():
    n, block = 2**28, 2**16
    x = ShapeOnlyBuffer("x", np.float32, n)
    y = ShapeOnlyBuffer("y", np.float32, n)
    out = ShapeOnlyBuffer("out", np.float32, n, memory="tcm")
    tracemalloc.start()
    started = time.perf_counter()
    try:
        record = launch_add(x, y, out, n, block)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Shapes, not bytes: seconds (5 here), where 2^12 blocks of real data would take
    # minutes; loose, as a loaded machine slows it.
    assert time.perf_counter() - started < 60
    assert peak < 64 * 2**20, peak  # the data itself would be 3 GiB
    assert record.bytes_moved == 3 * n * 4
    assert {(t.buffer, t.memory) for t in record.programs[0].traffic} == {
        ("x", "hbm"),
        ("y", "hbm"),
        ("out", "tcm"),
    }


def test_shape_only_buffers_still_check_bounds():
    x = ShapeOnlyBuffer("x", np.float32, 1000)
    with pytest.raises(KernelError, match=r"program \(0,\).*'x'.*offset 1000 "):
        add_kernel[(1,)](x, x, x, 2000, BLOCK_SIZE=1024)


@jit
def tile_add_kernel(a_ptr, b_ptr, c_ptr, n_cols, TILE_P: tl.constexpr, TILE_F: tl.constexpr):
    rows = tl.program_id(0) * TILE_P + tl.arange(0, TILE_P)
    cols = tl.program_id(1) * TILE_F + tl.arange(0, TILE_F)
    idx = rows[:, None] * n_cols + cols[None, :]
    tl.store(c_ptr + idx, tl.load(a_ptr + idx) + tl.load(b_ptr + idx))


def test_spmd_dim_spreads_an_axis_over_cores():
    rng = np.random.default_rng(5)
    a = rng.random((32, 16), dtype=np.float32)
    b = rng.random((32, 16), dtype=np.float32)
    c = np.zeros_like(a)
    grid_x, grid_y = 32 // (4 * 2), 16 // 8
    record = tile_add_kernel[spmd_dim(grid_x, nc(2)), grid_y](a, b, c, 16, TILE_P=4, TILE_F=8)
    np.testing.assert_array_equal(c, a + b)
    assert record.grid == Grid((8, 2), spmd_axis=0, num_cores=2)
    assert len(record.programs) == 16
    assert record.cores == tuple(p.pid[0] % 2 for p in record.programs)
    assert [p.pid for p in record.on_core(1)] == [(x, y) for x in (1, 3, 5, 7) for y in (0, 1)]
    assert record.grid.programs_on_core(0) == tuple(p.pid for p in record.on_core(0))


def test_programs_without_spmd_dim_are_on_core_zero_and_two_spmd_axes_are_rejected():
    x = np.ones(8, np.float32)
    record = add_kernel[(2,)](x, x, np.empty_like(x), 8, BLOCK_SIZE=4)
    assert record.cores == (0, 0)
    with pytest.raises(KernelError, match="at most one axis"):
        tile_add_kernel[spmd_dim(1, nc(2)), spmd_dim(1, nc(2))](x, x, x, 1, TILE_P=1, TILE_F=1)
    with pytest.raises(KernelError, match="nc"):
        nc(0)


def test_a_launcher_can_split_programs_across_executors():
    n = 4096
    x = np.arange(n, dtype=np.float32)
    out = np.zeros_like(x)
    launches: list[KernelLaunch] = []

    def two_pe_launcher(launch: KernelLaunch):
        launches.append(launch)
        pids = list(launch.grid.program_ids())
        per_pe = {pe: [launch.run_program(p) for p in pids[pe::2]] for pe in (0, 1)}
        return per_pe

    with use_launcher(two_pe_launcher):
        per_pe = launch_add(x, x, out, n, 1024)
    assert get_launcher() is run_on_host
    np.testing.assert_array_equal(out, 2 * x)
    assert [c.pid for c in per_pe[1]] == [(1,), (3,)]
    (launch,) = launches
    assert launch.kernel is add_kernel
    assert launch.grid.dims == (4,)
    assert isinstance(launch.args[0], ArrayBuffer) and launch.args[0].name == "x_ptr"
    assert launch.args[3] == n
    assert dict(launch.meta) == {"BLOCK_SIZE": 1024}


def test_run_program_runs_one_chosen_program_with_a_custom_recorder():
    events = []

    class Tracing(ProgramRecorder):
        def record_load(self, buffer, *, lanes_issued, lanes_active):
            events.append(("load", buffer.name, lanes_active))
            super().record_load(buffer, lanes_issued=lanes_issued, lanes_active=lanes_active)

    x = np.arange(10, dtype=np.float32)
    out = np.zeros_like(x)
    cost = add_kernel.run_program((2,), (x, x, out, 10), {"BLOCK_SIZE": 4}, Tracing(), grid=(3,))
    np.testing.assert_array_equal(out, [0] * 8 + [16, 18])
    assert cost.pid == (2,) and cost.bytes_loaded == 2 * 2 * 4
    assert events == [("load", "x_ptr", 2), ("load", "y_ptr", 2)]
    with pytest.raises(KernelError, match=r"\(3,\) is not in grid \(3,\)"):
        add_kernel.run_program((3,), (x, x, out, 10), {"BLOCK_SIZE": 4}, grid=(3,))
