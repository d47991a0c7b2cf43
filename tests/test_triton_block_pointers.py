"""Block pointers (``tl.make_block_ptr``, ``tl.advance``, ``tl.load``/``tl.store`` with
``boundary_check`` and ``padding_option``) as Triton has them.

Values are checked against NumPy: 2-D tiles with and without boundary checks, a
transposed view through its strides, a blocked matmul that walks its tiles with
``tl.advance``, and each padding option.  Misuse raises a ``KernelError`` naming the
argument; a block-pointer access costs what the same masked pointer-tensor access
costs.
"""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode, simulated_ps

import kernbench.torch as torch
import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import KernelError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        yield context


@triton.jit
def copy_tiles(X, Y, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    offsets = (tl.program_id(0) * BM, tl.program_id(1) * BN)
    x_ptr = tl.make_block_ptr(X, (M, N), (stride_m, stride_n), offsets, (BM, BN), (1, 0))
    y_ptr = tl.make_block_ptr(Y, (M, N), (stride_m, stride_n), offsets, (BM, BN), (1, 0))
    tile = tl.load(x_ptr, boundary_check=(0, 1), padding_option="zero")
    tl.store(y_ptr, tile + 1.0, boundary_check=(0, 1))


@triton.jit
def copy_tiles_with_pointers(X, Y, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    where = rows[:, None] * stride_m + cols[None, :] * stride_n
    tile = tl.load(X + where, mask=inside, other=0.0)
    tl.store(Y + where, tile + 1.0, mask=inside)


def test_tiles_with_boundary_checks_cover_a_ragged_matrix(ctx):
    x = torch.randn((19, 13))
    y = torch.zeros((19, 13))
    copy_tiles[(3, 2)](x, y, 19, 13, x.stride(0), x.stride(1), BM=8, BN=8)
    np.testing.assert_array_equal(y.numpy(), x.numpy() + np.float32(1))


@triton.jit
def load_tile(X, Out, M, N, stride_m, stride_n, row, col, BM: tl.constexpr,
              BN: tl.constexpr, CHECK: tl.constexpr, PAD: tl.constexpr):  # fmt: skip
    x_ptr = tl.make_block_ptr(X, (M, N), (stride_m, stride_n), (row, col), (BM, BN), (1, 0))
    if CHECK == 2:
        tile = tl.load(x_ptr, boundary_check=(0, 1), padding_option=PAD)
    elif CHECK == 1:
        tile = tl.load(x_ptr, boundary_check=(1,), padding_option=PAD)
    else:
        tile = tl.load(x_ptr)
    where = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(Out + where, tile)


def _tile(ctx, x, row, col, check, pad, shape=None, block=(8, 8)):
    m, n = shape or x.shape
    out = torch.full(block, -7.0, dtype=x.dtype)
    load_tile[(1,)](x, out, m, n, x.stride(0), x.stride(1), row, col,
                    BM=block[0], BN=block[1], CHECK=check, PAD=pad)  # fmt: skip
    return out.numpy()


def test_a_tile_inside_the_tensor_needs_no_boundary_check(ctx):
    x = torch.randn((16, 16))
    np.testing.assert_array_equal(_tile(ctx, x, 4, 8, 0, ""), x.numpy()[4:12, 8:16])


@pytest.mark.parametrize(("pad", "fill"), [("zero", 0.0), ("", 0.0), ("nan", np.nan)])
def test_padding_options_fill_what_lies_outside_the_tensor(ctx, pad, fill):
    x = torch.randn((12, 10))
    tile = _tile(ctx, x, 8, 6, 2, pad)
    expected = np.full((8, 8), fill, dtype=np.float32)
    expected[:4, :4] = x.numpy()[8:12, 6:10]
    np.testing.assert_array_equal(tile, expected)


def test_negative_offsets_are_outside_too(ctx):
    x = torch.randn((8, 8))
    tile = _tile(ctx, x, -3, -5, 2, "zero")
    expected = np.zeros((8, 8), dtype=np.float32)
    expected[3:, 5:] = x.numpy()[:5, :3]
    np.testing.assert_array_equal(tile, expected)


def test_unchecked_dims_read_wherever_the_address_falls(ctx):
    # a (4, 6) view of an (8, 6) tensor: rows 4..7 are past the view's shape but inside
    # the buffer, so without a check on dim 0 they are read, as in Triton
    x = torch.randn((8, 6))
    tile = _tile(ctx, x, 0, 0, 1, "zero", shape=(4, 6))
    expected = np.zeros((8, 8), dtype=np.float32)
    expected[:, :6] = x.numpy()
    np.testing.assert_array_equal(tile, expected)


def test_an_unchecked_access_outside_the_buffer_raises_as_a_pointer_does(ctx):
    x = torch.randn((12, 10))
    with pytest.raises(KernelError, match=r"tl.load of buffer .* is out of bounds .*"
                       r"boundary_check=\(dims\.\.\.\) for a block pointer"):  # fmt: skip
        _tile(ctx, x, 8, 6, 0, "")
    with pytest.raises(KernelError, match=r"tl.load of buffer .* is out of bounds"):
        _tile(ctx, x, 8, 0, 1, "zero")  # rows 12..15 are not checked


@triton.jit
def copy_half(A, B, N, BLOCK: tl.constexpr, PAD: tl.constexpr):
    # A is read as an (N // 2,) tensor, B written as an (N,) one: B's upper half gets
    # the padding of the loads past A's end
    start = tl.program_id(0) * BLOCK
    a_ptr = tl.make_block_ptr(A, (N // 2,), (1,), (start,), (BLOCK,), (0,))
    b_ptr = tl.make_block_ptr(B, (N,), (1,), (start,), (BLOCK,), (0,))
    tl.store(b_ptr, tl.load(a_ptr, boundary_check=(0,), padding_option=PAD), boundary_check=(0,))


@pytest.mark.parametrize(("pad", "fill"), [("zero", 0.0), ("nan", np.nan)])
def test_a_one_dim_copy_pads_past_the_source(ctx, pad, fill):
    a = torch.randn(100)
    b = torch.full((100,), -1.0)
    copy_half[(4,)](a, b, 100, BLOCK=32, PAD=pad)
    expected = np.concatenate([a.numpy()[:50], np.full(50, fill, dtype=np.float32)])
    np.testing.assert_array_equal(b.numpy(), expected)


@triton.jit
def transpose_kernel(X, Out, M, N, stride_m, stride_n, BM: tl.constexpr, BN: tl.constexpr):
    # the transpose of X (M, N) is an (N, M) tensor with strides (stride_n, stride_m)
    xt_ptr = tl.make_block_ptr(X, (N, M), (stride_n, stride_m), (0, 0), (BN, BM), (0, 1))
    out_ptr = tl.make_block_ptr(Out, (N, M), (M, 1), (0, 0), (BN, BM), (1, 0))
    tl.store(out_ptr, tl.load(xt_ptr, boundary_check=(0, 1)), boundary_check=(0, 1))


def test_a_transposed_view_through_strides_and_order(ctx):
    x = torch.randn((6, 5))
    out = torch.zeros((5, 6))
    transpose_kernel[(1,)](x, out, 6, 5, x.stride(0), x.stride(1), BM=8, BN=8)
    np.testing.assert_array_equal(out.numpy(), x.numpy().T)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_block_ptr = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                    offsets=(pid_m * BLOCK_M, 0), block_shape=(BLOCK_M, BLOCK_K),
                                    order=(1, 0))  # fmt: skip
    b_block_ptr = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(stride_bk, stride_bn),
                                    offsets=(0, pid_n * BLOCK_N), block_shape=(BLOCK_K, BLOCK_N),
                                    order=(1, 0))  # fmt: skip
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_block_ptr, boundary_check=(0, 1))
        b = tl.load(b_block_ptr, boundary_check=(0, 1))
        accumulator = tl.dot(a, b, accumulator)
        a_block_ptr = tl.advance(a_block_ptr, (0, BLOCK_K))
        b_block_ptr = tl.advance(b_block_ptr, (BLOCK_K, 0))
    c = accumulator.to(tl.float16)
    c_block_ptr = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(stride_cm, stride_cn),
                                    offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N),
                                    block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))  # fmt: skip
    tl.store(c_block_ptr, c, boundary_check=(0, 1))


