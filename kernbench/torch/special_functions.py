"""``torch.<name>`` forms of the special functions and two-operand float math
(``torch.lgamma``, ``torch.xlogy``, ``torch.hypot``, ``torch.frexp``, ``torch.tan``,
``torch.atanh``, ``torch.atan2``, ...).

Each takes PyTorch's arguments (``out=`` where torch has it) and runs what the tensor
method of the same name runs (:mod:`~kernbench.torch.special_math`); ``xlogy`` and
``float_power`` take a number for either operand, as torch's do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.functions import _elementwise, _tensor, into_out, with_out
from kernbench.torch.special_math import FrexpResult, special_binary
from kernbench.torch.tensor import Tensor

__all__ = [
    "acosh",
    "arccosh",
    "arcsinh",
    "arctan2",
    "arctanh",
    "asinh",
    "atan2",
    "atanh",
    "cosh",
    "sinh",
    "tan",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "copysign",
    "deg2rad",
    "digamma",
    "erfinv",
    "float_power",
    "fmax",
    "fmin",
    "frexp",
    "heaviside",
    "hypot",
    "i0",
    "ldexp",
    "lgamma",
    "logaddexp",
    "logaddexp2",
    "logit",
    "nextafter",
    "positive",
    "rad2deg",
    "sgn",
    "signbit",
    "sinc",
    "true_divide",
    "xlogy",
]

sinc = with_out(_elementwise("sinc"))
deg2rad = with_out(_elementwise("deg2rad"))
rad2deg = with_out(_elementwise("rad2deg"))
erfinv = with_out(_elementwise("erfinv"))
lgamma = with_out(_elementwise("lgamma"))
digamma = with_out(_elementwise("digamma"))
i0 = with_out(_elementwise("i0"))
tan = with_out(_elementwise("tan"))
sinh = with_out(_elementwise("sinh"))
cosh = with_out(_elementwise("cosh"))
asinh = arcsinh = with_out(_elementwise("asinh"))
acosh = arccosh = with_out(_elementwise("acosh"))
atanh = arctanh = with_out(_elementwise("atanh"))
sgn = with_out(_elementwise("sgn"))
signbit = with_out(_elementwise("signbit"))


def positive(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    """``torch.positive``: ``input`` itself (a bool tensor raises, as torch's)."""
    return _tensor(input, "positive").positive()


@with_out
def logit(input: Tensor, eps: float | None = None) -> Tensor:  # noqa: A002 - torch's name
    """``torch.logit``: ``log(p / (1 - p))``, ``p`` clamped to ``[eps, 1 - eps]``."""
    return _tensor(input, "logit").logit(eps)


def _pair(op: str, name: str, first: str = "input", second: str = "other") -> Callable:
    def fn(*args: Any, **kwargs: Any) -> Tensor:
        values = dict(zip((first, second), args, strict=False))
        for key, value in kwargs.items():
            if key not in (first, second) or key in values:
                raise TensorError(
                    f"torch.{name}: unexpected argument {key!r}; it takes torch.{name}"
                    f"({first}, {second}, *, out=None)"
                )
            values[key] = value
        if len(args) > 2 or set(values) != {first, second}:
            raise TensorError(
                f"torch.{name}: it takes torch.{name}({first}, {second}, *, out=None), got "
                f"{len(args)} positional and {sorted(kwargs)} keyword arguments"
            )
        return special_binary(op, values[first], values[second])

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}({first}, {second}, *, out=None)``, as torch's (a device kernel)."
    return _with_out(fn, name)


def _with_out(fn: Callable[..., Tensor], name: str) -> Callable[..., Tensor]:
    def call(*args: Any, out: Any = None, **kwargs: Any) -> Tensor:
        result = fn(*args, **kwargs)
        return result if out is None else into_out(f"torch.{name}", out, result)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = fn.__doc__
    return call


xlogy = _pair("xlogy", "xlogy")
copysign = _pair("copysign", "copysign")
heaviside = _pair("heaviside", "heaviside", second="values")
hypot = _pair("hypot", "hypot")
atan2 = arctan2 = _pair("atan2", "atan2")
logaddexp = _pair("logaddexp", "logaddexp")
logaddexp2 = _pair("logaddexp2", "logaddexp2")
float_power = _pair("float_power", "float_power", second="exponent")
fmax = _pair("fmax", "fmax")
fmin = _pair("fmin", "fmin")
nextafter = _pair("nextafter", "nextafter")
ldexp = _pair("ldexp", "ldexp")
bitwise_left_shift = _pair("lshift", "bitwise_left_shift")
bitwise_right_shift = _pair("rshift", "bitwise_right_shift")


def true_divide(dividend: Any, divisor: Any, *, out: Any = None) -> Tensor:
    """``torch.true_divide``: ``dividend / divisor`` (torch's alias of ``torch.div``)."""
    if not isinstance(dividend, Tensor):
        if isinstance(divisor, Tensor):
            result = divisor.__rtruediv__(dividend)
        else:
            raise TensorError(
                f"torch.true_divide: expected a Tensor operand, got {type(dividend).__name__} "
                f"and {type(divisor).__name__}"
            )
    else:
        result = dividend.div(divisor)
    return result if out is None else into_out("torch.true_divide", out, result)


def frexp(input: Tensor, *, out: Any = None) -> FrexpResult:  # noqa: A002 - torch's name
    """``torch.frexp``: ``(mantissa, exponent)``; ``out=`` a (mantissa, exponent) pair."""
    result = _tensor(input, "frexp").frexp()
    if out is None:
        return result
    if not isinstance(out, tuple | list) or len(out) != 2:
        for part in result:
            part.free()
        raise TensorError(
            f"torch.frexp: out must be a (mantissa, exponent) pair of tensors, got {out!r}"
        )
    return FrexpResult(
        into_out("torch.frexp", out[0], result[0]), into_out("torch.frexp", out[1], result[1])
    )
