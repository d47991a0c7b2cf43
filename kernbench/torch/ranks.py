"""The k-th smallest and the most frequent value of :class:`~kernbench.torch.Tensor`:
``kthvalue`` and ``mode``.

:class:`TensorRanks` is mixed into the tensor class.  Both sort the lines along their
dim ascending with :mod:`~kernbench.torch.sorting`'s kernels (stable, NaN last, as
torch's CPU ``kthvalue`` puts NaN above every number):

* ``kthvalue`` keeps the first ``k`` places of each line and copies out the last of
  them (a copy kernel): the value is torch's; of equal values the index is the one the
  stable order puts at place ``k`` (the value's (k - s)-th occurrence in the line, s
  the count of smaller elements), where torch's CPU quickselect may return another
  index of the same value.
* ``mode`` then runs one kernel that walks each sorted line once (a program takes
  :data:`~kernbench.torch.device_kernels.BLOCK` lines, one element of each a step),
  counting runs of equal values as torch's CPU kernel does after its ``std::sort``:
  the longest run wins, the first (smallest value) of equally long ones, and its index
  is the one sorted last in the run -- the largest index of that value, in the stable
  order here (torch's ``std::sort`` is not stable, so past 16 elements torch may return
  another index of the same value).  NaN differs from itself, so each NaN is a run of
  one, as torch's ``!=`` counts them.
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError, TensorIndexError
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS
from kernbench.torch.shapes import dim_index, flag_argument, int_argument
from kernbench.torch.sorting import ranked

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["KthvalueResult", "ModeResult", "TensorRanks", "launch_mode"]

KthvalueResult = namedtuple("kthvalue", ["values", "indices"])  # torch.return_types.kthvalue
ModeResult = namedtuple("mode", ["values", "indices"])  # torch.return_types.mode


@jit
def _mode_kernel(sorted_ptr, index_ptr, out_ptr, out_index_ptr, n_lines, L, C, BLOCK: tl.constexpr):
    # Line p = (a, c) of the sorted x[a, :, c]: the value of its longest run of equal
    # values (the first of equally long ones) and the index sorted last in that run.
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = p < n_lines
    base = (p // C) * (L * C) + p % C
    previous = tl.load(sorted_ptr + base, mask=mask, other=0)
    best_value = previous
    run = tl.zeros((BLOCK,), tl.int32) + 1
    best = tl.zeros((BLOCK,), tl.int32)
    best_at = best
    for i in range(1, L):
        value = tl.load(sorted_ptr + base + i * C, mask=mask, other=0)
        ends = value != previous  # the run ending at i - 1
        take = ends & (run > best)
        best = tl.where(take, run, best)
        best_at = tl.where(take, i - 1, best_at)
        best_value = tl.where(take, previous, best_value)
        run = tl.where(ends, 1, run + 1)
        previous = value
    take = run > best
    best_at = tl.where(take, L - 1, best_at)
    best_value = tl.where(take, previous, best_value)
    tl.store(out_ptr + p, best_value, mask=mask)
    tl.store(out_index_ptr + p, tl.load(index_ptr + base + best_at * C, mask=mask), mask=mask)


def launch_mode(
    sorted_values: DeviceTensor,
    sorted_indices: DeviceTensor,
    out: DeviceTensor,
    out_indices: DeviceTensor,
    lines: tuple[int, int, int],
) -> None:
    """The mode of each line sorted ascending (``lines`` = (rows x cols, length, cols) of
    ``sorted_values`` viewed as (rows, length, cols)) into ``out``, its index (from
    ``sorted_indices``) into ``out_indices``."""
    n_lines, length, cols = lines
    _mode_kernel[elementwise_grid(n_lines, "a mode")](
        sorted_values, sorted_indices, out, out_indices, n_lines, length, cols, BLOCK=BLOCK
    )


def _lines(shape: tuple[int, ...], d: int) -> tuple[int, int, int]:
    shape = shape or (1,)
    rows = 1
    for size in shape[:d]:
        rows *= size
    cols = 1
    for size in shape[d + 1 :]:
        cols *= size
    return rows * cols, shape[d], cols


class TensorRanks:
    """``kthvalue`` and ``mode`` along a dim: a sort, then a pick."""

    __slots__ = ()

    def kthvalue(self: Tensor, k: Any, dim: Any = -1, keepdim: bool = False) -> KthvalueResult:
        """The ``k``-th smallest value along ``dim`` (1-based; NaN above every number) and
        its index, as ``torch.return_types.kthvalue``."""
        keepdim = flag_argument(keepdim, "kthvalue", "keepdim")
        k = int_argument(k, "kthvalue", "k")
        d = dim_index(dim, self.ndim, "kthvalue")
        name = f"kthvalue() of {self.storage_device_tensor.name!r}"
        if self.dtype is BOOL:
            raise TensorError(f"{name}: \"kthvalue_cpu\" not implemented for 'Bool' (as torch)")
        length = self.shape[d] if self.ndim else 1
        if length == 0:
            raise TensorIndexError(
                f"{name}: kthvalue(): Expected reduction dim {d} to have non-zero size."
            )
        if not 1 <= k <= length:
            raise TensorError(
                f"{name}: kthvalue(): selected number k out of range for dimension {d} "
                f"(k={k}; the dim has {length} elements, so k is in [1, {length}])"
            )
        values, indices = ranked(self, "kthvalue", d, k, False)
        if self.ndim:
            picked = (
                values.narrow(d, k - 1, 1).clone(),
                indices.narrow(d, k - 1, 1).clone(),
            )
            values.free()
            indices.free()
            values, indices = (p if keepdim else p.squeeze(d) for p in picked)
        return KthvalueResult(values, indices)

    def mode(self: Tensor, dim: Any = -1, keepdim: bool = False) -> ModeResult:
        """The most frequent value along ``dim`` (the smallest of equally frequent ones)
        and an index of it, as ``torch.return_types.mode``."""
        keepdim = flag_argument(keepdim, "mode", "keepdim")
        d = dim_index(dim, self.ndim, "mode")
        shape = tuple(self.shape)
        if self.ndim and shape[d] == 0:
            raise TensorIndexError(
                f"mode() of {self.storage_device_tensor.name!r}: mode(): Expected reduction "
                f"dim {d} to have non-zero size."
            )
        out_shape = shape[:d] + ((1,) if keepdim else ()) + shape[d + 1 :] if shape else ()
        values = self.new_empty(out_shape)
        indices = self.new_empty(out_shape, dtype=DTYPE_OBJECTS["int64"])
        if values.numel():
            lines = _lines(shape, d)
            ordered, order = ranked(self, "mode", d, lines[1], False)
            launch_mode(
                ordered.device_tensor,
                order.device_tensor,
                values.device_tensor,
                indices.device_tensor,
                lines,
            )
            ordered.free()
            order.free()
        return ModeResult(values, indices)
