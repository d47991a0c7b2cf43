"""Triton's ``libdevice`` math functions (``from triton.language.extra import libdevice``).

Triton calls CUDA's libdevice (or HIP's ocml) for these, choosing the float
or the double function by the argument types: each takes float32 or float64
values and gives its result in that type (``libdevice.asin(x)`` of a float32
block is float32), and refuses other types as Triton does, with a hint to
``.to(tl.float32)``.  Operands of a function with several arguments are typed
together first as a binary operation's are (a Python float beside a float32
block is float32).  The predicates (``isnan``, ``isinf``, ``signbit``,
``finitef``, ``isfinited``) give int32, as libdevice's ``__nv_isnanf`` does.

Here the values come from NumPy in the argument's type; results may differ
from libdevice's in the last bit.  Cost: one vector FLOP an element, and one
transcendental op an element for the functions that are not exact rounding or
sign operations (``abs``, ``floor``, ``ceil``, ``trunc``, ``rint``, ``round``,
``copysign`` ... are not).  The directed-rounding variants (``div_rz``,
``sqrt_ru``, ``fma_rd`` ...) and the bit-level integer functions are not here:
they are :class:`~kernbench.errors.UnsupportedNameError` saying so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import KernelError, unsupported_name
from kernbench.kernels.dtypes import cast_values, dtype, float32, float64, int32
from kernbench.kernels.elementwise import Operand, check_broadcast, promote
from kernbench.kernels.language import Block, constexpr
from kernbench.kernels.program import record_vector, where_am_i
from kernbench.kernels.promotion import scalar_type

_FLOATS = (float32, float64)


def _operand(x: Any) -> Operand:
    if isinstance(x, constexpr):
        x = x.value
    if isinstance(x, Block):
        return Operand(x.value, x.dtype)
    if isinstance(x, bool | int | float):
        return Operand(x, scalar_type(x))
    raise KernelError(
        f"{where_am_i()}: libdevice takes blocks or Python numbers, got {type(x).__name__}"
    )


def _typed_together(name: str, args: tuple[Any, ...]) -> tuple[list[np.ndarray], dtype]:
    """The arguments' values in one type, as Triton's extern call types them, and that type."""
    operands = [_operand(a) for a in args]
    common = operands[0]
    for other in operands[1:]:
        _, _, kind = promote(common, other)
        common = Operand(np.zeros((), kind.np_dtype), kind)
    kind = common.dtype
    if kind not in _FLOATS:
        given = ", ".join(repr(o.dtype) for o in operands)
        raise KernelError(
            f"{where_am_i()}: libdevice.{name} takes float32 or float64 values (libdevice has "
            f"no function for {given}); convert first with .to(tl.float32)"
        )
    values = [np.asarray(cast_values(o.value, kind)) for o in operands]
    check_broadcast(values, f"libdevice.{name}")
    return values, kind


def _function(
    name: str, fn: Callable[..., Any], arity: int, transcendental: bool, result: dtype | None
) -> Callable[..., Block]:
    def call(*args: Any) -> Block:
        if len(args) != arity:
            raise KernelError(
                f"{where_am_i()}: libdevice.{name} takes {arity} argument(s), got {len(args)}"
            )
        values, kind = _typed_together(name, args)
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*values))
        out_type = kind if result is None else result
        block = Block(cast_values(out, out_type), out_type)
        record_vector(block.numel, True, transcendental)
        return block

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"libdevice's {name} of float32 or float64 values (NumPy's, in that type)."
    return call


def _vectorized(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda v: ufunc(v).astype(v.dtype)


def _safe(fn: Callable[[float], float]) -> Callable[[float], float]:
    """``fn`` giving NaN where Python's math raises (a domain error), as libdevice does."""

    def wrapped(x: float) -> float:
        try:
            return fn(x)
        except (ValueError, OverflowError):
            return math.inf if fn is math.gamma and x > 0 else math.nan

    return wrapped


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(v) + 0.5), v)


def _remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """IEEE remainder: ``x - n*y`` with ``n`` the integer nearest ``x/y`` (ties to even)."""
    return x - np.rint(x / y) * y


