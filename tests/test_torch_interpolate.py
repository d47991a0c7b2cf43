"""``F.interpolate`` (every mode), ``pixel_shuffle``/``pixel_unshuffle``, ``unfold``/``fold``
and their modules: values against NumPy references written from torch's index formulas
(the legacy 'nearest' ``floor(dst * scale)`` with its special cases, 'nearest-exact',
the separable linear and cubic weights with ``align_corners`` both ways, upsampling and
downsampling, non-integer scale factors with and without ``recompute_scale_factor``),
torch's documented outputs, argument errors by message, gradients by central differences
and adjointness, both modes and backends, and the cost of a resample against a
streaming pass over its output."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check
from run_modes import assert_same_values, in_every_mode
from run_modes import simulated_ps as cost

import kernbench.torch as torch
import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


# -- NumPy references, one dim at a time -------------------------------------------------------
def nearest_matrix(size, out, factor=None, exact=False):
    """(out, size) 0/1 matrix of torch's CPU nearest index (float32 scale)."""
    scale = np.float32(1.0 / factor) if factor else np.float32(size) / np.float32(out)
    m = np.zeros((out, size))
    for o in range(out):
        if exact:
            src = math.floor(np.float32((o + 0.5) * np.float64(scale)))
        elif out == size:
            src = o
        elif out == 2 * size:
            src = o >> 1
        else:
            src = math.floor(np.float32(o) * scale)
        m[o, min(src, size - 1)] = 1.0
    return m


def _scale(size, out, align, factor):
    if align:
        return (size - 1) / (out - 1) if out > 1 else 0.0
    return 1.0 / factor if factor else size / out


def linear_matrix(size, out, align, factor=None):
    """(out, size): torch's linear weights (source index clamped at 0, index and lambda
    guarded at the end)."""
    scale, m = _scale(size, out, align, factor), np.zeros((out, size))
    for o in range(out):
        src = scale * o if align else max(scale * (o + 0.5) - 0.5, 0.0)
        i0 = min(math.floor(src), size - 1)
        lam = min(max(src - i0, 0.0), 1.0)
        i1 = i0 + (1 if i0 < size - 1 else 0)
        m[o, i0] += 1.0 - lam
        m[o, i1] += lam
    return m


def cubic_matrix(size, out, align, factor=None):
    """(out, size): torch's cubic convolution (A = -0.75) with the taps clamped to the
    border."""
    a = -0.75

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    scale, m = _scale(size, out, align, factor), np.zeros((out, size))
    for o in range(out):
        src = scale * o if align else scale * (o + 0.5) - 0.5
        i0 = min(math.floor(src), size - 1)
        t = min(max(src - i0, 0.0), 1.0)
        weights = (far(t + 1), near(t), near(1 - t), far(2 - t))
        for k, w in enumerate(weights):
            m[o, min(max(i0 - 1 + k, 0), size - 1)] += w
    return m


def separable(x, matrices):
    """``x`` (N, C, *spatial) with each spatial dim multiplied by its (out, in) matrix."""
    for d, m in enumerate(matrices):
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, 2 + d, 0), axes=1), 0, 2 + d)
    return x


def reference(x, mode, out_sizes, align=False, factors=None):
    factors = factors or [None] * len(out_sizes)
    spatial = x.shape[2:]
    if mode in ("nearest", "nearest-exact"):
        mats = [
            nearest_matrix(s, o, f, mode == "nearest-exact")
            for s, o, f in zip(spatial, out_sizes, factors, strict=True)
        ]
    else:
        build = cubic_matrix if mode == "bicubic" else linear_matrix
        mats = [build(s, o, align, f) for s, o, f in zip(spatial, out_sizes, factors, strict=True)]
    return separable(x.astype(np.float64), mats)


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- forward values --------------------------------------------------------------------------
def test_torchs_documented_upsample_outputs(ctx):
    x = torch.arange(1, 5, dtype=torch.float32).view(1, 1, 2, 2)
    assert F.interpolate(x, scale_factor=2).numpy()[0, 0].tolist() == [
        [1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]
    ]  # fmt: skip
    bilinear = F.interpolate(x, scale_factor=2, mode="bilinear")
    np.testing.assert_allclose(
        bilinear.numpy()[0, 0],
        [[1.0, 1.25, 1.75, 2.0], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5],
         [3.0, 3.25, 3.75, 4.0]],
    )  # fmt: skip
    corners = nn.UpsamplingBilinear2d(scale_factor=2)(x)
    np.testing.assert_allclose(
        corners.numpy()[0, 0],
        [[1.0, 4 / 3, 5 / 3, 2.0], [5 / 3, 2.0, 7 / 3, 8 / 3], [7 / 3, 8 / 3, 3.0, 10 / 3],
         [3.0, 10 / 3, 11 / 3, 4.0]],
        rtol=1e-6,
    )  # fmt: skip
    cubic = F.interpolate(torch.arange(16.0).view(1, 1, 4, 4), scale_factor=2, mode="bicubic")
    assert cubic.numpy()[0, 0, 0, :3].tolist() == [-0.52734375, -0.23046875, 0.24609375]


