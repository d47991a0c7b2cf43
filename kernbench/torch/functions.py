"""``torch.<name>(tensor, ...)`` forms of the tensor methods (``torch.max``, ``torch.exp``, ...).

Each takes PyTorch's arguments and calls the method of the same name, so
what runs on the device and what on the host is as the method says
(:mod:`~kernbench.torch.tensor`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError, TensorTypeError
from kernbench.torch.logic import isclose
from kernbench.torch.logic import where as _where
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "abs",
    "add",
    "addcdiv",
    "addcmul",
    "all",
    "allclose",
    "any",
    "argmax",
    "asin",
    "argmin",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "bmm",
    "clamp",
    "clip",
    "clone",
    "cos",
    "div",
    "dot",
    "eq",
    "equal",
    "erf",
    "exp",
    "flatten",
    "ge",
    "greater",
    "greater_equal",
    "gt",
    "isfinite",
    "isinf",
    "isnan",
    "le",
    "lerp",
    "less",
    "less_equal",
    "log",
    "log_softmax",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "lt",
    "masked_fill",
    "masked_select",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mm",
    "mul",
    "ne",
    "nonzero",
    "norm",
    "not_equal",
    "permute",
    "pow",
    "relu",
    "reshape",
    "rsqrt",
    "sigmoid",
    "sin",
    "softmax",
    "sqrt",
    "squeeze",
    "std",
    "sub",
    "sum",
    "tanh",
    "transpose",
    "tril",
    "triu",
    "unsqueeze",
    "var",
    "where",
    "isclose",
]


def with_out(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``fn`` taking torch's ``out=`` too, as :func:`into_out` gives it."""
    what = f"torch.{fn.__name__}"
    signature = inspect.signature(fn)
    shown = signature.replace(
        parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=signature.empty,
    )

    @functools.wraps(fn)
    def call(*args: Any, out: Any = None, **kwargs: Any) -> Tensor:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:  # as Python would say it, naming the call
            raise TensorTypeError(f"{what}: {exc}; it takes {what}{shown}") from None
        result = fn(*args, **kwargs)
        return result if out is None else into_out(what, out, result)

    return call


def into_out(what: str, out: Any, result: Tensor) -> Tensor:
    """``result`` copied into torch's ``out=`` tensor (a copy kernel here; torch's kernel
    writes ``out`` directly), which must have the result's shape (torch would resize it)
    and a dtype the result can be cast to; ``result`` is freed."""
    problem = None
    if not isinstance(result, Tensor):  # torch.where(condition): a tuple, no out=
        raise TensorError(
            f"{what}: this form returns {type(result).__name__}, not a Tensor; it takes no out="
        )
    if not isinstance(out, Tensor):
        problem = f"out must be a Tensor, got {type(out).__name__}"
    elif tuple(out.shape) != tuple(result.shape):
        problem = (
            f"out has shape {tuple(out.shape)} and the result {tuple(result.shape)}; "
            "torch would resize out, here give it the result's shape"
        )
    elif out.get_device() != result.get_device():
        problem = (
            f"out is on {out.device} and the result on {result.device}; give out on the "
            "inputs' device (as torch)"
        )
    elif result.dtype.is_floating_point and not out.dtype.is_floating_point:
        problem = (
            f"result type {result.dtype!r} can't be cast to the desired output type {out.dtype!r}"
        )
    if problem is not None:
        result.free()
        raise TensorError(f"{what}: {problem}")
    out.copy_(result)
    result.free()
    return out


def _tensor(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.{what}")


# PyTorch's parameter is named ``input``; the functions keep that name.
def _elementwise(name: str) -> Callable[..., Tensor]:
    """``torch.<name>(input)``: the tensor method of that name."""

    def fn(input: Tensor) -> Tensor:  # noqa: A002
        return getattr(_tensor(input, name), name)()

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}``: :meth:`Tensor.{name}` of ``input``."
    return fn


abs = with_out(_elementwise("abs"))  # noqa: A001
exp = with_out(_elementwise("exp"))
log = with_out(_elementwise("log"))
sqrt = with_out(_elementwise("sqrt"))
rsqrt = with_out(_elementwise("rsqrt"))
sin = with_out(_elementwise("sin"))
cos = with_out(_elementwise("cos"))
asin = with_out(_elementwise("asin"))
sigmoid = with_out(_elementwise("sigmoid"))
tanh = with_out(_elementwise("tanh"))
erf = with_out(_elementwise("erf"))
relu = _elementwise("relu")
logical_not = with_out(_elementwise("logical_not"))
bitwise_not = with_out(_elementwise("bitwise_not"))
isnan = _elementwise("isnan")
isinf = _elementwise("isinf")
isfinite = _elementwise("isfinite")


def _with_other(name: str) -> Callable[..., Tensor]:
    """``torch.<name>(input, other)``: the tensor method of that name."""

    def fn(input: Tensor, other: Any) -> Tensor:  # noqa: A002
        return getattr(_tensor(input, name), name)(other)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}``: :meth:`Tensor.{name}` of ``input`` and ``other``."
    return fn


eq = with_out(_with_other("eq"))
ne = not_equal = with_out(_with_other("ne"))
lt = less = with_out(_with_other("lt"))
le = less_equal = with_out(_with_other("le"))
gt = greater = with_out(_with_other("gt"))
ge = greater_equal = with_out(_with_other("ge"))
logical_and = with_out(_with_other("logical_and"))
logical_or = with_out(_with_other("logical_or"))
logical_xor = with_out(_with_other("logical_xor"))
bitwise_and = with_out(_with_other("bitwise_and"))
bitwise_or = with_out(_with_other("bitwise_or"))
bitwise_xor = with_out(_with_other("bitwise_xor"))


