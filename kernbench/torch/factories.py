"""Tensor factories: ``zeros``, ``ones``, ``empty``, ``full``, ``arange``, ``tensor``, ``cat``, ...

Each makes a :class:`~kernbench.torch.Tensor` on the current device (or
``device=``), placed by ``dp=`` (default: whole on the device's first PE).
``zeros`` is written by the runtime (a host write); ``ones``/``full`` run the
fill kernel and ``arange`` a device kernel; ``tensor``/``from_numpy`` copy
host values in through the fabric; ``cat``/``stack`` copy on the device.
The random factories are in :mod:`kernbench.torch.sampling`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernbench.errors import TensorError, TensorTypeError, shown
from kernbench.torch.device_kernels import launch_arange, launch_place
from kernbench.torch.devices import device_index
from kernbench.torch.dtypes import (
    DTYPE_OBJECTS,
    VALID_DTYPES,
    TorchDType,
    as_torch_dtype,
    check_data_fits,
    get_default_dtype,
    promote_types,
    python_scalar,
    scalar_dtype,
)
from kernbench.torch.functions import with_out
from kernbench.torch.memory_formats import check_memory_format
from kernbench.torch.shapes import dim_index, flag_argument, int_argument, shape_argument
from kernbench.torch.tensor import Tensor, new_tensor

__all__ = [
    "arange",
    "as_tensor",
    "cat",
    "empty",
    "empty_like",
    "from_numpy",
    "full",
    "full_like",
    "like_arguments",
    "ones",
    "ones_like",
    "stack",
    "tensor",
    "zeros",
    "zeros_like",
]

_NUMPY_HINT = {"f": "np.float64", "c": "np.float64 (the real part)", "O": "np.float32"}


def _grad(t: Tensor, requires_grad: bool) -> Tensor:
    """``t`` with its ``requires_grad`` flag set, as ``t.requires_grad_()`` sets it."""
    flag = flag_argument(requires_grad, "requires_grad", "requires_grad")
    return t.requires_grad_(flag) if flag else t


def like_arguments(t: Tensor, dtype: Any, device: Any) -> tuple[TorchDType, int]:
    """The dtype and device index of a ``*_like(t, dtype=, device=)`` result."""
    if not isinstance(t, Tensor):
        raise TensorError(f"expected a Tensor, got {type(t).__name__}")
    index = device_index(device)
    return as_torch_dtype(dtype, t.dtype), t.get_device() if index is None else index


def zeros(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """Zeros, written to the device by the runtime."""
    shape = shape_argument(sizes, "zeros", size)
    t = new_tensor(shape, as_torch_dtype(dtype), index=device_index(device), dp=dp, zero=True)
    return _grad(t, requires_grad)


def empty(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
    dp: Any = None,
) -> Tensor:
    """Allocated and mapped, values not written (row-major: ``memory_format`` may only be
    ``torch.contiguous_format``)."""
    check_memory_format(memory_format, "torch.empty", preserve=False)
    shape = shape_argument(sizes, "empty", size)
    t = new_tensor(shape, as_torch_dtype(dtype), index=device_index(device), dp=dp)
    return _grad(t, requires_grad)


def full(
    size: Sequence[int],
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """``fill_value`` everywhere, by the fill kernel; the dtype follows the value by default."""
    if python_scalar(fill_value) is None:
        raise TensorError(f"full: fill_value must be a scalar, got {fill_value!r}")
    dt = as_torch_dtype(dtype, scalar_dtype(fill_value))
    out = new_tensor(shape_argument((size,), "full"), dt, index=device_index(device), dp=dp)
    return _grad(out.fill_(fill_value), requires_grad)


def ones(
    *sizes: Any,
    size: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """Ones, by the fill kernel."""
    shape = shape_argument(sizes, "ones", size)
    t = new_tensor(shape, as_torch_dtype(dtype), index=device_index(device), dp=dp).fill_(1)
    return _grad(t, requires_grad)


def zeros_like(
    input: Tensor,  # noqa: A002
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    check_memory_format(memory_format, "torch.zeros_like")
    dt, index = like_arguments(input, dtype, device)
    t = new_tensor(input.shape, dt, index=index, dp=input.dp, zero=True)
    return _grad(t, requires_grad)


def empty_like(
    input: Tensor,  # noqa: A002
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    check_memory_format(memory_format, "torch.empty_like")
    dt, index = like_arguments(input, dtype, device)
    return _grad(new_tensor(input.shape, dt, index=index, dp=input.dp), requires_grad)


def full_like(
    input: Tensor,  # noqa: A002
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    check_memory_format(memory_format, "torch.full_like")
    out = empty_like(input, dtype=dtype, device=device).fill_(fill_value)
    return _grad(out, requires_grad)


def ones_like(
    input: Tensor,  # noqa: A002
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    check_memory_format(memory_format, "torch.ones_like")
    return full_like(input, 1, dtype=dtype, device=device, requires_grad=requires_grad)


def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Any = None,
    dp: Any = None,
) -> Tensor:
    """``[start, end)`` in steps of ``step``, computed on the device."""
    if end is None:
        start, end = 0, start
    values = [python_scalar(v) for v in (start, end, step)]
    if any(v is None for v in values):
        raise TensorError(f"arange: start, end and step must be numbers, got {start, end, step}")
    start, end, step = values
    if step == 0:
        raise TensorError("arange: step must be non-zero")
    if not all(math.isfinite(v) for v in values):
        raise TensorError(f"arange: start, end and step must be finite, got {start, end, step}")
    floating = any(isinstance(v, float) for v in values)
    dt = as_torch_dtype(dtype, get_default_dtype() if floating else DTYPE_OBJECTS["int64"])
    if dt is DTYPE_OBJECTS["bool"]:
        raise TensorError(
            "arange: not implemented for 'Bool' (as in torch); make an integer range and "
            "compare it (torch.arange(n) > k) or convert it (.bool())"
        )
    n = max(0, math.ceil((end - start) / step))
    out = new_tensor((n,), dt, index=device_index(device), dp=dp)
    launch_arange(out.device_tensor, n, start, step)
    return out


def _host_values(array: np.ndarray, dt: TorchDType, device: Any, dp: Any) -> Tensor:
    out = new_tensor(array.shape, dt, index=device_index(device), dp=dp)
    out.device_tensor.copy_(array)
    return out


def tensor(
    data: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """A tensor holding a copy of ``data`` (nested lists, scalars or an array), copied in.

    As torch: Python floats infer the default dtype, ints ``int64`` and bools
    ``bool``; a NumPy array or scalar keeps its dtype.
    """
    if flag_argument(requires_grad, "tensor", "requires_grad"):
        return tensor(data, dtype=dtype, device=device, dp=dp).requires_grad_()
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device, copy=True)
    try:
        array = np.asarray(data)
    except ValueError:  # a ragged nested list: NumPy cannot make it an array
        raise TensorError(
            f"tensor: data must be a number or nested lists of numbers, all lists at one depth "
            f"the same length (as torch), got {shown(repr(data), 100)}"
        ) from None
    if dtype is not None and not isinstance(data, np.ndarray):
        # Python numbers an integer dtype cannot hold: torch raises rather than wrap them
        # (checked as Python numbers: an int past 64 bits makes no NumPy array).
        check_data_fits(data, as_torch_dtype(dtype), "tensor")
    if dtype is not None:
        dt = as_torch_dtype(dtype)
        if not isinstance(data, np.ndarray) and not dt.is_floating_point:
            # Python ints straight into the dtype: NumPy's own inference of a list past
            # int64 goes through float64 (2**64 - 1 would store as 0)
            array = np.array(data, dtype=np.dtype(dt.runtime_dtype_name))
    elif not isinstance(data, np.ndarray | np.generic) and _python_ints_past_int64(array, data):
        raise TensorError(
            "tensor: Python ints infer torch.int64 (as torch) and these do not fit it; pass "
            "dtype=torch.uint64 (for values below 2**64) or dtype=torch.float64"
        )
    elif array.dtype.name in ("float64", "object") and not isinstance(
        data, np.ndarray | np.generic
    ):
        try:  # Python floats (with ints NumPy could not hold: they become floats, as torch's)
            array = np.asarray(data, dtype=np.float64)
        except (TypeError, ValueError):
            raise TensorError(
                f"tensor: data must be numbers, got {shown(repr(data), 100)}"
            ) from None
        dt = get_default_dtype()
    elif array.dtype.name in DTYPE_OBJECTS:
        dt = DTYPE_OBJECTS[array.dtype.name]
    elif array.dtype.kind in "USO" and not isinstance(data, np.ndarray | np.generic):
        raise TensorError(f"tensor: data must be numbers, got {shown(repr(data), 100)}")
    else:
        raise TensorError(
            f"tensor: data of NumPy dtype {array.dtype} is not supported; pass dtype= "
            f"(valid: {VALID_DTYPES})"
        )
    return _host_values(array, dt, device, dp)


def _python_ints_past_int64(array: np.ndarray, data: Any) -> bool:
    """Whether Python ``data`` (made ``array`` by NumPy) is ints, one past int64's range
    (with a float among them torch infers the default float dtype, as here)."""
    if array.dtype.name not in ("uint64", "object") and not (
        array.dtype.kind == "f" and array.size and (np.abs(array) >= 2**63).any()
    ):
        return False
    values = np.asarray(data, dtype=object).ravel().tolist()
    if any(isinstance(v, float | np.floating) for v in values):
        return False
    return any(
        isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63 for v in values
    )


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray: np.ndarray, *, dp: Any = None) -> Tensor:
    """A device tensor holding a copy of ``ndarray`` in its own dtype (copied in; no sharing)."""
    if not isinstance(ndarray, np.ndarray):
        raise TensorError(f"from_numpy expects a numpy.ndarray, got {type(ndarray).__name__}")
    name = ndarray.dtype.name
    if name not in DTYPE_OBJECTS:
        hint = _NUMPY_HINT.get(ndarray.dtype.kind, "np.float32")
        raise TensorError(
            f"from_numpy: arrays of dtype {name} are not supported; convert first, e.g. "
            f"array.astype({hint}); valid: {VALID_DTYPES}"
        )
    return _host_values(ndarray, DTYPE_OBJECTS[name], None, dp)


def _tensor_list(tensors: Any, what: str) -> list[Tensor]:
    """``cat``/``stack``'s first argument: a non-empty sequence of tensors (a tensor is not
    one: torch refuses it rather than iterating over its first dim)."""
    if isinstance(tensors, Tensor):
        name = what.removeprefix("torch.")
        raise TensorTypeError(
            f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor"
        )
    items = list(tensors) if isinstance(tensors, Sequence) else None
    if not items or not all(isinstance(t, Tensor) for t in items):
        got = type(tensors).__name__ if items is None else [type(t).__name__ for t in items][:5]
        raise TensorError(f"{what} needs a non-empty sequence of Tensors, got {got}")
    return items


@with_out
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate tensors along ``dim`` on the device (one copy kernel each); mixed
    dtypes are promoted as torch promotes them (a copy each for those converted)."""
    tensors = _tensor_list(tensors, "cat")
    for i, t in enumerate(tensors):
        if not t.ndim:
            raise TensorError(
                f"cat: zero-dimensional tensor (at position {i}) cannot be concatenated; "
                "torch.stack them, or unsqueeze(0) each"
            )
    tensors = _promoted(tensors)
    first = tensors[0]
    d = dim_index(dim, first.ndim, "cat")
    for t in tensors[1:]:
        same = t.ndim == first.ndim and all(
            a == b for i, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if i != d
        )
        if not same or t.get_device() != first.get_device():
            raise TensorError(
                f"cat: tensors must share device and every size but dim {d}; got "
                f"{tuple(first.shape)} on {first.device} and {tuple(t.shape)} on {t.device}"
            )
    shape = list(first.shape)
    shape[d] = sum(t.shape[d] for t in tensors)
    out = first.new_empty(shape)
    inner = math.prod(shape[d + 1 :])
    width = shape[d] * inner
    offset = 0
    for t in tensors:
        row = t.shape[d] * inner
        n = t.numel()
        if n:
            _place(t, out, n, row, width, offset)
        offset += row
    return out


