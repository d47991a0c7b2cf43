"""The autograd slots of :class:`~kernbench.torch.Tensor`: ``requires_grad``, ``grad``, ``data``.

There is no autograd in kernbench.torch.  Scripts still set
``requires_grad``, assign ``param.grad`` and write through ``param.grad.data``
(the distributed tutorial's gradient averaging), so
:class:`TensorGradSlots` keeps them: a flag, a slot holding a tensor of the
same shape (None by default), and ``data``/``detach()`` as new tensors over
the same memory.  ``backward()`` raises (see :mod:`~kernbench.torch.missing`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernbench.errors import TensorError
from kernbench.torch.shapes import flag_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorGradSlots"]


class TensorGradSlots:
    """``requires_grad``, ``grad``, ``data`` and ``detach`` of a tensor."""

    __slots__ = ()

    @property
    def requires_grad(self: Tensor) -> bool:
        """A flag kept for scripts that set it; nothing computes gradients."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self: Tensor, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
        requires_grad = flag_argument(requires_grad, "requires_grad_", "requires_grad")
        if requires_grad and not self.dtype.is_floating_point:
            raise TensorError(
                f"requires_grad on {self.storage_device_tensor.name!r}: only tensors of "
                f"floating point dtype can require gradients (as in torch), not {self.dtype!r}"
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def grad(self: Tensor) -> Tensor | None:
        """A slot for a gradient tensor: None until assigned."""
        return self._grad

    @grad.setter
    def grad(self: Tensor, value: Tensor | None) -> None:
        if value is not None and not isinstance(value, TensorGradSlots):
            raise TensorError(f"assigned grad must be a Tensor or None, got {type(value).__name__}")
        if value is not None and value.shape != self.shape:
            raise TensorError(
                f"assigned grad has shape {tuple(value.shape)} but the tensor has "
                f"{tuple(self.shape)}"
            )
        self._grad = value

    @property
    def data(self: Tensor) -> Tensor:
        """The same memory as a new tensor (detached; there is no autograd)."""
        return self._view(self.geometry)

    @data.setter
    def data(self: Tensor, value: Tensor) -> None:
        if not isinstance(value, TensorGradSlots):
            raise TensorError(f"data must be set to a Tensor, got {type(value).__name__}")
        grad, flag = self._grad, self._requires_grad  # p.data = x keeps p's slots
        self._init(value.storage_device_tensor, value.geometry, value.get_device(), value.dp)
        self._grad, self._requires_grad = grad, flag

    def detach(self: Tensor) -> Tensor:
        return self._view(self.geometry)

    def detach_(self: Tensor) -> Tensor:
        return self
