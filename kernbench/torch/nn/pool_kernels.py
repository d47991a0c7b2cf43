"""The pooling kernel: max, average and their adaptive forms, one elementwise-style kernel.

Each program takes a block of output elements of ``x`` viewed as planes (N·C, D, H, W)
and walks the window (KD × KH × KW, a constexpr) for all of them at once: one masked load per
window position, lanes outside the input (padding, or past an adaptive window's end)
left out.  The max keeps torch's CPU rule (a larger value or a NaN takes the place, so
the first of equal maxima and the last NaN win) and its index in the plane ((id·H + ih)·W + iw),
starting from the window's first position inside the input; the average sums in float32
(float64 for float64) and divides by torch's divisor.  A 2-D pool is the 3-D one of
depth 1 and a 1-D pool also of rows of height 1 (the extra index arithmetic is integer
work, which the cost model does not charge).

The fractional max pool has a kernel of its own: its windows start where torch's
pseudo-random sequence puts them, one sequence per plane and dimension drawn from the
plane's sample ``u``.  Each program computes the starts of its outputs from the samples
(torch's ``generate_intervals``: ``int((i + u) * alpha) - int(u * alpha)``, the last
window at ``in - k``, in the input's type, so float16 and bfloat16 round every step as
torch's CPU kernel does) and then walks the window as the max pool does, with the same
rule for ties and NaN.
"""

from __future__ import annotations

import kernbench.kernels.language as tl
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, check_elements, float_type

__all__ = ["adaptive_window", "launch_fractional_pool", "launch_pool"]


