"""``triu`` / ``tril`` of :class:`~kernbench.torch.Tensor`: the upper or lower triangle.

:class:`TensorTriangular` is mixed into the tensor class.  As in torch, the
triangle is taken over the last two dimensions (the others are a batch), and
``diagonal`` shifts it: ``triu`` keeps element ``[..., i, j]`` where
``j - i >= diagonal``, ``tril`` where ``j - i <= diagonal``; the rest become
zero (``False`` for bool tensors, so ``torch.ones(n, n, dtype=torch.bool).triu(1)``
is a causal mask).  Both are composed of device kernels: two index ranges
(``arange``), one broadcast comparison that marks what to drop, and a
``masked_fill``, so they cost simulated time like those.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError, TensorTypeError
from kernbench.torch.arithmetic import free_temporaries
from kernbench.torch.device_kernels import launch_arange
from kernbench.torch.dtypes import DTYPE_OBJECTS

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorTriangular"]


class TensorTriangular:
    """``triu``, ``tril`` and their in-place forms."""

    def triu(self: Tensor, diagonal: int = 0) -> Tensor:
        """A copy with the elements below the ``diagonal``-th diagonal zeroed."""
        return _triangle(self, "triu", diagonal, in_place=False)

    def tril(self: Tensor, diagonal: int = 0) -> Tensor:
        """A copy with the elements above the ``diagonal``-th diagonal zeroed."""
        return _triangle(self, "tril", diagonal, in_place=False)

    def triu_(self: Tensor, diagonal: int = 0) -> Tensor:
        """The elements below the ``diagonal``-th diagonal zeroed in place."""
        return _triangle(self, "triu_", diagonal, in_place=True)

    def tril_(self: Tensor, diagonal: int = 0) -> Tensor:
        """The elements above the ``diagonal``-th diagonal zeroed in place."""
        return _triangle(self, "tril_", diagonal, in_place=True)


def _diagonal(what: str, diagonal: Any) -> int:
    if isinstance(diagonal, bool):
        diagonal = int(diagonal)
    try:
        return operator.index(diagonal)
    except TypeError:
        raise TensorTypeError(
            f"{what}(): argument 'diagonal' must be int, not {type(diagonal).__name__}"
        ) from None


def _triangle(t: Tensor, what: str, diagonal: Any, *, in_place: bool) -> Tensor:
    offset = _diagonal(what, diagonal)
    if t.ndim < 2:
        raise TensorError(
            f"{what}: input tensor must have at least 2 dimensions (got shape "
            f"{tuple(t.shape)}, as in torch)"
        )
    rows, cols = t.shape[-2], t.shape[-1]
    int32 = DTYPE_OBJECTS["int32"]
    # shifted[i] = i + diagonal, column[j] = j: triu drops j < i + diagonal, tril j > i + diagonal.
    shifted = t.new_empty((rows, 1), dtype=int32)
    column = t.new_empty((cols,), dtype=int32)
    launch_arange(shifted.device_tensor, rows, offset, 1)
    launch_arange(column.device_tensor, cols, 0, 1)
    drop = column < shifted if what.startswith("triu") else column > shifted
    result = t.masked_fill_(drop, 0) if in_place else t.masked_fill(drop, 0)
    free_temporaries(shifted, column, drop)
    return result
