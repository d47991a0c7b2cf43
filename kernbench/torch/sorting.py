"""Sorting of :class:`~kernbench.torch.Tensor`: ``sort``, ``argsort`` and ``topk``.

:class:`TensorSorting` is mixed into the tensor class.  They run one device kernel,
a rank-counting sort: each element of a line (the tensor viewed as (rows, length,
cols) around its dim, as the reductions view it) counts the elements that go before
it -- smaller (larger when descending), or equal and earlier -- and that count is
where it is stored, with its index.  The order is always stable, which torch's
``stable=False`` also allows; NaN sorts after every number (first when descending),
as torch's.  ``topk`` keeps the ranks below ``k`` (its values sorted even with
``sorted=False``).  A line of length L costs L * L comparisons (a compare, a tie
test and a count a pair), more than a bitonic network's L log^2 L, so long lines are
charged more than torch's sort would take: the work a rank count does, not a tuned
library's.
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
from kernbench.torch.shapes import dim_index, flag_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["SortResult", "TensorSorting", "TopkResult", "launch_rank_sort"]

SortResult = namedtuple("sort", ["values", "indices"])  # torch.return_types.sort
TopkResult = namedtuple("topk", ["values", "indices"])  # torch.return_types.topk

# Compare lanes a step of the rank kernel takes (lines x elements x others).
_PAIRS = 1 << 15


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
    """``sort``, ``argsort`` and ``topk`` along a dim (a rank-counting device kernel)."""

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
        values, indices = self._ranked("sort", d, length, descending)
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
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= length:
            raise TensorError(
                f"topk of {self.storage_device_tensor.name!r}: selected index k out of range "
                f"(k={k!r}; dim {d} has {length} elements, so k is in [0, {length}])"
            )
        values, indices = self._ranked("topk", d, k, largest)
        return TopkResult(values, indices)

    def _ranked(self: Tensor, what: str, d: int, k: int, descending: bool) -> tuple[Any, Any]:
        shape = tuple(self.shape)
        out_shape = shape[:d] + (k,) + shape[d + 1 :] if shape else ()
        values = self.new_empty(out_shape)
        indices = self.new_empty(out_shape, dtype=DTYPE_OBJECTS["int64"])
        rows = math.prod(shape[:d]) if shape else 1
        length = shape[d] if shape else 1
        cols = math.prod(shape[d + 1 :]) if shape else 1
        if values.numel():
            x = self.dense()
            launch_rank_sort(
                x.device_tensor,
                values.device_tensor,
                indices.device_tensor,
                (rows * cols, length, cols),
                k,
                descending=descending,
            )
            if x is not self:
                x.free()
        return values, indices
