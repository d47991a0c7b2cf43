"""``torch.testing.assert_close``: PyTorch's comparison, on values read back to the host.

Tensors are read through the fabric (``.numpy()``: the reads cost time, the
comparison none).  Default tolerances are PyTorch's per dtype; a mismatch
raises ``AssertionError`` with PyTorch's message (mismatched elements, the
greatest absolute and relative differences and where).  Sequences (lists, tuples;
not strings) and mappings are compared item by item, as torch's ``originate_pairs``
does: their lengths or keys first, then each pair with its own dtype rules, the first
failing one reported with torch's "The failure occurred for item [i]" line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

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
# What one pair compares (a sequence or mapping is split into pairs first).
_COMPARABLE = (Tensor, np.ndarray, bool, int, float, np.generic)


def _values(value: Any) -> tuple[np.ndarray, Any, str]:
    """The values of a tensor, an array or a number in their own dtype (``bfloat16`` read
    as float32), the dtype ``check_dtype`` compares (None for a number against an array)
    and the dtype's name that picks the default tolerances."""
    if isinstance(value, Tensor):
        return np.asarray(value.numpy(force=True)), value.dtype, value.dtype.name
    if isinstance(value, np.ndarray):
        name = value.dtype.name
        return value, DTYPE_OBJECTS.get(name, value.dtype), name
    given = np.asarray(value)  # a number (the pairs hold nothing else)
    return given, None, "float64" if given.dtype.kind == "f" else "int64"


def _tolerances(*kinds: str) -> tuple[float, float]:
    """torch's default tolerances for a pair: the loosest of the two dtypes'."""
    rtols, atols = zip(*(_TOLERANCES.get(kind, (0.0, 0.0)) for kind in kinds), strict=True)
    return max(rtols), max(atols)


class _Failure(Exception):
    """A comparison that failed: the error type and torch's message, before the item's
    place and the caller's ``msg`` are added (torch's ``ErrorMeta``)."""

    def __init__(self, kind: type[Exception], message: str, where: tuple[Any, ...] = ()):
        super().__init__(message)
        self.kind, self.message, self.where = kind, message, where

    def error(self, msg: str | Callable[[str], str] | None) -> Exception:
        if isinstance(msg, str):
            return self.kind(msg)
        message = self.message
        if self.where:
            message += "\n\nThe failure occurred for item " + "".join(
                str([item]) for item in self.where
            )
        return self.kind(msg(message) if callable(msg) else message)


def _fail(message: str) -> None:
    raise _Failure(AssertionError, message)


