"""``torch.Tensor`` for KernBench: a device tensor with PyTorch's face.

A :class:`Tensor` wraps a runtime :class:`~kernbench.runtime.DeviceTensor`
placed on the calling rank's device (by default the whole tensor on the
device's first PE; ``dp=`` shards it).  Arithmetic runs the built-in device
kernels on the simulated PEs and costs simulated time; ``numpy()``,
``item()``, ``tolist()`` and ``repr`` read the values back to the host through
the fabric, which costs time too.  This module holds the class and
:func:`new_tensor`, which every factory goes through; the operators are in
:mod:`~kernbench.torch.arithmetic`, ``sum``/``mean`` in
:mod:`~kernbench.torch.reductions`, dtypes in :mod:`~kernbench.torch.dtypes`,
the factories in :mod:`~kernbench.torch.factories` and
:mod:`~kernbench.torch.sampling`.

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

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.runtime.current import current_context
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.arithmetic import TensorArithmetic
from kernbench.torch.device_kernels import launch_copy, launch_fill
from kernbench.torch.devices import ACCELERATOR, device, device_index
from kernbench.torch.dtypes import (
    DTYPE_OBJECTS,
    TorchDType,
    as_torch_dtype,
    python_scalar,
    runtime_dtype,
)
from kernbench.torch.reductions import TensorReductions
from kernbench.torch.shapes import Size, dim_index, is_whole_key, shape_argument

if TYPE_CHECKING:
    from kernbench.runtime.context import RuntimeContext

__all__ = ["Tensor", "new_tensor"]


def new_tensor(
    shape: Sequence[int],
    dt: TorchDType,
    *,
    index: int | None = None,
    dp: Any = None,
    zero: bool = False,
    ctx: RuntimeContext | None = None,
) -> Tensor:
    """A tensor of ``shape`` on device ``index`` (default: the current device), placed by ``dp``.

    Its memory is allocated and mapped; ``zero`` has the runtime write zeros,
    otherwise the values are not written.  ``ctx`` defaults to the current
    context.
    """
    ctx = ctx or current_context()
    make = ctx.zeros if zero else ctx.empty
    dtensor = make(tuple(shape), runtime_dtype(dt), dp=dp, device=index)
    here = index if index is not None else ctx.current_device()
    return Tensor(dtensor, device_index=0 if here is None else here, dp=dp)


class Tensor(TensorArithmetic, TensorReductions):
    """A tensor on the simulated machine with PyTorch's methods and operators.

    The operators and ``add``/``sub``/``mul``/``div`` come from
    :class:`~kernbench.torch.arithmetic.TensorArithmetic`, ``sum``/``mean``
    from :class:`~kernbench.torch.reductions.TensorReductions`.
    """

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
        self._device_tensor = device_tensor
        if device_index is None:
            device_index = device_tensor.context.current_device() or 0
        self._index = device_index
        self._dp = dp

    # -- description --------------------------------------------------------------
    @property
    def device_tensor(self) -> DeviceTensor:
        """The runtime tensor underneath (for collectives and custom kernels)."""
        return self._device_tensor

    @property
    def dp(self) -> Any:
        """The placement the tensor was made with (``dp=``); same-shape results keep it.

        ``None`` means whole on the device's first PE.
        """
        return self._dp

    @property
    def shape(self) -> Size:
        return Size(self._device_tensor.shape)

    @property
    def dtype(self) -> TorchDType:
        return DTYPE_OBJECTS[self._device_tensor.dtype.name]

    @property
    def device(self) -> device:
        return device(ACCELERATOR, self._index)

    def get_device(self) -> int:
        """The index of the tensor's device."""
        return self._index

    @property
    def ndim(self) -> int:
        return len(self._device_tensor.shape)

    @property
    def nbytes(self) -> int:
        return self._device_tensor.nbytes

    @property
    def itemsize(self) -> int:
        return self._device_tensor.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        """True: every tensor lives on the accelerator."""
        return True

    def numel(self) -> int:
        return self._device_tensor.numel

    def element_size(self) -> int:
        return self._device_tensor.dtype.itemsize

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None) -> Size | int:
        if dim is None:
            return self.shape
        return self.shape[dim_index(dim, self.ndim)]

    def data_ptr(self) -> int:
        """The tensor's base virtual address."""
        return self._device_tensor.va_base

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return True

    def contiguous(self, memory_format: Any = None) -> Tensor:
        return self

    def detach(self) -> Tensor:
        return self

    def free(self) -> None:
        """Return the tensor's memory now (KernBench only; otherwise freed when unreferenced)."""
        self._device_tensor.free()

    # -- reading values --------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The values, read to the host through the fabric (a copy; costs time)."""
        return self._device_tensor.numpy()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> int | float:
        if self.numel() != 1:
            raise TensorError(
                f"item() needs a one-element tensor; {self._device_tensor.name!r} has "
                f"{self.numel()} elements"
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
        if self._device_tensor.is_freed:
            body = f"<freed>, size={tuple(self.shape)}"
        elif self._device_tensor.context.timing_only:
            body = f"<no values in timing-only mode>, size={tuple(self.shape)}"
        else:
            body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        return f"tensor({body}, {', '.join(extras)})"

    # -- new tensors, copies and conversion ---------------------------------------------
    def new_empty(
        self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """A tensor of ``size``, values not written, with this tensor's dtype and device.

        ``dtype``/``device`` choose others.  A result of this tensor's shape
        also keeps its placement (``dp``); one of another shape is whole on the
        device's first PE.
        """
        if requires_grad:
            raise TensorError(
                "new_empty: requires_grad=True is not supported (there is no autograd)"
            )
        shape = shape_argument(size, "new_empty")
        index = device_index(device)
        return new_tensor(
            shape,
            as_torch_dtype(dtype, self.dtype),
            index=self._index if index is None else index,
            dp=self._dp if shape == tuple(self.shape) else None,
            ctx=self._device_tensor.context,
        )

    def clone(self, memory_format: Any = None) -> Tensor:
        """A copy made on the device by the copy kernel."""
        out = self.new_empty(self.shape)
        launch_copy(self._device_tensor, out.device_tensor)
        return out

    def copy_(self, src: Any, non_blocking: bool = False) -> Tensor:
        """Copy a Tensor (device copy kernel) or host values (written through the fabric)."""
        if isinstance(src, Tensor):
            if src.device_tensor is self._device_tensor:
                return self
            if src.shape != self.shape:
                raise TensorError(
                    f"copy_ into {self._device_tensor.name!r}: source shape {tuple(src.shape)} "
                    f"does not match {tuple(self.shape)}"
                )
            launch_copy(src.device_tensor, self._device_tensor)
        else:
            self._device_tensor.copy_(np.asarray(src))
        return self

    def fill_(self, value: Any) -> Tensor:
        """Set every element to ``value`` with the fill kernel."""
        if isinstance(value, Tensor):
            value = value.item()
        number = python_scalar(value)
        if number is None:
            raise TensorError(f"fill_ needs a scalar, got {type(value).__name__}")
        launch_fill(self._device_tensor, number)
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
        out = new_tensor(
            self.shape, target_dtype, index=index, dp=self._dp, ctx=self._device_tensor.context
        )
        launch_copy(self._device_tensor, out.device_tensor)
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
        if not is_whole_key(key):
            raise TensorError(
                f"{what} {self._device_tensor.name!r}[{key!r}]: only the whole tensor "
                "(t[:] or t[...]) is supported; read values with t.numpy()[...]"
            )

    def __getitem__(self, key: Any) -> Tensor:
        self._whole(key, "indexing")
        return Tensor(self._device_tensor, device_index=self._index, dp=self._dp)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._whole(key, "assigning to")
        if isinstance(value, Tensor):
            self.copy_(value)
        elif python_scalar(value) is not None:
            self.fill_(value)
        else:
            self.copy_(value)

    def __iter__(self) -> Iterator[Any]:
        raise TensorError(
            f"iterating over {self._device_tensor.name!r} is not supported; iterate over t.tolist()"
        )

    # -- kernels -------------------------------------------------------------------------
    def __kernel_arg__(self) -> DeviceTensor:
        """What a kernel launch receives for this tensor: the device tensor under it."""
        return self._device_tensor
