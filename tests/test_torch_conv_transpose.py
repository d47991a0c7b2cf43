"""``F.conv_transpose1d``/``2d`` and ``nn.ConvTranspose1d``/``2d``: values against a NumPy
scatter-add reference over stride, padding, output_padding, dilation, groups, bias and
unbatched inputs; torch's output sizes, errors by type and message, module initialisation
and ``output_size``; gradients of input, weight and bias against NumPy central
differences; autocast; and the simulated cost, which is the convolution it is computed as."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from gradcheck import check
from run_modes import assert_same_values, in_every_mode
from run_modes import simulated_ps as cost

import kernbench.torch as torch
import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling
from kernbench.errors import TensorError, UnsupportedNameError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def conv_transpose_reference(x, w, b, stride, padding, output_padding, dilation, groups):
    """The definition: each input element times the weight's (C_out/groups, kH, kW) slice
    of its channel, added at stride * position + dilation * tap of a buffer the padding
    then crops (N, C, H, W; float64)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    cig = cin // groups
    full = np.zeros((n, cog * groups, (h - 1) * sh + dh * (kh - 1) + 1 + oph,
                     (wd - 1) * sw + dw * (kw - 1) + 1 + opw))  # fmt: skip
    for g, i, j in itertools.product(range(groups), range(kh), range(kw)):
        rows = slice(i * dh, i * dh + (h - 1) * sh + 1, sh)
        cols = slice(j * dw, j * dw + (wd - 1) * sw + 1, sw)
        full[:, g * cog : (g + 1) * cog, rows, cols] += np.einsum(
            "nchw,co->nohw", x[:, g * cig : (g + 1) * cig], w[g * cig : (g + 1) * cig, :, i, j]
        )
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    out = full[:, :, ph : ph + oh, pw : pw + ow]
    return out if b is None else out + np.asarray(b, np.float64)[None, :, None, None]


def reference_1d(x, w, b, stride, padding, output_padding, dilation, groups):
    out = conv_transpose_reference(x[:, :, None], w[:, :, None], b, (1, stride), (0, padding),
                                   (0, output_padding), (1, dilation), groups)  # fmt: skip
    return out[:, :, 0]


