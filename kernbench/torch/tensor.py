"""``torch.Tensor`` for KernBench: a device tensor with PyTorch's face.

A :class:`Tensor` wraps a runtime :class:`~kernbench.runtime.DeviceTensor`
placed on the calling rank's device (by default the whole tensor on the
device's first PE; ``dp=`` shards it).  Arithmetic runs the built-in device
kernels on the simulated PEs and costs simulated time; ``numpy()``,
``item()``, ``tolist()`` and ``repr`` read the values back to the host through
the fabric, which costs time too.

Decisions a PyTorch user would otherwise have to guess:

* A 32-bit world: there is no float64, int64 or bool.  Python floats infer
  ``float32`` (the default dtype), Python ints ``int32``; integer sums are
  ``int32``.  ``tensor()`` converts float64/int64 data (it copies anyway);
  ``from_numpy`` keeps the array's dtype exactly, so it refuses those.
* No broadcasting: binary operators take a tensor of the same shape or a
  Python/NumPy scalar.  Type promotion follows PyTorch (int + float scalar is
  float32, ``/`` is true division and gives float32 for integers; an in-place
  op whose result would be float on an integer tensor raises).
* Placement: results of elementwise ops and copies keep their input's
  ``dp=`` sharding; results of another shape (reductions, ``cat``,
  ``stack``) are whole on the device's first PE.
* Indexing: only the whole tensor, ``t[:]`` or ``t[...]`` (a view sharing the
  memory), so ``a[:] += b[:]`` and ``a[:] = b`` work.
* There is no host tensor: ``device="cpu"`` places on the current device and
  ``.cpu()`` returns the tensor itself; ``numpy()`` is the read to the host and
  returns a copy (``bfloat16`` reads back as float32).
* ``zeros`` is written by the runtime (a host write); ``ones``/``full`` run
  the fill kernel, ``arange`` a device kernel, ``clone``/``to`` the copy
  kernel, ``sum``/``mean`` a reduction kernel (float32 or int32 accumulator)
  whose result stays on the device; ``rand``/``randn``/``randint`` draw on
  the host and copy the values in.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

import kernbench.kernels.language as tl
from kernbench.errors import OutOfMemoryError, TensorError
from kernbench.kernels.builtins import (
    launch_copy,
    launch_elementwise,
    launch_fill,
    launch_scalar,
)
from kernbench.kernels.jit import jit
from kernbench.runtime.current import current_context
from kernbench.runtime.dtypes import DTYPES, as_dtype
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch import random as _random
from kernbench.torch.devices import ACCELERATOR, device, device_index

__all__ = [
    "Size",
    "Tensor",
    "TorchDType",
    "arange",
    "cat",
    "empty",
    "empty_like",
    "from_numpy",
    "full",
    "full_like",
    "get_default_dtype",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "set_default_dtype",
    "stack",
    "tensor",
    "zeros",
    "zeros_like",
]

# ----------------------------------------------------------------------------- dtypes


class TorchDType:
    """``torch.float32`` and friends; ``kernbench_dtype`` names the runtime dtype."""

    __slots__ = ("name", "kernbench_dtype")

    def __init__(self, name: str, supported: bool = True) -> None:
        self.name = name
        self.kernbench_dtype = name if supported else None

    @property
    def is_floating_point(self) -> bool:
        return self.kernbench_dtype is not None and DTYPES[self.name].is_floating_point

    @property
    def is_signed(self) -> bool:
        return self.kernbench_dtype is not None and not self.name.startswith("uint")

    @property
    def itemsize(self) -> int:
        return _runtime(self).itemsize

    def __repr__(self) -> str:
        return f"torch.{self.name}"


DTYPE_OBJECTS: dict[str, TorchDType] = {name: TorchDType(name) for name in DTYPES}
UNSUPPORTED = {name: TorchDType(name, False) for name in ("float64", "int64", "bool", "complex64")}
_VALID = ", ".join(f"torch.{name}" for name in DTYPES)
_NUMPY_HINT = {"f": "np.float32", "i": "np.int32", "u": "np.uint32", "b": "np.uint8"}
_default_dtype = DTYPE_OBJECTS["float32"]


def _runtime(dt: TorchDType) -> Any:
    if dt.kernbench_dtype is None:
        raise TensorError(
            f"dtype {dt!r} is not supported: tensors hold at most 32-bit values; valid: {_VALID}"
        )
    return DTYPES[dt.kernbench_dtype]


def as_torch_dtype(value: Any, default: TorchDType | None = None) -> TorchDType:
    """A torch dtype from a torch dtype, a name, a NumPy dtype or ``float``/``int``."""
    if value is None:
        return default or _default_dtype
    if isinstance(value, TorchDType):
        _runtime(value)
        return value
    if value is float:
        return _default_dtype
    if value is int:
        return DTYPE_OBJECTS["int32"]
    try:
        return DTYPE_OBJECTS[as_dtype(value).name]
    except TensorError:
        raise TensorError(
            f"unsupported dtype {value!r}: tensors hold at most 32-bit values; valid: {_VALID}"
        ) from None


def get_default_dtype() -> TorchDType:
    return _default_dtype


def set_default_dtype(d: Any) -> None:
    """Set the dtype Python floats infer (float16, bfloat16 or float32)."""
    global _default_dtype
    dt = as_torch_dtype(d)
    if not dt.is_floating_point:
        raise TensorError(f"set_default_dtype needs a floating dtype, got {dt!r}")
    _default_dtype = dt


class Size(tuple):
    """A tensor's shape: a tuple of ints (``torch.Size([2, 3])``)."""

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"


