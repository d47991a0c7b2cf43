"""The device kernels behind comparisons, logic, ``where``, ``any``/``all`` and masks.

They are elementwise (or reduction) kernels like the arithmetic ones
(:mod:`~kernbench.torch.device_kernels`), launched with the same block size,
so a comparison costs what an elementwise operation of its size costs: it
reads its operands and writes one byte per element.  A comparison or a
logical operation writes a bool; a bitwise one (``band``, ``bor``, ``bxor``,
``invert``) writes its operands' dtype.  Indexing by a boolean mask gathers
(or scatters) whole rows by a tensor of row numbers.
"""

from __future__ import annotations

import kernbench.kernels.language as tl
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid, reduction_blocks

__all__ = [
    "BINARY_TESTS",
    "UNARY_TESTS",
    "elementwise_test",
    "launch_any_all",
    "launch_test",
    "launch_test_scalar",
    "launch_unary_test",
    "launch_where",
]

BINARY_TESTS = ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "band", "bor", "bxor")
UNARY_TESTS = ("not", "isnan", "isinf", "isfinite", "invert")


@jit
def elementwise_test(x, y, OP: tl.constexpr):
    """``x OP y`` for OP in BINARY_TESTS, as the test kernels compute it."""
    if OP == "eq":
        return x == y
    if OP == "ne":
        return x != y
    if OP == "lt":
        return x < y
    if OP == "le":
        return x <= y
    if OP == "gt":
        return x > y
    if OP == "ge":
        return x >= y
    if OP == "band":
        return x & y
    if OP == "bor":
        return x | y
    if OP == "bxor":
        return x ^ y
    a = x != 0
    b = y != 0
    if OP == "and":
        return a & b
    if OP == "or":
        return a | b
    return a ^ b


@jit
def _test_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, elementwise_test(x, y, OP), mask=mask)


@jit(do_not_specialize=["value"])
def _test_scalar_kernel(x_ptr, out_ptr, n, value, OP: tl.constexpr, BLOCK: tl.constexpr):
    # The scalar is converted to the tensor's dtype first, as torch compares in it.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, elementwise_test(x, value.to(x.dtype), OP), mask=mask)


@jit
def _unary_test_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    if OP == "not":
        y = x == 0
    elif OP == "isnan":
        y = x != x
    elif OP == "isinf":
        y = tl.abs(x) == float("inf")
    elif OP == "isfinite":
        y = tl.abs(x) < float("inf")
    else:
        y = ~x
    tl.store(out_ptr + offsets, y, mask=mask)


@jit(do_not_specialize=["x_value", "y_value"])
def _where_kernel(
    c_ptr,
    x_ptr,
    y_ptr,
    out_ptr,
    n,
    x_value,
    y_value,
    X_TENSOR: tl.constexpr,
    Y_TENSOR: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # A scalar operand is a kernel argument (no tensor is made for it).
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    c = tl.load(c_ptr + offsets, mask=mask, other=0)
    if X_TENSOR:
        x = tl.load(x_ptr + offsets, mask=mask)
    else:
        x = x_value
    if Y_TENSOR:
        y = tl.load(y_ptr + offsets, mask=mask)
    else:
        y = y_value
    tl.store(out_ptr + offsets, tl.where(c != 0, x, y), mask=mask)


@jit
def _any_all_kernel(
    x_ptr, out_ptr, n_out, R, C, ALL: tl.constexpr, OBLOCK: tl.constexpr, RBLOCK: tl.constexpr
):
    # Output o = (a, c): whether any (or all) of x[a, r, c], r < R, is nonzero; masked-off
    # lanes count as zero for any and as nonzero for all, so an empty line gives False / True.
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_out
    base = (o // C) * (R * C) + o % C
    acc = tl.zeros((OBLOCK, RBLOCK), tl.int32) + ALL
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        x = tl.load(x_ptr + base[:, None] + r[None, :] * C, mask=mask, other=ALL)
        hit = (x != 0).to(tl.int32)
        if ALL:
            acc = tl.minimum(acc, hit)
        else:
            acc = tl.maximum(acc, hit)
    if ALL:
        total = tl.min(acc, axis=1)
    else:
        total = tl.max(acc, axis=1)
    tl.store(out_ptr + o, total != 0, mask=o_mask)


def launch_test(op: str, x: DeviceTensor, y: DeviceTensor, out: DeviceTensor) -> None:
    """``out = x op y`` over equal-sized tensors (``x`` and ``y`` of one dtype)."""
    n = out.numel
    _test_kernel[elementwise_grid(n, op)](x, y, out, n, OP=op, BLOCK=BLOCK)


def launch_test_scalar(op: str, x: DeviceTensor, value: int | float, out: DeviceTensor) -> None:
    """``out = x op value``, ``value`` taken in ``x``'s dtype."""
    n = out.numel
    value = typed_scalar(value, x.dtype)
    _test_scalar_kernel[elementwise_grid(n, op)](x, out, n, value, OP=op, BLOCK=BLOCK)


def launch_unary_test(op: str, x: DeviceTensor, out: DeviceTensor) -> None:
    """``out = op(x)`` for ``op`` in not, isnan, isinf, isfinite, invert."""
    n = out.numel
    _unary_test_kernel[elementwise_grid(n, op)](x, out, n, OP=op, BLOCK=BLOCK)


def launch_where(
    cond: DeviceTensor,
    x: DeviceTensor | int | float,
    y: DeviceTensor | int | float,
    out: DeviceTensor,
) -> None:
    """``out = x where cond else y``; ``x`` and ``y`` are tensors or scalars."""
    n = out.numel
    x_tensor, y_tensor = isinstance(x, DeviceTensor), isinstance(y, DeviceTensor)
    _where_kernel[elementwise_grid(n, "where")](
        cond,
        x if x_tensor else out,
        y if y_tensor else out,
        out,
        n,
        0 if x_tensor else typed_scalar(x, out.dtype),
        0 if y_tensor else typed_scalar(y, out.dtype),
        X_TENSOR=x_tensor,
        Y_TENSOR=y_tensor,
        BLOCK=BLOCK,
    )


def launch_any_all(
    x: DeviceTensor, out: DeviceTensor, n_out: int, length: int, cols: int, *, is_all: bool
) -> None:
    """Whether any (or all) of ``x`` viewed as (rows, ``length``, ``cols``) is nonzero along
    its middle axis; ``n_out`` is rows x cols."""
    oblock, rblock = reduction_blocks(n_out, length)
    _any_all_kernel[(-(-n_out // oblock),)](
        x, out, n_out, length, cols, ALL=int(is_all), OBLOCK=oblock, RBLOCK=rblock
    )
