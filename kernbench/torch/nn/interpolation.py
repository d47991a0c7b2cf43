"""``torch.nn.functional.interpolate`` (and ``upsample``), ``pixel_shuffle`` and
``pixel_unshuffle``.

``interpolate`` takes torch's arguments and checks them as torch's Python code does (its
``ValueError``/``TypeError``/``NotImplementedError`` messages): exactly one of ``size`` and
``scale_factor``; the output size ``floor(input size * scale)``; a ``scale_factor``
given without ``recompute_scale_factor`` is the scale the index formulas use, as torch
passes it to its kernels.  'nearest', 'nearest-exact', 'linear' (3-D input), 'bilinear' and
'bicubic' (4-D), 'trilinear' (5-D) run one kernel
(:mod:`~kernbench.torch.nn.resample_kernels`); 'area' is ``adaptive_avg_pool{1,2,3}d``, as
torch's.  ``antialias=True`` is refused.  ``pixel_shuffle``/``pixel_unshuffle`` are a
reshape, a permute and a copy.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from typing import Any

import numpy as np

from kernbench.errors import TensorError, user_stacklevel
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.nn.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
)
from kernbench.torch.nn.resample_kernels import (
    CUBIC,
    LINEAR,
    NEAREST,
    NEAREST_EXACT,
    launch_resample,
)
from kernbench.torch.shapes import int_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "Resample",
    "interpolate",
    "pixel_shuffle",
    "pixel_unshuffle",
    "resample_backward",
    "resample_plan",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
    "warn_deprecated",
]

_MODES = {
    "nearest": NEAREST,
    "nearest-exact": NEAREST_EXACT,
    "linear": LINEAR,
    "bilinear": LINEAR,
    "trilinear": LINEAR,
    "bicubic": CUBIC,
}
_NEEDS = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}


@dataclasses.dataclass(frozen=True)
class Resample:
    """What ``interpolate`` runs: ``mode`` ('area' or a kernel mode), the input's spatial
    ``sizes``, the output's ``out_sizes``, the ``scales`` the kernel's index formulas use
    (per dim) and ``align_corners``."""

    mode: str
    sizes: tuple[int, ...]
    out_sizes: tuple[int, ...]
    scales: tuple[float, ...]
    align_corners: bool


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _kernel_scale(mode: str, size: int, out: int, factor: float | None, align: bool, f64: bool):
    """torch's scale along one dim: ``nearest_idx``'s float scale (1 and 1/2 exactly when the
    output is the input's size or twice it, as its special cases), else
    ``area_pixel_compute_scale`` in the kernel's float type."""
    if mode in ("nearest", "nearest-exact"):
        if mode == "nearest" and out in (size, 2 * size):
            return size / out
        if factor is not None and factor > 0:
            return float(np.float32(1.0 / factor))
        return float(np.float32(size) / np.float32(out))
    ft = np.float64 if f64 else np.float32
    if align:
        return float(ft(size - 1) / ft(out - 1)) if out > 1 else 0.0
    if factor is not None and factor > 0:
        return float(ft(1.0 / factor))
    return float(ft(size) / ft(out))


def resample_plan(
    input: Any,  # noqa: A002 - torch's name
    size: Any = None,
    scale_factor: Any = None,
    mode: Any = "nearest",
    align_corners: Any = None,
    recompute_scale_factor: Any = None,
    antialias: Any = False,
) -> tuple[Tensor, Resample]:
    """The checked input and what to run, with torch's checks and messages."""
    x = tensor_argument(input, "torch.nn.functional.interpolate")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "align_corners option can only be set with the interpolating modes: "
                "linear | bilinear | bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    dim = x.ndim - 2
    spatial = list(x.shape[2:])
    factors: list[Any] | None = None
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, list | tuple):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {spatial} and output size of {size}. "
                    "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output "
                    "size in (o1, o2, ...,oK) format."
                )
            if not all(_is_integer(s) for s in size):
                raise TypeError(
                    "expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                    f"Tuple[int, int, int], but got size with types {[type(s) for s in size]}"
                )
            out_sizes = [int(s) for s in size]
        else:
            out_sizes = [int_argument(size, "torch.nn.functional.interpolate", "size")] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, list | tuple):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, "
                    f"but got input with spatial dimensions of {spatial} and scale_factor of "
                    f"shape {scale_factor}. Please provide input tensor in (N, C, d1, d2, "
                    "...,dK) format and scale_factor in (s1, s2, ...,sK) format."
                )
            factors = [float(f) for f in scale_factor]
        else:
            factors = [float(scale_factor)] * dim
        out_sizes = [math.floor(s * f) for s, f in zip(spatial, factors, strict=True)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" or recompute_scale_factor:
        factors = None  # the scales come from the (integer) sizes
    if antialias:
        if not (mode in ("bilinear", "bicubic") and x.ndim == 4):
            raise ValueError(
                "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and "
                "requires a 4-D tensor as input"
            )
        raise TensorError(
            f"torch.nn.functional.interpolate(mode={mode!r}, antialias=True): the anti-aliased "
            "kernels (a wider filter when downsampling) are not here; use antialias=False, or "
            "F.avg_pool2d before downsampling by an integer factor"
        )
    known = mode == "area" or mode in _MODES
    if known and (mode in ("nearest", "nearest-exact", "area") or _NEEDS[mode] == x.ndim):
        if x.ndim in (3, 4, 5):
            return x, _checked(x, mode, spatial, out_sizes, factors, bool(align_corners))
    if x.ndim in (3, 4, 5) and mode in _NEEDS:
        raise NotImplementedError(
            f"Got {x.ndim}D input, but {mode} mode needs {_NEEDS[mode]}D input"
        )
    raise NotImplementedError(
        f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {x.ndim}D) for the "
        "modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | "
        f"nearest-exact (got {mode})"
    )


