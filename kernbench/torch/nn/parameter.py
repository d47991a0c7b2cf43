"""``torch.nn.Parameter``: a tensor a :class:`~kernbench.torch.nn.Module` registers as its own.

A Parameter shares the memory of the tensor it is made from (as torch's) and
has ``requires_grad=True`` by default; it is a
:class:`~kernbench.torch.Tensor` in every other way, and the results of its
operations are plain tensors.  Nothing computes its gradient: ``grad`` is the
slot a script assigns.
"""

from __future__ import annotations

import copy
from typing import Any

from kernbench.errors import TensorTypeError
from kernbench.torch.factories import empty
from kernbench.torch.shapes import flag_argument
from kernbench.torch.tensor import Tensor

__all__ = ["Buffer", "Parameter"]


class Parameter(Tensor):
    """``Parameter(data=None, requires_grad=True)`` over ``data``'s memory."""

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TensorTypeError(
                f"Parameter: data must be a Tensor, got {type(data).__name__} (as torch)"
            )
        flag = flag_argument(requires_grad, "Parameter", "requires_grad")
        self._init(data.storage_device_tensor, data.geometry, data.get_device(), data.dp)
        self.requires_grad_(flag)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> Parameter:
        """A copy on the device that is still a Parameter, with a deep copy of its grad."""
        out = Parameter(self.clone(), self.requires_grad)
        memo[id(self)] = out
        if self.grad is not None:
            out.grad = copy.deepcopy(self.grad, memo)
        return out

    def __reduce_ex__(self, protocol: Any) -> tuple:
        rebuild, args = super().__reduce_ex__(protocol)
        return _rebuilt_parameter, (rebuild, args)


def _rebuilt_parameter(rebuild: Any, args: tuple) -> Parameter:
    tensor = rebuild(*args)
    return Parameter(tensor, tensor.requires_grad)


class Buffer(Tensor):
    """``torch.nn.Buffer(data, persistent=True)``: a tensor a module registers as a buffer
    when assigned to one of its attributes (the plain tensor is what is stored)."""

    def __init__(self, data: Tensor, *, persistent: bool = True) -> None:
        if not isinstance(data, Tensor):
            raise TensorTypeError(f"Buffer: data must be a Tensor, got {type(data).__name__}")
        self._init(data.storage_device_tensor, data.geometry, data.get_device(), data.dp)
        self.persistent = flag_argument(persistent, "Buffer", "persistent")
