"""Whether operations record the graph: ``no_grad``, ``enable_grad``, ``set_grad_enabled``,
``inference_mode`` and ``is_grad_enabled``, one switch per rank.

torch keeps the switch per thread; here each rank is a greenlet that may yield to the
scheduler inside a ``with torch.no_grad():`` block, so the switch is kept per rank (in
the rank's ``local`` state), and a module-wide one outside ranks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kernbench.distributed.scheduler import current_rank
from kernbench.errors import TensorError

__all__ = [
    "enable_grad",
    "inference_mode",
    "is_grad_enabled",
    "no_grad",
    "set_grad_enabled",
    "set_enabled",
]

_RANK_KEY = "torch.grad_enabled"
_GLOBAL = [True]


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad record the graph (the default)."""
    rank = current_rank()
    if rank is None:
        return _GLOBAL[0]
    return rank.local.get(_RANK_KEY, True)


def set_enabled(mode: bool) -> None:
    """Switch recording on or off for the calling rank (KernBench only; torch's
    ``set_grad_enabled(mode)`` called as a function does this)."""
    rank = current_rank()
    if rank is None:
        _GLOBAL[0] = mode
    else:
        rank.local[_RANK_KEY] = mode


class _GradMode:
    """A context manager and decorator that sets the mode and restores the previous one."""

    def __init__(self, mode: bool) -> None:
        self.mode = mode
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        self._previous.append(is_grad_enabled())
        set_enabled(self.mode)

    def __exit__(self, *exc: object) -> None:
        set_enabled(self._previous.pop())

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        mode = self.mode

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            with _GradMode(mode):
                return fn(*args, **kwargs)

        return call


class no_grad(_GradMode):  # noqa: N801 - torch's name
    """Operations inside record nothing: results do not require grad (as torch's)."""

    def __init__(self) -> None:
        super().__init__(False)


class enable_grad(_GradMode):  # noqa: N801 - torch's name
    """Recording on inside, also within a ``no_grad`` block."""

    def __init__(self) -> None:
        super().__init__(True)


class inference_mode(_GradMode):  # noqa: N801 - torch's name
    """``inference_mode(mode=True)``: as ``no_grad`` here (there are no inference tensors;
    results are ordinary tensors that do not require grad)."""

    def __init__(self, mode: bool = True) -> None:
        if not isinstance(mode, bool):
            raise TensorError(f"inference_mode: mode must be a bool, got {mode!r}")
        super().__init__(not mode)


class set_grad_enabled(_GradMode):  # noqa: N801 - torch's name
    """``set_grad_enabled(mode)``: switches recording at once (as a call), and back on
    leaving when used as a context manager, as torch's; as a decorator it applies only
    inside the decorated function."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TensorError(f"set_grad_enabled: mode must be a bool, got {mode!r}")
        super().__init__(mode)
        self._before = is_grad_enabled()
        set_enabled(mode)

    def __enter__(self) -> None:
        self._previous.append(self._before)
        set_enabled(self.mode)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        set_enabled(self._before)
        return super().__call__(fn)