# ----------------------------------------------------------------------------- device kernels


@jit
def _sum_kernel(
    x_ptr,
    out_ptr,
    n_out,
    R,
    C,
    ACC: tl.constexpr,
    MEAN: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Output o = (a, c) sums x[a, r, c] over r < R, with x viewed as (A, R, C).
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_out
    base = (o // C) * (R * C) + o % C
    acc = tl.zeros((OBLOCK, RBLOCK), ACC)
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        acc += tl.load(x_ptr + base[:, None] + r[None, :] * C, mask=mask, other=0)
    total = tl.sum(acc, axis=1)
    if MEAN:
        total = total / R
    tl.store(out_ptr + o, total, mask=o_mask)


@jit
def _place_kernel(src_ptr, dst_ptr, n, row, width, offset, BLOCK: tl.constexpr):
    # Rows of ``row`` source elements land ``width`` apart in dst, from ``offset`` (cat/stack).
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    dst = (i // row) * width + offset + i % row
    tl.store(dst_ptr + dst, tl.load(src_ptr + i, mask=mask), mask=mask)


@jit
def _arange_kernel(out_ptr, n, start, step, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, start + i * step, mask=i < n)


# Elements per program of the kernels behind tensor arithmetic: large enough that a
# program's memory access latency and launch overhead are small next to its streaming
# time (64 KiB of float32 per operand), as a tuned device library would choose.
_BLOCK = 16384


# The kernels behind tensor arithmetic index elements with 32-bit offsets, as Triton's do.
_MAX_KERNEL_ELEMENTS = 2**31 - 1


def _grid(n: int) -> tuple[int]:
    if n > _MAX_KERNEL_ELEMENTS:
        raise TensorError(
            f"an operation on {n} elements: the kernels behind tensor arithmetic use 32-bit "
            f"element offsets, so they work on at most {_MAX_KERNEL_ELEMENTS} elements of one "
            "tensor; split it into smaller tensors"
        )
    return (max(1, -(-n // _BLOCK)),)


# ----------------------------------------------------------------------------- placement


def _new(
    shape: Sequence[int],
    dt: TorchDType,
    *,
    index: int | None = None,
    dp: Any = None,
    zero: bool = False,
    ctx: Any = None,
) -> Tensor:
    ctx = ctx or current_context()
    make = ctx.zeros if zero else ctx.empty
    dtensor = make(tuple(shape), _runtime(dt), dp=dp, device=index)
    here = index if index is not None else ctx.current_device()
    return Tensor(dtensor, device_index=0 if here is None else here, dp=dp)


def _like(t: Tensor, dt: TorchDType | None = None, shape: Sequence[int] | None = None) -> Tensor:
    """A new tensor on ``t``'s device; with ``t``'s placement when the shape is the same.

    A result of another shape (a reduction, ``cat``, ``stack``) is not sharded:
    ``t``'s policy need not divide it.
    """
    same = shape is None or tuple(shape) == tuple(t.shape)
    return _new(
        t.shape if shape is None else shape,
        dt or t.dtype,
        index=t._index,
        dp=t._dp if same else None,
        ctx=t._ctx,
    )


def _converted(t: Tensor, dt: TorchDType) -> Tensor:
    if t.dtype is dt:
        return t
    out = _like(t, dt)
    launch_copy(t._dt, out._dt, block=_BLOCK)
    return out


def _free_temps(*temps: Tensor) -> None:
    for t in temps:
        if not t._dt.is_freed:
            t._dt.free()


# ----------------------------------------------------------------------------- promotion


def _promote(a: TorchDType, b: TorchDType) -> TorchDType:
    if a is b:
        return a
    if a.is_floating_point and b.is_floating_point:
        return DTYPE_OBJECTS["float32"]
    if a.is_floating_point or b.is_floating_point:
        return a if a.is_floating_point else b
    name = np.promote_types(DTYPES[a.name].storage, DTYPES[b.name].storage).name
    if name not in DTYPE_OBJECTS:
        raise TensorError(
            f"{a!r} and {b!r} promote to {name}, which is not supported; convert one "
            f"with .to(...) first (valid: {_VALID})"
        )
    return DTYPE_OBJECTS[name]


def _scalar(value: Any) -> int | float | None:
    """A Python number from a scalar operand, or None when it is not one."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    return None


def _with_scalar(t: TorchDType, value: int | float) -> TorchDType:
    if isinstance(value, float) and not t.is_floating_point:
        return _default_dtype
    return t


def _check_fits(value: int | float, dt: TorchDType, what: str) -> None:
    if isinstance(value, int) and not dt.is_floating_point:
        info = np.iinfo(DTYPES[dt.name].storage)
        if not info.min <= value <= info.max:
            raise TensorError(
                f"{what}: scalar {value} does not fit {dt!r} [{info.min}, {info.max}]"
            )


def _check_pair(a: Tensor, b: Tensor, what: str) -> None:
    if a.shape != b.shape:
        raise TensorError(
            f"{what}: shapes {tuple(a.shape)} and {tuple(b.shape)} differ; only tensors of "
            "the same shape or scalars are supported (no broadcasting)"
        )
    if a._index != b._index:
        raise TensorError(
            f"{what}: tensors are on different devices ({a.device} and {b.device}); "
            "move one with .to(...)"
        )


def _binary(op: str, a: Tensor, other: Any, out: Tensor | None = None) -> Tensor:
    """``a op other`` in ``out`` (in place) or a new tensor, with torch's type promotion."""
    what = f"{op} of {a._dt.name!r}"
    if isinstance(other, Tensor):
        _check_pair(a, other, what)
        rtype = _promote(a.dtype, other.dtype)
        value = None
    else:
        value = _scalar(other)
        if value is None:
            raise TensorError(
                f"{what}: operand {type(other).__name__} is not supported; use a Tensor of the "
                "same shape or a Python scalar (torch.from_numpy converts arrays)"
            )
        rtype = _with_scalar(a.dtype, value)
    if op == "div" and not rtype.is_floating_point:
        rtype = _default_dtype  # true division, as torch does
    if out is not None and rtype.is_floating_point and not out.dtype.is_floating_point:
        raise TensorError(
            f"{what}: result type {rtype!r} can't be cast to the in-place output type "
            f"{out.dtype!r}; use an out-of-place op (a = a {_SYMBOL[op]} b)"
        )
    temps = []
    x = _converted(a, rtype)
    target = out if out is not None and out.dtype is rtype else _like(a, rtype)
    if x is not a:
        temps.append(x)
    if value is None:
        y = _converted(other, rtype)
        if y is not other:
            temps.append(y)
        launch_elementwise(op, x._dt, y._dt, target._dt, block=_BLOCK)
    else:
        _check_fits(value, rtype, what)
        launch_scalar(op, x._dt, value, target._dt, block=_BLOCK)
    if out is not None and target is not out:
        launch_copy(target._dt, out._dt, block=_BLOCK)
        temps.append(target)
        target = out
    _free_temps(*temps)
    return target


def _reversed(op: str, a: Tensor, other: Any) -> Tensor:
    """``other op a`` for a scalar ``other``: fill a tensor with it, then the elementwise op."""
    value = _scalar(other)
    if value is None:
        raise TensorError(
            f"{op} into {a._dt.name!r}: operand {type(other).__name__} is not supported; use "
            "a Python scalar or a Tensor of the same shape"
        )
    rtype = _with_scalar(a.dtype, value)
    if op == "div" and not rtype.is_floating_point:
        rtype = _default_dtype
    _check_fits(value, rtype, f"{op} of {a._dt.name!r}")
    result = _like(a, rtype)
    launch_fill(result._dt, value, block=_BLOCK)
    x = _converted(a, rtype)
    launch_elementwise(op, result._dt, x._dt, result._dt, block=_BLOCK)
    if x is not a:
        _free_temps(x)
    return result


_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _is_whole(key: Any) -> bool:
    if key is Ellipsis or (isinstance(key, slice) and key == slice(None)):
        return True
    return isinstance(key, tuple) and all(_is_whole(k) for k in key) and len(key) > 0


# ----------------------------------------------------------------------------- Tensor


class Tensor:
    """A tensor on the simulated machine with PyTorch's methods and operators."""

    __array_ufunc__ = None  # NumPy defers ``array + tensor`` to our reflected operators
    requires_grad = False
    grad = None

    def __init__(
        self, device_tensor: DeviceTensor, *, device_index: int | None = None, dp: Any = None
    ) -> None:
        if not isinstance(device_tensor, DeviceTensor):
            raise TensorError(
                "Tensor wraps a runtime DeviceTensor; create tensors with torch.zeros, "
                "torch.tensor, torch.from_numpy, ..."
            )
        self._dt = device_tensor
        self._ctx = device_tensor._ctx
        if device_index is None:
            device_index = self._ctx.current_device() or 0
        self._index = device_index
        self._dp = dp

    # -- description --------------------------------------------------------------
    @property
    def device_tensor(self) -> DeviceTensor:
        """The runtime tensor underneath (for collectives and custom kernels)."""
        return self._dt

    @property
    def shape(self) -> Size:
        return Size(self._dt.shape)

    @property
    def dtype(self) -> TorchDType:
        return DTYPE_OBJECTS[self._dt.dtype.name]

    @property
    def device(self) -> device:
        return device(ACCELERATOR, self._index)

    @property
    def ndim(self) -> int:
        return len(self._dt.shape)

    @property
    def nbytes(self) -> int:
        return self._dt.nbytes

    @property
    def itemsize(self) -> int:
        return self._dt.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        """True: every tensor lives on the accelerator."""
        return True

    def numel(self) -> int:
        return self._dt.numel

    def element_size(self) -> int:
        return self._dt.dtype.itemsize

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None) -> Size | int:
        if dim is None:
            return self.shape
        return self.shape[self._dim(dim)]

    def _dim(self, dim: Any) -> int:
        ndim = max(self.ndim, 1)
        try:
            d = operator.index(dim)
        except TypeError:
            raise TensorError(f"dim must be an int, got {dim!r}") from None
        if not -ndim <= d < ndim:
            raise TensorError(f"dim {d} is out of range for a {self.ndim}-d tensor")
        return d % ndim

    def data_ptr(self) -> int:
        """The tensor's base virtual address."""
        return self._dt.va_base

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return True

    def contiguous(self, memory_format: Any = None) -> Tensor:
        return self

    def detach(self) -> Tensor:
        return self

    def free(self) -> None:
        """Return the tensor's memory now (KernBench only; otherwise freed when unreferenced)."""
        self._dt.free()

    # -- reading values --------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The values, read to the host through the fabric (a copy; costs time)."""
        return self._dt.numpy()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> int | float:
        if self.numel() != 1:
            raise TensorError(
                f"item() needs a one-element tensor; {self._dt.name!r} has {self.numel()} elements"
            )
        return self.numpy().reshape(()).item()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __len__(self) -> int:
        if not self.ndim:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        extras = [f"device='{self.device}'"]
        if self.dtype.name not in ("float32", "int32"):
            extras.append(f"dtype={self.dtype!r}")
        if self._dt.is_freed:
            body = f"<freed>, size={tuple(self.shape)}"
        elif self._ctx.timing_only:
            body = f"<no values in timing-only mode>, size={tuple(self.shape)}"
        else:
            body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        return f"tensor({body}, {', '.join(extras)})"

    # -- copies and conversion ------------------------------------------------------
    def clone(self, memory_format: Any = None) -> Tensor:
        """A copy made on the device by the copy kernel."""
        out = _like(self)
        launch_copy(self._dt, out._dt, block=_BLOCK)
        return out

    def copy_(self, src: Any, non_blocking: bool = False) -> Tensor:
        """Copy a Tensor (device copy kernel) or host values (written through the fabric)."""
        if isinstance(src, Tensor):
            if src._dt is self._dt:
                return self
            if src.shape != self.shape:
                raise TensorError(
                    f"copy_ into {self._dt.name!r}: source shape {tuple(src.shape)} does not "
                    f"match {tuple(self.shape)}"
                )
            launch_copy(src._dt, self._dt, block=_BLOCK)
        else:
            self._dt.copy_(np.asarray(src))
        return self

    def fill_(self, value: Any) -> Tensor:
        """Set every element to ``value`` with the fill kernel."""
        if isinstance(value, Tensor):
            value = value.item()
        number = _scalar(value)
        if number is None:
            raise TensorError(f"fill_ needs a scalar, got {type(value).__name__}")
        launch_fill(self._dt, number, block=_BLOCK)
        return self

    def zero_(self) -> Tensor:
        return self.fill_(0)

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(tensor)``.

        Returns the tensor itself when nothing changes (unless ``copy=True``);
        otherwise a new tensor filled by the device copy kernel.
        """
        dt, dev = kwargs.pop("dtype", None), kwargs.pop("device", None)
        copy = kwargs.pop("copy", False)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TensorError(f"to(): unexpected arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                dt, dev = arg.dtype, arg.device
            elif isinstance(arg, TorchDType) or (isinstance(arg, type) and arg in (float, int)):
                dt = arg
            elif isinstance(arg, bool):
                copy = arg
            else:
                dev = arg
        target_dtype = self.dtype if dt is None else as_torch_dtype(dt)
        index = device_index(dev)
        index = self._index if index is None else index
        if not copy and target_dtype is self.dtype and index == self._index:
            return self
        out = _new(self.shape, target_dtype, index=index, dp=self._dp, ctx=self._ctx)
        launch_copy(self._dt, out._dt, block=_BLOCK)
        return out

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        return self.to(device_index(device) if device is not None else device_index(ACCELERATOR))

    def cpu(self) -> Tensor:
        """The tensor itself: there is no host tensor (``numpy()`` reads values back)."""
        return self

    def float(self) -> Tensor:
        return self.to(DTYPE_OBJECTS["float32"])

    def half(self) -> Tensor:
        return self.to(DTYPE_OBJECTS["float16"])

    def bfloat16(self) -> Tensor:
        return self.to(DTYPE_OBJECTS["bfloat16"])

    def int(self) -> Tensor:
        return self.to(DTYPE_OBJECTS["int32"])

    # -- indexing: the whole tensor only ------------------------------------------------
    def _whole(self, key: Any, what: str) -> None:
        if not _is_whole(key):
            raise TensorError(
                f"{what} {self._dt.name!r}[{key!r}]: only the whole tensor (t[:] or t[...]) "
                "is supported; read values with t.numpy()[...]"
            )

    def __getitem__(self, key: Any) -> Tensor:
        self._whole(key, "indexing")
        return Tensor(self._dt, device_index=self._index, dp=self._dp)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._whole(key, "assigning to")
        if isinstance(value, Tensor):
            self.copy_(value)
        elif _scalar(value) is not None:
            self.fill_(value)
        else:
            self.copy_(value)

    def __iter__(self) -> Iterator[Any]:
        raise TensorError(
            f"iterating over {self._dt.name!r} is not supported; iterate over t.tolist()"
        )

    # -- reductions ------------------------------------------------------------------
    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """Sum on the device (float32/int32 accumulator); the result stays a device tensor."""
        rtype = as_torch_dtype(dtype) if dtype is not None else None
        if rtype is None:
            rtype = self.dtype if self.dtype.is_floating_point else DTYPE_OBJECTS["int32"]
        return self._reduce(dim, keepdim, rtype, mean=False)

    def mean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """Mean on the device; integer tensors need ``dtype=`` (as in torch)."""
        rtype = as_torch_dtype(dtype) if dtype is not None else self.dtype
        if not rtype.is_floating_point:
            raise TensorError(
                f"mean() of {self._dt.name!r}: {rtype!r} is not a floating dtype; "
                "pass dtype=torch.float32 or call .float() first"
            )
        return self._reduce(dim, keepdim, rtype, mean=True)

    def _reduce(self, dim: Any, keepdim: bool, rtype: TorchDType, mean: bool) -> Tensor:
        shape = tuple(self.shape)
        if isinstance(dim, tuple | list) and len(dim) == 1:
            dim = dim[0]
        if dim is None:
            rows, length, cols = 1, self.numel(), 1
            out_shape: tuple[int, ...] = (1,) * len(shape) if keepdim else ()
        else:
            if isinstance(dim, tuple | list):
                raise TensorError("sum/mean over several dims is not supported; reduce one by one")
            d = self._dim(dim)
            if not shape:
                rows, length, cols = 1, 1, 1
            else:
                rows, length, cols = math.prod(shape[:d]), shape[d], math.prod(shape[d + 1 :])
            out_shape = shape[:d] + ((1,) if keepdim else ()) + shape[d + 1 :]
        out = _like(self, rtype, out_shape)
        n_out = rows * cols
        if mean and length == 0:
            launch_fill(out._dt, float("nan"), block=_BLOCK)
        elif n_out:
            rblock = tl.next_power_of_2(max(1, min(length, 1024)))
            oblock = tl.next_power_of_2(max(1, min(n_out, max(1, 4096 // rblock))))
            acc = tl.float32 if rtype.is_floating_point else tl.int32
            _sum_kernel[(-(-n_out // oblock),)](
                self._dt,
                out._dt,
                n_out,
                length,
                cols,
                ACC=acc,
                MEAN=mean,
                OBLOCK=oblock,
                RBLOCK=rblock,
            )
        return out

    # -- arithmetic --------------------------------------------------------------------
    def __add__(self, other: Any) -> Tensor:
        return _binary("add", self, other)

    def __sub__(self, other: Any) -> Tensor:
        return _binary("sub", self, other)

    def __mul__(self, other: Any) -> Tensor:
        return _binary("mul", self, other)

    def __truediv__(self, other: Any) -> Tensor:
        return _binary("div", self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _binary("add", self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _binary("mul", self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _reversed("sub", self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _reversed("div", self, other)

    def __iadd__(self, other: Any) -> Tensor:
        return _binary("add", self, other, out=self)

    def __isub__(self, other: Any) -> Tensor:
        return _binary("sub", self, other, out=self)

    def __imul__(self, other: Any) -> Tensor:
        return _binary("mul", self, other, out=self)

    def __itruediv__(self, other: Any) -> Tensor:
        return _binary("div", self, other, out=self)

    def __neg__(self) -> Tensor:
        if self.dtype.is_signed:
            return _binary("mul", self, -1)
        return _reversed("sub", self, 0)  # unsigned: wraps around like torch

    def __pos__(self) -> Tensor:
        return self

    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _binary("add", self, _alpha(other, alpha))

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _binary("sub", self, _alpha(other, alpha))

    def mul(self, other: Any) -> Tensor:
        return _binary("mul", self, other)

    def div(self, other: Any) -> Tensor:
        return _binary("div", self, other)

    def add_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _binary("add", self, _alpha(other, alpha), out=self)

    def sub_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        return _binary("sub", self, _alpha(other, alpha), out=self)

    def mul_(self, other: Any) -> Tensor:
        return _binary("mul", self, other, out=self)

    def div_(self, other: Any) -> Tensor:
        return _binary("div", self, other, out=self)

    # -- kernels -------------------------------------------------------------------------
    def __kernel_arg__(self) -> DeviceTensor:
        """What a kernel launch receives for this tensor: the device tensor under it."""
        return self._dt


def _alpha(other: Any, alpha: Any) -> Any:
    if alpha == 1:
        return other
    if isinstance(other, Tensor):
        return _binary("mul", other, alpha)
    return other * alpha


# ----------------------------------------------------------------------------- factories


def _size(size: tuple[Any, ...], what: str) -> tuple[int, ...]:
    """``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` or ``f(torch.Size(...))`` -> a shape."""
    if len(size) == 1 and isinstance(size[0], Sequence):
        size = tuple(size[0])
    dims = []
    for d in size:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 0:
            raise TensorError(f"{what}: size {size!r} must be non-negative ints")
        dims.append(int(d))
    return tuple(dims)


def _check_grad(requires_grad: bool, what: str) -> None:
    if requires_grad:
        raise TensorError(f"{what}: requires_grad=True is not supported (there is no autograd)")


def zeros(
    *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, dp: Any = None
) -> Tensor:
    """Zeros, written to the device by the runtime."""
    _check_grad(requires_grad, "zeros")
    shape = _size(size, "zeros")
    return _new(shape, as_torch_dtype(dtype), index=device_index(device), dp=dp, zero=True)


def empty(
    *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, dp: Any = None
) -> Tensor:
    """Allocated and mapped, values not written."""
    _check_grad(requires_grad, "empty")
    shape = _size(size, "empty")
    return _new(shape, as_torch_dtype(dtype), index=device_index(device), dp=dp)


def _infer_scalar_dtype(value: Any) -> TorchDType:
    return _default_dtype if isinstance(_scalar(value), float) else DTYPE_OBJECTS["int32"]


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
    _check_grad(requires_grad, "full")
    if _scalar(fill_value) is None:
        raise TensorError(f"full: fill_value must be a scalar, got {fill_value!r}")
    dt = as_torch_dtype(dtype, _infer_scalar_dtype(fill_value))
    out = _new(_size((size,), "full"), dt, index=device_index(device), dp=dp)
    return out.fill_(fill_value)


def ones(
    *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False, dp: Any = None
) -> Tensor:
    """Ones, by the fill kernel."""
    _check_grad(requires_grad, "ones")
    shape = _size(size, "ones")
    return _new(shape, as_torch_dtype(dtype), index=device_index(device), dp=dp).fill_(1)


def _like_args(t: Tensor, dtype: Any, device: Any) -> dict[str, Any]:
    if not isinstance(t, Tensor):
        raise TensorError(f"expected a Tensor, got {type(t).__name__}")
    index = device_index(device)
    return {"dtype": as_torch_dtype(dtype, t.dtype), "index": t._index if index is None else index}


def zeros_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:  # noqa: A002
    args = _like_args(input, dtype, device)
    return _new(input.shape, args["dtype"], index=args["index"], dp=input._dp, zero=True)


def empty_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:  # noqa: A002
    args = _like_args(input, dtype, device)
    return _new(input.shape, args["dtype"], index=args["index"], dp=input._dp)


def full_like(
    input: Tensor,  # noqa: A002
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    return empty_like(input, dtype=dtype, device=device).fill_(fill_value)


def ones_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:  # noqa: A002
    return full_like(input, 1, dtype=dtype, device=device)


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
    values = [_scalar(v) for v in (start, end, step)]
    if any(v is None for v in values):
        raise TensorError(f"arange: start, end and step must be numbers, got {start, end, step}")
    start, end, step = values
    if step == 0:
        raise TensorError("arange: step must be non-zero")
    floating = any(isinstance(v, float) for v in values)
    dt = as_torch_dtype(dtype, _default_dtype if floating else DTYPE_OBJECTS["int32"])
    n = max(0, math.ceil((end - start) / step))
    out = _new((n,), dt, index=device_index(device), dp=dp)
    _arange_kernel[_grid(n)](out._dt, n, start, step, BLOCK=_BLOCK)
    return out


def _host_values(array: np.ndarray, dt: TorchDType, device: Any, dp: Any) -> Tensor:
    out = _new(array.shape, dt, index=device_index(device), dp=dp)
    out._dt.copy_(array)
    return out


_INFER = {"float64": "float32", "int64": "int32", "uint64": "uint32"}


def tensor(
    data: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """A tensor holding a copy of ``data`` (nested lists, scalars or an array), copied in.

    Python floats infer the default dtype and ints ``int32``; float64/int64
    arrays are converted the same way (int64 values must fit in 32 bits).
    """
    _check_grad(requires_grad, "tensor")
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device, copy=True)
    array = np.asarray(data)
    if dtype is not None:
        dt = as_torch_dtype(dtype)
    elif array.dtype.kind == "f" and array.dtype.name == "float64":
        dt = _default_dtype
    elif array.dtype.name in _INFER:
        target = np.dtype(_INFER[array.dtype.name])
        if array.size and not (
            np.iinfo(target).min <= array.min() and array.max() <= np.iinfo(target).max
        ):
            raise TensorError(
                f"tensor: integer values in [{array.min()}, {array.max()}] do not fit "
                f"{target.name} (there is no int64); pass dtype=torch.float32"
            )
        dt = DTYPE_OBJECTS[target.name]
    elif array.dtype.name in DTYPE_OBJECTS:
        dt = DTYPE_OBJECTS[array.dtype.name]
    else:
        raise TensorError(
            f"tensor: data of NumPy dtype {array.dtype} is not supported; pass dtype= "
            f"(valid: {_VALID})"
        )
    return _host_values(array, dt, device, dp)


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
            f"from_numpy: arrays of dtype {name} are not supported (tensors hold at most "
            f"32-bit values); convert first, e.g. array.astype({hint}); valid: {_VALID}"
        )
    return _host_values(ndarray, DTYPE_OBJECTS[name], None, dp)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate same-dtype tensors along ``dim`` on the device (one copy kernel each)."""
    tensors = list(tensors)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise TensorError("cat needs a non-empty sequence of Tensors")
    first = tensors[0]
    d = first._dim(dim)
    for t in tensors[1:]:
        same = t.ndim == first.ndim and all(
            a == b for i, (a, b) in enumerate(zip(t.shape, first.shape, strict=True)) if i != d
        )
        if not same or t.dtype is not first.dtype or t._index != first._index:
            raise TensorError(
                f"cat: tensors must share dtype, device and every size but dim {d}; got "
                f"{tuple(first.shape)} {first.dtype!r} and {tuple(t.shape)} {t.dtype!r}"
            )
    shape = list(first.shape)
    shape[d] = sum(t.shape[d] for t in tensors)
    out = _like(first, shape=shape)
    inner = math.prod(shape[d + 1 :])
    width = shape[d] * inner
    offset = 0
    for t in tensors:
        row = t.shape[d] * inner
        n = t.numel()
        if n:
            _place_kernel[_grid(n)](t._dt, out._dt, n, row, width, offset, BLOCK=_BLOCK)
        offset += row
    return out


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack same-shape tensors along a new ``dim`` on the device."""
    tensors = list(tensors)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise TensorError("stack needs a non-empty sequence of Tensors")
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
    out = _like(first, shape=shape)
    inner = math.prod(shape[d + 1 :])
    for k, t in enumerate(tensors):
        n = t.numel()
        if n:
            launch = _place_kernel[_grid(n)]
            launch(t._dt, out._dt, n, inner, len(tensors) * inner, k * inner, BLOCK=_BLOCK)
    return out


# ----------------------------------------------------------------------------- random


def _floating(dtype: Any, what: str) -> TorchDType:
    dt = as_torch_dtype(dtype)
    if not dt.is_floating_point:
        raise TensorError(f"{what}: needs a floating dtype, got {dt!r}")
    return dt


def _drawn(
    shape: tuple[int, ...],
    dt: TorchDType,
    device: Any,
    dp: Any,
    draw: Callable[[tuple[int, ...]], np.ndarray],
    what: str,
) -> Tensor:
    """A tensor of ``draw(shape)`` values, drawn on the host and copied in.

    The tensor is made first, so a size that does not fit is refused before any
    value is drawn; in timing-only mode no values are drawn at all (the copy
    still costs its time).
    """
    out = _new(shape, dt, index=device_index(device), dp=dp)
    if out._ctx.timing_only:
        out._dt.copy_(np.broadcast_to(np.zeros((), np.float32), shape))
        return out
    try:
        values = draw(shape)
    except MemoryError:
        raise OutOfMemoryError(
            f"{what}: drawing {math.prod(shape)} values for tensor {out._dt.name!r} ran out of "
            "host memory; run with --timing-only (sizes, not bytes) or use a smaller tensor"
        ) from None
    out._dt.copy_(values)
    return out


def rand(
    *size: Any, generator: Any = None, dtype: Any = None, device: Any = None, dp: Any = None
) -> Tensor:
    """Uniform in [0, 1), drawn on the host from the rank's generator and copied in."""
    dt = _floating(dtype, "rand")
    draw = functools.partial(_random.resolve(generator).random, dtype=np.float32)
    return _drawn(_size(size, "rand"), dt, device, dp, draw, "rand")


def randn(
    *size: Any, generator: Any = None, dtype: Any = None, device: Any = None, dp: Any = None
) -> Tensor:
    """Standard normal, drawn on the host from the rank's generator and copied in."""
    dt = _floating(dtype, "randn")
    draw = functools.partial(_random.resolve(generator).standard_normal, dtype=np.float32)
    return _drawn(_size(size, "randn"), dt, device, dp, draw, "randn")


def randint(
    *args: Any,
    size: Any = None,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    dp: Any = None,
) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: integers in [low, high)."""
    if size is None:
        if len(args) < 2:
            raise TensorError("randint needs high and size: randint(high, size)")
        *args, size = args
    if len(args) == 1:
        low, high = 0, args[0]
    elif len(args) == 2:
        low, high = args
    else:
        raise TensorError(
            f"randint takes (high, size) or (low, high, size); got {len(args)} bounds"
        )
    if not low < high:
        raise TensorError(f"randint: low ({low}) must be below high ({high})")
    shape = _size((size,), "randint")
    dt = as_torch_dtype(dtype, DTYPE_OBJECTS["int32"])
    draw = functools.partial(_random.resolve(generator).integers, low, high, dtype=np.int64)
    return _drawn(shape, dt, device, dp, draw, "randint")


def rand_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:  # noqa: A002
    args = _like_args(input, dtype, device)
    return rand(input.shape, dtype=args["dtype"], device=args["index"], dp=input._dp)


def randn_like(input: Tensor, *, dtype: Any = None, device: Any = None) -> Tensor:  # noqa: A002
    args = _like_args(input, dtype, device)
    return randn(input.shape, dtype=args["dtype"], device=args["index"], dp=input._dp)
