"""The convolution kernel: an implicit GEMM on the matrix engine.

A convolution of ``x`` (N, C, H, W) with ``weight`` (Cout, C/groups, KH, KW) is, for
each group, the product of the (N·OH·OW, C/groups·KH·KW) matrix of input patches with
the (C/groups·KH·KW, Cout/groups) matrix of the weight.  The patch matrix is never
written out: each program computes a block of output positions by a block of output
channels and walks the reduction in chunks, loading each chunk of patches straight
from ``x`` (a gather, masked where a patch reaches into the zero padding) and the
matching chunk of the weight, and adding their ``tl.dot`` into its accumulator.  The
bias is added before the one store.  A 1-D convolution is the 2-D one with H = KH = 1.
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
    H,
    W,
    COUT,
    OH,
    OW,
    CG,
    COUT_G,
    KH,
    KW,
    SH,
    SW,
    PH,
    PW,
    DH,
    DW,
    HAS_BIAS: tl.constexpr,
    ACC: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    # rows: output positions (n, oh, ow) of this group; columns: its output channels
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    group = tl.program_id(2)
    m_ok = rm < M
    n_ok = rn < COUT_G
    positions = OH * OW
    sample = rm // positions
    place = rm % positions
    ih0 = (place // OW) * SH - PH
    iw0 = (place % OW) * SW - PW
    oc = group * COUT_G + rn
    window = KH * KW
    K = CG * window
    x_rows = (sample * C + group * CG) * H  # the first input row of the group's channels
    acc = tl.zeros((BM, BN), ACC)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        k_ok = rk < K
        c = rk // window
        i = (rk % window) // KW
        j = rk % KW
        ih = ih0[:, None] + (i * DH)[None, :]
        iw = iw0[:, None] + (j * DW)[None, :]
        inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a_mask = m_ok[:, None] & k_ok[None, :] & inside
        rows = x_rows[:, None] + (c * H)[None, :] + ih
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
    (N, C, H, W, Cout, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, groups), PH and PW the
    padding before the first row and column (the padding after them is what the output
    size leaves, so 'same' padding of an even kernel is uneven as torch's)."""
    n, c, h, w, cout, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, groups = geometry
    check_elements(max(x.numel, out.numel, weight.numel), "a convolution")
    m = n * oh * ow
    cout_g, cg = cout // groups, c // groups
    bm = TILE_POSITIONS
    bn = _power_of_two_in(cout_g, 16, 64)
    bk = _power_of_two_in(cg * kh * kw, 16, 32)
    grid = (max(1, -(-m // bm)), max(1, -(-cout_g // bn)), groups)
    _conv_kernel[grid](
        x,
        weight,
        bias if bias is not None else weight,
        out,
        m,
        c,
        h,
        w,
        cout,
        oh,
        ow,
        cg,
        cout_g,
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
        HAS_BIAS=bias is not None,
        ACC=accumulator(out.dtype),
        BM=bm,
        BN=bn,
        BK=bk,
    )
