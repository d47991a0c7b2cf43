"""``torch.nn.utils.weight_norm`` and ``remove_weight_norm``: torch's hook-based weight
normalisation, deprecated in torch for :func:`~kernbench.torch.nn.utils.parametrizations.
weight_norm` (and warning so here, with torch's ``FutureWarning``).

The weight ``w`` becomes two parameters, ``weight_g`` (its norm over every dim but
``dim``, kept as size-1 dims) and ``weight_v`` (its direction, the old values), and a
forward pre-hook sets the plain attribute ``weight`` to ``g * v / ||v||`` before each
forward.  ``norm_except_dim`` and ``weight_norm_from`` are torch's ``norm_except_dim``
and ``_weight_norm``, composed of recorded tensor ops (a norm, a division and a
multiply), so gradients reach ``g`` and ``v`` and they cost those kernels' time.
"""

from __future__ import annotations

import warnings
from typing import Any

from kernbench.errors import TensorError, TensorIndexError, TensorValueError, user_stacklevel
from kernbench.torch.nn.module import Module, forward_pre_hooks
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.tensor import Tensor

__all__ = ["WeightNorm", "norm_except_dim", "remove_weight_norm", "weight_norm", "weight_norm_from"]


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002
    """``v``'s ``pow``-norm over every dim but ``dim``, with those dims kept as size 1;
    ``dim=-1`` is the norm of the whole tensor (a 0-d tensor), as torch's."""
    if dim == -1:
        return v.norm(pow)
    ndim = v.dim()
    if not -ndim <= dim < ndim:
        raise TensorIndexError(
            f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
            f"but got {dim})"
        )
    dim %= ndim
    others = tuple(d for d in range(ndim) if d != dim)
    return v.norm(pow, others, keepdim=True) if others else v.abs()


def weight_norm_from(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """torch's ``_weight_norm(v, g, dim)``: ``v * (g / norm_except_dim(v, 2, dim))``."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and
    ``<name>_v``."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return weight_norm_from(v, g, self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        warnings.warn(
            "`torch.nn.utils.weight_norm` is deprecated in favor of "
            "`torch.nn.utils.parametrizations.weight_norm`.",
            FutureWarning,
            stacklevel=user_stacklevel(),
        )
        for hook in forward_pre_hooks(module).values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise TensorError(
                    f"Cannot register two weight_norm hooks on the same parameter {name}"
                )
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if not isinstance(weight, Parameter) or name not in dict(
            module.named_parameters(recurse=False)
        ):
            raise TensorValueError(
                f"weight_norm: {type(module).__name__}.{name} is not a parameter of the module"
            )
        delattr(module, name)
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        delattr(module, self.name + "_g")
        delattr(module, self.name + "_v")
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Replace ``module.<name>`` by ``<name>_g`` and ``<name>_v``, recomputed into ``<name>``
    before every forward (``dim=None``: one norm for the whole tensor)."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Make ``module.<name>`` a Parameter again, holding ``g * v / ||v||``."""
    hooks = forward_pre_hooks(module)
    for key, hook in hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del hooks[key]
            return module
    raise TensorValueError(f"weight_norm of '{name}' not found in {module}")
