"""Device kernels for the special functions and the two-operand float math:
``logit``, ``sinc``, ``deg2rad``, ``erfinv``, ``lgamma``, ``digamma``, ``i0``, ``signbit``,
``frexp``, ``tan``, ``sinh``/``cosh``, ``asinh``/``acosh``/``atanh``; ``xlogy``,
``copysign``, ``hypot``, ``logaddexp``, ``float_power`` and ``pow`` (a tensor exponent;
integers by repeated squaring over every bit of the exponent, wrapping as torch's),
``atan2``, ``fmax``, ``nextafter``, ``ldexp``, the shifts; ``bernoulli``'s test of uniforms
against probabilities.

Each is one elementwise pass, :data:`~kernbench.torch.device_kernels.BLOCK` elements
a program.  Floating results are computed in float64 and rounded once by the store
(float64 keeps float32's digits through the series and cancellations); the
trigonometric and hyperbolic ones are libdevice's (one transcendental op an element, as
``asin``'s); the functions the kernel language lacks are built from
``exp``/``log``/``sin``/``erf`` as a math library builds them: ``lgamma`` by the
recurrence up to 10 and Stirling's series, with the reflection formula below 1/2,
``digamma`` by the recurrence up to 10 and the asymptotic series, ``erfinv`` by Giles'
approximation refined by two Newton steps on ``erf``, ``i0`` by its power series up to 15
and its asymptotic series past it.
So those cost more vector work an element than ``exp`` does, as torch's do.
"""

from __future__ import annotations

import math
from typing import Any

import kernbench.kernels.language as tl
from kernbench.kernels import libdevice
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid, elementwise_operand

__all__ = [
    "BINARY_SPECIAL_OPS",
    "TRIG_OPS",
    "UNARY_SPECIAL_OPS",
    "launch_special",
    "launch_special_binary",
]

UNARY_SPECIAL_OPS = (
    "logit", "sinc", "deg2rad", "rad2deg", "erfinv", "lgamma", "digamma", "i0", "signbit",
    "frexp", "tan", "sinh", "cosh", "asinh", "acosh", "atanh",
)  # fmt: skip
#: The trigonometric and hyperbolic functions, computed by libdevice in float64.
TRIG_OPS = ("tan", "sinh", "cosh", "asinh", "acosh", "atanh")
BINARY_SPECIAL_OPS = (
    "xlogy", "copysign", "heaviside", "hypot", "logaddexp", "logaddexp2", "float_power",
    "fmax", "fmin", "nextafter", "ldexp", "lshift", "rshift", "bernoulli", "atan2", "pow",
)  # fmt: skip

_PI = math.pi
_LN2 = math.log(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# B_2k / (2k (2k - 1)) of Stirling's series for lgamma, k = 1..7.
_STIRLING = (
    1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680, 1.0 / 1188, -691.0 / 360360, 1.0 / 156,
)  # fmt: skip
# Giles' erfinv approximation: the polynomial in w - 2.5 (w < 5) and in sqrt(w) - 3.
_ERFINV_CENTRAL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941,
)  # fmt: skip
_ERFINV_TAIL = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682,
)  # fmt: skip
# B_2k / (2k) of the asymptotic digamma series, k = 1..7.
_DIGAMMA_SERIES = (
    1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12,
)  # fmt: skip
_I0_SERIES_TERMS = 32
_I0_ASYMPTOTIC_TERMS = 16
_I0_SWITCH = 15.0


@jit
def _log1p(w):
    # Goldberg's log1p in float64: exact where 1 + w rounds to 1.
    u = w + 1.0
    y = tl.where(u == 1.0, w, tl.log(u) * (w / tl.where(u == 1.0, 2.0, u - 1.0)))
    return tl.where(u == float("inf"), u, y)


