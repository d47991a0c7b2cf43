"""The max, average and adaptive pools (``F.*_pool1d/2d`` and their modules): values and
indices against NumPy references written from torch's CPU loops (stride, padding,
dilation, ceil_mode, count_include_pad, divisor_override; float32, float16, bfloat16),
torch's output shapes, errors by type and message, both modes and both backends, and
the cost of a pool against one streaming pass over its input."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from run_modes import assert_same_values, in_every_mode
from run_modes import simulated_ps as cost

import kernbench.torch as torch
import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def out_size(size, k, pad, stride, dilation, ceil):
    """torch's pooling_output_shape."""
    out = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil else 0)) // stride + 1
    return out - 1 if ceil and (out - 1) * stride >= size + pad else out


def max_pool_reference(x, k, s, p, d, ceil):
    """torch's CPU max pool of (N, C, H, W) ``x``: a larger value or a NaN takes the place,
    starting from the window's first position inside the input; indices into H * W."""
    n, c, h, w = x.shape
    oh, ow = (out_size(*a, ceil) for a in zip((h, w), k, p, s, d, strict=True))
    values = np.empty((n, c, oh, ow), x.dtype)
    indices = np.empty((n, c, oh, ow), np.int64)
    for a in range(oh):
        for b in range(ow):
            rows = [a * s[0] - p[0] + i * d[0] for i in range(k[0])]
            cols = [b * s[1] - p[1] + j * d[1] for j in range(k[1])]
            rows = [r for r in rows if 0 <= r < h]
            cols = [q for q in cols if 0 <= q < w]
            best = np.full((n, c), -np.inf, np.float64)
            where = np.full((n, c), rows[0] * w + cols[0])
            for r in rows:
                for q in cols:
                    v = x[:, :, r, q].astype(np.float64)
                    take = (v > best) | np.isnan(v)
                    best, where = np.where(take, v, best), np.where(take, r * w + q, where)
            values[:, :, a, b], indices[:, :, a, b] = best, where
    return values, indices


def avg_pool_reference(x, k, s, p, ceil, include_pad, divisor=None):
    """torch's CPU average pool: the window cut at the padded input's end for the divisor
    with ``count_include_pad``, the input elements in it otherwise."""
    n, c, h, w = x.shape
    oh, ow = (out_size(*a, 1, ceil) for a in zip((h, w), k, p, s, strict=True))
    out = np.zeros((n, c, oh, ow))
    for a in range(oh):
        for b in range(ow):
            h0, w0 = a * s[0] - p[0], b * s[1] - p[1]
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
            pool = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            total = x[:, :, h0:h1, w0:w1].astype(np.float64).sum(axis=(2, 3))
            out[:, :, a, b] = total / (divisor or (pool if include_pad else (h1 - h0) * (w1 - w0)))
    return out


def adaptive_reference(x, size, reduce):
    n, c, h, w = x.shape
    out = np.empty((n, c, *size))
    for a in range(size[0]):
        for b in range(size[1]):
            h0, h1 = a * h // size[0], -(-(a + 1) * h // size[0])
            w0, w1 = b * w // size[1], -(-(b + 1) * w // size[1])
            out[:, :, a, b] = reduce(x[:, :, h0:h1, w0:w1].astype(np.float64), axis=(2, 3))
    return out


MAX_CASES = [  # kernel, stride, padding, dilation, ceil_mode
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 2), (2, 1), (1, 0), (2, 1), False),
    ((3, 3), (2, 2), (0, 1), (1, 1), True),
    ((2, 3), (3, 2), (1, 1), (1, 2), True),
]


@pytest.mark.parametrize(("k", "s", "p", "d", "ceil"), MAX_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_max_pool2d_values_and_indices_are_torchs(ctx, k, s, p, d, ceil, dtype):
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 3, 9, 8))).to(
        getattr(torch, dtype)
    )
    values, indices = F.max_pool2d(x, k, s, p, d, ceil, return_indices=True)
    expected, where = max_pool_reference(x.float().numpy(), k, s, p, d, ceil)
    assert values.dtype is x.dtype and indices.dtype is torch.int64
    assert tuple(values.shape) == expected.shape == tuple(indices.shape)
    np.testing.assert_array_equal(values.float().numpy(), expected)
    np.testing.assert_array_equal(indices.numpy(), where)
    module = torch.nn.MaxPool2d(k, s, p, d, ceil_mode=ceil)
    np.testing.assert_array_equal(module(x).float().numpy(), expected)


