"""How a tensor's values print: PyTorch's ``tensor([...])`` number formats.

Floats print as PyTorch prints them: whole numbers as ``1.``, others with
four decimals, and in scientific notation when the magnitudes span more than
three orders or leave ``[1e-4, 1e8)``; every element is padded to one width.
Integers print as they are.  :func:`set_printoptions` changes the digits, the
summarising of large tensors and the line width, as ``torch.set_printoptions`` does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["format_values", "get_printoptions", "set_printoptions"]

_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": float("inf"), "edgeitems": 3, "linewidth": 80},
}
_options = dict(_DEFAULTS)


def set_printoptions(
    precision: int | None = None,
    threshold: float | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """``torch.set_printoptions``: digits after the point, the element count above which a
    tensor prints summarised (``edgeitems`` at each end of each dim), the line width,
    a ``profile`` (``"default"``, ``"short"``, ``"full"``) and ``sci_mode`` (``None``: as
    the values need).  Process-wide, as in torch."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(
                f"set_printoptions: profile must be one of {', '.join(_PROFILES)}, got {profile!r}"
            )
        _options.update(_PROFILES[profile])
    for name, value in (
        ("precision", precision),
        ("threshold", threshold),
        ("edgeitems", edgeitems),
        ("linewidth", linewidth),
    ):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"set_printoptions: {name} must be a number >= 0, got {value!r}")
            _options[name] = value
    _options["sci_mode"] = sci_mode


def get_printoptions() -> dict:
    """The options :func:`set_printoptions` set (torch's ``torch._tensor_str.PRINT_OPTS``)."""
    return dict(_options)


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
    if _options["sci_mode"] is not None:
        sci = bool(_options["sci_mode"])
    digits = int(_options["precision"])
    if sci:
        return lambda v: f"{v:.{digits}e}"
    if whole:
        return lambda v: f"{v:.0f}." if np.isfinite(v) else f"{v}"
    return lambda v: f"{v:.{digits}f}" if np.isfinite(v) else f"{v}"


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
        max_line_width=int(_options["linewidth"]),
        threshold=int(min(_options["threshold"], np.iinfo(np.int64).max)),
        edgeitems=int(_options["edgeitems"]),
    )
