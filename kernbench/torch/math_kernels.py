"""Device kernels for the elementwise math (``abs``, ``exp``, ``sigmoid``, ``gelu``, ...),
``clamp``, the norms, ``softmax``/``log_softmax`` and ``matmul``.

The unary kernel maps a contiguous buffer elementwise (the result in the
output's dtype); the matmul kernel multiplies strided (optionally batched)
matrices tile by tile on the matrix engine, reading its operands in place
through their strides, so ``a @ b.T`` needs no copy.  Launch sizes follow
:data:`~kernbench.torch.device_kernels.BLOCK` like the other tensor kernels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import kernbench.kernels.language as tl
from kernbench.kernels import libdevice
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import (
    BLOCK,
    accumulator,
    check_elements,
    elementwise_grid,
    float_type,
    reduction_blocks,
)

__all__ = [
    "SAME_DTYPE",
    "UNARY_OPS",
    "launch_clamp",
    "launch_matmul",
    "launch_norm",
    "launch_pow",
    "launch_softmax",
    "launch_unary",
]

UNARY_OPS = (
    "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "asin", "sigmoid", "tanh", "erf",
    "relu", "gelu", "gelu_tanh", "silu",
)  # fmt: skip
#: Ops whose result keeps the input's dtype (the others compute in float32 or float64).
SAME_DTYPE = ("abs", "relu")

# Tile of the matmul kernel: a 64x64 output tile over 32-wide slices of K.
TILE_M = 64
TILE_N = 64
TILE_K = 32


@jit
def _tanh(x):
    # tanh from exp, in float64 so that 1 - e keeps float32's precision near 0.
    x64 = x.to(tl.float64)
    e = tl.exp(-2.0 * tl.abs(x64))
    t = tl.where(x64 < 0, -(1.0 - e) / (1.0 + e), (1.0 - e) / (1.0 + e))
    # Near 0, 1 - e cancels: x - x^3/3 there (its next term is 2x^5/15), keeping -0.0.
    small = x64 * (1.0 - x64 * x64 / 3.0)
    return tl.where(tl.abs(x64) < 1e-4, small, t).to(x.dtype)


@jit
def _unary_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=1)  # 1 keeps masked-off log/sqrt lanes quiet
    if OP != "abs" and OP != "relu" and x.dtype != tl.float64:
        x = x.to(tl.float32)  # tl's math takes float32 or float64, as Triton's
    if OP == "abs":
        y = tl.abs(x)
    elif OP == "relu":
        y = tl.where(x < 0, 0, x)  # NaN stays NaN, as torch.relu
    elif OP == "exp":
        y = tl.exp(x)
    elif OP == "log":
        y = tl.log(x)
    elif OP == "sqrt":
        y = tl.sqrt(x)
    elif OP == "rsqrt":
        y = tl.rsqrt(x)
    elif OP == "sin":
        y = tl.sin(x)
    elif OP == "cos":
        y = tl.cos(x)
    elif OP == "asin":
        y = libdevice.asin(x)
    elif OP == "sigmoid":
        y = tl.sigmoid(x)
    elif OP == "tanh":
        y = _tanh(x)
    elif OP == "erf":
        y = tl.erf(x)
    elif OP == "gelu":
        y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    elif OP == "gelu_tanh":
        w = x.to(tl.float64)  # 1 + tanh cancels for negative x: float64 keeps float32's digits
        y = 0.5 * w * (1.0 + _tanh(0.7978845608028654 * (w + 0.044715 * w * w * w)))
    else:
        y = x * tl.sigmoid(x)
    tl.store(out_ptr + i, y, mask=mask)


@jit
def _pow_kernel(
    x_ptr,
    out_ptr,
    n,
    p,
    MODE: tl.constexpr,
    FT: tl.constexpr,
    INTEGRAL: tl.constexpr,
    POWER: tl.constexpr,
    HALF: tl.constexpr,
    INFINITE: tl.constexpr,
    ONE: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # MODE "int": x ** POWER for integers (POWER >= 0); "float": x ** p (POWER = p when
    # INTEGRAL); "base": p ** x for a number p > 0.
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=1)
    if MODE == "int":
        y = x * 0 + 1
        base = x
        e = POWER
        while e:
            if e & 1:
                y = y * base
            base = base * base
            e = e >> 1
    elif MODE == "base":
        y = tl.exp(x.to(tl.float64) * tl.log(p.to(tl.float64)))
        y = tl.where(x == 0, 1.0, y)  # p ** 0 is 1, an infinite p too
        if ONE:
            y = tl.full((BLOCK,), 1.0, tl.float32)  # 1 ** t is 1, inf and NaN t too
    elif INTEGRAL and POWER == 0:
        y = tl.full((BLOCK,), 1.0, tl.float32)  # x ** 0 is 1, NaN and inf included
    elif INTEGRAL and POWER == 2:
        w = x.to(FT)
        y = w * w
    elif HALF:
        y = tl.sqrt(x.to(FT))  # as torch: x ** 0.5 is sqrt (-0.0 stays, -inf: NaN)
    else:
        w = x.to(tl.float64)
        r = tl.exp(p * tl.log(tl.abs(w)))
        negative = w < 0
        if INFINITE:
            r = tl.where(tl.abs(w) == 1, 1.0, r)  # C's pow: (-1) ** inf is 1
        elif INTEGRAL:
            if POWER % 2:
                # the sign of x, -0.0's too (1 / -0.0 is -inf)
                negative = negative | ((w == 0) & (1.0 / tl.where(w == 0, w, 1.0) < 0))
                r = tl.where(negative, -r, r)
        else:
            # a fractional power of a negative base (C's pow: of -inf, inf or 0)
            r = tl.where(negative & (w != float("-inf")), float("nan"), r)
        y = tl.where(w == 1, 1.0, r)  # 1 ** p is 1, a NaN p too
    tl.store(out_ptr + i, y, mask=mask)


@jit
def _norm_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    out_ptr,
    rows,
    N,
    eps,
    RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    FT: tl.constexpr,
    RBLOCK: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # RBLOCK rows of N each: their mean (not for RMS), variance (mean square for RMS),
    # then (x - mean) / sqrt(var + eps) * w + b, in three passes over each row, in FT
    # (float32, or float64 for float64 values).
    row = tl.program_id(0) * RBLOCK + tl.arange(0, RBLOCK)
    row_mask = row < rows
    base = row * N
    mean = tl.zeros((RBLOCK,), FT)
    if not RMS:
        acc = tl.zeros((RBLOCK, BLOCK), FT)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = row_mask[:, None] & (cols < N)[None, :]
            acc += tl.load(x_ptr + base[:, None] + cols[None, :], mask=mask, other=0)
        mean = tl.sum(acc, axis=1) / N
    acc = tl.zeros((RBLOCK, BLOCK), FT)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = row_mask[:, None] & (cols < N)[None, :]
        x = tl.load(x_ptr + base[:, None] + cols[None, :], mask=mask, other=0)
        d = tl.where(mask, x - mean[:, None], 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / N + eps)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = row_mask[:, None] & (cols < N)[None, :]
        x = tl.load(x_ptr + base[:, None] + cols[None, :], mask=mask, other=0)
        y = (x - mean[:, None]) * rstd[:, None]
        if HAS_W:
            y = y * tl.load(w_ptr + cols, mask=cols < N, other=0)[None, :]
        if HAS_B:
            y = y + tl.load(b_ptr + cols, mask=cols < N, other=0)[None, :]
        tl.store(out_ptr + base[:, None] + cols[None, :], y, mask=mask)


@jit
def _softmax_kernel(
    x_ptr,
    out_ptr,
    rows,
    N,
    C,
    LOG: tl.constexpr,
    ONE_BLOCK: tl.constexpr,
    FT: tl.constexpr,
    RBLOCK: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Row o = (a, c): exp(x[a, :, c] - max) / sum(exp(x[a, :, c] - max)) in FT, float32
    # (torch's accumulate type for float16/bfloat16) or float64 for float64 values, rounded
    # once by the store; with LOG its
    # logarithm, x - max - log(sum(exp(x - max))), which stays finite where the softmax
    # underflows to 0.  A row that fits in one block is read once (the Triton tutorial's
    # fused softmax); a longer one in three passes (max, sum of exponentials, write).
    row = tl.program_id(0) * RBLOCK + tl.arange(0, RBLOCK)
    row_mask = row < rows
    base = (row // C) * (N * C) + row % C
    if ONE_BLOCK:
        cols = tl.arange(0, BLOCK)
        mask = row_mask[:, None] & (cols < N)[None, :]
        offsets = base[:, None] + cols[None, :] * C
        x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf")).to(FT)
        z = x - tl.max(x, axis=1)[:, None]
        e = tl.exp(z)
        if LOG:
            y = z - tl.log(tl.sum(e, axis=1))[:, None]
        else:
            y = e / tl.sum(e, axis=1)[:, None]
        tl.store(out_ptr + offsets, y, mask=mask)
    else:
        peak = tl.full((RBLOCK,), -float("inf"), FT)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = row_mask[:, None] & (cols < N)[None, :]
            x = tl.load(x_ptr + base[:, None] + cols[None, :] * C, mask=mask, other=-float("inf"))
            peak = tl.maximum(peak, tl.max(x.to(FT), axis=1))
        total = tl.zeros((RBLOCK,), FT)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = row_mask[:, None] & (cols < N)[None, :]
            x = tl.load(x_ptr + base[:, None] + cols[None, :] * C, mask=mask, other=-float("inf"))
            e = tl.exp(x.to(FT) - peak[:, None])
            total += tl.sum(tl.where(mask, e, 0.0), axis=1)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = row_mask[:, None] & (cols < N)[None, :]
            offsets = base[:, None] + cols[None, :] * C
            x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
            z = x.to(FT) - peak[:, None]
            if LOG:
                y = z - tl.log(total)[:, None]
            else:
                y = tl.exp(z) / total[:, None]
            tl.store(out_ptr + offsets, y, mask=mask)


@jit
def _clamp_kernel(
    x_ptr,
    out_ptr,
    n,
    low,
    high,
    LOW: tl.constexpr,
    HIGH: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=0)
    if LOW:
        x = tl.where(x < low, low, x)  # a NaN stays NaN, as torch.clamp
    if HIGH:
        x = tl.where(x > high, high, x)
    tl.store(out_ptr + i, x, mask=mask)


@jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    a_offset,
    a_batch,
    a_row,
    a_col,
    b_offset,
    b_batch,
    b_row,
    b_col,
    ACC: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    batch = tl.program_id(2)
    a_base = a_ptr + a_offset + batch * a_batch
    b_base = b_ptr + b_offset + batch * b_batch
    acc = tl.zeros((BM, BN), ACC)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a_mask = (rm < M)[:, None] & (rk < K)[None, :]
        b_mask = (rk < K)[:, None] & (rn < N)[None, :]
        a = tl.load(a_base + rm[:, None] * a_row + rk[None, :] * a_col, mask=a_mask, other=0)
        b = tl.load(b_base + rk[:, None] * b_row + rn[None, :] * b_col, mask=b_mask, other=0)
        acc = tl.dot(a, b, acc)
    c = c_ptr + batch * M * N + rm[:, None] * N + rn[None, :]
    tl.store(c, acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


def launch_unary(op: str, x: DeviceTensor, out: DeviceTensor) -> None:
    """``out = op(x)`` elementwise over equal-sized contiguous buffers."""
    n = x.numel
    grid = elementwise_grid(n, op)
    _unary_kernel[grid](x, out, n, OP=op, BLOCK=BLOCK)


def launch_pow(
    x: DeviceTensor, out: DeviceTensor, exponent: int | float, *, base: bool = False
) -> None:
    """``out = x ** exponent`` elementwise, or with ``base``, ``out = exponent ** x`` (a
    number > 0).  Integer outputs by repeated squaring (wrapping as torch's int32
    does); float ones in float64 (``exp(p * log|x|)`` with the sign of an odd integral
    power, NaN for a negative base otherwise; ``x * x`` for 2)."""
    n = x.numel
    grid = elementwise_grid(n, "pow")
    integral = float(exponent).is_integer()  # False for inf and NaN
    if base:
        mode = "base"
    else:
        mode = "float" if out.dtype.is_floating_point else "int"
    _pow_kernel[grid](
        x,
        out,
        n,
        typed_scalar(float(exponent), x.dtype),
        MODE=mode,
        FT=float_type(x.dtype),
        INTEGRAL=integral,
        POWER=int(exponent) if integral else 0,
        HALF=not base and exponent == 0.5,
        INFINITE=math.isinf(exponent),
        ONE=base and exponent == 1,
        BLOCK=BLOCK,
    )


def launch_norm(
    x: DeviceTensor,
    weight: DeviceTensor | None,
    bias: DeviceTensor | None,
    out: DeviceTensor,
    rows: int,
    n: int,
    eps: float,
    *,
    rms: bool,
) -> None:
    """Layer norm (or RMS norm) of ``x`` as ``rows`` contiguous rows of ``n``, scaled by
    ``weight`` and shifted by ``bias`` (each ``n`` long, or None), into ``out``."""
    check_elements(rows * n, "a norm")
    rblock, block = reduction_blocks(rows, n)
    _norm_kernel[(max(1, -(-rows // rblock)),)](
        x,
        weight if weight is not None else x,
        bias if bias is not None else x,
        out,
        rows,
        n,
        typed_scalar(float(eps), x.dtype),
        RMS=rms,
        HAS_W=weight is not None,
        HAS_B=bias is not None,
        FT=float_type(x.dtype),
        RBLOCK=rblock,
        BLOCK=block,
    )


def launch_softmax(
    x: DeviceTensor, out: DeviceTensor, rows: int, n: int, cols: int, *, log: bool = False
) -> None:
    """Softmax (its logarithm with ``log``) of ``x`` viewed as (rows, ``n``, ``cols``) over
    its middle axis, into ``out``."""
    check_elements(rows * n * cols, "a log_softmax" if log else "a softmax")
    lines = rows * cols
    rblock, block = reduction_blocks(lines, n)
    _softmax_kernel[(max(1, -(-lines // rblock)),)](
        x,
        out,
        lines,
        n,
        cols,
        LOG=log,
        ONE_BLOCK=n <= block,
        FT=float_type(x.dtype),
        RBLOCK=rblock,
        BLOCK=block,
    )


def launch_clamp(x: DeviceTensor, out: DeviceTensor, low: Any, high: Any) -> None:
    """``out = x`` clamped to ``[low, high]`` (either ``None``: no bound), elementwise."""
    n = x.numel
    grid = elementwise_grid(n, "clamp")
    _clamp_kernel[grid](
        x,
        out,
        n,
        0 if low is None else typed_scalar(low, x.dtype),
        0 if high is None else typed_scalar(high, x.dtype),
        LOW=low is not None,
        HIGH=high is not None,
        BLOCK=BLOCK,
    )


def launch_matmul(
    a: DeviceTensor,
    a_view: tuple[int, Sequence[int]],
    b: DeviceTensor,
    b_view: tuple[int, Sequence[int]],
    out: DeviceTensor,
    sizes: tuple[int, int, int, int],
) -> None:
    """``out[batch] = a[batch] @ b[batch]`` for ``sizes`` (batch, M, N, K).

    ``a_view``/``b_view`` are (storage offset, (batch, row, col) strides) of
    each operand in its storage ``a``/``b``; ``out`` is contiguous.
    """
    batch, m, n, k = sizes
    a_offset, a_strides = a_view
    b_offset, b_strides = b_view
    grid = (max(1, -(-m // TILE_M)), max(1, -(-n // TILE_N)), max(1, batch))
    _matmul_kernel[grid](
        a,
        b,
        out,
        m,
        n,
        k,
        a_offset,
        *a_strides,
        b_offset,
        *b_strides,
        ACC=accumulator(out.dtype),
        BM=TILE_M,
        BN=TILE_N,
        BK=TILE_K,
    )