NEAREST_CASES = [  # input spatial, size, scale_factor, recompute
    ((7,), (12,), None, None),
    ((5,), None, 2.1, None),  # twice the input's size: torch's o >> 1, not floor(o / 2.1)
    ((5,), None, 1.1, None),  # the input's size: torch copies
    ((6, 5), (4, 9), None, None),
    ((6, 5), None, (1.7, 0.6), None),
    ((6, 5), None, (1.7, 0.6), True),
    ((3, 4, 5), (5, 2, 7), None, None),
]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize(("spatial", "size", "factor", "recompute"), NEAREST_CASES)
def test_nearest_modes_take_torchs_source_indices(ctx, mode, spatial, size, factor, recompute):
    x = rand((2, 3, *spatial))
    y = F.interpolate(
        torch.from_numpy(x.astype(np.float32)), size, factor, mode,
        recompute_scale_factor=recompute,
    )  # fmt: skip
    factors = None
    if size is None:
        factors = list(factor) if isinstance(factor, tuple) else [factor] * len(spatial)
        size = tuple(math.floor(s * f) for s, f in zip(spatial, factors, strict=True))
        if recompute:
            factors = None
    assert tuple(y.shape) == (2, 3, *size)
    expected = reference(x.astype(np.float32), mode, size, factors=factors)
    np.testing.assert_array_equal(y.numpy(), expected.astype(np.float32))


LINEAR_CASES = [  # mode, input spatial, size, scale_factor, recompute
    ("linear", (6,), (11,), None, None),
    ("linear", (9,), (4,), None, None),
    ("linear", (5,), None, 2.5, None),
    ("bilinear", (5, 6), (8, 13), None, None),
    ("bilinear", (9, 8), (4, 3), None, None),
    ("bilinear", (5, 6), None, (1.3, 0.7), None),
    ("bilinear", (5, 6), None, (1.3, 0.7), True),
    ("bilinear", (4, 4), (1, 1), None, None),
    ("bicubic", (5, 6), (9, 11), None, None),
    ("bicubic", (9, 8), (4, 5), None, None),
    ("bicubic", (5, 6), None, (1.5, 0.75), None),
    ("trilinear", (3, 4, 5), (5, 3, 8), None, None),
    ("trilinear", (3, 4, 5), None, 1.6, None),
]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize(("mode", "spatial", "size", "factor", "recompute"), LINEAR_CASES)
def test_linear_and_cubic_modes_are_torchs_separable_weights(
    ctx, mode, spatial, size, factor, recompute, align
):
    x = rand((2, 2, *spatial), 3)
    args = (size, factor, mode, align, recompute)
    y = F.interpolate(torch.from_numpy(x), *args)
    factors = None
    if size is None:
        factors = list(factor) if isinstance(factor, tuple) else [factor] * len(spatial)
        size = tuple(math.floor(s * f) for s, f in zip(spatial, factors, strict=True))
        if recompute:
            factors = None
    expected = reference(x, mode, size, align, factors)
    assert y.dtype == torch.float64 and tuple(y.shape) == (2, 2, *size)
    np.testing.assert_allclose(y.numpy(), expected, atol=1e-12)
    # float32 and float16 compute in float32
    y32 = F.interpolate(torch.from_numpy(x.astype(np.float32)), *args)
    np.testing.assert_allclose(y32.numpy(), expected, atol=2e-5)
    y16 = F.interpolate(torch.from_numpy(x).half(), *args)
    assert y16.dtype == torch.float16
    np.testing.assert_allclose(y16.float().numpy(), expected, atol=1e-2)