@with_out
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack same-shape tensors along a new ``dim`` on the device (dtypes promoted as
    :func:`cat` promotes them)."""
    tensors = _tensor_list(tensors, "stack")
    dim = int_argument(dim, "stack", "dim")
    tensors = _promoted(tensors)
    first = tensors[0]
    for t in tensors[1:]:
        if t.shape != first.shape:
            raise TensorError(
                f"stack: every tensor must have shape {tuple(first.shape)}, got {tuple(t.shape)}"
            )
    ndim = first.ndim + 1
    if not -ndim <= dim < ndim:
        raise TensorError(f"stack: dim {dim} is out of range for {ndim}-d results")
    d = dim % ndim
    shape = list(first.shape)
    shape.insert(d, len(tensors))
    out = first.new_empty(shape)
    inner = math.prod(shape[d + 1 :])
    for k, t in enumerate(tensors):
        n = t.numel()
        if n:
            _place(t, out, n, inner, len(tensors) * inner, k * inner)
    return out


def _promoted(tensors: list[Tensor]) -> list[Tensor]:
    """The tensors in the dtype torch promotes them all to (a copy each for those converted)."""
    result = tensors[0].dtype
    for t in tensors[1:]:
        result = promote_types(result, t.dtype)
    return [t if t.dtype is result else t.to(result) for t in tensors]


def _place(t: Tensor, out: Tensor, n: int, row: int, width: int, offset: int) -> None:
    """``t``'s elements into ``out`` in rows (a view is copied into a contiguous temporary)."""
    src = t.dense()
    launch_place(src.device_tensor, out.device_tensor, n, row, width, offset)
    if src is not t:
        src.free()
