"""Sorting of :class:`~kernbench.torch.Tensor`: ``sort``, ``argsort`` and ``topk``.

:class:`TensorSorting` is mixed into the tensor class.  Each runs one device kernel
over the lines of the tensor viewed as (rows, length, cols) around its dim, as the
reductions view it; nothing goes to the host.

* Dtypes of at most 4 bytes, lines of at most :data:`MAX_BITONIC`: a bitonic
  network (``tl.sort``, as Triton's) over each line padded to a power of two, of
  int64 keys that pack the value's order and its index (so ties keep their order:
  the sort is stable) -- ``log2(L) * (log2(L) + 1) / 2`` compare-exchange stages,
  then the values loaded again through the sorted indices.
* 8-byte dtypes (float64, int64, uint64), lines of at most :data:`MAX_BITONIC`: the
  same network twice, as a two-digit LSD radix sort.  Each value maps to a 64-bit
  order (its bits, the sign flipped; a negative float's bits inverted; every bit
  inverted when descending); a first sort orders the line by the low 32 bits (and
  index), a second by the high 32 bits (and place after the first), which is the
  64-bit order with ties in index order.  The first order is kept in a scratch line
  of int64 between the two.  About twice a 4-byte sort.
* Lines past :data:`MAX_BITONIC` are refused.

Both are stable, which torch's ``stable=False`` also allows; NaN sorts after every
number (first when descending) and -0.0 ties 0.0, as torch's.  ``topk`` keeps the
first ``k`` places (in order even with ``sorted=False``).
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import TYPE_CHECKING, Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import check_elements
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.shapes import dim_index, flag_argument, int_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "MAX_BITONIC",
    "SortResult",
    "TensorSorting",
    "TopkResult",
    "launch_bitonic_sort",
    "launch_wide_bitonic_sort",
    "ranked",
]

SortResult = namedtuple("sort", ["values", "indices"])  # torch.return_types.sort
TopkResult = namedtuple("topk", ["values", "indices"])  # torch.return_types.topk

# Lanes of a bitonic sort program (lines x padded line), and the longest line it sorts.
_LANES = 1 << 14
MAX_BITONIC = 1 << 20
INDEX_BITS = 21  # an index below MAX_BITONIC fits; keys stay within +-2**54
INDEX_SPAN = 1 << INDEX_BITS
PADDING = 1 << 62  # after every key
SIGN = -(1 << 63)  # the sign bit of an int64
WORD = (1 << 32) - 1  # the low 32 bits


@jit
def _bitonic_sort_kernel(
    x_ptr,
    val_ptr,
    idx_ptr,
    n_lines,
    L,
    C,
    K,
    DESCENDING: tl.constexpr,
    FLOAT: tl.constexpr,
    LB: tl.constexpr,
    N: tl.constexpr,
):
    # LB lines of x[a, :, c], each padded to N lanes, sorted by one tl.sort of int64 keys
    # (order key * 2**INDEX_BITS + index: ties keep their order, so the sort is stable);
    # the sorted keys' low bits are the indices, the values are loaded again through them.
    line = tl.program_id(0) * LB + tl.arange(0, LB)
    line_mask = line < n_lines
    base = (line // C) * (L * C) + line % C
    i = tl.arange(0, N)
    mask = line_mask[:, None] & (i < L)[None, :]
    x = tl.load(x_ptr + base[:, None] + i[None, :] * C, mask=mask, other=0)
    if FLOAT:
        u = x.to(tl.float32) + 0.0  # -0.0 ties 0.0, as torch compares them
        u = tl.where(u != u, float("nan"), u)  # one NaN, after +inf in bit order
        bits = u.to(tl.int32, bitcast=True)
        order = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(tl.int64)
    else:
        order = x.to(tl.int64)
    if DESCENDING:
        order = -order
    key = order * INDEX_SPAN + i[None, :]
    key = tl.where(mask, key, PADDING)
    ranked = tl.sort(key, dim=1)
    index = ranked & (INDEX_SPAN - 1)
    keep = line_mask[:, None] & (i < K)[None, :] & (i < L)[None, :]
    values = tl.load(x_ptr + base[:, None] + index * C, mask=keep, other=0)
    at = ((line // C) * (K * C) + line % C)[:, None] + i[None, :] * C
    tl.store(val_ptr + at, values, mask=keep)
    tl.store(idx_ptr + at, index, mask=keep)


@jit
def _order64(x, KIND: tl.constexpr, DESCENDING: tl.constexpr):
    # Each 8-byte value's 64-bit order as int64 bits: the sign bit flipped (a negative
    # float's bits inverted, -0.0 made 0.0, every NaN one NaN after +inf), all bits
    # inverted when descending.  KIND: 0 a signed int, 1 an unsigned int, 2 a float.
    if KIND == 2:
        u = x + 0.0  # -0.0 ties 0.0, as torch compares them
        u = tl.where(u != u, float("nan"), u)
        bits = u.to(tl.int64, bitcast=True)
        order = tl.where(bits < 0, ~bits, bits ^ SIGN)
    elif KIND == 1:
        order = x.to(tl.int64, bitcast=True)
    else:
        order = x ^ SIGN
    if DESCENDING:
        order = ~order
    return order


@jit
def _wide_bitonic_sort_kernel(
    x_ptr,
    val_ptr,
    idx_ptr,
    tmp_ptr,
    n_lines,
    L,
    C,
    K,
    DESCENDING: tl.constexpr,
    KIND: tl.constexpr,
    LB: tl.constexpr,
    N: tl.constexpr,
):
    # 8-byte values, two passes of the network of _bitonic_sort_kernel: by the low 32
    # bits of each value's 64-bit order (_order64), then (stably) by the high 32 bits.
    line = tl.program_id(0) * LB + tl.arange(0, LB)
    line_mask = line < n_lines
    base = (line // C) * (L * C) + line % C
    i = tl.arange(0, N)
    mask = line_mask[:, None] & (i < L)[None, :]
    x = tl.load(x_ptr + base[:, None] + i[None, :] * C, mask=mask, other=0)
    low = _order64(x, KIND, DESCENDING) & WORD
    first = tl.sort(tl.where(mask, low * INDEX_SPAN + i[None, :], PADDING), dim=1)
    by_low = first & (INDEX_SPAN - 1)
    scratch = line[:, None] * L + i[None, :]
    tl.store(tmp_ptr + scratch, by_low, mask=mask)
    moved = tl.load(x_ptr + base[:, None] + by_low * C, mask=mask, other=0)
    high = (_order64(moved, KIND, DESCENDING) >> 32) & WORD
    second = tl.sort(tl.where(mask, high * INDEX_SPAN + i[None, :], PADDING), dim=1)
    place = second & (INDEX_SPAN - 1)
    keep = line_mask[:, None] & (i < K)[None, :] & (i < L)[None, :]
    index = tl.load(tmp_ptr + line[:, None] * L + place, mask=keep, other=0)
    values = tl.load(x_ptr + base[:, None] + index * C, mask=keep, other=0)
    at = ((line // C) * (K * C) + line % C)[:, None] + i[None, :] * C
    tl.store(val_ptr + at, values, mask=keep)
    tl.store(idx_ptr + at, index, mask=keep)


def launch_wide_bitonic_sort(
    x: DeviceTensor,
    values: DeviceTensor,
    indices: DeviceTensor,
    scratch: DeviceTensor,
    lines: tuple[int, int, int],
    k: int,
    *,
    descending: bool,
) -> None:
    """As :func:`launch_bitonic_sort`, for 8-byte dtypes: two passes of the network
    (low then high 32 bits of each value's order); ``scratch`` holds ``lines[0] *
    lines[1]`` int64 (the first pass's order)."""
    n_lines, length, cols = lines
    check_elements(n_lines * length, "a sort")
    n = tl.next_power_of_2(max(1, length))
    lb = tl.next_power_of_2(max(1, min(n_lines, _LANES // n)))
    dtype = x.dtype
    kind = 2 if dtype.is_floating_point else (1 if dtype.name.startswith("uint") else 0)
    _wide_bitonic_sort_kernel[(-(-n_lines // lb),)](
        x,
        values,
        indices,
        scratch,
        n_lines,
        length,
        cols,
        k,
        DESCENDING=descending,
        KIND=kind,
        LB=lb,
        N=n,
    )


def launch_bitonic_sort(
    x: DeviceTensor,
    values: DeviceTensor,
    indices: DeviceTensor,
    lines: tuple[int, int, int],
    k: int,
    *,
    descending: bool,
) -> None:
    """The first ``k`` of each line of ``x`` (viewed as ``lines`` = (rows x cols, length,
    cols)) in order, into ``values`` and ``indices`` viewed as (rows, ``k``, cols), by a
    bitonic network (``tl.sort``) over each line padded to a power of two; for dtypes of
    at most 4 bytes and lines of at most :data:`MAX_BITONIC` elements."""
    n_lines, length, cols = lines
    check_elements(n_lines * length, "a sort")
    n = tl.next_power_of_2(max(1, length))
    lb = tl.next_power_of_2(max(1, min(n_lines, _LANES // n)))
    _bitonic_sort_kernel[(-(-n_lines // lb),)](
        x,
        values,
        indices,
        n_lines,
        length,
        cols,
        k,
        DESCENDING=descending,
        FLOAT=x.dtype.is_floating_point,
        LB=lb,
        N=n,
    )


class TensorSorting:
    """``sort``, ``argsort`` and ``topk`` along a dim (a bitonic network, twice for 8 bytes)."""

    __slots__ = ()

    def sort(
        self: Tensor, dim: Any = -1, descending: bool = False, stable: bool = False
    ) -> SortResult:
        """(values, indices) sorted along ``dim`` (stable whatever ``stable`` says, which
        torch allows), as ``torch.return_types.sort``."""
        flag_argument(stable, "sort", "stable")
        descending = flag_argument(descending, "sort", "descending")
        d = dim_index(dim, self.ndim)
        length = self.shape[d] if self.ndim else 1
        values, indices = ranked(self, "sort", d, length, descending)
        return SortResult(values, indices)

    def argsort(self: Tensor, dim: Any = -1, descending: bool = False, stable: bool = False):
        """The indices that sort ``self`` along ``dim`` (int64), as :meth:`sort` gives them."""
        values, indices = self.sort(dim, descending, stable)
        values.free()
        return indices

    def topk(
        self: Tensor, k: Any, dim: Any = -1, largest: bool = True, sorted: bool = True
    ) -> TopkResult:
        """The ``k`` largest (smallest) along ``dim`` and their indices, largest first
        (smallest first), as ``torch.return_types.topk``; always in order."""
        largest = flag_argument(largest, "topk", "largest")
        flag_argument(sorted, "topk", "sorted")
        d = dim_index(dim, self.ndim)
        length = self.shape[d] if self.ndim else 1
        k = int_argument(k, "topk", "k")
        if not 0 <= k <= length:
            raise TensorError(
                f"topk of {self.storage_device_tensor.name!r}: selected index k out of range "
                f"(k={k!r}; dim {d} has {length} elements, so k is in [0, {length}])"
            )
        values, indices = ranked(self, "topk", d, k, largest)
        return TopkResult(values, indices)


def ranked(t: Tensor, what: str, d: int, k: int, descending: bool) -> tuple[Any, Any]:
    """The first ``k`` of each line of ``t`` along dim ``d`` in order (descending or not),
    as (values, int64 indices) of ``t``'s shape with ``k`` along ``d``, by the bitonic
    network (twice for 8-byte dtypes); ``what`` names the call in errors."""
    shape = tuple(t.shape)
    out_shape = shape[:d] + (k,) + shape[d + 1 :] if shape else ()
    values = t.new_empty(out_shape)
    indices = t.new_empty(out_shape, dtype=DTYPE_OBJECTS["int64"])
    rows = math.prod(shape[:d]) if shape else 1
    length = shape[d] if shape else 1
    cols = math.prod(shape[d + 1 :]) if shape else 1
    if values.numel():
        if length > MAX_BITONIC:
            raise TensorError(
                f"{what} of {t.storage_device_tensor.name!r}: a line of {length} "
                f"elements; lines of at most {MAX_BITONIC} sort here (a bitonic network "
                "in one program a line); sort shorter lines"
            )
        x = t.dense()
        lines = (rows * cols, length, cols)
        args = (x.device_tensor, values.device_tensor, indices.device_tensor)
        if t.dtype.itemsize <= 4:
            launch_bitonic_sort(*args, lines, k, descending=descending)
        else:
            scratch = t.new_empty((rows * cols, length), dtype=DTYPE_OBJECTS["int64"])
            try:
                launch_wide_bitonic_sort(
                    *args, scratch.device_tensor, lines, k, descending=descending
                )
            finally:
                scratch.free()
        if x is not t:
            x.free()
    return values, indices
