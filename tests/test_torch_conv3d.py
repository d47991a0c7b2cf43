"""``F.conv3d``/``nn.Conv3d``, ``F.conv_transpose3d``/``nn.ConvTranspose3d``, the 3-D max,
average and adaptive pools and their modules, and ``nn.BatchNorm3d``: values against NumPy
references (stride, padding numbers, 'same' and 'valid', dilation, groups, bias, unbatched
inputs, indices, ``ceil_mode``, ``count_include_pad``, ``divisor_override``), gradients
through the autograd engine against central differences, torch's node names, errors by
type and message, and costs: the implicit GEMM's, and a depth of 1 costing what the 2-D
op costs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from gradcheck import check, rand
from run_modes import assert_same_values, in_every_mode
from run_modes import simulated_ps as cost

import kernbench.torch as torch
import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


# ------------------------------------------------------------------------------ references
def conv_reference(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """A convolution (cross-correlation) of (N, C, *spatial) ``x`` in float64; ``padding``
    per dim as (before, after) pairs or one number."""
    dims = x.ndim - 2
    stride, dilation = _per_dim(stride, dims), _per_dim(dilation, dims)
    pads = [(p, p) for p in _per_dim(padding, dims)] if not _pairs(padding) else padding
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads])
    n, cout, cg, kernel = x.shape[0], w.shape[0], w.shape[1], w.shape[2:]
    out_spatial = [
        (s - d * (k - 1) - 1) // st + 1
        for s, d, k, st in zip(xp.shape[2:], dilation, kernel, stride, strict=True)
    ]
    out = np.zeros((n, cout, *out_spatial))
    og = cout // groups
    for taps in itertools.product(*(range(k) for k in kernel)):
        key = tuple(
            slice(t * d, t * d + (o - 1) * st + 1, st)
            for t, d, o, st in zip(taps, dilation, out_spatial, stride, strict=True)
        )
        for g in range(groups):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg), *key)]
            col = w[(slice(g * og, (g + 1) * og), slice(None), *taps)]
            out[:, g * og : (g + 1) * og] += np.einsum("nc...,oc->no...", patch, col)
    if b is not None:
        out += b.reshape(cout, *(1,) * dims)
    return out


def conv_transpose_reference(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                             dilation=1):  # fmt: skip
    """Each input element times the weight, added into the output at its strided place."""
    dims = x.ndim - 2
    stride, padding = _per_dim(stride, dims), _per_dim(padding, dims)
    extra, dilation = _per_dim(output_padding, dims), _per_dim(dilation, dims)
    n, cin, spatial = x.shape[0], x.shape[1], x.shape[2:]
    og, kernel = w.shape[1], w.shape[2:]
    full = [
        (s - 1) * st + d * (k - 1) + 1 + e
        for s, st, d, k, e in zip(spatial, stride, dilation, kernel, extra, strict=True)
    ]
    out = np.zeros((n, og * groups, *full))
    cg = cin // groups
    for taps in itertools.product(*(range(k) for k in kernel)):
        key = tuple(
            slice(t * d, t * d + (s - 1) * st + 1, st)
            for t, d, s, st in zip(taps, dilation, spatial, stride, strict=True)
        )
        for g in range(groups):
            part = x[:, g * cg : (g + 1) * cg]
            col = w[(slice(g * cg, (g + 1) * cg), slice(None), *taps)]
            out[(slice(None), slice(g * og, (g + 1) * og), *key)] += np.einsum(
                "nc...,co->no...", part, col
            )
    out = out[(..., *(slice(p, f - p) for p, f in zip(padding, full, strict=True)))]
    if b is not None:
        out = out + b.reshape(-1, *(1,) * dims)
    return out


def _per_dim(value, dims):
    return tuple(value) if isinstance(value, tuple | list) else (value,) * dims


def _pairs(value):
    return isinstance(value, list) and value and isinstance(value[0], tuple)


def pool_reference(x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False, kind="max",
                   count_include_pad=True, divisor=None):  # fmt: skip
    """torch's 3-D max (values, flat indices) or average pool of (N, C, D, H, W) ``x``."""
    kernel = _per_dim(kernel, 3)
    stride = kernel if stride is None else _per_dim(stride, 3)
    padding, dilation = _per_dim(padding, 3), _per_dim(dilation, 3)
    spatial = x.shape[2:]
    outs = []
    for s, k, p, st, d in zip(spatial, kernel, padding, stride, dilation, strict=True):
        o = (s + 2 * p - d * (k - 1) - 1 + (st - 1 if ceil_mode else 0)) // st + 1
        if ceil_mode and (o - 1) * st >= s + p:
            o -= 1
        outs.append(o)
    values = np.zeros((*x.shape[:2], *outs))
    indices = np.zeros(values.shape, np.int64)
    for pos in itertools.product(*(range(o) for o in outs)):
        starts = [o * st - p for o, st, p in zip(pos, stride, padding, strict=True)]
        taps = [
            [a + t * d for t in range(k) if 0 <= a + t * d < s]
            for a, k, d, s in zip(starts, kernel, dilation, spatial, strict=True)
        ]
        points = list(itertools.product(*taps))
        if kind == "max":
            vals = np.stack([x[(..., *pt)] for pt in points], -1)
            best = vals.argmax(-1)
            values[(..., *pos)] = vals.max(-1)
            flat = [(a * spatial[1] + b) * spatial[2] + c for a, b, c in points]
            indices[(..., *pos)] = np.array(flat)[best]
        else:
            total = sum(x[(..., *pt)] for pt in points) if points else 0.0
            if divisor is not None:
                count = divisor
            elif count_include_pad:
                count = math.prod(
                    min(a + k, s + p) - a
                    for a, k, s, p in zip(starts, kernel, spatial, padding, strict=True)
                )
            else:
                count = len(points)
            values[(..., *pos)] = total / count
    return (values, indices) if kind == "max" else values


