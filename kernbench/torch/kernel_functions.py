"""``torch.<name>`` forms of the rounding, division, scan, sorting and indexing methods
(``torch.floor``, ``torch.remainder``, ``torch.cumsum``, ``torch.sort``, ``torch.gather``...).

Each takes PyTorch's arguments (``out=`` where torch has it) and calls the tensor
method of the same name, so what runs on the device is as the method says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.functions import into_out, with_out
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "cumprod",
    "cumsum",
    "prod",
    "ceil",
    "exp2",
    "expm1",
    "fix",
    "floor",
    "floor_divide",
    "fmod",
    "frac",
    "log10",
    "log1p",
    "log2",
    "remainder",
    "round",
    "sign",
    "trunc",
]


def _tensor(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.{what}")


def _elementwise(name: str) -> Callable[..., Tensor]:
    def fn(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return getattr(_tensor(input, name), name)()

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}``: :meth:`Tensor.{name}` of ``input``."
    return fn


floor = with_out(_elementwise("floor"))
ceil = with_out(_elementwise("ceil"))
trunc = with_out(_elementwise("trunc"))
fix = with_out(_elementwise("fix"))
frac = with_out(_elementwise("frac"))
sign = with_out(_elementwise("sign"))
exp2 = with_out(_elementwise("exp2"))
log2 = with_out(_elementwise("log2"))
log10 = with_out(_elementwise("log10"))
log1p = with_out(_elementwise("log1p"))
expm1 = with_out(_elementwise("expm1"))


@with_out
def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001,A002 - torch's names
    """``torch.round``: half to even, ``decimals`` places."""
    return _tensor(input, "round").round(decimals)


def _division(name: str) -> Callable[..., Tensor]:
    def fn(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's name
        if isinstance(input, Tensor):
            return getattr(input, name)(other)
        if isinstance(other, Tensor) and name == "remainder":  # torch.remainder(2, t)
            return other.__rmod__(input)
        raise TensorError(
            f"torch.{name}: expected a Tensor as input, got {type(input).__name__} and "
            f"{type(other).__name__}"
        )

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}``: :meth:`Tensor.{name}` of ``input`` and ``other``."
    return fn


floor_divide = with_out(_division("floor_divide"))
remainder = with_out(_division("remainder"))
fmod = with_out(_division("fmod"))


def prod(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, out: Any = None
) -> Tensor:  # noqa: A002
    """``torch.prod(input, *, dtype)`` or ``torch.prod(input, dim, keepdim=False, *, dtype)``."""
    result = _tensor(input, "prod").prod(dim, keepdim, dtype=dtype)
    return result if out is None else into_out("torch.prod", out, result)


@with_out
def cumsum(input: Tensor, dim: Any, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``torch.cumsum``: running sums along ``dim``."""
    return _tensor(input, "cumsum").cumsum(dim, dtype=dtype)


@with_out
def cumprod(input: Tensor, dim: Any, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``torch.cumprod``: running products along ``dim``."""
    return _tensor(input, "cumprod").cumprod(dim, dtype=dtype)
