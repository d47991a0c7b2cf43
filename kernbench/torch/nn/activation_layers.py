"""The activation modules beyond :mod:`~kernbench.torch.nn.functional_modules`:
``PReLU`` (a learnable slope), ``Hardtanh``, ``ReLU6``, ``LogSigmoid``, ``Hardsigmoid``,
``Softsign``, ``CELU``, ``SELU``, ``Softmin``, ``Softmax2d``, ``Hardshrink``,
``Softshrink``, ``Tanhshrink``, ``Threshold``, ``RReLU``, and the ``AlphaDropout`` and
``FeatureAlphaDropout`` layers.

Each holds torch's constructor arguments and calls its ``torch.nn.functional`` op, and
prints them as torch's ``extra_repr`` does.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorValueError
from kernbench.torch.factories import empty
from kernbench.torch.nn import functional as F
from kernbench.torch.nn import init
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.tensor import Tensor

__all__ = [
    "CELU",
    "SELU",
    "AlphaDropout",
    "FeatureAlphaDropout",
    "Hardshrink",
    "Hardsigmoid",
    "Hardtanh",
    "LogSigmoid",
    "PReLU",
    "ReLU6",
    "RReLU",
    "Softmax2d",
    "Softmin",
    "Softshrink",
    "Softsign",
    "Tanhshrink",
    "Threshold",
]


def _inplace(inplace: bool) -> str:
    return ", inplace=True" if inplace else ""


class PReLU(Module):
    """:func:`F.prelu` with a learnable ``weight`` of ``num_parameters`` slopes (one, or
    one a channel), each ``init``."""

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if not max_val > min_val:  # torch asserts it
            raise AssertionError(
                f"Hardtanh: max_val ({max_val}) must be greater than min_val ({min_val})"
            )
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace(self.inplace)}"


class ReLU6(Hardtanh):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LogSigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.logsigmoid(input)


class Softsign(Module):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.softsign(input)


class Tanhshrink(Module):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.tanhshrink(input)


class Hardsigmoid(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.hardsigmoid(input, self.inplace)


class SELU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.selu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class CELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_inplace(self.inplace)}"


class Softmin(Module):
    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """:func:`F.softmax` over the channels of ``(N, C, H, W)`` or ``(C, H, W)``."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        if input.ndim not in (3, 4):
            raise TensorValueError(
                f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead"
            )
        return F.softmax(input, -3)


class Hardshrink(Module):
    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.softshrink(input, self.lambd)


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{_inplace(self.inplace)}"


class RReLU(Module):
    """:func:`F.rrelu`: random slopes in training, their mean after ``eval()``."""

    def __init__(
        self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False
    ) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{_inplace(self.inplace)}"


class AlphaDropout(Module):
    """:func:`F.alpha_dropout` in training, the identity after ``eval()``."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
            raise TensorValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.alpha_dropout(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class FeatureAlphaDropout(AlphaDropout):
    """:func:`F.feature_alpha_dropout`: one draw per (sample, channel)."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.feature_alpha_dropout(input, self.p, self.training)
