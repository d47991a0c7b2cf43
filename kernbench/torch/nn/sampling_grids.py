"""``torch.nn.functional.affine_grid`` and ``grid_sample``: the spatial transformer's ops.

``affine_grid(theta, size)`` maps the output's normalised coordinates (``[-1, 1]`` across
each spatial dim; with ``align_corners=False`` the pixel centres, as torch's) through
each batch's affine matrix: one batched matmul of a constant base grid.  ``grid_sample``
reads a 4-D ``(N, C, H, W)`` input at the grid's ``(x, y)`` points: ``bilinear`` as the
four neighbours' gathers weighted by the fractional offsets, ``nearest`` as one gather
at the rounded point (halves to even, as torch's ``nearbyint``); ``padding_mode`` zeros
(outside neighbours read 0), ``border`` (coordinates clamped) or ``reflection``
(reflected off the edges, then clamped).  Both are composed of tensor methods, so
autograd differentiates them as torch does: into the input through the gathers, into
the grid through the weights (nothing for ``nearest``), and they cost what those ops
cost.  ``align_corners=None`` warns as torch does and means False; ``bicubic`` and 5-D
inputs are refused, naming what there is.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from kernbench.errors import TensorError, TensorValueError, user_stacklevel
from kernbench.torch.factories import tensor
from kernbench.torch.shapes import flag_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_CORNERS_CHANGED = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since "
    "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
    "documentation of grid_sample for details."
)


def _align_corners(what: str, align_corners: Any) -> bool:
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_CHANGED, stacklevel=user_stacklevel())
        return False
    return flag_argument(align_corners, what, "align_corners")


def _steps(n: int, align_corners: bool) -> np.ndarray:
    """``n`` normalised coordinates across a dim of ``n`` points (torch's base grid)."""
    if n <= 1:
        return np.zeros(n)
    steps = np.linspace(-1.0, 1.0, n)
    return steps if align_corners else steps * (n - 1) / n


def affine_grid(theta: Tensor, size: Any, align_corners: Any = None) -> Tensor:
    """``F.affine_grid``: ``(N, H, W, 2)`` (or ``(N, D, H, W, 3)``) sampling points."""
    tensor_argument(theta, "affine_grid(theta)")
    align = _align_corners("affine_grid", align_corners)
    size = tuple(int(n) for n in size)
    if not theta.dtype.is_floating_point:
        raise TensorError(
            f"Expected theta to have floating point type, but got {theta.dtype} (affine_grid)"
        )
    if len(size) not in (4, 5):
        raise TensorValueError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {size}."
        )
    dims = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (dims, dims + 1) or theta.shape[0] != size[0]:
        raise TensorValueError(
            f"Expected a batch of {dims}D affine matrices of shape Nx{dims}x{dims + 1} for "
            f"size {size}. Got {tuple(theta.shape)}."
        )
    if min(size) <= 0:
        raise TensorValueError(f"Expected non-zero, positive output size. Got {size}")
    spatial = size[2:]
    axes = [_steps(n, align) for n in spatial]  # (D,) H, W
    mesh = np.meshgrid(*axes, indexing="ij")
    # the last coordinate is x (along W), then y (H), then z (D), then the 1 of the offset
    base = np.stack([*reversed(mesh), np.ones(spatial)], axis=-1).reshape(1, -1, dims + 1)
    points = tensor(base, dtype=theta.dtype, device=theta.device) @ theta.transpose(1, 2)
    return points.view(size[0], *spatial, dims)


