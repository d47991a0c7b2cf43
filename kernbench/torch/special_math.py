"""The special functions and two-operand float math of :class:`~kernbench.torch.Tensor`:
``logit``, ``sinc``, ``deg2rad``/``rad2deg``, ``erfinv``, ``lgamma``, ``digamma``, ``i0``,
``signbit``, ``frexp``, ``sgn``, ``positive``, ``tan``, ``sinh``/``cosh``,
``asinh``/``acosh``/``atanh`` (and torch's ``arc*`` aliases); ``xlogy``, ``copysign``,
``heaviside``, ``hypot``, ``atan2``/``arctan2``, ``logaddexp``/``logaddexp2``,
``float_power``, ``true_divide``, ``fmax``/``fmin``, ``nextafter``, ``ldexp`` and the bit
shifts (``<<``, ``>>``), with their in-place forms.

:class:`TensorSpecial` is mixed into the tensor class.  Each op is one pass of an
elementwise kernel (:mod:`~kernbench.torch.special_kernels`) over its operands made
dense (a broadcast or strided operand is copied first, costed, as the division ops do).
Result dtypes are torch's: the unary functions and ``xlogy``/``copysign``/``atan2`` give
the default dtype for integer and bool tensors; ``hypot``, ``logaddexp``, ``nextafter``
take floating tensors only; ``float_power`` is float64; ``ldexp`` is ``input * 2.0 **
other``, so floating; ``fmax``/``fmin``, the shifts and ``pow`` with a tensor exponent
(:func:`special_binary`, which :mod:`~kernbench.torch.pointwise` calls) promote as
arithmetic does.
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.arithmetic import check_pair, dense_as, pair_dtype, written
from kernbench.torch.dtypes import (
    BOOL,
    DTYPE_OBJECTS,
    check_scalar_fits,
    get_default_dtype,
    promote_types,
    python_scalar,
    scalar_dtype,
    scalar_result_dtype,
)
from kernbench.torch.special_kernels import launch_special, launch_special_binary

if TYPE_CHECKING:
    from kernbench.torch.dtypes import TorchDType
    from kernbench.torch.tensor import Tensor

__all__ = ["FrexpResult", "TensorSpecial", "special_binary"]

FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])  # torch.return_types.frexp

_FLOAT64 = DTYPE_OBJECTS["float64"]
_INT32 = DTYPE_OBJECTS["int32"]
# Two-operand ops torch computes on floating tensors only (ints raise, as there).
_FLOATS_ONLY = ("hypot", "logaddexp", "logaddexp2", "nextafter")
# Ops that make integer and bool operands the default float dtype.
_TO_FLOAT = ("xlogy", "copysign", "ldexp", "atan2")
# Ops that take a number for ``other`` / for ``input`` (the others want tensors).
_SCALAR_OTHER = ("xlogy", "copysign", "float_power", "lshift", "rshift", "pow")
_SCALAR_INPUT = ("xlogy", "float_power", "lshift", "rshift", "pow")
_NAMES = {"lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift"}


def _unary_special(self: Tensor, op: str, out: Tensor | None, eps: Any = None) -> Tensor:
    name = f"{op}_" if out is not None else op
    what = f"{name} of {self.storage_device_tensor.name!r}"
    if eps is not None and (python_scalar(eps) is None or isinstance(eps, bool)):
        raise TensorError(f"{what}: eps must be a number or None (as in torch), got {eps!r}")
    rtype = None if self.dtype.is_floating_point else get_default_dtype()
    if out is not None and rtype is not None:
        raise TensorError(
            f"{what}: result type {rtype!r} can't be cast to the in-place output type "
            f"{self.dtype!r} (as in torch); use {op}() (a new tensor)"
        )
    x = self.dense()
    direct = out is not None and out.contiguous_device_tensor()
    target = out if direct else self.new_empty(self.shape, dtype=rtype)
    if target.numel():
        launch_special(
            op, x.device_tensor, target.device_tensor, eps=None if eps is None else float(eps)
        )
    return written(out, target, [x] if x is not self else [])


def _unary_pair(op: str) -> tuple[Any, Any]:
    def method(self: Tensor) -> Tensor:
        return _unary_special(self, op, None)

    def in_place(self: Tensor) -> Tensor:
        return _unary_special(self, op, self)

    method.__name__ = method.__qualname__ = op
    in_place.__name__ = in_place.__qualname__ = f"{op}_"
    method.__doc__ = f"Elementwise {op}, as torch's (a device kernel)."
    in_place.__doc__ = f"Elementwise {op} in place, as torch's (a device kernel)."
    return method, in_place


def _operand_dtype(value: Any) -> TorchDType:
    return value.dtype if hasattr(value, "storage_device_tensor") else scalar_dtype(value)


def _result_dtype(op: str, what: str, a: Any, b: Any) -> TorchDType:
    """torch's result dtype of ``op(a, b)`` (one may be a number), or its error."""
    dtypes = (_operand_dtype(a), _operand_dtype(b))
    if op == "float_power":
        return _FLOAT64
    if op == "heaviside":
        if dtypes[0] is not dtypes[1]:
            raise TensorError(
                f"{what}: heaviside is not yet implemented for tensors with different dtypes "
                f"(as in torch), got {dtypes[0]!r} and {dtypes[1]!r}; convert values with "
                ".to(input.dtype)"
            )
        return dtypes[0]
    if op == "ldexp":  # input * torch.pow(2.0, other)
        power = dtypes[1] if dtypes[1].is_floating_point else get_default_dtype()
        return promote_types(dtypes[0], power)
    if isinstance(a, TensorSpecial) and isinstance(b, TensorSpecial):
        rtype = pair_dtype(a, b)
    elif isinstance(a, TensorSpecial):
        rtype = scalar_result_dtype(a.dtype, b)
    else:
        rtype = scalar_result_dtype(b.dtype, a)
    if op in ("lshift", "rshift") and (rtype.is_floating_point or rtype is BOOL):
        raise TensorError(
            f"{what}: not implemented for {rtype!r} (as in torch); shifts take integer tensors"
        )
    if op in _FLOATS_ONLY and not rtype.is_floating_point:
        raise TensorError(
            f"{what}: not implemented for {rtype!r} (as in torch); convert with .float() first"
        )
    if op in _TO_FLOAT and not rtype.is_floating_point:
        return get_default_dtype()
    return rtype