def test_area_is_the_adaptive_average_pool_and_unbatched_input_is_refused_as_torch(ctx):
    x = torch.from_numpy(rand((2, 3, 7, 9)))
    np.testing.assert_array_equal(
        F.interpolate(x, size=(3, 4), mode="area").numpy(),
        F.adaptive_avg_pool2d(x, (3, 4)).numpy(),
    )
    np.testing.assert_array_equal(  # a scale factor gives the output size, always recomputed
        F.interpolate(x, scale_factor=0.5, mode="area").numpy(),
        F.adaptive_avg_pool2d(x, (3, 4)).numpy(),
    )
    assert F.interpolate(x[:, :, 0], scale_factor=1.5, mode="area").shape == (2, 3, 13)
    with pytest.raises(NotImplementedError, match="Only 3D, 4D and 5D input Tensors supported"):
        F.interpolate(x[0, 0], size=4)


def test_interpolate_errors_are_torchs(ctx):
    x = torch.ones(1, 2, 4, 4)
    with pytest.raises(ValueError, match="align_corners option can only be set with the"):
        F.interpolate(x, size=8, align_corners=True)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=8, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="Input and output must have the same number of spatial"):
        F.interpolate(x, size=(8,))
    with pytest.raises(ValueError, match="Input and scale_factor must have the same number"):
        F.interpolate(x, scale_factor=(2.0, 2.0, 2.0))
    with pytest.raises(TypeError, match="expected size to be one of int or Tuple"):
        F.interpolate(x, size=(8.0, 8))
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful with an"):
        F.interpolate(x, size=8, recompute_scale_factor=True)
    with pytest.raises(ValueError, match="Anti-alias option is restricted to bilinear, bicubic"):
        F.interpolate(x, size=8, antialias=True)
    with pytest.raises(TensorError, match="antialias=True.*not here"):
        F.interpolate(x, size=2, mode="bilinear", antialias=True)
    with pytest.raises(NotImplementedError, match="Got 4D input, but linear mode needs 3D input"):
        F.interpolate(x, size=8, mode="linear")
    with pytest.raises(NotImplementedError, match="Got 4D input, but trilinear mode needs 5D"):
        F.interpolate(x, size=8, mode="trilinear")
    with pytest.raises(NotImplementedError, match=r"Only 3D, 4D and 5D .* \(got cubic\)"):
        F.interpolate(x, size=8, mode="cubic")
    with pytest.raises(TensorError, match=r"sizes should be greater than 0, .*\(H: 0, W: 0\)"):
        F.interpolate(x, scale_factor=0.1)
    with pytest.raises(TensorError, match="takes a floating input"):
        F.interpolate(torch.ones(1, 1, 2, 2, dtype=torch.int32), size=3)
    with pytest.raises(TensorError, match="takes a floating input"):
        F.interpolate(torch.ones(1, 1, 2, 2, dtype=torch.uint8), size=3, mode="bilinear")


def test_nearest_modes_resample_images_of_bytes(ctx):
    pixels = np.random.default_rng(9).integers(0, 256, (1, 3, 5, 7), dtype=np.uint8)
    for mode in ("nearest", "nearest-exact"):
        y = F.interpolate(torch.from_numpy(pixels), size=(8, 4), mode=mode)
        assert y.dtype == torch.uint8
        expected = reference(pixels.astype(np.float32), mode, (8, 4))
        np.testing.assert_array_equal(y.numpy(), expected.astype(np.uint8))


