"""Tensor arithmetic: ``+ - * /`` and their methods, with PyTorch's type promotion.

:class:`TensorArithmetic` is mixed into :class:`~kernbench.torch.Tensor`; it
holds the operators (also reflected and in place) and ``add``/``sub``/``mul``/
``div`` with their in-place forms.  An operation runs the elementwise device
kernels on tensors broadcast to one shape (as in PyTorch) or a tensor and a
Python/NumPy scalar.  Broadcast operands and views that are not one run of
memory are read in place through their strides by the broadcast kernel
(:mod:`~kernbench.torch.broadcast_kernels`), as torch's TensorIterator reads
them; an operand of another dtype is first converted on the device (costed)
with its own shape into a temporary, freed once the result is written.  A
result for an in-place view that is not one run is written back by the
strided copy kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.broadcast_kernels import StridedOperand, launch_broadcast
from kernbench.torch.device_kernels import (
    launch_elementwise,
    launch_fill,
    launch_scalar,
)
from kernbench.torch.dtypes import (
    BOOL,
    as_torch_dtype,
    category,
    check_scalar_fits,
    get_default_dtype,
    promote_types,
    python_scalar,
    scalar_result_dtype,
)
from kernbench.torch.views import broadcast_shapes, check_no_partial_overlap, same_device

if TYPE_CHECKING:
    from kernbench.torch.dtypes import TorchDType
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorArithmetic", "read_in_place", "written"]

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


class TensorArithmetic:
    """The arithmetic operators and methods of :class:`~kernbench.torch.Tensor`."""

    __slots__ = ()

    def __add__(self: Tensor, other: Any) -> Tensor:
        return self._binary("add", other)

    def __sub__(self: Tensor, other: Any) -> Tensor:
        return self._binary("sub", other)

    def __mul__(self: Tensor, other: Any) -> Tensor:
        return self._binary("mul", other)

    def __truediv__(self: Tensor, other: Any) -> Tensor:
        return self._binary("div", other)

    def __radd__(self: Tensor, other: Any) -> Tensor:
        return self._binary("add", other)

    def __rmul__(self: Tensor, other: Any) -> Tensor:
        return self._binary("mul", other)

    def __rsub__(self: Tensor, other: Any) -> Tensor:
        return self._reversed("sub", other)

    def __rtruediv__(self: Tensor, other: Any) -> Tensor:
        return self._reversed("div", other)

    def __iadd__(self: Tensor, other: Any) -> Tensor:
        return self._binary("add", other, out=self)

    def __isub__(self: Tensor, other: Any) -> Tensor:
        return self._binary("sub", other, out=self)

    def __imul__(self: Tensor, other: Any) -> Tensor:
        return self._binary("mul", other, out=self)

    def __itruediv__(self: Tensor, other: Any) -> Tensor:
        return self._binary("div", other, out=self)

    def __neg__(self: Tensor) -> Tensor:
        if self.dtype is BOOL:
            raise TensorError(
                "Negation, the `-` operator, on a bool tensor is not supported (as in torch). "
                f"If you are trying to invert a mask, {_INVERT_MASK}"
            )
        if self.dtype.is_signed:
            return self._binary("mul", -1)
        return self._reversed("sub", 0)  # unsigned: wraps around like torch

    def __pos__(self: Tensor) -> Tensor:
        return self

    def add(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
        _check_alpha("add", alpha, self, other)
        return self._binary("add", _times_alpha(other, alpha))

    def sub(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
        _check_alpha("sub", alpha, self, other)
        return self._binary("sub", _times_alpha(other, alpha))

    def mul(self: Tensor, other: Any) -> Tensor:
        return self._binary("mul", other)

    def div(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """True division, or with ``rounding_mode`` "floor" or "trunc" the quotient rounded
        (:class:`~kernbench.torch.division.TensorDivision`'s kernel)."""
        if rounding_mode is not None:
            return self.rounded_division(other, rounding_mode)
        return self._binary("div", other)

    def add_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
        _check_alpha("add_", alpha, self, other)
        return self._binary("add", _times_alpha(other, alpha), out=self)

    def sub_(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:
        _check_alpha("sub_", alpha, self, other)
        return self._binary("sub", _times_alpha(other, alpha), out=self)

    def mul_(self: Tensor, other: Any) -> Tensor:
        return self._binary("mul", other, out=self)

    def div_(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        if rounding_mode is not None:
            return self.rounded_division(other, rounding_mode, out=self)
        return self._binary("div", other, out=self)

    # -- the optimizers' fused updates, as the ops they are made of ----------------------
    def addcmul(self: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
        """``self + value * tensor1 * tensor2`` (Adam's second moment), multiplied left to
        right (``(value * tensor1) * tensor2``, as torch's kernel writes it).  Each step
        rounds to the tensors' dtype: for float16/bfloat16 torch keeps the steps in
        float32 and rounds once, so the last bit may differ there."""
        _check_alpha("addcmul", value, self, *_operands("addcmul", tensor1, tensor2), name="value")
        return self._with_temporary("add", _scaled_product(tensor1, tensor2, value))

    def addcmul_(self: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
        _check_alpha(
            "addcmul_", value, self, *_operands("addcmul_", tensor1, tensor2), name="value"
        )
        return self._with_temporary("add", _scaled_product(tensor1, tensor2, value), out=self)

    def addcdiv(self: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
        """``self + value * (tensor1 / tensor2)`` (Adam's step; torch's CUDA order)."""
        _float_quotient(*_operands("addcdiv", tensor1, tensor2), "addcdiv")
        return self._with_temporary("add", _times_alpha(tensor1 / tensor2, value))

    def addcdiv_(self: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
        _float_quotient(*_operands("addcdiv_", tensor1, tensor2), "addcdiv_")
        return self._with_temporary("add", _times_alpha(tensor1 / tensor2, value), out=self)

    def lerp(self: Tensor, end: Any, weight: Any) -> Tensor:
        """``self + weight * (end - self)``; for a scalar weight of 0.5 or more, as torch,
        ``end - (end - self) * (1 - weight)`` (exact at weight 1).  A tensor of weights
        takes the first form everywhere (there is no elementwise choice here)."""
        return self._lerp(end, weight, None)

    def lerp_(self: Tensor, end: Any, weight: Any) -> Tensor:
        return self._lerp(end, weight, self)

    def _lerp(self: Tensor, end: Any, weight: Any, out: Tensor | None) -> Tensor:
        scalar = python_scalar(weight)
        if scalar is None or abs(scalar) < 0.5:
            return self._with_temporary("add", weight * (end - self), out=out)
        gap = end - self
        # 1 - weight in torch's kernel's opmath type: double for a float64 result,
        # float32 for every other float dtype
        if gap.dtype.name == "float64":
            rest = 1.0 - scalar
        else:
            rest = float(np.float32(1) - np.float32(scalar))
        scaled = gap * rest
        result = end - scaled
        free_temporaries(gap, scaled)
        if out is None:
            return result
        out.copy_(result)
        free_temporaries(result)
        return out

    def _with_temporary(self: Tensor, op: str, temporary: Tensor, out: Tensor | None = None):
        """``self op temporary``, the temporary freed after."""
        try:
            return self._binary(op, temporary, out=out)
        finally:
            free_temporaries(temporary)

    # -- the two forms every operator reduces to ---------------------------------------
    def _binary(self: Tensor, op: str, other: Any, out: Tensor | None = None) -> Tensor:
        """``self op other`` in ``out`` (in place) or a new tensor, with torch's promotion."""
        what = f"{op} of {self.storage_device_tensor.name!r}"
        shape = tuple(self.shape)
        if isinstance(other, TensorArithmetic):
            shape = check_pair(self, other, what, in_place=out is not None)
            if out is not None:
                check_no_partial_overlap(out, other, what)
            rtype = pair_dtype(self, other)
            value = None
        else:
            value = python_scalar(other)
            if value is None:
                raise TensorError(
                    f"{what}: operand {type(other).__name__} is not supported; use a Tensor "
                    "(broadcastable) or a Python scalar (torch.from_numpy converts arrays)"
                )
            rtype = scalar_result_dtype(self.dtype, other)
        if op == "div" and not rtype.is_floating_point:
            rtype = get_default_dtype()  # true division, as torch does
        _check_bool_subtraction(op, rtype)
        if out is not None and rtype.is_floating_point and not out.dtype.is_floating_point:
            raise TensorError(
                f"{what}: result type {rtype!r} can't be cast to the in-place output type "
                f"{out.dtype!r}; use an out-of-place op (a = a {_SYMBOL[op]} b)"
            )
        direct = out is not None and out.dtype is rtype and out.contiguous_device_tensor()
        strided = None
        if value is None:
            strided = read_in_place(shape, [(self, rtype), (other, rtype)], out)
        if strided is not None:
            operands, temps = strided
            target = out if direct else self.new_empty(shape, dtype=rtype)
            launch_broadcast("arith", op, target.device_tensor, shape, operands)
            return written(out, target, temps)
        temps = []
        x, temp = dense_as(self, shape, rtype)
        target = out if direct else self.new_empty(shape, dtype=rtype)
        temps += temp
        if value is None:
            y, temp = dense_as(other, shape, rtype)
            temps += temp
            launch_elementwise(op, x.device_tensor, y.device_tensor, target.device_tensor)
        else:
            check_scalar_fits(value, rtype, what)
            launch_scalar(op, x.device_tensor, value, target.device_tensor)
        return written(out, target, temps)

    def _reversed(self: Tensor, op: str, other: Any) -> Tensor:
        """``other op self`` for a scalar ``other``: a tensor filled with it, then the op."""
        value = python_scalar(other)
        if value is None:
            raise TensorError(
                f"{op} into {self.storage_device_tensor.name!r}: operand "
                f"{type(other).__name__} is not supported; use a Python scalar or a Tensor"
            )
        rtype = scalar_result_dtype(self.dtype, other)
        if op == "div" and not rtype.is_floating_point:
            rtype = get_default_dtype()
        _check_bool_subtraction(op, rtype)
        check_scalar_fits(value, rtype, f"{op} of {self.storage_device_tensor.name!r}")
        result = self.new_empty(self.shape, dtype=rtype)
        launch_fill(result.device_tensor, value)
        x = self.dense(rtype)
        launch_elementwise(op, result.device_tensor, x.device_tensor, result.device_tensor)
        if x is not self:
            free_temporaries(x)
        return result


def written(out: Tensor | None, target: Tensor, temps: list[Tensor]) -> Tensor:
    """The result: ``target``, or ``out`` with ``target`` copied in (by the strided copy
    kernel, a view's way back); the temporaries freed."""
    if out is not None and target is not out:
        out.copy_(target)
        temps.append(target)
        target = out
    free_temporaries(*temps)
    return target


def _operands(what: str, tensor1: Any, tensor2: Any) -> tuple[Tensor, Tensor]:
    """``tensor1`` and ``tensor2`` of addcmul/addcdiv: tensors, as torch takes them."""
    for name, t in (("tensor1", tensor1), ("tensor2", tensor2)):
        if not hasattr(t, "storage_device_tensor"):
            raise TensorError(f"{what}: {name} must be a Tensor, got {type(t).__name__}")
    return tensor1, tensor2


def _scaled_product(tensor1: Any, tensor2: Any, value: Any) -> Tensor:
    """``(value * tensor1) * tensor2``, the intermediate freed."""
    if value == 1:
        return tensor1 * tensor2
    scaled = tensor1 * value
    try:
        return scaled * tensor2
    finally:
        free_temporaries(scaled)


def _float_quotient(tensor1: Any, tensor2: Any, what: str) -> None:
    """torch refuses integer division in addcdiv (it no longer truncates)."""
    if not any(
        getattr(t, "dtype", None) is not None and t.dtype.is_floating_point
        for t in (tensor1, tensor2)
    ):
        raise TensorError(
            f"{what}: integer division is not supported (as in torch); convert tensor1 or "
            "tensor2 with .float()"
        )


_INVERT_MASK = "use the `~` or `logical_not()` operator instead"


def _check_bool_subtraction(op: str, rtype: TorchDType) -> None:
    """torch refuses ``-`` between bools (only a bool result comes of two bool operands)."""
    if op == "sub" and rtype is BOOL:
        raise TensorError(
            "Subtraction, the `-` operator, with two bool tensors is not supported (as in "
            f"torch). If you are trying to invert a mask, {_INVERT_MASK}"
        )


def _check_alpha(what: str, alpha: Any, *operands: Any, name: str = "alpha") -> None:
    """torch refuses a float multiplier when every operand is an integer (the result would
    be an integer, and the float cannot scale it)."""
    if not isinstance(python_scalar(alpha), float):
        return
    for x in operands:
        if isinstance(x, TensorArithmetic):
            if x.dtype.is_floating_point:
                return
        elif isinstance(python_scalar(x), float):
            return
    raise TensorError(
        f"{what}: for integral input tensors, argument {name} must not be a floating point "
        f"number (as in torch), got {name}={alpha!r}; convert with .float() or pass an "
        f"integer {name}"
    )


def _times_alpha(other: Any, alpha: Any) -> Any:
    return other if alpha == 1 else other * alpha


def check_pair(a: Tensor, b: Tensor, what: str, *, in_place: bool) -> tuple[int, ...]:
    """The shape ``a op b`` has: the broadcast of both (``a``'s own when in place)."""
    same_device(what, a, b)
    if a.shape == b.shape:
        return tuple(a.shape)
    shape = broadcast_shapes(a.shape, b.shape, what)
    if in_place and shape != tuple(a.shape):
        raise TensorError(
            f"{what}: output with shape {list(a.shape)} doesn't match the broadcast shape "
            f"{list(shape)} (as in torch: an in-place op keeps its tensor's shape; use the "
            "out-of-place form)"
        )
    return shape


def pair_dtype(a: Tensor, b: Tensor) -> TorchDType:
    """PyTorch's rule: a 0-d operand of the other's category (bool, integer or float)
    leaves the other's dtype."""
    same_kind = category(a.dtype) == category(b.dtype)
    if same_kind and b.ndim == 0 and a.ndim:
        return a.dtype
    if same_kind and a.ndim == 0 and b.ndim:
        return b.dtype
    return promote_types(a.dtype, b.dtype)


def dense_as(t: Tensor, shape: tuple[int, ...], dtype: Any = None) -> tuple[Tensor, list[Tensor]]:
    """``t`` broadcast to ``shape`` over one run of memory, and the copy made for it, if any
    (to free after use).  A broadcast that only adds size-1 dims is a view that is already
    dense: no copy, and nothing of its own to free."""
    view = t if tuple(t.shape) == shape else t.expand(shape)
    out = view.dense(dtype)
    return out, [] if out is view else [out]


def read_in_place(
    shape: tuple[int, ...], operands: Sequence[tuple[Any, Any]], out: Tensor | None = None
) -> tuple[list[Any], list[Tensor]] | None:
    """The ``(operand, dtype)`` pairs as the broadcast kernel reads them, and the copies made
    for them (to free after use); or None when the flat kernels serve as well.

    A tensor operand is read in place through its strides, broadcast to ``shape`` by zero
    strides (as torch's TensorIterator reads it); one of another dtype is first converted
    with its own shape, so a broadcast operand costs its own elements.  Numbers pass as
    they are.  None when every tensor operand broadcast to ``shape`` already is one run of
    memory (the flat kernels read it with no copy), when the result is empty, or when an
    operand shows ``out``'s memory in another way (it is copied first, as before, so no
    program reads what another one wrote).
    """
    tensors = [t for t, _ in operands if isinstance(t, TensorArithmetic)]
    if not math.prod(shape):
        return None
    views = [t if tuple(t.shape) == shape else t.expand(shape) for t in tensors]
    if all(v.contiguous_device_tensor() is not None for v in views):
        return None
    if out is not None and any(
        v.storage_device_tensor is out.storage_device_tensor and v.geometry != out.geometry
        for v in views
    ):
        return None
    read: list[Any] = []
    temps: list[Tensor] = []
    for t, dtype in operands:
        if not isinstance(t, TensorArithmetic):
            read.append(t)
            continue
        if dtype is not None and as_torch_dtype(dtype) is not t.dtype:
            t = t.dense(dtype)
            temps.append(t)
        view = t if tuple(t.shape) == shape else t.expand(shape)
        geo = view.geometry
        read.append(StridedOperand(view.storage_device_tensor, geo.offset, geo.strides))
    return read, temps


def free_temporaries(*temps: Tensor) -> None:
    """Free the temporaries an operation made (each once)."""
    for t in temps:
        if not t.storage_device_tensor.is_freed:
            t.free()