@jit
def _lgamma_positive(z):
    # Stirling's series at z + k >= 10, less log(z (z + 1) ... (z + k - 1)).
    product = z * 0.0 + 1.0
    for _ in range(10):
        small = z < 10.0
        product = tl.where(small, product * z, product)
        z = tl.where(small, z + 1.0, z)
    inv2 = 1.0 / (z * z)
    series = z * 0.0
    for k in range(len(_STIRLING) - 1, -1, -1):
        series = series * inv2 + _STIRLING[k]
    return (z - 0.5) * tl.log(z) - z + _HALF_LOG_2PI + series / z - tl.log(product)


@jit
def _lgamma(w):
    reflect = w < 0.5
    z = tl.where(reflect, 1.0 - w, w)
    positive = _lgamma_positive(z)
    r = w - 2.0 * tl.floor(w * 0.5)  # w mod 2, so sin(pi w) keeps its digits
    s = tl.abs(tl.sin(_PI * r))
    y = tl.where(reflect, tl.log(_PI / s) - positive, positive)
    pole = (w <= 0) & (w == tl.floor(w))
    y = tl.where(pole | (tl.abs(w) == float("inf")), float("inf"), y)
    return y


@jit
def _digamma(w):
    reflect = w < 0
    z = tl.where(reflect, 1.0 - w, w)
    acc = z * 0.0
    for _ in range(10):
        small = z < 10.0
        acc -= tl.where(small, 1.0 / z, 0.0)
        z = tl.where(small, z + 1.0, z)
    inv2 = 1.0 / (z * z)
    series = z * 0.0
    for k in range(len(_DIGAMMA_SERIES) - 1, -1, -1):
        series = (series + _DIGAMMA_SERIES[k]) * inv2
    y = acc + tl.log(z) - 0.5 / z - series
    r = w - tl.floor(w)  # tan has period 1
    y = tl.where(reflect, y - _PI * tl.cos(_PI * r) / tl.sin(_PI * r), y)
    y = tl.where((w < 0) & (w == tl.floor(w)), float("nan"), y)
    y = tl.where(w == float("inf"), w, y)
    # torch: -inf at +0.0, inf at -0.0 (the sign of the pole's side)
    negative_zero = 1.0 / tl.where(w == 0, w, 1.0) < 0
    return tl.where(w == 0, tl.where(negative_zero, float("inf"), -float("inf")), y)


@jit
def _erfinv(w):
    lw = -tl.log((1.0 - w) * (1.0 + w))
    central = lw - 2.5
    p = central * 0.0 + _ERFINV_CENTRAL[0]
    for k in range(1, len(_ERFINV_CENTRAL)):
        p = p * central + _ERFINV_CENTRAL[k]
    tail = tl.sqrt(tl.where(lw < 5.0, 5.0, lw)) - 3.0
    q = tail * 0.0 + _ERFINV_TAIL[0]
    for k in range(1, len(_ERFINV_TAIL)):
        q = q * tail + _ERFINV_TAIL[k]
    y = tl.where(lw < 5.0, p, q) * w
    for _ in range(2):  # Newton on erf(y) = w: float64's digits
        y = y - (tl.erf(y) - w) / (1.1283791670955126 * tl.exp(-y * y))
    y = tl.where(tl.abs(w) == 1.0, w * float("inf"), y)
    return tl.where(tl.abs(w) > 1.0, float("nan"), y)


@jit
def _i0(w):
    a = tl.abs(w)
    near = tl.where(a <= _I0_SWITCH, a, 0.0)
    quarter = near * near * 0.25
    term = near * 0.0 + 1.0
    total = term
    for k in range(1, _I0_SERIES_TERMS):
        term = term * quarter / (k * k)
        total += term
    far = tl.where(a > _I0_SWITCH, a, _I0_SWITCH + 1.0)
    term = far * 0.0 + 1.0
    series = term
    for k in range(1, _I0_ASYMPTOTIC_TERMS):
        term = term * ((2 * k - 1) * (2 * k - 1)) / (8.0 * k * far)
        series += term
    half = tl.exp(far * 0.5)  # exp(a) as two halves: finite a step past exp's overflow
    asymptotic = half * (half / tl.sqrt(2.0 * _PI * far)) * series
    y = tl.where(a <= _I0_SWITCH, total, asymptotic)
    return tl.where(a == float("inf"), a, y)


