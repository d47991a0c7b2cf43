"""``torch.Tensor`` for KernBench: a device tensor with PyTorch's face.

A :class:`Tensor` is a window (shape, strides, storage offset) on a runtime
:class:`~kernbench.runtime.DeviceTensor`, its *storage*, placed on the calling
rank's device (by default the whole tensor on the device's first PE; ``dp=``
shards it).  Factories make tensors that show all of their storage;
indexing, ``view``, ``transpose`` and the other view methods
(:mod:`~kernbench.torch.layout`) make tensors that share it, so writes
through a view are seen by its base, as in PyTorch.  Arithmetic runs the
built-in device kernels on the simulated PEs and costs simulated time;
``numpy()``, ``item()``, ``tolist()`` and ``repr`` read the values back to
the host through the fabric, which costs time too.  This module holds the
class and :func:`new_tensor`, which every factory goes through; the operators
are in :mod:`~kernbench.torch.arithmetic`, reductions in
:mod:`~kernbench.torch.reductions` (``nansum``/``nanmean``/``aminmax`` in
:mod:`~kernbench.torch.nan_reductions`), ``exp``/``abs``/... in
:mod:`~kernbench.torch.pointwise`, ``floor``/``round``/``sign``/... in
:mod:`~kernbench.torch.rounding`, ``//``/``%``/``fmod`` in
:mod:`~kernbench.torch.division`, ``prod``/``cumsum`` in
:mod:`~kernbench.torch.scans`, ``sort``/``topk`` in :mod:`~kernbench.torch.sorting`,
``median``/``quantile`` in :mod:`~kernbench.torch.selection`,
``kthvalue``/``mode`` in :mod:`~kernbench.torch.ranks`, ``histc`` in
:mod:`~kernbench.torch.histograms`,
``gather``/``scatter_``/``index_add_``/... in :mod:`~kernbench.torch.index_ops`,
dtypes in :mod:`~kernbench.torch.dtypes`,
the factories in :mod:`~kernbench.torch.factories` and
:mod:`~kernbench.torch.sampling`.

Decisions a PyTorch user would otherwise have to guess:

* torch's dtypes: Python floats infer ``float32`` (the default dtype),
  Python ints ``int64``, Python bools ``bool`` (one byte per element); a
  NumPy array keeps its dtype (``float64`` included); integer and bool sums
  and the indices of ``max(dim)``/``argmax``/``sort``/``topk`` are ``int64``;
  float64 math runs in float64.  There are no complex dtypes.
* Broadcasting follows PyTorch; type promotion too (int + float scalar is
  float32, ``/`` is true division and gives float32 for integers; an
  in-place op whose result would be float on an integer tensor raises).
* Views and memory: a view that is one row-major run of its storage
  (``t[0]``, ``t[1:3]``, ``t.view(...)``) *is* those bytes: kernels, host
  reads and collectives use them directly.  Any other view (``t.T``,
  ``t[:, 0]``, ``t[::2]``, an ``expand``) is read and written by strided copy
  kernels; an operation on it first copies it into a contiguous temporary
  (costed, freed afterwards) and writes results back through the strided
  kernel.  Collectives and user kernels need a contiguous tensor, as
  ``torch.distributed`` does: ``device_tensor`` says so for other views.
  A write whose source shares only part of the written view's memory
  (``x[1:] = x[:-1]``) raises, as torch does: clone() the source.
* Placement: results of elementwise ops and copies keep their input's
  ``dp=`` sharding; results of another shape (reductions, ``cat``,
  ``stack``) and every view but the whole tensor are whole on the device's
  first PE.
* There is no host tensor: ``device="cpu"`` places on the current device, and
  ``.cpu()`` and ``.to("cpu")`` return a copy on the device (a snapshot, as
  PyTorch's copy to the host is); ``numpy()`` is the read to the host and
  returns a copy (``bfloat16`` reads back as float32).
* Autograd (:mod:`kernbench.torch.autograd`): operations on tensors that require
  grad record a graph; ``backward()`` runs it with the same device ops, so it costs
  simulated time (ADR 0020).
* ``zeros`` is written by the runtime (a host write); ``ones``/``full`` run
  the fill kernel, ``arange`` a device kernel, ``clone``/``to`` the copy
  kernel, ``sum``/``mean``/``max``/... a reduction kernel whose result stays
  on the device; ``rand``/``randn``/``randint`` draw on the host and copy the
  values in.  Host-side calls (``item``, ``tolist``, ``numpy``, ``repr``,
  ``allclose``, ``equal``) cost only the read of the values.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.runtime.current import current_context
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.arithmetic import TensorArithmetic
from kernbench.torch.composites import TensorComposites
from kernbench.torch.device_kernels import launch_copy, launch_fill
from kernbench.torch.devices import ACCELERATOR, device, device_index
from kernbench.torch.division import TensorDivision
from kernbench.torch.dtypes import (
    DTYPE_OBJECTS,
    TorchDType,
    as_torch_dtype,
    check_scalar_fits,
    python_scalar,
    runtime_dtype,
)
from kernbench.torch.element_writes import TensorElementWrites
from kernbench.torch.grad_slots import TensorGradSlots
from kernbench.torch.histograms import TensorHistograms
from kernbench.torch.host_ops import TensorHostOps
from kernbench.torch.host_values import TensorHostValues
from kernbench.torch.index_ops import TensorIndexOps
from kernbench.torch.layout import TensorLayout
from kernbench.torch.logic import TensorLogic
from kernbench.torch.memory_formats import (
    check_memory_format,
    contiguous_format,
    is_contiguous_as,
    preserve_format,
)
from kernbench.torch.missing import missing_attribute
from kernbench.torch.nan_reductions import TensorNanReductions
from kernbench.torch.pointwise import TensorPointwise
from kernbench.torch.products import TensorProducts
from kernbench.torch.products_more import TensorProductsMore
from kernbench.torch.random_fills import TensorRandomFills
from kernbench.torch.ranks import TensorRanks
from kernbench.torch.rearrange import TensorRearrange
from kernbench.torch.reductions import TensorReductions
from kernbench.torch.repeats import TensorRepeats
from kernbench.torch.rounding import TensorRounding
from kernbench.torch.runs import TensorRuns
from kernbench.torch.scans import TensorScans
from kernbench.torch.scatter_reduce import TensorScatterReduce
from kernbench.torch.selection import TensorSelection
from kernbench.torch.shape_views import TensorShapeViews
from kernbench.torch.shapes import Size, dim_index, shape_argument
from kernbench.torch.sorting import TensorSorting
from kernbench.torch.sparse_layouts import TensorSparseLayouts
from kernbench.torch.special_math import TensorSpecial
from kernbench.torch.storage import element_range
from kernbench.torch.triangular import TensorTriangular
from kernbench.torch.view_kernels import launch_strided_copy, launch_strided_fill
from kernbench.torch.views import Geometry, check_no_partial_overlap

if TYPE_CHECKING:
    from kernbench.runtime.context import RuntimeContext

__all__ = ["Tensor", "TensorType", "new_tensor"]

_UNKNOWN = object()  # a view's contiguous device tensor, not yet looked for


def _rebuilt(bits: np.ndarray, dtype_name: str, requires_grad: bool) -> Tensor:
    """An unpickled tensor: pickled storage ``bits`` copied to the current device."""
    dt = DTYPE_OBJECTS[dtype_name]
    out = new_tensor(bits.shape, dt)
    out.device_tensor.copy_(runtime_dtype(dt).from_storage(bits))
    return out.requires_grad_() if requires_grad else out


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


class TensorType(type):
    """The type of :class:`Tensor`: ``torch.Tensor(2, 3)``, ``torch.Tensor([1, 2])`` and
    ``torch.Tensor()`` are torch's legacy constructor (a tensor of the default dtype,
    as ``torch.FloatTensor``'s), which :mod:`~kernbench.torch.legacy_types` registers
    here; a runtime :class:`~kernbench.runtime.DeviceTensor` makes the tensor over it."""

    legacy_constructor: Callable[..., Tensor] | None = None
    # ``t.new(...)``: the same constructor with ``t``'s dtype and device, called as
    # ``legacy_new(t, args)``
    legacy_new: Callable[[Tensor, tuple], Tensor] | None = None

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        wraps_storage = bool(args) and isinstance(args[0], DeviceTensor)
        if cls is Tensor and not wraps_storage and TensorType.legacy_constructor is not None:
            return TensorType.legacy_constructor(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class Tensor(
    TensorArithmetic,
    TensorDivision,
    TensorRounding,
    TensorScans,
    TensorSorting,
    TensorSelection,
    TensorRanks,
    TensorHistograms,
    TensorElementWrites,
    TensorShapeViews,
    TensorProducts,
    TensorProductsMore,
    TensorRuns,
    TensorIndexOps,
    TensorScatterReduce,
    TensorLogic,
    TensorReductions,
    TensorNanReductions,
    TensorPointwise,
    TensorSpecial,
    TensorRandomFills,
    TensorTriangular,
    TensorComposites,
    TensorRepeats,
    TensorRearrange,
    TensorLayout,
    TensorHostValues,
    TensorHostOps,
    TensorGradSlots,
    TensorSparseLayouts,
    metaclass=TensorType,
):
    """A tensor on the simulated machine with PyTorch's methods and operators.

    The operators come from :class:`~kernbench.torch.arithmetic.TensorArithmetic`,
    reductions from :class:`~kernbench.torch.reductions.TensorReductions`,
    ``exp``/``abs``/``matmul``/... from
    :class:`~kernbench.torch.pointwise.TensorPointwise`, ``triu``/``tril`` from
    :class:`~kernbench.torch.triangular.TensorTriangular`, ``square``/``amax``/``addmm``/...
    from :class:`~kernbench.torch.composites.TensorComposites`, ``repeat``/``unbind``/...
    from :class:`~kernbench.torch.repeats.TensorRepeats`, indexing and views
    from :class:`~kernbench.torch.layout.TensorLayout`, ``flip``/``roll``/``diagonal``/...
    from :class:`~kernbench.torch.rearrange.TensorRearrange`, ``unique``/``bincount``/...
    from :class:`~kernbench.torch.host_ops.TensorHostOps`, host reads from
    :class:`~kernbench.torch.host_values.TensorHostValues` and the autograd
    slots from :class:`~kernbench.torch.grad_slots.TensorGradSlots`.
    """

    __array_ufunc__ = None  # NumPy defers ``array + tensor`` to our reflected operators

    def __init__(
        self,
        device_tensor: DeviceTensor,
        *,
        device_index: int | None = None,
        dp: Any = None,
        geometry: Geometry | None = None,
    ) -> None:
        """Show ``device_tensor`` (the storage) whole, or the window ``geometry`` of it."""
        if not isinstance(device_tensor, DeviceTensor):
            raise TensorError(
                "Tensor wraps a runtime DeviceTensor; create tensors with torch.zeros, "
                "torch.tensor, torch.from_numpy, ..."
            )
        if device_index is None:
            device_index = device_tensor.context.current_device() or 0
        self._init(device_tensor, geometry, device_index, dp)

    def _init(self, storage: DeviceTensor, geometry: Geometry | None, index: int, dp: Any) -> None:
        whole_tensor = Geometry.dense(storage.shape)
        whole = geometry is None or geometry == whole_tensor
        self._storage = storage
        self._geometry = whole_tensor if geometry is None else geometry
        self._index = index
        self._dp = dp if whole else None  # a part of the storage is not placed by dp
        self._contiguous: Any = storage if whole else _UNKNOWN
        self._requires_grad = False
        self._grad: Tensor | None = None

    def _view(self, geometry: Geometry) -> Tensor:
        """A tensor showing ``geometry`` of this tensor's storage (shares the memory)."""
        return Tensor(self._storage, device_index=self._index, dp=self._dp, geometry=geometry)

    # -- description --------------------------------------------------------------
    @property
    def geometry(self) -> Geometry:
        """Shape, strides and storage offset of the tensor in its storage (KernBench only)."""
        return self._geometry

    @property
    def storage_device_tensor(self) -> DeviceTensor:
        """The runtime tensor that owns the memory this tensor shows (KernBench only)."""
        return self._storage

    def contiguous_device_tensor(self) -> DeviceTensor | None:
        """This tensor's elements as a runtime tensor over the same bytes, or None.

        The storage itself for a tensor that shows all of it; a device tensor
        over the run of elements for another contiguous view; None when the
        elements are not one run the placement can describe (KernBench only).
        """
        if self._contiguous is _UNKNOWN:
            geo = self._geometry
            found = None
            if geo.is_contiguous:
                found = element_range(self._storage, geo.offset, geo.shape)
            self._contiguous = found
        if self._contiguous is not None:
            self._storage.live_allocation()
        return self._contiguous

    @property
    def device_tensor(self) -> DeviceTensor:
        """The runtime tensor holding exactly this tensor's elements (collectives, kernels).

        A view that is not one run of its storage has none: call
        ``.contiguous()`` for a copy (writes to the copy do not reach the view).
        """
        found = self.contiguous_device_tensor()
        if found is None:
            reason = (
                f"is not contiguous (strides {self._geometry.strides})"
                if not self._geometry.is_contiguous
                else "is a run of a tensor whose shards do not split it into rows"
            )
            raise TensorError(
                f"tensor view of {self._storage.name!r} {reason}; collectives and kernels need "
                "a contiguous tensor (as torch.distributed does): use .contiguous(), a copy"
            )
        return found

    @property
    def dp(self) -> Any:
        """The placement the tensor was made with (``dp=``); same-shape results keep it.

        ``None`` means whole on the device's first PE (also every view but the
        whole tensor).
        """
        return self._dp

    @property
    def shape(self) -> Size:
        return Size(self._geometry.shape)

    @property
    def dtype(self) -> TorchDType:
        return DTYPE_OBJECTS[self._storage.dtype.name]

    @property
    def device(self) -> device:
        return device(ACCELERATOR, self._index)

    def get_device(self) -> int:
        """The index of the tensor's device."""
        return self._index

    @property
    def ndim(self) -> int:
        return len(self._geometry.shape)

    @property
    def nbytes(self) -> int:
        return self.numel() * self.itemsize

    @property
    def itemsize(self) -> int:
        return self._storage.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        """True: every tensor lives on the accelerator."""
        return True

    def numel(self) -> int:
        return self._geometry.numel

    def nelement(self) -> int:
        """``numel()``, under its older name (the Triton tutorials use it)."""
        return self._geometry.numel

    def element_size(self) -> int:
        return self._storage.dtype.itemsize

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None) -> Size | int:
        if dim is None:
            return self.shape
        return self.shape[dim_index(dim, self.ndim, "size", scalar=False)]

    def stride(self, dim: int | None = None) -> tuple[int, ...] | int:
        """Elements to step in the storage per step of each dim (``stride(dim)`` for one)."""
        if dim is None:
            return self._geometry.strides
        return self._geometry.strides[dim_index(dim, self.ndim, "stride", scalar=False)]

    def storage_offset(self) -> int:
        """The storage element of the tensor's first element."""
        return self._geometry.offset

    def data_ptr(self) -> int:
        """The virtual address of the tensor's first element."""
        return self._storage.va_base + self._geometry.offset * self.itemsize

    def is_contiguous(self, memory_format: Any = contiguous_format) -> bool:
        """Row-major contiguity; with ``torch.channels_last`` (``_3d``) whether the strides
        are those of that layout, as torch answers."""
        geo = self._geometry
        return is_contiguous_as(memory_format, geo.shape, geo.strides, geo.is_contiguous)

    def contiguous(self, memory_format: Any = contiguous_format) -> Tensor:
        """The tensor itself when contiguous, else a contiguous copy (device copy kernel).

        ``memory_format`` may only be ``torch.contiguous_format`` (or, for a tensor
        already contiguous, ``preserve_format``, which torch refuses to copy with)."""
        fmt = check_memory_format(memory_format, "Tensor.contiguous", optional=False)
        if self._geometry.is_contiguous:
            return self
        if fmt is preserve_format:
            raise TensorError(
                "Tensor.contiguous: preserve memory format is unsupported by the contiguous "
                "operator (as torch); use torch.contiguous_format"
            )
        return self.dense()

    def free(self) -> None:
        """Return the tensor's memory now (KernBench only; otherwise freed when unreferenced)."""
        if self._contiguous is not self._storage:
            raise TensorError(
                f"free(): this tensor is a view of {self._storage.name!r} and owns no memory; "
                "free the tensor it views"
            )
        self._storage.free()

    def __getattr__(self, name: str) -> Any:
        # Only called for names the class does not have.
        raise missing_attribute(name, dir(type(self)))

    # -- new tensors, copies and conversion ---------------------------------------------
    def new(self, *args: Any) -> Tensor:
        """``t.new(sizes | data | tensor)``: torch's legacy constructor with this tensor's
        dtype and device (:mod:`~kernbench.torch.legacy_types`)."""
        if TensorType.legacy_new is None:
            raise missing_attribute("new", dir(type(self)))
        return TensorType.legacy_new(self, args)

    def new_empty(
        self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """A tensor of ``size``, values not written, with this tensor's dtype and device.

        ``dtype``/``device`` choose others.  A result of this tensor's shape
        also keeps its placement (``dp``); one of another shape is whole on the
        device's first PE.
        """
        shape = shape_argument(size, "new_empty")
        index = device_index(device)
        out = new_tensor(
            shape,
            as_torch_dtype(dtype, self.dtype),
            index=self._index if index is None else index,
            dp=self._dp if shape == tuple(self.shape) else None,
            ctx=self._storage.context,
        )
        return out.requires_grad_() if requires_grad else out

    def new_zeros(
        self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """As :meth:`new_empty`, filled with zeros (by the fill kernel)."""
        out = self.new_empty(*size, dtype=dtype, device=device).zero_()
        return out.requires_grad_() if requires_grad else out  # after the fill, as torch

    def new_ones(
        self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        out = self.new_empty(*size, dtype=dtype, device=device).fill_(1)
        return out.requires_grad_() if requires_grad else out

    def new_full(
        self,
        size: Any,
        fill_value: Any,
        *,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
    ) -> Tensor:
        out = self.new_empty(size, dtype=dtype, device=device).fill_(fill_value)
        return out.requires_grad_() if requires_grad else out

    def dense(self, dtype: Any = None, *, index: int | None = None) -> Tensor:
        """This tensor's values in ``dtype`` as a tensor over one run of memory (KernBench only).

        The tensor itself when it already is one (of that dtype and device);
        otherwise a new tensor filled on the device: by the copy kernel from a
        contiguous tensor, by the strided copy kernel from any other view.
        """
        target = self.dtype if dtype is None else as_torch_dtype(dtype)
        index = self._index if index is None else index
        found = self.contiguous_device_tensor()
        if found is not None and target is self.dtype and index == self._index:
            return self
        out = new_tensor(self.shape, target, index=index, dp=self._dp, ctx=self._storage.context)
        out.copy_(self)
        return out

    def __copy__(self) -> Tensor:
        """``copy.copy``: another tensor over the same memory, as torch's."""
        out = self._view(self._geometry)
        return out.requires_grad_() if self.requires_grad else out

    def __deepcopy__(self, memo: dict) -> Tensor:
        """``copy.deepcopy``: a copy on the device (the copy kernel), with its ``requires_grad``
        and a deep copy of its ``grad``, as torch's."""
        out = self.detach().clone()  # a leaf, as torch's (outside the graph)
        memo[id(self)] = out
        if self.requires_grad:
            out.requires_grad_()
        if self.grad is not None:
            out.grad = copy.deepcopy(self.grad, memo)
        return out

    def __reduce_ex__(self, protocol: Any) -> tuple:
        """Pickling (the object collectives, ``pickle.dumps``) reads the values to the host,
        as torch copies a device tensor's storage; unpickling copies them to the device of
        the rank that unpickles.  In timing-only mode the read costs the same and zeros of
        the same size are pickled, so the bytes moved and the times are the same."""
        dense = self.dense()
        try:
            values = dense.storage_device_tensor.context.read_back(dense.device_tensor)
        finally:
            if dense is not self:
                dense.free()
        rt = self._storage.dtype
        shape = tuple(self.shape)
        bits = np.zeros(shape, rt.storage) if values is None else rt.to_storage(values)
        return _rebuilt, (bits.reshape(shape), rt.name, self.requires_grad)

    def clone(self, *, memory_format: Any = None) -> Tensor:
        """A contiguous copy made on the device by the copy kernel (``preserve_format``
        too: every result here is row-major)."""
        check_memory_format(memory_format, "Tensor.clone")
        out = self.new_empty(self.shape)
        out.copy_(self)
        return out

    def _same_view(self, other: Tensor) -> bool:
        return other.storage_device_tensor is self._storage and other.geometry == self._geometry

    def copy_(self, src: Any, non_blocking: bool = False) -> Tensor:
        """Copy a Tensor (device copy kernel, broadcast to this shape) or host values.

        Host values are written through the fabric.  A view that is not one
        run of memory is written by the strided copy kernel.
        """
        if isinstance(src, Tensor):
            if self._same_view(src):
                return self
            if src.shape != self.shape:
                src = _broadcast_source(src, self, "copy_")
            check_no_partial_overlap(self, src, "copy_")
            self._write(src)
            return self
        values = _host_numbers(src, self)
        if values.shape != tuple(self.shape):
            values = _broadcast_values(values, self)
        found = self.contiguous_device_tensor()
        self._check_writable("copy_")
        if found is not None:
            found.copy_(values)
            return self
        staged = new_tensor(self.shape, self.dtype, index=self._index, ctx=self._storage.context)
        staged.storage_device_tensor.copy_(values)
        self._write(staged)
        staged.free()
        return self

    def _check_writable(self, what: str) -> None:
        if self._geometry.overlaps:
            raise TensorError(
                f"{what}: more than one element of the written-to tensor refers to a single "
                "memory location (an expanded view); clone() it before writing"
            )

    def _write(self, src: Tensor) -> None:
        """``self[...] = src`` on the device; ``src`` has this tensor's shape."""
        self._check_writable("copy_")
        dst = self.contiguous_device_tensor()
        source = src.contiguous_device_tensor()
        if dst is not None and source is not None:
            launch_copy(source, dst)
            return
        geo = src.geometry
        launch_strided_copy(
            src.storage_device_tensor,
            geo.offset,
            geo.strides,
            self._storage,
            self._geometry.offset,
            self._geometry.strides,
            self._geometry.shape,
        )

    def fill_(self, value: Any) -> Tensor:
        """Set every element to ``value`` with the fill kernel."""
        if isinstance(value, Tensor):
            value = value.item()
        number = python_scalar(value)
        if number is None:
            raise TensorError(f"fill_ needs a scalar, got {type(value).__name__}")
        check_scalar_fits(number, self.dtype, "fill_")
        self._check_writable("fill_")
        found = self.contiguous_device_tensor()
        if found is not None:
            launch_fill(found, number)
        else:
            geo = self._geometry
            launch_strided_fill(self._storage, geo.offset, geo.strides, geo.shape, number)
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
        check_memory_format(kwargs.pop("memory_format", None), "Tensor.to")
        if kwargs:
            raise TensorError(f"to(): unexpected arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                dt, dev = arg.dtype, arg.device
            elif isinstance(arg, TorchDType) or (
                isinstance(arg, type) and arg in (float, int, bool)
            ):
                dt = arg
            elif isinstance(arg, bool):
                copy = arg
            else:
                dev = arg
        target_dtype = self.dtype if dt is None else as_torch_dtype(dt)
        if dev is not None and not isinstance(dev, int) and not device(dev).is_accelerator:
            copy = True  # to the host: a copy, as cpu() is
        index = device_index(dev)
        index = self._index if index is None else index
        if not copy and target_dtype is self.dtype and index == self._index:
            return self
        out = new_tensor(
            self.shape, target_dtype, index=index, dp=self._dp, ctx=self._storage.context
        )
        out.copy_(self)
        return out

    def cuda(
        self, device: Any = None, non_blocking: bool = False, *, memory_format: Any = None
    ) -> Tensor:
        check_memory_format(memory_format, "Tensor.cuda")
        return self.to(device_index(device) if device is not None else device_index(ACCELERATOR))

    def cpu(self, *, memory_format: Any = None) -> Tensor:
        """A copy, as PyTorch's copy to the host is (later writes to either are not seen
        by the other); there is no host tensor, so it stays on the device and costs
        the device copy kernel.  ``numpy()`` reads values back."""
        check_memory_format(memory_format, "Tensor.cpu")
        return self.to(copy=True)

    def pin_memory(self, device: Any = None) -> Tensor:
        """A copy in page-locked host memory in PyTorch; there is no host tensor here, so
        it is the copy ``cpu()`` makes (a training loop's ``x.pin_memory().to(device,
        non_blocking=True)`` then costs that copy and no transfer)."""
        return self.to(copy=True)

    def is_pinned(self, device: Any = None) -> bool:
        """False, as for PyTorch's device tensors (every tensor here is one)."""
        return False

    def _as(self, method: str, dtype_name: str, memory_format: Any) -> Tensor:
        check_memory_format(memory_format, f"Tensor.{method}")
        return self.to(DTYPE_OBJECTS[dtype_name])

    def float(self, *, memory_format: Any = None) -> Tensor:
        return self._as("float", "float32", memory_format)

    def double(self, *, memory_format: Any = None) -> Tensor:
        return self._as("double", "float64", memory_format)

    def half(self, *, memory_format: Any = None) -> Tensor:
        return self._as("half", "float16", memory_format)

    def bfloat16(self, *, memory_format: Any = None) -> Tensor:
        return self._as("bfloat16", "bfloat16", memory_format)

    def int(self, *, memory_format: Any = None) -> Tensor:
        return self._as("int", "int32", memory_format)

    def long(self, *, memory_format: Any = None) -> Tensor:
        return self._as("long", "int64", memory_format)

    def short(self, *, memory_format: Any = None) -> Tensor:
        return self._as("short", "int16", memory_format)

    def char(self, *, memory_format: Any = None) -> Tensor:
        return self._as("char", "int8", memory_format)

    def byte(self, *, memory_format: Any = None) -> Tensor:
        return self._as("byte", "uint8", memory_format)

    def bool(self, *, memory_format: Any = None) -> Tensor:
        """``torch.bool`` values: True where the value is nonzero (NaN too), by the copy
        kernel."""
        return self._as("bool", "bool", memory_format)

    def type_as(self, other: Tensor) -> Tensor:
        if not isinstance(other, Tensor):
            raise TensorError(f"type_as: other must be a Tensor, got {type(other).__name__}")
        return self.to(other.dtype)

    # -- kernels -------------------------------------------------------------------------
    def __kernel_arg__(self) -> DeviceTensor:
        """What a kernel launch receives: a pointer to the first element, as in Triton.

        A contiguous tensor passes its elements; another view passes the run of
        its storage from its first to its last element, which a kernel indexes
        with ``t.stride()``.
        """
        found = self.contiguous_device_tensor()
        if found is not None:
            return found
        span = element_range(self._storage, self._geometry.offset, (self._geometry.extent,))
        if span is None:
            return self.device_tensor  # raises, naming the problem
        return span


def _broadcast_source(src: Tensor, dst: Tensor, what: str) -> Tensor:
    try:
        return src.expand(dst.shape)
    except TensorError:
        raise TensorError(
            f"{what} into {dst.storage_device_tensor.name!r}: source shape {tuple(src.shape)} "
            f"does not match {tuple(dst.shape)} and cannot be broadcast to it"
        ) from None


def _host_numbers(src: Any, dst: Tensor) -> np.ndarray:
    """Host values written into ``dst``: numbers (bools, ints, floats) in a rectangular array."""
    try:
        values = np.asarray(src)
    except ValueError:  # ragged nested lists
        values = None
    if values is None or values.dtype.kind not in "biuf":
        kind = "ragged lists" if values is None else f"{type(src).__name__} of {values.dtype}"
        raise TensorError(
            f"copy_ into {dst.storage_device_tensor.name!r}: the values must be a Tensor, a "
            f"number or an array (nested lists) of numbers, got {kind}"
        )
    return values


def _broadcast_values(values: np.ndarray, dst: Tensor) -> np.ndarray:
    try:
        return np.broadcast_to(values, tuple(dst.shape))
    except ValueError:
        raise TensorError(
            f"copy_ into {dst.storage_device_tensor.name!r}: source shape {values.shape} does "
            f"not match {tuple(dst.shape)} and cannot be broadcast to it"
        ) from None
