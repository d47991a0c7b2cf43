"""The device kernels behind tensor operations, launched with the tensor layer's block size.

Elementwise arithmetic, ``maximum``/``minimum``, fills and copies run the
kernel layer's built-in kernels (:mod:`kernbench.kernels.builtins`); sums,
max/min along a dim, ``cat``/``stack`` and ``arange`` run the Triton-style
kernels defined here.  Every launch takes
runtime device tensors and uses :data:`BLOCK` elements per program, so the
cost of a tensor operation depends on this one choice.
"""

from __future__ import annotations

from typing import Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError
from kernbench.kernels import builtins
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor

__all__ = [
    "elementwise_operand",
    "BLOCK",
    "MAX_KERNEL_ELEMENTS",
    "check_elements",
    "elementwise_grid",
    "reduction_blocks",
    "launch_arange",
    "launch_combine",
    "launch_copy",
    "launch_elementwise",
    "launch_extreme",
    "launch_fill",
    "launch_place",
    "launch_scalar",
    "launch_sum",
    "launch_var",
]

# Elements per program of the kernels behind tensor arithmetic: large enough that a
# program's memory access latency and launch overhead are small next to its streaming
# time (64 KiB of float32 per operand), as a tuned device library would choose.
BLOCK = 16384

# The kernels behind tensor arithmetic index elements with 32-bit offsets, as Triton's do.
MAX_KERNEL_ELEMENTS = 2**31 - 1


