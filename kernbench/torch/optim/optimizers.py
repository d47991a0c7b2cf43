"""``torch.optim.SGD``, ``Adam`` and ``AdamW``: torch's single-tensor (for-loop) update
formulas, run as in-place device ops on each parameter whose ``grad`` is set.

Each op is a kernel, so a step costs what torch's for-loop implementation
launches (not its fused or foreach forms): SGD one ``add_`` (and the momentum
``mul_``/``add_``), Adam a ``lerp_``, ``mul_``/``addcmul_``, ``sqrt``, a
division, ``add_`` and ``addcdiv_`` per parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kernbench.errors import OptimizerValueError
from kernbench.torch.autograd import no_grad
from kernbench.torch.factories import zeros_like
from kernbench.torch.functions import maximum
from kernbench.torch.optim.optimizer import Optimizer, parameters_with_grads
from kernbench.torch.tensor import Tensor

__all__ = ["SGD", "Adam", "AdamW"]


def _non_negative(value: Any, message: str) -> None:
    if not 0.0 <= value:
        raise OptimizerValueError(message.format(value))


class SGD(Optimizer):
    """``p -= lr * g`` with torch's momentum, dampening, Nesterov, weight decay and maximize."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _non_negative(lr, "Invalid learning rate: {}")
        _non_negative(momentum, "Invalid momentum value: {}")
        _non_negative(weight_decay, "Invalid weight_decay value: {}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise OptimizerValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            dampening, decay = group["dampening"], group["weight_decay"]
            for param in parameters_with_grads(group):
                grad = param.grad if not group["maximize"] else -param.grad
                if decay != 0:
                    grad = grad.add(param, alpha=decay)
                if momentum != 0:
                    state = self.state[param]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = state["momentum_buffer"] = grad.clone().detach()
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
                param.add_(grad, alpha=-lr)
        return loss


class Adam(Optimizer):
    """torch's Adam: bias-corrected moments, ``amsgrad``, ``maximize``; ``weight_decay`` adds
    ``decay * p`` to the gradient (AdamW decays the parameter instead)."""

    _decoupled = False

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _non_negative(lr, "Invalid learning rate: {}")
        _non_negative(eps, "Invalid epsilon value: {}")
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise OptimizerValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
        _non_negative(weight_decay, "Invalid weight_decay value: {}")
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)

    def _state(self, param: Tensor, amsgrad: bool) -> dict[str, Any]:
        state = self.state[param]
        if not state:
            state["step"] = 0.0
            state["exp_avg"] = zeros_like(param)
            state["exp_avg_sq"] = zeros_like(param)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(param)
        return state

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            eps, decay, amsgrad = group["eps"], group["weight_decay"], group["amsgrad"]
            for param in parameters_with_grads(group):
                state = self._state(param, amsgrad)
                grad = param.grad if not group["maximize"] else -param.grad
                state["step"] += 1
                step = state["step"]
                if decay != 0:
                    if self._decoupled:
                        param.mul_(1 - lr * decay)
                    else:
                        grad = grad.add(param, alpha=decay)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = lr / (1 - beta1**step)
                correction2_sqrt = math.sqrt(1 - beta2**step)
                if amsgrad:
                    maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
                    second = state["max_exp_avg_sq"]
                else:
                    second = exp_avg_sq
                denom = (second.sqrt() / correction2_sqrt).add_(eps)
                param.addcdiv_(exp_avg, denom, value=-step_size)
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay``; default 1e-2)."""

    _decoupled = True

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
        )
