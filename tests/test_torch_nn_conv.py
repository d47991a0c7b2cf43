"""``F.conv1d``/``F.conv2d`` and ``nn.Conv1d``/``nn.Conv2d``: values against a NumPy
reference (stride, padding with numbers, 'same' and 'valid', dilation, groups, bias,
unbatched inputs; float32, float64, float16, bfloat16), torch's output shapes, module
initialisation, errors by type and message, both modes and both backends, and the cost of
the implicit GEMM against its FLOPs on the matrix engine."""

from __future__ import annotations

import math

import numpy as np
import pytest
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


def conv_reference(x, w, b, stride, before, after, dilation, groups):
    """A convolution (cross-correlation) of (N, C, H, W) ``x`` in float64: for each kernel
    position, the strided slice of the zero-padded input times that weight column."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (before[0], after[0]), (before[1], after[1])))
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, cout, oh, ow))
    og = cout // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
                cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
                patch = xp[:, g * cg : (g + 1) * cg, rows, cols]
                weight = w[g * og : (g + 1) * og, :, i, j]
                out[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, weight)
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    return out


def _pads(padding, kernel, dilation):
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
    return padding, padding


CASES = [  # (x shape, weight shape, stride, padding, dilation, groups, bias)
    ((2, 3, 9, 10), (8, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1, True),
    ((2, 4, 9, 11), (6, 2, 3, 2), (2, 1), (1, 2), (1, 2), 2, True),
    ((1, 4, 8, 8), (4, 1, 3, 3), (2, 2), (1, 1), (1, 1), 4, False),  # depthwise
    ((2, 5, 7, 9), (3, 5, 2, 3), (1, 1), "same", (2, 1), 1, True),  # uneven 'same'
    ((1, 6, 6, 7), (70, 6, 3, 3), (1, 1), "valid", (1, 1), 1, True),  # two channel blocks
    ((1, 2, 12, 5), (4, 2, 5, 1), (3, 1), (2, 0), (1, 1), 1, False),
    ((2, 40, 6, 6), (16, 40, 1, 1), (2, 2), (0, 0), (1, 1), 1, False),  # a 1x1 downsample
]


@pytest.mark.parametrize(("xs", "ws", "stride", "padding", "dilation", "groups", "bias"), CASES)
def test_conv2d_is_the_reference_convolution(ctx, xs, ws, stride, padding, dilation, groups, bias):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32) if bias else None
    got = F.conv2d(
        torch.from_numpy(x),
        torch.from_numpy(w),
        torch.from_numpy(b) if bias else None,
        stride,
        padding,
        dilation,
        groups,
    )
    before, after = _pads(padding, ws[2:], dilation)
    expected = conv_reference(x, w, b, stride, before, after, dilation, groups)
    assert tuple(got.shape) == expected.shape and got.dtype is torch.float32
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("dtype", "tol"), [("float64", 1e-12), ("float16", 2e-3), ("bfloat16", 2e-2)]
)
def test_conv2d_in_other_float_dtypes_rounds_a_float32_accumulation(ctx, dtype, tol):
    rng = np.random.default_rng(2)
    dt = getattr(torch, dtype)
    x = torch.from_numpy(rng.standard_normal((2, 4, 7, 7))).to(dt)
    w = torch.from_numpy(rng.standard_normal((6, 2, 3, 3)) / 4).to(dt)
    b = torch.from_numpy(rng.standard_normal(6)).to(dt)
    got = F.conv2d(x, w, b, stride=2, padding=1, groups=2)
    assert got.dtype is dt and tuple(got.shape) == (2, 6, 4, 4)
    xs, ws, bs = (t.double().numpy() for t in (x, w, b))  # the inputs as rounded
    expected = conv_reference(xs, ws, bs, (2, 2), (1, 1), (1, 1), (1, 1), 2)
    np.testing.assert_allclose(got.double().numpy(), expected, rtol=tol, atol=tol)


def test_unbatched_inputs_and_conv1d(ctx):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    got = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1)
    assert tuple(got.shape) == (5, 8, 8)
    expected = conv_reference(x[None], w, None, (1, 1), (1, 1), (1, 1), (1, 1), 1)[0]
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    # conv1d: (N, C, L) as (N, C, 1, L)
    s = rng.standard_normal((2, 4, 20)).astype(np.float32)
    k = rng.standard_normal((6, 2, 4)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    for stride, padding, dilation in ((1, 0, 1), (2, 3, 2), (1, "same", 3)):
        got = F.conv1d(torch.from_numpy(s), torch.from_numpy(k), torch.from_numpy(b), stride,
                       padding, dilation, groups=2)  # fmt: skip
        (pb,), (pa,) = _pads(padding if isinstance(padding, str) else (padding,), (4,), (dilation,))
        expected = conv_reference(
            s[:, :, None], k[:, :, None], b, (1, stride), (0, pb), (0, pa), (1, dilation), 2
        )[:, :, 0]
        assert tuple(got.shape) == expected.shape
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    one = F.conv1d(torch.from_numpy(s[0]), torch.ones(6, 4, 4))  # (C, L): unbatched
    assert tuple(one.shape) == (6, 17)
    np.testing.assert_allclose(one.numpy()[:, 0], s[0, :, :4].sum(), rtol=1e-5)


def test_conv_modules_initialise_as_torchs_reset_parameters(ctx):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
    assert tuple(conv.weight.shape) == (16, 3, 3, 3) and tuple(conv.bias.shape) == (16,)
    bound = 1 / math.sqrt(3 * 3 * 3)  # kaiming_uniform(a=sqrt(5)) and the bias: 1/sqrt(fan_in)
    for p in (conv.weight, conv.bias):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.8 * bound
    assert repr(conv) == "Conv2d(3, 16, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))"
    x = torch.randn(2, 3, 10, 10)
    y = conv(x)
    expected = conv_reference(
        x.detach().numpy(),
        conv.weight.detach().numpy(),
        conv.bias.detach().numpy(),
        (2, 2),
        (1, 1),
        (1, 1),
        (1, 1),
        1,
    )
    np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    same = torch.nn.Conv1d(4, 8, 4, padding="same", dilation=2, groups=2, bias=False)
    assert same.bias is None and tuple(same.weight.shape) == (8, 2, 4)
    assert tuple(same(torch.randn(3, 4, 11)).shape) == (3, 8, 11)
    assert "padding=same" in repr(same) and "groups=2" in repr(same)
    torch.manual_seed(0)
    again = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
    np.testing.assert_array_equal(again.weight.detach().numpy(), conv.weight.detach().numpy())


def test_conv_errors_are_torchs(ctx):
    x, w = torch.ones(1, 4, 6, 6), torch.ones(8, 2, 3, 3)
    with pytest.raises(TensorError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input"):
        F.conv2d(torch.ones(4, 6), w)
    with pytest.raises(TensorError, match=r"Expected 2D \(unbatched\) or 3D \(batched\)"):
        F.conv1d(torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3))
    with pytest.raises(TensorError, match="expected input\\[1, 4, 6, 6\\] to have 2 channels"):
        F.conv2d(x, w)  # groups=1 wants 2 input channels
    with pytest.raises(TensorError, match="expected weight to be divisible by 3 at dimension 0"):
        F.conv2d(torch.ones(1, 6, 6, 6), w, groups=3)
    with pytest.raises(TensorError, match="Kernel size can't be greater than actual input size"):
        F.conv2d(torch.ones(1, 2, 2, 2), w, padding=0)
    with pytest.raises(TensorError, match=r"padded input size per channel: \(4 x 4\)"):
        F.conv2d(torch.ones(1, 2, 2, 2), w, dilation=2, padding=1)
    with pytest.raises(TensorError, match="negative padding is not supported"):
        F.conv2d(x, w, padding=-1, groups=2)
    with pytest.raises(TensorError, match="non-positive stride is not supported"):
        F.conv2d(x, w, stride=0, groups=2)
    with pytest.raises(TensorError, match="non-positive groups is not supported"):
        F.conv2d(x, w, groups=0)
    with pytest.raises(TensorError, match="padding='same' is not supported for strided"):
        F.conv2d(x, w, stride=2, padding="same", groups=2)
    with pytest.raises(TensorError, match="Invalid padding string 'full'"):
        F.conv2d(x, w, padding="full", groups=2)
    with pytest.raises(TensorError, match="expected bias to be 1-dimensional with 8 elements"):
        F.conv2d(x, w, torch.ones(4), groups=2)
    with pytest.raises(TensorError, match="Input type .* and weight type .* should be the same"):
        F.conv2d(x, w.half(), groups=2)
    with pytest.raises(TensorError, match="expected a floating input"):
        F.conv2d(torch.ones(1, 4, 6, 6, dtype=torch.int32), w.int(), groups=2)
    with pytest.raises(TensorError, match="stride must be an int or 2 ints"):
        F.conv2d(x, w, stride=(1, 1, 1), groups=2)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        torch.nn.Conv2d(3, 6, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        torch.nn.Conv2d(3, 6, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        torch.nn.Conv2d(3, 6, 3, padding_mode="mirror")
    assert torch.nn.Conv2d(3, 6, 3, padding_mode="reflect").padding_mode == "reflect"


def _convolutions(context):
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.standard_normal((2, 4, 10, 10)).astype(np.float32))
    w = torch.from_numpy(rng.standard_normal((8, 2, 3, 3)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal(8).astype(np.float32))
    start = context.now
    results = [
        F.conv2d(x, w, b, 2, 1, 1, 2),
        F.conv1d(x[:, :, 0], w[:, :, 0], None, 1, "same", 1, 2),
    ]
    return context.now - start, results


def test_conv_runs_timing_only_and_on_the_fast_backend_with_the_same_values():
    times, (detailed, fast) = in_every_mode(_convolutions)
    assert times[0] > 0 and times[0] == times[1]  # timing-only costs what functional does
    assert times[2] > 0
    assert_same_values(detailed, fast)


@pytest.fixture(scope="module")
def timing():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        yield context


def test_conv_costs_its_flops_on_the_matrix_engine_and_what_its_gemm_costs(timing):
    core = timing.topology.cube.pe_template.components.pe_core.attrs
    rate = core.matrix_flops_per_cycle * core.clock  # FLOP/s of one PE's matrix engine
    costs = {}
    for n, c, size, cout in ((2, 32, 16, 64), (4, 32, 16, 64), (2, 32, 16, 128), (2, 64, 16, 64)):
        x, w = torch.ones(n, c, size, size), torch.ones(cout, c, 3, 3)
        out = size - 2
        flops = 2 * n * cout * out * out * c * 9
        spent = cost(timing, lambda x=x, w=w: F.conv2d(x, w))
        assert spent >= flops / rate * 1e12
        # the implicit GEMM costs what the (positions x C*kh*kw) @ (C*kh*kw x Cout) product
        # costs on the same tiles (the same loads and dots), without writing out the patches
        patches, weight = torch.ones(n * out * out, c * 9), torch.ones(c * 9, cout)
        gemm = cost(timing, lambda p=patches, m=weight: p @ m)
        assert abs(spent - gemm) <= 0.01 * gemm
        costs[n, c, cout] = spent
    base = costs[2, 32, 64]
    for doubled in ((4, 32, 64), (2, 32, 128), (2, 64, 64)):  # twice the FLOPs, ~twice the time
        assert 1.6 * base <= costs[doubled] <= 2.1 * base
    # groups=4 does a quarter of the FLOPs but reads the same patches of the input, so
    # at this size (memory-bound) it costs about what the ungrouped one costs
    x, w = torch.ones(2, 64, 16, 16), torch.ones(64, 16, 3, 3)
    grouped = cost(timing, lambda: F.conv2d(x, w, groups=4))
    assert 2 * 64 * 14 * 14 * 16 * 9 * 2 / rate * 1e12 <= grouped <= 1.1 * costs[2, 64, 64]


class MnistNet(torch.nn.Module):
    """The PyTorch examples' MNIST network, as written there."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = torch.nn.Dropout(0.25)
        self.fc1 = torch.nn.Linear(9216, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def test_the_mnist_example_network_runs_forward_as_written(ctx):
    torch.manual_seed(1)
    net = MnistNet().eval()
    x = torch.randn(2, 1, 28, 28)
    start = ctx.now
    out = net(x)
    assert tuple(out.shape) == (2, 10) and ctx.now > start
    # the same forward pass in NumPy from the module's weights
    p = {name: t.numpy().astype(np.float64) for name, t in net.state_dict().items()}
    h = conv_reference(x.numpy(), p["conv1.weight"], p["conv1.bias"], (1, 1), (0, 0), (0, 0),
                       (1, 1), 1).clip(0)  # fmt: skip
    h = conv_reference(h, p["conv2.weight"], p["conv2.bias"], (1, 1), (0, 0), (0, 0), (1, 1), 1)
    h = h.clip(0).reshape(2, 64, 12, 2, 12, 2).max(axis=(3, 5)).reshape(2, -1)
    h = (h @ p["fc1.weight"].T + p["fc1.bias"]).clip(0) @ p["fc2.weight"].T + p["fc2.bias"]
    shifted = h - h.max(1, keepdims=True)
    expected = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-4, atol=1e-4)


def test_what_has_no_kernel_says_so_and_torch_level_forms_point_at_functional():
    from kernbench.errors import TensorAttributeError, UnsupportedNameError

    with pytest.raises(UnsupportedNameError, match="torch.nn.functional.conv2d takes the same"):
        torch.conv2d  # noqa: B018
    with pytest.raises(TensorAttributeError, match="'CrossMapLRN2d': the README's 'What kernb"):
        torch.nn.CrossMapLRN2d  # noqa: B018
    with pytest.raises(TensorAttributeError, match="'no_such_pool2d': there are .*conv2d"):
        F.no_such_pool2d  # noqa: B018
    assert hasattr(torch.nn, "Conv2d") and hasattr(F, "adaptive_max_pool2d")
