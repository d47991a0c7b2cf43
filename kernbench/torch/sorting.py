"""Sorting of :class:`~kernbench.torch.Tensor`: ``sort``, ``argsort`` and ``topk``.

:class:`TensorSorting` is mixed into the tensor class.  Each runs one device kernel
over the lines of the tensor viewed as (rows, length, cols) around its dim, as the
reductions view it; nothing goes to the host.

* Dtypes of at most 4 bytes, lines of at most :data:`MAX_BITONIC`: a bitonic
  network (``tl.sort``, as Triton's) over each line padded to a power of two, of
  int64 keys that pack the value's order and its index (so ties keep their order:
  the sort is stable) -- ``log2(L) * (log2(L) + 1) / 2`` compare-exchange stages,
  then the values loaded again through the sorted indices.
* Otherwise (float64, int64, uint64, longer lines): a rank count.  Each element
  counts the elements of its line that go before it (smaller, larger when
  descending, or equal and earlier) and is stored at that place with its index:
  L * L compares a line of L.  The cost model charges integer compares as index
  math (nothing), so an int64 sort costs its memory traffic; float64 compares are
  vector FLOPs.

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
    "MAX_RANK_LINE",
    "SortResult",
    "TensorSorting",
    "TopkResult",
    "launch_bitonic_sort",
    "launch_rank_sort",
    "ranked",
]

SortResult = namedtuple("sort", ["values", "indices"])  # torch.return_types.sort
TopkResult = namedtuple("topk", ["values", "indices"])  # torch.return_types.topk

# Compare lanes a step of the rank kernel takes (lines x elements x others).
_PAIRS = 1 << 15
# Lanes of a bitonic sort program (lines x padded line), and the longest line it sorts.
_LANES = 1 << 14
MAX_BITONIC = 1 << 20
# The longest line the rank count takes: its L * L compares run on the host interpreter
# too, about a minute for a line of 2**16.
MAX_RANK_LINE = 1 << 16
INDEX_BITS = 21  # an index below MAX_BITONIC fits; keys stay within +-2**54
INDEX_SPAN = 1 << INDEX_BITS
PADDING = 1 << 62  # after every key


@jit
def _rank_sort_kernel(
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
    BI: tl.constexpr,
    BJ: tl.constexpr,
):
    # Lines (a, c) of x[a, :, c]; element i of a line goes to place rank(i) < K of its
    # output line, rank(i) = #{j: x[j] before x[i]} + #{j < i: x[j] ties x[i]}.
    line = tl.program_id(0) * LB + tl.arange(0, LB)
    line_mask = line < n_lines
    a = line // C
    c = line % C
    i = tl.program_id(1) * BI + tl.arange(0, BI)
    i_mask = line_mask[:, None] & (i < L)[None, :]
    xi = tl.load(x_ptr + (a * (L * C) + c)[:, None] + i[None, :] * C, mask=i_mask, other=0)
    mine = xi[:, :, None]
    rank = tl.zeros((LB, BI), tl.int32)
    for start in range(0, L, BJ):
        j = start + tl.arange(0, BJ)
        j_mask = line_mask[:, None] & (j < L)[None, :]
        xj = tl.load(x_ptr + (a * (L * C) + c)[:, None] + j[None, :] * C, mask=j_mask, other=0)
        other = xj[:, None, :]
        if DESCENDING:
            before = other > mine
        else:
            before = other < mine
        ties = other == mine
        if FLOAT:  # NaN is after every number (before it, descending); NaNs tie
            nan_other = other != other
            nan_mine = mine != mine
            if DESCENDING:
                before = before | (nan_other & ~nan_mine)
            else:
                before = before | (nan_mine & ~nan_other)
            ties = ties | (nan_other & nan_mine)
        earlier = (j[None, :] < i[:, None])[None, :, :]
        hit = (before | (ties & earlier)) & (j < L)[None, None, :]
        rank += tl.sum(hit.to(tl.int32), axis=2)
    keep = i_mask & (rank < K)
    at = (a * (K * C) + c)[:, None] + rank * C
    tl.store(val_ptr + at, xi, mask=keep)
    tl.store(idx_ptr + at, (i[None, :] + rank * 0).to(tl.int64), mask=keep)


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


def launch_bitonic_sort(
    x: DeviceTensor,
    values: DeviceTensor,
    indices: DeviceTensor,
    lines: tuple[int, int, int],
    k: int,
    *,
    descending: bool,
) -> None:
    """As :func:`launch_rank_sort`, by a bitonic network (``tl.sort``) over each line
    padded to a power of two; for dtypes of at most 4 bytes and lines of at most
    :data:`MAX_BITONIC` elements."""
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


def launch_rank_sort(
    x: DeviceTensor,
    values: DeviceTensor,
    indices: DeviceTensor,
    lines: tuple[int, int, int],
    k: int,
    *,
    descending: bool,
) -> None:
    """The first ``k`` of each line of ``x`` (viewed as ``lines`` = (rows x cols, length,
    cols)) in order, into ``values`` and ``indices`` viewed as (rows, ``k``, cols)."""
    n_lines, length, cols = lines
    check_elements(n_lines * length, "a sort")
    block = tl.next_power_of_2(max(1, min(length, 128)))
    lb = tl.next_power_of_2(max(1, min(n_lines, _PAIRS // (block * block))))
    grid = (-(-n_lines // lb), -(-length // block))
    _rank_sort_kernel[grid](
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
        BI=block,
        BJ=block,
    )


class TensorSorting:
    """``sort``, ``argsort`` and ``topk`` along a dim (a bitonic or rank-counting kernel)."""

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
    network or the rank count; ``what`` names the call in errors."""
    shape = tuple(t.shape)
    out_shape = shape[:d] + (k,) + shape[d + 1 :] if shape else ()
    values = t.new_empty(out_shape)
    indices = t.new_empty(out_shape, dtype=DTYPE_OBJECTS["int64"])
    rows = math.prod(shape[:d]) if shape else 1
    length = shape[d] if shape else 1
    cols = math.prod(shape[d + 1 :]) if shape else 1
    if values.numel():
        x = t.dense()
        bitonic = t.dtype.itemsize <= 4 and length <= MAX_BITONIC
        if not bitonic and length > MAX_RANK_LINE:
            raise TensorError(
                f"{what} of {t.storage_device_tensor.name!r}: a line of {length} "
                f"{t.dtype!r} elements; 8-byte dtypes (and lines past {MAX_BITONIC}) "
                f"sort by a rank count of L * L compares, for lines of at most "
                f"{MAX_RANK_LINE} here; convert to a 4-byte dtype (float32, int32) when "
                "the values fit, or sort shorter lines"
            )
        launch = launch_bitonic_sort if bitonic else launch_rank_sort
        launch(
            x.device_tensor,
            values.device_tensor,
            indices.device_tensor,
            (rows * cols, length, cols),
            k,
            descending=descending,
        )
        if x is not t:
            x.free()
    return values, indices
