"""``torch.nn.functional`` for KernBench: activations, norms and ``softmax`` on the device.

``relu``, ``sigmoid``, ``tanh``, ``gelu`` (erf or its tanh form), ``silu``,
``softmax``, ``layer_norm``, ``rms_norm`` and ``linear`` take PyTorch's
arguments and run as :class:`kernbench.torch.Tensor`'s methods do
(``inplace=True`` writes the input); the norms are one kernel each.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorAttributeError, TensorError
from kernbench.torch.pointwise import gelu, layer_norm, rms_norm, silu
from kernbench.torch.tensor import Tensor

__all__ = [
    "gelu",
    "layer_norm",
    "linear",
    "relu",
    "rms_norm",
    "sigmoid",
    "silu",
    "softmax",
    "tanh",
]


def _input(value: Any, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise TensorError(
            f"torch.nn.functional.{what}: expected a Tensor, got {type(value).__name__}"
        )
    return value


def softmax(
    input: Tensor,  # noqa: A002 - torch's name
    dim: Any = None,
    _stacklevel: int = 3,
    dtype: Any = None,
) -> Tensor:
    """``softmax(input, dim)`` along ``dim``, as :meth:`kernbench.torch.Tensor.softmax`."""
    return _input(input, "softmax").softmax(dim, dtype)


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 - torch's name
    x = _input(input, "relu")
    return x.relu_() if inplace else x.relu()


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    return _input(input, "sigmoid").sigmoid()


def tanh(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    return _input(input, "tanh").tanh()


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """``input @ weight.T + bias``: the product reads ``weight`` through its strides (no
    copy); the bias is added by a second kernel, where torch's GEMM adds it on the way."""
    x = _input(input, "linear")
    w = _input(weight, "linear")
    if w.ndim not in (1, 2):
        raise TensorError(
            f"torch.nn.functional.linear: weight must be 1-D or 2-D (out_features, "
            f"in_features), got shape {tuple(w.shape)}"
        )
    out = x.matmul(w.mT if w.ndim == 2 else w)
    if bias is not None:
        b = _input(bias, "linear")
        if b.dtype is not out.dtype:
            out.free()
            raise TensorError(
                f"torch.nn.functional.linear: bias is {b.dtype!r} and the product "
                f"{out.dtype!r}; give them one dtype"
            )
        out.add_(b)
    return out


def __getattr__(name: str) -> Any:
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn.functional' has no attribute {name!r}: there are "
        f"{', '.join(__all__)} (as device kernels)"
    )