@jit
def _sum_kernel(
    x_ptr,
    out_ptr,
    n_out,
    R,
    C,
    ACC: tl.constexpr,
    MEAN: tl.constexpr,
    NORM: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Output o = (a, c) sums x[a, r, c] over r < R, with x viewed as (A, R, C); NORM 1 sums
    # |x|, NORM 2 sums x * x and takes the square root (a vector norm in one pass).
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_out
    base = (o // C) * (R * C) + o % C
    acc = tl.zeros((OBLOCK, RBLOCK), ACC)
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        x = tl.load(x_ptr + base[:, None] + r[None, :] * C, mask=mask, other=0)
        if NORM == 1:
            x = tl.abs(x)
        elif NORM == 2:
            x = x.to(ACC)
            x = x * x
        acc += x
    total = tl.sum(acc, axis=1)
    if MEAN:
        total = total / R
    if NORM == 2:
        total = tl.sqrt(total)
    tl.store(out_ptr + o, total, mask=o_mask)


@jit
def _var_kernel(
    x_ptr,
    out_ptr,
    n_out,
    R,
    C,
    divisor,
    STD: tl.constexpr,
    FT: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Two passes over x[a, r, c] (r < R): the mean, then the squared deviations from it,
    # in FT (float32, or float64 for float64 values).
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_out
    base = (o // C) * (R * C) + o % C
    acc = tl.zeros((OBLOCK, RBLOCK), FT)
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        acc += tl.load(x_ptr + base[:, None] + r[None, :] * C, mask=mask, other=0)
    mean = tl.sum(acc, axis=1) / R
    acc = tl.zeros((OBLOCK, RBLOCK), FT)
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        x = tl.load(x_ptr + base[:, None] + r[None, :] * C, mask=mask, other=0)
        d = tl.where(mask, x - mean[:, None], 0.0)
        acc += d * d
    total = tl.sum(acc, axis=1) / divisor
    if STD:
        total = tl.sqrt(total)
    tl.store(out_ptr + o, total, mask=o_mask)


@jit
def _extreme_kernel(
    x_ptr,
    val_ptr,
    idx_ptr,
    n_out,
    R,
    C,
    LOWEST,
    IS_MAX: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Output o = (a, c): the max (or min) of x[a, r, c] over r < R and its first r.
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_out
    base = (o // C) * (R * C) + o % C
    best = tl.zeros((OBLOCK,), tl.int32)
    arg = tl.zeros((OBLOCK,), tl.int32)
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        x = tl.load(x_ptr + base[:, None] + r[None, :] * C, mask=mask, other=LOWEST)
        if IS_MAX:
            value, at = tl.max(x, axis=1, return_indices=True)
        else:
            value, at = tl.min(x, axis=1, return_indices=True)
        if start == 0:
            best, arg = value, at
        else:
            # Strictly better only, so the first of equal values keeps its index.
            take = value > best if IS_MAX else value < best
            best = tl.where(take, value, best)
            arg = tl.where(take, at + start, arg)
    tl.store(val_ptr + o, best, mask=o_mask)
    tl.store(idx_ptr + o, arg, mask=o_mask)


@jit
def elementwise_operand(ptr, value, i, mask, IS_TENSOR: tl.constexpr, CT: tl.constexpr):
    # Lanes i of a two-operand kernel's operand in CT: loaded (1 off the mask) when it is
    # a tensor, else the number ``value`` (a kernel argument) in every lane.
    if IS_TENSOR:
        return tl.load(ptr + i, mask=mask, other=1).to(CT)
    return tl.full(i.shape, value, CT)


@jit
def _place_kernel(src_ptr, dst_ptr, n, row, width, offset, BLOCK: tl.constexpr):
    # Rows of ``row`` source elements land ``width`` apart in dst, from ``offset`` (cat/stack).
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    dst = (i // row) * width + offset + i % row
    tl.store(dst_ptr + dst, tl.load(src_ptr + i, mask=mask), mask=mask)


@jit
def _arange_kernel(out_ptr, n, start, step, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, start + i * step, mask=i < n)


def check_elements(n: int, what: str = "an operation") -> None:
    """Refuse ``what`` on ``n`` elements past the tensor kernels' 32-bit element offsets."""
    if n > MAX_KERNEL_ELEMENTS:
        raise TensorError(
            f"{what} on {n} elements: the tensor kernels use 32-bit element offsets, so they "
            f"work on at most {MAX_KERNEL_ELEMENTS} elements of one tensor; split it into "
            "smaller tensors"
        )


def elementwise_grid(n: int, what: str = "an operation") -> tuple[int]:
    """The grid of a kernel that maps ``n`` elements ``BLOCK`` at a time."""
    check_elements(n, what)
    return (max(1, -(-n // BLOCK)),)


def float_type(dtype: Any) -> Any:
    """The type a kernel computes ``dtype`` values' math in: float64 for float64, else
    float32 (torch's accumulate type for float16 and bfloat16)."""
    return tl.float64 if dtype.name == "float64" else tl.float32


def accumulator(dtype: Any) -> Any:
    """The type a sum or product into ``dtype`` accumulates in: ``float_type`` for a
    floating dtype, int64 for an 8-byte integer, else int32."""
    if dtype.is_floating_point:
        return float_type(dtype)
    return tl.int64 if dtype.itemsize == 8 else tl.int32


def reduction_blocks(lines: int, length: int) -> tuple[int, int]:
    """(lines per program, elements of a line per step) of a kernel reducing ``lines``
    lines of ``length``: a step of at most 1024 elements, and as many lines a program as
    make about :data:`BLOCK` elements, so that a reduction streams its data in programs
    as large as an elementwise kernel's and launch overhead stays small next to the
    memory time.  Long lines keep at least ``4096 // step`` lines a program, as before.
    A line is reduced by the same steps whatever the number of lines a program takes, so
    the values do not depend on it."""
    block = tl.next_power_of_2(max(1, min(length, 1024)))
    line = block * max(1, -(-length // block))  # a line's lanes, over all its steps
    fit = 1 << (max(1, BLOCK // line).bit_length() - 1)  # lines in BLOCK, a power of two
    return tl.next_power_of_2(max(1, min(lines, max(fit, 4096 // block)))), block


# ----------------------------------------------------------------------------- built-ins


def launch_copy(src: DeviceTensor, dst: DeviceTensor) -> Any:
    """``dst[...] = src`` converted to ``dst``'s dtype."""
    return builtins.launch_copy(src, dst, block=BLOCK)


def launch_fill(out: DeviceTensor, value: int | float) -> Any:
    return builtins.launch_fill(out, value, block=BLOCK)


def launch_elementwise(op: str, x: DeviceTensor, y: DeviceTensor, out: DeviceTensor) -> Any:
    """``out = x op y`` for ``op`` in add, sub, mul, div."""
    return builtins.launch_elementwise(op, x, y, out, block=BLOCK)


def launch_scalar(op: str, x: DeviceTensor, value: int | float, out: DeviceTensor) -> Any:
    """``out = x op value``."""
    return builtins.launch_scalar(op, x, value, out, block=BLOCK)


# ----------------------------------------------------------------------------- our kernels


def launch_sum(
    x: DeviceTensor,
    out: DeviceTensor,
    n_out: int,
    length: int,
    cols: int,
    *,
    mean: bool,
    norm: int = 0,
) -> None:
    """Sum (or average) ``x`` viewed as (rows, ``length``, ``cols``) over its middle axis;
    ``norm`` 1 or 2: its 1- or 2-norm instead.

    ``n_out`` is rows x cols; the accumulator is :func:`accumulator` of ``out``'s
    dtype (torch accumulates float16/bfloat16 in float32, float64 in float64).
    """
    oblock, rblock = reduction_blocks(n_out, length)
    acc = accumulator(out.dtype)
    _sum_kernel[(-(-n_out // oblock),)](
        x,
        out,
        n_out,
        length,
        cols,
        ACC=acc,
        MEAN=mean,
        NORM=norm,
        OBLOCK=oblock,
        RBLOCK=rblock,
    )


def launch_var(
    x: DeviceTensor,
    out: DeviceTensor,
    n_out: int,
    length: int,
    cols: int,
    *,
    correction: float,
    std: bool,
) -> None:
    """Variance (or standard deviation) of ``x`` viewed as (rows, ``length``, ``cols``) over
    its middle axis, divided by ``length - correction`` (NaN or inf at or below 0, as
    torch), in two passes over the data."""
    oblock, rblock = reduction_blocks(n_out, length)
    _var_kernel[(-(-n_out // oblock),)](
        x,
        out,
        n_out,
        length,
        cols,
        typed_scalar(float(max(length - correction, 0)), x.dtype),
        STD=std,
        FT=float_type(x.dtype),
        OBLOCK=oblock,
        RBLOCK=rblock,
    )


def launch_extreme(
    x: DeviceTensor,
    values: DeviceTensor,
    indices: DeviceTensor,
    n_out: int,
    length: int,
    cols: int,
    *,
    lowest: int | float,
    is_max: bool,
) -> None:
    """Max (or min) of ``x`` viewed as (rows, ``length``, ``cols``) over its middle axis.

    ``values`` gets the extremes and ``indices`` the first position of each
    along the axis; ``lowest`` fills masked-off lanes (-inf for a max, ...).
    """
    oblock, rblock = reduction_blocks(n_out, length)
    _extreme_kernel[(-(-n_out // oblock),)](
        x,
        values,
        indices,
        n_out,
        length,
        cols,
        lowest,
        IS_MAX=is_max,
        OBLOCK=oblock,
        RBLOCK=rblock,
    )


def launch_combine(op: str, x: DeviceTensor, y: DeviceTensor, out: DeviceTensor) -> Any:
    """``out = op(x, y)`` elementwise for ``op`` in max, min (same dtype)."""
    return builtins.launch_reduce(op, x, y, out, block=BLOCK)


def launch_place(
    src: DeviceTensor, dst: DeviceTensor, n: int, row: int, width: int, offset: int
) -> None:
    """Copy ``n`` elements of ``src`` into ``dst`` in rows of ``row``, ``width`` apart."""
    _place_kernel[elementwise_grid(n)](src, dst, n, row, width, offset, BLOCK=BLOCK)


def launch_arange(out: DeviceTensor, n: int, start: int | float, step: int | float) -> None:
    """``out[i] = start + i * step`` for ``i < n``."""
    start, step = typed_scalar(start, out.dtype), typed_scalar(step, out.dtype)
    _arange_kernel[elementwise_grid(n)](out, n, start, step, BLOCK=BLOCK)