def test_modules_hold_torchs_attributes_and_call_interpolate(ctx):
    up = nn.Upsample(scale_factor=2, mode="bilinear")
    assert up.scale_factor == 2.0 and up.align_corners is None and up.size is None
    assert repr(up) == "Upsample(scale_factor=2.0, mode='bilinear')"
    assert (
        repr(nn.UpsamplingNearest2d(size=(3, 4)))
        == "UpsamplingNearest2d(size=(3, 4), mode='nearest')"
    )
    assert repr(nn.PixelShuffle(2)) == "PixelShuffle(upscale_factor=2)"
    assert repr(nn.Unfold(3, padding=1)) == "Unfold(kernel_size=3, dilation=1, padding=1, stride=1)"
    assert (
        repr(nn.Fold((4, 5), 2))
        == "Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1)"
    )
    x = torch.from_numpy(rand((1, 2, 3, 5)))
    np.testing.assert_array_equal(
        up(x).numpy(), F.interpolate(x, scale_factor=2, mode="bilinear").numpy()
    )
    np.testing.assert_array_equal(
        nn.UpsamplingBilinear2d(size=(4, 7))(x).numpy(),
        F.interpolate(x, (4, 7), mode="bilinear", align_corners=True).numpy(),
    )
    with pytest.warns(UserWarning, match=r"nn.functional.upsample is deprecated\. Use nn"):
        assert F.upsample(x, scale_factor=3).shape == (1, 2, 9, 15)
    with pytest.warns(UserWarning, match="upsample_bilinear is deprecated"):
        np.testing.assert_array_equal(
            F.upsample_bilinear(x, (4, 7)).numpy(),
            F.interpolate(x, (4, 7), mode="bilinear", align_corners=True).numpy(),
        )
    with pytest.warns(UserWarning, match="upsample_nearest is deprecated"):
        y = F.upsample_nearest(x.requires_grad_(), scale_factor=2)
    assert y.grad_fn.name() == "UpsampleNearest2DBackward0"


# -- gradients -------------------------------------------------------------------------------
GRAD_CASES = [  # mode, input spatial, size, align, node
    ("nearest", (4,), (7,), None, "UpsampleNearest1DBackward0"),
    ("nearest", (3, 4), (5, 3), None, "UpsampleNearest2DBackward0"),
    ("nearest-exact", (2, 3, 3), (3, 5, 2), None, "UpsampleNearestExact3DBackward0"),
    ("linear", (5,), (8,), False, "UpsampleLinear1DBackward0"),
    ("bilinear", (3, 4), (5, 7), False, "UpsampleBilinear2DBackward0"),
    ("bilinear", (5, 4), (3, 6), True, "UpsampleBilinear2DBackward0"),
    ("bicubic", (3, 4), (5, 3), False, "UpsampleBicubic2DBackward0"),
    ("bicubic", (4, 3), (6, 5), True, "UpsampleBicubic2DBackward0"),
    ("trilinear", (2, 3, 3), (3, 4, 2), True, "UpsampleTrilinear3DBackward0"),
    ("area", (4, 6), (2, 4), None, "AdaptiveAvgPool2DBackward0"),
]


@pytest.mark.parametrize(("mode", "spatial", "size", "align", "node"), GRAD_CASES)
def test_interpolate_gradients_by_central_differences(ctx, mode, spatial, size, align, node):
    def numpy_fn(x):
        if mode == "area":
            return F.adaptive_avg_pool2d(torch.from_numpy(x), size).numpy()
        return reference(x, mode, size, bool(align))

    check(
        lambda x: F.interpolate(x, size, mode=mode, align_corners=align),
        numpy_fn,
        (1, 2, *spatial),
        node=node,
    )


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_interpolate_backward_is_the_adjoint(ctx, dtype):
    """<interp(x), y> == <x, interp_backward(y)> for a downsampling bicubic with a scale factor
    (overlapping taps, clamped borders); float16 gradients add in float32."""
    dt = getattr(torch, dtype)
    x = torch.tensor(rand((2, 3, 9, 7), 5), dtype=dt, requires_grad=True)
    out = F.interpolate(x, scale_factor=(0.6, 1.4), mode="bicubic")
    y = torch.tensor(rand(tuple(out.shape), 6), dtype=dt)
    (out * y).sum().backward()
    assert x.grad.dtype == dt
    left = float(np.sum(out.detach().float().numpy().astype(np.float64) * y.float().numpy()))
    right = float(np.sum(x.detach().float().numpy() * x.grad.float().numpy().astype(np.float64)))
    assert right == pytest.approx(left, rel=1e-5 if dtype == "float32" else 5e-3)


