"""The padding modules: ``ZeroPad1d``/``2d``/``3d`` and ``ConstantPad1d``/``2d``/``3d``
(``F.pad`` in constant mode, with ``value``), ``ReflectionPad1d``/``2d``/``3d`` and
``ReplicationPad1d``/``2d``/``3d``, ``CircularPad1d``/``2d``/``3d`` (its ``reflect``,
``replicate`` and ``circular`` modes).  Each holds torch's ``padding`` (an int is that
amount on every side of its dims)."""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]


def _amounts(what: str, padding: Any, dims: int) -> tuple[int, ...]:
    """``padding`` as (left, right, ...) for ``dims`` dims (an int is every side)."""
    if isinstance(padding, int) and not isinstance(padding, bool):
        padding = (padding,) * (2 * dims)
    padding = tuple(padding)
    if len(padding) != 2 * dims or not all(
        isinstance(p, int) and not isinstance(p, bool) for p in padding
    ):
        raise TensorError(
            f"{what}: padding must be an int or {2 * dims} ints (left, right, ...), got {padding!r}"
        )
    return padding


class _ConstantPadNd(Module):
    dims = 1

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__()
        self.padding = _amounts(type(self).__name__, padding, self.dims)
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


class _EdgePadNd(Module):
    dims = 1
    mode = "reflect"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        self.padding = _amounts(type(self).__name__, padding, self.dims)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_EdgePadNd):
    dims = 1


class ReflectionPad2d(_EdgePadNd):
    dims = 2


class ReflectionPad3d(_EdgePadNd):
    dims = 3


class ReplicationPad1d(_EdgePadNd):
    dims = 1
    mode = "replicate"


class ReplicationPad2d(_EdgePadNd):
    dims = 2
    mode = "replicate"


class ReplicationPad3d(_EdgePadNd):
    dims = 3
    mode = "replicate"


class CircularPad1d(_EdgePadNd):
    dims = 1
    mode = "circular"


class CircularPad2d(_EdgePadNd):
    dims = 2
    mode = "circular"


class CircularPad3d(_EdgePadNd):
    dims = 3
    mode = "circular"
