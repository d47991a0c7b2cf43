"""``torch.<name>`` forms of the NaN-skipping reductions and ``aminmax``
(:mod:`~kernbench.torch.nan_reductions`) and of the further products (``addmv``,
``addr``, ``addbmm``, ``inner``, ``vdot``, ``diag_embed``, ``rot90``, ``dist``,
``renorm``: :mod:`~kernbench.torch.products_more`); ``chain_matmul``.

Each takes PyTorch's arguments (``out=`` where torch has it) and calls the tensor method
of the same name, so it runs and costs what the method does.
"""

from __future__ import annotations

from typing import Any

from kernbench.torch.functions import _tensor, into_out, with_out
from kernbench.torch.nan_reductions import AminmaxResult
from kernbench.torch.products_more import multi_dot
from kernbench.torch.tensor import Tensor

__all__ = [
    "addbmm",
    "addmv",
    "addr",
    "aminmax",
    "chain_matmul",
    "diag_embed",
    "dist",
    "inner",
    "nanmean",
    "nansum",
    "renorm",
    "rot90",
    "vdot",
]


@with_out
def nansum(
    input: Tensor,  # noqa: A002 - torch's name
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """``torch.nansum``: the sum over ``dim`` with NaN counted as 0."""
    return _tensor(input, "nansum").nansum(dim, keepdim, dtype=dtype)


@with_out
def nanmean(
    input: Tensor,  # noqa: A002 - torch's name
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """``torch.nanmean``: the mean over ``dim`` of the elements that are not NaN."""
    return _tensor(input, "nanmean").nanmean(dim, keepdim, dtype=dtype)


def aminmax(input: Tensor, *, dim: Any = None, keepdim: bool = False) -> AminmaxResult:  # noqa: A002
    """``torch.aminmax``: ``(min, max)`` over ``dim`` (every element when None)."""
    return _tensor(input, "aminmax").aminmax(dim=dim, keepdim=keepdim)


@with_out
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``torch.addmv``: ``beta * input + alpha * (mat @ vec)``."""
    return _tensor(input, "addmv").addmv(mat, vec, beta=beta, alpha=alpha)


@with_out
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``torch.addr``: ``beta * input + alpha * outer(vec1, vec2)``."""
    return _tensor(input, "addr").addr(vec1, vec2, beta=beta, alpha=alpha)


@with_out
def addbmm(
    input: Tensor,  # noqa: A002
    batch1: Tensor,
    batch2: Tensor,
    *,
    beta: Any = 1,
    alpha: Any = 1,
) -> Tensor:
    """``torch.addbmm``: ``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    return _tensor(input, "addbmm").addbmm(batch1, batch2, beta=beta, alpha=alpha)


@with_out
def inner(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """``torch.inner``: sums of products over the last dims."""
    return _tensor(input, "inner").inner(other)


@with_out
def vdot(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """``torch.vdot``: the dot product of two 1-D tensors."""
    return _tensor(input, "vdot").vdot(other)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: A002
    """``torch.diag_embed``: the last dim of ``input`` on diagonals of new planes."""
    return _tensor(input, "diag_embed").diag_embed(offset, dim1, dim2)


def rot90(input: Tensor, k: int = 1, dims: Any = (0, 1)) -> Tensor:  # noqa: A002
    """``torch.rot90``: turned by 90 degrees ``k`` times in the plane of ``dims``."""
    return _tensor(input, "rot90").rot90(k, dims)


def dist(input: Tensor, other: Tensor, p: Any = 2) -> Tensor:  # noqa: A002
    """``torch.dist``: the ``p``-norm of ``input - other``."""
    return _tensor(input, "dist").dist(other, p)


@with_out
def renorm(input: Tensor, p: Any, dim: int, maxnorm: Any) -> Tensor:  # noqa: A002
    """``torch.renorm``: slices along ``dim`` scaled to ``p``-norm at most ``maxnorm``."""
    return _tensor(input, "renorm").renorm(p, dim, maxnorm)


def chain_matmul(*matrices: Tensor, out: Any = None) -> Tensor:
    """``torch.chain_matmul`` (deprecated in torch for ``torch.linalg.multi_dot``): the
    product of 2-D tensors in the cheapest order."""
    result = multi_dot(matrices, "chain_matmul")
    return result if out is None else into_out("torch.chain_matmul", out, result)
