"""Backward formulas of the tensor methods: arithmetic, ``matmul``, ``sum``/``mean``, the
views and the pointwise functions.

Each rule runs the method it replaces with recording off (so the forward launches what
it always did), then records one :class:`~kernbench.torch.autograd.graph.Node` whose
backward computes the input gradients with the facade's ops: a matmul's backward is two
matmuls, a broadcast input's gradient a ``sum`` over the broadcast dims.  Rules get the
original method first, then its arguments; ``RULES`` maps method names to them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.grad_mode import no_grad
from kernbench.torch.autograd.graph import Node, record, saved

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["FUNCTION_RULES", "RULES", "Unsupported", "recorded", "sum_to", "untracked"]


class Unsupported(Exception):  # noqa: N818 - a signal between rules and the installer
    """Raised by a rule, before running anything, for arguments it has no formula for."""


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "grad_fn") and hasattr(value, "storage_device_tensor")


def _needs(value: Any) -> bool:
    return _is_tensor(value) and value.requires_grad


def _dim(d: Any, ndim: int) -> int:
    """``d`` as an index into ``ndim`` dims (a 0-d tensor has one); Unsupported otherwise."""
    if isinstance(d, bool) or not isinstance(d, int) or not -max(ndim, 1) <= d < max(ndim, 1):
        raise Unsupported
    return d % max(ndim, 1)


def recorded(
    out: Any,
    name: str,
    inputs: Sequence[Any],
    backward: Callable[..., Sequence[Any]],
    keep: Sequence[Any] = (),
) -> Any:
    """``out`` made the result of a new node ``name`` over ``inputs``; nothing is recorded
    when ``out`` is one of them (an op that returned its input) or when none of them
    requires grad (the rule ran for an argument that is not differentiated: view_as's
    ``other`` gives only a shape), as in torch."""
    if any(out is t for t in inputs):
        return out
    if not any(_needs(t) for t in inputs):
        return out
    return record(out, Node(name, inputs, backward, [saved(t) for t in keep]))


def untracked(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with no_grad():
        return fn(*args, **kwargs)


def sum_to(g: Tensor, shape: Sequence[int]) -> Tensor:
    """``g`` summed over the dims that broadcasting added or stretched, to ``shape``."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    out = g.sum(dim=dims, keepdim=True) if dims else g
    return out.reshape(shape)


def _scalar(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool | complex)


def _operand(value: Any) -> None:
    if not (_is_tensor(value) or _scalar(value)):
        raise Unsupported


# -- arithmetic ------------------------------------------------------------------------------
def _add(fn: Callable, self: Tensor, other: Any, *, alpha: Any = 1, sign: int = 1) -> Any:
    _operand(other)
    out = untracked(fn, self, other, alpha=alpha) if alpha != 1 else untracked(fn, self, other)
    a_shape = tuple(self.shape)
    b_shape = tuple(other.shape) if _is_tensor(other) else ()
    scale = sign * alpha

    def backward(g: Tensor) -> Sequence[Any]:
        gb = sum_to(g if scale == 1 else g * scale, b_shape) if _needs(other) else None
        return sum_to(g, a_shape), gb

    return recorded(out, "AddBackward0" if sign == 1 else "SubBackward0", (self, other), backward)


def _add_rule(fn: Callable, self: Tensor, other: Any, *, alpha: Any = 1) -> Any:
    return _add(fn, self, other, alpha=alpha)


def _sub_rule(fn: Callable, self: Tensor, other: Any, *, alpha: Any = 1) -> Any:
    return _add(fn, self, other, alpha=alpha, sign=-1)


def _add_op(fn: Callable, self: Tensor, other: Any) -> Any:
    return _add(fn, self, other)


def _sub_op(fn: Callable, self: Tensor, other: Any) -> Any:
    return _add(fn, self, other, sign=-1)


def _rsub(fn: Callable, self: Tensor, other: Any) -> Any:
    _operand(other)
    out = untracked(fn, self, other)
    shape = tuple(self.shape)
    return recorded(out, "RsubBackward1", (self, other), lambda g: (sum_to(-g, shape), None))


