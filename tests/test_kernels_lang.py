"""Values of the Triton-style kernels against NumPy, and the errors users hit."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.kernels.language as tl
from kernbench.errors import KernelError
from kernbench.kernels import ArrayBuffer, cdiv, jit, next_power_of_2


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x, y, block=1024):
    out = np.empty_like(x)
    n = x.size
    add_kernel[lambda meta: (cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, n, BLOCK_SIZE=block)
    return out


@pytest.mark.parametrize("n", [98432, 1000, 1])
def test_vector_add_matches_numpy(n):
    rng = np.random.default_rng(0)
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    np.testing.assert_array_equal(vector_add(x, y), x + y)


@jit
def softmax_kernel(
    out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    values = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    shifted = values - tl.max(values, axis=0)
    numerator = tl.exp(shifted)
    result = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, result, mask=mask)


def reference_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("shape", [(1823, 781), (3, 5)])
def test_fused_softmax_matches_numpy(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out = np.empty_like(x)
    rows, cols = shape
    softmax_kernel[(rows,)](out, x, cols, cols, cols, BLOCK_SIZE=next_power_of_2(cols))
    np.testing.assert_allclose(out, reference_softmax(x), rtol=1e-5, atol=1e-7)


@jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.float16)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


MATMUL_BLOCKS = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16}


def run_matmul(a, b):
    (M, K), (_, N) = a.shape, b.shape
    c = np.empty((M, N), dtype=np.float16)

    def grid(meta):
        return (cdiv(M, meta["BLOCK_M"]), cdiv(N, meta["BLOCK_N"]))

    record = matmul_kernel[grid](a, b, c, M, N, K, K, 1, N, 1, N, 1, **MATMUL_BLOCKS)
    return c, record


def test_blocked_matmul_with_ragged_shapes():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((100, 50)).astype(np.float16)
    b = rng.standard_normal((50, 70)).astype(np.float16)
    c, _ = run_matmul(a, b)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), expected, rtol=2e-3, atol=2e-2)


def test_grid_tuple_and_callable_agree_and_subscript_form():
    x = np.arange(8, dtype=np.int32)
    y = np.ones(8, dtype=np.int32)
    out1, out2 = np.zeros(8, np.int32), np.zeros(8, np.int32)
    add_kernel[(2,)](x, y, out1, 8, BLOCK_SIZE=4)
    add_kernel[2](x, y, out2, 8, BLOCK_SIZE=4)
    np.testing.assert_array_equal(out1, x + 1)
    np.testing.assert_array_equal(out2, x + 1)


def test_out_of_bounds_load_names_kernel_program_buffer_and_offset():
    x = np.zeros(100, dtype=np.float32)

    @jit
    def copy_unmasked(src_ptr, dst_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs))

    with pytest.raises(KernelError) as info:
        copy_unmasked[(2,)](x, np.zeros(128, np.float32), BLOCK=64)
    message = str(info.value)
    assert "'copy_unmasked'" in message
    assert "program (1,)" in message
    assert "'src_ptr'" in message
    assert "offset 100 " in message
    assert "mask" in message


def test_out_of_bounds_store_is_caught_before_writing():
    dst = np.zeros(4, dtype=np.float32)

    @jit
    def fill(dst_ptr):
        tl.store(dst_ptr + tl.arange(0, 8) - 2, tl.full((8,), 1.0, tl.float32))

    with pytest.raises(KernelError, match=r"offset -2 .*dst_ptr|dst_ptr.*offset -2"):
        fill[(1,)](dst)
    assert not dst.any()


def test_masked_lanes_are_not_touched():
    dst = np.full(10, -1.0, dtype=np.float32)

    @jit
    def fill_even(dst_ptr, n):
        offs = tl.arange(0, 16)
        tl.store(dst_ptr + offs, offs.to(tl.float32), mask=(offs < n) & (offs % 2 == 0))

    fill_even[(1,)](dst, 10)
    expected = np.where(np.arange(10) % 2 == 0, np.arange(10), -1).astype(np.float32)
    np.testing.assert_array_equal(dst, expected)


@pytest.mark.parametrize("grid", [(1, 1, 1, 1), (0,), (2, -1), (), (1.5,)])
def test_bad_grid_is_rejected_with_kernel_name(grid):
    x = np.zeros(4, np.float32)
    with pytest.raises(KernelError, match="add_kernel.*grid"):
        add_kernel[grid](x, x, x, 4, BLOCK_SIZE=4)


def test_arange_length_must_be_power_of_two():
    @jit
    def bad(x_ptr):
        tl.load(x_ptr + tl.arange(0, 100))

    with pytest.raises(KernelError, match=r"tl.arange\(0, 100\).*100.*power of two"):
        bad[(1,)](np.zeros(128, np.float32))


def test_program_order_is_row_major_last_axis_fastest():
    seen = []

    @jit
    def who(out_ptr):
        seen.append((int(tl.program_id(0)), int(tl.program_id(1)), int(tl.num_programs(1))))

    record = who[(2, 3)](np.zeros(1, np.float32))
    assert seen == [(0, 0, 3), (0, 1, 3), (0, 2, 3), (1, 0, 3), (1, 1, 3), (1, 2, 3)]
    assert [p.pid for p in record.programs] == [(i, j) for i in range(2) for j in range(3)]


def test_dtypes_to_and_bfloat16_rounding():
    @jit
    def convert(x_ptr, half_ptr, bf_ptr, int_ptr):
        offs = tl.arange(0, 4)
        x = tl.load(x_ptr + offs)
        tl.store(half_ptr + offs, x.to(tl.float16))
        bf = x.to(tl.bfloat16)
        tl.static_assert(bf.dtype == tl.bfloat16)
        tl.static_assert((bf * 2.0).dtype == tl.bfloat16)
        tl.store(bf_ptr + offs, bf)
        tl.store(int_ptr + offs, x.to(tl.int32))

    x = np.array([1.0, 1.00390625, -2.5, 3.0234375], dtype=np.float32)
    half = np.zeros(4, np.float16)
    bf = np.zeros(4, np.float32)
    ints = np.zeros(4, np.int32)
    convert[(1,)](x, half, bf, ints)
    np.testing.assert_array_equal(half, x.astype(np.float16))
    # bf16 keeps 7 explicit mantissa bits; both values are ties and round to even.
    np.testing.assert_array_equal(bf, [1.0, 1.0, -2.5, 3.03125])
    np.testing.assert_array_equal(ints, [1, 1, -2, 3])


def test_reductions_where_and_math_on_2d_blocks():
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    outs = {k: np.zeros(s, np.float32) for k, s in [("rs", 4), ("cm", 8), ("w", 32), ("t", 1)]}

    @jit
    def kernel(x_ptr, rs_ptr, cm_ptr, w_ptr, t_ptr):
        r = tl.arange(0, 4)
        c = tl.arange(0, 8)
        idx = r[:, None] * 8 + c[None, :]
        v = tl.load(x_ptr + idx)
        tl.store(rs_ptr + r, tl.sum(v, axis=1))
        tl.store(cm_ptr + c, tl.min(v, axis=0))
        tl.store(w_ptr + idx, tl.where(v > 0, tl.sqrt(tl.abs(v)), tl.maximum(v, -0.5)))
        tl.store(t_ptr, tl.max(v))

    kernel[(1,)](x, outs["rs"], outs["cm"], outs["w"], outs["t"])
    np.testing.assert_allclose(outs["rs"], x.sum(axis=1), rtol=1e-6)
    np.testing.assert_array_equal(outs["cm"], x.min(axis=0))
    expected = np.where(x > 0, np.sqrt(np.abs(x)), np.maximum(x, -0.5)).ravel()
    np.testing.assert_allclose(outs["w"], expected, rtol=1e-6)
    assert outs["t"][0] == x.max()


def test_dot_shape_mismatch_is_a_kernel_error():
    @jit
    def bad_dot(x_ptr):
        tl.dot(tl.zeros((16, 8), tl.float32), tl.zeros((16, 16), tl.float32))

    with pytest.raises(KernelError, match=r"bad_dot.*\(16, 8\).*\(16, 16\)"):
        bad_dot[(1,)](np.zeros(1, np.float32))


def test_non_contiguous_array_is_rejected():
    with pytest.raises(KernelError, match="'x'.*C-contiguous"):
        ArrayBuffer("x", np.zeros((4, 4), np.float32)[:, ::2])


def test_calling_a_kernel_directly_says_how_to_launch():
    with pytest.raises(KernelError, match=r"add_kernel\[grid\]"):
        add_kernel(1, 2, 3, 4, 5)


def test_cdiv_and_next_power_of_2():
    assert cdiv(98432, 1024) == 97
    assert cdiv(1024, 1024) == 1
    assert [next_power_of_2(n) for n in (1, 2, 3, 781, 1024)] == [1, 2, 4, 1024, 1024]
    assert next_power_of_2(0) == 0  # as triton.next_power_of_2: (0 - 1) | ... + 1


@jit
def scaled(x, factor):
    return x * factor


def test_scalar_pointers_device_functions_and_reflected_pointer_arithmetic():
    @jit
    def partial_sums(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(offs + x_ptr, mask=offs < n, other=0.0)  # offsets + pointer
        acc = tl.zeros((2, 2), tl.float32)
        acc += tl.dot(tl.full((2, 4), 1.0, tl.float32), tl.full((4, 2), 0.5, tl.float32))
        total = scaled(tl.sum(x, axis=0), tl.load(out_ptr + 0 * pid) * 0 + 1.0)
        tl.store(out_ptr + pid + 1, (total + tl.sum(acc)).to(out_ptr.dtype.element_ty))

    x = np.arange(10, dtype=np.float32)
    out = np.zeros(4, np.float32)
    partial_sums[(3,)](x, out, 10, BLOCK=4)
    np.testing.assert_array_equal(out, [0, 6 + 8, 22 + 8, 17 + 8])


def test_numpy_errors_inside_a_kernel_name_the_program():
    @jit
    def mismatched(x_ptr):
        if tl.program_id(0) == 1:
            tl.arange(0, 4) + tl.arange(0, 8)

    with pytest.raises(KernelError, match=r"'mismatched' program \(1, 0\): ValueError"):
        mismatched[(2, 1)](np.zeros(1, np.float32))


def test_integer_floordiv_and_mod_round_toward_zero_as_triton_does():
    """Triton divides integers as C does (``//`` toward zero, ``%`` with the dividend's sign)."""
    x = np.array([-9, -1, 0, 7, 9, -8, 8, 3], dtype=np.int32)
    out = np.zeros((4, x.size), dtype=np.int32)

    @jit
    def divide(x_ptr, out_ptr, B: tl.constexpr):
        o = tl.arange(0, B)
        v = tl.load(x_ptr + o)
        tl.store(out_ptr + o, v // 4)
        tl.store(out_ptr + B + o, v % 4)
        tl.store(out_ptr + 2 * B + o, v // -4)
        tl.store(out_ptr + 3 * B + o, v % -4)

    divide[(1,)](x, out, B=x.size)
    for row, d in ((0, 4), (2, -4)):
        np.testing.assert_array_equal(out[row], np.trunc(x / d).astype(np.int32))
        np.testing.assert_array_equal(out[row + 1], np.fmod(x, d))
    assert out[0, 0] == -2 and out[1, 0] == -1  # Python would give -3 and 3


def test_a_one_value_block_formats_its_value_and_a_wider_one_refuses_a_spec():
    n = tl.runtime_scalar(7)
    assert f"{n:4d}" == "   7" and f"{tl.full((1,), 2.5, tl.float32):.2f}" == "2.50"
    block = tl.full((2,), 1, tl.int32)
    assert f"{block}" == str(block)
    with pytest.raises(KernelError, match="format spec '.2f' needs one value"):
        f"{block:.2f}"


def test_a_grid_callable_that_takes_no_meta_names_the_kernel():
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(KernelError, match="the grid callable must take one argument, the dict"):
        add_kernel[lambda: (1,)](x, x, np.empty_like(x), 8, BLOCK_SIZE=8)
    out = np.empty_like(x)
    add_kernel[lambda meta, extra=0: (1,)](x, x, out, 8, BLOCK_SIZE=8)  # defaults are fine
    np.testing.assert_array_equal(out, x + x)


@jit
def _full_kernel(out_ptr, VALUE: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, 4), tl.full((4,), VALUE, tl.int32))


def test_tl_full_refuses_an_int_its_dtype_cannot_hold():
    out = np.zeros(4, dtype=np.int32)
    _full_kernel[(1,)](out, VALUE=-(2**31))
    np.testing.assert_array_equal(out, [-(2**31)] * 4)
    with pytest.raises(KernelError, match=r"tl.full value 1099511627776 is out of range for int32"):
        _full_kernel[(1,)](out, VALUE=2**40)  # it wrapped to 0


@jit
def _scan_rows_kernel(x_ptr, out_ptr, N: tl.constexpr, PROD: tl.constexpr, REVERSE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    y = tl.cumprod(x, axis=0, reverse=REVERSE) if PROD else x.cumsum(0, reverse=REVERSE)
    tl.store(out_ptr + row * N + cols, y)


@pytest.mark.parametrize("prod", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_and_cumprod_scan_along_an_axis_as_tritons(prod, reverse):
    x = np.arange(1, 17, dtype=np.int8).reshape(2, 8)
    out = np.empty((2, 8), dtype=np.int32)  # int8 scans in int32, as tl.sum does
    _scan_rows_kernel[(2,)](x, out, N=8, PROD=prod, REVERSE=reverse)
    fn = np.cumprod if prod else np.cumsum
    source = x[:, ::-1] if reverse else x
    expected = fn(source.astype(np.int32), axis=1)
    np.testing.assert_array_equal(out, expected[:, ::-1] if reverse else expected)


@jit
def _histogram_kernel(bins_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.atomic_add(out_ptr + tl.load(bins_ptr + offsets, mask=mask, other=0), 1.5, mask=mask)


def test_atomic_add_adds_up_lanes_that_hit_one_element():
    bins = np.array([0, 3, 3, 1, 3, 0, 2], dtype=np.int32)
    out = np.ones(4, dtype=np.float32)
    _histogram_kernel[(2,)](bins, out, bins.size, BLOCK=4)
    np.testing.assert_array_equal(out, 1 + 1.5 * np.bincount(bins, minlength=4))


@jit
def _sort_rows_kernel(x_ptr, out_ptr, N: tl.constexpr, DESCENDING: tl.constexpr):
    offsets = tl.arange(0, 4)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + offsets, tl.sort(tl.load(x_ptr + offsets), descending=DESCENDING))


@pytest.mark.parametrize("descending", [False, True])
def test_sort_orders_the_last_dim_as_tritons(descending):
    x = np.random.default_rng(4).integers(-50, 50, (4, 16)).astype(np.int32)
    out = np.empty_like(x)
    _sort_rows_kernel[(1,)](x, out, N=16, DESCENDING=descending)
    expected = np.sort(x, axis=1)
    np.testing.assert_array_equal(out, expected[:, ::-1] if descending else expected)


@jit
def _first_of_max(v1, i1, v2, i2):  # a later value takes over only when it is larger
    take = v2 > v1
    return tl.where(take, v2, v1), tl.where(take, i2, i1)


@jit
def _running_kernel(x_ptr, sums_ptr, max_ptr, at_ptr, N: tl.constexpr, REVERSE: tl.constexpr):
    offsets = tl.arange(0, 4)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offsets)
    tl.store(sums_ptr + offsets, tl.associative_scan(x, 1, _add_pair, reverse=REVERSE))
    index = tl.broadcast_to(tl.arange(0, N)[None, :], (4, N))
    values, at = tl.associative_scan((x, index), axis=1, combine_fn=_first_of_max)
    tl.store(max_ptr + offsets, values)
    tl.store(at_ptr + offsets, at)


@jit
def _add_pair(a, b):
    return a + b


@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_combines_in_order_and_costs_one_combine_an_element(reverse):
    x = np.random.default_rng(5).integers(0, 9, (4, 32)).astype(np.float32)
    sums, running, at = np.empty_like(x), np.empty_like(x), np.empty(x.shape, np.int32)
    record = _running_kernel[(1,)](x, sums, running, at, N=32, REVERSE=reverse)
    expected = np.cumsum(x[:, ::-1], 1)[:, ::-1] if reverse else np.cumsum(x, 1)
    np.testing.assert_array_equal(sums, expected)
    np.testing.assert_array_equal(running, np.maximum.accumulate(x, 1))
    first = [[int(np.argmax(row[: k + 1])) for k in range(32)] for row in x]  # first of ties
    np.testing.assert_array_equal(at, first)
    # 31 combines a row: an add, then a compare and a select of values (the index select
    # is integer work)
    assert record.programs[0].vector_flops == 4 * 31 * (1 + 2)


@jit
def _one_of_two(a0, a1, b0, b1):
    return a0 + b0


@jit
def _bad_scan_kernel(x_ptr):
    x = tl.load(x_ptr + tl.arange(0, 4))
    tl.associative_scan((x, x), 0, _one_of_two)


def test_associative_scan_wants_one_value_back_per_input():
    with pytest.raises(KernelError, match="combine_fn returned 1 values for 2 inputs"):
        _bad_scan_kernel[(1,)](np.zeros(4, np.float32))
