"""``torch.searchsorted`` and ``torch.bucketize``: a binary search kernel.

One elementwise kernel over the values, :data:`BLOCK` a program: each lane searches its
line of the sorted sequence (the whole sequence when it is 1-D, else the line with the
same leading indices as the value) in ``ceil(log2(L + 1))`` steps, one load of the
sequence a step (two with ``sorter``: the index, then the element), every lane every
step so that the cost does not depend on the values, and stores where the value goes
(int64, or int32 with ``out_int32``).
The comparisons are torch's ``cus_lower_bound``/``cus_upper_bound``: a step goes right
unless the element is ``>=`` the value (``>`` with ``right``), so a NaN value goes past
every element and NaNs at the end of the sequence are passed by every value.  A
sequence and values of different dtypes are both converted to their promoted dtype
first (a copy kernel), as torch does; a number as the values is a 0-d result.  The
sorter's indices are checked against the line host-side (``peek``), at no simulated
cost (torch reads their min and max).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid
from kernbench.torch.dtypes import (
    BOOL,
    DTYPE_OBJECTS,
    promote_types,
    python_scalar,
    scalar_result_dtype,
)
from kernbench.torch.functions import into_out
from kernbench.torch.shapes import flag_argument, tensor_argument
from kernbench.torch.views import same_device

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["bucketize", "launch_search", "searchsorted"]

_WHAT = "torch.searchsorted()"


@jit(do_not_specialize=["value"])
def _search_kernel(
    seq_ptr,
    sorter_ptr,
    values_ptr,
    out_ptr,
    n,
    V,
    L,
    value,
    LINES: tl.constexpr,
    SORTER: tl.constexpr,
    RIGHT: tl.constexpr,
    VALUE_TENSOR: tl.constexpr,
    STEPS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # out[p] = where values[p] goes in its line of the sequence (line p // V of (lines, L),
    # or the one line), read through sorter when there is one.
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = p < n
    if VALUE_TENSOR:
        v = tl.load(values_ptr + p, mask=mask, other=0)
    else:
        v = value
    if LINES:
        base = (p // V) * L
    else:
        base = p * 0
    lo = tl.zeros((BLOCK,), tl.int32)
    hi = lo + L
    for _ in range(STEPS):
        # every lane loads every step (a finished one at a valid place, its bounds kept),
        # so the work does not depend on the values
        active = lo < hi
        mid = lo + (hi - lo) // 2
        at = tl.minimum(mid, L - 1)
        if SORTER:
            at = tl.load(sorter_ptr + base + at, mask=mask, other=0)
        element = tl.load(seq_ptr + base + at, mask=mask, other=0)
        if RIGHT:
            ahead = element > v
        else:
            ahead = element >= v
        lo = tl.where(active & ~ahead, mid + 1, lo)
        hi = tl.where(active & ahead, mid, hi)
    tl.store(out_ptr + p, lo, mask=mask)


def launch_search(
    sequence: DeviceTensor,
    sorter: DeviceTensor | None,
    values: DeviceTensor | int | float,
    out: DeviceTensor,
    length: int,
    *,
    per_line: int | None,
    right: bool,
) -> None:
    """``out`` = where each of ``values`` (a tensor, or one number) goes in ``sequence``:
    lines of ``length`` (``per_line`` values a line, or None for one line), read in the
    order ``sorter`` gives when there is one."""
    n = out.numel
    is_tensor = isinstance(values, DeviceTensor)
    _search_kernel[elementwise_grid(n, "searchsorted")](
        sequence,
        sequence if sorter is None else sorter,
        values if is_tensor else sequence,
        out,
        n,
        per_line or 1,
        length,
        0 if is_tensor else typed_scalar(values, sequence.dtype),
        LINES=per_line is not None,
        SORTER=sorter is not None,
        RIGHT=right,
        VALUE_TENSOR=is_tensor,
        STEPS=length.bit_length(),
        BLOCK=BLOCK,
    )


def _side(right: Any, side: Any) -> bool:
    right = flag_argument(right, "searchsorted", "right")
    if side is None:
        return right
    if side not in ("left", "right"):
        raise TensorError(f"{_WHAT}: side can only be 'left' or 'right' but got {side!r}")
    if right and side != "right":
        raise TensorError(
            f"{_WHAT}: side and right can't be set to opposites, got side of {side} while "
            "right was True"
        )
    return side == "right"


def _check_shapes(sequence: Tensor, values: Any) -> None:
    if sequence.ndim == 0:
        raise TensorError(
            f"{_WHAT}: boundaries tensor should have positive dimension, but got 0 dimension"
        )
    if isinstance(values, int | float):
        if sequence.ndim != 1:
            raise TensorError(
                f"{_WHAT}: input value can be a scalar only when boundaries tensor dimension "
                f"is 1, but we got boundaries tensor dim({sequence.ndim}) and input value's "
                "dim(0) numel(1)"
            )
        return
    scalar_ok = values.ndim > 0 or sequence.ndim == 1
    if not scalar_ok:
        raise TensorError(
            f"{_WHAT}: input value can be a scalar only when boundaries tensor dimension is 1, "
            f"but we got boundaries tensor dim({sequence.ndim}) and input value's dim(0) "
            "numel(1)"
        )
    leading_match = values.ndim == sequence.ndim and tuple(values.shape[:-1]) == tuple(
        sequence.shape[:-1]
    )
    if sequence.ndim != 1 and not leading_match:
        raise TensorError(
            f"{_WHAT}: boundaries tensor should be 1 dimension or the first N-1 dimensions of "
            "boundaries tensor and input value tensor must match, but we got boundaries tensor "
            f"{list(sequence.shape)} and input value tensor {list(values.shape)}"
        )


def _check_sorter(sequence: Tensor, sorter: Any) -> None:
    tensor_argument(sorter, f"{_WHAT} sorter")
    same_device(_WHAT, sequence, sorter)
    if tuple(sorter.shape) != tuple(sequence.shape):
        raise TensorError(
            f"{_WHAT}: boundary and sorter must have the same size, but got boundary tensor "
            f"{list(sequence.shape)} and got sorter tensor {list(sorter.shape)}"
        )
    if sorter.dtype.name != "int64":
        raise TensorError(
            f"{_WHAT}: sorter must be a tensor of long dtype but got dtype {sorter.dtype!r}"
        )
    if sorter.numel() and not sorter.storage_device_tensor.context.timing_only:
        found = sorter.peek()  # torch reads the min and max to the host
        if found.min() < 0 or found.max() >= sequence.shape[-1]:
            raise TensorError(
                f"{_WHAT}: sorter index out of range (indices in [{found.min()}, "
                f"{found.max()}], a line has {sequence.shape[-1]} elements)"
            )


def searchsorted(
    sorted_sequence: Any,
    input: Any,  # noqa: A002 - torch's name
    *,
    out_int32: bool = False,
    right: bool = False,
    side: Any = None,
    out: Any = None,
    sorter: Any = None,
) -> Tensor:
    """``torch.searchsorted``: where each value goes in the innermost dim of
    ``sorted_sequence`` (int64, int32 with ``out_int32``), left or right of equal ones."""
    sequence = tensor_argument(sorted_sequence, f"{_WHAT} sorted_sequence")
    out_int32 = flag_argument(out_int32, "searchsorted", "out_int32")
    right = _side(right, side)
    number = None if hasattr(input, "storage_device_tensor") else python_scalar(input)
    if number is None:
        values = tensor_argument(input, f"{_WHAT} input")
        same_device(_WHAT, sequence, values)
    else:
        values = number
    _check_shapes(sequence, values)
    if sorter is not None:
        _check_sorter(sequence, sorter)
    for t in (sequence,) if number is not None else (sequence, values):
        if t.dtype is BOOL:
            raise TensorError(f"{_WHAT}: \"searchsorted\" not implemented for 'Bool' (as torch)")
    length = sequence.shape[-1]
    if out_int32 and length >= 2**31 - 1:
        raise TensorError(
            f"{_WHAT}: the size of boundaries' last dimension should be less than 2147483647, "
            f"but we got {length}"
        )
    if number is None:
        common = promote_types(sequence.dtype, values.dtype)
    else:
        common = scalar_result_dtype(sequence.dtype, number)
    result = sequence.new_empty(
        () if number is not None else tuple(values.shape),
        dtype=DTYPE_OBJECTS["int32" if out_int32 else "int64"],
    )
    if result.numel():
        seq = sequence.dense(common)
        order = None if sorter is None else sorter.dense()
        vals = values if number is not None else values.dense(common)
        launch_search(
            seq.device_tensor,
            None if order is None else order.device_tensor,
            vals if number is not None else vals.device_tensor,
            result.device_tensor,
            length,
            per_line=None if sequence.ndim == 1 else math.prod(values.shape[-1:]),
            right=right,
        )
        for made, given in ((seq, sequence), (order, sorter), (vals, values)):
            if made is not given and hasattr(made, "storage_device_tensor"):
                made.free()
    return result if out is None else into_out("torch.searchsorted", out, result)


def bucketize(
    input: Any,  # noqa: A002 - torch's name
    boundaries: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    out: Any = None,
) -> Tensor:
    """``torch.bucketize``: the bucket of each value of ``input`` among the 1-D
    ``boundaries`` (:func:`searchsorted` of ``input`` in ``boundaries``)."""
    boundaries = tensor_argument(boundaries, "torch.bucketize() boundaries")
    if boundaries.ndim != 1:
        raise TensorError(
            f"torch.bucketize(): boundaries tensor must be 1 dimension, but got dim"
            f"({boundaries.ndim})"
        )
    result = searchsorted(boundaries, input, out_int32=out_int32, right=right)
    return result if out is None else into_out("torch.bucketize", out, result)
