"""``torch.testing.assert_close``: PyTorch's comparison, on values read back to the host.

Tensors are read through the fabric (``.numpy()``: the reads cost time, the
comparison none).  Default tolerances are PyTorch's per dtype; a mismatch
raises ``AssertionError`` with PyTorch's message (mismatched elements, the
greatest absolute and relative differences and where).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.tensor import Tensor

__all__ = ["assert_close"]

# PyTorch's defaults: dtype name -> (rtol, atol); integers compare exactly.
_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def _values(value: Any, which: str) -> tuple[np.ndarray, Any, str]:
    """The values (float64), the torch dtype (None for others) and the dtype's name that
    picks the default tolerances (Python floats are float64's, ints exact)."""
    if isinstance(value, Tensor):
        return np.asarray(value.numpy(), dtype=np.float64), value.dtype, value.dtype.name
    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(value, dtype=np.float64), None, np.asarray(value).dtype.name
    if isinstance(value, bool | int | float | list | tuple):
        given = np.asarray(value)
        kind = "float64" if given.dtype.kind == "f" else "int64"
        return np.asarray(value, dtype=np.float64), None, kind
    raise TensorError(
        f"torch.testing.assert_close: {which} is a Tensor or numbers, got {type(value).__name__}"
    )


def _fail(message: str, msg: str | Callable[[str], str] | None) -> None:
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = msg
    raise AssertionError(message)


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close, as torch's."""
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}."
        )
    if isinstance(actual, Tensor) != isinstance(expected, Tensor):
        raise TypeError(
            f"No comparison pair was able to handle inputs of type {type(actual)} and "
            f"{type(expected)}."
        )
    a, a_dtype, a_kind = _values(actual, "actual")
    e, e_dtype, _ = _values(expected, "expected")
    if a.shape != e.shape:
        _fail(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.", msg)
    if check_device and isinstance(actual, Tensor) and actual.device != expected.device:
        _fail(
            f"The values for attribute 'device' do not match: {actual.device} != "
            f"{expected.device}.",
            msg,
        )
    if check_dtype and a_dtype is not e_dtype:
        _fail(f"The values for attribute 'dtype' do not match: {a_dtype} != {e_dtype}.", msg)
    if rtol is None:
        rtol, atol = _TOLERANCES.get(a_kind, (0.0, 0.0))
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
        close |= (a == e) | (equal_nan & np.isnan(a) & np.isnan(e))
    if close.all():
        return
    bad = int((~close).sum())
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        absolute = np.where(close, 0.0, np.abs(a - e))
        relative = np.where(close, 0.0, absolute / np.abs(e))
    absolute = np.nan_to_num(absolute, nan=np.inf, posinf=np.inf)
    relative = np.nan_to_num(relative, nan=np.inf, posinf=np.inf)
    at_abs = np.unravel_index(int(np.argmax(absolute)), a.shape) if a.shape else ()
    at_rel = np.unravel_index(int(np.argmax(relative)), a.shape) if a.shape else ()
    exact = rtol == 0 and atol == 0
    verdict = "equal" if exact else "close"
    lines = [f"Tensor-likes are not {verdict}!" if a.shape else f"Scalars are not {verdict}!", ""]
    if a.shape:
        lines.append(f"Mismatched elements: {bad} / {a.size} ({100 * bad / a.size:.1f}%)")
    where_abs = f" at index {tuple(int(i) for i in at_abs)}" if a.shape else ""
    where_rel = f" at index {tuple(int(i) for i in at_rel)}" if a.shape else ""
    allowed_abs = "" if exact else f" (up to {atol:g} allowed)"
    allowed_rel = "" if exact else f" (up to {rtol:g} allowed)"
    lines.append(f"Greatest absolute difference: {float(absolute.max()):g}{where_abs}{allowed_abs}")
    lines.append(f"Greatest relative difference: {float(relative.max()):g}{where_rel}{allowed_rel}")
    _fail("\n".join(lines), msg)