def _mul(fn: Callable, self: Tensor, other: Any) -> Any:
    _operand(other)
    out = untracked(fn, self, other)
    a_shape = tuple(self.shape)
    if not _is_tensor(other):
        return recorded(out, "MulBackward0", (self,), lambda g: (g * other,))
    b_shape = tuple(other.shape)
    need_a, need_b = self.requires_grad, other.requires_grad

    def backward(g: Tensor, a: Tensor, b: Tensor) -> Sequence[Any]:
        ga = sum_to(g * b, a_shape) if need_a else None
        gb = sum_to(g * a, b_shape) if need_b else None
        return ga, gb

    return recorded(out, "MulBackward0", (self, other), backward, (self, other))


def _div(fn: Callable, self: Tensor, other: Any, *, rounding_mode: Any = None) -> Any:
    _operand(other)
    if rounding_mode is not None:
        raise Unsupported
    out = untracked(fn, self, other)
    a_shape = tuple(self.shape)
    if not _is_tensor(other):
        return recorded(out, "DivBackward0", (self,), lambda g: (g / other,))
    b_shape = tuple(other.shape)
    need_a, need_b = self.requires_grad, other.requires_grad

    def backward(g: Tensor, a: Tensor, b: Tensor) -> Sequence[Any]:
        ga = sum_to(g / b, a_shape) if need_a else None
        gb = sum_to(-g * a / (b * b), b_shape) if need_b else None
        return ga, gb

    return recorded(out, "DivBackward0", (self, other), backward, (self, other))


def _div_op(fn: Callable, self: Tensor, other: Any) -> Any:
    return _div(fn, self, other)


def _rdiv(fn: Callable, self: Tensor, other: Any) -> Any:
    if not _scalar(other):
        raise Unsupported
    out = untracked(fn, self, other)
    return recorded(out, "DivBackward0", (self,), lambda g, y, x: (-g * y / x,), (out, self))


def _neg(fn: Callable, self: Tensor) -> Any:
    return recorded(untracked(fn, self), "NegBackward0", (self,), lambda g: (-g,))


def _pow(fn: Callable, self: Tensor, exponent: Any) -> Any:
    if not _scalar(exponent):
        raise Unsupported
    out = untracked(fn, self, exponent)

    def backward(g: Tensor, x: Tensor) -> Sequence[Any]:
        if exponent == 0:
            return (g * 0,)
        if exponent == 1:
            return (g,)
        if exponent == 2:
            return (g * x * 2,)
        return (g * (x ** (exponent - 1)) * exponent,)

    return recorded(out, "PowBackward0", (self,), backward, (self,))


def _rpow(fn: Callable, self: Tensor, base: Any) -> Any:
    if not _scalar(base) or base <= 0:
        raise Unsupported
    out = untracked(fn, self, base)
    log_base = math.log(base)
    return recorded(out, "PowBackward2", (self,), lambda g, y: (g * y * log_base,), (out,))


# -- matmul ----------------------------------------------------------------------------------
def _matmul(fn: Callable, self: Tensor, other: Any, name: str = "") -> Any:
    if not _is_tensor(other) or self.ndim == 0 or other.ndim == 0:
        raise Unsupported
    out = untracked(fn, self, other)
    a_shape, b_shape = tuple(self.shape), tuple(other.shape)
    need_a, need_b = self.requires_grad, other.requires_grad
    if not name:
        name = "MmBackward0" if len(a_shape) == len(b_shape) == 2 else "MatmulBackward0"
    if len(a_shape) == len(b_shape) == 1:
        name = "DotBackward0"  # torch's matmul of two vectors is a dot

    def backward(g: Tensor, a: Tensor, b: Tensor) -> Sequence[Any]:
        if a.ndim == 1 and b.ndim == 1:  # the 0-d gradient scales the other vector
            return (g * b if need_a else None), (g * a if need_b else None)
        a2 = a.unsqueeze(0) if a.ndim == 1 else a
        b2 = b.unsqueeze(-1) if b.ndim == 1 else b
        g2 = g.unsqueeze(-2) if a.ndim == 1 else g
        g2 = g2.unsqueeze(-1) if b.ndim == 1 else g2
        ga = gb = None
        if need_a:  # dA = dY @ B^T (B read through its strides)
            ga = sum_to(g2.matmul(b2.mT), a2.shape).reshape(a_shape)
        if need_b:  # dB = A^T @ dY
            gb = sum_to(a2.mT.matmul(g2), b2.shape).reshape(b_shape)
        return ga, gb

    return recorded(out, name, (self, other), backward, (self, other))