def test_a_blocked_matmul_that_advances_its_block_pointers(ctx):
    M, N, K = 40, 24, 50
    a = torch.randn((M, K), dtype=torch.float16)
    b = torch.randn((K, N), dtype=torch.float16)
    c = torch.empty((M, N), dtype=torch.float16)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(N, META["BLOCK_N"]))  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)  # fmt: skip
    expected = a.numpy().astype(np.float32) @ b.numpy().astype(np.float32)
    np.testing.assert_allclose(c.numpy().astype(np.float32), expected, rtol=1e-2, atol=1e-2)
    triton.testing.assert_close(c, torch.matmul(a, b), atol=1e-2, rtol=1e-2)


def test_the_matmul_in_timing_only_mode_and_on_the_fast_backend():
    def run(context):
        torch.manual_seed(0)
        M, N, K = 40, 24, 50
        a = torch.randn((M, K), dtype=torch.float16)
        b = torch.randn((K, N), dtype=torch.float16)
        c = torch.empty((M, N), dtype=torch.float16)
        strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
        elapsed = simulated_ps(
            context,
            lambda: matmul_kernel[(3, 2)](
                a, b, c, M, N, K, *strides, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16
            ),
        )
        return elapsed, [c]

    times, (detailed, fast) = in_every_mode(run)
    assert times[0] == times[1] > 0  # timing-only mode walks the same tiles
    assert_same_values(detailed, fast)


