"""``torch.optim.Adafactor``: torch's single-tensor (for-loop) Adafactor, run as device ops
on each parameter whose ``grad`` is set.

A parameter of two or more dims keeps the second moment factored over its last two dims:
``row_var`` (the mean of ``g * g`` over the last dim, shape ``(..., m, 1)``) and
``col_var`` (over the dim before it, ``(..., 1, n)``), their product divided by the mean of
``row_var`` standing for the full estimate.  A vector (or a 0-d tensor) keeps a full
``variance``.  ``beta2_t = 1 - step**beta2_decay``, ``rho_t = min(lr, 1/sqrt(step))``,
``alpha = max(eps2, RMS(param)) * rho_t`` and the update is divided by
``max(1, RMS(update) / d)``; weight decay is decoupled (``param *= 1 - lr *
weight_decay``), and ``eps1=None`` is ``torch.finfo(dtype).eps`` of the group's first
parameter with a gradient, as torch resolves it.

torch reads ``RMS(param)`` and ``RMS(update)`` to the host with ``.item()``; here each is a
norm on the device read back through the fabric, one transfer each, so a step costs what
torch's does.  In timing-only mode the reads cost the same time and return no values:
``RMS(param)`` counts as 0 (``alpha = eps2 * rho_t``) and the update is not clipped.
``step`` is a Python float, as for the other optimizers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import OptimizerValueError
from kernbench.torch.autograd import no_grad
from kernbench.torch.factories import zeros, zeros_like
from kernbench.torch.optim.line_search import host_scalar
from kernbench.torch.optim.optimizer import Optimizer, parameters_with_grads
from kernbench.torch.tensor import Tensor
from kernbench.torch.type_info import finfo

__all__ = ["Adafactor"]


def _root_mean_square(t: Tensor, d: float = 1.0) -> float | None:
    """``t.norm(2).item() / (sqrt(t.numel()) * d)``, in torch's order of operations (None
    in timing-only mode)."""
    norm = host_scalar(t.norm(2))
    return None if norm is None else norm / ((t.numel() ** 0.5) * d)


class Adafactor(Optimizer):
    """``Adafactor(params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
    weight_decay=0.0, *, foreach=None, maximize=False)``, as torch's."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if not 0.0 <= lr:
            raise OptimizerValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise OptimizerValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise OptimizerValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise OptimizerValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise OptimizerValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise OptimizerValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {
            "lr": lr,
            "beta2_decay": beta2_decay,
            "eps": eps,
            "d": d,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _state(self, param: Tensor) -> dict[str, Any]:
        state = self.state[param]
        if not state:
            grad = param.grad
            state["step"] = 0.0
            if grad.ndim > 1:
                shape = tuple(grad.shape)
                state["row_var"] = zeros((*shape[:-1], 1), dtype=grad.dtype, device=grad.device)
                state["col_var"] = zeros(
                    (*shape[:-2], 1, shape[-1]), dtype=grad.dtype, device=grad.device
                )
            else:
                state["variance"] = zeros_like(grad)
        return state

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, d, decay = group["lr"], group["d"], group["weight_decay"]
            eps1, eps2 = group["eps"]
            for param in parameters_with_grads(group):
                state = self._state(param)
                grad = param.grad if not group["maximize"] else -param.grad
                if eps1 is None:  # torch: the first parameter's dtype, kept for the group
                    eps1 = finfo(param.dtype).eps
                state["step"] += 1
                step = state["step"]
                one_minus_beta2 = step ** group["beta2_decay"]
                rho = min(lr, 1 / (step**0.5))
                param_rms = _root_mean_square(param)
                alpha = max(eps2, 0.0 if param_rms is None else param_rms) * rho
                if decay != 0:
                    param.mul_(1 - lr * decay)
                if grad.ndim > 1:
                    row_var, col_var = state["row_var"], state["col_var"]
                    row_mean = grad.norm(2, dim=-1, keepdim=True).square_()
                    row_var.lerp_(row_mean.div_(grad.shape[-1]), one_minus_beta2)
                    col_mean = grad.norm(2, dim=-2, keepdim=True).square_()
                    col_var.lerp_(col_mean.div_(grad.shape[-2]), one_minus_beta2)
                    estimate = row_var @ col_var
                    estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
                else:
                    variance = state["variance"]
                    variance.lerp_(grad * grad, one_minus_beta2)
                    estimate = variance.clone()
                update = estimate.clamp_(min=eps1 * eps1).rsqrt_().mul_(grad)
                update_rms = _root_mean_square(update, d)
                clip = 1.0 if update_rms is None else max(1.0, update_rms)
                param.add_(update, alpha=-alpha / clip)
        return loss
