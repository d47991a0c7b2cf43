"""The interpolation kernel behind ``F.interpolate``: nearest, nearest-exact, linear and cubic
resampling of planes (N·C, D, H, W), forward and backward.

Each program takes a block of output elements and works out, per spatial dim, the source
index (or indices) and weights torch's CPU kernels compute from the output index
(``nearest_idx``, ``nearest_neighbor_exact_compute_source_index``,
``area_pixel_compute_source_index``, ``guard_index_and_lambda``, the cubic convolution
with A = -0.75 and its taps clamped to the border).  That arithmetic is vector work per
output element, which the cost model charges; then one masked load per tap and a
weighted sum (the forward), or one atomic add per tap of the output's gradient times the
tap's weight (the backward, torch's ``upsample_*_backward`` as a scatter).  A dim the op
does not resample (the depth of a 2-D op) is a nearest dim of size 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kernbench.kernels.language as tl
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, check_elements, float_type

__all__ = ["NEAREST", "NEAREST_EXACT", "LINEAR", "CUBIC", "TAPS", "launch_resample"]

NEAREST, NEAREST_EXACT, LINEAR, CUBIC = 0, 1, 2, 3
TAPS = {NEAREST: 1, NEAREST_EXACT: 1, LINEAR: 2, CUBIC: 4}
_A = -0.75  # torch's cubic convolution coefficient


def _cubic_near(x: Any) -> Any:  # |x| <= 1
    return ((_A + 2) * x - (_A + 3)) * x * x + 1


def _cubic_far(x: Any) -> Any:  # 1 < |x| < 2
    return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A


def _taps(o: Any, size: Any, scale: Any, mode: int, align: bool, ft: Any) -> list[Any]:
    """(source index, weight or None) of each tap of output positions ``o`` along one dim."""
    if mode == NEAREST:
        src = tl.floor(o.to(tl.float32) * scale).to(tl.int32)
        return [(tl.minimum(src, size - 1), None)]
    if mode == NEAREST_EXACT:  # torch: floorf((dst + 0.5) * scale), the product in double
        src = tl.floor(((o.to(tl.float64) + 0.5) * scale).to(tl.float32)).to(tl.int32)
        return [(tl.minimum(src, size - 1), None)]
    of = o.to(ft)
    if align:
        src = scale * of
    else:
        src = scale * (of + 0.5) - 0.5
        if mode == LINEAR:
            src = tl.maximum(src, 0.0)
    i0 = tl.minimum(tl.floor(src).to(tl.int32), size - 1)
    t = tl.minimum(tl.maximum(src - i0.to(ft), 0.0), 1.0)
    if mode == LINEAR:
        i1 = i0 + tl.where(i0 < size - 1, 1, 0)
        return [(i0, 1.0 - t), (i1, t)]
    u = 1.0 - t
    weights = (_cubic_far(t + 1.0), _cubic_near(t), _cubic_near(u), _cubic_far(u + 1.0))
    return [(tl.minimum(tl.maximum(i0 + (k - 1), 0), size - 1), w) for k, w in enumerate(weights)]


def _times(w: Any, v: Any) -> Any:
    return v if w is None else w * v


@jit
def _resample_kernel(
    src_ptr,
    dst_ptr,
    n_out,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    scale_d,
    scale_h,
    scale_w,
    MD: tl.constexpr,
    MH: tl.constexpr,
    MW: tl.constexpr,
    ALIGN: tl.constexpr,
    BACKWARD: tl.constexpr,
    FT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # forward: dst (planes, OD, OH, OW) from src (planes, D, H, W); backward: src is the
    # output's gradient (planes, OD, OH, OW), added into dst (planes, D, H, W)
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = o < n_out
    plane = o // (OD * OH * OW)
    place = o % (OD * OH * OW)
    od = place // (OH * OW)
    oh = (place % (OH * OW)) // OW
    ow = place % OW
    taps_d = _taps(od, D, scale_d, MD, ALIGN, FT)
    taps_h = _taps(oh, H, scale_h, MH, ALIGN, FT)
    taps_w = _taps(ow, W, scale_w, MW, ALIGN, FT)
    if BACKWARD:
        g = tl.load(src_ptr + o, mask=mask, other=0).to(FT)
        base = dst_ptr + plane * (D * H * W)
        for id_, wd in taps_d:
            gd = _times(wd, g)
            for ih, wh in taps_h:
                gh = _times(wh, gd)
                row = (id_ * H + ih) * W
                for iw, ww in taps_w:
                    tl.atomic_add(base + row + iw, _times(ww, gh), mask=mask)
    else:
        base = src_ptr + plane * (D * H * W)
        total = tl.zeros((BLOCK,), FT)
        for id_, wd in taps_d:
            plane_sum = tl.zeros((BLOCK,), FT)
            for ih, wh in taps_h:
                row = (id_ * H + ih) * W
                row_sum = tl.zeros((BLOCK,), FT)
                for iw, ww in taps_w:
                    v = tl.load(base + row + iw, mask=mask, other=0).to(FT)
                    row_sum = row_sum + _times(ww, v)
                plane_sum = plane_sum + _times(wh, row_sum)
            total = total + _times(wd, plane_sum)
        tl.store(dst_ptr + o, total, mask=mask)


def launch_resample(
    src: DeviceTensor,
    dst: DeviceTensor,
    sizes: tuple[int, ...],
    scales: tuple[float, float, float],
    modes: tuple[int, int, int],
    *,
    align_corners: bool,
    backward: bool = False,
) -> None:
    """Resample contiguous planes: ``sizes`` = (D, H, W, OD, OH, OW) (input, output),
    ``scales`` each dim's scale as torch's kernel computes it (float32 for the nearest
    modes, else in the kernel's float type), ``modes`` each dim's mode.  The forward
    writes ``dst`` (planes, OD, OH, OW) from ``src`` (planes, D, H, W); the backward adds
    the gradient ``src`` (planes, OD, OH, OW) into a zeroed ``dst`` (planes, D, H, W)."""
    d, h, w, od, oh, ow = sizes
    n_out = src.numel if backward else dst.numel
    check_elements(max(src.numel, dst.numel), "an interpolation")
    ft = float_type(src.dtype)
    typed = []
    for scale, mode in zip(scales, modes, strict=True):
        if mode == NEAREST:
            typed.append(np.float32(scale))
        elif mode == NEAREST_EXACT:
            typed.append(np.float64(np.float32(scale)))  # a float promoted to double
        else:
            typed.append(np.float64(scale) if ft is tl.float64 else np.float32(scale))
    window = tl.next_power_of_2(TAPS[modes[0]] * TAPS[modes[1]] * TAPS[modes[2]])
    block = min(max(256, BLOCK // window), tl.next_power_of_2(n_out))
    _resample_kernel[(max(1, -(-n_out // block)),)](
        src, dst, n_out, d, h, w, od, oh, ow, *typed,
        MD=modes[0],
        MH=modes[1],
        MW=modes[2],
        ALIGN=align_corners,
        BACKWARD=backward,
        FT=ft,
        BLOCK=block,
    )  # fmt: skip