def _mm(fn: Callable, self: Tensor, other: Any) -> Any:
    return _matmul(fn, self, other, "MmBackward0")


def _bmm(fn: Callable, self: Tensor, other: Any) -> Any:
    return _matmul(fn, self, other, "BmmBackward0")


# -- reductions ------------------------------------------------------------------------------
def _dims(dim: Any, ndim: int) -> tuple[int, ...] | None:
    if dim is None:
        return None
    dims = tuple(dim) if isinstance(dim, list | tuple) else (dim,)
    if not dims:
        return None
    return tuple(sorted(d % max(ndim, 1) for d in dims))


def _expand_back(g: Tensor, shape: tuple[int, ...], dims: Any, keepdim: bool) -> Tensor:
    if dims is not None and not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    elif dims is None:
        g = g.reshape((1,) * len(shape))
    return g.expand(shape)


def _reduction(mean: bool) -> Callable[..., Any]:
    def rule(
        fn: Callable,
        self: Tensor,
        dim: Any = None,
        keepdim: bool = False,
        *,
        dtype: Any = None,
        axis: Any = None,
    ) -> Any:
        out = untracked(fn, self, dim, keepdim, dtype=dtype, axis=axis)
        shape = tuple(self.shape)
        dims = _dims(dim if axis is None else axis, len(shape))
        count = math.prod(shape) if dims is None else math.prod(shape[d] for d in dims)
        in_dtype = self.dtype

        def backward(g: Tensor) -> Sequence[Any]:
            if g.dtype is not in_dtype:
                g = g.to(in_dtype)
            if mean:
                g = g / count
            return (_expand_back(g, shape, dims, keepdim),)

        suffix = "0" if dims is None else "1"
        return recorded(
            out, ("MeanBackward" if mean else "SumBackward") + suffix, (self,), backward
        )

    return rule


