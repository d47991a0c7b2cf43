"""``torch.nn.Parameter``: a tensor a :class:`~kernbench.torch.nn.Module` registers as its own.

A Parameter shares the memory of the tensor it is made from (as torch's) and
has ``requires_grad=True`` by default; it is a
:class:`~kernbench.torch.Tensor` in every other way, and the results of its
operations are plain tensors.  Nothing computes its gradient: ``grad`` is the
slot a script assigns.

``UninitializedParameter`` and ``UninitializedBuffer`` are the lazy modules' tensors
without a shape yet (:mod:`~kernbench.torch.nn.lazy`, ADR 0032): every use but a few
raises torch's message until ``materialize(shape)`` gives the same object memory and
makes it a Parameter (a plain tensor for a buffer).
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

from kernbench.errors import TensorError, TensorTypeError, TensorValueError
from kernbench.torch.factories import empty
from kernbench.torch.shapes import flag_argument
from kernbench.torch.tensor import Tensor

__all__ = ["Buffer", "Parameter", "UninitializedBuffer", "UninitializedParameter", "is_lazy"]


class Parameter(Tensor):
    """``Parameter(data=None, requires_grad=True)`` over ``data``'s memory."""

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TensorTypeError(
                f"Parameter: data must be a Tensor, got {type(data).__name__} (as torch)"
            )
        flag = flag_argument(requires_grad, "Parameter", "requires_grad")
        self._init(data.storage_device_tensor, data.geometry, data.get_device(), data.dp)
        self.requires_grad_(flag)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> Parameter:
        """A copy on the device that is still a Parameter, with a deep copy of its grad."""
        out = Parameter(self.clone(), self.requires_grad)
        memo[id(self)] = out
        if self.grad is not None:
            out.grad = copy.deepcopy(self.grad, memo)
        return out

    def __reduce_ex__(self, protocol: Any) -> tuple:
        rebuild, args = super().__reduce_ex__(protocol)
        return _rebuilt_parameter, (rebuild, args)


def _rebuilt_parameter(rebuild: Any, args: tuple) -> Parameter:
    tensor = rebuild(*args)
    return Parameter(tensor, tensor.requires_grad)


class Buffer(Tensor):
    """``torch.nn.Buffer(data, persistent=True)``: a tensor a module registers as a buffer
    when assigned to one of its attributes (the plain tensor is what is stored)."""

    def __init__(self, data: Tensor, *, persistent: bool = True) -> None:
        if not isinstance(data, Tensor):
            raise TensorTypeError(f"Buffer: data must be a Tensor, got {type(data).__name__}")
        self._init(data.storage_device_tensor, data.geometry, data.get_device(), data.dp)
        self.persistent = flag_argument(persistent, "Buffer", "persistent")


# What an uninitialized parameter or buffer still answers, as torch's
# ``UninitializedTensorMixin._allowed_methods`` and the properties it lets through
# (the rest are shape or values, which it does not have yet).
_UNINITIALIZED_ALLOWED = frozenset(
    {
        "copy_", "is_complex", "is_floating_point", "half", "float", "double",
        "char", "short", "int", "long", "bfloat16", "cuda", "cpu", "to", "get_device",
        "requires_grad", "requires_grad_", "grad", "data", "dtype", "device", "is_leaf",
        "grad_fn", "is_cuda", "layout", "itemsize", "output_nr", "retains_grad",
        "element_size", "is_sparse", "is_quantized", "is_meta", "is_nested",
        "is_mkldnn", "materialize", "cls_to_become",
    }
)  # fmt: skip

# Dunders that are the object's own machinery, not tensor operations.
_UNINITIALIZED_MACHINERY = frozenset(
    {
        "__init__", "__new__", "__getattribute__", "__getattr__", "__setattr__",
        "__delattr__", "__dir__", "__hash__", "__repr__", "__str__", "__reduce__",
        "__reduce_ex__", "__deepcopy__", "__copy__", "__init_subclass__",
        "__subclasshook__", "__class_getitem__", "__sizeof__", "__getstate__",
        "__setstate__",
    }
)  # fmt: skip

_FORWARD_FIRST = (
    "This error happens when you are using a `LazyModule` or explicitly manipulating "
    "`torch.nn.parameter.UninitializedParameter` objects. When using LazyModules Call "
    "`forward` with a dummy batch to initialize the parameters before calling torch functions"
)

_SHAPE_ERROR = (
    "Can't access the shape of an uninitialized parameter or buffer. This error usually "
    "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
    "initialized one. Call `forward` to initialize the parameters before accessing their "
    "attributes."
)


def _uninitialized_use(name: str) -> TensorValueError:
    return TensorValueError(
        f"Attempted to use an uninitialized parameter in {name}. {_FORWARD_FIRST}"
    )


def _refused_method(name: str) -> Any:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise _uninitialized_use(f"Tensor.{name}()")

    refuse.__name__ = name
    return refuse


def _entry_call(name: str) -> str:
    """The KernBench function the program called that reached ``name`` (the outermost
    frame of the package on the stack), e.g. ``linear()`` for ``F.linear(x, weight)``."""
    frame = inspect.currentframe()
    found = None
    while frame is not None and frame.f_globals.get("__name__", "").startswith("kernbench."):
        if "<locals>" not in frame.f_code.co_qualname:  # not a wrapper (autograd, autocast)
            found = frame
        frame = frame.f_back
    if found is None or found.f_globals.get("__name__") == __name__:
        return f"Tensor.{name}"
    called = found.f_code.co_qualname
    if called.startswith("Tensor"):  # a method of one of Tensor's mixins
        called = "Tensor." + found.f_code.co_name
    return f"{called}() (via Tensor.{name})"


