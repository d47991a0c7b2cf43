"""Backward formulas of the trigonometric and hyperbolic ops and of ``pow`` with a tensor
exponent.

torch's (``derivatives.yaml``), written with the facade's ops and costing what those
cost: ``tan`` (from the result, ``1 + y²``), ``sinh``/``cosh``, ``asinh``/``acosh``/
``atanh`` (and their ``arc*`` aliases), ``atan2`` (``b / (a² + b²)``, ``-a / (a² + b²)``,
summed back over broadcast dims); ``pow`` of two tensors (``PowBackward1``), of a
number and a tensor (``PowBackward2``): the base's gradient ``g·b·a^(b-1)`` (0 where
``b`` is 0) and the exponent's ``g·y·log a`` (0 where ``a`` is 0 and ``b >= 0``, as
torch's ``pow_backward_exponent``).  A number exponent keeps the rules of
:mod:`~kernbench.torch.autograd.formulas`.
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
from kernbench.torch.autograd.more_pointwise_formulas import _binary
from kernbench.torch.autograd.pointwise_formulas import _unary, _via_method
from kernbench.torch.logic import where

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TRIG_FUNCTION_RULES", "TRIG_RULES"]


def _atan2_grads(g: Tensor, a: Tensor, b: Tensor, y: Tensor) -> tuple[Any, Any]:
    scale = g / (a * a + b * b)
    return scale * b, -scale * a


def _base_grad(g: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``g * b * a ** (b - 1)``, 0 where ``b`` is 0 (torch's ``pow_backward_self``)."""
    return where(b == 0, 0.0, g * b * a ** (b - 1))


def _exponent_grad(g: Tensor, a: Tensor, y: Tensor, b: Tensor) -> Tensor:
    """``g * y * log(a)``, 0 where ``a`` is 0 and ``b >= 0`` (``pow_backward_exponent``)."""
    return where((a == 0) & (b >= 0), 0.0, g * y * a.log())


def _pow_tensors(fn: Callable, self: Tensor, exponent: Any) -> Any:
    out = untracked(fn, self, exponent)
    a_shape, b_shape = tuple(self.shape), tuple(exponent.shape)
    need_a, need_b = _needs(self), _needs(exponent)

    def backward(g: Tensor, a: Tensor, b: Tensor, y: Tensor) -> Sequence[Any]:
        a, b = a.to(g.dtype), b.to(g.dtype)
        ga = sum_to(_base_grad(g, a, b), a_shape) if need_a else None
        gb = sum_to(_exponent_grad(g, a, y, b), b_shape) if need_b else None
        return ga, gb

    return recorded(out, "PowBackward1", (self, exponent), backward, (self, exponent, out))


def _pow(fn: Callable, self: Tensor, exponent: Any) -> Any:
    if _is_tensor(exponent):
        return _pow_tensors(fn, self, exponent)
    return RULES["pow"](fn, self, exponent)


def _rpow(fn: Callable, self: Tensor, base: Any) -> Any:
    """``base ** self`` for a number ``base``; a base > 0 keeps the existing rule."""
    if not isinstance(base, int | float) or isinstance(base, bool):
        raise Unsupported
    if base > 0:
        return RULES["__rpow__"](fn, self, base)
    out = untracked(fn, self, base)
    log_base = -math.inf if base == 0 else math.nan

    def backward(g: Tensor, b: Tensor, y: Tensor) -> Sequence[Any]:
        grad = g * y * log_base
        if base == 0:
            grad = where(b.to(g.dtype) >= 0, 0.0, grad)
        return (grad,)

    return recorded(out, "PowBackward2", (self,), backward, (self, out))


_TRIG = {
    "tan": _unary("TanBackward0", lambda g, y: g * (y * y + 1), keep_out=True),
    "sinh": _unary("SinhBackward0", lambda g, x: g * x.cosh()),
    "cosh": _unary("CoshBackward0", lambda g, x: g * x.sinh()),
    "asinh": _unary("AsinhBackward0", lambda g, x: g * (x * x + 1).rsqrt()),
    "acosh": _unary("AcoshBackward0", lambda g, x: g * (x * x - 1).rsqrt()),
    "atanh": _unary("AtanhBackward0", lambda g, x: g / (x * x * -1 + 1)),
    "atan2": _binary("Atan2Backward0", _atan2_grads),
}
_ALIASES = {"arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "arctan2": "atan2"}

TRIG_RULES: dict[str, Callable[..., Any]] = {
    **_TRIG,
    **{alias: _TRIG[name] for alias, name in _ALIASES.items()},
    "pow": _pow,
    "__pow__": _pow,
    "__rpow__": _rpow,
}

# torch.pow calls the tensor methods, which record.
TRIG_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    name: _via_method(name) for name in (*_TRIG, *_ALIASES)
}
