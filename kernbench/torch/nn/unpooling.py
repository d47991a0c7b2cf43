"""``torch.nn.functional``'s power-average pools and max unpools (1-D, 2-D and 3-D).

Both are what torch builds them from, so they cost what those ops cost and carry their
gradients (autograd records the ops inside, as for the other compositions):

* ``lp_pool{1,2,3}d(input, norm_type, kernel_size, stride=None, ceil_mode=False)`` is
  ``(sign(s) * relu(|s|) * prod(kernel_size)) ** (1 / norm_type)`` with ``s`` the average
  pool of ``input ** norm_type`` (no padding): the ``norm_type``-norm of each window.  A
  window that ``ceil_mode`` cuts at the input's end is averaged over its cut size and
  scaled by the whole kernel's, as torch's is.
* ``max_unpool{1,2,3}d(input, indices, kernel_size, stride=None, padding=0,
  output_size=None)`` puts each value of ``input`` at its index (what ``max_pool`` with
  ``return_indices=True`` gave, into the flattened output plane) of a zero output plane:
  a ``scatter`` along the flattened plane.  The output's size is torch's
  ``(in - 1) * stride + kernel - 2 * padding`` per dimension, or ``output_size`` (its
  last dimensions) when that is within a stride of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.nn.convolution import spatial_argument
from kernbench.torch.nn.pooling import avg_pool1d, avg_pool2d, avg_pool3d
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
]

#: The average pools the power-average pools are built on, by dimensions.  Autograd puts
#: its recording ones here when it installs itself over ``torch.nn.functional``, so a
#: gradient flows through the pool as through the tensor methods around it.
AVG_POOLS: dict[int, Callable[..., Tensor]] = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}


def _lp_pool(
    dims: int, input: Any, norm_type: Any, kernel_size: Any, stride: Any, ceil_mode: Any
) -> Tensor:  # noqa: A002 - torch's name
    call = f"torch.nn.functional.lp_pool{dims}d"
    x = tensor_argument(input, call)
    if isinstance(norm_type, bool) or not isinstance(norm_type, int | float):
        raise TensorError(f"{call}: norm_type must be a number, got {norm_type!r}")
    if norm_type == 0:
        raise TensorError(f"{call}: norm_type must not be 0 (the root 1 / norm_type)")
    window = math.prod(spatial_argument(kernel_size, call, "kernel_size", dims))
    pooled = AVG_POOLS[dims](x.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (pooled.sign() * pooled.abs().relu()).mul(window).pow(1.0 / norm_type)


def lp_pool1d(
    input: Tensor,  # noqa: A002 - torch's name
    norm_type: float,
    kernel_size: Any,
    stride: Any = None,
    ceil_mode: bool = False,
) -> Tensor:
    """The ``norm_type``-norm of each window of (N, C, L) or (C, L) ``input``."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(
    input: Tensor,  # noqa: A002 - torch's name
    norm_type: float,
    kernel_size: Any,
    stride: Any = None,
    ceil_mode: bool = False,
) -> Tensor:
    """The ``norm_type``-norm of each window of (N, C, H, W) or (C, H, W) ``input``."""
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(
    input: Tensor,  # noqa: A002 - torch's name
    norm_type: float,
    kernel_size: Any,
    stride: Any = None,
    ceil_mode: bool = False,
) -> Tensor:
    """The ``norm_type``-norm of each window of (N, C, D, H, W) or (C, D, H, W) ``input``."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


def _unpooled_size(
    call: str,
    spatial: tuple[int, ...],
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    output_size: Any,
) -> tuple[int, ...]:
    """torch's ``_unpool_output_size``: the default size, or ``output_size`` checked
    against it (a sequence of ``dims`` or ``dims + 2`` sizes, each within a stride)."""
    dims = len(kernel)
    default = tuple((spatial[d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(dims))
    if output_size is None:
        sizes = default
    else:
        sizes = tuple(int(s) for s in output_size)
        if len(sizes) == dims + 2:
            sizes = sizes[2:]
        if len(sizes) != dims:
            raise TensorError(
                f"{call}: output_size should be a sequence containing {dims} or {dims + 2} "
                f"elements, but it has a length of '{len(sizes)}'"
            )
        for d in range(dims):
            low, high = default[d] - stride[d], default[d] + stride[d]
            if not low < sizes[d] < high:
                raise TensorError(
                    f'{call}: invalid output_size "{list(sizes)}" (dim {d} must be between '
                    f"{low} and {high})"
                )
    if any(s <= 0 for s in sizes):
        raise TensorError(f"{call}: the output would have size {list(sizes)}; sizes must be > 0")
    return sizes


def _max_unpool(
    dims: int,
    input: Any,  # noqa: A002 - torch's name
    indices: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    output_size: Any,
) -> Tensor:
    call = f"torch.nn.functional.max_unpool{dims}d"
    x = tensor_argument(input, call)
    idx = tensor_argument(indices, call)
    if x.ndim not in (dims + 1, dims + 2):
        raise TensorError(
            f"{call}: expected a {dims + 1}D or {dims + 2}D (batch mode) input, got shape "
            f"{list(x.shape)}"
        )
    if tuple(idx.shape) != tuple(x.shape):
        raise TensorError(
            f"{call}: Expected shape of indices to be same as that of the input tensor "
            f"({list(x.shape)}) but got indices tensor with shape: {list(idx.shape)}"
        )
    if idx.dtype is not DTYPE_OBJECTS["int64"]:
        raise TensorError(f"{call}: elements in indices should be type int64 but got: {idx.dtype}")
    kernel = spatial_argument(kernel_size, call, "kernel_size", dims)
    strides = kernel if stride is None else spatial_argument(stride, call, "stride", dims)
    pads = spatial_argument(padding, call, "padding", dims)
    spatial = tuple(x.shape)[-dims:]
    sizes = _unpooled_size(call, spatial, kernel, strides, pads, output_size)
    planes = tuple(x.shape)[:-dims]
    flat = (*planes, math.prod(spatial))
    out = x.new_zeros((*planes, math.prod(sizes)))
    try:
        out = out.scatter(-1, idx.reshape(flat), x.reshape(flat))
    except TensorError as exc:  # an index outside the output plane
        plane = "x".join(map(str, sizes))
        raise TensorError(
            f"{call}: found an invalid max index (output planes are of size {plane}): {exc}"
        ) from exc
    return out.reshape((*planes, *sizes))


def max_unpool1d(
    input: Tensor,  # noqa: A002 - torch's name
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool1d`: each value at its index, zeros elsewhere."""
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(
    input: Tensor,  # noqa: A002 - torch's name
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool2d`: each value at its index in the flattened
    H x W output plane, zeros elsewhere."""
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(
    input: Tensor,  # noqa: A002 - torch's name
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The partial inverse of :func:`max_pool3d`: each value at its index in the flattened
    D x H x W output volume, zeros elsewhere."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)