_UNARY: dict[str, tuple[Callable[..., Any], bool]] = {
    # name: (NumPy function, counts as transcendental)
    "abs": (np.abs, False),
    "acos": (np.arccos, True),
    "acosh": (np.arccosh, True),
    "asin": (np.arcsin, True),
    "asinh": (np.arcsinh, True),
    "atan": (np.arctan, True),
    "atanh": (np.arctanh, True),
    "cbrt": (np.cbrt, True),
    "ceil": (np.ceil, False),
    "cos": (np.cos, True),
    "cosh": (np.cosh, True),
    "cospi": (lambda v: np.cos(np.pi * v), True),
    "erf": (_vectorized(math.erf), True),
    "erfc": (_vectorized(math.erfc), True),
    "exp": (np.exp, True),
    "exp10": (lambda v: np.power(v.dtype.type(10), v), True),
    "exp2": (np.exp2, True),
    "expm1": (np.expm1, True),
    "floor": (np.floor, False),
    "lgamma": (_vectorized(_safe(math.lgamma)), True),
    "log": (np.log, True),
    "log10": (np.log10, True),
    "log1p": (np.log1p, True),
    "log2": (np.log2, True),
    "logb": (lambda v: np.floor(np.log2(np.abs(v))), True),
    "nearbyint": (np.rint, False),
    "rcbrt": (lambda v: 1 / np.cbrt(v), True),
    "rint": (np.rint, False),
    "round": (_round_half_away, False),
    "rsqrt": (lambda v: 1 / np.sqrt(v), True),
    "saturatef": (lambda v: np.clip(v, 0, 1), False),
    "sin": (np.sin, True),
    "sinh": (np.sinh, True),
    "sinpi": (lambda v: np.sin(np.pi * v), True),
    "sqrt": (np.sqrt, True),
    "sqrt_rn": (np.sqrt, True),
    "tan": (np.tan, True),
    "tanh": (np.tanh, True),
    "tgamma": (_vectorized(_safe(math.gamma)), True),
    "trunc": (np.trunc, False),
    "rcp_rn": (lambda v: 1 / v, True),
    "rsqrt_rn": (lambda v: 1 / np.sqrt(v), True),
}
_FLOAT_ONLY = {  # the fast_* functions exist only for float32
    "fast_cosf": np.cos,
    "fast_expf": np.exp,
    "fast_exp10f": lambda v: np.power(v.dtype.type(10), v),
    "fast_log10f": np.log10,
    "fast_log2f": np.log2,
    "fast_logf": np.log,
    "fast_sinf": np.sin,
    "fast_tanf": np.tan,
}
_BINARY: dict[str, tuple[Callable[..., Any], bool]] = {
    "add_rn": (np.add, False),
    "atan2": (np.arctan2, True),
    "copysign": (np.copysign, False),
    "div_rn": (np.divide, True),
    "fast_dividef": (np.divide, True),
    "fdim": (lambda x, y: np.where(x > y, x - y, np.where(np.isnan(x - y), x - y, 0)), False),
    "fmod": (np.fmod, False),
    "hypot": (np.hypot, True),
    "mul_rn": (np.multiply, False),
    "nextafter": (np.nextafter, False),
    "pow": (np.power, True),
    "fast_powf": (np.power, True),
    "remainder": (_remainder, False),
    "rhypot": (lambda x, y: 1 / np.hypot(x, y), True),
    "sub_rn": (np.subtract, False),
}
_TERNARY: dict[str, tuple[Callable[..., Any], bool]] = {
    "fma": (lambda a, b, c: a * b + c, False),
    "fma_rn": (lambda a, b, c: a * b + c, False),
    "norm3d": (lambda a, b, c: np.sqrt(a * a + b * b + c * c), True),
    "rnorm3d": (lambda a, b, c: 1 / np.sqrt(a * a + b * b + c * c), True),
}
_PREDICATES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "finitef": np.isfinite,
    "isfinited": np.isfinite,
    "isinf": np.isinf,
    "isnan": np.isnan,
    "signbit": np.signbit,
}

_FUNCTIONS: dict[str, Callable[..., Block]] = {}
for _name, (_fn, _transcendental) in _UNARY.items():
    _FUNCTIONS[_name] = _function(_name, _fn, 1, _transcendental, None)
for _name, (_fn, _transcendental) in _BINARY.items():
    _FUNCTIONS[_name] = _function(_name, _fn, 2, _transcendental, None)
for _name, (_fn, _transcendental) in _TERNARY.items():
    _FUNCTIONS[_name] = _function(_name, _fn, 3, _transcendental, None)
for _name, _fn in _PREDICATES.items():
    _FUNCTIONS[_name] = _function(_name, _fn, 1, False, int32)


def _float32_only(name: str, fn: Callable[..., Any]) -> Callable[..., Block]:
    general = _function(name, fn, 1, True, None)

    def call(x: Any) -> Block:
        kind = _operand(x).dtype
        if kind is not float32:
            raise KernelError(
                f"{where_am_i()}: libdevice.{name} takes float32 values only (libdevice has no "
                f"double version), got {kind!r}; use libdevice.{name[5:-1]} for float64"
            )
        return general(x)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = general.__doc__
    return call


for _name, _fn in _FLOAT_ONLY.items():
    _FUNCTIONS[_name] = _float32_only(_name, _fn)

globals().update(_FUNCTIONS)
__all__ = sorted(_FUNCTIONS)

_ROUNDING = (
    "directed rounding (rz, rd, ru) is not modelled: the values are computed in round to "
    "nearest; use the _rn form or the plain function"
)
_INTEGER = "libdevice's integer and bit functions are not in KernBench; use tl's integer operators"
_CONVERSION = "conversions are .to(tl.<dtype>) here (round to nearest; truncation for float to int)"
_HINTS = {
    **{
        f"{op}_{mode}": _ROUNDING
        for op in ("div", "add", "sub", "mul", "rcp", "sqrt", "fma")
        for mode in ("rz", "rd", "ru")
    },
    **dict.fromkeys(
        ("clz", "popc", "byte_perm", "mulhi", "mul24", "brev", "sad", "ffs", "hadd", "rhadd"),
        _INTEGER,
    ),
    **dict.fromkeys(
        ("j0", "j1", "y0", "y1", "jn", "yn", "cyl_bessel_i0", "cyl_bessel_i1", "erfinv"),
        "Bessel functions and erfinv are not in KernBench's libdevice",
    ),
    **dict.fromkeys(
        ("erfcinv", "erfcx", "normcdf", "normcdfinv", "ilogb", "ldexp", "scalbn"),
        "not in KernBench's libdevice (it lists what there is)",
    ),
}


def unsupported(module: str, name: str) -> AttributeError:
    """The error for a libdevice name KernBench lacks (for the module that re-exports it)."""
    if name.startswith(("double2", "float2", "int2", "uint2", "ll2", "ull2")) or "_as_" in name:
        return unsupported_name(module, "libdevice", name, __all__, {name: _CONVERSION})
    return unsupported_name(module, "libdevice", name, __all__, _HINTS)


def __getattr__(name: str) -> Any:
    raise unsupported("kernbench.kernels.libdevice", name)
