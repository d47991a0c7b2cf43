"""The constant padding modules: ``ZeroPad1d``/``2d``/``3d`` and ``ConstantPad1d``/``2d``/
``3d``.  Each holds torch's ``padding`` (an int is that amount on every side of its dims)
and ``value``, and calls ``F.pad`` in constant mode, as torch's do."""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.modules import Module
from kernbench.torch.tensor import Tensor

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]


class _ConstantPadNd(Module):
    dims = 1

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__()
        if isinstance(padding, int) and not isinstance(padding, bool):
            padding = (padding,) * (2 * self.dims)
        padding = tuple(padding)
        if len(padding) != 2 * self.dims or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in padding
        ):
            raise TensorError(
                f"{type(self).__name__}: padding must be an int or {2 * self.dims} ints "
                f"(left, right, ...), got {padding!r}"
            )
        self.padding = padding
        self.value = value

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    dims = 1


class ConstantPad2d(_ConstantPadNd):
    dims = 2


class ConstantPad3d(_ConstantPadNd):
    dims = 3


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"padding={self.padding}"


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"padding={self.padding}"


class ZeroPad3d(ConstantPad3d):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"padding={self.padding}"