def _checked(
    x: Tensor,
    mode: str,
    spatial: list[int],
    out_sizes: list[int],
    factors: list[float] | None,
    align: bool,
) -> Resample:
    if mode == "area":
        return Resample(mode, tuple(spatial), tuple(out_sizes), (), False)
    if any(s <= 0 for s in spatial) or any(o <= 0 for o in out_sizes):
        names = ("D", "H", "W")[3 - len(spatial) :]
        given = ", ".join(f"{n}: {s}" for n, s in zip(names, spatial, strict=True))
        wanted = ", ".join(f"{n}: {o}" for n, o in zip(names, out_sizes, strict=True))
        raise TensorError(
            "torch.nn.functional.interpolate: Input and output sizes should be greater than 0, "
            f"but got input ({given}) output ({wanted})"
        )
    small_integer = x.dtype.name in ("uint8", "int8", "int16")  # exact in the float32 copy
    if not (x.dtype.is_floating_point or (small_integer and mode.startswith("nearest"))):
        raise TensorError(
            f"torch.nn.functional.interpolate: mode {mode!r} takes a floating input here (the "
            f"nearest modes also uint8, int8 and int16), got {x.dtype!r}; convert with .float() "
            "first"
        )
    f64 = x.dtype.name == "float64"
    scales = tuple(
        _kernel_scale(mode, s, o, None if factors is None else factors[i], align, f64)
        for i, (s, o) in enumerate(zip(spatial, out_sizes, strict=True))
    )
    return Resample(mode, tuple(spatial), tuple(out_sizes), scales, align)


def _padded(plan: Resample) -> tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...], tuple]:
    """The plan's sizes, scales and per-dim modes over three dims (missing ones nearest)."""
    lead = 3 - len(plan.sizes)
    sizes = (1,) * lead + plan.sizes
    out_sizes = (1,) * lead + plan.out_sizes
    scales = (1.0,) * lead + plan.scales
    modes = (NEAREST,) * lead + (_MODES[plan.mode],) * len(plan.sizes)
    return sizes, out_sizes, scales, modes


def _launch(src: Tensor, dst: Tensor, plan: Resample, backward: bool) -> None:
    sizes, out_sizes, scales, modes = _padded(plan)
    launch_resample(
        src.device_tensor,
        dst.device_tensor,
        (*sizes, *out_sizes),
        scales,  # type: ignore[arg-type]
        modes,  # type: ignore[arg-type]
        align_corners=plan.align_corners,
        backward=backward,
    )


