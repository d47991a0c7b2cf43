"""Torch dtypes over KernBench's runtime dtypes, the default dtype, and type promotion.

``torch.float32`` and friends are :class:`TorchDType` objects, one per runtime
dtype (:data:`~kernbench.runtime.dtypes.DTYPES`); complex64 and complex128
exist so comparisons work, but making a tensor of them raises a
:class:`~kernbench.errors.TensorError` that names the valid dtypes.  The
promotion rules follow PyTorch, by category (bool < integer < float): two
floats give the wider (float16 and bfloat16 give float32), a float and an
integer or bool the float, two integers what NumPy promotes them to (if it is
an integer: int64 and uint64 are refused), an integer and a bool the integer;
a Python scalar of a higher category than the tensor's gives its category's
dtype (a float the default dtype, an int int64), otherwise the tensor's dtype.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.runtime.dtypes import DTYPES, DType, as_dtype

__all__ = [
    "BOOL",
    "DTYPE_OBJECTS",
    "UNSUPPORTED",
    "VALID_DTYPES",
    "TorchDType",
    "as_torch_dtype",
    "category",
    "check_data_fits",
    "check_scalar_fits",
    "get_default_dtype",
    "promote_types",
    "python_scalar",
    "runtime_dtype",
    "scalar_dtype",
    "scalar_result_dtype",
    "set_default_dtype",
]


class TorchDType:
    """``torch.float32`` and friends.

    ``runtime_dtype_name`` is the name of the runtime dtype the torch dtype
    stands for (``None`` when tensors cannot hold it); the runtime's
    :func:`~kernbench.runtime.dtypes.as_dtype` reads it, so a torch dtype can
    be passed wherever the runtime takes a dtype.
    """

    __slots__ = ("name", "runtime_dtype_name")

    def __init__(self, name: str, supported: bool = True) -> None:
        self.name = name
        self.runtime_dtype_name = name if supported else None

    @property
    def is_floating_point(self) -> bool:
        return self.runtime_dtype_name is not None and DTYPES[self.name].is_floating_point

    @property
    def is_signed(self) -> bool:
        return self.runtime_dtype_name is not None and not self.name.startswith(("uint", "bool"))

    @property
    def itemsize(self) -> int:
        return runtime_dtype(self).itemsize

    def __repr__(self) -> str:
        return f"torch.{self.name}"


DTYPE_OBJECTS: dict[str, TorchDType] = {name: TorchDType(name) for name in DTYPES}
UNSUPPORTED = {name: TorchDType(name, False) for name in ("complex64", "complex128")}
BOOL = DTYPE_OBJECTS["bool"]
VALID_DTYPES = ", ".join(f"torch.{name}" for name in DTYPES)  # for error messages
_FLOAT32 = DTYPE_OBJECTS["float32"]
_default_dtype = _FLOAT32


def runtime_dtype(dt: TorchDType) -> DType:
    """The runtime dtype ``dt`` stands for; a TensorError for an unsupported one."""
    if dt.runtime_dtype_name is None:
        raise TensorError(
            f"dtype {dt!r} is not supported: there are no complex tensors here; "
            f"valid: {VALID_DTYPES}"
        )
    return DTYPES[dt.runtime_dtype_name]


def as_torch_dtype(value: Any, default: TorchDType | None = None) -> TorchDType:
    """A torch dtype from a torch dtype, a name, a NumPy dtype or ``float``/``int``."""
    if value is None:
        return default or _default_dtype
    if isinstance(value, TorchDType):
        runtime_dtype(value)  # refuses float64 and the other unsupported ones
        return value
    if value is float:  # Python's float is a double, as torch reads dtype=float
        return DTYPE_OBJECTS["float64"]
    if value is int:
        return DTYPE_OBJECTS["int64"]
    if value is bool:
        return BOOL
    try:
        return DTYPE_OBJECTS[as_dtype(value).name]
    except TensorError:
        if not isinstance(value, str | np.dtype | type):
            raise TensorError(
                f"dtype must be a torch dtype such as torch.float32, got "
                f"{type(value).__name__}; valid: {VALID_DTYPES}"
            ) from None
        raise TensorError(f"unsupported dtype {value!r}; valid: {VALID_DTYPES}") from None


def get_default_dtype() -> TorchDType:
    return _default_dtype


def set_default_dtype(d: Any) -> None:
    """Set the dtype Python floats infer (float16, bfloat16, float32 or float64)."""
    global _default_dtype
    dt = as_torch_dtype(d)
    if not dt.is_floating_point:
        raise TensorError(f"set_default_dtype needs a floating dtype, got {dt!r}")
    _default_dtype = dt


def category(dt: TorchDType) -> int:
    """torch's order of dtype kinds in promotion: 0 bool, 1 integer, 2 float."""
    return 2 if dt.is_floating_point else 0 if dt is BOOL else 1


