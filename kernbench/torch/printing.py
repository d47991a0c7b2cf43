"""How a tensor's values print: PyTorch's ``tensor([...])`` number formats.

Floats print as PyTorch prints them: whole numbers as ``1.``, others with
four decimals, and in scientific notation when the magnitudes span more than
three orders or leave ``[1e-4, 1e8)``; every element is padded to one width.
Integers print as they are.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["format_values"]


def _float_format(values: np.ndarray) -> Callable[[float], str]:
    finite = np.abs(values[np.isfinite(values)]).astype(np.float64)
    nonzero = finite[finite != 0]
    whole = bool(np.all(finite == np.ceil(finite)))
    if nonzero.size:
        top, bottom = float(nonzero.max()), float(nonzero.min())
        wide = top / bottom > 1000.0 or top > 1.0e8
        sci = wide if whole else wide or bottom < 1.0e-4
    else:
        sci = False
    if sci:
        return lambda v: f"{v:.4e}"
    if whole:
        return lambda v: f"{v:.0f}." if np.isfinite(v) else f"{v}"
    return lambda v: f"{v:.4f}" if np.isfinite(v) else f"{v}"


def format_values(values: np.ndarray, prefix: str) -> str:
    """The body of ``tensor(...)`` for ``values``, continuation lines aligned after ``prefix``."""
    if values.dtype.kind == "f":
        fmt = _float_format(values)
        # as torch, the width is that of the finite non-zero values: nan and inf do not widen
        sized = values[np.isfinite(values) & (values != 0)]
    else:
        fmt = str
        sized = values
    width = max((len(fmt(v)) for v in sized.flat), default=1)
    return np.array2string(
        values,
        separator=", ",
        prefix=prefix,
        formatter={"all": lambda v: fmt(v).rjust(width)},
        max_line_width=80,
    )
