"""``torch.optim.Rprop`` and ``torch.optim.ASGD``: torch's single-tensor update formulas as
in-place device ops on each parameter whose ``grad`` is set.

Rprop adapts a per-element step size from the signs of successive gradients (grown by
``etaplus`` while the sign holds, shrunk by ``etaminus`` when it flips, and that
element's update skipped) and moves each element by its step size against the sign of
its gradient.  ASGD is SGD with a decaying step ``eta = lr / (1 + lambd * lr * step) **
alpha``, a shrinking of the parameter by ``1 - lambd * eta``, and a running average ``ax``
of the iterates that starts after ``t0`` steps.  As the other optimizers here, ``step``,
``eta`` and ``mu`` are Python floats (torch keeps CPU tensors; there is no host tensor).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import OptimizerValueError
from kernbench.torch.autograd import no_grad
from kernbench.torch.factories import full_like, zeros_like
from kernbench.torch.logic import where
from kernbench.torch.optim.optimizer import Optimizer, parameters_with_grads

__all__ = ["ASGD", "Rprop"]


class Rprop(Optimizer):
    """``Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable,
    foreach, maximize, differentiable)``, as torch's."""

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
        if not 0.0 <= lr:
            raise OptimizerValueError(f"Invalid learning rate: {lr}")
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
                grad = param.grad if not group["maximize"] else -param.grad
                sign = grad.mul(state["prev"]).sign()
                factor = where(sign > 0, etaplus, where(sign < 0, etaminus, 1.0)).to(grad.dtype)
                state["step_size"].mul_(factor).clamp_(low, high)
                kept = where(sign < 0, 0.0, grad).to(grad.dtype)  # a flipped sign: no move
                param.addcmul_(kept.sign(), state["step_size"], value=-1)
                state["prev"].copy_(kept)
        return loss


class ASGD(Optimizer):
    """``ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach,
    maximize, differentiable, capturable)``, as torch's."""

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
        if not 0.0 <= lr:
            raise OptimizerValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise OptimizerValueError(f"Invalid weight_decay value: {weight_decay}")
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
                grad = param.grad if not group["maximize"] else -param.grad
                if group["weight_decay"] != 0:
                    grad = grad.add(param, alpha=group["weight_decay"])
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