def _refused_property(name: str) -> property:
    def refuse(self: Any) -> Any:
        where = _entry_call(name)
        if name in ("shape", "ndim", "T", "mT", "H", "mH", "nbytes"):
            raise TensorError(f"{where}: {_SHAPE_ERROR}")
        raise _uninitialized_use(where)

    return property(refuse)


class UninitializedTensorMixin:
    """What ``torch.nn.parameter.UninitializedParameter`` and ``UninitializedBuffer`` share:
    no shape and no values until :meth:`materialize` gives them memory of a shape (in place:
    the object becomes its ``cls_to_become``).  Until then every tensor method or property
    but a few (dtype, device, requires_grad, ``to``, ...) raises torch's message naming the
    call; KernBench's free functions (``F.linear(x, weight)``) meet the refused ``shape`` or
    storage and raise that message."""

    __slots__ = ()
    cls_to_become: type = Tensor

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Give the tensor ``shape`` (memory not written, as ``torch.empty``) on ``device``
        with ``dtype`` (its own unless given); the object becomes ``cls_to_become``, so
        references held elsewhere (an optimizer's) see the materialized tensor."""
        if device is None:
            device = self.device
        if dtype is None:
            dtype = self.dtype
        if isinstance(shape, int):
            shape = (shape,)
        value = empty(tuple(shape), device=device, dtype=dtype)
        grad, flag = self._grad, self._requires_grad
        self._init(value.storage_device_tensor, value.geometry, value.get_device(), value.dp)
        self._grad, self._requires_grad = grad, flag
        self.__class__ = self.cls_to_become

    # a placeholder of no elements stands for the tensor: conversions change it in place
    def to(self, *args: Any, **kwargs: Any) -> Any:
        placeholder = Tensor(self._storage, device_index=self._index, geometry=self._geometry)
        converted = placeholder.to(*args, **kwargs)
        self._init(
            converted.storage_device_tensor, converted.geometry, converted.get_device(), None
        )
        return self

    def cuda(self, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        return self.to(device="cuda" if device is None else device)

    def cpu(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def size(self, dim: int | None = None) -> Any:
        raise TensorError(f"Tensor.size(): {_SHAPE_ERROR}")

    def share_memory_(self) -> Any:
        raise TensorError(
            "Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
            "initialize the parameters before calling `module.share_memory()`."
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def __format__(self, format_spec: str) -> str:
        return format(repr(self), format_spec)

    def __reduce_ex__(self, protocol: Any) -> tuple:
        return (type(self), (self.requires_grad,))

    def __deepcopy__(self, memo: dict) -> Any:
        out = type(self)(self.requires_grad, self.device, self.dtype)
        memo[id(self)] = out
        return out


def _refuse_tensor_api(cls: type) -> None:
    """Define on ``cls`` the mixin's methods and a refusal for each Tensor method and
    property not allowed.  (The tensor class comes first among ``cls``'s bases, so its
    layout is the one ``materialize`` switches to; the mixin's methods are set here to win
    over the tensor's.)"""
    for name, value in vars(UninitializedTensorMixin).items():
        if inspect.isfunction(value) or name == "__str__":  # (__str__ is __repr__)
            setattr(cls, name, value)
    for name in dir(Tensor):
        if name in _UNINITIALIZED_ALLOWED or name in _UNINITIALIZED_MACHINERY:
            continue
        if name in cls.__dict__ or name in UninitializedTensorMixin.__dict__:
            continue
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue  # the tensor's own helpers (``_init``, ``_view``)
        value = inspect.getattr_static(Tensor, name)
        if isinstance(value, property):
            setattr(cls, name, _refused_property(name))
        elif inspect.isfunction(value):
            setattr(cls, name, _refused_method(name))
    for name in ("geometry", "storage_device_tensor", "device_tensor", "dp"):
        setattr(cls, name, _refused_property(name))


class UninitializedParameter(Parameter, UninitializedTensorMixin):
    """``torch.nn.UninitializedParameter(requires_grad=True, device=None, dtype=None)``: a
    parameter a lazy module materializes at its first forward."""

    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None) -> None:
        Parameter.__init__(self, empty(0, device=device, dtype=dtype), requires_grad)


class UninitializedBuffer(Tensor, UninitializedTensorMixin):
    """``torch.nn.UninitializedBuffer(requires_grad=False, device=None, dtype=None)``: a
    buffer a lazy module materializes at its first forward (it becomes a plain tensor)."""

    cls_to_become = Tensor

    def __init__(self, requires_grad: bool = False, device: Any = None, dtype: Any = None) -> None:
        data = empty(0, device=device, dtype=dtype)
        self._init(data.storage_device_tensor, data.geometry, data.get_device(), data.dp)
        self.requires_grad_(requires_grad)


_refuse_tensor_api(UninitializedParameter)
_refuse_tensor_api(UninitializedBuffer)


def is_lazy(param: Any) -> bool:
    """``torch.nn.parameter.is_lazy``: whether ``param`` is not materialized yet."""
    return isinstance(param, UninitializedTensorMixin)