@jit
def _sign_bit(x, IT: tl.constexpr):
    # The sign bit of a float block: -0.0 and a negative NaN too.
    return x.to(IT, bitcast=True) < 0


@jit
def _special_kernel(
    x_ptr,
    out_ptr,
    exp_ptr,
    n,
    eps,
    OP: tl.constexpr,
    HAS_EPS: tl.constexpr,
    FLOAT: tl.constexpr,
    IT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=0)
    if OP == "signbit":
        if FLOAT:
            y = _sign_bit(x, IT)
        else:
            y = x < 0
    else:
        w = x.to(tl.float64)
        if OP == "logit":
            if HAS_EPS:
                w = tl.where(w < eps, eps, tl.where(w > 1.0 - eps, 1.0 - eps, w))
            y = tl.log(w / (1.0 - w))
        elif OP == "sinc":
            p = _PI * w
            y = tl.where(w == 0, 1.0, tl.sin(p) / tl.where(w == 0, 1.0, p))
        elif OP == "deg2rad":
            y = w * (_PI / 180.0)
        elif OP == "rad2deg":
            y = w * (180.0 / _PI)
        elif OP == "erfinv":
            y = _erfinv(w)
        elif OP == "lgamma":
            y = _lgamma(w)
        elif OP == "digamma":
            y = _digamma(w)
        elif OP == "i0":
            y = _i0(w)
        elif OP == "tan":
            y = libdevice.tan(w)
        elif OP == "sinh":
            y = libdevice.sinh(w)
        elif OP == "cosh":
            y = libdevice.cosh(w)
        elif OP == "asinh":
            y = libdevice.asinh(w)
        elif OP == "acosh":
            y = libdevice.acosh(w)
        elif OP == "atanh":
            y = libdevice.atanh(w)
        else:  # frexp: x = mantissa * 2 ** exponent, 0.5 <= |mantissa| < 1
            a = tl.abs(w)
            special = (a == 0) | (a == float("inf")) | (w != w)
            e = tl.floor(tl.log2(tl.where(special, 1.0, a))) + 1.0
            half = tl.floor(-e * 0.5)  # 2 ** -e in two steps: past float64's range alone
            y = w * tl.exp2(half) * tl.exp2(-e - half)
            big = tl.abs(y) >= 1.0
            y = tl.where(big, y * 0.5, y)
            e = tl.where(big, e + 1.0, e)
            low = tl.abs(y) < 0.5
            y = tl.where(low, y * 2.0, y)
            e = tl.where(low, e - 1.0, e)
            y = tl.where(special, w, y)
            tl.store(exp_ptr + i, tl.where(special, 0.0, e).to(tl.int32), mask=mask)
    tl.store(out_ptr + i, y, mask=mask)


@jit
def _float_power(a, b):
    # a ** b in float64 with C's pow rules (the sign of an odd integral power, NaN for a
    # fractional power of a negative base, 1 for b == 0 and for a == 1).
    r = tl.exp(b * tl.log(tl.abs(a)))
    integral = b == tl.floor(b)
    # a small integral power by repeated squaring, exact where the power is representable
    steps = tl.where(integral & (tl.abs(b) < 128), tl.abs(b), 0.0)
    base = tl.abs(a)
    product = tl.where(base == base, 1.0, 1.0)  # ones, an infinite base's lane too
    for _ in range(7):
        odd_step = steps - 2.0 * tl.floor(steps * 0.5) == 1.0
        product = tl.where(odd_step, product * base, product)
        base = base * base
        steps = tl.floor(steps * 0.5)
    exact = integral & (tl.abs(b) < 128) & (b != 0)
    r = tl.where(exact, tl.where(b < 0, 1.0 / product, product), r)
    r = tl.where(b == 0.5, tl.sqrt(tl.abs(a)), r)  # as C's pow: sqrt, correctly rounded
    odd = integral & (b - 2.0 * tl.floor(b * 0.5) == 1.0)
    negative = a < 0
    r = tl.where(negative & odd, -r, r)
    r = tl.where(negative & ~integral & (a != float("-inf")), float("nan"), r)
    # a signed zero to an odd power keeps its sign
    r = tl.where((a == 0) & odd & (1.0 / tl.where(a == 0, a, 1.0) < 0), -r, r)
    r = tl.where((a == -1.0) & (tl.abs(b) == float("inf")), 1.0, r)
    return tl.where((b == 0) | (a == 1.0), 1.0, r)


