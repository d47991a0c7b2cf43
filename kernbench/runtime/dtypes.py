"""Element types of device tensors and how their bytes are stored.

Every dtype has a storage NumPy dtype (what the memory store holds) and a
value NumPy dtype (what ``numpy()`` returns).  They differ only for
``bfloat16``, stored as its 16 bits and read back as float32.  ``bool`` is
one byte per element (0 or 1), as NumPy and PyTorch store it; converting
values to it makes every nonzero value (NaN too) True.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernbench.errors import TensorError

__all__ = ["DType", "DTYPES", "as_dtype", "float32_to_bfloat16_bits", "bfloat16_bits_to_float32"]


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even), as uint16 bits."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    rounded = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():  # keep NaN a (quiet) NaN instead of rounding it to infinity
        rounded[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)
    return rounded


def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


@dataclass(frozen=True)
class DType:
    """One element type: its name, size and NumPy representations."""

    name: str
    itemsize: int
    storage: np.dtype
    value: np.dtype

    @property
    def is_floating_point(self) -> bool:
        return self.value.kind == "f"

    def to_storage(self, values: np.ndarray) -> np.ndarray:
        """Values (any numeric array) -> contiguous storage array of this dtype."""
        shape = np.shape(values)
        if self.name == "bfloat16":
            stored = float32_to_bfloat16_bits(np.asarray(values, dtype=np.float32))
        else:
            stored = np.ascontiguousarray(values, dtype=self.storage)
        return stored.reshape(shape)  # ascontiguousarray makes a 0-d array 1-d

    def from_storage(self, stored: np.ndarray) -> np.ndarray:
        if self.name == "bfloat16":
            return bfloat16_bits_to_float32(stored)
        return stored.view(self.storage)

    def __repr__(self) -> str:
        return f"kernbench.{self.name}"


def _make(name: str, storage: str, value: str | None = None) -> DType:
    s = np.dtype(storage)
    return DType(name, s.itemsize, s, np.dtype(value or storage))


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        _make("float16", "float16"),
        _make("bfloat16", "uint16", "float32"),
        _make("float32", "float32"),
        _make("float64", "float64"),
        _make("int8", "int8"),
        _make("int16", "int16"),
        _make("int32", "int32"),
        _make("int64", "int64"),
        _make("uint8", "uint8"),
        _make("uint16", "uint16"),
        _make("uint32", "uint32"),
        _make("uint64", "uint64"),
        _make("bool", "bool"),
    )
}
_ALIASES = {
    "f16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "float": "float32",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "int": "int32",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
}


def as_dtype(dtype: object) -> DType:
    """A :class:`DType` from a DType, a name (``"float32"``, ``"bf16"``) or a NumPy dtype."""
    if isinstance(dtype, DType):
        return dtype
    name = getattr(dtype, "runtime_dtype_name", None)  # torch-like dtype objects
    if isinstance(name, str):
        return DTYPES[name]
    if isinstance(dtype, str):
        key = _ALIASES.get(dtype, dtype)
        if key in DTYPES:
            return DTYPES[key]
    else:
        try:
            np_name = np.dtype(dtype).name
        except (TypeError, ValueError):  # ValueError: an object whose .dtype is no dtype
            np_name = None
        if np_name in DTYPES:
            return DTYPES[np_name]
    raise TensorError(f"unsupported dtype {dtype!r}; valid: {', '.join(DTYPES)}")
