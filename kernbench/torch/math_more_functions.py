"""``torch.<name>`` forms of the NaN-skipping reductions and ``aminmax``
(:mod:`~kernbench.torch.nan_reductions`).

Each takes PyTorch's arguments (``out=`` where torch has it) and calls the tensor method
of the same name, so it runs and costs what the method does.
"""

from __future__ import annotations

from typing import Any

from kernbench.torch.functions import _tensor, with_out
from kernbench.torch.nan_reductions import AminmaxResult
from kernbench.torch.tensor import Tensor

__all__ = ["aminmax", "nanmean", "nansum"]


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
