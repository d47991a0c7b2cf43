"""Backward formulas of further pointwise ops and of the fused matrix products.

torch's (``derivatives.yaml``), written with the facade's ops and costing what those
cost: ``log2``/``log10``/``exp2``, ``deg2rad``/``rad2deg``, ``logit`` (0 outside
``[eps, 1 - eps]`` when ``eps`` is given), ``hypot``, ``lerp`` (number or tensor weight),
``addcmul``/``addcdiv``, the ops whose gradient is zero (``sign``, ``sgn``, ``floor``,
``ceil``, ``round``, ``trunc``/``fix``: torch's ``zeros_like``, one fill) and ``frac``
(the gradient as it is); ``logaddexp``/``logaddexp2`` (from the result, so nothing
overflows), ``xlogy`` (0 where ``self`` is 0), ``remainder``/``fmod``, ``nan_to_num`` (0
where the input was not finite), ``copysign`` (0 at a zero ``self``; ``other`` gets
zeros), ``fmax``/``fmin`` (ties and a NaN ``other`` to ``self``), ``erfinv``, ``sinc``
(0 at 0), ``lgamma`` (``digamma``), ``ldexp`` (``MulBackward0``, as torch composes it),
``float_power`` (in float64), ``torch.true_divide`` (runs as the recorded ``div``),
``div`` with a ``rounding_mode`` (zero gradients), ``%`` (``remainder``),
``bernoulli``, ``normal`` and ``poisson`` (not reparameterized: zero gradients, as
torch's), ``pin_memory`` (the gradient as it is), ``frexp`` (the
mantissa's: ``g / 2 ** exponent``); ``addmm`` and ``baddbmm`` (two matmuls and the scaled input
gradient), ``outer``/``ger`` (torch's ``MulBackward0`` of its broadcast product),
``dot``, ``mv``; ``F.pairwise_distance`` (torch's ``NormBackward1`` of
``norm(x1 - x2 + eps)``; the difference is computed again in backward, a kernel torch
saves).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.formulas import (
    RULES,
    Unsupported,
    _is_tensor,
    _needs,
    recorded,
    sum_to,
    untracked,
)
from kernbench.torch.autograd.pointwise_formulas import _unary, _via_method
from kernbench.torch.logic import where

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "MORE_POINTWISE_FUNCTION_RULES",
    "MORE_POINTWISE_NN_RULES",
    "MORE_POINTWISE_RULES",
]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _zero(name: str) -> Any:
    """A step function's rule: its gradient is zero (one fill, as torch's zeros_like)."""

    def rule(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
        out = untracked(fn, self, *args, **kwargs)
        node = "RoundBackward1" if name == "RoundBackward0" and (args or kwargs) else name
        return recorded(out, node, (self,), lambda g: (g.new_zeros(tuple(g.shape)),))

    return rule


def _frac(fn: Callable, self: Tensor) -> Any:
    out = untracked(fn, self)
    return recorded(out, "FracBackward0", (self,), lambda g: (g,))


def _logit(fn: Callable, self: Tensor, eps: Any = None) -> Any:
    out = untracked(fn, self, eps)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        grad = g / (x * (1 - x))
        if eps is None:
            return (grad,)
        return (where((x < eps) | (x > 1 - eps), 0.0, grad),)

    return recorded(out, "LogitBackward0", (self,), backward, (self,))


def _hypot(fn: Callable, self: Tensor, other: Any) -> Any:
    if not _is_tensor(other):
        raise Unsupported
    out = untracked(fn, self, other)
    a_shape, b_shape = tuple(self.shape), tuple(other.shape)
    need_a, need_b = _needs(self), _needs(other)

    def backward(g: Tensor, a: Tensor, b: Tensor, y: Tensor) -> Sequence[Any]:
        scaled = g / y
        ga = sum_to(scaled * a, a_shape) if need_a else None
        gb = sum_to(scaled * b, b_shape) if need_b else None
        return ga, gb

    return recorded(out, "HypotBackward0", (self, other), backward, (self, other, out))


def _lerp(fn: Callable, self: Tensor, end: Any, weight: Any) -> Any:
    if not _is_tensor(end) or not (_is_tensor(weight) or _number(weight)):
        raise Unsupported
    out = untracked(fn, self, end, weight)
    a_shape, b_shape = tuple(self.shape), tuple(end.shape)
    need_a, need_b = _needs(self), _needs(end)
    if _number(weight):

        def scalar_backward(g: Tensor) -> Sequence[Any]:
            ga = sum_to(g * (1 - weight), a_shape) if need_a else None
            gb = sum_to(g * weight, b_shape) if need_b else None
            return ga, gb

        return recorded(out, "LerpBackward0", (self, end), scalar_backward)
    w_shape, need_w = tuple(weight.shape), _needs(weight)

    def backward(g: Tensor, a: Tensor, b: Tensor, w: Tensor) -> Sequence[Any]:
        ga = sum_to(g * (1 - w), a_shape) if need_a else None
        gb = sum_to(g * w, b_shape) if need_b else None
        gw = sum_to(g * (b - a), w_shape) if need_w else None
        return ga, gb, gw

    return recorded(out, "LerpBackward1", (self, end, weight), backward, (self, end, weight))


def _addc(divide: bool) -> Callable[..., Any]:
    name = "AddcdivBackward0" if divide else "AddcmulBackward0"

    def rule(fn: Callable, self: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
        if not (_is_tensor(tensor1) and _is_tensor(tensor2) and _number(value)):
            raise Unsupported
        out = untracked(fn, self, tensor1, tensor2, value=value)
        shapes = tuple(tuple(t.shape) for t in (self, tensor1, tensor2))
        needs = tuple(_needs(t) for t in (self, tensor1, tensor2))

        def backward(g: Tensor, t1: Tensor, t2: Tensor) -> Sequence[Any]:
            scaled = g * value
            if divide:
                g1 = scaled / t2
                g2 = -scaled * t1 / (t2 * t2)
            else:
                g1, g2 = scaled * t2, scaled * t1
            grads = (g, g1, g2)
            return tuple(
                sum_to(grad, shape) if need else None
                for grad, shape, need in zip(grads, shapes, needs, strict=True)
            )

        return recorded(out, name, (self, tensor1, tensor2), backward, (tensor1, tensor2))

    return rule


def _scaled(g: Tensor, factor: Any) -> Tensor:
    return g if factor == 1 else g * factor


def _fused_product(name: str, batched: bool) -> Callable[..., Any]:
    """``addmm``/``baddbmm``: ``beta * input + alpha * (a @ b)``."""

    def rule(fn: Callable, self: Tensor, a: Any, b: Any, *, beta: Any = 1, alpha: Any = 1):
        if not (_is_tensor(a) and _is_tensor(b) and _number(beta) and _number(alpha)):
            raise Unsupported
        out = untracked(fn, self, a, b, beta=beta, alpha=alpha)
        shape = tuple(self.shape)
        need_in, need_a, need_b = _needs(self), _needs(a), _needs(b)

        def backward(g: Tensor, m1: Tensor, m2: Tensor) -> Sequence[Any]:
            g_in = sum_to(_scaled(g, beta), shape) if need_in else None
            if batched:
                ga = _scaled(g.bmm(m2.mT), alpha) if need_a else None
                gb = _scaled(m1.mT.bmm(g), alpha) if need_b else None
            else:
                ga = _scaled(g.mm(m2.t()), alpha) if need_a else None
                gb = _scaled(m1.t().mm(g), alpha) if need_b else None
            return g_in, ga, gb

        return recorded(out, name, (self, a, b), backward, (a, b))

    return rule


def _outer(fn: Callable, self: Tensor, vec2: Any) -> Any:
    if not _is_tensor(vec2):
        raise Unsupported
    out = untracked(fn, self, vec2)
    need_a, need_b = _needs(self), _needs(vec2)

    def backward(g: Tensor, a: Tensor, b: Tensor) -> Sequence[Any]:
        ga = g.mv(b) if need_a else None
        gb = g.t().mv(a) if need_b else None
        return ga, gb

    return recorded(out, "MulBackward0", (self, vec2), backward, (self, vec2))


def _dot(fn: Callable, self: Tensor, other: Any) -> Any:
    if not _is_tensor(other):
        raise Unsupported
    out = untracked(fn, self, other)
    need_a, need_b = _needs(self), _needs(other)

    def backward(g: Tensor, a: Tensor, b: Tensor) -> Sequence[Any]:
        return (g * b if need_a else None), (g * a if need_b else None)

    return recorded(out, "DotBackward0", (self, other), backward, (self, other))


def _mv(fn: Callable, self: Tensor, vec: Any) -> Any:
    if not _is_tensor(vec):
        raise Unsupported
    out = untracked(fn, self, vec)
    need_m, need_v = _needs(self), _needs(vec)

    def backward(g: Tensor, m: Tensor, v: Tensor) -> Sequence[Any]:
        gm = g.unsqueeze(1) * v.unsqueeze(0) if need_m else None
        gv = m.t().mv(g) if need_v else None
        return gm, gv

    return recorded(out, "MvBackward0", (self, vec), backward, (self, vec))


def _pairwise_distance(
    fn: Callable, x1: Any, x2: Any, p: Any = 2.0, eps: Any = 1e-6, keepdim: bool = False
) -> Any:
    if not (_is_tensor(x1) and _is_tensor(x2)) or not _number(eps) or not _number(p) or p <= 0:
        raise Unsupported
    out = untracked(fn, x1, x2, p, eps, keepdim)
    a_shape, b_shape = tuple(x1.shape), tuple(x2.shape)
    need_a, need_b = _needs(x1), _needs(x2)

    def backward(g: Tensor, a: Tensor, b: Tensor, norm: Tensor) -> Sequence[Any]:
        diff = a - b + eps
        if diff.ndim and not keepdim:
            g, norm = g.unsqueeze(-1), norm.unsqueeze(-1)
        if p == 1:
            grad = g * diff.sign()
        elif p == 2:
            grad = where(norm == 0, 0.0, g * diff / where(norm == 0, 1.0, norm))
        elif math.isinf(p):  # the maxima share the gradient, as torch's norm backward
            peaks = (diff.abs() == norm).to(diff.dtype)
            grad = g * diff.sign() * peaks / peaks.sum(-1, keepdim=True)
        else:  # sign(d) * (|d| / norm) ** (p - 1)
            ratio = diff.abs() / where(norm == 0, 1.0, norm)
            grad = where(norm == 0, 0.0, g * diff.sign() * ratio.pow(p - 1))
        ga = sum_to(grad, a_shape) if need_a else None
        gb = sum_to(-grad, b_shape) if need_b else None
        return ga, gb

    return recorded(out, "NormBackward1", (x1, x2), backward, (x1, x2, out))


def _binary(name: str, grads: Callable[..., tuple[Any, Any]]) -> Callable[..., Any]:
    """A rule for ``fn(a, b)`` of two tensors whose gradients are ``grads(g, a, b, y)``."""

    def rule(fn: Callable, self: Tensor, other: Any) -> Any:
        if not _is_tensor(other):
            raise Unsupported
        out = untracked(fn, self, other)
        a_shape, b_shape = tuple(self.shape), tuple(other.shape)
        need_a, need_b = _needs(self), _needs(other)

        def backward(g: Tensor, a: Tensor, b: Tensor, y: Tensor) -> Sequence[Any]:
            ga, gb = grads(g, a, b, y)
            return (
                sum_to(ga, a_shape) if need_a and ga is not None else None,
                sum_to(gb, b_shape) if need_b and gb is not None else None,
            )

        return recorded(out, name, (self, other), backward, (self, other, out))

    return rule


def _logaddexp_grads(base2: bool) -> Callable[..., tuple[Any, Any]]:
    def grads(g: Tensor, a: Tensor, b: Tensor, y: Tensor) -> tuple[Any, Any]:
        # d/da log(e^a + e^b) = e^(a - y), computed from the result (no overflow)
        ea = ((a - y) * _LN2).exp() if base2 else (a - y).exp()
        eb = ((b - y) * _LN2).exp() if base2 else (b - y).exp()
        return g * ea, g * eb

    return grads


def _xlogy(fn: Callable, self: Tensor, other: Any) -> Any:
    if _number(other):
        out = untracked(fn, self, other)
        log_other = math.log(other) if other > 0 else math.nan if other < 0 else -math.inf

        def number_backward(g: Tensor, a: Tensor) -> Sequence[Any]:
            return (where(a != 0, g * log_other, 0.0),)

        return recorded(out, "XlogyBackward2", (self,), number_backward, (self,))
    return _binary(
        "XlogyBackward0",
        lambda g, a, b, y: (where(a != 0, g * b.log(), 0.0), g * a / b),
    )(fn, self, other)


def _remainder_like(name: str, rounding: str) -> Callable[..., Any]:
    """``remainder``/``fmod``: the gradient to ``self`` as it is; a tensor divisor's is
    ``-g * floor(a / b)`` (``trunc`` for ``fmod``)."""

    def rule(fn: Callable, self: Tensor, other: Any) -> Any:
        if _number(other):
            out = untracked(fn, self, other)
            return recorded(out, f"{name}Backward0", (self,), lambda g: (g,))
        return _binary(
            f"{name}Backward1",
            lambda g, a, b, y: (g, -g * getattr(a / b, rounding)()),
        )(fn, self, other)

    return rule


def _nan_to_num(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
    out = untracked(fn, self, *args, **kwargs)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        return (where(x.isfinite(), g, 0.0),)

    return recorded(out, "NanToNumBackward0", (self,), backward, (self,))


def _copysign(fn: Callable, self: Tensor, other: Any) -> Any:
    out = untracked(fn, self, other)
    shape = tuple(self.shape)
    inputs = (self, other) if _is_tensor(other) else (self,)
    other_shape = tuple(other.shape) if _is_tensor(other) else ()

    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        grad = sum_to(where(x == 0, 0.0, g * y / where(x == 0, 1.0, x)), shape)
        if len(inputs) == 1:
            return (grad,)
        return grad, g.new_zeros(other_shape)  # torch's zeros_like(other)

    return recorded(out, "CopysignBackward0", inputs, backward, (self, out))


def _fextreme(larger: bool) -> Callable[..., Any]:
    """``fmax``/``fmin``: the gradient to ``self`` where it was the result (ties and a NaN
    ``other`` included), to ``other`` elsewhere."""

    def grads(g: Tensor, a: Tensor, b: Tensor, y: Tensor) -> tuple[Any, Any]:
        won = ((a >= b) if larger else (a <= b)) | b.isnan()
        return where(won, g, 0.0), where(won, 0.0, g)

    return _binary("FmaxBackward0" if larger else "FminBackward0", grads)


def _sinc_grad(g: Tensor, x: Tensor) -> Tensor:
    px = x * math.pi
    safe = where(x == 0, 1.0, px)
    slope = (safe.cos() * safe - safe.sin()) / (safe * x.where(x != 0, 1.0))
    return where(x == 0, 0.0, g * slope)


def _ldexp(fn: Callable, self: Tensor, other: Any) -> Any:
    """``self * 2 ** other`` (torch composes it: ``MulBackward0``)."""
    out = untracked(fn, self, other)
    a_shape = tuple(self.shape)
    tensor_other = _is_tensor(other)
    need_b = tensor_other and _needs(other) and other.dtype.is_floating_point
    b_shape = tuple(other.shape) if tensor_other else ()

    def backward(g: Tensor, y: Tensor) -> Sequence[Any]:
        power = other.to(g.dtype).exp2() if tensor_other else 2.0**other
        ga = sum_to(g * power, a_shape) if _needs(self) else None
        gb = sum_to(g * y * _LN2, b_shape) if need_b else None
        return (ga, gb) if tensor_other else (ga,)

    inputs = (self, other) if tensor_other else (self,)
    return recorded(out, "MulBackward0", inputs, backward, (out,))


def _float_power(fn: Callable, self: Any, other: Any) -> Any:
    """``float_power``: ``pow`` in float64 (``PowBackward0`` for a number exponent,
    ``PowBackward1`` for a tensor); the gradients are cast back by the engine."""
    if not _is_tensor(self) or not (_is_tensor(other) or _number(other)):
        raise Unsupported
    out = untracked(fn, self, other)
    a_shape = tuple(self.shape)
    if _number(other):

        def number_backward(g: Tensor, a: Tensor) -> Sequence[Any]:
            a = a.to(g.dtype)
            return (g * other * a ** (other - 1),)

        return recorded(out, "PowBackward0", (self,), number_backward, (self,))
    b_shape = tuple(other.shape)
    need_a, need_b = _needs(self), _needs(other)

    def backward(g: Tensor, a: Tensor, b: Tensor, y: Tensor) -> Sequence[Any]:
        a, b = a.to(g.dtype), b.to(g.dtype)
        ga = None
        if need_a:  # a ** (b - 1) as y / a (the facade's pow takes a number exponent)
            at_zero = where(b > 1, 0.0, where(b == 1, 1.0, math.inf))
            lower = where(a == 0, at_zero, y / where(a == 0, 1.0, a))
            ga = sum_to(where(b == 0, 0.0, g * b * lower), a_shape)
        gb = None
        if need_b:  # 0 where a is 0 and b >= 0, as torch's pow_backward_exponent
            log_a = where(a == 0, 0.0, a).log()
            gb = sum_to(where((a == 0) & (b >= 0), 0.0, g * y * log_a), b_shape)
        return ga, gb

    return recorded(out, "PowBackward1", (self, other), backward, (self, other, out))


def _recording(fn: Callable, *args: Any, out: Any = None, **kwargs: Any) -> Any:
    """An op made of recorded ops (``true_divide`` is ``div``): run with recording on."""
    if out is not None:
        raise Unsupported
    return fn(*args, **kwargs)


def _bernoulli(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
    p = kwargs.get("p", args[0] if args else None)
    if kwargs.get("out") is not None:
        raise Unsupported
    out = untracked(fn, self, *args, **kwargs)
    if _is_tensor(p):  # bernoulli(self, p): a draw of p's shape, zeros to both
        shapes = (tuple(self.shape), tuple(p.shape))
        return recorded(
            out,
            "BernoulliBackward2",
            (self, p),
            lambda g: tuple(g.new_zeros(shape) for shape in shapes),
        )
    name = "BernoulliBackward0" if p is None else "BernoulliBackward1"
    return recorded(out, name, (self,), lambda g: (g.new_zeros(tuple(g.shape)),))


def _pin_memory(fn: Callable, self: Tensor, device: Any = None) -> Any:
    out = untracked(fn, self, device)
    return recorded(out, "PinMemoryBackward0", (self,), lambda g: (g,))


def _frexp(fn: Callable, self: Tensor, *, out: Any = None) -> Any:
    """``frexp``: the mantissa's gradient is ``g / 2 ** exponent`` (the exponent is an
    integer tensor, outside the graph)."""
    if out is not None:
        raise Unsupported
    result = untracked(fn, self)

    def backward(g: Tensor, exponent: Tensor) -> Sequence[Any]:
        return (g / exponent.to(g.dtype).exp2(),)

    return recorded(result, "FrexpBackward0", (self,), backward, (result[1],))


def _div_rounding(fn: Callable, self: Tensor, other: Any, *, rounding_mode: Any = None) -> Any:
    """``div`` with a ``rounding_mode``: a step function, zero gradients (torch's
    ``DivBackward2`` for a tensor divisor, ``DivBackward3`` for a number); without one,
    the plain division's rule."""
    if rounding_mode is None:
        return RULES["div"](fn, self, other)
    out = untracked(fn, self, other, rounding_mode=rounding_mode)
    self_shape = tuple(self.shape)
    if not _is_tensor(other):
        return recorded(out, "DivBackward3", (self,), lambda g: (g.new_zeros(tuple(self_shape)),))
    shapes = (tuple(self.shape), tuple(other.shape))

    def backward(g: Tensor) -> Sequence[Any]:
        return tuple(g.new_zeros(shape) for shape in shapes)

    return recorded(out, "DivBackward2", (self, other), backward)


