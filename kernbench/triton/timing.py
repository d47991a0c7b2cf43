"""Which simulated clock a kernel launch is timed on.

Kernels on device tensors run on the machine of those tensors' context, so a
launch is timed on that context's clock (:func:`clock_of`).  A launch on host
NumPy arrays runs in the interpreter and takes no simulated time: it has no
clock, and its time is 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernbench.runtime import DeviceTensor, RuntimeContext

__all__ = ["PS_PER_MS", "clock_of"]

PS_PER_MS = 10**9


def clock_of(values: Iterable[Any]) -> RuntimeContext | None:
    """The context of the first device tensor among ``values`` (torch tensors unwrapped)."""
    for value in values:
        unwrap = getattr(type(value), "__kernel_arg__", None)
        if unwrap is not None:
            value = unwrap(value)
        if isinstance(value, DeviceTensor):
            return value.context
    return None
