"""The convolution kernel: an implicit GEMM on the matrix engine.

A convolution of ``x`` (N, C, D, H, W) with ``weight`` (Cout, C/groups, KD, KH, KW) is,
for each group, the product of the (N·OD·OH·OW, C/groups·KD·KH·KW) matrix of input
patches with the (C/groups·KD·KH·KW, Cout/groups) matrix of the weight.  The patch matrix is never
written out: each program computes a block of output positions by a block of output
channels and walks the reduction in chunks, loading each chunk of patches straight
from ``x`` (a gather, masked where a patch reaches into the zero padding) and the
matching chunk of the weight, and adding their ``tl.dot`` into its accumulator.  The
bias is added before the one store.  The kernel is 3-D; a 2-D convolution is the 3-D
one with D = KD = 1 and a 1-D one also has H = KH = 1 (the extra index arithmetic is
integer work, which the cost model does not charge, so their costs are the 2-D kernel's
as it was).
"""

from __future__ import annotations

import kernbench.kernels.language as tl
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import accumulator, check_elements

__all__ = ["launch_conv"]

# Output positions a program computes; its output channels and reduction chunk are the
# powers of two that fit the layer (16 to 64 channels, 16 to 32 of the reduction).
TILE_POSITIONS = 64


@jit
def _conv_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    out_ptr,
    M,
    C,
    D,
    H,
    W,
    COUT,
    OD,
    OH,
    OW,
    CG,
    COUT_G,
    KD,
    KH,
    KW,
    SD,
    SH,
    SW,
    PD,
    PH,
    PW,
    DD,
    DH,
    DW,
    HAS_BIAS: tl.constexpr,
    ACC: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    # rows: output positions (n, od, oh, ow) of this group; columns: its output channels
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    group = tl.program_id(2)
    m_ok = rm < M
    n_ok = rn < COUT_G
    positions = OD * OH * OW
    sample = rm // positions
    place = rm % positions
    plane = place % (OH * OW)
    id0 = (place // (OH * OW)) * SD - PD
    ih0 = (plane // OW) * SH - PH
    iw0 = (plane % OW) * SW - PW
    oc = group * COUT_G + rn
    area = KH * KW
    window = KD * area
    K = CG * window
    x_planes = (sample * C + group * CG) * D  # the first input plane of the group's channels
    acc = tl.zeros((BM, BN), ACC)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        k_ok = rk < K
        c = rk // window
        t = (rk % window) // area
        i = (rk % area) // KW
        j = rk % KW
        idp = id0[:, None] + (t * DD)[None, :]
        ih = ih0[:, None] + (i * DH)[None, :]
        iw = iw0[:, None] + (j * DW)[None, :]
        inside = (idp >= 0) & (idp < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a_mask = m_ok[:, None] & k_ok[None, :] & inside
        rows = (x_planes[:, None] + (c * D)[None, :] + idp) * H + ih
        a = tl.load(x_ptr + rows * W + iw, mask=a_mask, other=0)
        b_mask = k_ok[:, None] & n_ok[None, :]
        b = tl.load(w_ptr + oc[None, :] * K + rk[:, None], mask=b_mask, other=0)
        acc = tl.dot(a, b, acc)
    if HAS_BIAS:
        acc += tl.load(b_ptr + oc, mask=n_ok, other=0).to(ACC)[None, :]
    out = out_ptr + (sample * COUT * positions + place)[:, None] + (oc * positions)[None, :]
    tl.store(out, acc, mask=m_ok[:, None] & n_ok[None, :])


def _power_of_two_in(n: int, low: int, high: int) -> int:
    return min(high, max(low, tl.next_power_of_2(max(1, n))))


def launch_conv(
    x: DeviceTensor,
    weight: DeviceTensor,
    bias: DeviceTensor | None,
    out: DeviceTensor,
    geometry: tuple[int, ...],
) -> None:
    """``out = conv(x, weight) + bias`` for contiguous tensors; ``geometry`` is
    (N, C, D, H, W, Cout, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW,
    groups), PD, PH and PW the padding before the first plane, row and column (the padding
    after them is what the output size leaves, so 'same' padding of an even kernel is
    uneven as torch's)."""
    n, c, d, h, w, cout, od, oh, ow, *window, groups = geometry
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = (
        window[0:3], window[3:6], window[6:9], window[9:12],
    )  # fmt: skip
    check_elements(max(x.numel, out.numel, weight.numel), "a convolution")
    m = n * od * oh * ow
    cout_g, cg = cout // groups, c // groups
    bm = TILE_POSITIONS
    bn = _power_of_two_in(cout_g, 16, 64)
    bk = _power_of_two_in(cg * kd * kh * kw, 16, 32)
    grid = (max(1, -(-m // bm)), max(1, -(-cout_g // bn)), groups)
    _conv_kernel[grid](
        x, weight, bias if bias is not None else weight, out, m, c, d, h, w, cout, od, oh, ow,
        cg, cout_g, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw,
        HAS_BIAS=bias is not None,
        ACC=accumulator(out.dtype),
        BM=bm,
        BN=bn,
        BK=bk,
    )  # fmt: skip
