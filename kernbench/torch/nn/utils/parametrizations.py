"""``torch.nn.utils.parametrizations``: ``weight_norm`` and ``spectral_norm`` as
parametrizations (:mod:`~kernbench.torch.nn.utils.parametrize`), as torch's.

``weight_norm`` registers ``_WeightNorm`` unsafely (its ``right_inverse`` returns two
tensors): ``parametrizations.weight.original0`` is the magnitude ``g`` (the norm over
every dim but ``dim``), ``original1`` the direction ``v``, and reading ``weight``
computes ``g * v / ||v||``; ``load_state_dict`` takes the older API's ``weight_g`` and
``weight_v`` keys for them, as torch's.  ``spectral_norm`` registers ``_SpectralNorm``, which keeps
the unit vectors ``_u`` and ``_v`` as buffers (``parametrizations.weight.0._u``), drawn
from the rank's generator and refined by 15 power-iteration steps on registration;
reading ``weight`` in training mode runs ``n_power_iterations`` more steps on them in
place, with recording off (``u = normalize(W v)``, then ``v = normalize(W^T u)``), and
returns ``weight / (u . W v)``; in eval mode the buffers are left alone.  A 1-D weight
is just normalised.  All of it is recorded tensor ops, costing their kernels' time.
"""

from __future__ import annotations

import kernbench.torch as torch  # no_grad and mv, as the facade wraps them
from kernbench.errors import TensorIndexError, TensorValueError
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.utils.parametrize import register_parametrization
from kernbench.torch.nn.utils.spectral_norm import default_dim, weight_matrix
from kernbench.torch.nn.utils.weight_norm import norm_except_dim, weight_norm_from
from kernbench.torch.tensor import Tensor

__all__ = ["spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_norm_from(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


class _SpectralNorm(Module):
    def __init__(
        self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise TensorIndexError(
                f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] "
                f"but got {dim})"
            )
        if n_power_iterations <= 0:
            raise TensorValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with torch.no_grad():
                weight_mat = weight_matrix(weight, self.dim)
                rows, cols = weight_mat.shape
                u = weight_mat.new_empty(rows).normal_(0, 1)
                v = weight_mat.new_empty(cols).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
                self._power_method(weight_mat, 15)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        with torch.no_grad():
            for _ in range(n_power_iterations):
                F.normalize(torch.mv(weight_mat, self._v), dim=0, eps=self.eps, out=self._u)
                F.normalize(torch.mv(weight_mat.t(), self._u), dim=0, eps=self.eps, out=self._v)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.dim() == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = weight_matrix(weight, self.dim)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = u.dot(torch.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Parametrize ``module.<name>`` as ``g * v / ||v||`` (``original0`` = g, ``original1``
    = v; ``dim=None``: one norm for the whole tensor)."""
    register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def load_old_keys(
        module: Module, state_dict: dict, prefix: str, *args: object
    ) -> None:  # torch's _weight_norm_compat_hook
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module.register_load_state_dict_pre_hook(load_old_keys)
    return module


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Parametrize ``module.<name>`` as itself divided by its spectral norm, estimated by
    power iteration (``dim`` defaults to 1 for transposed convolutions, else 0)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise TensorValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = default_dim(module)
    register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
