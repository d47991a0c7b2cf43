"""Result rows: what a bench returns (a list of dicts) to fill its report and CSV.

A row is checked when the bench hands it over, so that a value a report cannot
hold (a tensor, an object) is an error naming its row and key then, not a
failure to write the report once the whole run is over.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import ResultRowError, shown

__all__ = ["MAX_DEPTH", "ROW_VALUES", "check_rows", "is_rows"]

#: What a row's values may be, as its error says.
ROW_VALUES = (
    "numbers, text, booleans, None, NumPy numbers and arrays, and lists, tuples and "
    "dicts (with text keys) of them"
)

#: How deeply lists and dicts may nest in a row value (a report's JSON writer recurses).
MAX_DEPTH = 100

_SCALARS = (str, int, float, bool, type(None))
_PLAIN_KINDS = "biufU"  # NumPy dtypes whose .tolist() JSON holds: bool, integers, floats, text


def is_rows(value: Any) -> bool:
    """Whether ``value`` is result rows: a non-empty list of dicts."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def check_rows(rows: list[dict], whose: str) -> None:
    """Raise :class:`~kernbench.errors.ResultRowError` at the first key or value of
    ``rows`` a report (JSON) or a CSV cannot hold, naming the row, the key and what
    may be there; ``whose`` says where the rows came from (``rank 0's return``)."""
    for index, row in enumerate(rows):
        for key, value in row.items():
            where = f"result row {index} of {whose}"
            if not isinstance(key, str):
                raise ResultRowError(
                    f"{where} has a key {shown(repr(key), 80)} of type {type(key).__name__}; "
                    "row keys are text (column names)"
                )
            bad = _unplain(value)
            if isinstance(bad, _TooDeep):
                raise ResultRowError(
                    f"{where}, key {key!r}: lists and dicts nest more than {MAX_DEPTH} deep "
                    "in its value; a report holds them at most that deep"
                )
            if bad is not None:
                hint = " (a tensor: .item() or .tolist())" if hasattr(bad, "numpy") else ""
                kind = type(bad).__name__
                if isinstance(bad, np.generic | np.ndarray):
                    kind += f" of {bad.dtype}"
                raise ResultRowError(
                    f"{where}, key {key!r}: a value of type {kind} cannot go "
                    f"in a report or CSV{hint}; row values are {ROW_VALUES}"
                )


def _unplain(value: Any) -> Any:
    """The first value inside ``value`` that is not plain data, or ``None``."""
    pending, seen = [(value, 0)], set()
    while pending:
        item, depth = pending.pop()
        if depth > MAX_DEPTH:
            return _TooDeep()
        if isinstance(item, _SCALARS):
            continue
        if isinstance(item, np.generic | np.ndarray):
            if item.dtype.kind in _PLAIN_KINDS:
                continue
            return item
        if id(item) in seen:
            continue
        if isinstance(item, list | tuple):
            seen.add(id(item))
            pending.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, dict):
            seen.add(id(item))
            if not all(isinstance(k, str | int | float | bool | type(None)) for k in item):
                return next(k for k in item if not isinstance(k, _SCALARS))
            pending.extend((inner, depth + 1) for inner in item.values())
        else:
            return item
    return None


class _TooDeep:
    """What :func:`_unplain` finds past :data:`MAX_DEPTH`."""
