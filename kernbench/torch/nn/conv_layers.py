"""``Conv1d``/``Conv2d``/``Conv3d`` (and the base of the transposed ones) and the pooling modules.

Each ``forward`` calls the ``torch.nn.functional`` op torch's does, so a module costs
what its op costs.  A convolution's weight and bias are initialised as torch's
``reset_parameters`` (``kaiming_uniform_(a=sqrt(5))``, bias ``U(-1/sqrt(fan_in),
1/sqrt(fan_in))``), drawn on the host from the rank's generator.  Constructor checks
raise torch's ``ValueError``; a ``padding_mode`` other than ``'zeros'`` pads with ``F.pad``
in that mode first, then convolves without padding, as torch's ``_conv_forward``.
"""

from __future__ import annotations

import math
from typing import Any

from kernbench.torch.factories import empty
from kernbench.torch.nn import functional as F
from kernbench.torch.nn import init
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.shapes import int_sequence
from kernbench.torch.tensor import Tensor

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value: Any, dims: int, what: str, name: str) -> tuple[int, ...]:
    items = int_sequence(value, what, name)
    return items * dims if len(items) == 1 else items


class ConvNd(Module):
    """The convolution layers' base (torch's ``_ConvNd``); a ``transposed`` layer keeps its
    weight as (in_channels, out_channels/groups, k...)."""

    _dims = 0
    transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name, dims = type(self).__name__, self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        self.stride = _tuple(stride, dims, name, "stride")
        self.dilation = _tuple(dilation, dims, name, "dilation")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}"
                )
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding: Any = padding
        else:
            self.padding = _tuple(padding, dims, name, "padding")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                f"padding_mode='{padding_mode}'"
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, dims, name, "kernel_size")
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = self._edge_padding()
        self.output_padding = (0,) * dims
        channels = (in_channels, out_channels) if self.transposed else (out_channels, in_channels)
        shape = (channels[0], channels[1] // groups, *self.kernel_size)
        self.weight = Parameter(empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _edge_padding(self) -> list[int]:
        """The ``F.pad`` amounts (last dim first) of a ``padding_mode`` other than zeros,
        as torch's ``_reversed_padding_repeated_twice`` ('same' split as its)."""
        amounts = [0, 0] * self._dims
        for i in range(self._dims):
            at = 2 * (self._dims - 1 - i)
            if self.padding == "same":
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                amounts[at], amounts[at + 1] = total // 2, total - total // 2
            elif self.padding != "valid":
                amounts[at] = amounts[at + 1] = self.padding[i]
        return amounts

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init.fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        text = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * self._dims:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._dims:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        # F's function looked up per call: autograd and autocast wrap it at import.
        conv = getattr(F, f"conv{self._dims}d")
        if self.padding_mode != "zeros":  # torch's: the edge padding, then no padding
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(
                padded, self.weight, self.bias, self.stride, (0,) * self._dims,
                self.dilation, self.groups,
            )  # fmt: skip
        return conv(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class Conv1d(ConvNd):
    """A 1-D convolution layer (:func:`F.conv1d`)."""

    _dims = 1


class Conv2d(ConvNd):
    """A 2-D convolution layer (:func:`F.conv2d`)."""

    _dims = 2


class Conv3d(ConvNd):
    """A 3-D convolution layer (:func:`F.conv3d`)."""

    _dims = 3


class _MaxPoolNd(Module):
    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )

    def forward(self, input: Tensor) -> Any:  # noqa: A002 - torch's name
        return getattr(F, f"max_pool{self._dims}d")(
            input, self.kernel_size, self.stride, self.padding, self.dilation,
            self.ceil_mode, self.return_indices,
        )  # fmt: skip


class MaxPool1d(_MaxPoolNd):
    """The maximum of each window (:func:`F.max_pool1d`)."""

    _dims = 1


class MaxPool2d(_MaxPoolNd):
    """The maximum of each window (:func:`F.max_pool2d`)."""

    _dims = 2


class MaxPool3d(_MaxPoolNd):
    """The maximum of each window (:func:`F.max_pool3d`)."""

    _dims = 3


class _AvgPoolNd(Module):
    _dims = 1

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad = count_include_pad

    def _extra_args(self) -> tuple[Any, ...]:
        return ()

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return getattr(F, f"avg_pool{self._dims}d")(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad, *self._extra_args(),
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """The mean of each window (:func:`F.avg_pool1d`)."""


class _DividedAvgPoolNd(_AvgPoolNd):
    """The 2-D and 3-D average pools, which also take ``divisor_override``."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def _extra_args(self) -> tuple[Any, ...]:
        return (self.divisor_override,)


class AvgPool2d(_DividedAvgPoolNd):
    """The mean of each window (:func:`F.avg_pool2d`)."""

    _dims = 2


class AvgPool3d(_DividedAvgPoolNd):
    """The mean of each window (:func:`F.avg_pool3d`)."""

    _dims = 3


class _AdaptivePool(Module):
    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _AdaptiveAvgPool(_AdaptivePool):
    def __init__(self, output_size: Any) -> None:  # no return_indices: torch's signature
        super().__init__(output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPool):
    """The mean over torch's adaptive windows (:func:`F.adaptive_avg_pool1d`)."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptiveAvgPool):
    """The mean over torch's adaptive windows (:func:`F.adaptive_avg_pool2d`)."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool3d(_AdaptiveAvgPool):
    """The mean over torch's adaptive windows (:func:`F.adaptive_avg_pool3d`)."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    """The maximum over torch's adaptive windows (:func:`F.adaptive_max_pool1d`)."""

    def forward(self, input: Tensor) -> Any:  # noqa: A002 - torch's name
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptivePool):
    """The maximum over torch's adaptive windows (:func:`F.adaptive_max_pool2d`)."""

    def forward(self, input: Tensor) -> Any:  # noqa: A002 - torch's name
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptivePool):
    """The maximum over torch's adaptive windows (:func:`F.adaptive_max_pool3d`)."""

    def forward(self, input: Tensor) -> Any:  # noqa: A002 - torch's name
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)