def test_max_pool_nan_minus_inf_and_sliding_windows(ctx):
    a = np.random.default_rng(2).standard_normal((1, 2, 6, 6)).astype(np.float32)
    a[0, 0, 1, 1] = np.nan
    a[0, 1, :2, :2] = -np.inf
    values, indices = F.max_pool2d(torch.from_numpy(a), 2, return_indices=True)
    assert np.isnan(values.numpy()[0, 0, 0, 0]) and indices.numpy()[0, 0, 0, 0] == 7
    assert values.numpy()[0, 1, 0, 0] == -np.inf and indices.numpy()[0, 1, 0, 0] == 0
    b = np.random.default_rng(3).standard_normal((2, 4, 11, 7)).astype(np.float32)
    windows = sliding_window_view(b, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    got = torch.nn.MaxPool2d(3, stride=2)(torch.from_numpy(b))
    np.testing.assert_array_equal(got.numpy(), windows.max(axis=(-2, -1)))


@pytest.mark.parametrize(("k", "s", "p", "ceil", "include"), [
    ((2, 2), (2, 2), (0, 0), False, True),
    ((3, 3), (2, 2), (1, 1), False, True),
    ((3, 3), (2, 2), (1, 1), False, False),
    ((3, 2), (2, 3), (1, 1), True, True),
    ((3, 3), (2, 2), (1, 0), True, False),
])  # fmt: skip
@pytest.mark.parametrize(
    ("dtype", "tol"), [("float32", 1e-6), ("float16", 1e-3), ("bfloat16", 8e-3)]
)
def test_avg_pool2d_is_torchs(ctx, k, s, p, ceil, include, dtype, tol):
    x = torch.from_numpy(np.random.default_rng(4).standard_normal((2, 3, 9, 8))).to(
        getattr(torch, dtype)
    )
    got = F.avg_pool2d(x, k, s, p, ceil, include)
    expected = avg_pool_reference(x.float().numpy(), k, s, p, ceil, include)
    assert got.dtype is x.dtype and tuple(got.shape) == expected.shape
    np.testing.assert_allclose(got.float().numpy(), expected, rtol=tol, atol=tol)
    if dtype == "float32":
        override = torch.nn.AvgPool2d(k, s, p, ceil, include, divisor_override=5)(x)
        expected = avg_pool_reference(x.numpy(), k, s, p, ceil, include, divisor=5)
        np.testing.assert_allclose(override.numpy(), expected, rtol=tol, atol=tol)


def test_one_dimensional_pools_are_the_two_dimensional_ones_of_one_row(ctx):
    a = np.random.default_rng(5).standard_normal((2, 3, 13)).astype(np.float32)
    x = torch.from_numpy(a)
    values, indices = F.max_pool1d(x, 3, 2, 1, 2, True, return_indices=True)
    expected, where = max_pool_reference(a[:, :, None], (1, 3), (1, 2), (0, 1), (1, 2), True)
    np.testing.assert_array_equal(values.numpy(), expected[:, :, 0])
    np.testing.assert_array_equal(indices.numpy(), where[:, :, 0])
    got = torch.nn.AvgPool1d(4, 3, 2, count_include_pad=False)(x)
    expected = avg_pool_reference(a[:, :, None], (1, 4), (1, 3), (0, 2), False, False)
    np.testing.assert_allclose(got.numpy(), expected[:, :, 0], rtol=1e-6)
    unbatched = torch.nn.MaxPool1d(2)(x[0])  # (C, L)
    np.testing.assert_array_equal(unbatched.numpy(), a[0, :, :12].reshape(3, 6, 2).max(-1))
    adaptive = F.adaptive_avg_pool1d(x, 5)
    np.testing.assert_allclose(
        adaptive.numpy(), adaptive_reference(a[:, :, None], (1, 5), np.mean)[:, :, 0], rtol=1e-6
    )
    values, indices = torch.nn.AdaptiveMaxPool1d(4, return_indices=True)(x)
    np.testing.assert_array_equal(
        values.numpy(), adaptive_reference(a[:, :, None], (1, 4), np.max)[:, :, 0]
    )
    np.testing.assert_array_equal(np.take_along_axis(a, indices.numpy(), 2), values.numpy())


@pytest.mark.parametrize("size", [(1, 1), (3, 5), (4, None), (9, 8), (5, 3)])
def test_adaptive_pools_take_torchs_windows(ctx, size):
    a = np.random.default_rng(6).standard_normal((2, 3, 9, 8)).astype(np.float32)
    x = torch.from_numpy(a)
    full = tuple(8 if s is None else s for s in size)
    got = torch.nn.AdaptiveAvgPool2d(size)(x)
    assert tuple(got.shape) == (2, 3, *full)
    expected = adaptive_reference(a, full, np.mean)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-6)
    values, indices = F.adaptive_max_pool2d(x, size, return_indices=True)
    np.testing.assert_array_equal(values.numpy(), adaptive_reference(a, full, np.max))
    flat = np.take_along_axis(a.reshape(2, 3, -1), indices.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(flat.reshape(values.shape), values.numpy())
    assert tuple(torch.nn.AdaptiveMaxPool2d(size)(x[0]).shape) == (3, *full)  # unbatched


def test_output_shapes_of_familiar_networks(ctx):
    assert tuple(torch.nn.MaxPool2d(3, 2, 1)(torch.ones(1, 4, 112, 112)).shape) == (1, 4, 56, 56)
    assert tuple(F.max_pool2d(torch.ones(1, 1, 6, 6), 3, 2).shape) == (1, 1, 2, 2)
    assert tuple(F.max_pool2d(torch.ones(1, 1, 6, 6), 3, 2, ceil_mode=True).shape) == (1, 1, 3, 3)
    assert tuple(F.avg_pool2d(torch.ones(1, 1, 5, 5), 2, ceil_mode=True).shape) == (1, 1, 3, 3)
    assert tuple(F.adaptive_avg_pool2d(torch.ones(2, 8, 7, 7), 1).shape) == (2, 8, 1, 1)
    assert tuple(F.avg_pool2d(torch.ones(1, 1, 6, 6), (3, 2), np.int64(1)).shape) == (1, 1, 4, 5)
    assert tuple(F.avg_pool2d(torch.ones(1, 1, 6, 6), 3, []).shape) == (1, 1, 2, 2)  # stride=[]
    empty = F.max_pool2d(torch.ones(0, 2, 4, 4), 2)
    assert tuple(empty.shape) == (0, 2, 2, 2)


def test_pool_errors_are_torchs(ctx):
    x = torch.ones(1, 2, 4, 4)
    with pytest.raises(TensorError, match=r"Expected 3D or 4D \(batch mode\) tensor"):
        F.max_pool2d(torch.ones(4, 4), 2)
    with pytest.raises(TensorError, match=r"Expected 2D or 3D \(batch mode\) tensor"):
        F.avg_pool1d(x, 2)
    with pytest.raises(TensorError, match="kernel size should be greater than zero"):
        F.max_pool2d(x, 0)
    with pytest.raises(TensorError, match="stride should be greater than zero"):
        F.avg_pool2d(x, 2, 0)
    with pytest.raises(TensorError, match="dilation should be greater than zero"):
        F.max_pool2d(x, 2, dilation=0)
    with pytest.raises(TensorError, match="pad should be at most half of effective kernel"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(TensorError, match="pad should be greater than or equal to 0"):
        F.avg_pool2d(x, 2, padding=-1)
    with pytest.raises(TensorError, match=r"Given input size: \(2x4x4\). Calculated output "):
        F.max_pool2d(x, 5)
    with pytest.raises(TensorError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(TensorError, match="takes a floating input here, got torch.int32"):
        F.max_pool2d(torch.ones(1, 2, 4, 4, dtype=torch.int32), 2)
    with pytest.raises(TensorError, match="kernel_size must be an int or 2 ints"):
        F.max_pool2d(x, (2, 2, 2))
    with pytest.raises(TensorError, match="elements of output_size must be greater than or"):
        F.adaptive_avg_pool2d(x, (-1, 2))
    with pytest.raises(TensorError, match="return_indices must be True or False"):
        F.max_pool2d(x, 2, return_indices="yes")


def _pools(context):
    x = torch.from_numpy(np.random.default_rng(7).standard_normal((2, 4, 10, 9)).astype("f4"))
    start = context.now
    values, indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    results = [values, indices, F.avg_pool2d(x, 2, ceil_mode=True), F.adaptive_avg_pool2d(x, 3)]
    results.append(F.adaptive_max_pool1d(x[:, :, 0], 4))
    return context.now - start, results


def test_pools_run_timing_only_and_on_the_fast_backend_with_the_same_values():
    times, (detailed, fast) = in_every_mode(_pools)
    assert times[0] > 0 and times[0] == times[1]
    assert times[2] > 0
    assert_same_values(detailed, fast)


@pytest.fixture(scope="module")
def timing():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        yield context


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_pool_costs_about_one_streaming_pass_over_its_input(timing, dtype):
    x = torch.ones(16, 64, 32, 32, dtype=getattr(torch, dtype))
    one_pass = cost(timing, lambda: x * 2)  # reads and writes every element once
    # reading x once and writing a quarter of it (and three compares a window position
    # for a max): more than half a pass, less than one
    assert 0.5 * one_pass <= cost(timing, lambda: F.max_pool2d(x, 2)) <= 0.85 * one_pass
    assert 0.5 * one_pass <= cost(timing, lambda: F.avg_pool2d(x, 2)) <= 0.85 * one_pass
    if dtype == "float16":
        return
    assert (
        0.5 * one_pass
        <= cost(timing, lambda: F.max_pool1d(x.view(16, 64, -1), 4))
        <= (0.85 * one_pass)
    )
    # 4x4 windows: read once, written a sixteenth: about half a pass
    assert 0.4 * one_pass <= cost(timing, lambda: F.adaptive_avg_pool2d(x, 8)) <= 0.7 * one_pass
    # half the input: half the time; overlapping 3x3 windows at stride 2 load each
    # element about 9/4 times (no cache)
    half = torch.ones(8, 64, 32, 32)
    half_pass = cost(timing, lambda: half * 2)
    ratio = cost(timing, lambda: F.max_pool2d(x, 2)) / cost(timing, lambda: F.max_pool2d(half, 2))
    assert 1.8 <= ratio <= 2.1
    assert half_pass <= cost(timing, lambda: F.max_pool2d(half, 3, 2, 1)) <= 2.5 * half_pass
