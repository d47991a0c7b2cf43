"""``torch.finfo`` and ``torch.iinfo``: the limits of a dtype, as plain Python numbers.

Masking code reaches for ``torch.finfo(scores.dtype).min`` and ``.eps``; these
answer as torch does (the same attributes and values; ``bfloat16``'s from its
8-bit exponent and 7-bit mantissa).  They describe a dtype and make no tensor,
so ``torch.float64`` and ``torch.int64`` are answered too, though tensors here
hold at most 32-bit values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import TensorTypeError
from kernbench.torch.dtypes import TorchDType, get_default_dtype

__all__ = ["finfo", "iinfo"]

_BFLOAT16 = {
    "bits": 16,
    "eps": 2.0**-7,
    "max": float(np.float32(3.3895313892515355e38)),
    "tiny": 2.0**-126,
    "resolution": 0.01,
}
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _dtype_of(call: str, value: Any) -> TorchDType:
    if not isinstance(value, TorchDType):
        raise TensorTypeError(
            f"{call}(): argument 'type' must be torch.dtype, not {type(value).__name__}"
        )
    return value


class finfo:  # noqa: N801 - torch's name
    """``torch.finfo(dtype)``: ``bits``, ``eps``, ``max``, ``min``, ``tiny`` (=
    ``smallest_normal``), ``resolution`` and ``dtype`` (its name) of a floating dtype;
    the default dtype's without an argument."""

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type: Any = None) -> None:  # noqa: A002 - torch's name
        dt = get_default_dtype() if type is None else _dtype_of("torch.finfo", type)
        if dt.name not in _FLOATS:
            raise TensorTypeError(
                f"torch.finfo() requires a floating point input type, got {dt!r}. Use "
                "torch.iinfo to handle 'torch.finfo'"
            )
        if dt.name == "bfloat16":
            bits, eps, top = _BFLOAT16["bits"], _BFLOAT16["eps"], _BFLOAT16["max"]
            tiny, resolution = _BFLOAT16["tiny"], _BFLOAT16["resolution"]
        else:
            info = np.finfo(np.dtype(dt.name))
            bits, eps, top = info.bits, float(info.eps), float(info.max)
            tiny, resolution = float(info.smallest_normal), 10.0**-info.precision
        self.bits, self.eps, self.max, self.min = bits, eps, top, -top
        self.tiny = self.smallest_normal = tiny
        self.resolution, self.dtype = resolution, dt.name

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:  # noqa: N801 - torch's name
    """``torch.iinfo(dtype)``: ``bits``, ``max``, ``min`` and ``dtype`` (its name) of an
    integer dtype."""

    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type: Any) -> None:  # noqa: A002 - torch's name
        dt = _dtype_of("torch.iinfo", type)
        if dt.name not in _INTEGERS:
            raise TensorTypeError(
                f"torch.iinfo() requires an integer input type, got {dt!r}. Use torch.finfo "
                "to handle 'torch.iinfo'"
            )
        info = np.iinfo(np.dtype(dt.name))
        self.bits, self.max, self.min, self.dtype = info.bits, int(info.max), int(info.min), dt.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