def promote_types(a: TorchDType, b: TorchDType) -> TorchDType:
    """The dtype of an operation on tensors of dtypes ``a`` and ``b``."""
    if a is b:
        return a
    if BOOL in (a, b):
        return b if a is BOOL else a
    if a.is_floating_point and b.is_floating_point:  # the wider; fp16 with bf16 gives fp32
        return a if a.itemsize > b.itemsize else b if b.itemsize > a.itemsize else _FLOAT32
    if a.is_floating_point or b.is_floating_point:
        return a if a.is_floating_point else b
    name = np.promote_types(DTYPES[a.name].storage, DTYPES[b.name].storage).name
    if name not in DTYPE_OBJECTS or DTYPE_OBJECTS[name].is_floating_point:
        raise TensorError(
            f"{a!r} and {b!r} promote to {name}, which is not supported; convert one "
            f"with .to(...) first (valid: {VALID_DTYPES})"
        )
    return DTYPE_OBJECTS[name]


def python_scalar(value: Any) -> int | float | None:
    """A Python number from a scalar operand, or None when it is not one."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    return None


def scalar_dtype(value: Any) -> TorchDType:
    """The dtype a scalar infers: bool for a bool, the default dtype for a float, else int64."""
    if isinstance(value, bool | np.bool_):
        return BOOL
    return _default_dtype if isinstance(python_scalar(value), float) else DTYPE_OBJECTS["int64"]


def scalar_result_dtype(dt: TorchDType, value: Any) -> TorchDType:
    """The dtype of an operation on a ``dt`` tensor and the scalar ``value`` (a bool, an
    int or a float): the scalar's when its category is the higher, else ``dt``."""
    scalar = scalar_dtype(value)
    return scalar if category(scalar) > category(dt) else dt


def check_scalar_fits(value: int | float, dt: TorchDType, what: str) -> None:
    """Refuse an integer scalar outside the range of the integer dtype ``dt`` (any number
    converts to bool)."""
    if isinstance(value, int) and category(dt) == 1:
        info = np.iinfo(DTYPES[dt.name].storage)
        if not info.min <= value <= info.max:
            raise TensorError(
                f"{what}: scalar {value} does not fit {dt!r} [{info.min}, {info.max}]"
            )


def check_data_fits(data: Any, dt: TorchDType, what: str) -> None:
    """Refuse Python numbers (nested lists of them) an integer ``dt`` cannot hold, as torch
    raises rather than wraps them (checked as Python numbers: an int past 64 bits makes no
    NumPy array)."""
    if dt.is_floating_point:
        return
    values = np.asarray(data, dtype=object).ravel().tolist()
    found = [v for v in values if isinstance(v, int | float | np.integer | np.floating)]
    if found:
        for value in (min(found), max(found)):
            whole = int(value) if math.isfinite(value) else value
            if not isinstance(whole, int):
                raise TensorError(f"{what}: {value} cannot be converted to {dt!r}")
            check_scalar_fits(whole, dt, what)
