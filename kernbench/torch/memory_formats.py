"""``torch.memory_format`` and its four values, and the check every ``memory_format=``
argument goes through.

Every tensor made here is row-major (torch's ``contiguous_format``), so
``contiguous_format`` and ``preserve_format`` ask for what an operation does
anyway and are accepted as the no-ops they are.  ``channels_last`` and
``channels_last_3d`` ask for another layout, which no operation makes: they
raise a :class:`~kernbench.errors.TensorError` saying to drop the argument.
``Tensor.is_contiguous(memory_format=torch.channels_last)`` still answers from
the strides, as torch does (a permuted view can be channels-last contiguous).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernbench.errors import TensorError, TensorTypeError

__all__ = [
    "channels_last",
    "channels_last_3d",
    "check_memory_format",
    "contiguous_format",
    "is_contiguous_as",
    "memory_format",
    "preserve_format",
]


_MADE_HERE = object()  # only this module makes memory formats, as only torch makes its four


class memory_format:  # noqa: N801 - torch's name
    """How an operation is asked to lay out its result (``torch.contiguous_format``, ...)."""

    __slots__ = ("_name",)

    def __init__(self, name: Any = None, maker: Any = None) -> None:
        if maker is not _MADE_HERE:
            raise TensorTypeError("cannot create 'torch.memory_format' instances")
        self._name = name

    def __repr__(self) -> str:
        return f"torch.{self._name}"

    def __reduce__(self) -> str:
        return self._name  # the module's own value: pickles and copies are the same object


contiguous_format = memory_format("contiguous_format", _MADE_HERE)
preserve_format = memory_format("preserve_format", _MADE_HERE)
channels_last = memory_format("channels_last", _MADE_HERE)
channels_last_3d = memory_format("channels_last_3d", _MADE_HERE)

# The dims of a channels-last tensor from the fastest to the slowest: C, then W, H (and D), N.
_CHANNELS_LAST_ORDER = {channels_last: (1, 3, 2, 0), channels_last_3d: (1, 4, 3, 2, 0)}


def check_memory_format(
    value: Any, call: str, *, optional: bool = True, preserve: bool = True
) -> memory_format:
    """``value`` as the ``memory_format=`` of ``call``, refused unless it is a no-op here.

    ``optional``: whether torch takes None (it does where its default is
    ``preserve_format``); ``preserve``: whether ``call`` takes
    ``preserve_format`` (``torch.empty`` does not: it has no input to preserve).
    """
    if value is None and optional:
        return preserve_format
    if not isinstance(value, memory_format):
        raise TensorTypeError(
            f"{call}(): argument 'memory_format' must be torch.memory_format, not "
            f"{type(value).__name__}"
        )
    if value is preserve_format and not preserve:
        raise TensorError(
            f"{call}: unsupported memory format torch.preserve_format (torch refuses it too: "
            "there is no input whose layout to keep); use torch.contiguous_format"
        )
    if value in _CHANNELS_LAST_ORDER:
        raise TensorError(
            f"{call}: memory_format={value} is not modelled: tensors here are row-major "
            "(torch.contiguous_format); drop memory_format="
        )
    return value


def is_contiguous_as(
    value: Any, shape: Sequence[int], strides: Sequence[int], contiguous: bool
) -> bool:
    """``Tensor.is_contiguous(memory_format=value)`` for a tensor of ``shape`` and
    ``strides`` (``contiguous``: its row-major answer), as torch computes it."""
    if not isinstance(value, memory_format):
        raise TensorTypeError(
            "is_contiguous(): argument 'memory_format' must be torch.memory_format, not "
            f"{type(value).__name__}"
        )
    order = _CHANNELS_LAST_ORDER.get(value)
    if order is None:
        return contiguous
    if len(shape) != len(order):
        return False
    expected = 1
    for dim in order:
        if shape[dim] != 1:
            if strides[dim] != expected:
                return False
            expected *= shape[dim]
    return True
