"""``torch.optim.RMSprop``, ``Adagrad``, ``Adadelta``, ``Adamax``, ``NAdam``, ``RAdam``,
``Rprop`` and ``ASGD``:
torch's single-tensor (for-loop) update formulas, run as in-place device ops on each
parameter whose ``grad`` is set.

As for :mod:`~kernbench.torch.optim.optimizers`, each op is a kernel, so a step
costs what torch's for-loop implementation launches.  The per-parameter
``step`` (and NAdam's ``mu_product``) is a Python float: torch keeps a CPU
tensor, and there is no host tensor here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kernbench.errors import OptimizerValueError
from kernbench.torch.autograd import no_grad
from kernbench.torch.factories import full_like, zeros_like
from kernbench.torch.functions import maximum
from kernbench.torch.logic import where
from kernbench.torch.optim.optimizer import Optimizer, parameters_with_grads
from kernbench.torch.tensor import Tensor

__all__ = ["ASGD", "Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop"]


def _at_least_zero(**values: float) -> None:
    """torch's ``Invalid <name> value: <value>`` checks (learning rate and epsilon named as
    torch names them)."""
    names = {"lr": "learning rate: {}", "eps": "epsilon value: {}"}
    for key, value in values.items():
        if not 0.0 <= value:
            raise OptimizerValueError("Invalid " + names.get(key, key + " value: {}").format(value))


def _check_betas(betas: tuple[float, float]) -> None:
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise OptimizerValueError(f"Invalid beta parameter at index {i}: {betas[i]}")


def _gradient(param: Tensor, group: dict[str, Any]) -> Tensor:
    """The gradient the update follows: negated for ``maximize``, plus ``weight_decay * p``
    unless the optimizer decays the parameter itself."""
    grad = param.grad if not group.get("maximize", False) else -param.grad
    decay = group.get("weight_decay", 0)  # Rprop has none
    if decay != 0:
        if group.get("decoupled_weight_decay", False):
            param.mul_(1 - group["lr"] * decay)
        else:
            grad = grad.add(param, alpha=decay)
    return grad


class RMSprop(Optimizer):
    """``p -= lr * g / (sqrt(E[g^2]) + eps)``, with torch's ``centered`` (minus ``E[g]^2``),
    ``momentum`` buffer, ``weight_decay`` and ``maximize``."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _at_least_zero(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "capturable": capturable,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _state(self, param: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state[param]
        if not state:
            state["step"] = 0.0
            state["square_avg"] = zeros_like(param)
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(param)
            if group["centered"]:
                state["grad_avg"] = zeros_like(param)
        return state

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
            for param in parameters_with_grads(group):
                state = self._state(param, group)
                state["step"] += 1
                grad = _gradient(param, group)
                square_avg = state["square_avg"]
                square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                if group["centered"]:
                    grad_avg = state["grad_avg"]
                    grad_avg.lerp_(grad, 1 - alpha)
                    avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).addcdiv_(grad, avg)
                    param.add_(buf, alpha=-lr)
                else:
                    param.addcdiv_(grad, avg, value=-lr)
        return loss


