"""``torch.nn.functional``'s further activations: ``softplus``, ``leaky_relu``, ``elu``, ...

``softplus``, ``leaky_relu``, ``elu``/``selu``/``celu``, ``hardsigmoid``,
``hardswish``, ``mish``, ``logsigmoid``, ``softsign`` and ``tanhshrink`` are
one elementwise kernel each (:mod:`~kernbench.torch.nn.activation_kernels`),
as torch's fused kernels are: a composition of tensor ops would cost several
passes over memory where torch makes one.  ``hardtanh``/``relu6`` are
``clamp`` (one kernel, as torch's ``hardtanh`` is a clamp, integers
included); ``glu`` is one kernel reading both halves.  ``inplace=True`` writes
the input, as torch.  Torch refuses integer inputs to all but ``hardtanh`` and
``relu6``, and so do these.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import BOOL
from kernbench.torch.nn.activation_kernels import launch_activation, launch_glu
from kernbench.torch.pointwise import launched
from kernbench.torch.shapes import dim_index, flag_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "celu",
    "elu",
    "glu",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "leaky_relu",
    "logsigmoid",
    "mish",
    "relu6",
    "selu",
    "softplus",
    "softsign",
    "tanhshrink",
]

# torch's SELU constants.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _number(value: Any, what: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorError(f"torch.nn.functional.{what}: {name} must be a number, got {value!r}")
    return float(value)


def _floating(input: Any, what: str) -> Tensor:  # noqa: A002
    x = tensor_argument(input, f"torch.nn.functional.{what}")
    if not x.dtype.is_floating_point:
        raise TensorError(
            f"torch.nn.functional.{what}: not implemented for {x.dtype!r} (as in torch); "
            "give a floating tensor (.float())"
        )
    return x


def _run(x: Tensor, what: str, op: str, inplace: Any, *params: float) -> Tensor:
    """``op`` of ``x`` by one kernel, into ``x`` itself when ``inplace``."""
    inplace = flag_argument(inplace, f"torch.nn.functional.{what}", "inplace")
    return launched(
        x, x if inplace else None, x.dtype, lambda s, d: launch_activation(op, s, d, *params)
    )


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """``log(1 + exp(beta * x)) / beta``, ``x`` itself where ``beta * x > threshold``; one
    kernel."""
    x = _floating(input, "softplus")
    beta = _number(beta, "softplus", "beta")
    threshold = _number(threshold, "softplus", "threshold")
    if beta == 0:
        raise TensorError("torch.nn.functional.softplus: beta must be non-zero (it divides)")
    return _run(x, "softplus", "softplus", False, beta, threshold)


def leaky_relu(
    input: Tensor,  # noqa: A002
    negative_slope: float = 0.01,
    inplace: bool = False,
) -> Tensor:
    """``x`` where positive, ``negative_slope * x`` elsewhere; one kernel."""
    x = _floating(input, "leaky_relu")
    slope = _number(negative_slope, "leaky_relu", "negative_slope")
    return _run(x, "leaky_relu", "leaky_relu", inplace, slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere; one kernel."""
    x = _floating(input, "elu")
    return _run(x, "elu", "elu", inplace, _number(alpha, "elu", "alpha"), 1.0, 1.0)


def selu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``scale * elu(x, alpha)`` with torch's constants; one kernel."""
    x = _floating(input, "selu")
    return _run(x, "selu", "elu", inplace, SELU_ALPHA, SELU_SCALE, 1.0)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``; one kernel."""
    x = _floating(input, "celu")
    alpha = _number(alpha, "celu", "alpha")
    if alpha == 0:
        raise TensorError(
            "torch.nn.functional.celu: ZeroDivisionError, alpha must be non-zero (as torch)"
        )
    return _run(x, "celu", "elu", inplace, alpha, 1.0, 1.0 / alpha)


def hardtanh(
    input: Tensor,  # noqa: A002
    min_val: float = -1.0,
    max_val: float = 1.0,
    inplace: bool = False,
) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``: the clamp kernel, as torch's (integer
    tensors too; not bool)."""
    x = tensor_argument(input, "torch.nn.functional.hardtanh")
    low = _number(min_val, "hardtanh", "min_val")
    high = _number(max_val, "hardtanh", "max_val")
    if low > high:
        raise TensorError(
            f"torch.nn.functional.hardtanh: min_val cannot be greater than max_val (got "
            f"{min_val} and {max_val})"
        )
    if x.dtype is BOOL:
        raise TensorError("torch.nn.functional.hardtanh: Bool inputs not supported (as torch)")
    if not x.dtype.is_floating_point:  # torch clamps integers with the bounds as integers
        low, high = math.ceil(low), math.floor(high)
    if flag_argument(inplace, "torch.nn.functional.hardtanh", "inplace"):
        return x.clamp_(low, high)
    return x.clamp(low, high)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``hardtanh(x, 0, 6)``: the clamp kernel."""
    tensor_argument(input, "torch.nn.functional.relu6")
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``min(max(x + 3, 0), 6) / 6``; one kernel."""
    return _run(_floating(input, "hardsigmoid"), "hardsigmoid", "hardsigmoid", inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``x * min(max(x + 3, 0), 6) / 6``; one kernel."""
    return _run(_floating(input, "hardswish"), "hardswish", "hardswish", inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """``x * tanh(softplus(x))``; one kernel."""
    return _run(_floating(input, "mish"), "mish", "mish", inplace)


def logsigmoid(input: Tensor) -> Tensor:  # noqa: A002
    """``log(sigmoid(x))`` = ``min(x, 0) - log1p(exp(-|x|))``, stable; one kernel."""
    return _run(_floating(input, "logsigmoid"), "logsigmoid", "logsigmoid", False)


def softsign(input: Tensor) -> Tensor:  # noqa: A002
    """``x / (1 + |x|)``; one kernel (torch composes it of three)."""
    return _run(_floating(input, "softsign"), "softsign", "softsign", False)


def tanhshrink(input: Tensor) -> Tensor:  # noqa: A002
    """``x - tanh(x)``; one kernel (torch composes it of two)."""
    return _run(_floating(input, "tanhshrink"), "tanhshrink", "tanhshrink", False)


def glu(input: Tensor, dim: int = -1) -> Tensor:  # noqa: A002
    """``a * sigmoid(b)`` of ``input``'s two halves along ``dim``; one kernel reading
    both halves, as torch's."""
    x = _floating(input, "glu")
    if x.ndim == 0:
        raise TensorError(
            "torch.nn.functional.glu does not support scalars because halving size must be even"
        )
    d = dim_index(dim, x.ndim, "torch.nn.functional.glu")
    if x.shape[d] % 2:
        raise TensorError(
            f"torch.nn.functional.glu: Halving dimension must be even, but dimension {d} is "
            f"size {x.shape[d]}"
        )
    shape = list(x.shape)
    shape[d] //= 2
    out = x.new_empty(shape)
    if out.numel():
        src = x.dense()
        launch_glu(src.device_tensor, out.device_tensor, math.prod(shape[d:]))
        if src is not x:
            src.free()
    return out