@with_out
def any(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002
    return _tensor(input, "any").any(dim, keepdim)


@with_out
def all(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002
    return _tensor(input, "all").all(dim, keepdim)


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "masked_fill").masked_fill(mask, value)


@with_out
def masked_select(input: Tensor, mask: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "masked_select").masked_select(mask)


where = with_out(_where)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:  # noqa: A002
    return _tensor(input, "nonzero").nonzero(as_tuple=as_tuple)


def norm(
    input: Tensor,  # noqa: A002
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    out: Any = None,
    dtype: Any = None,
) -> Tensor:
    result = _tensor(input, "norm").norm(p, dim, keepdim, dtype)
    return result if out is None else into_out("torch.norm", out, result)


@with_out
def var(
    input: Tensor,  # noqa: A002
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> Tensor:
    return _tensor(input, "var").var(dim, unbiased, keepdim, correction=correction)


@with_out
def std(
    input: Tensor,  # noqa: A002
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> Tensor:
    return _tensor(input, "std").std(dim, unbiased, keepdim, correction=correction)


@with_out
def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001,A002
    """``input ** exponent``: a tensor to a number, or a number (> 0) to a tensor."""
    if isinstance(input, Tensor):
        return input.pow(exponent)
    if isinstance(exponent, Tensor):
        return exponent.__rpow__(input)
    raise TensorError(
        f"torch.pow: expected a Tensor, got {type(input).__name__} and {type(exponent).__name__}"
    )


@with_out
def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A001,A002
    return _tensor(input, "clamp").clamp(min, max)


clip = clamp


@with_out
def add(input: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "add").add(other, alpha=alpha)


@with_out
def sub(input: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "sub").sub(other, alpha=alpha)


@with_out
def mul(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "mul").mul(other)


@with_out
def div(input: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:  # noqa: A002
    return _tensor(input, "div").div(other, rounding_mode=rounding_mode)


@with_out
def bmm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "bmm").bmm(mat2)


@with_out
def addcmul(input: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "addcmul").addcmul(tensor1, tensor2, value=value)


@with_out
def addcdiv(input: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "addcdiv").addcdiv(tensor1, tensor2, value=value)


@with_out
def lerp(input: Tensor, end: Any, weight: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "lerp").lerp(end, weight)


@with_out
def sum(  # noqa: A001
    input: Tensor,  # noqa: A002
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
    axis: Any = None,
) -> Tensor:
    return _tensor(input, "sum").sum(dim, keepdim, dtype=dtype, axis=axis)


@with_out
def mean(
    input: Tensor,  # noqa: A002
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
    axis: Any = None,
) -> Tensor:
    return _tensor(input, "mean").mean(dim, keepdim, dtype=dtype, axis=axis)


def max(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:  # noqa: A001,A002
    return _tensor(input, "max").max(dim, keepdim, axis=axis)


def min(input: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:  # noqa: A001,A002
    return _tensor(input, "min").min(dim, keepdim, axis=axis)


@with_out
def argmax(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _tensor(input, "argmax").argmax(dim, keepdim)


@with_out
def argmin(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _tensor(input, "argmin").argmin(dim, keepdim)


@with_out
def maximum(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "maximum").maximum(other)


@with_out
def minimum(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "minimum").minimum(other)


@with_out
def softmax(input: Tensor, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Tensor:  # noqa: A002
    return _tensor(input, "softmax").softmax(dim, dtype, axis=axis)


@with_out
def log_softmax(
    input: Tensor,  # noqa: A002
    dim: Any = None,
    dtype: Any = None,
    *,
    axis: Any = None,
) -> Tensor:
    return _tensor(input, "log_softmax").log_softmax(dim, dtype, axis=axis)


@with_out
def matmul(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "matmul").matmul(other)


@with_out
def mm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "mm").mm(mat2)


@with_out
def dot(input: Tensor, tensor: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "dot").dot(tensor)


def allclose(
    input: Tensor,  # noqa: A002
    other: Tensor,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    equal_nan: bool = False,
) -> bool:
    return _tensor(input, "allclose").allclose(other, rtol, atol, equal_nan)


def equal(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    return _tensor(input, "equal").equal(other)


def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:  # noqa: A002
    return _tensor(input, "clone").clone(memory_format=memory_format)


def reshape(input: Tensor, shape: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "reshape").reshape(shape)


def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    return _tensor(tensor, "split").split(split_size_or_sections, dim)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    return _tensor(input, "chunk").chunk(chunks, dim)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:  # noqa: A002
    return _tensor(input, "flatten").flatten(start_dim, end_dim)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    return _tensor(input, "transpose").transpose(dim0, dim1)


def permute(input: Tensor, dims: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "permute").permute(dims)


def unsqueeze(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    return _tensor(input, "unsqueeze").unsqueeze(dim)


def squeeze(input: Tensor, dim: Any = None) -> Tensor:  # noqa: A002
    return _tensor(input, "squeeze").squeeze(dim)


@with_out
def triu(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """``torch.triu``: :meth:`Tensor.triu` of ``input``."""
    return _tensor(input, "triu").triu(diagonal)


@with_out
def tril(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """``torch.tril``: :meth:`Tensor.tril` of ``input``."""
    return _tensor(input, "tril").tril(diagonal)