def _normal(fn: Callable, mean: Any = 0.0, std: Any = 1.0, *args: Any, **kwargs: Any) -> Any:
    """``torch.normal`` of tensors: not reparameterized, so zero gradients, as torch's."""
    if kwargs.get("out") is not None:
        raise Unsupported
    out = untracked(fn, mean, std, *args, **kwargs)
    inputs = tuple(t for t in (mean, std) if _is_tensor(t))
    if _is_tensor(mean) and _is_tensor(std):
        name = "NormalBackward3"
    else:
        name = "NormalBackward1" if _is_tensor(mean) else "NormalBackward2"
    shapes = [tuple(t.shape) for t in inputs]

    def backward(g: Tensor) -> Sequence[Any]:
        return tuple(g.new_zeros(shape) for shape in shapes)

    return recorded(out, name, inputs, backward)


def _poisson(fn: Callable, input: Tensor, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
    out = untracked(fn, input, *args, **kwargs)
    return recorded(out, "PoissonBackward0", (input,), lambda g: (g.new_zeros(tuple(g.shape)),))


MORE_POINTWISE_RULES: dict[str, Callable[..., Any]] = {
    "log2": _unary("Log2Backward0", lambda g, x: g / (x * _LN2)),
    "log10": _unary("Log10Backward0", lambda g, x: g / (x * _LN10)),
    "exp2": _unary("Exp2Backward0", lambda g, y: g * y * _LN2, keep_out=True),
    "deg2rad": _unary("Deg2RadBackward0", lambda g, x: g * (math.pi / 180.0)),
    "rad2deg": _unary("Rad2DegBackward0", lambda g, x: g * (180.0 / math.pi)),
    "sign": _zero("SignBackward0"),
    "sgn": _zero("SgnBackward0"),
    "floor": _zero("FloorBackward0"),
    "ceil": _zero("CeilBackward0"),
    "round": _zero("RoundBackward0"),
    "trunc": _zero("TruncBackward0"),
    "fix": _zero("TruncBackward0"),
    "frac": _frac,
    "logit": _logit,
    "hypot": _hypot,
    "lerp": _lerp,
    "addcmul": _addc(False),
    "addcdiv": _addc(True),
    "addmm": _fused_product("AddmmBackward0", False),
    "baddbmm": _fused_product("BaddbmmBackward0", True),
    "outer": _outer,
    "ger": _outer,
    "dot": _dot,
    "mv": _mv,
    "logaddexp": _binary("LogaddexpBackward0", _logaddexp_grads(False)),
    "logaddexp2": _binary("Logaddexp2Backward0", _logaddexp_grads(True)),
    "xlogy": _xlogy,
    "remainder": _remainder_like("Remainder", "floor"),
    "fmod": _remainder_like("Fmod", "trunc"),
    "nan_to_num": _nan_to_num,
    "copysign": _copysign,
    "fmax": _fextreme(True),
    "fmin": _fextreme(False),
    "erfinv": _unary(
        "ErfinvBackward0", lambda g, y: g * (y * y).exp() * (math.sqrt(math.pi) / 2), keep_out=True
    ),
    "sinc": _unary("SincBackward0", _sinc_grad),
    "lgamma": _unary("LgammaBackward0", lambda g, x: g * x.digamma()),
    "ldexp": _ldexp,
    "float_power": _float_power,
    "bernoulli": _bernoulli,
    "pin_memory": _pin_memory,
    "div": _div_rounding,
    "divide": _div_rounding,
    "__mod__": _remainder_like("Remainder", "floor"),
    "frexp": _frexp,
}

_PASS_THROUGH = ("lerp", "addcmul", "addcdiv", "dot")  # torch.<name> calls the method
MORE_POINTWISE_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    **{
        name: _via_method(name)
        for name in MORE_POINTWISE_RULES
        if name not in _PASS_THROUGH and not name.startswith("_") and name not in ("div", "divide")
    },
    "pairwise_distance": _pairwise_distance,
    "true_divide": _recording,
    "float_power": _float_power,
    "bernoulli": _bernoulli,
    "normal": _normal,
    "poisson": _poisson,
}

MORE_POINTWISE_NN_RULES: dict[str, Callable[..., Any]] = {"pairwise_distance": _pairwise_distance}