def adaptive_reference(x, sizes, kind="avg"):
    spatial = x.shape[2:]
    out = np.zeros((*x.shape[:2], *sizes))
    for pos in itertools.product(*(range(o) for o in sizes)):
        key = tuple(
            slice(o * s // n, -(-(o + 1) * s // n))
            for o, s, n in zip(pos, spatial, sizes, strict=True)
        )
        window = x[(..., *key)].reshape(*x.shape[:2], -1)
        out[(..., *pos)] = window.mean(-1) if kind == "avg" else window.max(-1)
    return out


def _t(a):
    return torch.tensor(a, dtype=torch.float64)


# ------------------------------------------------------------------------------ convolution
CONV_CASES = [
    # stride, padding, dilation, groups
    (1, 0, 1, 1),
    ((1, 2, 2), (1, 0, 2), (2, 1, 1), 2),
    (2, 1, 1, 4),
    (1, "same", (1, 2, 1), 1),
    (1, "valid", 1, 2),
]


@pytest.mark.parametrize(("stride", "padding", "dilation", "groups"), CONV_CASES)
def test_conv3d_matches_numpy(ctx, stride, padding, dilation, groups):
    x, w, b = rand((2, 4, 5, 6, 7), 1), rand((8, 4 // groups, 3, 2, 3), 2), rand((8,), 3)
    got = F.conv3d(_t(x), _t(w), _t(b), stride, padding, dilation, groups).numpy()
    if padding == "same":
        dilated = [d * (k - 1) for d, k in zip(_per_dim(dilation, 3), w.shape[2:], strict=True)]
        padding = [(t // 2, t - t // 2) for t in dilated]
    elif padding == "valid":
        padding = 0
    want = conv_reference(x, w, b, stride, padding, dilation, groups)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_conv3d_float32_unbatched_and_the_module(ctx):
    x, w = rand((3, 4, 5, 6), 4).astype(np.float32), rand((2, 3, 2, 2, 2), 5).astype(np.float32)
    got = F.conv3d(torch.from_numpy(x), torch.from_numpy(w), None, 1, 1)
    assert got.shape == (2, 5, 6, 7) and got.dtype is torch.float32
    np.testing.assert_allclose(got.numpy(), conv_reference(x[None], w, padding=1)[0], rtol=1e-5,
                               atol=1e-5)  # fmt: skip
    torch.manual_seed(0)
    layer = nn.Conv3d(3, 8, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), groups=1)
    assert tuple(layer.weight.shape) == (8, 3, 2, 3, 3) and tuple(layer.bias.shape) == (8,)
    bound = 1 / math.sqrt(3 * 2 * 3 * 3)  # kaiming_uniform_(a=sqrt(5)) of fan-in C*k
    assert np.abs(layer.weight.detach().numpy()).max() <= bound
    assert repr(layer) == (
        "Conv3d(3, 8, kernel_size=(2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))"
    )
    xs = torch.from_numpy(rand((2, 3, 4, 6, 6), 6).astype(np.float32))
    want = conv_reference(
        xs.numpy(), layer.weight.detach().numpy(), layer.bias.detach().numpy(), (1, 2, 2),
        (0, 1, 1),
    )  # fmt: skip
    np.testing.assert_allclose(layer(xs).detach().numpy(), want, rtol=1e-5, atol=1e-5)
    assert nn.Conv3d(2, 4, 3, padding="same", bias=False).bias is None


@pytest.mark.parametrize(
    ("stride", "padding", "output_padding", "groups", "dilation"),
    [(1, 0, 0, 1, 1), (2, 1, 1, 2, 1), ((1, 2, 3), (0, 1, 1), (0, 1, 2), 1, (2, 1, 1))],
)
def test_conv_transpose3d_matches_numpy(ctx, stride, padding, output_padding, groups, dilation):
    x, w, b = rand((2, 4, 3, 4, 3), 7), rand((4, 3, 2, 3, 2), 8), rand((3 * groups,), 9)
    got = F.conv_transpose3d(_t(x), _t(w), _t(b), stride, padding, output_padding, groups,
                             dilation).numpy()  # fmt: skip
    want = conv_transpose_reference(x, w, b, stride, padding, output_padding, groups, dilation)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    layer = nn.ConvTranspose3d(4, 6, 2, stride=2, bias=False)
    assert tuple(layer.weight.shape) == (4, 6, 2, 2, 2)
    assert tuple(layer(torch.ones(4, 3, 4, 3)).shape) == (6, 6, 8, 6)
    sized = layer(torch.ones(1, 4, 3, 4, 3), output_size=(7, 9, 7))
    assert tuple(sized.shape) == (1, 6, 7, 9, 7)
    with pytest.raises(ValueError, match="valid sizes range from \\[6, 8, 6\\] to \\[7, 9, 7\\]"):
        layer(torch.ones(1, 4, 3, 4, 3), output_size=(8, 9, 7))


def test_convolution_errors_as_torch(ctx):
    x, w = torch.ones(1, 4, 3, 3, 3), torch.ones(2, 4, 2, 2, 2)
    with pytest.raises(TensorError, match=r"Expected 4D \(unbatched\) or 5D \(batched\) input to "
                       r"conv3d, but got input of size: \[4, 3, 3\]"):  # fmt: skip
        F.conv3d(torch.ones(4, 3, 3), w)
    with pytest.raises(TensorError, match=r"expected a 5-D weight \(out_channels, "
                       r"in_channels/groups, kD, kH, kW\)"):  # fmt: skip
        F.conv3d(x, torch.ones(2, 4, 2, 2))
    with pytest.raises(TensorError, match="expected input\\[1, 4, 3, 3, 3\\] to have 2 channels"):
        F.conv3d(x, torch.ones(2, 1, 2, 2, 2), groups=2)
    with pytest.raises(TensorError, match="padding='same' is not supported for strided"):
        F.conv3d(x, w, stride=2, padding="same")
    with pytest.raises(TensorError, match=r"Kernel size: \(4 x 2 x 2\). Kernel size can't be"):
        F.conv3d(x, torch.ones(2, 4, 4, 2, 2))
    with pytest.raises(TensorError, match="stride must be an int or 3 ints"):
        F.conv3d(x, w, stride=(1, 1))
    with pytest.raises(TensorError, match="output_padding_depth: 2 output_padding_height: 0 "
                       "output_padding_width: 0 stride_depth: 2 stride_height: 2"):  # fmt: skip
        F.conv_transpose3d(x, torch.ones(4, 2, 2, 2, 2), stride=2, output_padding=(2, 0, 0))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv3d(3, 4, 2, groups=2)
    assert "padding_mode=replicate" in repr(nn.Conv3d(3, 4, 2, padding_mode="replicate"))
    assert nn.FractionalMaxPool3d.__name__ == "FractionalMaxPool3d"


def test_conv3d_gradients(ctx):
    check(
        lambda x, w, b: F.conv3d(x, w, b, (1, 2, 1), (1, 0, 1), (1, 1, 2), 2),
        lambda x, w, b: conv_reference(x, w, b, (1, 2, 1), (1, 0, 1), (1, 1, 2), 2),
        (2, 4, 3, 4, 5), (4, 2, 2, 2, 2), (4,),
        node="ConvolutionBackward0",
    )  # fmt: skip
    check(
        lambda x, w: F.conv3d(x, w, None, 1, "same"),
        lambda x, w: conv_reference(x, w, None, 1, [(0, 1), (0, 1), (0, 1)]),
        (1, 2, 3, 3, 3), (2, 2, 2, 2, 2),
    )  # fmt: skip
    check(  # unbatched
        lambda x, w: F.conv3d(x, w, stride=2),
        lambda x, w: conv_reference(x[None], w, stride=2)[0],
        (2, 5, 3, 5), (3, 2, 3, 1, 3),
    )  # fmt: skip


def test_conv_transpose3d_gradients(ctx):
    check(
        lambda x, w, b: F.conv_transpose3d(x, w, b, 2, 1, (1, 0, 1), 2),
        lambda x, w, b: conv_transpose_reference(x, w, b, 2, 1, (1, 0, 1), 2),
        (1, 4, 2, 3, 2), (4, 1, 3, 2, 3), (2,),
        node="ConvolutionBackward0",
    )  # fmt: skip


# ------------------------------------------------------------------------------------ pools
@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation", "ceil_mode"),
    [
        (2, None, 0, 1, False),
        ((3, 2, 3), (2, 1, 2), (1, 0, 1), 1, True),
        (2, 1, 1, (2, 1, 2), False),
    ],
)
def test_max_pool3d_matches_numpy(ctx, kernel, stride, padding, dilation, ceil_mode):
    x = rand((2, 3, 5, 6, 7), 10)
    values, indices = F.max_pool3d(_t(x), kernel, stride, padding, dilation, ceil_mode, True)
    want, want_idx = pool_reference(x, kernel, stride, padding, dilation, ceil_mode)
    np.testing.assert_array_equal(values.numpy(), want)
    np.testing.assert_array_equal(indices.numpy(), want_idx)
    assert indices.dtype is torch.int64
    layer = nn.MaxPool3d(kernel, stride, padding, dilation, ceil_mode=ceil_mode)
    np.testing.assert_array_equal(layer(_t(x[0])).numpy(), want[0])  # unbatched


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "ceil_mode", "include", "divisor"),
    [
        (2, None, 0, False, True, None),
        ((3, 2, 3), (2, 1, 2), (1, 0, 1), True, True, None),
        ((3, 2, 3), (2, 1, 2), (1, 0, 1), True, False, None),
        (3, 2, 1, False, True, 5),
    ],
)
def test_avg_pool3d_matches_numpy(ctx, kernel, stride, padding, ceil_mode, include, divisor):
    x = rand((2, 3, 5, 6, 7), 11)
    got = F.avg_pool3d(_t(x), kernel, stride, padding, ceil_mode, include, divisor)
    want = pool_reference(x, kernel, stride, padding, 1, ceil_mode, "avg", include, divisor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    layer = nn.AvgPool3d(kernel, stride, padding, ceil_mode, include, divisor)
    np.testing.assert_allclose(layer(_t(x)).numpy(), want, rtol=1e-12, atol=1e-12)


def test_adaptive_pools_3d_match_numpy(ctx):
    x = rand((2, 3, 5, 7, 6), 12)
    for sizes in ((2, 3, 4), (5, 7, 6), (1, 1, 1), (3, 4, 6)):
        got = F.adaptive_avg_pool3d(_t(x), sizes)
        np.testing.assert_allclose(got.numpy(), adaptive_reference(x, sizes), rtol=1e-12)
        got = F.adaptive_max_pool3d(_t(x), sizes)
        np.testing.assert_array_equal(got.numpy(), adaptive_reference(x, sizes, "max"))
    assert tuple(nn.AdaptiveAvgPool3d((None, 2, 3))(_t(x)).shape) == (2, 3, 5, 2, 3)
    assert tuple(nn.AdaptiveAvgPool3d(2)(_t(x[0])).shape) == (3, 2, 2, 2)
    values, indices = nn.AdaptiveMaxPool3d(2, return_indices=True)(_t(x))
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(
        np.take_along_axis(flat, indices.numpy().reshape(2, 3, -1), 2).reshape(values.shape),
        values.numpy(),
    )


def test_pool_errors_as_torch(ctx):
    x = torch.ones(1, 2, 3, 3, 3)
    with pytest.raises(TensorError, match="pad should be at most half of effective kernel size"):
        F.max_pool3d(x, 2, padding=(0, 0, 2))
    with pytest.raises(
        TensorError,
        match=r"non-empty 4D or 5D \(batch mode\) tensor expected for input, but got: \[3, 3, 3\]",
    ):
        F.avg_pool3d(torch.ones(3, 3, 3), 2)
    with pytest.raises(TensorError, match="divisor must be not zero"):
        F.avg_pool3d(x, 2, divisor_override=0)
    with pytest.raises(TensorError, match="kernel_size must be an int or 3 ints"):
        F.max_pool3d(x, (2, 2))
    with pytest.raises(TensorError, match="output_size must be 3 ints"):
        F.adaptive_avg_pool3d(x, (2, 2))


def test_pool3d_gradients(ctx):
    def max_values(x, *args):
        return pool_reference(x, *args)[0]

    check(lambda x: F.max_pool3d(x, 2, 1, 1), lambda x: max_values(x, 2, 1, 1),
          (1, 2, 3, 4, 3), node="MaxPool3DWithIndicesBackward0")  # fmt: skip
    check(lambda x: F.avg_pool3d(x, (3, 2, 3), (2, 1, 2), 1, True, False),
          lambda x: pool_reference(x, (3, 2, 3), (2, 1, 2), 1, 1, True, "avg", False),
          (1, 2, 5, 4, 5), node="AvgPool3DBackward0")  # fmt: skip
    check(lambda x: F.avg_pool3d(x, 2), lambda x: pool_reference(x, 2, kind="avg"),
          (2, 1, 4, 4, 6))  # fmt: skip
    for sizes in ((2, 2, 3), (3, 2, 4)):  # windows that tile, and uneven ones
        check(lambda x, s=sizes: F.adaptive_avg_pool3d(x, s),
              lambda x, s=sizes: adaptive_reference(x, s),
              (2, 2, 4, 4, 6), node="AdaptiveAvgPool3DBackward0")  # fmt: skip
    check(lambda x: F.adaptive_max_pool3d(x, (2, 3, 2)),
          lambda x: adaptive_reference(x, (2, 3, 2), "max"),
          (1, 2, 5, 4, 3), node="AdaptiveMaxPool3DBackward0")  # fmt: skip


# ------------------------------------------------------------------------------- batch norm
def test_batch_norm3d_trains_and_evaluates_as_torch(ctx):
    x = rand((3, 4, 2, 3, 5), 13)
    layer = nn.BatchNorm3d(4, dtype=torch.float64)
    out = layer(_t(x)).detach().numpy()
    mean, var = x.mean((0, 2, 3, 4), keepdims=True), x.var((0, 2, 3, 4), keepdims=True)
    np.testing.assert_allclose(out, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-10, atol=1e-10)
    count = x.size // 4
    np.testing.assert_allclose(
        layer.running_var.numpy(), 0.9 + 0.1 * var.ravel() * count / (count - 1)
    )
    layer.eval()
    want = (x - layer.running_mean.numpy().reshape(4, 1, 1, 1)) / np.sqrt(
        layer.running_var.numpy().reshape(4, 1, 1, 1) + 1e-5
    )
    np.testing.assert_allclose(layer(_t(x)).detach().numpy(), want, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match=r"expected 5D input \(got 4D input\)"):
        layer(_t(x[0]))
    assert "BatchNorm3d(4, eps=1e-05" in repr(layer)

    def reference(x, w, b):
        m, v = x.mean((0, 2, 3, 4), keepdims=True), x.var((0, 2, 3, 4), keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * w.reshape(3, 1, 1, 1) + b.reshape(3, 1, 1, 1)

    check(lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
          reference, (2, 3, 2, 3, 2), (3,), (3,), node="NativeBatchNormBackward0")  # fmt: skip


# ------------------------------------------------------------------------------------ costs
@pytest.fixture
def timing():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        yield context


def test_conv3d_costs_its_gemm_and_a_depth_of_one_costs_the_2d_convolution(timing):
    core = timing.topology.cube.pe_template.components.pe_core.attrs
    rate = core.matrix_flops_per_cycle * core.clock
    n, c, d, size, cout, k = 2, 16, 6, 10, 32, 3
    x, w = torch.ones(n, c, d, size, size), torch.ones(cout, c, k, k, k)
    od, out = d - k + 1, size - k + 1
    flops = 2 * n * cout * od * out * out * c * k**3
    spent = cost(timing, lambda: F.conv3d(x, w))
    assert spent >= flops / rate * 1e12
    patches, weight = torch.ones(n * od * out * out, c * k**3), torch.ones(c * k**3, cout)
    gemm = cost(timing, lambda: patches @ weight)
    assert abs(spent - gemm) <= 0.01 * gemm

    # a volume of depth 1 and a kernel of depth 1: exactly the 2-D op's time (each measured
    # after a first run, whose time depends on what ran before it)
    def steady(call):
        cost(timing, call)
        return cost(timing, call)

    x2, w2 = torch.ones(n, c, size, size), torch.ones(cout, c, k, k)
    x3, w3 = x2.unsqueeze(2), w2.unsqueeze(2)
    for op3, op2 in (
        (
            lambda: F.conv3d(x3, w3, None, (1, 2, 1), (0, 1, 1)),
            lambda: F.conv2d(x2, w2, None, (2, 1), 1),
        ),
        (lambda: F.max_pool3d(x3, (1, 2, 2)), lambda: F.max_pool2d(x2, 2)),
        (lambda: F.avg_pool3d(x3, (1, 3, 3), 1, (0, 1, 1)), lambda: F.avg_pool2d(x2, 3, 1, 1)),
        (lambda: F.adaptive_avg_pool3d(x3, (1, 3, 3)), lambda: F.adaptive_avg_pool2d(x2, 3)),
    ):
        assert steady(op3) == steady(op2)


def test_conv3d_backward_costs_about_three_forwards(timing):
    x = torch.ones(4, 16, 8, 12, 12, requires_grad=True)
    w = torch.ones(32, 16, 3, 3, 3, requires_grad=True)
    F.conv3d(x, w, padding=1)  # a first run, whose time depends on what ran before
    start = timing.now
    out = F.conv3d(x, w, padding=1)
    forward = timing.now - start
    start = timing.now
    out.sum().backward()
    # two convolutions of the forward's FLOPs plus the copies they read (2.8 here)
    assert 2.0 * forward <= timing.now - start <= 4.0 * forward


def _volumes(context):
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.standard_normal((2, 4, 5, 6, 6)).astype(np.float32))
    w = torch.from_numpy(rng.standard_normal((8, 2, 3, 3, 3)).astype(np.float32))
    start = context.now
    results = [
        F.conv3d(x, w, None, (1, 2, 2), 1, 1, 2),
        F.conv_transpose3d(x, w[:4], None, 2, 1),
        F.max_pool3d(x, 2, 1, 1, return_indices=True)[1],
        F.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
        F.adaptive_avg_pool3d(x, (2, 4, 3)),
    ]
    return context.now - start, results


def test_3d_ops_run_timing_only_and_on_the_fast_backend_with_the_same_values():
    times, (detailed, fast) = in_every_mode(_volumes)
    assert times[0] > 0 and times[0] == times[1]  # timing-only costs what functional does
    assert times[2] > 0
    assert_same_values(detailed, fast)


def test_a_3d_training_step_runs(ctx):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv3d(1, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(), nn.MaxPool3d(2),
        nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(4, 3),
    )  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(2, 1, 4, 4, 4), torch.tensor([0, 2])
    before = ctx.now
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert ctx.now > before and losses[-1] < losses[0]
    assert model[0].weight.grad is not None and model[1].weight.grad is not None
