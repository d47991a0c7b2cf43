"""``torch.nn.functional.conv1d``, ``conv2d`` and ``conv3d``: torch's arguments and output
shapes, one implicit-GEMM kernel each (:mod:`~kernbench.torch.nn.conv_kernels`).

``stride``, ``padding`` (numbers, or ``'valid'``/``'same'``), ``dilation`` and ``groups``
are torch's; the input may be batched or not.  Floating dtypes only (torch's CPU
kernels refuse integers); input, weight and bias must share one.  The argument checks
are torch's, with its messages where a script may match them.
"""

from __future__ import annotations

import math
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.nn.conv_kernels import launch_conv
from kernbench.torch.shapes import int_argument, int_sequence, tensor_argument
from kernbench.torch.tensor import Tensor
from kernbench.torch.views import same_device

__all__ = [
    "check_float_operands",
    "conv_operands",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_padding",
    "shape_text",
    "spatial_argument",
]

PADDING_STRINGS = ("valid", "same")


def spatial_argument(value: Any, what: str, name: str, dims: int) -> tuple[int, ...]:
    """An int or a sequence of ``dims`` ints (a one-element sequence repeats, as torch)."""
    items = int_sequence(value, what, name)
    if len(items) == 1:
        items = items * dims
    if len(items) != dims:
        raise TensorError(f"{what}: {name} must be an int or {dims} ints, got {value!r}")
    return items


def conv_padding(value: Any, what: str, dims: int) -> tuple[int, ...] | str:
    """``padding`` as ints or one of ``'valid'``/``'same'``."""
    if isinstance(value, str):
        if value not in PADDING_STRINGS:
            raise TensorError(
                f"{what}: Invalid padding string {value!r}, should be one of {{'valid', 'same'}}"
            )
        return value
    return spatial_argument(value, what, "padding", dims)


def shape_text(shape: tuple[int, ...]) -> str:
    """A shape as torch prints it in its messages: ``[2, 3]``."""
    return "[" + ", ".join(map(str, shape)) + "]"


def check_float_operands(call: str, x: Tensor, w: Tensor, b: Tensor | None) -> None:
    """A floating input, and the weight and bias (if any) of its dtype."""
    if not x.dtype.is_floating_point:
        raise TensorError(
            f"{call}: expected a floating input, got {x.dtype!r} (torch's CPU convolution has "
            "no integer kernel); convert with .float() first"
        )
    if w.dtype is not x.dtype:
        raise TensorError(
            f"{call}: Input type ({x.dtype!r}) and weight type ({w.dtype!r}) should be the "
            "same; convert one with .to(...)"
        )
    if b is not None and b.dtype is not x.dtype:
        raise TensorError(
            f"{call}: Input type ({x.dtype!r}) and bias type ({b.dtype!r}) should be the "
            "same; convert one with .to(...)"
        )


def conv_operands(
    what: str,
    dims: int,
    input: Any,
    weight: Any,
    layout: str,  # noqa: A002 - torch's name
) -> tuple[str, Tensor, Tensor]:
    """The call's name and its input and weight, checked as torch checks them for a
    (transposed) convolution: ``dims + 1``/``+ 2``-D input, ``dims + 2``-D weight laid out
    as ``layout`` then the kernel, one device."""
    call = f"torch.nn.functional.{what}"
    x = tensor_argument(input, call)
    w = tensor_argument(weight, call)
    if x.ndim not in (dims + 1, dims + 2):
        raise TensorError(
            f"{call}: Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to "
            f"{what}, but got input of size: {shape_text(tuple(x.shape))}"
        )
    if w.ndim != dims + 2:
        raise TensorError(
            f"{call}: expected a {dims + 2}-D weight ({layout}, "
            f"{', '.join(('kD', 'kH', 'kW')[3 - dims :])}), got weight of size "
            f"{shape_text(tuple(w.shape))}"
        )
    same_device(call, x, w)
    return call, x, w


