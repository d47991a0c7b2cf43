"""``torch.nn.functional``'s max, average and adaptive pools (1-D, 2-D and 3-D), one kernel each
(:mod:`~kernbench.torch.nn.pool_kernels`).

Arguments, defaults and output sizes are torch's (``stride`` defaults to the kernel size,
``ceil_mode`` lets a last window start in the input or its left padding,
``count_include_pad`` and ``divisor_override`` choose the average's divisor); the input
may be batched or not.  ``return_indices=True`` gives ``(values, indices)`` with int64
indices into each flattened input plane, as torch.  Floating dtypes only.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.nn.convolution import spatial_argument
from kernbench.torch.nn.pool_kernels import adaptive_window, launch_pool
from kernbench.torch.shapes import flag_argument, int_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
]


def _input(value: Any, call: str, what: str, dims: int) -> Tensor:
    x = tensor_argument(value, call)
    if x.ndim not in (dims + 1, dims + 2) or any(s == 0 for s in tuple(x.shape)[-dims - 1 :]):
        if dims == 3:  # torch's 3-D kernels word it so
            raise TensorError(
                f"{call}: non-empty 4D or 5D (batch mode) tensor expected for input, but got: "
                f"{list(x.shape)}"
            )
        raise TensorError(
            f"{call}: Expected {dims + 1}D or {dims + 2}D (batch mode) tensor with optional 0 "
            f"dim batch size for input, but got: {list(x.shape)}"
        )
    if not x.dtype.is_floating_point:
        raise TensorError(
            f"{call}: {what} takes a floating input here, got {x.dtype!r}; convert with "
            ".float() first"
        )
    return x


def _pooled_size(size: int, k: int, pad: int, stride: int, dilation: int, ceil: bool) -> int:
    """torch's ``pooling_output_shape``."""
    out = (size + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1  # the last window must start inside the input or its left padding
    return out


def _run(
    x: Tensor,
    out_spatial: tuple[int, ...],
    geometry: tuple[int, ...],
    kind: str,
    return_indices: bool,
    **options: Any,
) -> Any:
    out = x.new_empty((*tuple(x.shape)[: x.ndim - len(out_spatial)], *out_spatial))
    indices = (
        out.new_empty(tuple(out.shape), dtype=DTYPE_OBJECTS["int64"]) if return_indices else None
    )
    if out.numel():
        dense = x.dense()
        launch_pool(
            dense.device_tensor,
            out.device_tensor,
            indices.device_tensor if indices is not None else None,
            geometry,
            kind=kind,
            **options,
        )
        if dense is not x:
            dense.free()
    return (out, indices) if return_indices else out


def _windowed(
    what: str,
    dims: int,
    input: Any,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: Any,
) -> tuple[Tensor, tuple[int, ...], tuple[int, ...]]:
    """The input, the output's spatial size and the kernel's geometry (D, H, W, OD, OH, OW,
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW) of a max or average pool, checked as
    torch checks them."""
    call = f"torch.nn.functional.{what}"
    x = _input(input, call, what, dims)
    kernel = spatial_argument(kernel_size, call, "kernel_size", dims)
    no_stride = stride is None or (isinstance(stride, list | tuple) and len(stride) == 0)
    strides = kernel if no_stride else spatial_argument(stride, call, "stride", dims)
    pads = spatial_argument(padding, call, "padding", dims)
    dilations = spatial_argument(dilation, call, "dilation", dims)
    ceil = flag_argument(ceil_mode, call, "ceil_mode")
    if any(k <= 0 for k in kernel):
        raise TensorError(f"{call}: kernel size should be greater than zero, but got {kernel}")
    if any(s <= 0 for s in strides):
        raise TensorError(f"{call}: stride should be greater than zero, but got {strides}")
    if any(d <= 0 for d in dilations):
        raise TensorError(f"{call}: dilation should be greater than zero, but got {dilations}")
    for k, p, d in zip(kernel, pads, dilations, strict=True):
        if p < 0:
            raise TensorError(f"{call}: pad should be greater than or equal to 0 but got {p}")
        if p > (d * (k - 1) + 1) // 2 or p > k // 2:
            raise TensorError(
                f"{call}: pad should be at most half of effective kernel size, but got "
                f"pad={p}, kernel_size={k} and dilation={d}"
            )
    spatial = tuple(x.shape)[-dims:]
    out_spatial = tuple(
        _pooled_size(*args, ceil)
        for args in zip(spatial, kernel, pads, strides, dilations, strict=True)
    )
    if any(o < 1 for o in out_spatial):
        raise TensorError(
            f"{call}: Given input size: ({'x'.join(map(str, tuple(x.shape)[-dims - 1 :]))}). "
            f"Calculated output size: ({'x'.join(map(str, (x.shape[-dims - 1], *out_spatial)))}"
            "). Output size is too small"
        )
    ones = (1,) * (3 - dims)
    zeros = (0,) * (3 - dims)
    geometry = (
        *ones, *spatial, *ones, *out_spatial, *ones, *kernel, *ones, *strides,
        *zeros, *pads, *ones, *dilations,
    )  # fmt: skip
    return x, out_spatial, geometry


def max_pool1d(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """The maximum of each window of (N, C, L) or (C, L) ``input`` (and its index in L)."""
    what = "max_pool1d"
    x, out_spatial, geometry = _windowed(
        what, 1, input, kernel_size, stride, padding, dilation, ceil_mode
    )
    flag = flag_argument(return_indices, f"torch.nn.functional.{what}", "return_indices")
    return _run(x, out_spatial, geometry, "max", flag)


def max_pool2d(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """The maximum of each window of (N, C, H, W) or (C, H, W) ``input`` (and its index in
    the flattened H x W plane)."""
    what = "max_pool2d"
    x, out_spatial, geometry = _windowed(
        what, 2, input, kernel_size, stride, padding, dilation, ceil_mode
    )
    flag = flag_argument(return_indices, f"torch.nn.functional.{what}", "return_indices")
    return _run(x, out_spatial, geometry, "max", flag)


def max_pool3d(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """The maximum of each window of (N, C, D, H, W) or (C, D, H, W) ``input`` (and its
    index in the flattened D x H x W volume)."""
    what = "max_pool3d"
    x, out_spatial, geometry = _windowed(
        what, 3, input, kernel_size, stride, padding, dilation, ceil_mode
    )
    flag = flag_argument(return_indices, f"torch.nn.functional.{what}", "return_indices")
    return _run(x, out_spatial, geometry, "max", flag)


def _divisor(value: Any, call: str) -> int | None:
    if value is None:
        return None
    divisor = int_argument(value, call, "divisor_override")
    if divisor == 0:
        raise TensorError(f"{call}: divisor must be not zero")
    return divisor


def avg_pool1d(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """The mean of each window of (N, C, L) or (C, L) ``input``."""
    call = "torch.nn.functional.avg_pool1d"
    x, out_spatial, geometry = _windowed(
        "avg_pool1d", 1, input, kernel_size, stride, padding, 1, ceil_mode
    )
    include = flag_argument(count_include_pad, call, "count_include_pad")
    return _run(x, out_spatial, geometry, "avg", False, include_pad=include)


def _avg_pool(
    what: str,
    dims: int,
    input: Any,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: Any,
    count_include_pad: Any,
    divisor_override: Any,
) -> Tensor:
    call = f"torch.nn.functional.{what}"
    x, out_spatial, geometry = _windowed(
        what, dims, input, kernel_size, stride, padding, 1, ceil_mode
    )
    include = flag_argument(count_include_pad, call, "count_include_pad")
    divisor = _divisor(divisor_override, call)
    return _run(x, out_spatial, geometry, "avg", False, include_pad=include, divisor=divisor)


def avg_pool2d(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The mean of each window of (N, C, H, W) or (C, H, W) ``input``: the sum divided by
    ``divisor_override``, else by the window's size (cut at the padded input's end) with
    ``count_include_pad``, else by the number of input elements in it."""
    return _avg_pool(
        "avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
        divisor_override,
    )  # fmt: skip


def avg_pool3d(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The mean of each window of (N, C, D, H, W) or (C, D, H, W) ``input``, divided as
    :func:`avg_pool2d` divides."""
    return _avg_pool(
        "avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
        divisor_override,
    )  # fmt: skip


def _adaptive(
    what: str,
    dims: int,
    input: Any,  # noqa: A002 - torch's name
    output_size: Any,
) -> tuple[Tensor, tuple[int, ...], tuple[int, ...]]:
    call = f"torch.nn.functional.{what}"
    x = _input(input, call, what, dims)
    spatial = tuple(x.shape)[-dims:]
    if output_size is None or isinstance(output_size, int) or dims == 1:
        sizes = spatial_argument(output_size, call, "output_size", dims)
    else:
        items = list(output_size)
        if len(items) != dims:
            raise TensorError(f"{call}: output_size must be {dims} ints, got {output_size!r}")
        sizes = tuple(
            s if o is None else int_argument(o, call, "output_size")
            for o, s in zip(items, spatial, strict=True)
        )
    if any(o < 0 for o in sizes):
        raise TensorError(
            f"{call}: elements of output_size must be greater than or equal to 0 but received "
            f"{sizes}"
        )
    windows = tuple(adaptive_window(s, o) if o else 1 for s, o in zip(spatial, sizes, strict=True))
    ones = (1,) * (3 - dims)
    return x, sizes, (*ones, *spatial, *ones, *sizes, *ones, *windows, 1, 1, 1, 0, 0, 0, 1, 1, 1)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """The mean over torch's adaptive windows of (N, C, L) or (C, L) ``input``."""
    x, sizes, geometry = _adaptive("adaptive_avg_pool1d", 1, input, output_size)
    return _run(x, sizes, geometry, "adaptive_avg", False)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """The mean over torch's adaptive windows of (N, C, H, W) or (C, H, W) ``input``
    (``output_size`` an int, or two of which None keeps the input's size)."""
    x, sizes, geometry = _adaptive("adaptive_avg_pool2d", 2, input, output_size)
    return _run(x, sizes, geometry, "adaptive_avg", False)


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002
    """The mean over torch's adaptive windows of (N, C, D, H, W) or (C, D, H, W) ``input``
    (``output_size`` an int, or three of which None keeps the input's size)."""
    x, sizes, geometry = _adaptive("adaptive_avg_pool3d", 3, input, output_size)
    return _run(x, sizes, geometry, "adaptive_avg", False)


def adaptive_max_pool1d(
    input: Tensor,  # noqa: A002 - torch's name
    output_size: Any,
    return_indices: bool = False,
) -> Any:
    """The maximum over torch's adaptive windows of (N, C, L) or (C, L) ``input``."""
    what = "adaptive_max_pool1d"
    x, sizes, geometry = _adaptive(what, 1, input, output_size)
    flag = flag_argument(return_indices, f"torch.nn.functional.{what}", "return_indices")
    return _run(x, sizes, geometry, "adaptive_max", flag)


def adaptive_max_pool2d(
    input: Tensor,  # noqa: A002 - torch's name
    output_size: Any,
    return_indices: bool = False,
) -> Any:
    """The maximum over torch's adaptive windows of (N, C, H, W) or (C, H, W) ``input``."""
    what = "adaptive_max_pool2d"
    x, sizes, geometry = _adaptive(what, 2, input, output_size)
    flag = flag_argument(return_indices, f"torch.nn.functional.{what}", "return_indices")
    return _run(x, sizes, geometry, "adaptive_max", flag)


def adaptive_max_pool3d(
    input: Tensor,  # noqa: A002 - torch's name
    output_size: Any,
    return_indices: bool = False,
) -> Any:
    """The maximum over torch's adaptive windows of (N, C, D, H, W) or (C, D, H, W)
    ``input``."""
    what = "adaptive_max_pool3d"
    x, sizes, geometry = _adaptive(what, 3, input, output_size)
    flag = flag_argument(return_indices, f"torch.nn.functional.{what}", "return_indices")
    return _run(x, sizes, geometry, "adaptive_max", flag)