def _unnormalise(coord: Tensor, n: int, align: bool) -> Tensor:
    if align:
        return (coord + 1) * ((n - 1) / 2)
    return ((coord + 1) * n - 1) / 2


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """``coord`` reflected into ``[twice_low / 2, twice_high / 2]`` (torch's formula)."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (coord - low).abs()
    flips = (distance.detach() / span).floor()
    extra = distance - flips * span
    even = (flips.remainder(2) == 0).to(coord.dtype)
    return even * (extra + low) + (1 - even) * (span - extra + low)


def _padded(coord: Tensor, n: int, padding_mode: str, align: bool) -> Tensor:
    if padding_mode == "border":
        return coord.clamp(0, n - 1)
    if padding_mode == "reflection":
        reflected = _reflect(coord, 0, 2 * (n - 1)) if align else _reflect(coord, -1, 2 * n - 1)
        return reflected.clamp(0, n - 1)
    return coord


def _read(flat: Tensor, x: Tensor, y: Tensor, width: int, height: int) -> Tensor:
    """``flat`` (N, C, H*W) at integer-valued points ``x``, ``y`` (N, P); 0 outside."""
    batch, channels, _ = flat.shape
    inside = (x >= 0) & (x <= width - 1) & (y >= 0) & (y <= height - 1)
    index = (y.clamp(0, height - 1) * width + x.clamp(0, width - 1)).long()
    values = flat.gather(2, index.unsqueeze(1).expand(batch, channels, index.shape[1]))
    return values * inside.unsqueeze(1).to(flat.dtype)


def grid_sample(
    input: Tensor,  # noqa: A002 - torch's name
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: Any = None,
) -> Tensor:
    """``F.grid_sample`` of a 4-D input at a ``(N, H_out, W_out, 2)`` grid."""
    tensor_argument(input, "grid_sample(input)")
    tensor_argument(grid, "grid_sample(grid)")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise TensorValueError(
            "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or "
            f"'bicubic', but got: '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise TensorValueError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
            f"'reflection', but got: '{padding_mode}'"
        )
    if mode == "bicubic":
        raise TensorValueError(
            "grid_sample: mode='bicubic' is not supported here; there are 'bilinear' and 'nearest'"
        )
    align = _align_corners("grid_sample", align_corners)
    if input.ndim == 5:
        raise TensorValueError(
            "grid_sample: 5-D (volumetric) inputs are not supported here; there are 4-D "
            "(N, C, H, W) inputs"
        )
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise TensorValueError(
            "grid_sample(): expected a 4-D input (N, C, H, W) and a grid (N, H_out, W_out, 2), "
            f"got input {tuple(input.shape)} and grid {tuple(grid.shape)}"
        )
    if grid.shape[0] != input.shape[0]:
        raise TensorValueError(
            "grid_sample(): expected grid and input to have same batch size, but got input "
            f"with sizes {tuple(input.shape)} and grid with sizes {tuple(grid.shape)}"
        )
    if input.dtype is not grid.dtype:
        raise TensorError(
            "grid_sample(): expected input and grid to have the same dtype, but input has "
            f"{input.dtype} and grid has {grid.dtype}"
        )
    batch, channels, height, width = input.shape
    out_h, out_w = grid.shape[1], grid.shape[2]
    points = grid.reshape(batch, out_h * out_w, 2)
    x = _padded(_unnormalise(points[:, :, 0], width, align), width, padding_mode, align)
    y = _padded(_unnormalise(points[:, :, 1], height, align), height, padding_mode, align)
    flat = input.reshape(batch, channels, height * width)
    if mode == "nearest":
        out = _read(flat, x.detach().round(), y.detach().round(), width, height)
    else:
        x0, y0 = x.detach().floor(), y.detach().floor()
        wx1, wy1 = x - x0, y - y0
        wx0, wy0 = 1 - wx1, 1 - wy1
        out = 0
        for xc, yc, weight in (
            (x0, y0, wx0 * wy0), (x0 + 1, y0, wx1 * wy0),
            (x0, y0 + 1, wx0 * wy1), (x0 + 1, y0 + 1, wx1 * wy1),
        ):  # fmt: skip
            out = out + _read(flat, xc, yc, width, height) * weight.unsqueeze(1)
    return out.view(batch, channels, out_h, out_w)