# -- pixel shuffle ---------------------------------------------------------------------------
def test_pixel_shuffle_and_unshuffle_are_torchs_rearrangements(ctx):
    x = rand((2, 3, 12, 2, 3))  # extra leading dims are batch dims
    y = F.pixel_shuffle(torch.from_numpy(x), 2)
    expected = x.reshape(2, 3, 3, 2, 2, 2, 3).transpose(0, 1, 2, 5, 3, 6, 4).reshape(2, 3, 3, 4, 6)
    np.testing.assert_array_equal(y.numpy(), expected)
    back = F.pixel_unshuffle(y, 2)
    np.testing.assert_array_equal(back.numpy(), x)
    assert nn.PixelUnshuffle(3)(torch.ones(1, 2, 6, 3)).shape == (1, 18, 2, 1)
    assert nn.PixelShuffle(3)(torch.ones(18, 2, 1)).shape == (2, 6, 3)
    with pytest.raises(TensorError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(torch.ones(1, 6, 2, 2), 2)
    with pytest.raises(TensorError, match="expects width to be divisible by downscale_factor"):
        F.pixel_unshuffle(torch.ones(1, 1, 4, 3), 2)
    with pytest.raises(TensorError, match="at least 3 dimensions"):
        F.pixel_shuffle(torch.ones(4, 4), 2)


def test_pixel_shuffle_gradients(ctx):
    check(
        lambda x: F.pixel_shuffle(x, 2),
        lambda x: x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 6, 4),
        (1, 8, 3, 2),
        node="PixelShuffleBackward0",
    )
    check(
        lambda x: F.pixel_unshuffle(x, 2),
        lambda x: x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 8, 2, 3),
        (1, 2, 4, 6),
        node="PixelUnshuffleBackward0",
    )


# -- unfold / fold ---------------------------------------------------------------------------
def im2col(x, k, d, p, s):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = np.empty((n, c, k[0], k[1], oh, ow))
    for i in range(k[0]):
        for j in range(k[1]):
            cols[:, :, i, j] = xp[
                :, :, i * d[0] : i * d[0] + (oh - 1) * s[0] + 1 : s[0],
                j * d[1] : j * d[1] + (ow - 1) * s[1] + 1 : s[1],
            ]  # fmt: skip
    return cols.reshape(n, c * k[0] * k[1], oh * ow)


FOLD_CASES = [  # kernel, dilation, padding, stride
    ((2, 2), (1, 1), (0, 0), (2, 2)),  # ViT patches
    ((3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 2), (2, 1), (1, 0), (2, 3)),
]


@pytest.mark.parametrize(("k", "d", "p", "s"), FOLD_CASES)
def test_unfold_is_im2col_and_fold_its_adjoint(ctx, k, d, p, s):
    x = rand((2, 3, 7, 8), 2)
    cols = F.unfold(torch.from_numpy(x), k, d, p, s)
    expected = im2col(x, k, d, p, s)
    np.testing.assert_array_equal(cols.numpy(), expected)
    np.testing.assert_array_equal(
        nn.Unfold(k, d, p, s)(torch.from_numpy(x[0])).numpy(), expected[0]
    )
    y = rand(expected.shape, 4)
    folded = F.fold(torch.from_numpy(y), (7, 8), k, d, p, s)
    assert folded.shape == (2, 3, 7, 8)
    assert float(np.sum(folded.numpy() * x)) == pytest.approx(float(np.sum(y * expected)))
    np.testing.assert_array_equal(
        nn.Fold((7, 8), k, d, p, s)(torch.from_numpy(y[1])).numpy(), folded.numpy()[1]
    )


def test_unfold_and_fold_gradients(ctx):
    def fold_reference(y):
        # fold is linear: its value is the adjoint of im2col applied to y
        jac = np.stack(
            [im2col(e.reshape(1, 1, 4, 5), (3, 2), (1, 1), (1, 0), (1, 2)).ravel()
             for e in np.eye(20)]
        )  # fmt: skip
        return (jac @ y.ravel()).reshape(1, 1, 4, 5)

    check(
        lambda x: F.unfold(x, (3, 2), 1, (1, 0), (1, 2)),
        lambda x: im2col(x, (3, 2), (1, 1), (1, 0), (1, 2)),
        (1, 2, 4, 5),
        node="Im2ColBackward0",
    )
    check(
        lambda y: F.fold(y, (4, 5), (3, 2), 1, (1, 0), (1, 2)),
        fold_reference,
        (1, 6, 8),
        node="Col2ImBackward0",
    )


