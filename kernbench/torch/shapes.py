"""Shapes and dimension arguments: ``torch.Size`` and the checks of sizes, dims and keys."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernbench.errors import TensorError

__all__ = ["Size", "dim_index", "is_whole_key", "shape_argument"]


class Size(tuple):
    """A tensor's shape: a tuple of ints (``torch.Size([2, 3])``)."""

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"


def dim_index(dim: Any, ndim: int) -> int:
    """``dim`` (negative counts from the end) as an index into a shape of ``ndim`` dims.

    A 0-d tensor accepts dims 0 and -1, as in torch.
    """
    dims = max(ndim, 1)
    try:
        d = operator.index(dim)
    except TypeError:
        raise TensorError(f"dim must be an int, got {dim!r}") from None
    if not -dims <= d < dims:
        raise TensorError(f"dim {d} is out of range for a {ndim}-d tensor")
    return d % dims


def shape_argument(size: tuple[Any, ...], what: str, keyword: Any = None) -> tuple[int, ...]:
    """``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])``, ``f(torch.Size(...))`` or ``f(size=...)``.

    ``keyword`` is the ``size=`` argument, which PyTorch's factories also take.
    """
    if keyword is not None:
        if size:
            raise TensorError(f"{what}: give the size as arguments or as size=, not both")
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], Sequence):
        size = tuple(size[0])
    dims = []
    for d in size:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 0:
            raise TensorError(f"{what}: size {size!r} must be non-negative ints")
        dims.append(int(d))
    return tuple(dims)


def is_whole_key(key: Any) -> bool:
    """Whether an index key selects the whole tensor (``t[:]``, ``t[...]``, ``t[:, :]``)."""
    if key is Ellipsis or (isinstance(key, slice) and key == slice(None)):
        return True
    return isinstance(key, tuple) and all(is_whole_key(k) for k in key) and len(key) > 0
