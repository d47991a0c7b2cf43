"""``torch.nn.functional`` for KernBench: ``softmax`` (device kernels, as ``Tensor.softmax``)."""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorAttributeError, TensorError
from kernbench.torch.tensor import Tensor

__all__ = ["softmax"]


def softmax(
    input: Tensor,  # noqa: A002 - torch's name
    dim: Any = None,
    _stacklevel: int = 3,
    dtype: Any = None,
) -> Tensor:
    """``softmax(input, dim)`` along ``dim``, as :meth:`kernbench.torch.Tensor.softmax`."""
    if not isinstance(input, Tensor):
        raise TensorError(
            f"torch.nn.functional.softmax: expected a Tensor, got {type(input).__name__}"
        )
    return input.softmax(dim, dtype)


def __getattr__(name: str) -> Any:
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn.functional' has no attribute {name!r}: only softmax is "
        "supported (torch.softmax, Tensor.softmax are the same)"
    )
