"""``LPPool1d/2d/3d`` and ``MaxUnpool1d/2d/3d``: modules over the ops of
:mod:`~kernbench.torch.nn.unpooling`."""

from __future__ import annotations

from typing import Any

from kernbench.torch.nn import unpooling
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = ["LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"]


class _LPPoolNd(Module):
    _dims = 1

    def __init__(
        self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
    ) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, ceil_mode={self.ceil_mode}"
        )

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return getattr(unpooling, f"lp_pool{self._dims}d")(
            input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode
        )


class LPPool1d(_LPPoolNd):
    """The ``norm_type``-norm of each window (:func:`F.lp_pool1d`)."""


class LPPool2d(_LPPoolNd):
    """The ``norm_type``-norm of each window (:func:`F.lp_pool2d`)."""

    _dims = 2


class LPPool3d(_LPPoolNd):
    """The ``norm_type``-norm of each window (:func:`F.lp_pool3d`)."""

    _dims = 3


class _MaxUnpoolNd(Module):
    _dims = 1

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(
        self,
        input: Tensor,  # noqa: A002 - torch's name
        indices: Tensor,
        output_size: Any = None,
    ) -> Tensor:
        return getattr(unpooling, f"max_unpool{self._dims}d")(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d`` (:func:`F.max_unpool1d`)."""


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d`` (:func:`F.max_unpool2d`)."""

    _dims = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d`` (:func:`F.max_unpool3d`)."""

    _dims = 3