class Adagrad(Optimizer):
    """``p -= clr * g / (sqrt(sum g^2) + eps)`` with ``clr = lr / (1 + (step - 1) * lr_decay)``;
    the ``sum`` starts at ``initial_accumulator_value`` for every parameter, as torch's."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _at_least_zero(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:  # torch fills the state here, not on the first step
            for param in group["params"]:
                state = self.state[param]
                state["step"] = 0.0
                state["sum"] = full_like(param, group["initial_accumulator_value"])

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            for param in parameters_with_grads(group):
                state = self.state[param]
                state["step"] += 1
                grad = _gradient(param, group)
                clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
                state["sum"].addcmul_(grad, grad, value=1)
                std = state["sum"].sqrt().add_(group["eps"])
                param.addcdiv_(grad, std, value=-clr)
        return loss


class Adadelta(Optimizer):
    """``delta = sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) * g``; ``p -= lr * delta``."""

    def __init__(
        self,
        params: Any,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _at_least_zero(lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise OptimizerValueError(f"Invalid rho value: {rho}")
        _at_least_zero(eps=eps, weight_decay=weight_decay)
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            rho, eps = group["rho"], group["eps"]
            for param in parameters_with_grads(group):
                state = self.state[param]
                if not state:
                    state["step"] = 0.0
                    state["square_avg"] = zeros_like(param)
                    state["acc_delta"] = zeros_like(param)
                state["step"] += 1
                grad = _gradient(param, group)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_()
                delta.div_(std).mul_(grad)
                acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                param.add_(delta, alpha=-group["lr"])
        return loss


class Adamax(Optimizer):
    """Adam with the infinity norm: ``u = max(beta2 * u, |g| + eps)``;
    ``p -= lr / (1 - beta1**t) * m / u``."""

    def __init__(
        self,
        params: Any,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _at_least_zero(lr=lr, eps=eps)
        _check_betas(betas)
        _at_least_zero(weight_decay=weight_decay)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            (beta1, beta2), eps = group["betas"], group["eps"]
            for param in parameters_with_grads(group):
                state = self.state[param]
                if not state:
                    state["step"] = 0.0
                    state["exp_avg"] = zeros_like(param)
                    state["exp_inf"] = zeros_like(param)
                state["step"] += 1
                grad = _gradient(param, group)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                exp_avg.lerp_(grad, 1 - beta1)
                maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
                step_size = group["lr"] / (1 - beta1 ** state["step"])
                param.addcdiv_(exp_avg, exp_inf, value=-step_size)
        return loss


def _adam_moments(state: dict[str, Any], grad: Tensor, betas: Any) -> None:
    beta1, beta2 = betas
    state["exp_avg"].lerp_(grad, 1 - beta1)
    state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)


class NAdam(Optimizer):
    """Adam with Nesterov momentum and torch's momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))``; ``decoupled_weight_decay``
    decays the parameter as AdamW does."""

    def __init__(
        self,
        params: Any,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _at_least_zero(lr=lr, eps=eps)
        _check_betas(betas)
        _at_least_zero(weight_decay=weight_decay, momentum_decay=momentum_decay)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), decay = group["lr"], group["betas"], group["momentum_decay"]
            for param in parameters_with_grads(group):
                state = self.state[param]
                if not state:
                    state["step"] = 0.0
                    state["mu_product"] = 1.0
                    state["exp_avg"] = zeros_like(param)
                    state["exp_avg_sq"] = zeros_like(param)
                state["step"] += 1
                step = state["step"]
                correction2 = 1 - beta2**step
                grad = _gradient(param, group)
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
                state["mu_product"] *= mu
                mu_product = state["mu_product"]
                _adam_moments(state, grad, group["betas"])
                denom = state["exp_avg_sq"].div(correction2).sqrt().add_(group["eps"])
                param.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
                param.addcdiv_(
                    state["exp_avg"], denom, value=-lr * mu_next / (1.0 - mu_product * mu_next)
                )
        return loss


class RAdam(Optimizer):
    """Adam with the variance rectification: plain bias-corrected momentum while the
    approximated SMA length ``rho_t`` is at most 5, the rectified Adam step after."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _at_least_zero(lr=lr, eps=eps)
        _check_betas(betas)
        _at_least_zero(weight_decay=weight_decay)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            rho_inf = 2 / (1 - beta2) - 1
            for param in parameters_with_grads(group):
                state = self.state[param]
                if not state:
                    state["step"] = 0.0
                    state["exp_avg"] = zeros_like(param)
                    state["exp_avg_sq"] = zeros_like(param)
                state["step"] += 1
                step = state["step"]
                grad = _gradient(param, group)
                _adam_moments(state, grad, group["betas"])
                correction1, correction2 = 1 - beta1**step, 1 - beta2**step
                corrected_avg = state["exp_avg"] / correction1
                rho_t = rho_inf - 2 * step * beta2**step / correction2
                if rho_t > 5.0:
                    numerator = (rho_t - 4) * (rho_t - 2) * rho_inf
                    rect = math.sqrt(numerator / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                    root = state["exp_avg_sq"].sqrt().add_(group["eps"])
                    adaptive = math.sqrt(correction2) / root
                    param.add_(corrected_avg * lr * adaptive * rect, alpha=-1.0)
                else:
                    param.add_(corrected_avg * lr, alpha=-1.0)
        return loss


class Rprop(Optimizer):
    """``Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable,
    foreach, maximize, differentiable)``, as torch's: a per-element step size grown by
    ``etaplus`` while the gradient's sign holds and shrunk by ``etaminus`` when it flips (that
    element then does not move); each element moves by its step against its sign."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _at_least_zero(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise OptimizerValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {
            "lr": lr,
            "etas": etas,
            "step_sizes": step_sizes,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            low, high = group["step_sizes"]
            for param in parameters_with_grads(group):
                state = self.state[param]
                if not state:
                    state["step"] = 0.0
                    state["prev"] = zeros_like(param)
                    state["step_size"] = full_like(param.grad, group["lr"])
                state["step"] += 1
                grad = _gradient(param, group)
                sign = grad.mul(state["prev"]).sign()
                factor = where(sign > 0, etaplus, where(sign < 0, etaminus, 1.0)).to(grad.dtype)
                state["step_size"].mul_(factor).clamp_(low, high)
                kept = where(sign < 0, 0.0, grad).to(grad.dtype)  # a flipped sign: no move
                param.addcmul_(kept.sign(), state["step_size"], value=-1)
                state["prev"].copy_(kept)
        return loss


class ASGD(Optimizer):
    """``ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach,
    maximize, differentiable, capturable)``, as torch's: SGD with the step ``eta = lr / (1 +
    lambd * lr * step) ** alpha``, the parameter shrunk by ``1 - lambd * eta``, and ``ax``
    averaging the iterates after ``t0`` steps (``eta`` and ``mu`` Python floats)."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _at_least_zero(lr=lr, weight_decay=weight_decay)
        defaults = {
            "lr": lr,
            "lambd": lambd,
            "alpha": alpha,
            "t0": t0,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
            for param in parameters_with_grads(group):
                state = self.state[param]
                if not state:
                    state["step"] = 0.0
                    state["eta"] = float(lr)
                    state["mu"] = 1.0
                    state["ax"] = zeros_like(param)
                state["step"] += 1
                grad = _gradient(param, group)
                eta = state["eta"]
                param.mul_(1 - lambd * eta)
                param.add_(grad, alpha=-eta)
                if state["mu"] != 1:
                    state["ax"].add_(param.sub(state["ax"]).mul_(state["mu"]))
                else:
                    state["ax"].copy_(param)
                state["eta"] = lr / ((1 + lambd * lr * state["step"]) ** alpha)
                state["mu"] = 1 / max(1, state["step"] - t0)
        return loss