@jit
def _integer_power(a, b, BITS: tl.constexpr):
    # a ** b in a's integer type by repeated squaring over every bit an exponent can
    # have (so the time does not depend on the values), wrapping as torch's does; a
    # negative exponent gives 0, but 1 for a base of 1 and +-1 for a base of -1, as torch.
    negative = b < 0
    e = tl.where(negative, 0, b)
    y = a * 0 + 1
    base = a
    for _ in range(BITS):
        y = tl.where((e & 1) != 0, y * base, y)
        base = base * base
        e = e >> 1
    odd = (b & 1) != 0
    unit = tl.where(a == 1, 1, tl.where(a == -1, tl.where(odd, -1, 1), 0))
    return tl.where(negative, unit, y)


@jit
def _special_pair(
    a, b, OP: tl.constexpr, IT: tl.constexpr, BITS: tl.constexpr, SIGNED: tl.constexpr
):
    if OP == "xlogy":
        y = tl.where(b != b, float("nan"), tl.where(a == 0, 0.0, a * tl.log(b)))
    elif OP == "copysign":
        y = tl.where(_sign_bit(b, IT), -tl.abs(a), tl.abs(a))
    elif OP == "heaviside":
        y = tl.where(a == 0, b, (a > 0).to(b.dtype))
    elif OP == "hypot":
        p, q = tl.abs(a), tl.abs(b)
        big = tl.where(p > q, p, q)
        small = tl.where(p > q, q, p)
        r = small / tl.where(big == 0, 1.0, big)
        y = big * tl.sqrt(1.0 + r * r)
        y = tl.where((p == float("inf")) | (q == float("inf")), float("inf"), y)
    elif OP == "logaddexp" or OP == "logaddexp2":
        big = tl.where(a > b, a, b)
        d = -tl.abs(a - b)
        if OP == "logaddexp":
            y = big + _log1p(tl.exp(d))
            y = tl.where(a == b, a + _LN2, y)
        else:
            y = big + _log1p(tl.exp2(d)) / _LN2
            y = tl.where(a == b, a + 1.0, y)
    elif OP == "float_power" or OP == "pow":
        y = _float_power(a, b)
    elif OP == "ipow":
        y = _integer_power(a, b, BITS)
    elif OP == "atan2":
        y = libdevice.atan2(a, b)
    elif OP == "fmax":
        y = tl.where(a != a, b, tl.where((b != b) | (a > b), a, b))
    elif OP == "fmin":
        y = tl.where(a != a, b, tl.where((b != b) | (a < b), a, b))
    elif OP == "nextafter":
        bits = a.to(IT, bitcast=True)
        up = (b > a) == (a > 0)  # away from zero: the next larger magnitude
        stepped = tl.where(up, bits + 1, bits - 1).to(a.dtype, bitcast=True)
        tiny = (bits * 0 + 1).to(a.dtype, bitcast=True)  # the smallest subnormal
        y = tl.where(a == 0, tl.where(b > 0, tiny, -tiny), stepped)
        y = tl.where(a == b, b, y)
        y = tl.where((a != a) | (b != b), a + b, y)
    elif OP == "ldexp":
        y = a * tl.exp2(b)
    elif OP == "bernoulli":  # a uniform below the probability: 1, else 0
        y = tl.where(a < b, 1.0, 0.0)
    else:  # the shifts: torch's rules past the width (0, or the sign for >>)
        outside = (b < 0) | (b >= BITS)
        s = tl.where(outside, 0, b)
        if OP == "lshift":
            y = tl.where(outside, 0, a << s)
        else:
            y = tl.where(outside, a >> (BITS - 1) if SIGNED else a * 0, a >> s)
    return y


