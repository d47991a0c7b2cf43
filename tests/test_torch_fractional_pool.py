"""``F.fractional_max_pool2d/3d`` (and ``*_with_indices``) and ``nn.FractionalMaxPool2d/3d``:
values and indices against a NumPy reference of torch's sequence rule with given samples,
batched and unbatched inputs, gradients, drawn samples, timing-only runs, and errors by
type and message."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode

import kernbench.torch as torch
import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling
from kernbench.errors import TensorError, TensorValueError
from kernbench.runtime import RuntimeContext, use_context

nn = torch.nn


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def intervals(u, size, out, k):
    """torch's window starts along one dim, in the samples' type as its kernel computes
    them (a float16 quotient rounded from float32's, as c10's Half divides)."""
    kind = u.dtype.type
    starts = []
    if out > 1:
        alpha = kind(np.float64(size - k) / np.float64(out - 1))
        if kind is np.float16:
            alpha = kind(np.float32(size - k) / np.float32(out - 1))
        elif kind is np.float32:
            alpha = kind(size - k) / kind(out - 1)
        starts = [int((kind(i) + u) * alpha) - int(u * alpha) for i in range(out - 1)]
    return [*starts, size - k]


def reference(x, kernel, out_size, samples):
    """The pooled values and flat indices of (N, C, *spatial) ``x``; ``samples`` (N, C,
    dims) are a 2-D pool's (width, height) and a 3-D pool's (depth, height, width)."""
    dims = len(kernel)
    spatial = x.shape[-dims:]
    order = (1, 0) if dims == 2 else (0, 1, 2)
    values = np.zeros(x.shape[:2] + tuple(out_size), x.dtype)
    indices = np.zeros(values.shape, np.int64)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        starts = [
            intervals(samples[n, c, order[d]], spatial[d], out_size[d], kernel[d])
            for d in range(dims)
        ]
        for pos in itertools.product(*(range(o) for o in out_size)):
            first = [starts[d][pos[d]] for d in range(dims)]
            window = x[(n, c, *(slice(f, f + k) for f, k in zip(first, kernel, strict=True)))]
            best = np.unravel_index(int(np.argmax(window)), window.shape)  # the first maximum
            place = tuple(f + b for f, b in zip(first, best, strict=True))
            values[(n, c, *pos)] = window[best]
            indices[(n, c, *pos)] = np.ravel_multi_index(place, spatial)
    return values, indices


def _data(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("shape", "kernel", "out_size", "batched"),
    [
        ((2, 3, 9, 11), (2, 3), (5, 4), True),
        ((3, 8, 7), (3, 2), (4, 6), False),  # unbatched
        ((1, 2, 6, 6), (2, 2), (1, 5), True),  # one output row: the window at in - k
        ((2, 2, 6, 7, 8), (2, 2, 3), (3, 4, 3), True),
        ((2, 7, 6, 9), (2, 3, 2), (3, 2, 5), False),  # unbatched 3-D
    ],
)
def test_values_and_indices_match_torch_s_sequences(ctx, shape, kernel, out_size, batched):
    dims = len(kernel)
    x = _data(shape, seed=len(shape))
    batch = shape[0] if batched else 1
    channels = shape[-dims - 1]
    u = np.random.default_rng(7).random((batch, channels, dims)).astype(np.float32)
    fn = getattr(F, f"fractional_max_pool{dims}d")
    out, idx = fn(
        torch.from_numpy(x), kernel, out_size, return_indices=True,
        _random_samples=torch.from_numpy(u),
    )  # fmt: skip
    values, indices = reference(x if batched else x[None], kernel, out_size, u)
    if not batched:
        values, indices = values[0], indices[0]
    assert idx.dtype is torch.int64
    np.testing.assert_array_equal(out.numpy(), values)
    np.testing.assert_array_equal(idx.numpy(), indices)
    with_indices = getattr(F, f"fractional_max_pool{dims}d_with_indices")
    pair = with_indices(torch.from_numpy(x), kernel, out_size, None, False, torch.from_numpy(u))
    np.testing.assert_array_equal(pair[1].numpy(), indices)
    layer = getattr(nn, f"FractionalMaxPool{dims}d")(
        kernel, output_size=out_size, _random_samples=torch.from_numpy(u)
    )
    np.testing.assert_array_equal(layer(torch.from_numpy(x)).numpy(), values)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_the_sequence_is_computed_in_the_input_s_type(ctx, dtype):
    x = _data((2, 3, 40, 37), seed=9).astype(dtype)
    u = np.random.default_rng(10).random((2, 3, 2)).astype(dtype)
    out, idx = F.fractional_max_pool2d(
        torch.from_numpy(x), 2, (27, 31), return_indices=True, _random_samples=torch.from_numpy(u)
    )
    values, indices = reference(x, (2, 2), (27, 31), u)
    assert out.dtype is getattr(torch, np.dtype(dtype).name)
    np.testing.assert_array_equal(idx.numpy(), indices)
    np.testing.assert_array_equal(out.numpy(), values)


def test_output_ratio_ties_and_nan_follow_torch(ctx):
    x = np.zeros((1, 1, 8, 10), np.float32)  # all ties: the first position of each window
    x[0, 0, 5, 5] = np.nan
    u = np.full((1, 1, 2), 0.3, np.float32)
    out, idx = F.fractional_max_pool2d(
        torch.from_numpy(x), 2, output_ratio=(0.5, 0.5), return_indices=True,
        _random_samples=torch.from_numpy(u),
    )  # fmt: skip
    assert tuple(out.shape) == (1, 1, 4, 5)  # int(8 * 0.5), int(10 * 0.5)
    values, indices = reference(np.nan_to_num(x, nan=1.0), (2, 2), (4, 5), u)
    np.testing.assert_array_equal(idx.numpy(), indices)
    nan_at = np.isnan(out.numpy())
    assert nan_at.sum() == 1 and idx.numpy()[nan_at][0] == 5 * 10 + 5
    layer = nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True)
    assert layer.output_ratio == (0.5, 0.5) and layer.kernel_size == (2, 2)
    assert tuple(layer(torch.from_numpy(x))[1].shape) == (1, 1, 4, 5)


def test_gradient_goes_to_each_window_s_maximum(ctx):
    x = _data((2, 2, 7, 8), seed=3)
    u = np.random.default_rng(4).random((2, 2, 2)).astype(np.float32)
    g = _data((2, 2, 5, 6), seed=5)  # overlapping windows: a position can take two
    for fn in (F.fractional_max_pool2d, F.fractional_max_pool2d_with_indices):
        xt = torch.from_numpy(x).requires_grad_()
        result = fn(xt, (3, 3), (5, 6), _random_samples=torch.from_numpy(u))
        out = result[0] if isinstance(result, tuple) else result
        out.backward(torch.from_numpy(g))
        _, indices = reference(x, (3, 3), (5, 6), u)
        expected = np.zeros((4, 56), np.float32)
        np.add.at(expected, (np.arange(4)[:, None], indices.reshape(4, -1)), g.reshape(4, -1))
        np.testing.assert_allclose(xt.grad.numpy(), expected.reshape(x.shape), rtol=1e-6)
    x3 = torch.from_numpy(_data((2, 5, 5, 5), seed=6)).requires_grad_()
    out3, idx3 = nn.FractionalMaxPool3d(2, output_size=3, return_indices=True)(x3)
    out3.sum().backward()
    counts = np.bincount(idx3.numpy().reshape(2, -1)[0], minlength=125)
    np.testing.assert_array_equal(x3.grad.numpy()[0].reshape(-1), counts)


def test_drawn_samples_come_from_the_rank_s_generator(ctx):
    x = torch.from_numpy(_data((2, 3, 9, 9), seed=8))
    torch.manual_seed(5)
    first = F.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)
    torch.manual_seed(5)
    again = F.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)
    np.testing.assert_array_equal(first[1].numpy(), again[1].numpy())
    flat = x.numpy().reshape(6, -1)
    taken = np.take_along_axis(flat, first[1].numpy().reshape(6, -1), 1)
    np.testing.assert_array_equal(taken.reshape(2, 3, 4, 4), first[0].numpy())


def _pools(context):
    torch.manual_seed(0)  # the same drawn samples on both backends
    x = torch.from_numpy(_data((2, 4, 16, 15), seed=11))
    u = torch.from_numpy(np.random.default_rng(12).random((2, 4, 2)).astype(np.float32))
    start = context.now
    results = [nn.FractionalMaxPool2d(3, output_ratio=0.5)(x)]
    results += F.fractional_max_pool2d(x, 2, (9, 11), return_indices=True, _random_samples=u)
    results += F.fractional_max_pool3d_with_indices(x, (2, 3, 2), (2, 6, 5))
    return context.now - start, results


def test_timing_only_and_the_fast_backend_run_and_price_the_pools_as_a_functional_run():
    times, (detailed, fast) = in_every_mode(_pools)
    assert times[0] > 0 and times[0] == times[1] and times[2] > 0
    assert_same_values(detailed, fast)


def test_argument_errors_as_torch(ctx):
    x = torch.zeros(1, 2, 6, 6)
    u = torch.zeros(1, 2, 2)
    with pytest.raises(TensorValueError, match="requires specifying either an output_size or"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(TensorValueError, match="output_ratio to either be a single Int or tuple"):
        F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5, 0.5))
    with pytest.raises(TensorError, match=r"fractional_max_pool2d\(\): pool height 3 too large "
                       "relative to input height 6"):  # fmt: skip
        F.fractional_max_pool2d(x, 3, output_size=(5, 2), _random_samples=u)
    with pytest.raises(TensorError, match="pool width 2 too large relative to input width 6"):
        F.fractional_max_pool2d(x, 2, output_size=(5, 6), _random_samples=u)
    F.fractional_max_pool2d(x, 2, output_size=5, _random_samples=u)  # 5 + 2 - 1 <= 6
    with pytest.raises(TensorError, match="kernel size should be greater than zero, but got 0x2"):
        F.fractional_max_pool2d(x, (0, 2), output_size=2)
    with pytest.raises(TensorError, match="kernel_size must either be a single Int or tuple of"):
        F.fractional_max_pool2d(x, (1, 2, 2), output_size=2)
    with pytest.raises(TensorError, match=r"Expected 3D or 4D tensor, but got: \[6, 6\]"):
        F.fractional_max_pool2d(torch.zeros(6, 6), 2, output_size=2)
    with pytest.raises(TensorError, match="non-zero size for non-batch dimensions.*dimension 1"):
        F.fractional_max_pool2d(torch.zeros(1, 0, 6, 6), 2, output_size=2)
    with pytest.raises(TensorError, match="same dtype as input"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=u.double())
    with pytest.raises(TensorError, match="size\\(0\\) no less then input batch size"):
        F.fractional_max_pool2d(torch.zeros(2, 2, 6, 6), 2, 2, _random_samples=u)
    with pytest.raises(TensorError, match="size\\(1\\) equals to input channel size"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=torch.zeros(1, 3, 2))
    with pytest.raises(TensorError, match="size\\(2\\) equals to 2; got 3"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=torch.zeros(1, 2, 3))
    with pytest.raises(TensorError, match="to have 3 dimensions, got 2"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=torch.zeros(2, 2))
    x3 = torch.zeros(1, 1, 5, 5, 5)
    with pytest.raises(TensorError, match=r"fractional_max_pool3d_out\(\): pool time 2 too large"):
        F.fractional_max_pool3d(x3, 2, output_size=4)  # torch's 3-D check is strict
    with pytest.raises(TensorError, match=r"fractional_max_pool3d_out\(\): Expected 4D or 5D"):
        F.fractional_max_pool3d(torch.zeros(5, 5, 5), 2, output_size=2)


def test_module_errors_as_torch():
    with pytest.raises(ValueError, match="FractionalMaxPool2d requires specifying either an "
                       "output size, or a pooling ratio"):  # fmt: skip
        nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio may be"):
        nn.FractionalMaxPool3d(2, output_size=2, output_ratio=0.5)
    with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got 1.5\)"):
        nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match=r"kernel_size must greater than 0, but got \(2, 0, 2\)"):
        nn.FractionalMaxPool3d((2, 0, 2), output_size=2)
    assert torch.nn.modules.pooling.FractionalMaxPool3d is nn.FractionalMaxPool3d
