"""The argument checks and the reduction shared by the ``torch.nn.functional`` ops that
are compositions of tensor methods (:mod:`~kernbench.torch.nn.shrink_activations`,
:mod:`~kernbench.torch.nn.channel_ops`, the margin and likelihood losses, the bags).

Those ops call only tensor methods on anything that may require grad, so autograd
records the methods one by one and no formula of their own is needed.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.dtypes import BOOL
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "call_name",
    "floating_input",
    "host_values",
    "index_input",
    "number_argument",
    "reduced",
    "reduction_argument",
]

REDUCTIONS = ("none", "mean", "sum")


def call_name(what: str) -> str:
    """``torch.nn.functional.<what>``, as the messages name the call."""
    return f"torch.nn.functional.{what}"


def number_argument(value: Any, what: str, name: str) -> float:
    """A real number argument (not a bool) as a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorError(f"{call_name(what)}: {name} must be a number, got {value!r}")
    return float(value)


def floating_input(value: Any, what: str, name: str = "input") -> Tensor:
    """``value`` if it is a floating tensor; torch refuses integer inputs to these ops."""
    t = tensor_argument(value, call_name(what))
    if not t.dtype.is_floating_point:
        raise TensorError(
            f"{call_name(what)}: {name} must be a floating tensor, got {t.dtype!r} (as torch); "
            "call .float() first"
        )
    return t


def reduction_argument(
    what: str, reduction: Any, size_average: Any = None, reduce: Any = None
) -> str:
    """``reduction``, or what torch's legacy ``size_average``/``reduce`` ask for; another
    value is torch's ``ValueError``."""
    if size_average is not None or reduce is not None:
        reduction = "none" if reduce is False else "sum" if size_average is False else "mean"
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise TensorValueError(
            f"{call_name(what)}: {reduction!r} is not a valid value for reduction (valid: "
            f"{', '.join(map(repr, REDUCTIONS))})"
        )
    return reduction


def reduced(loss: Tensor, reduction: str) -> Tensor:
    """``loss`` itself, its mean or its sum."""
    if reduction == "none":
        return loss
    return loss.mean() if reduction == "mean" else loss.sum()


def index_input(value: Any, what: str, name: str = "target") -> Tensor:
    """``value`` if it is a tensor of an integer dtype (class indices; torch's are int64)."""
    t = tensor_argument(value, call_name(what))
    if t.dtype.is_floating_point or t.dtype is BOOL:
        raise TensorError(
            f"{call_name(what)}: {name} must hold class indices of an integer dtype, got "
            f"{t.dtype!r}"
        )
    return t


def host_values(t: Tensor) -> np.ndarray | None:
    """``t``'s values read on the host at no simulated cost (torch's CPU kernels check
    indices there), or None in timing-only mode, which has no values."""
    if t.storage_device_tensor.context.timing_only:
        return None
    return t.peek()