def _convolution(
    what: str,
    dims: int,
    input: Any,  # noqa: A002 - torch's name
    weight: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: Any,
) -> Tensor:
    call, x, w = conv_operands(what, dims, input, weight, "out_channels, in_channels/groups")
    strides = spatial_argument(stride, call, "stride", dims)
    dilations = spatial_argument(dilation, call, "dilation", dims)
    pads = conv_padding(padding, call, dims)
    groups = int_argument(groups, call, "groups")
    if any(s <= 0 for s in strides):
        raise TensorError(f"{call}: non-positive stride is not supported (stride={strides})")
    if any(d <= 0 for d in dilations):
        raise TensorError(f"{call}: dilation should be greater than zero (dilation={dilations})")
    if groups <= 0:
        raise TensorError(f"{call}: non-positive groups is not supported (groups={groups})")
    batched = x.ndim == dims + 2
    in_shape = tuple(x.shape) if batched else (1, *x.shape)
    n, c, spatial = in_shape[0], in_shape[1], in_shape[2:]
    cout, cg, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    if cout % groups:
        raise TensorError(
            f"{call}: Given groups={groups}, expected weight to be divisible by {groups} at "
            f"dimension 0, but got weight of size {shape_text(tuple(w.shape))} instead"
        )
    if cg * groups != c:
        raise TensorError(
            f"{call}: Given groups={groups}, weight of size {shape_text(tuple(w.shape))}, "
            f"expected input{shape_text(tuple(x.shape))} to have {cg * groups} channels, "
            f"but got {c} channels instead"
        )
    dilated = tuple(d * (k - 1) + 1 for d, k in zip(dilations, kernel, strict=True))
    if pads == "valid":
        before = after = (0,) * dims
    elif pads == "same":
        if any(s != 1 for s in strides):
            raise TensorError(f"{call}: padding='same' is not supported for strided convolutions")
        before = tuple((k - 1) // 2 for k in dilated)
        after = tuple(k - 1 - b for k, b in zip(dilated, before, strict=True))
    else:
        if any(p < 0 for p in pads):
            raise TensorError(f"{call}: negative padding is not supported (padding={pads})")
        before = after = pads
    padded = tuple(s + b + a for s, b, a in zip(spatial, before, after, strict=True))
    if any(k > p for k, p in zip(dilated, padded, strict=True)):
        raise TensorError(
            f"{call}: Calculated padded input size per channel: ({' x '.join(map(str, padded))}"
            f"). Kernel size: ({' x '.join(map(str, dilated))}). Kernel size can't be greater "
            "than actual input size"
        )
    check_float_operands(call, x, w, None)
    b = None
    if bias is not None:
        b = tensor_argument(bias, f"{call} bias")
        same_device(call, x, b)
        if tuple(b.shape) != (cout,):
            raise TensorError(
                f"{call}: Given weight of size {shape_text(tuple(w.shape))}, expected bias to "
                f"be 1-dimensional with {cout} elements, but got bias of size "
                f"{shape_text(tuple(b.shape))} instead"
            )
        check_float_operands(call, x, w, b)
    out_spatial = tuple((p - k) // s + 1 for p, k, s in zip(padded, dilated, strides, strict=True))
    out_shape = (n, cout, *out_spatial) if batched else (cout, *out_spatial)
    out = x.new_empty(out_shape)
    if out.numel() == 0:
        return out
    if c == 0 or math.prod(kernel) == 0:  # sums over nothing: the bias alone, or zero
        out.zero_()
        return out.add_(b.view(cout, *(1,) * dims)) if b is not None else out
    dense_x, dense_w = x.dense(), w.dense()
    dense_b = b.dense() if b is not None else None
    # the kernel is 3-D: a 2-D convolution has one plane, a 1-D one also rows of height 1
    lift = 3 - dims
    launch_conv(
        dense_x.device_tensor,
        dense_w.device_tensor,
        dense_b.device_tensor if dense_b is not None else None,
        out.device_tensor,
        (
            n, c, *(1,) * lift, *spatial, cout, *(1,) * lift, *out_spatial,
            *(1,) * lift, *kernel, *(1,) * lift, *strides, *(0,) * lift, *before,
            *(1,) * lift, *dilations, groups,
        ),
    )  # fmt: skip
    for dense, given in ((dense_x, x), (dense_w, w), (dense_b, b)):
        if dense is not None and dense is not given:
            dense.free()
    return out


def conv1d(
    input: Tensor,  # noqa: A002 - torch's name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """A 1-D convolution (cross-correlation) of (N, C, L) or (C, L) ``input`` with ``weight``
    (Cout, C/groups, kW), plus ``bias`` (Cout,): one implicit-GEMM kernel."""
    return _convolution("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(
    input: Tensor,  # noqa: A002 - torch's name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """A 2-D convolution (cross-correlation) of (N, C, H, W) or (C, H, W) ``input`` with
    ``weight`` (Cout, C/groups, kH, kW), plus ``bias`` (Cout,): one implicit-GEMM kernel."""
    return _convolution("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(
    input: Tensor,  # noqa: A002 - torch's name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """A 3-D convolution (cross-correlation) of (N, C, D, H, W) or (C, D, H, W) ``input``
    with ``weight`` (Cout, C/groups, kD, kH, kW), plus ``bias`` (Cout,): one implicit-GEMM
    kernel."""
    return _convolution("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)
