"""``F.affine_grid`` and ``F.grid_sample`` (the spatial transformer's ops) against a NumPy
transcription of torch's formulas: every mode, padding mode and ``align_corners``, the
gradients into the input and the grid, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError, TensorValueError
from kernbench.runtime import RuntimeContext, use_context
from tests.gradcheck import check


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _steps(n, align):
    if n <= 1:
        return np.zeros(n)
    s = np.linspace(-1, 1, n)
    return s if align else s * (n - 1) / n


def np_affine_grid(theta, size, align):
    n, _, h, w = size
    xs, ys = _steps(w, align), _steps(h, align)
    base = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], 1.0), -1)  # (H, W, 3)
    return np.einsum("hwk,njk->nhwj", base, theta)


def _reflect(x, twice_low, twice_high):
    if twice_low == twice_high:
        return np.zeros_like(x)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = np.abs(x - low)
    extra, flips = np.fmod(x, span), np.floor(x / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low)


def _source(coord, n, padding, align):
    x = (coord + 1) / 2 * (n - 1) if align else ((coord + 1) * n - 1) / 2
    if padding == "border":
        x = np.clip(x, 0, n - 1)
    elif padding == "reflection":
        x = _reflect(x, 0, 2 * (n - 1)) if align else _reflect(x, -1, 2 * n - 1)
        x = np.clip(x, 0, n - 1)
    return x


def np_grid_sample(image, grid, mode, padding, align):
    n, c, h, w = image.shape
    x = _source(grid[..., 0], w, padding, align)
    y = _source(grid[..., 1], h, padding, align)
    out = np.zeros((n, c, *grid.shape[1:3]))

    def read(b, xi, yi):
        inside = (0 <= xi) & (xi <= w - 1) & (0 <= yi) & (yi <= h - 1)
        return np.where(inside, image[b][:, np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)], 0.0)

    for b in range(n):
        if mode == "nearest":
            out[b] = read(b, np.rint(x[b]).astype(int), np.rint(y[b]).astype(int))
            continue
        x0, y0 = np.floor(x[b]).astype(int), np.floor(y[b]).astype(int)
        fx, fy = x[b] - x0, y[b] - y0
        out[b] = read(b, x0, y0) * (1 - fx) * (1 - fy) + read(b, x0 + 1, y0) * fx * (1 - fy)
        out[b] += read(b, x0, y0 + 1) * (1 - fx) * fy + read(b, x0 + 1, y0 + 1) * fx * fy
    return out


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_maps_the_base_grid_through_theta(ctx, align) -> None:
    theta = np.random.default_rng(1).uniform(-1, 1, (2, 2, 3)).astype(np.float32)
    grid = F.affine_grid(torch.tensor(theta), (2, 3, 4, 5), align_corners=align)
    assert grid.shape == (2, 4, 5, 2)
    np.testing.assert_allclose(grid.numpy(), np_affine_grid(theta, (2, 3, 4, 5), align),
                               rtol=1e-5, atol=1e-6)  # fmt: skip


def test_affine_grid_3d_and_the_identity(ctx) -> None:
    identity = torch.tensor([[[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]])
    grid = F.affine_grid(identity, [1, 1, 2, 3, 4], align_corners=True).numpy()
    assert grid.shape == (1, 2, 3, 4, 3)
    np.testing.assert_allclose(grid[0, 1, 2, 3], [1.0, 1.0, 1.0])  # the far corner: x, y, z
    np.testing.assert_allclose(grid[0, 0, 0, 0], [-1.0, -1.0, -1.0])


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_against_numpy(ctx, mode, padding, align) -> None:
    rng = np.random.default_rng(2)
    image = rng.uniform(-1, 1, (2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.6, 1.6, (2, 3, 6, 2)).astype(np.float32)  # some points outside
    out = F.grid_sample(torch.tensor(image), torch.tensor(grid), mode=mode,
                        padding_mode=padding, align_corners=align)  # fmt: skip
    assert out.shape == (2, 3, 3, 6)
    expected = np_grid_sample(image.astype(float), grid.astype(float), mode, padding, align)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_an_identity_grid_reads_the_image_back(ctx) -> None:
    image = torch.arange(24.0).view(1, 2, 3, 4)
    grid = F.affine_grid(torch.tensor([[[1.0, 0, 0], [0, 1, 0]]]), image.shape, align_corners=False)
    np.testing.assert_allclose(
        F.grid_sample(image, grid, align_corners=False).numpy(), image.numpy(), atol=1e-5
    )


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_gradients_into_input_and_grid(ctx, padding) -> None:
    def fn(image, grid):
        return F.grid_sample(image, grid, padding_mode=padding, align_corners=False)

    def np_fn(image, grid):
        return np_grid_sample(image, grid, "bilinear", padding, False)

    check(fn, np_fn, ((1, 2, 3, 4), -1.0, 1.0), ((1, 2, 3, 2), -1.3, 1.3), seed=3, atol=1e-5)


def test_affine_grid_gradient_into_theta(ctx) -> None:
    def np_fn(theta):
        return np_affine_grid(theta, (2, 1, 3, 4), False)

    check(lambda t: F.affine_grid(t, (2, 1, 3, 4), align_corners=False), np_fn, (2, 2, 3))


def test_align_corners_none_warns_as_torch_and_means_false(ctx) -> None:
    theta = torch.tensor([[[0.5, 0.1, 0.0], [0.0, 1.0, 0.2]]])
    with pytest.warns(UserWarning, match=r"changed to align_corners=False since 1.3.0"):
        grid = F.affine_grid(theta, (1, 1, 2, 2))
    np.testing.assert_allclose(
        grid.numpy(), F.affine_grid(theta, (1, 1, 2, 2), align_corners=False).numpy()
    )
    with pytest.warns(UserWarning, match=r"changed to align_corners=False"):
        F.grid_sample(torch.ones(1, 1, 2, 2), grid)


def test_errors_name_the_argument_and_what_there_is(ctx) -> None:
    image, grid = torch.ones(1, 1, 2, 2), torch.zeros(1, 2, 2, 2)
    with pytest.raises(TensorValueError, match=r"expected mode to be 'bilinear', 'nearest' or"):
        F.grid_sample(image, grid, mode="area", align_corners=False)
    with pytest.raises(TensorValueError, match=r"mode='bicubic' is not supported here"):
        F.grid_sample(image, grid, mode="bicubic", align_corners=False)
    with pytest.raises(TensorValueError, match=r"expected padding_mode to be 'zeros'"):
        F.grid_sample(image, grid, padding_mode="wrap", align_corners=False)
    with pytest.raises(TensorValueError, match=r"5-D \(volumetric\) inputs are not supported"):
        F.grid_sample(torch.ones(1, 1, 2, 2, 2), torch.zeros(1, 2, 2, 2, 3), align_corners=False)
    with pytest.raises(TensorValueError, match=r"same batch size"):
        F.grid_sample(torch.ones(2, 1, 2, 2), grid, align_corners=False)
    with pytest.raises(TensorError, match=r"same dtype"):
        F.grid_sample(image, grid.double(), align_corners=False)
    with pytest.raises(TensorValueError, match=r"matrices of shape Nx2x3 for size \(1, 1, 2, 2\)"):
        F.affine_grid(torch.zeros(1, 3, 3), (1, 1, 2, 2), align_corners=False)
    with pytest.raises(TensorValueError, match=r"only supports 4D and 5D sizes"):
        F.affine_grid(torch.zeros(1, 2, 3), (1, 2, 2), align_corners=False)
    with pytest.raises(TensorError, match=r"floating point type"):
        F.affine_grid(torch.zeros(1, 2, 3, dtype=torch.int64), (1, 1, 2, 2), align_corners=False)