# -- views -----------------------------------------------------------------------------------
def _reshaping(name: str) -> Callable[..., Any]:
    def rule(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
        out = untracked(fn, self, *args, **kwargs)
        shape = tuple(self.shape)
        return recorded(out, name, (self,), lambda g: (g.reshape(shape),))

    return rule


def _transpose(fn: Callable, self: Tensor, dim0: int, dim1: int) -> Any:
    out = untracked(fn, self, dim0, dim1)
    return recorded(out, "TransposeBackward0", (self,), lambda g: (g.transpose(dim0, dim1),))


def _t(fn: Callable, self: Tensor) -> Any:
    out = untracked(fn, self)
    return recorded(out, "TBackward0", (self,), lambda g: (g.t(),))


def _matrix_t(fn: Callable, self: Tensor) -> Any:  # the T and mT properties
    out = untracked(fn, self)
    ndim = self.ndim
    if ndim <= 2:
        return recorded(out, "TBackward0", (self,), lambda g: (g.t() if ndim == 2 else g,))
    if fn.__name__ == "mT":
        return recorded(out, "TransposeBackward0", (self,), lambda g: (g.mT,))
    return recorded(out, "PermuteBackward0", (self,), lambda g: (g.permute(*range(ndim)[::-1]),))


def _permute(fn: Callable, self: Tensor, *dims: Any) -> Any:
    out = untracked(fn, self, *dims)
    order = dims[0] if len(dims) == 1 and isinstance(dims[0], list | tuple) else dims
    ndim = self.ndim
    inverse = [0] * ndim
    for i, d in enumerate(order):
        inverse[d % ndim] = i
    return recorded(out, "PermuteBackward0", (self,), lambda g: (g.permute(*inverse),))


def _expand(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
    out = untracked(fn, self, *args, **kwargs)
    shape = tuple(self.shape)
    return recorded(out, "ExpandBackward0", (self,), lambda g: (sum_to(g, shape),))


def _basic_key(key: Any) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return all(
        part is None or part is Ellipsis or isinstance(part, slice)
        or (isinstance(part, numbers.Integral) and not isinstance(part, bool))
        for part in parts
    )  # fmt: skip


def _getitem(fn: Callable, self: Tensor, key: Any) -> Any:
    if not _basic_key(key):
        raise Unsupported
    out = untracked(fn, self, key)

    def backward(g: Tensor) -> Sequence[Any]:
        full = g.new_zeros(shape)
        full[key] = g
        return (full,)

    shape = tuple(self.shape)
    name = "SelectBackward0" if isinstance(key, numbers.Integral) else "SliceBackward0"
    return recorded(out, name, (self,), backward)


# -- copies and casts --------------------------------------------------------------------------
def _copy_like(name: str) -> Callable[..., Any]:
    def rule(fn: Callable, self: Tensor, *args: Any, **kwargs: Any) -> Any:
        out = untracked(fn, self, *args, **kwargs)
        dtype, device = self.dtype, self.device

        def backward(g: Tensor) -> Sequence[Any]:
            if g.dtype is dtype and g.device == device:
                return (g,)
            return (g.to(device, dtype),)  # back to the input's device and dtype

        return recorded(out, name, (self,), backward)

    return rule


# -- pointwise --------------------------------------------------------------------------------
def _relu(fn: Callable, self: Tensor) -> Any:
    out = untracked(fn, self)
    return recorded(out, "ReluBackward0", (self,), lambda g, y: (g * (y > 0),), (out,))


def _tanh(fn: Callable, self: Tensor) -> Any:
    out = untracked(fn, self)
    return recorded(out, "TanhBackward0", (self,), lambda g, y: (g * (1 - y * y),), (out,))


def _sigmoid(fn: Callable, self: Tensor) -> Any:
    out = untracked(fn, self)
    return recorded(out, "SigmoidBackward0", (self,), lambda g, y: (g * y * (1 - y),), (out,))


def _exp(fn: Callable, self: Tensor) -> Any:
    out = untracked(fn, self)
    return recorded(out, "ExpBackward0", (self,), lambda g, y: (g * y,), (out,))


def _log(fn: Callable, self: Tensor) -> Any:
    out = untracked(fn, self)
    return recorded(out, "LogBackward0", (self,), lambda g, x: (g / x,), (self,))


def _softmax_dim(self: Tensor, dim: Any, axis: Any) -> int:
    d = axis if dim is None else dim
    if d is None:
        raise Unsupported  # the forward raises torch's error
    return d % max(self.ndim, 1)


def _softmax(
    fn: Callable, self: Tensor, dim: Any = None, dtype: Any = None, *, axis: Any = None
) -> Any:
    d = _softmax_dim(self, dim, axis)
    out = untracked(fn, self, dim, dtype, axis=axis)
    in_dtype = self.dtype

    def backward(g: Tensor, y: Tensor) -> Sequence[Any]:
        gx = y * (g - (g * y).sum(d, keepdim=True))
        return (gx if gx.dtype is in_dtype else gx.to(in_dtype),)

    return recorded(out, "SoftmaxBackward0", (self,), backward, (out,))


def _log_softmax(
    fn: Callable, self: Tensor, dim: Any = None, dtype: Any = None, **kwargs: Any
) -> Any:
    d = _softmax_dim(self, dim, kwargs.get("axis"))
    out = untracked(fn, self, dim, dtype, **kwargs)
    in_dtype = self.dtype

    def backward(g: Tensor, y: Tensor) -> Sequence[Any]:
        gx = g - y.exp() * g.sum(d, keepdim=True)
        return (gx if gx.dtype is in_dtype else gx.to(in_dtype),)

    return recorded(out, "LogSoftmaxBackward0", (self,), backward, (out,))


# -- joins (torch.cat, torch.stack) -------------------------------------------------------------
def _joined(stacked: bool) -> Callable[..., Any]:
    def rule(fn: Callable, tensors: Any, dim: int = 0) -> Any:
        items = list(tensors) if isinstance(tensors, list | tuple) else None
        if not items or not all(_is_tensor(t) for t in items):
            raise Unsupported
        out = untracked(fn, items, dim)
        d = dim % out.ndim
        sizes = [1 if stacked else t.shape[d] for t in items]
        needs = [t.requires_grad for t in items]

        def backward(g: Tensor) -> Sequence[Any]:
            grads, start = [], 0
            for size, need in zip(sizes, needs, strict=True):
                part = g.narrow(d, start, size) if need else None
                grads.append(part.squeeze(d) if stacked and part is not None else part)
                start += size
            return grads

        return recorded(out, "StackBackward0" if stacked else "CatBackward0", items, backward)

    return rule


# torch.<name> functions with a rule of their own (the others call a tensor method).
FUNCTION_RULES: dict[str, Callable[..., Any]] = {"cat": _joined(False), "stack": _joined(True)}

RULES: dict[str, Callable[..., Any]] = {
    "__add__": _add_op,
    "__radd__": _add_op,
    "add": _add_rule,
    "__sub__": _sub_op,
    "sub": _sub_rule,
    "subtract": _sub_rule,
    "__rsub__": _rsub,
    "__mul__": _mul,
    "__rmul__": _mul,
    "mul": _mul,
    "multiply": _mul,
    "__truediv__": _div_op,
    "div": _div,
    "divide": _div,
    "true_divide": _div_op,
    "__rtruediv__": _rdiv,
    "__neg__": _neg,
    "neg": _neg,
    "negative": _neg,
    "__pow__": _pow,
    "pow": _pow,
    "__rpow__": _rpow,
    "matmul": _matmul,
    "__matmul__": _matmul,
    "mm": _mm,
    "bmm": _bmm,
    "sum": _reduction(mean=False),
    "mean": _reduction(mean=True),
    "view": _reshaping("ViewBackward0"),
    "view_as": _reshaping("ViewBackward0"),
    "reshape": _reshaping("ViewBackward0"),
    "reshape_as": _reshaping("ViewBackward0"),
    "flatten": _reshaping("ViewBackward0"),
    "ravel": _reshaping("ViewBackward0"),
    "unflatten": _reshaping("ViewBackward0"),
    "unsqueeze": _reshaping("UnsqueezeBackward0"),
    "squeeze": _reshaping("SqueezeBackward0"),
    "transpose": _transpose,
    "swapaxes": _transpose,
    "swapdims": _transpose,
    "t": _t,
    "T": _matrix_t,
    "mT": _matrix_t,
    "permute": _permute,
    "expand": _expand,
    "expand_as": _expand,
    "__getitem__": _getitem,
    "clone": _copy_like("CloneBackward0"),
    "contiguous": _copy_like("CloneBackward0"),
    "dense": _copy_like("CloneBackward0"),
    "to": _copy_like("ToCopyBackward0"),
    "cuda": _copy_like("ToCopyBackward0"),
    "cpu": _copy_like("ToCopyBackward0"),
    "float": _copy_like("ToCopyBackward0"),
    "double": _copy_like("ToCopyBackward0"),
    "half": _copy_like("ToCopyBackward0"),
    "bfloat16": _copy_like("ToCopyBackward0"),
    "type_as": _copy_like("ToCopyBackward0"),
    "relu": _relu,
    "tanh": _tanh,
    "sigmoid": _sigmoid,
    "exp": _exp,
    "log": _log,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
}