def test_fold_and_unfold_errors_are_torchs(ctx):
    with pytest.raises(TensorError, match="Expected non-empty 3D or 4D input tensor"):
        F.unfold(torch.ones(4, 4), 2)
    with pytest.raises(TensorError, match="calculated shape of the array of sliding blocks as"):
        F.unfold(torch.ones(1, 1, 2, 2), 3)
    with pytest.raises(TensorError, match="kernel size should be greater than zero"):
        F.unfold(torch.ones(1, 1, 4, 4), 0)
    with pytest.raises(TensorError, match=r"divisible by the product of kernel_size, but got inp"):
        F.fold(torch.ones(1, 5, 4), (3, 3), 2)
    with pytest.raises(TensorError, match=r"number of sliding blocks 2 \* 2 = 4, but got input"):
        F.fold(torch.ones(1, 4, 5), (3, 3), 2)


# -- modes, backends and costs ---------------------------------------------------------------
def _resamples(context):
    x = torch.from_numpy(np.random.default_rng(7).standard_normal((2, 3, 6, 5)).astype("f4"))
    start = context.now
    leaf = x.clone().requires_grad_()
    F.interpolate(leaf, scale_factor=1.5, mode="bicubic").sum().backward()
    results = [
        leaf.grad,
        F.interpolate(x, scale_factor=2),
        F.interpolate(x, size=(9, 4), mode="bilinear"),
        F.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=True),
        F.pixel_shuffle(x[:, :, :4, :4].reshape(2, 12, 2, 2), 2),
        F.fold(F.unfold(x, 3, padding=1), (6, 5), 3, padding=1),
    ]
    return context.now - start, results


def test_resamples_run_timing_only_and_on_the_fast_backend_with_the_same_values():
    times, (detailed, fast) = in_every_mode(_resamples)
    assert times[0] > 0 and times[0] == times[1]
    assert times[2] > 0
    assert_same_values(detailed, fast)


def test_a_resample_costs_about_a_streaming_pass_over_its_output():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.ones(8, 32, 16, 16)
        big = torch.ones(8, 32, 32, 32)
        out_pass = cost(context, lambda: big * 2)  # reads and writes the output's size
        nearest = cost(context, lambda: F.interpolate(x, scale_factor=2))
        bilinear = cost(context, lambda: F.interpolate(x, scale_factor=2, mode="bilinear"))
        bicubic = cost(context, lambda: F.interpolate(x, scale_factor=2, mode="bicubic"))
        # one read per tap (no cache) and a write of the output, each half a pass, and the
        # weights' arithmetic
        # weights' arithmetic: about 1, 2.6 and 9.6 passes for 1, 4 and 16 taps
        assert 0.9 * out_pass <= nearest <= 1.2 * out_pass
        assert 2.5 * out_pass <= bilinear <= 2.8 * out_pass
        assert 8.5 * out_pass <= bicubic <= 10.5 * out_pass
        backward = cost(
            context,
            lambda: (
                F.interpolate(x.requires_grad_(), scale_factor=2, mode="bilinear").sum().backward()
            ),
        )
        # a zero fill, the scatter (an atomic add a tap) and the loss's sum and its gradient
        assert 1.5 * bilinear <= backward <= 3.5 * bilinear


def test_unfold_is_one_copy_and_fold_of_tiling_blocks_a_few():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.ones(2, 3, 64, 64)
        one_pass = cost(context, lambda: x * 2)
        patches = F.unfold(x, 16, stride=16)  # ViT's patches: a strided view copied once
        assert 0.6 * one_pass <= cost(context, lambda: F.unfold(x, 16, stride=16)) <= one_pass
        # a zero fill (half a pass), the patches' permuted copy and its copy into place
        assert cost(context, lambda: F.fold(patches, (64, 64), 16, stride=16)) <= 3 * one_pass
        # 3x3 blocks: the padded copy, then nine times the input written by one copy
        windows = cost(context, lambda: F.unfold(x, 3, padding=1))
        assert 3 * one_pass <= windows <= 8 * one_pass


def test_a_decoder_block_trains_through_upsample_and_pixel_shuffle(ctx):
    torch.manual_seed(0)
    block = nn.Sequential(
        nn.Conv2d(4, 8, 3, padding=1),
        nn.Upsample(scale_factor=2, mode="bilinear"),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.PixelShuffle(2),
        nn.Conv2d(2, 1, 1),
    )
    x = torch.randn(2, 4, 4, 4)
    target = torch.randn(2, 1, 16, 16)
    optimizer = torch.optim.SGD(block.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = F.mse_loss(block(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(p.grad is not None for p in block.parameters())
    assert losses[2] < losses[0]
