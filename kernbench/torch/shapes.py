"""Shapes and dimension arguments: ``torch.Size`` and the checks of sizes, dims and keys."""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernbench.errors import TensorError

__all__ = [
    "Size",
    "dim_index",
    "flag_argument",
    "int_argument",
    "int_sequence",
    "is_whole_key",
    "shape_argument",
    "tensor_argument",
]


class Size(tuple):
    """A tensor's shape: a tuple of ints (``torch.Size([2, 3])``)."""

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"


def dim_index(dim: Any, ndim: int, what: str = "", *, scalar: bool = True) -> int:
    """``dim`` (negative counts from the end) as an index into a shape of ``ndim`` dims.

    A 0-d tensor accepts dims 0 and -1, as in torch's reductions; ``scalar=False``
    is for the calls that index the shape itself (``unbind``, ``split``, ...), which
    torch refuses on a 0-d tensor.  ``what`` names the call in the message.
    """
    at = f"{what}: " if what else ""
    dims = max(ndim, 1)
    try:
        d = operator.index(dim)
    except TypeError:
        raise TensorError(f"{at}dim must be an int, got {_shown(dim)}") from None
    if not scalar and ndim == 0:
        raise TensorError(
            f"{at}dimension specified as {d} but the tensor has no dimensions (a 0-d tensor)"
        )
    if not -dims <= d < dims:
        raise TensorError(f"{at}dim {d} is out of range for a {ndim}-d tensor")
    return d % dims


def int_sequence(value: Any, what: str, name: str) -> tuple[int, ...]:
    """An int or a sequence of ints (``dim=``, ``sizes=``, ``split_size=``) as a tuple.

    Anything else (``None``, a string, a float, nested lists) is a :class:`TensorError`
    naming the call and the argument.
    """
    if isinstance(value, str | bytes) or value is None:
        items = None
    elif hasattr(value, "__index__") and not isinstance(value, np.ndarray):
        items = [value]
    else:
        try:
            items = list(value)
        except TypeError:
            items = None
    if items is not None:
        try:
            if not any(isinstance(i, bool | np.bool_) for i in items):
                return tuple(operator.index(i) for i in items)
        except TypeError:
            pass
    raise TensorError(f"{what}: {name} must be an int or a sequence of ints, got {_shown(value)}")


def int_argument(value: Any, what: str, name: str) -> int:
    """An int argument (``start=``, ``length=``): an int, a NumPy int or a 0-d int tensor."""
    if not isinstance(value, bool | np.bool_):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TensorError(f"{what}: {name} must be an int, got {_shown(value)}")


def flag_argument(value: Any, what: str, name: str) -> bool:
    """A true/false argument (``keepdim``, ``inplace``): a bool (or an int, which
    torch's Python functions take as one); not an array, a string or ``None``."""
    if isinstance(value, bool | np.bool_ | numbers.Integral):
        return bool(value)
    raise TensorError(f"{what}: {name} must be True or False, got {_shown(value)}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"a {type(value).__name__}"


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


def tensor_argument(value: Any, call: str) -> Any:
    """``value`` if it is a tensor, else a :class:`TensorError` naming ``call``."""
    if not hasattr(value, "storage_device_tensor"):
        raise TensorError(f"{call}: expected a Tensor, got {type(value).__name__}")
    return value
