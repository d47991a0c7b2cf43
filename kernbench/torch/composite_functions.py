"""``torch.<name>(tensor, ...)`` forms of the composite tensor methods (``torch.addmm``,
``torch.amax``, ``torch.repeat_interleave``, ...).

Each takes PyTorch's arguments and calls the method of the same name
(:mod:`~kernbench.torch.composites`, :mod:`~kernbench.torch.repeats`), so it
costs what the method costs.
"""

from __future__ import annotations

from typing import Any

from kernbench.torch.functions import with_out
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "addmm",
    "amax",
    "amin",
    "baddbmm",
    "clamp_max",
    "clamp_min",
    "ger",
    "logsumexp",
    "moveaxis",
    "movedim",
    "mv",
    "neg",
    "negative",
    "outer",
    "reciprocal",
    "repeat_interleave",
    "square",
    "std_mean",
    "tile",
    "unbind",
    "unflatten",
    "var_mean",
]


def _tensor(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.{what}")


def square(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "square").square()


def neg(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "neg").neg()


negative = neg


def amax(input: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:  # noqa: A002
    return _tensor(input, "amax").amax(dim, keepdim)


def amin(input: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:  # noqa: A002
    return _tensor(input, "amin").amin(dim, keepdim)


@with_out
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "addmm").addmm(mat1, mat2, beta=beta, alpha=alpha)


@with_out
def baddbmm(
    input: Tensor,  # noqa: A002
    batch1: Tensor,
    batch2: Tensor,
    *,
    beta: Any = 1,
    alpha: Any = 1,
) -> Tensor:
    return _tensor(input, "baddbmm").baddbmm(batch1, batch2, beta=beta, alpha=alpha)


def unflatten(input: Tensor, dim: int, sizes: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "unflatten").unflatten(dim, sizes)


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "movedim").movedim(source, destination)


moveaxis = movedim


def clamp_min(input: Tensor, min: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "clamp_min").clamp_min(min)


def clamp_max(input: Tensor, max: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "clamp_max").clamp_max(max)


@with_out
def reciprocal(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "reciprocal").reciprocal()


@with_out
def outer(input: Tensor, vec2: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "outer").outer(vec2)


ger = outer


@with_out
def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _tensor(input, "logsumexp").logsumexp(dim, keepdim)


def var_mean(
    input: Tensor,  # noqa: A002
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` over ``dim``, as torch returns them (two reductions here)."""
    x = _tensor(input, "var_mean")
    return x.var(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim)


def std_mean(
    input: Tensor,  # noqa: A002
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` over ``dim``, as torch returns them (two reductions here)."""
    x = _tensor(input, "std_mean")
    return x.std(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim)


def repeat_interleave(
    input: Tensor,  # noqa: A002
    repeats: Any,
    dim: int | None = None,
    *,
    output_size: int | None = None,
) -> Tensor:
    return _tensor(input, "repeat_interleave").repeat_interleave(
        repeats, dim, output_size=output_size
    )


def tile(input: Tensor, dims: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "tile").tile(dims)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    return _tensor(input, "unbind").unbind(dim)


@with_out
def mv(input: Tensor, vec: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "mv").mv(vec)
