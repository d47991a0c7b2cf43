"""``torch.nn.functional.conv_transpose1d``, ``conv_transpose2d`` and ``conv_transpose3d``,
and the transposed convolution they share with the convolutions' backward.

A transposed convolution of ``x`` with ``weight`` (C_in, C_out/groups, k...) is the
gradient of the convolution by ``weight`` with respect to its input, so it is computed as
that gradient is: ``x`` spread to every stride-th position of a zeroed buffer the size of
the output plus the dilated kernel less one (the convolution pads by itself instead when
the stride is 1 and the padding even), then one convolution
(:mod:`~kernbench.torch.nn.convolution`'s implicit-GEMM kernel) with the weight flipped in
space and its channel dims swapped within each group, the bias added by that kernel.  A
strided one multiplies the spread zeros too: stride^dims times the multiply-adds of
torch's kernels, which skip them.  Torch's arguments, output sizes and checks, with its
messages where a script may match them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.nn.convolution import (
    check_float_operands,
    conv1d,
    conv2d,
    conv3d,
    conv_operands,
    shape_text,
    spatial_argument,
)
from kernbench.torch.shapes import int_argument, tensor_argument
from kernbench.torch.tensor import Tensor
from kernbench.torch.views import same_device

__all__ = ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "transposed_convolution"]


def transposed_convolution(
    conv: Callable,
    g: Tensor,
    w: Tensor,
    bias: Tensor | None,
    spatial: tuple[int, ...],
    strides: tuple[int, ...],
    before: tuple[int, ...],
    dilations: tuple[int, ...],
    groups: int,
) -> Tensor:
    """The gradient of ``conv(x, w, stride=strides, padding=before, dilation=dilations,
    groups=groups)`` with respect to an ``x`` of ``spatial`` size, for the batched output
    gradient ``g``, plus ``bias``: ``g`` spread to the strided positions of a zeroed input
    padded by the dilated kernel less the forward's padding, convolved by ``conv`` with the
    flipped weight whose channel dims are swapped within each group."""
    dims = len(spatial)
    n, cout, out_spatial = g.shape[0], g.shape[1], tuple(g.shape[2:])
    kernel = tuple(w.shape[2:])
    dilated = tuple(d * (k - 1) + 1 for d, k in zip(dilations, kernel, strict=True))
    # output element o lands at left + o * stride of the (size + dilated - 1) long input
    left = tuple(k - 1 - b for k, b in zip(dilated, before, strict=True))
    length = tuple(s + k - 1 for s, k in zip(spatial, dilated, strict=True))
    padding: Any = 0
    if all(s == 1 for s in strides) and all(
        a >= 0 and 2 * a + o == size for a, o, size in zip(left, out_spatial, length, strict=True)
    ):
        padding = left  # the convolution pads evenly itself
    else:
        first = tuple(max(0, -(a // s)) for a, s in zip(left, strides, strict=True))
        last = tuple(
            min(o, (size - 1 - a) // s + 1)
            for a, s, o, size in zip(left, strides, out_spatial, length, strict=True)
        )
        spread = g.new_zeros(n, cout, *length)
        key = tuple(
            slice(a + f * s, a + (e - 1) * s + 1, s)
            for a, f, e, s in zip(left, first, last, strides, strict=True)
        )
        part = tuple(slice(f, e) for f, e in zip(first, last, strict=True))
        if all(e > f for f, e in zip(first, last, strict=True)):
            spread[(slice(None), slice(None), *key)] = g[(slice(None), slice(None), *part)]
        g = spread
    cg, cout_g = w.shape[1], cout // groups
    flipped = (
        w.reshape(groups, cout_g, cg, *kernel)
        .transpose(1, 2)
        .reshape(groups * cg, cout_g, *kernel)
        .flip(tuple(range(2, 2 + dims)))
    )
    return conv(g, flipped, bias, 1, padding, dilations, groups)


def _conv_transpose(
    what: str,
    dims: int,
    input: Any,  # noqa: A002 - torch's name
    weight: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: Any,
    dilation: Any,
) -> Tensor:
    call, x, w = conv_operands(what, dims, input, weight, "in_channels, out_channels/groups")
    strides = spatial_argument(stride, call, "stride", dims)
    pads = spatial_argument(padding, call, "padding", dims)
    extras = spatial_argument(output_padding, call, "output_padding", dims)
    dilations = spatial_argument(dilation, call, "dilation", dims)
    groups = int_argument(groups, call, "groups")
    if any(p < 0 for p in pads):
        raise TensorError(f"{call}: negative padding is not supported (padding={pads})")
    if any(p < 0 for p in extras):
        raise TensorError(
            f"{call}: negative output_padding is not supported (output_padding={extras})"
        )
    if any(s <= 0 for s in strides):
        raise TensorError(f"{call}: non-positive stride is not supported (stride={strides})")
    if any(d <= 0 for d in dilations):
        raise TensorError(f"{call}: dilation should be greater than zero (dilation={dilations})")
    if groups <= 0:
        raise TensorError(f"{call}: non-positive groups is not supported (groups={groups})")
    batched = x.ndim == dims + 2
    in_shape = tuple(x.shape) if batched else (1, *x.shape)
    n, c, spatial = in_shape[0], in_shape[1], in_shape[2:]
    cin, cout_g, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    cout = cout_g * groups
    if cin % groups:
        raise TensorError(
            f"{call}: Given groups={groups}, expected weight to be divisible by {groups} at "
            f"dimension 0, but got weight of size {shape_text(tuple(w.shape))} instead"
        )
    if c != cin:
        raise TensorError(
            f"{call}: Given transposed=1, weight of size {shape_text(tuple(w.shape))}, "
            f"expected input{shape_text(tuple(x.shape))} to have {cin} channels, but got {c} "
            "channels instead"
        )

    # torch's CPU kernels are 2-D and 3-D: a 1-D one is reported with a height of 1
    def as_2d(values: tuple[int, ...], one: int) -> tuple[int, ...]:
        return tuple(values) if dims >= 2 else (one, *values)

    axes = ("depth", "height", "width")[3 - len(as_2d(strides, 1)) :]
    if any(o >= s and o >= d for o, s, d in zip(extras, strides, dilations, strict=True)):
        parts = (
            ("output_padding", as_2d(extras, 0)),
            ("stride", as_2d(strides, 1)),
            ("dilation", as_2d(dilations, 1)),
        )
        text = " ".join(
            f"{what}_{axis}: {v}"
            for what, values in parts
            for axis, v in zip(axes, values, strict=True)
        )
        raise TensorError(
            f"{call}: output padding must be smaller than either stride or dilation, but got {text}"
        )
    if any(k <= 0 for k in kernel):
        text = " ".join(f"kernel_{a}: {k}" for a, k in zip(axes, as_2d(kernel, 1), strict=True))
        raise TensorError(f"{call}: kernel size should be greater than zero, but got {text}")
    out_spatial = tuple(
        (h - 1) * s - 2 * p + d * (k - 1) + o + 1
        for h, s, p, d, k, o in zip(spatial, strides, pads, dilations, kernel, extras, strict=True)
    )
    if any(o < 1 for o in out_spatial):
        raise TensorError(
            f"{call}: Given input size per channel: ({' x '.join(map(str, as_2d(spatial, 1)))}). "
            f"Calculated output size per channel: ({' x '.join(map(str, as_2d(out_spatial, 1)))}"
            "). Output size is too small"
        )
    b = None
    if bias is not None:
        b = tensor_argument(bias, f"{call} bias")
        same_device(call, x, b)
        if tuple(b.shape) != (cout,):
            raise TensorError(
                f"{call}: Given transposed=1, weight of size {shape_text(tuple(w.shape))}, "
                f"expected bias to be 1-dimensional with {cout} elements, but got bias of size "
                f"{shape_text(tuple(b.shape))} instead"
            )
    check_float_operands(call, x, w, b)
    out_shape = (n, cout, *out_spatial) if batched else (cout, *out_spatial)
    if n == 0 or cout == 0:
        return x.new_empty(out_shape)
    if cin == 0 or 0 in spatial:  # sums over nothing: the bias alone, or zero
        out = x.new_zeros(out_shape)
        return out.add_(b.view(cout, *(1,) * dims)) if b is not None else out
    conv = (conv1d, conv2d, conv3d)[dims - 1]
    out = transposed_convolution(
        conv, x if batched else x.unsqueeze(0), w, b, out_spatial, strides, pads, dilations,
        groups,
    )  # fmt: skip
    return out if batched else out.squeeze(0)


def conv_transpose1d(
    input: Tensor,  # noqa: A002 - torch's name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """A 1-D transposed convolution of (N, C_in, L) or (C_in, L) ``input`` with ``weight``
    (C_in, C_out/groups, kW), plus ``bias`` (C_out,): output length
    ``(L-1)*stride - 2*padding + dilation*(kW-1) + output_padding + 1``."""
    return _conv_transpose(
        "conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
        dilation,
    )  # fmt: skip


def conv_transpose2d(
    input: Tensor,  # noqa: A002 - torch's name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """A 2-D transposed convolution of (N, C_in, H, W) or (C_in, H, W) ``input`` with
    ``weight`` (C_in, C_out/groups, kH, kW), plus ``bias`` (C_out,): each output size
    ``(H-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1``."""
    return _conv_transpose(
        "conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
        dilation,
    )  # fmt: skip


def conv_transpose3d(
    input: Tensor,  # noqa: A002 - torch's name
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """A 3-D transposed convolution of (N, C_in, D, H, W) or (C_in, D, H, W) ``input`` with
    ``weight`` (C_in, C_out/groups, kD, kH, kW), plus ``bias`` (C_out,): each output size
    ``(D-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1``."""
    return _conv_transpose(
        "conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
        dilation,
    )  # fmt: skip