@jit(do_not_specialize=["x_value", "y_value"])
def _special_binary_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n,
    x_value,
    y_value,
    X_TENSOR: tl.constexpr,
    Y_TENSOR: tl.constexpr,
    OP: tl.constexpr,
    CT: tl.constexpr,
    IT: tl.constexpr,
    BITS: tl.constexpr,
    SIGNED: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Both operands in CT (float64 for the float math, the result's own type for the
    # exact ops); a number operand is a kernel argument.
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = elementwise_operand(x_ptr, x_value, i, mask, X_TENSOR, CT)
    y = elementwise_operand(y_ptr, y_value, i, mask, Y_TENSOR, CT)
    tl.store(out_ptr + i, _special_pair(x, y, OP, IT, BITS, SIGNED), mask=mask)


_EXACT = ("copysign", "heaviside", "fmax", "fmin", "nextafter", "lshift", "rshift")
_INT_OF_WIDTH = {1: tl.int8, 2: tl.int16, 4: tl.int32, 8: tl.int64}


def _tl_type(dtype: Any) -> Any:
    return getattr(tl, "int1" if dtype.name == "bool" else dtype.name)


def launch_special(
    op: str,
    x: DeviceTensor,
    out: DeviceTensor,
    exponent: DeviceTensor | None = None,
    eps: float | None = None,
) -> None:
    """``out = op(x)`` elementwise (``op`` in :data:`UNARY_SPECIAL_OPS`) over equal-sized
    contiguous buffers; ``frexp`` writes the exponents to ``exponent`` (int32), ``logit``
    clamps to ``[eps, 1 - eps]`` when ``eps`` is given."""
    n = x.numel
    _special_kernel[elementwise_grid(n, op)](
        x,
        out,
        exponent if exponent is not None else out,
        n,
        typed_scalar(float(eps or 0.0), out.dtype if op == "logit" else x.dtype),
        OP=op,
        HAS_EPS=eps is not None,
        FLOAT=x.dtype.is_floating_point,
        IT=_INT_OF_WIDTH[x.dtype.itemsize],
        BLOCK=BLOCK,
    )


def launch_special_binary(
    op: str, x: DeviceTensor | int | float, y: DeviceTensor | int | float, out: DeviceTensor
) -> None:
    """``out = op(x, y)`` elementwise (``op`` in :data:`BINARY_SPECIAL_OPS`); ``x`` and
    ``y`` are dense tensors of ``out``'s size, or numbers."""
    n = out.numel
    x_tensor, y_tensor = isinstance(x, DeviceTensor), isinstance(y, DeviceTensor)
    if op == "pow" and not out.dtype.is_floating_point:
        op = "ipow"  # exact, in the integer type
    exact = op in _EXACT or op == "ipow"
    ct = _tl_type(out.dtype) if exact else tl.float64
    width = out.dtype.itemsize
    signed = out.dtype.name.startswith("int")
    _special_binary_kernel[elementwise_grid(n, op)](
        x if x_tensor else out,
        y if y_tensor else out,
        out,
        n,
        0 if x_tensor else typed_scalar(x, out.dtype),
        0 if y_tensor else typed_scalar(y, out.dtype),
        X_TENSOR=x_tensor,
        Y_TENSOR=y_tensor,
        OP=op,
        CT=ct,
        IT=_INT_OF_WIDTH[width],
        BITS=8 * width,
        SIGNED=signed,
        BLOCK=BLOCK,
    )
