"""Backward formulas of more pointwise ops, reductions, norms and losses: ``sqrt``,
``abs``, ``clamp``, ``sin``, ..., ``max``/``min``/``amax``, ``var``/``std``, ``prod``,
``logsumexp``, ``norm``, ``cumsum``; the activations of ``torch.nn.functional``
(``leaky_relu``, ``elu``, ``softplus``, ``hardtanh``, ...), ``rms_norm``,
``group_norm``, ``normalize`` and the elementwise losses (``l1_loss``,
``smooth_l1_loss``, ``huber_loss``, the binary cross entropies, ``kl_div``) and
``cosine_similarity``.

As in :mod:`~kernbench.torch.autograd.formulas`, each rule runs the forward with
recording off and records one node whose backward is written with the facade's ops.
At a kink the gradient is torch's: ``abs`` and the 1-norm take ``sign`` (0 at 0),
``clamp`` passes the gradient where ``min <= x <= max``, ``hardtanh`` where
``min < x < max``, ``max``/``min`` over a dim send it to the index they returned, and
``amax``/``amin``/full ``max()``/``min()`` split it evenly among ties; the 2-norm's
gradient at a zero norm is 0.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.torch.autograd.formulas import Unsupported, recorded, sum_to, untracked
from kernbench.torch.factories import cat

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "POINTWISE_FUNCTION_RULES",
    "POINTWISE_LINALG_RULES",
    "POINTWISE_NN_RULES",
    "POINTWISE_RULES",
]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "grad_fn") and hasattr(value, "storage_device_tensor")


def _needs(value: Any) -> bool:
    return _is_tensor(value) and value.requires_grad


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


# -- one-input pointwise ---------------------------------------------------------------------
def _unary(name: str, grad: Callable[[Tensor, Tensor], Tensor], keep_out: bool = False) -> Any:
    """A rule for ``fn(x)`` whose gradient is ``grad(g, y)`` (``keep_out``) or ``grad(g, x)``."""

    def rule(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            raise Unsupported
        out = untracked(fn, self)
        keep = out if keep_out else self
        return recorded(out, name, (self,), lambda g, t: (grad(g, t),), (keep,))

    return rule


_sqrt = _unary("SqrtBackward0", lambda g, y: g / (y * 2), keep_out=True)
_rsqrt = _unary("RsqrtBackward0", lambda g, y: g * (y * y * y) * -0.5, keep_out=True)
_abs = _unary("AbsBackward0", lambda g, x: g * x.sign())
_square = _unary("PowBackward0", lambda g, x: g * x * 2)
_reciprocal = _unary("ReciprocalBackward0", lambda g, y: -g * y * y, keep_out=True)
_sin = _unary("SinBackward0", lambda g, x: g * x.cos())
_cos = _unary("CosBackward0", lambda g, x: -g * x.sin())
_asin = _unary("AsinBackward0", lambda g, x: g * (x * x * -1 + 1).rsqrt())
_log1p = _unary("Log1PBackward0", lambda g, x: g / (x + 1))
_expm1 = _unary("Expm1Backward0", lambda g, y: g * (y + 1), keep_out=True)
_erf = _unary("ErfBackward0", lambda g, x: g * (x * x * -1).exp() * _TWO_OVER_SQRT_PI)


# -- clamp -----------------------------------------------------------------------------------
def _bound(value: Any) -> None:
    if not (value is None or _number(value) or _is_tensor(value)):
        raise Unsupported


def _clamp(fn: Callable, self: Tensor, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    """torch passes the gradient to ``x`` where ``min <= x <= max``; a tensor bound gets it
    where it was the result (``x < min``, ``x > max``)."""
    _bound(min)
    _bound(max)
    out = untracked(fn, self, min, max)
    low, high = min, max
    x_shape = tuple(self.shape)
    tensors = _is_tensor(low) or _is_tensor(high)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        gx = g
        if low is not None:
            gx = gx * (x >= low)
        if high is not None:
            gx = gx * (x <= high)
        g_low = g_high = None
        if _needs(low):
            g_low = g * (x < low)
            if high is not None:
                g_low = g_low * (low <= high)
            g_low = sum_to(g_low, tuple(low.shape))
        if _needs(high):
            g_high = g * (x > high) if low is None else g * ((x > high) + (low > high) > 0)
            g_high = sum_to(g_high, tuple(high.shape))
        return sum_to(gx, x_shape), g_low, g_high

    name = "ClampBackward0" if tensors else "ClampBackward1"
    return recorded(out, name, (self, low, high), backward, (self,))


def _clamp_min(fn: Callable, self: Tensor, min: Any) -> Any:  # noqa: A002
    _bound(min)
    if _needs(min):
        raise Unsupported
    out = untracked(fn, self, min)
    shape = tuple(self.shape)  # a tensor bound may broadcast x
    return recorded(
        out, "ClampMinBackward0", (self,), lambda g, x: (sum_to(g * (x >= min), shape),), (self,)
    )


def _clamp_max(fn: Callable, self: Tensor, max: Any) -> Any:  # noqa: A002
    _bound(max)
    if _needs(max):
        raise Unsupported
    out = untracked(fn, self, max)
    shape = tuple(self.shape)
    return recorded(
        out, "ClampMaxBackward0", (self,), lambda g, x: (sum_to(g * (x <= max), shape),), (self,)
    )


def _elementwise_extreme(larger: bool) -> Callable[..., Any]:
    """``maximum``/``minimum`` of two tensors: the gradient goes to the one that was the
    result, halved between them where they tie (torch's formula)."""
    name = "MaximumBackward0" if larger else "MinimumBackward0"

    def rule(fn: Callable, self: Tensor, other: Any) -> Any:
        if not _is_tensor(other):
            raise Unsupported
        out = untracked(fn, self, other)
        a_shape, b_shape = tuple(self.shape), tuple(other.shape)
        need_a, need_b = _needs(self), _needs(other)

        def backward(g: Tensor, a: Tensor, b: Tensor) -> Sequence[Any]:
            half = g * (a == b) * 0.5
            wins = a > b if larger else a < b
            loses = a < b if larger else a > b
            ga = sum_to(g * wins + half, a_shape) if need_a else None
            gb = sum_to(g * loses + half, b_shape) if need_b else None
            return ga, gb

        return recorded(out, name, (self, other), backward, (self, other))

    return rule


# -- reductions ------------------------------------------------------------------------------
def _dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    """The reduced dims, sorted and non-negative, or None for every dim."""
    if dim is None or ndim == 0:  # a 0-d tensor's dim 0 (or -1) is the tensor
        return None
    dims = tuple(dim) if isinstance(dim, list | tuple) else (dim,)
    if not dims:
        return None
    return tuple(sorted(d % max(ndim, 1) for d in dims))


def _kept(g: Tensor, shape: tuple[int, ...], dims: Any, keepdim: bool) -> Tensor:
    """``g`` of a reduction's result with the reduced dims back, of size 1."""
    if dims is None:
        return g.reshape((1,) * len(shape))
    if not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    return g


def _count(shape: tuple[int, ...], dims: Any) -> int:
    return math.prod(shape) if dims is None else math.prod(shape[d] for d in dims)


def _as(g: Tensor, dtype: Any) -> Tensor:
    return g if g.dtype is dtype else g.to(dtype)


def _extreme(is_max: bool) -> Callable[..., Any]:
    """``max``/``min``: over a dim, the gradient goes to the returned index; over every
    element, it is split evenly among the elements equal to the result."""
    short = "Max" if is_max else "Min"
    elementwise = _elementwise_extreme(is_max)

    def rule(
        fn: Callable, self: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None
    ) -> Any:
        d = dim if axis is None else axis
        if _is_tensor(d) and not keepdim and axis is None:  # max(other) is maximum
            return elementwise(fn, self, d)
        if _is_tensor(d) or isinstance(d, list | tuple):
            raise Unsupported
        out = untracked(fn, self, dim, keepdim, axis=axis)
        shape = tuple(self.shape)
        if d is None:
            return recorded(
                out, f"{short}Backward1", (self,), _evenly(shape, None, False), (self, out)
            )
        d = d % max(self.ndim, 1)

        def backward(g: Tensor, index: Tensor) -> Sequence[Any]:
            if not shape:
                return (g.reshape(shape),)
            if not keepdim:
                g, index = g.unsqueeze(d), index.unsqueeze(d)
            return (g.new_zeros(shape).scatter(d, index, g),)

        return recorded(out, f"{short}Backward0", (self,), backward, (out[1],))

    return rule


def _evenly(shape: tuple[int, ...], dims: Any, keepdim: bool) -> Callable[..., Sequence[Any]]:
    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        hit = x == _kept(y, shape, dims, keepdim)
        ties = hit.sum(dims if dims is not None else tuple(range(len(shape))), keepdim=True)
        return (_kept(g, shape, dims, keepdim) * hit / ties,)

    return backward


def _amax(is_max: bool) -> Callable[..., Any]:
    name = "AmaxBackward0" if is_max else "AminBackward0"

    def rule(fn: Callable, self: Tensor, dim: Any = (), keepdim: bool = False) -> Any:
        out = untracked(fn, self, dim, keepdim)
        shape = tuple(self.shape)
        return recorded(
            out, name, (self,), _evenly(shape, _dims(dim, len(shape)), keepdim), (self, out)
        )

    return rule


def _spread(is_std: bool) -> Callable[..., Any]:
    name = "StdBackward0" if is_std else "VarBackward0"

    def rule(
        fn: Callable,
        self: Tensor,
        dim: Any = None,
        unbiased: Any = None,
        keepdim: bool = False,
        *,
        correction: Any = None,
    ) -> Any:
        out = untracked(fn, self, dim, unbiased, keepdim, correction=correction)
        if isinstance(dim, bool):  # the older var(unbiased) form
            dim, unbiased = None, dim
        if correction is None:
            correction = 0 if unbiased is False else 1
        shape = tuple(self.shape)
        dims = _dims(dim, len(shape))
        divisor = _count(shape, dims) - correction
        scale = 2.0 / divisor if divisor else math.nan  # torch's 0 / 0 there

        def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
            all_dims = dims if dims is not None else tuple(range(len(shape)))
            centered = x - x.mean(all_dims, keepdim=True) if shape else x * 0
            if is_std:  # d std = d var / (2 std), 0 where std is 0 (torch's masked_fill)
                g = g / (y * 2 + (y == 0)) * (y != 0)
            return (_kept(g, shape, dims, keepdim) * centered * scale,)

        return recorded(out, name, (self,), backward, (self, out))

    return rule


def _prod(
    fn: Callable, self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Any:
    """The gradient of each element is the product of the others (exclusive running
    products from both ends, so zeros need no division)."""
    if isinstance(dim, list | tuple):
        raise Unsupported
    out = untracked(fn, self, dim, keepdim, dtype=dtype)
    shape, in_dtype = tuple(self.shape), self.dtype

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        flat = dim is None
        xs = x.reshape(-1) if flat else x
        d = 0 if flat else dim % max(x.ndim, 1)
        gk = g.reshape((1,)) if flat else (g if keepdim or not shape else g.unsqueeze(d))
        if not shape:
            return (_as(g, in_dtype),)
        others = _others(xs, d)
        return (_as(gk, in_dtype).mul(others).reshape(shape),)

    return recorded(
        out, "ProdBackward0" if dim is None else "ProdBackward1", (self,), backward, (self,)
    )


def _others(x: Tensor, d: int) -> Tensor:
    """The product of the other elements along ``d``, for each element."""
    n = x.shape[d]
    if n == 1:
        return x.new_ones(x.shape)
    lead = (slice(None),) * d
    left = x.new_ones(x.shape)
    left[(*lead, slice(1, None))] = x.narrow(d, 0, n - 1)
    right = x.new_ones(x.shape)
    right[(*lead, slice(0, n - 1))] = x.narrow(d, 1, n - 1)
    return left.cumprod(d) * right.flip(d).cumprod(d).flip(d)


def _logsumexp(fn: Callable, self: Tensor, dim: Any, keepdim: bool = False) -> Any:
    out = untracked(fn, self, dim, keepdim)
    shape = tuple(self.shape)
    dims = _dims(dim, len(shape))

    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        return (_kept(g, shape, dims, keepdim) * (x - _kept(y, shape, dims, keepdim)).exp(),)

    return recorded(out, "LogsumexpBackward0", (self,), backward, (self, out))


def _norm_order(p: Any) -> int:
    if p is None or p == "fro":
        return 2
    if _number(p) and p in (1, 2):
        return int(p)
    raise Unsupported


def _norm_backward(order: int, shape: tuple[int, ...], dims: Any, keepdim: bool, dtype: Any):
    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        g = _as(_kept(g, shape, dims, keepdim), dtype)
        if order == 1:
            return (g * x.sign(),)
        y = _as(_kept(y, shape, dims, keepdim), dtype)
        return (g * x / (y + (y == 0)),)  # 0 where the norm is 0 (x is 0 there)

    return backward


def _norm(
    fn: Callable,
    self: Tensor,
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    dtype: Any = None,
) -> Any:
    order = _norm_order(p)
    out = untracked(fn, self, p, dim, keepdim, dtype)
    shape = tuple(self.shape)
    backward = _norm_backward(order, shape, _dims(dim, len(shape)), keepdim, self.dtype)
    name = "NormBackward0" if dim is None else "NormBackward1"
    return recorded(out, name, (self,), backward, (self, out))


def _vector_norm(
    fn: Callable,
    x: Tensor,
    ord: Any = 2,  # noqa: A002
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Any:
    order = _norm_order(ord)
    out = untracked(fn, x, ord, dim, keepdim, dtype=dtype)
    shape = tuple(x.shape)
    backward = _norm_backward(order, shape, _dims(dim, len(shape)), keepdim, x.dtype)
    return recorded(out, "LinalgVectorNormBackward0", (x,), backward, (x, out))


def _linalg_norm(
    fn: Callable,
    A: Tensor,  # noqa: N803
    ord: Any = None,  # noqa: A002
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Any:
    order = _norm_order(ord)
    out = untracked(fn, A, ord, dim, keepdim, dtype=dtype)
    shape = tuple(A.shape)
    backward = _norm_backward(order, shape, _dims(dim, len(shape)), keepdim, A.dtype)
    return recorded(out, "LinalgVectorNormBackward0", (A,), backward, (A, out))


def _cumsum(fn: Callable, self: Tensor, dim: Any = None, *, dtype: Any = None) -> Any:
    if dim is None:
        raise Unsupported  # the forward raises torch's error
    out = untracked(fn, self, dim, dtype=dtype)
    in_dtype = self.dtype
    d = dim % max(self.ndim, 1)

    def backward(g: Tensor) -> Sequence[Any]:
        if g.ndim == 0:
            return (_as(g, in_dtype),)
        return (_as(g.flip(d).cumsum(d).flip(d), in_dtype),)

    return recorded(out, "CumsumBackward0", (self,), backward)


# -- torch.<name> functions that call the tensor method -------------------------------------
def _via_method(name: str) -> Callable[..., Any]:
    """``torch.<name>(input, ...)``: the tensor method of the same name, which records."""

    def rule(fn: Callable, input: Any, *args: Any, out: Any = None, **kwargs: Any) -> Any:  # noqa: A002
        if out is not None or not _is_tensor(input):
            raise Unsupported
        return getattr(input, name)(*args, **kwargs)

    return rule


def _with_mean(spread: str) -> Callable[..., Any]:
    """``torch.var_mean``/``std_mean``: the two recorded reductions, as the forward runs."""

    def rule(
        fn: Callable,
        input: Any,  # noqa: A002
        dim: Any = None,
        unbiased: Any = None,
        keepdim: bool = False,
        *,
        correction: Any = None,
    ) -> Any:
        if not _is_tensor(input) or isinstance(dim, bool):
            raise Unsupported
        first = getattr(input, spread)(dim, unbiased, keepdim, correction=correction)
        return first, input.mean(dim, keepdim)

    return rule


# -- torch.nn.functional activations ---------------------------------------------------------
def _no_inplace(name: str, input: Any, inplace: Any) -> None:  # noqa: A002
    if inplace is True:
        raise Unsupported  # recorded as the out-of-place call written back (in_place.py)


def _activation(
    op: str, name: str, grad: Callable[..., Tensor], *params: str
) -> Callable[..., Any]:
    """A rule for ``F.<op>(input, *params, inplace=False)`` whose gradient is
    ``grad(g, x, *param_values)``; ``params`` are the names and defaults are taken from the
    forward's signature at call time."""

    def rule(fn: Callable, input: Tensor, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
        try:
            bound = inspect.signature(fn).bind(input, *args, **kwargs)
        except TypeError:
            raise Unsupported from None  # the forward raises its own error
        bound.apply_defaults()
        _no_inplace(op, input, bound.arguments.get("inplace"))
        values = [bound.arguments[p] for p in params]
        if not all(_number(v) for v in values):
            raise Unsupported
        out = untracked(fn, input, *args, **kwargs)
        return recorded(out, name, (input,), lambda g, x: (grad(g, x, *values),), (input,))

    return rule


def _leaky_relu_grad(g: Tensor, x: Tensor, slope: float) -> Tensor:
    return g * ((x > 0) * (1.0 - slope) + slope)


def _elu_grad(g: Tensor, x: Tensor, alpha: float, scale: float = 1.0, in_scale: float = 1.0):
    positive = x > 0
    negative = (x * in_scale).clamp_max(0).exp() * (alpha * in_scale) * (x <= 0)
    return g * (positive + negative) * scale


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _softplus_grad(g: Tensor, x: Tensor, beta: float, threshold: float) -> Tensor:
    bx = x * beta
    return g * ((bx > threshold) + bx.sigmoid() * (bx <= threshold))


def _hardtanh_grad(g: Tensor, x: Tensor, low: float, high: float) -> Tensor:
    return g * (x > low) * (x < high)


def _mish_grad(g: Tensor, x: Tensor) -> Tensor:
    s = x.sigmoid()
    t = (x.clamp_min(0) + (-x.abs()).exp().log1p()).tanh()  # tanh(softplus(x)), stably
    return g * (t + x * s * (1 - t * t))


def _hardswish_grad(g: Tensor, x: Tensor) -> Tensor:
    middle = (x >= -3) * (x <= 3)
    return g * (middle * (x / 3 + 0.5) + (x > 3))


def _hardsigmoid_grad(g: Tensor, x: Tensor) -> Tensor:
    return g * (x > -3) * (x < 3) / 6


def _logsigmoid_grad(g: Tensor, x: Tensor) -> Tensor:
    return g * (-x).sigmoid()


def _softsign_grad(g: Tensor, x: Tensor) -> Tensor:
    d = x.abs() + 1
    return g / (d * d)


def _tanhshrink_grad(g: Tensor, x: Tensor) -> Tensor:
    t = x.tanh()
    return g * t * t


def _relu6(fn: Callable, input: Tensor, inplace: bool = False) -> Any:  # noqa: A002
    _no_inplace("relu6", input, inplace)
    out = untracked(fn, input)
    return recorded(
        out, "HardtanhBackward0", (input,), lambda g, x: (_hardtanh_grad(g, x, 0.0, 6.0),), (input,)
    )


# -- norms -----------------------------------------------------------------------------------
def _rms_norm(
    fn: Callable,
    input: Tensor,  # noqa: A002
    normalized_shape: Any,
    weight: Any = None,
    eps: Any = None,
) -> Any:
    out = untracked(fn, input, normalized_shape, weight, eps)
    if eps is None:  # as the forward picks it
        eps = float(np.finfo(np.float16 if input.dtype.name == "float16" else np.float32).eps)
        if input.dtype.name == "bfloat16":
            eps = 2.0**-7
    k = 1 if isinstance(normalized_shape, numbers.Integral) else len(tuple(normalized_shape))
    dims = tuple(range(input.ndim - k, input.ndim))
    need_x = input.requires_grad
    need_w = weight is not None and weight.requires_grad
    shape = tuple(input.shape[input.ndim - k :])

    def backward(g: Tensor, x: Tensor, w: Any) -> Sequence[Any]:
        r = ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
        gx = gw = None
        if need_x:
            gh = g * w if w is not None else g
            gx = (gh - x * (r * r) * (gh * x).mean(dims, keepdim=True)) * r
        if need_w:
            gw = sum_to(g * x * r, shape)
        return gx, gw

    return recorded(out, "RmsNormBackward0", (input, weight), backward, (input, weight))


def _group_norm(
    fn: Callable,
    input: Tensor,  # noqa: A002
    num_groups: int,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
) -> Any:
    out = untracked(fn, input, num_groups, weight, bias, eps)
    if not input.numel():
        raise Unsupported
    shape = tuple(input.shape)
    n, channels = shape[0], shape[1]
    per_channel = (1, channels) + (1,) * (len(shape) - 2)
    need_x = input.requires_grad
    need_w = weight is not None and weight.requires_grad
    need_b = bias is not None and bias.requires_grad
    others = (0, *range(2, len(shape)))

    def backward(g: Tensor, x: Tensor, w: Any) -> Sequence[Any]:
        rows = x.reshape(n, num_groups, -1)
        xc = rows - rows.mean(-1, keepdim=True)
        rstd = ((xc * xc).mean(-1, keepdim=True) + eps).rsqrt()
        xhat = xc * rstd
        gx = gw = gb = None
        if need_x:
            gh = (g * w.reshape(per_channel) if w is not None else g).reshape(n, num_groups, -1)
            gx = gh - gh.mean(-1, keepdim=True) - xhat * (gh * xhat).mean(-1, keepdim=True)
            gx = (gx * rstd).reshape(shape)
        if need_w:
            gw = (g * xhat.reshape(shape)).sum(others)
        if need_b:
            gb = g.sum(others)
        return gx, gw, gb

    return recorded(
        out, "NativeGroupNormBackward0", (input, weight, bias), backward, (input, weight)
    )


def _normalize(
    fn: Callable,
    input: Tensor,  # noqa: A002
    p: float = 2.0,
    dim: int = 1,
    eps: float = 1e-12,
    out: Any = None,
) -> Any:
    """``x / max(||x||, eps)``: the norm's gradient passes where ``||x|| >= eps`` (clamp's)."""
    if out is not None:
        raise Unsupported
    order = _norm_order(p)
    result = untracked(fn, input, p, dim, eps)
    d = dim % max(input.ndim, 1)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        n = x.norm(order, d, keepdim=True)
        denom = n.clamp_min(eps)
        dn = x.sign() if order == 1 else x / (n + (n == 0))
        inner = (g * x).sum(d, keepdim=True) * (n >= eps) / (denom * denom)
        return (g / denom - dn * inner,)

    return recorded(result, "DivBackward0", (input,), backward, (input,))


# -- losses ----------------------------------------------------------------------------------
def _reduction_arg(size_average: Any, reduce: Any, reduction: Any, extra: tuple = ()) -> str:
    if size_average is not None or reduce is not None:
        raise Unsupported
    if reduction not in ("mean", "sum", "none", *extra):
        raise Unsupported
    return reduction


def _pair_loss(
    name: str,
    forward: Callable[..., Any],
    grad: Callable[[Tensor, Tensor, Tensor], tuple[Any, Any]],
    input: Tensor,  # noqa: A002
    target: Tensor,
    reduction: str,
    divisor: int | None = None,
) -> Any:
    """Record an elementwise loss of ``input`` and ``target``: ``grad(g, x, y)`` gives the
    elementwise gradients (``g`` already scaled for the reduction) of both."""
    out = untracked(forward)
    x_shape, y_shape = tuple(input.shape), tuple(target.shape)
    count = math.prod(np.broadcast_shapes(x_shape, y_shape))
    if divisor is not None:
        count = divisor

    def backward(g: Tensor, x: Tensor, y: Tensor) -> Sequence[Any]:
        gx, gy = grad(g / count if reduction == "mean" or divisor else g, x, y)
        return (
            sum_to(gx, x_shape) if gx is not None and _needs(input) else None,
            sum_to(gy, y_shape) if gy is not None and _needs(target) else None,
        )

    return recorded(out, name, (input, target), backward, (input, target))


def _l1_loss(
    fn: Callable,
    input: Tensor,  # noqa: A002
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    reduction = _reduction_arg(size_average, reduce, reduction)
    if not _is_tensor(target):
        raise Unsupported

    def grad(g: Tensor, x: Tensor, y: Tensor) -> tuple[Any, Any]:
        d = g * (x - y).sign()
        return d, -d

    return _pair_loss(
        "L1LossBackward0",
        lambda: fn(input, target, reduction=reduction),
        grad,
        input,
        target,
        reduction,
    )


def _smooth_l1_loss(
    fn: Callable,
    input: Tensor,  # noqa: A002
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Any:
    reduction = _reduction_arg(size_average, reduce, reduction)
    if not _is_tensor(target) or not _number(beta):
        raise Unsupported

    def grad(g: Tensor, x: Tensor, y: Tensor) -> tuple[Any, Any]:
        d = x - y
        if beta == 0:
            e = d.sign()
        else:
            inside = d.abs() < beta
            e = inside * d / beta + (inside == 0) * d.sign()
        e = g * e
        return e, -e

    def forward() -> Any:
        return fn(input, target, reduction=reduction, beta=beta)

    return _pair_loss("SmoothL1LossBackward0", forward, grad, input, target, reduction)


def _huber_loss(
    fn: Callable,
    input: Tensor,  # noqa: A002
    target: Any,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Any = None,
) -> Any:
    reduction = _reduction_arg(None, None, reduction)
    if not _is_tensor(target) or not _number(delta) or _needs(weight):
        raise Unsupported

    def grad(g: Tensor, x: Tensor, y: Tensor) -> tuple[Any, Any]:
        d = x - y
        e = d.clamp(-delta, delta) * g
        if weight is not None:
            e = e * weight
        return e, -e

    def forward() -> Any:
        return fn(input, target, reduction=reduction, delta=delta, weight=weight)

    return _pair_loss("HuberLossBackward0", forward, grad, input, target, reduction)


def _binary_cross_entropy(
    fn: Callable,
    input: Tensor,  # noqa: A002
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    """torch's: ``g * w * (x - t) / max((1 - x) * x, 1e-12)``; the target's
    ``g * w * (log(1 - x) - log(x))``, the logs clamped at -100 as the forward's."""
    reduction = _reduction_arg(size_average, reduce, reduction)
    if not _is_tensor(target) or _needs(weight):
        raise Unsupported

    def grad(g: Tensor, x: Tensor, y: Tensor) -> tuple[Any, Any]:
        gw = g * weight if weight is not None else g
        gx = gw * (x - y) / ((1 - x) * x).clamp_min(1e-12)
        gy = None
        if _needs(target):
            gy = gw * ((1 - x).log().clamp_min(-100) - x.log().clamp_min(-100))
        return gx, gy

    def forward() -> Any:
        return fn(input, target, weight, reduction=reduction)

    return _pair_loss("BinaryCrossEntropyBackward0", forward, grad, input, target, reduction)


def _bce_with_logits(
    fn: Callable,
    input: Tensor,  # noqa: A002
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Any:
    """``l = (1 - t) x + (1 + (pw - 1) t) softplus(-x)``: ``dl/dx = (1 + (pw - 1) t)
    sigmoid(x) - pw t``, ``dl/dt = -x + (pw - 1) softplus(-x)``, times ``weight``."""
    reduction = _reduction_arg(size_average, reduce, reduction)
    if not _is_tensor(target) or _needs(weight) or _needs(pos_weight):
        raise Unsupported

    def grad(g: Tensor, x: Tensor, y: Tensor) -> tuple[Any, Any]:
        gw = g * weight if weight is not None else g
        if pos_weight is None:
            gx = gw * (x.sigmoid() - y)
        else:
            gx = gw * ((y * (pos_weight - 1) + 1) * x.sigmoid() - y * pos_weight)
        gy = None
        if _needs(target):
            gy = -x
            if pos_weight is not None:  # softplus(-x), stably
                gy = gy + ((-x).clamp_min(0) + (-x.abs()).exp().log1p()) * (pos_weight - 1)
            gy = gw * gy
        return gx, gy

    def forward() -> Any:
        return fn(input, target, weight, reduction=reduction, pos_weight=pos_weight)

    return _pair_loss(
        "BinaryCrossEntropyWithLogitsBackward0", forward, grad, input, target, reduction
    )


def _kl_div(
    fn: Callable,
    input: Tensor,  # noqa: A002
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Any:
    """``t (log t - x)``: ``-t`` and ``log t + 1 - x``; with ``log_target``,
    ``exp(t) (t - x)``: ``-exp(t)`` and ``exp(t) (t - x + 1)``."""
    reduction = _reduction_arg(size_average, reduce, reduction, ("batchmean",))
    if not _is_tensor(target) or log_target not in (True, False):
        raise Unsupported
    divisor = None
    if reduction == "batchmean" and input.ndim:
        divisor = input.shape[0]

    def grad(g: Tensor, x: Tensor, y: Tensor) -> tuple[Any, Any]:
        if log_target:
            p = y.exp()
            return -g * p, (g * p * (y - x + 1) if _needs(target) else None)
        return -g * y, (g * (y.log() + 1 - x) if _needs(target) else None)

    def forward() -> Any:
        return fn(input, target, reduction=reduction, log_target=log_target)

    return _pair_loss(
        "KlDivBackward0",
        forward,
        grad,
        input,
        target,
        "sum" if reduction == "batchmean" else reduction,
        divisor,
    )


def _cosine_similarity(fn: Callable, x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8):
    """``y = a.b / (max(|a|, eps) max(|b|, eps))``; a norm's gradient passes where it is at
    least ``eps`` (clamp's)."""
    if not (_is_tensor(x1) and _is_tensor(x2)) or not _number(eps):
        raise Unsupported
    out = untracked(fn, x1, x2, dim, eps)
    a_shape, b_shape = tuple(x1.shape), tuple(x2.shape)
    shape = tuple(np.broadcast_shapes(a_shape, b_shape))
    d = dim % max(len(shape), 1)

    def backward(g: Tensor, a: Tensor, b: Tensor, y: Tensor) -> Sequence[Any]:
        a, b = a.expand(shape), b.expand(shape)
        g, y = g.unsqueeze(d), y.unsqueeze(d)
        na, nb = a.norm(2, d, keepdim=True), b.norm(2, d, keepdim=True)
        da, db = na.clamp_min(eps), nb.clamp_min(eps)
        ga = gb = None
        if _needs(x1):
            ga = sum_to(
                g * (b / (da * db) - y * (na >= eps) * a / (da * (na + (na == 0)))), a_shape
            )
        if _needs(x2):
            gb = sum_to(
                g * (a / (da * db) - y * (nb >= eps) * b / (db * (nb + (nb == 0)))), b_shape
            )
        return ga, gb

    return recorded(out, "CosineSimilarityBackward0", (x1, x2), backward, (x1, x2, out))


def _glu(fn: Callable, input: Tensor, dim: int = -1) -> Any:  # noqa: A002
    """``a * sigmoid(b)`` of the two halves along ``dim``: ``g * sigmoid(b)`` to ``a`` and
    ``g * a * sigmoid(b) * (1 - sigmoid(b))`` to ``b``, joined back along ``dim``."""
    if not isinstance(dim, numbers.Integral):
        raise Unsupported
    out = untracked(fn, input, dim)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        a, b = x.chunk(2, dim)
        s = b.sigmoid()
        ga = g * s
        return (cat([ga, ga * a * (1 - s)], dim),)

    return recorded(out, "GluBackward0", (input,), backward, (input,))


# -- the tables ------------------------------------------------------------------------------
_elu_rule = _activation("elu", "EluBackward0", _elu_grad, "alpha")

POINTWISE_RULES: dict[str, Callable[..., Any]] = {
    "sqrt": _sqrt,
    "rsqrt": _rsqrt,
    "abs": _abs,
    "__abs__": _abs,
    "absolute": _abs,
    "square": _square,
    "reciprocal": _reciprocal,
    "clamp": _clamp,
    "clip": _clamp,
    "clamp_min": _clamp_min,
    "clamp_max": _clamp_max,
    "sin": _sin,
    "cos": _cos,
    "asin": _asin,
    "log1p": _log1p,
    "expm1": _expm1,
    "erf": _erf,
    "max": _extreme(True),
    "min": _extreme(False),
    "amax": _amax(True),
    "amin": _amax(False),
    "var": _spread(False),
    "std": _spread(True),
    "prod": _prod,
    "logsumexp": _logsumexp,
    "norm": _norm,
    "cumsum": _cumsum,
    "maximum": _elementwise_extreme(True),
    "minimum": _elementwise_extreme(False),
}

POINTWISE_NN_RULES: dict[str, Callable[..., Any]] = {
    "leaky_relu": _activation(
        "leaky_relu", "LeakyReluBackward0", _leaky_relu_grad, "negative_slope"
    ),  # fmt: skip
    "elu": _elu_rule,
    "selu": _activation(
        "selu", "EluBackward0", lambda g, x: _elu_grad(g, x, _SELU_ALPHA, _SELU_SCALE)
    ),
    "celu": _activation(
        "celu", "EluBackward0", lambda g, x, a: _elu_grad(g, x, a, 1.0, 1.0 / a), "alpha"
    ),
    "softplus": _activation(
        "softplus", "SoftplusBackward0", _softplus_grad, "beta", "threshold"
    ),  # fmt: skip
    "hardtanh": _activation(
        "hardtanh", "HardtanhBackward0", _hardtanh_grad, "min_val", "max_val"
    ),  # fmt: skip
    "relu6": _relu6,
    "mish": _activation("mish", "MishBackward0", _mish_grad),
    "hardswish": _activation("hardswish", "HardswishBackward0", _hardswish_grad),
    "hardsigmoid": _activation("hardsigmoid", "HardsigmoidBackward0", _hardsigmoid_grad),
    "logsigmoid": _activation("logsigmoid", "LogSigmoidBackward0", _logsigmoid_grad),
    "softsign": _activation("softsign", "DivBackward0", _softsign_grad),
    "tanhshrink": _activation("tanhshrink", "SubBackward0", _tanhshrink_grad),
    "rms_norm": _rms_norm,
    "group_norm": _group_norm,
    "normalize": _normalize,
    "l1_loss": _l1_loss,
    "smooth_l1_loss": _smooth_l1_loss,
    "huber_loss": _huber_loss,
    "binary_cross_entropy": _binary_cross_entropy,
    "binary_cross_entropy_with_logits": _bce_with_logits,
    "kl_div": _kl_div,
    "cosine_similarity": _cosine_similarity,
    "glu": _glu,
}

POINTWISE_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    **{
        name: _via_method(name)
        for name in (
            "square",
            "reciprocal",
            "clamp_min",
            "clamp_max",
            "log1p",
            "expm1",
            "amax",
            "amin",
            "logsumexp",
            "prod",
            "cumsum",
            "cumprod",
            "logcumsumexp",
        )
    },
    "var_mean": _with_mean("var"),
    "std_mean": _with_mean("std"),
    # the same functions as torch.nn.functional's (one wrapper serves both names)
    "celu": POINTWISE_NN_RULES["celu"],
    "selu": POINTWISE_NN_RULES["selu"],
    "cosine_similarity": _cosine_similarity,
}

POINTWISE_LINALG_RULES: dict[str, Callable[..., Any]] = {
    "vector_norm": _vector_norm,
    "norm": _linalg_norm,
}