def special_binary(op: str, a: Any, b: Any, out: Tensor | None = None) -> Tensor:
    """``op(a, b)`` elementwise with torch's broadcasting and dtypes, into ``out`` (in
    place: ``a`` itself) or a new tensor; ``a`` or ``b`` may be a number where torch
    takes one."""
    label = _NAMES.get(op, op)
    a_tensor, b_tensor = isinstance(a, TensorSpecial), isinstance(b, TensorSpecial)
    if not (a_tensor or b_tensor):
        raise TensorError(
            f"{label}: one of input and other must be a Tensor (as in torch), got "
            f"{type(a).__name__} and {type(b).__name__}"
        )
    anchor = a if a_tensor else b
    name = f"{label}_" if out is not None else label
    what = f"{name} of {anchor.storage_device_tensor.name!r}"
    for value, tensor, allowed, role in (
        (a, a_tensor, _SCALAR_INPUT, "input"),
        (b, b_tensor, _SCALAR_OTHER, "other"),
    ):
        if not tensor and (op not in allowed or python_scalar(value) is None):
            valid = "a Tensor or a number" if op in allowed else "a Tensor"
            raise TensorError(f"{what}: {role} must be {valid} (as in torch), got {value!r}")
    if a_tensor and b_tensor:
        shape = check_pair(a, b, what, in_place=out is not None)
    else:
        shape = tuple(anchor.shape)
    rtype = _result_dtype(op, what, a, b)
    if out is not None:
        if (
            rtype.is_floating_point
            and not out.dtype.is_floating_point
            or (op == "float_power" and out.dtype is not _FLOAT64)
        ):
            raise TensorError(
                f"{what}: result type {rtype!r} can't be cast to the in-place output type "
                f"{out.dtype!r} (as in torch); use {label}() (a new tensor)"
            )
    temps: list[Tensor] = []
    operands = []
    for value, tensor in ((a, a_tensor), (b, b_tensor)):
        if tensor:
            dense, made = dense_as(value, shape)
            temps += made
            operands.append(dense.device_tensor)
        else:
            number = python_scalar(value)
            check_scalar_fits(number, rtype, what)
            operands.append(number)
    direct = out is not None and out.dtype is rtype and out.contiguous_device_tensor()
    target = out if direct else anchor.new_empty(shape, dtype=rtype)
    if target.numel():
        launch_special_binary(op, operands[0], operands[1], target.device_tensor)
    return written(out, target, temps)


def _binary_pair(op: str) -> tuple[Any, Any]:
    def method(self: Tensor, other: Any) -> Tensor:
        return special_binary(op, self, other)

    def in_place(self: Tensor, other: Any) -> Tensor:
        return special_binary(op, self, other, out=self)

    label = _NAMES.get(op, op)
    method.__name__ = method.__qualname__ = label
    in_place.__name__ = in_place.__qualname__ = f"{label}_"
    method.__doc__ = f"Elementwise {label} of the tensor and ``other``, as torch's."
    in_place.__doc__ = f"Elementwise {label} in place, as torch's."
    return method, in_place


