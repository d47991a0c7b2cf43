"""``torch.use_deterministic_algorithms`` and its kin: accepted, since every run is.

torch makes its nondeterministic kernels raise (or warn, with ``warn_only``) once
deterministic algorithms are asked for.  Every operation here is deterministic (the same
inputs give the same values and the same trace, bit for bit), so asking changes nothing
but what the getters report, as it would on a machine whose every kernel is
deterministic.  Arguments are checked as torch checks them.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorTypeError, TensorValueError

__all__ = [
    "are_deterministic_algorithms_enabled",
    "get_deterministic_debug_mode",
    "is_deterministic_algorithms_warn_only_enabled",
    "set_deterministic_debug_mode",
    "use_deterministic_algorithms",
]

_state = {"enabled": False, "warn_only": False}
_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Remember ``mode`` and ``warn_only`` (every operation is deterministic already)."""
    if not isinstance(mode, bool):
        raise TensorTypeError(
            f"use_deterministic_algorithms(): argument 'mode' must be bool, not "
            f"{type(mode).__name__}"
        )
    if not isinstance(warn_only, bool):
        raise TensorTypeError(
            f"use_deterministic_algorithms(): argument 'warn_only' must be bool, not "
            f"{type(warn_only).__name__}"
        )
    _state["enabled"], _state["warn_only"] = mode, warn_only if mode else False


def are_deterministic_algorithms_enabled() -> bool:
    return _state["enabled"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]


def set_deterministic_debug_mode(debug_mode: Any) -> None:
    """``"default"``/0 off, ``"warn"``/1 warn only, ``"error"``/2 on (as torch maps them)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise TensorValueError(
                "invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                f"but got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES[debug_mode]
    if not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TensorTypeError(f"debug_mode must be str or int, but got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise TensorValueError(
            f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}"
        )
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _state["enabled"]:
        return 0
    return 1 if _state["warn_only"] else 2
