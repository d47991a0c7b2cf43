"""``ConvTranspose1d``/``2d``/``3d``: torch's transposed convolution layers.

Torch's constructor (``output_padding``, ``groups``, ``bias``, ``dilation``, only
``padding_mode='zeros'``, as torch refuses the others here) over the convolution layers'
base, whose ``reset_parameters`` is torch's: ``kaiming_uniform_(a=sqrt(5))`` on the
(in_channels, out_channels/groups, k...) weight, so the fan-in is out_channels/groups
times the kernel's size, as torch computes it.  ``forward(input, output_size=None)``
turns a requested output size into ``output_padding`` as torch's ``_output_padding`` does
and calls :func:`F.conv_transpose1d`/``2d``/``3d``.
"""

from __future__ import annotations

from typing import Any

from kernbench.torch.nn import functional as F
from kernbench.torch.nn.conv_layers import ConvNd
from kernbench.torch.nn.convolution import spatial_argument
from kernbench.torch.shapes import int_sequence
from kernbench.torch.tensor import Tensor

__all__ = ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


class _ConvTransposeNd(ConvNd):
    transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        padding = int_sequence(padding, name, "padding")  # no 'same'/'valid' here
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, device, dtype,
        )  # fmt: skip
        self.output_padding = spatial_argument(output_padding, name, "output_padding", self._dims)

    def _output_padding(self, input: Tensor, output_size: Any) -> tuple[int, ...]:  # noqa: A002
        """torch's: the output padding that gives ``output_size`` (the last ``dims`` of it)."""
        dims = self._dims
        if output_size is None:
            return self.output_padding
        sizes = int_sequence(output_size, type(self).__name__, "output_size")
        lead = 2 if input.ndim == dims + 2 else 1
        if len(sizes) == lead + dims:
            sizes = sizes[lead:]
        if len(sizes) != dims:
            raise ValueError(
                f"ConvTranspose{dims}D: for {input.ndim}D input, output_size must have {dims} "
                f"or {lead + dims} elements (got {len(sizes)})"
            )
        smallest = [
            (input.shape[d + lead] - 1) * s - 2 * p + dl * (k - 1) + 1
            for d, s, p, dl, k in zip(
                range(dims), self.stride, self.padding, self.dilation, self.kernel_size,
                strict=True,
            )
        ]  # fmt: skip
        largest = [m + s - 1 for m, s in zip(smallest, self.stride, strict=True)]
        for size, low, high in zip(sizes, smallest, largest, strict=True):
            if not low <= size <= high:
                raise ValueError(
                    f"requested an output size of {list(sizes)}, but valid sizes range from "
                    f"{smallest} to {largest} (for an input of {list(input.shape[2:])})"
                )
        return tuple(size - low for size, low in zip(sizes, smallest, strict=True))

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:  # noqa: A002
        output_padding = self._output_padding(input, output_size)
        # F's function looked up per call: autograd and autocast wrap it at import.
        return getattr(F, f"conv_transpose{self._dims}d")(
            input, self.weight, self.bias, self.stride, self.padding, output_padding,
            self.groups, self.dilation,
        )  # fmt: skip


class ConvTranspose1d(_ConvTransposeNd):
    """A 1-D transposed convolution layer (:func:`F.conv_transpose1d`)."""

    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """A 2-D transposed convolution layer (:func:`F.conv_transpose2d`)."""

    _dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    """A 3-D transposed convolution layer (:func:`F.conv_transpose3d`)."""

    _dims = 3
