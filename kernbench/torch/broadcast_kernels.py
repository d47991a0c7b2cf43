"""The elementwise kernel that reads its operands in place, through their strides.

torch's elementwise kernels (TensorIterator) read a broadcast operand through
zero strides and a transposed or sliced one through its own strides: nothing
is copied first.  This kernel does the same for arithmetic, ``maximum`` /
``minimum``, comparisons and logic, and ``where`` / ``masked_fill``.

The iteration space (the result's shape, with the dims every operand walks
alike merged by :func:`~kernbench.torch.views.coalesce`) is cut into tiles of
``TR`` rows (all dims but the last, flattened) by ``TC`` columns (the last
dim), about :data:`~kernbench.torch.device_kernels.BLOCK` elements a tile.
Each operand is loaded as the block it has in the tile: ``(TR, TC)`` when it
varies along both, ``(1, TC)`` when it is broadcast along the rows (a bias),
``(TR, 1)`` along the columns, ``(1, 1)`` for one element; the operation
broadcasts the blocks as NumPy does.  So a broadcast operand of C elements is
read once a tile, not once an output element, and its traffic is what the
kernel reads.  The values are those of the same operation on the operands
copied out to the full shape: each output element combines the same elements
of the same dtypes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import kernbench.kernels.language as tl
from kernbench.kernels.builtins import arith, combine, typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, check_elements
from kernbench.torch.logic_kernels import elementwise_test
from kernbench.torch.views import coalesce

__all__ = ["KINDS", "StridedOperand", "launch_broadcast", "tile_shape"]

#: What the kernel computes: ``arith`` (add, sub, mul, div), ``combine`` (max, min),
#: ``test`` (the comparisons, logical and bitwise ops) of two operands, and ``where``
#: (a condition, then the value where it holds and the value where it does not).
KINDS = ("arith", "combine", "test", "where")

# Weight of one program, in element lanes, when choosing a tile: its launch overhead and
# access latency are worth about this much streaming.
_PROGRAM_LANES = BLOCK // 4


@dataclass(frozen=True)
class StridedOperand:
    """An operand as the kernel reads it: its storage, first element and strides (one a
    dim of the result's shape; 0 along a broadcast dim)."""

    storage: DeviceTensor
    offset: int
    strides: tuple[int, ...]


@jit
def _row_offsets(r, offset, ROWS: tl.constexpr, STRIDES: tl.constexpr):
    # Storage offsets of the flat row indices r, unravelled row-major over ROWS.
    rest = r
    out = offset + r * 0
    for k in range(len(ROWS) - 1, -1, -1):
        if STRIDES[k] != 0:
            out += (rest % ROWS[k]) * STRIDES[k]
        rest = rest // ROWS[k]
    return out


@jit
def _load(ptr, offset, r, c, r_mask, c_mask, other, ROWS, RS, CS):
    # The operand's block in this tile: a dim it is broadcast along is loaded once.
    by_rows = any(s != 0 for s in RS)
    if by_rows and CS != 0:
        rows = _row_offsets(r, offset, ROWS, RS)
        offsets = rows[:, None] + (c * CS)[None, :]
        mask = r_mask[:, None] & c_mask[None, :]
    elif by_rows:
        offsets = _row_offsets(r, offset, ROWS, RS)[:, None]
        mask = r_mask[:, None]
    elif CS != 0:
        offsets = offset + (c * CS)[None, :]
        mask = c_mask[None, :]
    else:
        offsets = offset + tl.zeros((1, 1), tl.int32)
        mask = None
    if other is None:
        return tl.load(ptr + offsets, mask=mask)
    return tl.load(ptr + offsets, mask=mask, other=other)


@jit(do_not_specialize=["b_value", "c_value"])
def _broadcast_kernel(
    out_ptr,
    a_ptr,
    b_ptr,
    c_ptr,
    rows,
    cols,
    a_offset,
    b_offset,
    c_offset,
    b_value,
    c_value,
    KIND: tl.constexpr,
    OP: tl.constexpr,
    ROWS: tl.constexpr,
    A_RS: tl.constexpr,
    A_CS: tl.constexpr,
    B_RS: tl.constexpr,
    B_CS: tl.constexpr,
    C_RS: tl.constexpr,
    C_CS: tl.constexpr,
    B_TENSOR: tl.constexpr,
    C_TENSOR: tl.constexpr,
    COL_TILES: tl.constexpr,
    TR: tl.constexpr,
    TC: tl.constexpr,
):
    # Tile (pid // COL_TILES, pid % COL_TILES) of the (rows, cols) result; out is dense.
    pid = tl.program_id(0)
    r = (pid // COL_TILES) * TR + tl.arange(0, TR)
    c = (pid % COL_TILES) * TC + tl.arange(0, TC)
    r_mask = r < rows
    c_mask = c < cols
    a_other = 0 if KIND == "where" else None
    a = _load(a_ptr, a_offset, r, c, r_mask, c_mask, a_other, ROWS, A_RS, A_CS)
    if B_TENSOR:
        b_other = 1 if KIND == "arith" else None  # 1 keeps masked-off div lanes quiet
        b = _load(b_ptr, b_offset, r, c, r_mask, c_mask, b_other, ROWS, B_RS, B_CS)
    else:
        b = b_value
    if KIND == "arith":
        y = arith(a, b, OP)
    elif KIND == "combine":
        y = combine(a, b, OP)
    elif KIND == "test":
        y = elementwise_test(a, b, OP)
    else:
        if C_TENSOR:
            v = _load(c_ptr, c_offset, r, c, r_mask, c_mask, None, ROWS, C_RS, C_CS)
        else:
            v = c_value
        y = tl.where(a != 0, b, v)
    out = r[:, None] * cols + c[None, :]
    tl.store(out_ptr + out, y, mask=r_mask[:, None] & c_mask[None, :])


def tile_shape(rows: int, cols: int, broadcast: Sequence[tuple[bool, bool]]) -> tuple[int, int]:
    """(TR, TC): the tile of a ``rows`` x ``cols`` result with the fewest lanes to pay for.

    ``broadcast`` says, per operand, whether it varies along the rows and along the
    columns.  A tile holds about BLOCK lanes; among the power-of-two widths, the one
    whose padded lanes, programs and re-read broadcast operands cost least is taken.
    """
    best = None
    width = 1
    while width <= min(BLOCK, tl.next_power_of_2(cols)):
        height = min(BLOCK // width, tl.next_power_of_2(rows))
        programs = -(-rows // height) * -(-cols // width)
        lanes = 0
        for by_rows, by_cols in broadcast:
            lanes += (height if by_rows else 1) * (width if by_cols else 1)
        score = programs * (_PROGRAM_LANES + lanes + height * width)  # the store, too
        if best is None or score < best[0]:
            best = (score, height, width)
        width *= 2
    return best[1], best[2]


def launch_broadcast(
    kind: str,
    op: str,
    out: DeviceTensor,
    shape: Sequence[int],
    operands: Sequence[StridedOperand | int | float],
) -> None:
    """``out = kind/op(operands)`` elementwise over ``shape``; ``out`` is dense (row-major)
    and every tensor operand is read in place through its strides.  ``where`` takes
    (condition, value, other); the last two may be numbers."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    n = math.prod(shape)
    check_elements(n, kind)
    tensors = [o for o in operands if isinstance(o, StridedOperand)]
    dims, sets = coalesce(tuple(shape), *(o.strides for o in tensors))
    rows, cols = math.prod(dims[:-1]), dims[-1]
    layouts = iter(sets)
    strided = []  # per operand slot: (storage, offset, row strides, col stride) or a number
    for o in operands:
        if isinstance(o, StridedOperand):
            strides = next(layouts)
            strided.append((o.storage, o.offset, strides[:-1], strides[-1]))
        else:
            strided.append(o)
    while len(strided) < 3:
        strided.append(0)
    tr, tc = tile_shape(
        rows,
        cols,
        [(any(s[2]), s[3] != 0) for s in strided if isinstance(s, tuple)],
    )
    col_tiles = -(-cols // tc)
    grid = (max(1, -(-rows // tr) * col_tiles),)
    args, meta = [], {}
    for slot, value in zip("abc", strided, strict=True):
        name = slot.upper()
        if isinstance(value, tuple):
            storage, offset, row_strides, col_stride = value
            args.append((storage, offset, None))
            meta[f"{name}_RS"], meta[f"{name}_CS"] = row_strides, col_stride
        else:
            args.append((out, 0, value))
            meta[f"{name}_RS"], meta[f"{name}_CS"] = (0,) * (len(dims) - 1), 0
    (a, a_off, _), (b, b_off, b_value), (c, c_off, c_value) = args
    _broadcast_kernel[grid](
        out,
        a,
        b,
        c,
        rows,
        cols,
        a_off,
        b_off,
        c_off,
        0 if b_value is None else typed_scalar(b_value, out.dtype),
        0 if c_value is None else typed_scalar(c_value, out.dtype),
        KIND=kind,
        OP=op,
        ROWS=dims[:-1],
        B_TENSOR=b_value is None,
        C_TENSOR=c_value is None,
        COL_TILES=col_tiles,
        TR=tr,
        TC=tc,
        **meta,
    )