@jit
def _pool_kernel(
    x_ptr,
    out_ptr,
    idx_ptr,
    n_out,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    SD,
    SH,
    SW,
    PD,
    PH,
    PW,
    DD,
    DH,
    DW,
    divisor,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    MAX: tl.constexpr,
    ADAPTIVE: tl.constexpr,
    INDICES: tl.constexpr,
    INCLUDE_PAD: tl.constexpr,
    OVERRIDE: tl.constexpr,
    FT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = o < n_out
    plane = o // (OD * OH * OW)
    place = o % (OD * OH * OW)
    od = place // (OH * OW)
    oh = (place % (OH * OW)) // OW
    ow = place % OW
    if ADAPTIVE:  # torch's start_index and end_index
        d0 = (od * D) // OD
        h0 = (oh * H) // OH
        w0 = (ow * W) // OW
        d1 = ((od + 1) * D + OD - 1) // OD
        h1 = ((oh + 1) * H + OH - 1) // OH
        w1 = ((ow + 1) * W + OW - 1) // OW
    else:
        d0 = od * SD - PD
        h0 = oh * SH - PH
        w0 = ow * SW - PW
        d1 = tl.minimum(d0 + (KD - 1) * DD + 1, D)
        h1 = tl.minimum(h0 + (KH - 1) * DH + 1, H)
        w1 = tl.minimum(w0 + (KW - 1) * DW + 1, W)
    base = x_ptr + plane * (D * H * W)
    if MAX:
        # the window's first position inside the input, as torch starts its argmax there
        first_d = d0 + DD * ((tl.maximum(-d0, 0) + DD - 1) // DD)
        first_h = h0 + DH * ((tl.maximum(-h0, 0) + DH - 1) // DH)
        first_w = w0 + DW * ((tl.maximum(-w0, 0) + DW - 1) // DW)
        best = tl.full((BLOCK,), float("-inf"), FT)
        index = (first_d * H + first_h) * W + first_w
    else:
        total = tl.zeros((BLOCK,), FT)
    for t in range(KD):
        idp = d0 + t * DD
        plane_ok = mask & (idp >= 0) & (idp < d1)
        for i in range(KH):
            ih = h0 + i * DH
            row_ok = plane_ok & (ih >= 0) & (ih < h1)
            row = idp * H + ih
            for j in range(KW):
                iw = w0 + j * DW
                ok = row_ok & (iw >= 0) & (iw < w1)
                v = tl.load(base + row * W + iw, mask=ok, other=0).to(FT)
                if MAX:
                    take = ok & ((v > best) | (v != v))
                    best = tl.where(take, v, best)
                    if INDICES:
                        index = tl.where(take, row * W + iw, index)
                else:
                    total += v
    if MAX:
        tl.store(out_ptr + o, best, mask=mask)
        if INDICES:
            tl.store(idx_ptr + o, index, mask=mask)
    else:
        if ADAPTIVE:
            count = (d1 - d0) * (h1 - h0) * (w1 - w0)
        elif OVERRIDE:
            count = tl.zeros((BLOCK,), tl.int32) + divisor
        elif INCLUDE_PAD:  # the window cut at the padded input's end
            count = (
                (tl.minimum(d0 + KD, D + PD) - d0)
                * (tl.minimum(h0 + KH, H + PH) - h0)
                * (tl.minimum(w0 + KW, W + PW) - w0)
            )
        else:
            count = (d1 - tl.maximum(d0, 0)) * (h1 - tl.maximum(h0, 0)) * (w1 - tl.maximum(w0, 0))
        empty = (d1 <= tl.maximum(d0, 0)) | (h1 <= tl.maximum(h0, 0)) | (w1 <= tl.maximum(w0, 0))
        mean = tl.where(empty, 0.0, total / tl.where(count == 0, 1, count).to(FT))
        tl.store(out_ptr + o, mean.to(FT), mask=mask)


def adaptive_window(size: int, out: int) -> int:
    """The longest window an adaptive pool of ``size`` into ``out`` takes."""
    return max((-(-((o + 1) * size) // out)) - (o * size) // out for o in range(out))


def launch_pool(
    x: DeviceTensor,
    out: DeviceTensor,
    indices: DeviceTensor | None,
    geometry: tuple[int, ...],
    *,
    kind: str,
    include_pad: bool = True,
    divisor: int | None = None,
) -> None:
    """Pool contiguous ``x`` (planes, D, H, W) into ``out`` (planes, OD, OH, OW), and the
    max's indices into ``indices``.  ``geometry`` is (D, H, W, OD, OH, OW, KD, KH, KW, SD,
    SH, SW, PD, PH, PW, DD, DH, DW); ``kind`` is "max", "avg", "adaptive_max" or
    "adaptive_avg" (whose windows are torch's adaptive ones, ``KD``/``KH``/``KW`` their
    longest)."""
    d, h, w, od, oh, ow, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw = geometry
    n_out = out.numel
    check_elements(max(x.numel, n_out), "a pooling")
    window = tl.next_power_of_2(kd * kh * kw)
    block = min(max(256, BLOCK // window), tl.next_power_of_2(n_out))
    _pool_kernel[(max(1, -(-n_out // block)),)](
        x, out, indices if indices is not None else out, n_out, d, h, w, od, oh, ow, sd, sh,
        sw, pd, ph, pw, dd, dh, dw, divisor or 0,
        KD=kd,
        KH=kh,
        KW=kw,
        MAX=kind.endswith("max"),
        ADAPTIVE=kind.startswith("adaptive"),
        INDICES=indices is not None,
        INCLUDE_PAD=include_pad,
        OVERRIDE=divisor is not None,
        FT=float_type(x.dtype),
        BLOCK=block,
    )  # fmt: skip


@jit
def _window_start(o, u, alpha, size, out, K: tl.constexpr, ST: tl.constexpr, FT: tl.constexpr):
    """torch's ``generate_intervals`` for outputs ``o`` of a dim of ``size`` pooled into
    ``out``: each step in the samples' type ``ST`` (computed in ``FT``, then rounded), the
    start kept inside the input (a sample outside [0, 1) cannot read past it)."""
    a = alpha.to(ST).to(FT)
    moved = ((o.to(ST).to(FT) + u).to(ST).to(FT) * a).to(ST).to(tl.int32)
    offset = (u * a).to(ST).to(tl.int32)
    start = tl.where(o == out - 1, size - K, moved - offset)
    return tl.minimum(tl.maximum(start, 0), size - K)


@jit
def _fractional_pool_kernel(
    x_ptr,
    out_ptr,
    idx_ptr,
    u_ptr,
    n_out,
    D,
    H,
    W,
    OD,
    OH,
    OW,
    alpha_d,
    alpha_h,
    alpha_w,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    SAMPLES: tl.constexpr,
    UD: tl.constexpr,
    UH: tl.constexpr,
    UW: tl.constexpr,
    ST: tl.constexpr,
    FT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = o < n_out
    plane = o // (OD * OH * OW)
    place = o % (OD * OH * OW)
    od = place // (OH * OW)
    oh = (place % (OH * OW)) // OW
    ow = place % OW
    samples = u_ptr + plane * SAMPLES
    if UD >= 0:
        u_d = tl.load(samples + UD, mask=mask, other=0).to(FT)
        d0 = _window_start(od, u_d, alpha_d, D, OD, KD, ST, FT)
    else:  # a 2-D pool: the one plane of depth 1
        d0 = od * 0
    u_h = tl.load(samples + UH, mask=mask, other=0).to(FT)
    u_w = tl.load(samples + UW, mask=mask, other=0).to(FT)
    h0 = _window_start(oh, u_h, alpha_h, H, OH, KH, ST, FT)
    w0 = _window_start(ow, u_w, alpha_w, W, OW, KW, ST, FT)
    base = x_ptr + plane * (D * H * W)
    best = tl.full((BLOCK,), float("-inf"), FT)
    index = (d0 * H + h0) * W + w0
    for t in range(KD):
        for i in range(KH):
            row = (d0 + t) * H + h0 + i
            for j in range(KW):
                v = tl.load(base + row * W + w0 + j, mask=mask, other=0).to(FT)
                take = mask & ((v > best) | (v != v))
                best = tl.where(take, v, best)
                index = tl.where(take, row * W + w0 + j, index)
    tl.store(out_ptr + o, best, mask=mask)
    tl.store(idx_ptr + o, index, mask=mask)


def launch_fractional_pool(
    x: DeviceTensor,
    samples: DeviceTensor,
    out: DeviceTensor,
    indices: DeviceTensor,
    spatial: tuple[int, int, int],
    out_spatial: tuple[int, int, int],
    kernel: tuple[int, int, int],
    slots: tuple[int, int, int],
    alphas: tuple[float, float, float],
) -> None:
    """Fractional-max-pool contiguous ``x`` (planes, D, H, W) into ``out`` and ``indices``
    (planes, OD, OH, OW), the windows ``kernel`` (KD, KH, KW) starting where torch's
    sequences for ``samples`` put them (contiguous: each plane's samples in a row, in the
    planes' order; rows past the last plane are not read).  ``slots`` says which of a
    plane's samples each dim takes (-1: none, a 2-D pool's depth); ``alphas`` are
    torch's ``(in - k) / (out - 1)``, in float32 (float64 for a float64 input)."""
    (d, h, w), (od, oh, ow), (kd, kh, kw) = spatial, out_spatial, kernel
    n_out = out.numel
    check_elements(max(x.numel, n_out), "a fractional max pooling")
    window = tl.next_power_of_2(kd * kh * kw)
    block = min(max(256, BLOCK // window), tl.next_power_of_2(n_out))
    name = x.dtype.name
    sample_type = getattr(tl, name) if name in ("float16", "bfloat16") else float_type(x.dtype)
    _fractional_pool_kernel[(max(1, -(-n_out // block)),)](
        x, out, indices, samples, n_out, d, h, w, od, oh, ow, *alphas,
        KD=kd,
        KH=kh,
        KW=kw,
        SAMPLES=sum(1 for s in slots if s >= 0),
        UD=slots[0],
        UH=slots[1],
        UW=slots[2],
        ST=sample_type,
        FT=float_type(x.dtype),
        BLOCK=block,
    )  # fmt: skip