class TensorSpecial:
    """Special functions, two-operand float math and the bit shifts."""

    __slots__ = ()

    sinc, sinc_ = _unary_pair("sinc")
    deg2rad, deg2rad_ = _unary_pair("deg2rad")
    rad2deg, rad2deg_ = _unary_pair("rad2deg")
    erfinv, erfinv_ = _unary_pair("erfinv")
    lgamma, lgamma_ = _unary_pair("lgamma")
    digamma, digamma_ = _unary_pair("digamma")
    i0, i0_ = _unary_pair("i0")
    tan, tan_ = _unary_pair("tan")
    sinh, sinh_ = _unary_pair("sinh")
    cosh, cosh_ = _unary_pair("cosh")
    asinh, asinh_ = _unary_pair("asinh")
    acosh, acosh_ = _unary_pair("acosh")
    atanh, atanh_ = _unary_pair("atanh")
    arcsinh, arcsinh_ = asinh, asinh_
    arccosh, arccosh_ = acosh, acosh_
    arctanh, arctanh_ = atanh, atanh_

    xlogy, xlogy_ = _binary_pair("xlogy")
    copysign, copysign_ = _binary_pair("copysign")
    heaviside, heaviside_ = _binary_pair("heaviside")
    hypot, hypot_ = _binary_pair("hypot")
    atan2, atan2_ = _binary_pair("atan2")
    arctan2, arctan2_ = atan2, atan2_
    logaddexp = _binary_pair("logaddexp")[0]
    logaddexp2 = _binary_pair("logaddexp2")[0]
    float_power, float_power_ = _binary_pair("float_power")
    fmax = _binary_pair("fmax")[0]
    fmin = _binary_pair("fmin")[0]
    nextafter, nextafter_ = _binary_pair("nextafter")
    ldexp, ldexp_ = _binary_pair("ldexp")
    bitwise_left_shift, bitwise_left_shift_ = _binary_pair("lshift")
    bitwise_right_shift, bitwise_right_shift_ = _binary_pair("rshift")
    __lshift__, __ilshift__ = bitwise_left_shift, bitwise_left_shift_
    __rshift__, __irshift__ = bitwise_right_shift, bitwise_right_shift_

    def __rlshift__(self: Tensor, other: Any) -> Tensor:
        return special_binary("lshift", other, self)

    def __rrshift__(self: Tensor, other: Any) -> Tensor:
        return special_binary("rshift", other, self)

    def logit(self: Tensor, eps: float | None = None) -> Tensor:
        """``log(p / (1 - p))``, ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
        return _unary_special(self, "logit", None, eps)

    def logit_(self: Tensor, eps: float | None = None) -> Tensor:
        return _unary_special(self, "logit", self, eps)

    def signbit(self: Tensor) -> Tensor:
        """Whether the sign bit is set (bool): ``-0.0`` and a negative NaN too."""
        out = self.new_empty(self.shape, dtype=BOOL)
        if out.numel():
            x = self.dense()
            launch_special("signbit", x.device_tensor, out.device_tensor)
            written(None, out, [x] if x is not self else [])
        return out

    def frexp(self: Tensor) -> FrexpResult:
        """``(mantissa, exponent)`` with ``self = mantissa * 2 ** exponent`` and
        ``0.5 <= |mantissa| < 1`` (0, inf and NaN keep their value with exponent 0);
        the exponent is int32, as torch's."""
        if not self.dtype.is_floating_point:
            raise TensorError(
                f"frexp of {self.storage_device_tensor.name!r}: torch.frexp() only supports "
                f"floating-point dtypes (as in torch), got {self.dtype!r}"
            )
        mantissa = self.new_empty(self.shape)
        exponent = self.new_empty(self.shape, dtype=_INT32)
        if mantissa.numel():
            x = self.dense()
            launch_special("frexp", x.device_tensor, mantissa.device_tensor, exponent.device_tensor)
            written(None, mantissa, [x] if x is not self else [])
        return FrexpResult(mantissa, exponent)

    def sgn(self: Tensor) -> Tensor:
        """The sign of each element (``sign`` for real tensors, as torch's)."""
        return self.sign()

    def sgn_(self: Tensor) -> Tensor:
        return self.sign_()

    def positive(self: Tensor) -> Tensor:
        """The tensor itself, as torch's (a bool tensor raises, as there)."""
        if self.dtype is BOOL:
            raise TensorError(
                "positive: the `+` operator, on a bool tensor is not supported (as in torch)"
            )
        return self

    def true_divide(self: Tensor, other: Any) -> Tensor:
        """``self / other``: true division (torch's alias of ``div``)."""
        return self.div(other)

    def true_divide_(self: Tensor, other: Any) -> Tensor:
        return self.div_(other)
