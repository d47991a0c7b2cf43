"""``torch.nn.modules.utils``: ``_single``, ``_pair``, ``_triple``, ``_quadruple`` and
``_ntuple``, which layer code calls to spread one size over every spatial dimension."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

__all__: list[str] = []


def _ntuple(n: int, name: str = "parse") -> Callable[[Any], tuple]:
    """A function making an ``n``-tuple of a scalar, and a tuple of any other iterable."""

    def parse(x: Any) -> tuple:
        if isinstance(x, Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")
