"""``torch.testing.assert_close``: PyTorch's comparison, on values read back to the host.

Tensors are read through the fabric (``.numpy()``: the reads cost time, the
comparison none).  Default tolerances are PyTorch's per dtype; a mismatch
raises ``AssertionError`` with PyTorch's message (mismatched elements, the
greatest absolute and relative differences and where).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.tensor import Tensor

__all__ = ["assert_close"]

# PyTorch's defaults: dtype name -> (rtol, atol); integers and bools compare exactly.
_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}
_PYTHON_KINDS = {bool: "bool", int: "int64", float: "float64"}


def _values(value: Any, which: str) -> tuple[np.ndarray, Any, str]:
    """The values in their own dtype (``bfloat16`` read as float32), the dtype
    ``check_dtype`` compares (None for lists, which torch compares element by element, and
    for a number against an array)
    and the dtype's name that picks the default tolerances."""
    if isinstance(value, Tensor):
        return np.asarray(value.numpy()), value.dtype, value.dtype.name
    if isinstance(value, np.ndarray):
        name = value.dtype.name
        return value, DTYPE_OBJECTS.get(name, value.dtype), name
    if isinstance(value, bool | int | float | np.generic | list | tuple):
        given = np.asarray(value)
        return given, None, "float64" if given.dtype.kind == "f" else "int64"
    raise TensorError(
        f"torch.testing.assert_close: {which} is a Tensor or numbers, got {type(value).__name__}"
    )


def _tolerances(*kinds: str) -> tuple[float, float]:
    """torch's default tolerances for a pair: the loosest of the two dtypes'."""
    rtols, atols = zip(*(_TOLERANCES.get(kind, (0.0, 0.0)) for kind in kinds), strict=True)
    return max(rtols), max(atols)


def _fail(message: str, msg: str | Callable[[str], str] | None) -> None:
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = msg
    raise AssertionError(message)


def _number(value: Any) -> bool | int | float | None:
    """A Python or NumPy scalar as torch's number pairs take it (``.item()``), else None."""
    if isinstance(value, np.generic):
        value = value.item()
    return value if isinstance(value, bool | int | float) else None


def _mismatch(
    what: str, differences: list[tuple[str, Any, str, float]], rtol: float, atol: float
) -> str:
    """torch's message: the verdict, then each (kind, difference, where, allowed) line."""
    exact = rtol == 0 and atol == 0
    lines = [f"{what} are not {'equal' if exact else 'close'}!", ""]
    for kind, difference, where, allowed in differences:
        tail = "" if exact else f" (up to {allowed} allowed)"
        lines.append(f"{kind} difference: {difference}{where}{tail}")
    return "\n".join(lines)


def _compare_numbers(
    actual: bool | int | float,
    expected: bool | int | float,
    rtol: float | None,
    atol: float | None,
    equal_nan: bool,
    check_dtype: bool,
    msg: str | Callable[[str], str] | None,
) -> None:
    """Two Python numbers, as torch's ``BooleanPair`` and ``NumberPair``: exact in Python's
    arithmetic (so ints of any size), the types compared when ``check_dtype``."""
    if isinstance(actual, bool) and isinstance(expected, bool):
        if actual is not expected:
            _fail(f"Booleans mismatch: {actual} is not {expected}", msg)
        return
    if check_dtype and type(actual) is not type(expected):
        _fail(f"The (d)types do not match: {type(actual)} != {type(expected)}.", msg)
    if rtol is None or atol is None:
        rtol, atol = _tolerances(_PYTHON_KINDS[type(actual)], _PYTHON_KINDS[type(expected)])
    if actual == expected or (equal_nan and math.isnan(actual) and math.isnan(expected)):
        return
    difference = abs(actual - expected)
    if math.isfinite(difference) and difference <= atol + rtol * abs(expected):
        return
    relative = math.inf if expected == 0 else difference / abs(expected)
    lines = [("Absolute", difference, "", atol), ("Relative", relative, "", rtol)]
    _fail(_mismatch("Scalars", lines, rtol, atol), msg)