def _pairs(actual: Any, expected: Any, where: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """(where, actual, expected) for each leaf pair, as torch's ``originate_pairs``:
    sequences by index (their lengths must match), mappings by key (their keys must)."""
    if (
        isinstance(actual, Sequence)
        and not isinstance(actual, str)
        and isinstance(expected, Sequence)
        and not isinstance(expected, str)
    ):
        if len(actual) != len(expected):
            raise _Failure(
                AssertionError,
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                where,
            )
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            yield from _pairs(a, e, (*where, index))
    elif isinstance(actual, Mapping) and isinstance(expected, Mapping):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            raise _Failure(
                AssertionError,
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {sorted(expected_keys - actual_keys)}\n"
                f"Additional keys in the actual mapping: {sorted(actual_keys - expected_keys)}",
                where,
            )
        keys: Any = actual_keys
        try:
            keys = sorted(keys)
        except TypeError:
            pass
        for key in keys:
            yield from _pairs(actual[key], expected[key], (*where, key))
    elif isinstance(actual, Tensor) != isinstance(expected, Tensor) or not all(
        isinstance(v, _COMPARABLE) for v in (actual, expected)
    ):
        raise _Failure(
            TypeError,
            f"No comparison pair was able to handle inputs of type {type(actual)} and "
            f"{type(expected)}.",
            where,
        )
    else:
        yield where, actual, expected


def _number(value: Any) -> bool | int | float | None:
    """A Python or NumPy scalar as torch's number pairs take it (``.item()``), else None."""
    if isinstance(value, np.generic):
        value = value.item()
    return value if isinstance(value, bool | int | float) else None


def _mismatch(
    what: str,
    differences: list[tuple[str, Any, str, float]],
    rtol: float,
    atol: float,
    extra: str = "",
) -> str:
    """torch's message: the verdict, its ``extra`` line, then each (kind, difference,
    where, allowed) line."""
    exact = rtol == 0 and atol == 0
    lines = [f"{what} are not {'equal' if exact else 'close'}!", ""]
    if extra:
        lines.append(extra)
    for kind, difference, where, allowed in differences:
        tail = "" if exact else f" (up to {allowed} allowed)"
        lines.append(f"{kind} difference: {difference}{where}{tail}")
    return "\n".join(lines)


def _expected_line(actual: Any, expected: Any) -> str:
    """The line torch's scalar mismatch message has before the differences."""
    return f"Expected {expected} but got {actual}."


def _compare_numbers(
    actual: bool | int | float,
    expected: bool | int | float,
    rtol: float | None,
    atol: float | None,
    equal_nan: bool,
    check_dtype: bool,
) -> None:
    """Two Python numbers, as torch's ``BooleanPair`` and ``NumberPair``: exact in Python's
    arithmetic (so ints of any size), the types compared when ``check_dtype``."""
    if isinstance(actual, bool) and isinstance(expected, bool):
        if actual is not expected:
            _fail(f"Booleans mismatch: {actual} is not {expected}")
        return
    if check_dtype and type(actual) is not type(expected):
        _fail(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
    if rtol is None or atol is None:
        rtol, atol = _tolerances(_PYTHON_KINDS[type(actual)], _PYTHON_KINDS[type(expected)])
    if actual == expected or (equal_nan and math.isnan(actual) and math.isnan(expected)):
        return
    difference = abs(actual - expected)
    if math.isfinite(difference) and difference <= atol + rtol * abs(expected):
        return
    relative = math.inf if expected == 0 else difference / abs(expected)
    lines = [("Absolute", difference, "", atol), ("Relative", relative, "", rtol)]
    _fail(_mismatch("Scalars", lines, rtol, atol, _expected_line(actual, expected)))


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
    differ are compared as floats, as torch's ``isclose`` does.  Sequences and mappings
    are compared item by item (lengths and keys first).
    """
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}."
        )
    try:
        pairs = list(_pairs(actual, expected, ()))  # torch checks every length and key first
        for where, a, e in pairs:
            try:
                _compare(a, e, rtol, atol, equal_nan, check_device, check_dtype)
            except _Failure as failure:
                failure.where = where
                raise
    except _Failure as failure:
        raise failure.error(msg) from None


def _compare(
    actual: Any,
    expected: Any,
    rtol: float | None,
    atol: float | None,
    equal_nan: bool,
    check_device: bool,
    check_dtype: bool,
) -> None:
    """One pair (tensors, arrays or numbers), as torch's ``TensorLikePair`` and
    ``NumberPair``; a :class:`_Failure` when they differ."""
    a_number, e_number = _number(actual), _number(expected)
    if a_number is not None and e_number is not None:
        _compare_numbers(a_number, e_number, rtol, atol, equal_nan, check_dtype)
        return
    a, a_dtype, a_kind = _values(actual)
    e, e_dtype, e_kind = _values(expected)
    if a.shape != e.shape:
        _fail(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.")
    if check_device and isinstance(actual, Tensor) and actual.device != expected.device:
        _fail(
            f"The values for attribute 'device' do not match: {actual.device} != {expected.device}."
        )
    if check_dtype and a_dtype is not None and e_dtype is not None and a_dtype != e_dtype:
        _fail(f"The values for attribute 'dtype' do not match: {a_dtype} != {e_dtype}.")
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
    if not a.shape:  # torch reports a 0-dim pair by its item()s, in Python's arithmetic
        x, y = a.item(), e.item()
        difference = abs(x - y)
        relative = math.inf if y == 0 else difference / abs(y)
        lines = [("Absolute", difference, "", atol), ("Relative", relative, "", rtol)]
        _fail(_mismatch("Scalars", lines, rtol, atol, _expected_line(x, y)))
    count = int(bad.sum())
    where_abs = f" at index {tuple(int(i) for i in np.unravel_index(at_abs, a.shape))}"
    where_rel = f" at index {tuple(int(i) for i in np.unravel_index(at_rel, a.shape))}"
    lines = [
        ("Greatest absolute", biggest_abs, where_abs, atol),
        ("Greatest relative", biggest_rel, where_rel, rtol),
    ]
    message = _mismatch("Tensor-likes", lines, rtol, atol).split("\n")
    message.insert(2, f"Mismatched elements: {count} / {a.size} ({100 * count / a.size:.1f}%)")
    _fail("\n".join(message))
