"""``torch.<name>(tensor, ...)`` forms of the tensor methods (``torch.max``, ``torch.exp``, ...).

Each takes PyTorch's arguments and calls the method of the same name, so
what runs on the device and what on the host is as the method says
(:mod:`~kernbench.torch.tensor`).
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.tensor import Tensor

__all__ = [
    "abs",
    "add",
    "addcdiv",
    "addcmul",
    "allclose",
    "argmax",
    "argmin",
    "bmm",
    "clamp",
    "clip",
    "clone",
    "cos",
    "div",
    "dot",
    "equal",
    "erf",
    "exp",
    "flatten",
    "lerp",
    "log",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mm",
    "mul",
    "norm",
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
    "unsqueeze",
    "var",
]


def _tensor(value: Any, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise TensorError(f"torch.{what}: expected a Tensor, got {type(value).__name__}")
    return value


# PyTorch's parameter is named ``input``; the functions keep that name.
def abs(input: Tensor) -> Tensor:  # noqa: A001,A002
    return _tensor(input, "abs").abs()


def exp(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "exp").exp()


def log(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "log").log()


def sqrt(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "sqrt").sqrt()


def norm(
    input: Tensor,  # noqa: A002
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    out: Any = None,
    dtype: Any = None,
) -> Tensor:
    if out is not None:
        raise TensorError("torch.norm: out= is not supported here; use the returned tensor")
    return _tensor(input, "norm").norm(p, dim, keepdim, dtype)


def var(
    input: Tensor,  # noqa: A002
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> Tensor:
    return _tensor(input, "var").var(dim, unbiased, keepdim, correction=correction)


def std(
    input: Tensor,  # noqa: A002
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> Tensor:
    return _tensor(input, "std").std(dim, unbiased, keepdim, correction=correction)


def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001,A002
    """``input ** exponent``: a tensor to a number, or a number (> 0) to a tensor."""
    if isinstance(input, Tensor):
        return input.pow(exponent)
    if isinstance(exponent, Tensor):
        return exponent.__rpow__(input)
    raise TensorError(
        f"torch.pow: expected a Tensor, got {type(input).__name__} and {type(exponent).__name__}"
    )


def rsqrt(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "rsqrt").rsqrt()


def sin(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "sin").sin()


def cos(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "cos").cos()


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "sigmoid").sigmoid()


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "tanh").tanh()


def erf(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "erf").erf()


def relu(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "relu").relu()


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A001,A002
    return _tensor(input, "clamp").clamp(min, max)


clip = clamp


def add(input: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "add").add(other, alpha=alpha)


def sub(input: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "sub").sub(other, alpha=alpha)


def mul(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "mul").mul(other)


def div(input: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:  # noqa: A002
    return _tensor(input, "div").div(other, rounding_mode=rounding_mode)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "bmm").bmm(mat2)


def addcmul(input: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "addcmul").addcmul(tensor1, tensor2, value=value)


def addcdiv(input: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "addcdiv").addcdiv(tensor1, tensor2, value=value)


def lerp(input: Tensor, end: Any, weight: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "lerp").lerp(end, weight)


def sum(  # noqa: A001
    input: Tensor,  # noqa: A002
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
    axis: Any = None,
) -> Tensor:
    return _tensor(input, "sum").sum(dim, keepdim, dtype=dtype, axis=axis)


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


def argmax(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _tensor(input, "argmax").argmax(dim, keepdim)


def argmin(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    return _tensor(input, "argmin").argmin(dim, keepdim)


def maximum(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "maximum").maximum(other)


def minimum(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "minimum").minimum(other)


def softmax(input: Tensor, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Tensor:  # noqa: A002
    return _tensor(input, "softmax").softmax(dim, dtype, axis=axis)


def matmul(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "matmul").matmul(other)


def mm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "mm").mm(mat2)


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
    return _tensor(input, "clone").clone()


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
