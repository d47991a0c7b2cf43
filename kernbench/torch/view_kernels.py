"""Device kernels that read and write strided views: the copies behind non-contiguous tensors.

A view that is not one row-major run of its storage (``t.T``, ``t[:, 0]``,
``t[::2]``, ``t.expand(...)``) is reached through its storage's device tensor
and computed element offsets: element ``i`` of the view (row-major) is
storage element ``offset + sum(index_k(i) * stride_k)``.  The strided copy
kernel moves a view into another view (either side may be dense), converting
to the destination's dtype; the strided fill kernel writes a scalar into a
view.  Both cost what any device kernel costs: the memory traffic of the
elements touched plus the integer work of the offsets.
"""

from __future__ import annotations

from collections.abc import Sequence

import kernbench.kernels.language as tl
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid
from kernbench.torch.views import coalesce

__all__ = ["launch_strided_copy", "launch_strided_fill", "strided_offsets"]


@jit
def strided_offsets(i, offset, SHAPE: tl.constexpr, STRIDES: tl.constexpr):
    # Row-major unravel of the flat index i, walked from the last dim.
    rest = i
    out = offset + i * 0
    for k in range(len(SHAPE) - 1, -1, -1):
        out += (rest % SHAPE[k]) * STRIDES[k]
        rest = rest // SHAPE[k]
    return out


@jit
def _strided_copy_kernel(
    src_ptr,
    dst_ptr,
    n,
    src_offset,
    dst_offset,
    SHAPE: tl.constexpr,
    SRC_STRIDES: tl.constexpr,
    DST_STRIDES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    src = strided_offsets(i, src_offset, SHAPE, SRC_STRIDES)
    dst = strided_offsets(i, dst_offset, SHAPE, DST_STRIDES)
    tl.store(dst_ptr + dst, tl.load(src_ptr + src, mask=mask), mask=mask)


@jit
def _strided_fill_kernel(
    dst_ptr, n, dst_offset, value, SHAPE: tl.constexpr, STRIDES: tl.constexpr, BLOCK: tl.constexpr
):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    dst = strided_offsets(i, dst_offset, SHAPE, STRIDES)
    tl.store(dst_ptr + dst, value, mask=i < n)


def launch_strided_copy(
    src: DeviceTensor,
    src_offset: int,
    src_strides: Sequence[int],
    dst: DeviceTensor,
    dst_offset: int,
    dst_strides: Sequence[int],
    shape: Sequence[int],
) -> None:
    """Copy the view ``(shape, src_strides, src_offset)`` of ``src`` into that of ``dst``."""
    n = 1
    for size in shape:
        n *= size
    dims, (s_strides, d_strides) = coalesce(shape, src_strides, dst_strides)
    _strided_copy_kernel[elementwise_grid(n, "a strided copy")](
        src,
        dst,
        n,
        src_offset,
        dst_offset,
        SHAPE=dims,
        SRC_STRIDES=s_strides,
        DST_STRIDES=d_strides,
        BLOCK=BLOCK,
    )


def launch_strided_fill(
    dst: DeviceTensor,
    dst_offset: int,
    dst_strides: Sequence[int],
    shape: Sequence[int],
    value: int | float,
) -> None:
    """Write ``value`` into every element of the view ``(shape, dst_strides, dst_offset)``."""
    n = 1
    for size in shape:
        n *= size
    dims, (strides,) = coalesce(shape, dst_strides)
    _strided_fill_kernel[elementwise_grid(n, "a strided fill")](
        dst, n, dst_offset, value, SHAPE=dims, STRIDES=strides, BLOCK=BLOCK
    )
