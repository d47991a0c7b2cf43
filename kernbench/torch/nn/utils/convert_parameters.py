"""``torch.nn.utils.parameters_to_vector`` and ``vector_to_parameters``, as torch's.

``parameters_to_vector`` is a ``view(-1)`` of each parameter and one ``cat`` (a copy
kernel), recorded, so a gradient of the vector reaches the parameters.
``vector_to_parameters`` points each parameter's ``data`` at a view of the vector's
slice (no copy: the parameters then share the vector's memory, as in torch).  Both
refuse parameters on two devices with torch's ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Iterable

import kernbench.torch as torch  # cat as wrapped for autograd
from kernbench.errors import TensorTypeError
from kernbench.torch.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_param_device(param: Tensor, old_param_device: int | None) -> int:
    """The device index all parameters share (torch's helper: two devices raise)."""
    device = param.get_device()
    if old_param_device is None:
        return device
    if device != old_param_device:
        raise TensorTypeError(
            "Found two parameters on different devices, this is currently not supported."
        )
    return old_param_device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """One 1-D tensor of every parameter's elements, in order (a ``cat`` of ``view(-1)``s)."""
    param_device = None
    flat = []
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        flat.append(param.view(-1))
    return torch.cat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Make each parameter's ``data`` the next ``numel()`` elements of ``vec``, viewed in its
    shape."""
    if not isinstance(vec, Tensor):
        raise TensorTypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    param_device = None
    pointer = 0
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        count = param.numel()
        param.data = vec[pointer : pointer + count].view_as(param).data
        pointer += count
