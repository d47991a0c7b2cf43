"""``torch.nn.utils.spectral_norm`` and ``remove_spectral_norm``: torch's hook-based
spectral normalisation.

The weight becomes the parameter ``weight_orig`` and the buffers ``weight_u`` and
``weight_v`` (unit vectors drawn from the rank's generator); a forward pre-hook sets
the plain attribute ``weight`` to ``weight_orig / sigma`` before each forward, where
``sigma = u . (W v)`` for ``W`` the weight as a matrix (``dim`` first).  In training
mode the hook first runs ``n_power_iterations`` steps of the power method on the
buffers, in place and with recording off (``v = normalize(W^T u)``, then
``u = normalize(W v)``, as torch's); in eval mode it uses them as they are.  Every step
is a few recorded tensor ops (``mv``, ``normalize``, ``dot``, a division) costing
their kernels' time; gradients reach ``weight_orig`` through ``W / sigma``.
"""

from __future__ import annotations

from typing import Any

import kernbench.torch as torch  # no_grad and mv, as the facade wraps them
from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.conv_transpose_layers import (
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from kernbench.torch.nn.module import Module, forward_pre_hooks
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.tensor import Tensor

__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]


def default_dim(module: Module) -> int:
    """The output-channel dim: 1 for the transposed convolutions, 0 otherwise (torch's)."""
    return 1 if isinstance(module, ConvTranspose1d | ConvTranspose2d | ConvTranspose3d) else 0


def weight_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` with ``dim`` first, as a matrix of that many rows."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.dim()) if d != dim))
    return weight.reshape(weight.shape[0], -1)


class SpectralNorm:
    """The forward pre-hook that recomputes ``module.<name>`` as ``<name>_orig / sigma``."""

    def __init__(
        self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        if n_power_iterations <= 0:
            raise TensorValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = weight_matrix(weight, self.dim)
        if do_power_iteration:
            with torch.no_grad():
                for _ in range(self.n_power_iterations):
                    v = F.normalize(torch.mv(weight_mat.t(), u), dim=0, eps=self.eps, out=v)
                    u = F.normalize(torch.mv(weight_mat, v), dim=0, eps=self.eps, out=u)
                u, v = u.clone(), v.clone()
        sigma = u.dot(torch.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with torch.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))

    @staticmethod
    def apply(
        module: Module, name: str, n_power_iterations: int, dim: int, eps: float
    ) -> SpectralNorm:
        for hook in forward_pre_hooks(module).values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise TensorError(
                    f"Cannot register two spectral_norm hooks on the same parameter {name}"
                )
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = dict(module.named_parameters(recurse=False)).get(name)
        if weight is None:
            raise TensorValueError(
                f"`SpectralNorm` cannot be applied as parameter `{name}` is None"
            )
        with torch.no_grad():
            rows, cols = weight_matrix(weight, dim).shape
            u = F.normalize(weight.new_empty(rows).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(cols).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.data)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Divide ``module.<name>`` by its spectral norm, estimated by power iteration, before
    every forward."""
    SpectralNorm.apply(
        module, name, n_power_iterations, default_dim(module) if dim is None else dim, eps
    )
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Make ``module.<name>`` a Parameter again, holding the last normalised weight."""
    hooks = forward_pre_hooks(module)
    for key, hook in hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del hooks[key]
            return module
    raise TensorValueError(f"spectral_norm of '{name}' not found in {module}")