def run_resample(x: Tensor, plan: Resample) -> Tensor:
    """The forward of a kernel mode: one kernel over the dense input."""
    dims = len(plan.sizes)
    out = x.new_empty((*tuple(x.shape)[: x.ndim - dims], *plan.out_sizes))
    if out.numel():
        dense = x.dense()
        _launch(dense, out, plan, backward=False)
        if dense is not x:
            dense.free()
    return out


def resample_backward(g: Tensor, plan: Resample, shape: tuple[int, ...]) -> Tensor:
    """The input's gradient: each output's gradient times each tap's weight added to the
    tap's input position (zeros, then one kernel; float16/bfloat16 add in float32)."""
    reduced = g.dtype.name in ("float16", "bfloat16")
    gx = g.new_zeros(shape, dtype=DTYPE_OBJECTS["float32"] if reduced else g.dtype)
    if g.numel():
        dense = g.dense()
        _launch(dense, gx, plan, backward=True)
        if dense is not g:
            dense.free()
    if reduced:
        cast = gx.to(g.dtype)
        gx.free()
        return cast
    return gx


def interpolate(
    input: Tensor,  # noqa: A002 - torch's name
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """``input`` (N, C, [D,] [H,] W) resampled to ``size`` or by ``scale_factor`` with
    ``mode``, as torch's ``interpolate``."""
    x, plan = resample_plan(
        input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias
    )
    if plan.mode == "area":
        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[x.ndim - 3]
        return pool(x, plan.out_sizes if x.ndim > 3 else plan.out_sizes[0])
    return run_resample(x, plan)


def warn_deprecated(name: str) -> None:
    warnings.warn(
        f"nn.functional.{name} is deprecated. Use nn.functional.interpolate instead.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def upsample(
    input: Tensor,  # noqa: A002 - torch's name
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """torch's deprecated ``upsample`` (with its warning): :func:`interpolate`."""
    warn_deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:  # noqa: A002
    """torch's deprecated ``upsample_nearest``: :func:`interpolate` with 'nearest'."""
    warn_deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:  # noqa: A002
    """torch's deprecated ``upsample_bilinear``: :func:`interpolate` with 'bilinear' and
    ``align_corners=True``."""
    warn_deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _shuffle_input(value: Any, call: str, factor: Any, what: str) -> tuple[Tensor, int]:
    x = tensor_argument(value, call)
    r = int_argument(factor, call, what)
    if x.ndim < 3:
        raise TensorError(
            f"{call}: {call.rpartition('.')[2]} expects input to have at least 3 dimensions, "
            f"but got input with {x.ndim} dimension(s)"
        )
    if r <= 0:
        raise TensorError(f"{call}: {what} must be greater than 0, but got {r}")
    return x, r


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C·r², H, W) to (*, C, H·r, W·r), as torch's: a view, a permute and a copy."""
    call = "torch.nn.functional.pixel_shuffle"
    x, r = _shuffle_input(input, call, upscale_factor, "upscale_factor")
    *lead, c, h, w = tuple(x.shape)
    if c % (r * r):
        raise TensorError(
            f"{call}: pixel_shuffle expects its input's 'channel' dimension to be divisible by "
            f"the square of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}"
        )
    n = len(lead)
    parts = x.reshape(*lead, c // (r * r), r, r, h, w)
    order = (*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return parts.permute(*order).reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C, H·r, W·r) to (*, C·r², H, W), as torch's: a view, a permute and a copy."""
    call = "torch.nn.functional.pixel_unshuffle"
    x, r = _shuffle_input(input, call, downscale_factor, "downscale_factor")
    *lead, c, h, w = tuple(x.shape)
    if h % r:
        raise TensorError(
            f"{call}: pixel_unshuffle expects height to be divisible by downscale_factor, but "
            f"input.size(-2)={h} is not divisible by {r}"
        )
    if w % r:
        raise TensorError(
            f"{call}: pixel_unshuffle expects width to be divisible by downscale_factor, but "
            f"input.size(-1)={w} is not divisible by {r}"
        )
    n = len(lead)
    parts = x.reshape(*lead, c, h // r, r, w // r, r)
    order = (*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return parts.permute(*order).reshape(*lead, c * r * r, h // r, w // r)