CASES_2D = [  # (x shape, weight shape, stride, padding, output_padding, dilation, groups, bias)
    ((2, 3, 5, 4), (3, 4, 3, 3), (1, 1), (0, 0), (0, 0), (1, 1), 1, True),
    ((2, 3, 5, 5), (3, 6, 3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 1, True),  # a 2x upsample
    ((1, 2, 4, 5), (2, 3, 2, 3), (2, 3), (0, 2), (1, 0), (1, 2), 1, False),
    ((2, 4, 4, 4), (4, 2, 3, 2), (1, 1), (1, 0), (1, 1), (2, 2), 2, True),  # op < dilation only
    ((1, 2, 3, 3), (2, 2, 3, 3), (2, 2), (3, 3), (0, 1), (1, 1), 1, True),  # padding > k - 1
    ((2, 4, 5, 3), (4, 1, 4, 2), (2, 1), (1, 0), (0, 0), (1, 1), 4, False),  # depthwise
    ((1, 40, 3, 3), (40, 70, 2, 2), (2, 2), (0, 0), (0, 0), (1, 1), 1, True),  # 2 channel blocks
]


@pytest.mark.parametrize(("xs", "ws", "stride", "padding", "extra", "dilation", "groups", "bias"),
                         CASES_2D)  # fmt: skip
def test_conv_transpose2d_is_the_scatter_add(ctx, xs, ws, stride, padding, extra, dilation,
                                             groups, bias):  # fmt: skip
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[1] * groups).astype(np.float32) if bias else None
    got = F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),
                             torch.from_numpy(b) if bias else None, stride, padding, extra,
                             groups, dilation)  # fmt: skip
    expected = conv_transpose_reference(x, w, b, stride, padding, extra, dilation, groups)
    assert tuple(got.shape) == expected.shape and got.dtype is torch.float32
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_conv_transpose1d_unbatched_keywords_and_float64(ctx):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 7))
    w = rng.standard_normal((4, 3, 3))
    b = rng.standard_normal(6)
    for stride, padding, extra, dilation in ((1, 0, 0, 1), (2, 1, 1, 1), (3, 2, 2, 2),
                                             (1, 3, 1, 2)):  # fmt: skip
        got = F.conv_transpose1d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                 stride=stride, padding=padding, output_padding=extra,
                                 groups=2, dilation=dilation)  # fmt: skip
        expected = reference_1d(x, w, b, stride, padding, extra, dilation, 2)
        assert got.dtype is torch.float64 and tuple(got.shape) == expected.shape
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    one = F.conv_transpose1d(torch.from_numpy(x[0]), torch.from_numpy(w), stride=(2,))
    assert tuple(one.shape) == (3, 15)  # (C_in, L) in, (C_out, L') out
    np.testing.assert_allclose(one.numpy(), reference_1d(x[:1], w, None, 2, 0, 0, 1, 1)[0],
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    flat = F.conv_transpose2d(torch.from_numpy(x[0, :, None]), torch.from_numpy(w[:, :, None]))
    assert tuple(flat.shape) == (3, 1, 9)


def test_conv_transpose_undoes_the_shape_of_the_strided_convolution(ctx):
    x = torch.randn(2, 8, 9, 9)
    down = F.conv2d(x, torch.randn(16, 8, 3, 3), stride=2, padding=1)  # 9 -> 5
    up = torch.randn(16, 8, 3, 3)
    assert tuple(F.conv_transpose2d(down, up, stride=2, padding=1).shape) == (2, 8, 9, 9)
    assert tuple(F.conv_transpose2d(down, up, stride=2, padding=1, output_padding=1).shape) == (
        2, 8, 10, 10,
    )  # fmt: skip


def test_conv_transpose_errors_are_torchs(ctx):
    x, w = torch.ones(1, 4, 5, 5), torch.ones(4, 3, 3, 3)
    big = (
        "output padding must be smaller than either stride or dilation, but got "
        "output_padding_height: 1 output_padding_width: 2 stride_height: 2 stride_width: 2 "
        "dilation_height: 1 dilation_width: 1"
    )
    with pytest.raises(TensorError, match=big):
        F.conv_transpose2d(x, w, stride=2, output_padding=(1, 2))
    with pytest.raises(TensorError, match="output_padding_height: 0 output_padding_width: 1 "
                       "stride_height: 1 stride_width: 1"):  # fmt: skip
        F.conv_transpose1d(torch.ones(1, 4, 5), torch.ones(4, 3, 3), output_padding=1)
    channels = (
        r"Given transposed=1, weight of size \[4, 3, 3, 3\], expected input\[1, 3, 5, 5\] to "
        "have 4 channels, but got 3 channels instead"
    )
    with pytest.raises(TensorError, match=channels):
        F.conv_transpose2d(torch.ones(1, 3, 5, 5), w)
    with pytest.raises(TensorError, match="expected bias to be 1-dimensional with 6 elements, "
                       r"but got bias of size \[3\]"):  # fmt: skip
        F.conv_transpose2d(x, w, torch.ones(3), groups=2)
    with pytest.raises(TensorError, match="expected weight to be divisible by 3 at dimension 0"):
        F.conv_transpose2d(torch.ones(1, 4, 5, 5), w, groups=3)
    small = (
        r"Given input size per channel: \(2 x 2\). Calculated output size per channel: "
        r"\(0 x 0\). Output size is too small"
    )
    with pytest.raises(TensorError, match=small):
        F.conv_transpose2d(torch.ones(1, 4, 2, 2), w, padding=2)
    with pytest.raises(TensorError, match="negative output_padding is not supported"):
        F.conv_transpose2d(x, w, output_padding=-1)
    with pytest.raises(TensorError, match="negative padding is not supported"):
        F.conv_transpose2d(x, w, padding=(0, -1))
    with pytest.raises(TensorError, match="non-positive stride is not supported"):
        F.conv_transpose2d(x, w, stride=0)
    with pytest.raises(TensorError, match="dilation should be greater than zero"):
        F.conv_transpose2d(x, w, dilation=0)
    with pytest.raises(TensorError, match="non-positive groups is not supported"):
        F.conv_transpose2d(x, w, groups=0)
    with pytest.raises(TensorError, match="padding must be an int or a sequence of ints"):
        F.conv_transpose2d(x, w, padding="same")
    with pytest.raises(TensorError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to "
                       "conv_transpose2d"):  # fmt: skip
        F.conv_transpose2d(torch.ones(4, 5), w)
    with pytest.raises(TensorError, match="Input type .* and weight type .* should be the same"):
        F.conv_transpose2d(x, w.half())
    with pytest.raises(TensorError, match="expected a floating input"):
        F.conv_transpose2d(x.int(), w.int())
    with pytest.raises(UnsupportedNameError, match="torch.nn.functional.conv_transpose2d takes"):
        torch.conv_transpose2d  # noqa: B018


def test_modules_initialise_with_torchs_fan_in_and_take_output_size(ctx):
    torch.manual_seed(0)
    up = torch.nn.ConvTranspose2d(16, 32, 3, stride=2, padding=1, groups=2)
    assert tuple(up.weight.shape) == (16, 16, 3, 3) and tuple(up.bias.shape) == (32,)
    # torch's fan-in of a transposed weight is dim 1 times the kernel: 16 * 9, where the
    # (32, 8, 3, 3) weight of the Conv2d with these channels would give 8 * 9
    bound = 1 / math.sqrt(16 * 9)
    for p in (up.weight, up.bias):
        values = np.abs(p.detach().numpy())
        assert values.max() <= bound and values.max() > 0.8 * bound
    assert repr(up) == ("ConvTranspose2d(16, 32, kernel_size=(3, 3), stride=(2, 2), "
                        "padding=(1, 1), groups=2)")  # fmt: skip
    x = torch.randn(2, 16, 4, 5)
    params = (up.weight.detach().numpy(), up.bias.detach().numpy())
    for size, extra in ((None, (0, 0)), ([8, 10], (1, 1)), ((2, 32, 7, 10), (0, 1))):
        got = up(x, output_size=size)
        expected = conv_transpose_reference(x.numpy(), *params, (2, 2), (1, 1), extra, (1, 1), 2)
        assert tuple(got.shape) == expected.shape
        np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    outside = (
        r"requested an output size of \[9, 9\], but valid sizes range from \[7, 9\] to "
        r"\[8, 10\] \(for an input of \[4, 5\]\)"
    )
    with pytest.raises(ValueError, match=outside):
        up(x, output_size=(9, 9))
    with pytest.raises(ValueError, match="ConvTranspose2D: for 4D input, output_size must have 2 "
                       r"or 4 elements \(got 3\)"):  # fmt: skip
        up(x, output_size=(32, 8, 10))
    one = torch.nn.ConvTranspose1d(4, 6, 3, 2, output_padding=1, dilation=2, bias=False)
    assert one.bias is None and tuple(one.weight.shape) == (4, 6, 3)
    assert "output_padding=(1,), dilation=(2,)" not in repr(one)  # torch's order
    assert repr(one) == ("ConvTranspose1d(4, 6, kernel_size=(3,), stride=(2,), dilation=(2,), "
                         "output_padding=(1,), bias=False)")  # fmt: skip
    s = torch.randn(4, 5)  # unbatched
    expected = reference_1d(
        s.detach().numpy()[None], one.weight.detach().numpy(), None, 2, 0, 1, 2, 1
    )[0]
    np.testing.assert_allclose(one(s).detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    assert tuple(one(s, output_size=[13]).shape) == (6, 13)
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for '
                       "ConvTranspose2d"):  # fmt: skip
        torch.nn.ConvTranspose2d(3, 6, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        torch.nn.ConvTranspose2d(4, 6, 3, groups=4)
    with pytest.raises(TensorError, match="padding must be an int or a sequence of ints"):
        torch.nn.ConvTranspose2d(4, 6, 3, padding="same")
    assert torch.nn.Conv2d(2, 2, 1).output_padding == (0, 0)  # torch's attribute


# -- autograd -------------------------------------------------------------------------------
GRAD_CASES = [  # (x shape, weight shape, stride, padding, output_padding, dilation, groups)
    ((2, 2, 3, 3), (2, 3, 2, 2), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    ((1, 2, 3, 2), (2, 2, 3, 3), (2, 2), (1, 1), (1, 0), (1, 1), 1),
    ((2, 4, 2, 3), (4, 1, 2, 3), (1, 2), (0, 1), (1, 1), (2, 1), 2),  # op >= stride: dilation
    ((1, 2, 2, 2), (2, 2, 3, 2), (3, 2), (3, 0), (2, 1), (1, 2), 1),  # padding > k - 1
]


@pytest.mark.parametrize(("xs", "ws", "stride", "padding", "extra", "dilation", "groups"),
                         GRAD_CASES)  # fmt: skip
def test_conv_transpose2d_gradients(ctx, xs, ws, stride, padding, extra, dilation, groups):
    args = (stride, padding, extra, dilation, groups)
    check(lambda x, w, b: F.conv_transpose2d(x, w, b, stride, padding, extra, groups, dilation),
          lambda x, w, b: conv_transpose_reference(x, w, b, *args),
          xs, ws, (ws[1] * groups,), node="ConvolutionBackward0")  # fmt: skip


def test_conv_transpose1d_and_module_gradients(ctx):
    check(lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1, groups=2),
          lambda x, w: reference_1d(x, w, None, 2, 1, 1, 1, 2), (2, 4, 3), (4, 1, 3))  # fmt: skip
    check(lambda x, w, b: F.conv_transpose1d(x, w, b, dilation=2),  # unbatched
          lambda x, w, b: reference_1d(x[None], w, b, 1, 0, 0, 2, 1)[0],
          (2, 4), (2, 3, 2), (3,))  # fmt: skip
    check(lambda x, w: F.conv_transpose2d(x, w, padding=1),  # unbatched (C, H, W)
          lambda x, w: conv_transpose_reference(x[None], w, None, (1, 1), (1, 1), (0, 0), (1, 1),
                                                1)[0],
          (2, 3, 3), (2, 2, 3, 3))  # fmt: skip
    # a module's parameters only (a generator's first layer): no input gradient
    torch.manual_seed(0)
    up = torch.nn.ConvTranspose2d(2, 3, 2, stride=2).double()
    x = torch.randn(2, 2, 3, 3, dtype=torch.float64)
    up(x).pow(2).sum().backward()
    out = conv_transpose_reference(x.numpy(), up.weight.detach().numpy(), up.bias.detach().numpy(),
                                   (2, 2), (0, 0), (0, 0), (1, 1), 1)  # fmt: skip
    # each output is one input times one weight tap (stride = kernel): d/dw of sum(out^2)
    grid = (2 * out).reshape(2, 3, 3, 2, 3, 2)  # (n, o, h, kh, w, kw)
    gw = np.einsum("nchw,nohkwl->cokl", x.numpy(), grid)
    np.testing.assert_allclose(up.weight.grad.numpy(), gw, rtol=1e-10)
    np.testing.assert_allclose(up.bias.grad.numpy(), (2 * out).sum((0, 2, 3)), rtol=1e-10)
    assert x.grad is None


def test_autocast_runs_it_in_half_precision(ctx):
    x, w = torch.randn(1, 4, 3, 3), torch.randn(4, 2, 3, 3)
    with torch.autocast("cuda"):
        out = F.conv_transpose2d(x, w, stride=2)
    assert out.dtype is torch.float16 and tuple(out.shape) == (1, 2, 7, 7)
    expected = conv_transpose_reference(x.half().double().numpy(), w.half().double().numpy(),
                                        None, (2, 2), (0, 0), (0, 0), (1, 1), 1)  # fmt: skip
    np.testing.assert_allclose(out.double().numpy(), expected, rtol=5e-3, atol=5e-3)


# -- cost -----------------------------------------------------------------------------------
def _transposed(context):
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.standard_normal((2, 4, 5, 5)).astype(np.float32))
    w = torch.from_numpy(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    start = context.now
    results = [F.conv_transpose2d(x, w, None, 2, 1, 1), F.conv_transpose1d(x[:, :, 0], w[:, :, 0])]
    return context.now - start, results


def test_it_runs_timing_only_and_on_the_fast_backend_with_the_same_values():
    times, (detailed, fast) = in_every_mode(_transposed)
    assert times[0] > 0 and times[0] == times[1]
    assert times[2] > 0
    assert_same_values(detailed, fast)


def test_it_costs_the_convolution_it_is_computed_as():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x, w = torch.ones(4, 32, 12, 12), torch.ones(32, 64, 3, 3)
        w_conv, spread = torch.ones(64, 32, 3, 3), torch.ones(4, 32, 26, 26)
        # stride 1: the convolution pads itself; the flipped, swapped weight is one copy more
        spent = cost(context, lambda: F.conv_transpose2d(x, w, padding=1))
        conv = cost(context, lambda: F.conv2d(x, w_conv, padding=1))
        flip = cost(context, lambda: w.transpose(0, 1).flip((2, 3)))
        assert conv < spent <= conv + 1.1 * flip
        # stride 2: the input spread into zeros four times its size, then the convolution
        # over all of it (torch's kernels skip the zeros: a quarter of these FLOPs)
        strided = cost(context, lambda: F.conv_transpose2d(x, w, stride=2, padding=1,
                                                           output_padding=1))  # fmt: skip
        over = cost(context, lambda: F.conv2d(spread, w_conv))
        assert over < strided <= 1.5 * over
        assert 3 * spent <= strided


def test_its_backward_costs_two_convolutions_without_the_spread():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.ones(8, 32, 12, 12, requires_grad=True)
        w = torch.ones(32, 16, 3, 3, requires_grad=True)
        ratios = []
        for stride, extra in ((1, 0), (2, 1)):
            forward = cost(context, lambda s=stride, e=extra: F.conv_transpose2d(
                x.detach(), w.detach(), padding=1, stride=s, output_padding=e))  # fmt: skip
            out = F.conv_transpose2d(x, w, padding=1, stride=stride, output_padding=extra)
            g = torch.ones(*out.shape)
            ratios.append(cost(context, lambda out=out, g=g: out.backward(g)) / forward)
        # stride 1: a convolution for the input's gradient, one for the weight's and their
        # copies, about 1.8 forwards; stride 2: the input's gradient is a strided convolution
        # and nothing is spread, so the backward is cheaper than the forward (about 0.56)
        assert 1.3 <= ratios[0] <= 2.5
        assert 0.3 <= ratios[1] <= 0.8
