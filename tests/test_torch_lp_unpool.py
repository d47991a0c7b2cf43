"""``F.lp_pool1d/2d/3d``, ``F.max_unpool1d/2d/3d`` and their modules: values against NumPy
references (windows cut by ``ceil_mode``, ``output_size``, unbatched inputs), gradients,
and errors by type and message."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context

nn = torch.nn


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def lp_reference(x, p, kernel, stride, ceil_mode):
    """torch's lp pool in float64: the mean of ``x ** p`` over each window (cut at the
    input's end when ``ceil_mode`` lets one start past it), times the whole kernel's size,
    to the power ``1 / p`` (sign kept)."""
    x = x.astype(np.float64)
    dims = len(kernel)
    spatial = x.shape[-dims:]
    outs = []
    for size, k, s in zip(spatial, kernel, stride, strict=True):
        n = (size - k + ((s - 1) if ceil_mode else 0)) // s + 1
        if ceil_mode and (n - 1) * s >= size:
            n -= 1
        outs.append(n)
    out = np.zeros(x.shape[:-dims] + tuple(outs))
    for pos in itertools.product(*(range(n) for n in outs)):
        window = tuple(
            slice(i * s, min(i * s + k, size))
            for i, s, k, size in zip(pos, stride, kernel, spatial, strict=True)
        )
        block = x[(Ellipsis, *window)] ** p
        mean = block.reshape(*block.shape[:-dims], -1).mean(-1)
        out[(Ellipsis, *pos)] = mean
    scaled = np.sign(out) * np.abs(out) * np.prod(kernel)
    return np.sign(scaled) * np.abs(scaled) ** (1.0 / p)


@pytest.mark.parametrize(
    ("dims", "shape", "p", "kernel", "stride", "ceil_mode"),
    [
        (1, (2, 3, 9), 2.0, (3,), (2,), False),
        (1, (3, 10), 1.0, (4,), (3,), True),  # unbatched; the last window is cut
        (2, (2, 2, 5, 7), 2.0, (2, 3), (2, 2), False),
        (2, (1, 2, 5, 7), 3.0, (2, 2), (2, 2), True),
        (3, (1, 2, 4, 5, 3), 2.0, (2, 2, 2), (2, 2, 1), False),
    ],
)
def test_lp_pool_matches_numpy(ctx, dims, shape, p, kernel, stride, ceil_mode):
    x = _values(shape, seed=dims, low=0.1 if p == 3.0 else -2.0)
    fn = getattr(F, f"lp_pool{dims}d")
    out = fn(torch.from_numpy(x), p, kernel, stride, ceil_mode)
    expected = lp_reference(x, p, kernel, stride, ceil_mode)
    assert tuple(out.shape) == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=2e-5, atol=1e-5)
    layer = getattr(nn, f"LPPool{dims}d")(p, kernel, stride, ceil_mode)
    np.testing.assert_allclose(layer(torch.from_numpy(x)).numpy(), out.numpy())


def test_lp_pool_defaults_stride_to_the_kernel_and_reprs_as_torch(ctx):
    x = _values((1, 1, 4, 4), seed=3)
    out = F.lp_pool2d(torch.from_numpy(x), 2, 2)
    np.testing.assert_allclose(
        out.numpy(), lp_reference(x, 2.0, (2, 2), (2, 2), False), rtol=2e-5, atol=1e-6
    )
    assert repr(nn.LPPool2d(2, 3, stride=2)) == (
        "LPPool2d(norm_type=2, kernel_size=3, stride=2, ceil_mode=False)"
    )


def test_lp_pool_gradient_is_each_element_over_its_window_norm(ctx):
    x = _values((1, 1, 4, 6), seed=4)
    t = torch.from_numpy(x).requires_grad_()
    F.lp_pool2d(t, 2, (2, 3)).sum().backward()
    norms = lp_reference(x, 2.0, (2, 3), (2, 3), False)
    expected = x / np.repeat(np.repeat(norms, 2, axis=2), 3, axis=3)
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-4, atol=1e-6)


def test_lp_pool_errors(ctx):
    x = torch.ones(1, 1, 4, 4)
    with pytest.raises(TensorError, match="lp_pool2d: norm_type must not be 0"):
        F.lp_pool2d(x, 0, 2)
    with pytest.raises(TensorError, match="lp_pool2d: norm_type must be a number, got 'two'"):
        F.lp_pool2d(x, "two", 2)
    with pytest.raises(TensorError, match="lp_pool2d: kernel_size must be an int or 2 ints"):
        F.lp_pool2d(x, 2, (2, 2, 2))


def unpool_reference(x, kernel, stride, out_spatial):
    """Max-pool ``x`` (no padding) in NumPy and put each window's maximum back where it
    was in a zero output of ``out_spatial`` (positions taken in the input's own plane)."""
    dims = len(kernel)
    spatial = x.shape[-dims:]
    pooled_shape = [(size - k) // s + 1 for size, k, s in zip(spatial, kernel, stride, strict=True)]
    planes = x.shape[:-dims]
    out = np.zeros(planes + (int(np.prod(out_spatial)),), dtype=x.dtype)
    for plane in itertools.product(*(range(n) for n in planes)):
        for pos in itertools.product(*(range(n) for n in pooled_shape)):
            window = tuple(
                slice(i * s, i * s + k) for i, s, k in zip(pos, stride, kernel, strict=True)
            )
            block = x[plane][window]
            at = np.unravel_index(np.argmax(block), block.shape)
            where = tuple(w.start + a for w, a in zip(window, at, strict=True))
            out[plane][np.ravel_multi_index(where, spatial)] = block[at]
    return out.reshape(planes + tuple(out_spatial))


@pytest.mark.parametrize(
    ("dims", "shape", "kernel", "output_size"),
    [
        (1, (2, 3, 8), (2,), None),
        (2, (2, 2, 4, 6), (2, 2), None),
        (2, (3, 4, 4), (2, 2), None),  # unbatched
        (2, (1, 2, 5, 5), (2, 2), (5, 5)),  # the odd row and column back
        (2, (1, 2, 5, 5), (2, 2), (1, 2, 5, 5)),  # output_size as the whole shape
        (3, (1, 1, 4, 4, 2), (2, 2, 2), None),
    ],
)
def test_max_unpool_puts_each_maximum_back_where_max_pool_found_it(
    ctx, dims, shape, kernel, output_size
):
    x = _values(shape, seed=10 + dims)
    t = torch.from_numpy(x)
    pooled, indices = getattr(F, f"max_pool{dims}d")(t, kernel, return_indices=True)
    out = getattr(F, f"max_unpool{dims}d")(pooled, indices, kernel, output_size=output_size)
    spatial = (
        shape[-dims:]
        if output_size
        else [(s // k) * k for s, k in zip(shape[-dims:], kernel, strict=True)]
    )
    expected = unpool_reference(x, kernel, kernel, spatial)
    assert tuple(out.shape) == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    layer = getattr(nn, f"MaxUnpool{dims}d")(kernel)
    np.testing.assert_array_equal(layer(pooled, indices, output_size).numpy(), expected)


def test_max_unpool_with_stride_and_padding_sizes_as_torch(ctx):
    x = _values((1, 1, 5, 5), seed=7)
    pooled, indices = F.max_pool2d(torch.from_numpy(x), 3, stride=2, padding=1, return_indices=True)
    out = F.max_unpool2d(pooled, indices, 3, stride=2, padding=1)
    assert tuple(out.shape) == (1, 1, 5, 5)  # (3 - 1) * 2 + 3 - 2 * 1
    values = out.numpy().reshape(-1)
    flat = indices.numpy().reshape(-1)
    np.testing.assert_array_equal(values[flat], x.reshape(-1)[flat])
    assert np.count_nonzero(values) == len(set(flat.tolist()))
    assert repr(nn.MaxUnpool2d(3, 2, 1)) == "MaxUnpool2d(kernel_size=3, stride=2, padding=1)"


def test_max_unpool_gradient_reaches_the_maxima(ctx):
    x = _values((1, 2, 4, 4), seed=8)
    t = torch.from_numpy(x).requires_grad_()
    pooled, indices = F.max_pool2d(t, 2, return_indices=True)
    weights = _values((1, 2, 4, 4), seed=9)
    (F.max_unpool2d(pooled, indices, 2) * torch.from_numpy(weights)).sum().backward()
    is_max = unpool_reference(x, (2, 2), (2, 2), (4, 4)) != 0
    np.testing.assert_allclose(t.grad.numpy(), np.where(is_max, weights, 0.0), rtol=1e-6)


def test_max_unpool_errors(ctx):
    pooled, indices = F.max_pool2d(torch.ones(1, 1, 4, 4), 2, return_indices=True)
    with pytest.raises(
        TensorError, match=r'invalid output_size "\[7, 4\]" \(dim 0 must be between 2 and 6\)'
    ):
        F.max_unpool2d(pooled, indices, 2, output_size=(7, 4))
    with pytest.raises(TensorError, match="output_size should be a sequence containing 2 or 4"):
        F.max_unpool2d(pooled, indices, 2, output_size=(4,))
    with pytest.raises(
        TensorError, match="Expected shape of indices to be same as that of the input"
    ):
        F.max_unpool2d(pooled, indices[..., :1], 2)
    with pytest.raises(TensorError, match="elements in indices should be type int64"):
        F.max_unpool2d(pooled, indices.float(), 2)
    bad = torch.tensor([[[[0, 1], [2, 99]]]])
    with pytest.raises(
        TensorError,
        match=r"max_unpool2d: found an invalid max index \(output planes are of size 4x4\)",
    ):
        F.max_unpool2d(pooled, bad, 2)
    with pytest.raises(TensorError, match="max_unpool1d: expected a 2D or 3D"):
        F.max_unpool1d(torch.ones(2), torch.zeros(2, dtype=torch.int64), 2)