def _exact_pair(a: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer or bool values in one dtype that holds both exactly (object for int64 with
    uint64, which NumPy would promote to float64)."""
    common = np.result_type(a, e)
    if common.kind == "f":
        common = np.dtype(object)
    return a.astype(common), e.astype(common)


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
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close, as torch's.

    Integer and bool values compare exactly (int64 values past 2**53 included), as
    torch's default tolerances of 0 for them do; with tolerances given, integers that
    differ are compared as floats, as torch's ``isclose`` does.
    """
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
    a_number, e_number = _number(actual), _number(expected)
    if a_number is not None and e_number is not None:
        _compare_numbers(a_number, e_number, rtol, atol, equal_nan, check_dtype, msg)
        return
    a, a_dtype, a_kind = _values(actual, "actual")
    e, e_dtype, e_kind = _values(expected, "expected")
    if a.shape != e.shape:
        _fail(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.", msg)
    if check_device and isinstance(actual, Tensor) and actual.device != expected.device:
        _fail(
            f"The values for attribute 'device' do not match: {actual.device} != "
            f"{expected.device}.",
            msg,
        )
    if check_dtype and a_dtype is not None and e_dtype is not None and a_dtype != e_dtype:
        _fail(f"The values for attribute 'dtype' do not match: {a_dtype} != {e_dtype}.", msg)
    if rtol is None or atol is None:
        rtol, atol = _tolerances(a_kind, e_kind)
    exact_values = a.dtype.kind in "biu" and e.dtype.kind in "biu"
    if exact_values:
        a, e = _exact_pair(a, e)
        close = np.asarray(a == e, dtype=bool)
    else:
        a, e = a.astype(np.float64), e.astype(np.float64)
        close = (a == e) | (equal_nan & np.isnan(a) & np.isnan(e))
    if (rtol or atol) and not close.all():
        wide_a, wide_e = a.astype(np.float64), e.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            close |= np.isclose(wide_a, wide_e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if close.all():
        return
    bad = ~close
    absolute = np.zeros(a.shape, dtype=object if exact_values else np.float64)
    relative = np.zeros(a.shape)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if exact_values:  # exact differences, as torch's int64 ones
            absolute[bad] = np.abs(a[bad].astype(object) - e[bad].astype(object))
        else:
            absolute[bad] = np.abs(a[bad] - e[bad])
        relative[bad] = absolute[bad].astype(np.float64) / np.abs(e[bad].astype(np.float64))
    if not exact_values:
        absolute = np.nan_to_num(absolute, nan=np.inf, posinf=np.inf)
    relative = np.nan_to_num(relative, nan=np.inf, posinf=np.inf)
    at_abs = int(np.argmax(absolute)) if a.size else 0
    at_rel = int(np.argmax(relative)) if a.size else 0
    biggest_abs, biggest_rel = absolute.flat[at_abs], float(relative.flat[at_rel])
    biggest_abs = int(biggest_abs) if exact_values else float(biggest_abs)
    if not a.shape:
        lines = [("Absolute", biggest_abs, "", atol), ("Relative", biggest_rel, "", rtol)]
        _fail(_mismatch("Scalars", lines, rtol, atol), msg)
    count = int(bad.sum())
    where_abs = f" at index {tuple(int(i) for i in np.unravel_index(at_abs, a.shape))}"
    where_rel = f" at index {tuple(int(i) for i in np.unravel_index(at_rel, a.shape))}"
    lines = [
        ("Greatest absolute", biggest_abs, where_abs, atol),
        ("Greatest relative", biggest_rel, where_rel, rtol),
    ]
    message = _mismatch("Tensor-likes", lines, rtol, atol).split("\n")
    message.insert(2, f"Mismatched elements: {count} / {a.size} ({100 * count / a.size:.1f}%)")
    _fail("\n".join(message), msg)