def test_costs_equal_the_masked_pointer_tensor_form(ctx):
    x = torch.randn((19, 13))
    y = torch.zeros((19, 13))
    args = (19, 13, x.stride(0), x.stride(1))
    blocks = copy_tiles[(3, 2)](x, y, *args, BM=8, BN=8)
    pointers = copy_tiles_with_pointers[(3, 2)](x, y, *args, BM=8, BN=8)
    fields = ("loads", "stores", "bytes_loaded", "bytes_stored", "lanes_loaded",
              "lanes_stored", "lanes_masked_off", "traffic")  # fmt: skip
    for ours, theirs in zip(blocks.record.programs, pointers.record.programs, strict=True):
        assert [getattr(ours, f) for f in fields] == [getattr(theirs, f) for f in fields]
    last = blocks.record.programs[-1]  # rows 16..18, cols 8..12: 15 of 64 lanes
    assert last.lanes_loaded == last.lanes_stored == 15
    assert last.lanes_masked_off == 2 * (64 - 15)
    assert blocks.elapsed_ps == pointers.elapsed_ps


@triton.jit
def misuse(X, Y, WHAT: tl.constexpr):
    p = tl.make_block_ptr(X, (8, 8), (8, 1), (0, 0), (8, 8), (1, 0))
    if WHAT == "mask":
        tl.load(p, mask=tl.arange(0, 8)[:, None] < 4)
    elif WHAT == "other":
        tl.load(p, other=0.0)
    elif WHAT == "store mask":
        tl.store(p, tl.zeros((8, 8), tl.float32), mask=tl.arange(0, 8)[:, None] < 4)
    elif WHAT == "padding":
        tl.load(p, boundary_check=(0,), padding_option="inf")
    elif WHAT == "nan int":
        q = tl.make_block_ptr(Y, (8,), (1,), (0,), (8,), (0,))
        tl.load(q, boundary_check=(0,), padding_option="nan")
    elif WHAT == "check dims":
        tl.load(p, boundary_check=(0, 2))
    elif WHAT == "ranks":
        tl.make_block_ptr(X, (8, 8), (8, 1), (0,), (8, 8), (1, 0))
    elif WHAT == "order":
        tl.make_block_ptr(X, (8, 8), (8, 1), (0, 0), (8, 8), (1, 1))
    elif WHAT == "block shape":
        tl.make_block_ptr(X, (8, 8), (8, 1), (0, 0), (8, 6), (1, 0))
    elif WHAT == "base":
        tl.make_block_ptr(X + tl.arange(0, 8), (8, 8), (8, 1), (0, 0), (8, 8), (1, 0))
    elif WHAT == "advance":
        tl.advance(p, (8,))
    elif WHAT == "advance pointer":
        tl.advance(X, (8, 0))
    elif WHAT == "plus":
        p = p + 8
    elif WHAT == "store type":
        tl.store(p, tl.zeros((8, 8), tl.float16))
    elif WHAT == "store shape":
        tl.store(p, tl.zeros((4, 8), tl.float32))


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("mask", r"tl.load through a block pointer takes no mask="),
        ("other", r"tl.load through a block pointer takes no other="),
        (
            "store mask",
            r"tl.store through a block pointer takes no mask=.* use "
            r"boundary_check=\(dims\.\.\.\) for the tile's edges",
        ),
        ("padding", r"padding_option must be one of '', 'zero', 'nan', got 'inf'"),
        ("nan int", r"padding_option='nan' needs a floating-point tensor.*int32"),
        (
            "check dims",
            r"boundary_check=\(0, 2\) must name distinct dims of the 2-d block "
            r"pointer, each in 0..1",
        ),
        ("ranks", r"block_shape has 2 dims, but offsets has 1"),
        ("order", r"order=\(1, 1\) must be a permutation of \(0, 1\)"),
        ("block shape", r"block_shape \(8, 6\) must be powers of two"),
        ("base", r"base must be a scalar pointer, got a block of pointers of shape \(8,\)"),
        ("advance", r"tl.advance offsets \(8,\) has 1 entries for a 2-d block pointer"),
        ("advance pointer", r"tl.advance needs a block pointer .* got Pointer"),
        ("plus", r"a block pointer is moved with tl.advance"),
        (
            "store type",
            r"block pointer of tl.float32 elements got a tl.float16 value; "
            r"convert it first with \.to\(tl.float32\)",
        ),
        ("store shape", r"block_shape \(8, 8\) got a value of shape \(4, 8\)"),
    ],
)
def test_misuse_raises_a_kernel_error_naming_the_argument(ctx, what, message):
    x = torch.zeros((8, 8))
    y = torch.zeros(8, dtype=torch.int32)
    with pytest.raises(KernelError, match=message):
        misuse[(1,)](x, y, WHAT=what)
