"""``torch.optim.lr_scheduler``: ``StepLR``, ``CosineAnnealingLR``, ``LambdaLR``, ``LinearLR``
and ``OneCycleLR`` with torch's (chainable) formulas, and the schedulers of
:mod:`~kernbench.torch.optim.lr_schedulers_more` and
:mod:`~kernbench.torch.optim.lr_scheduler_chains` re-exported.

A scheduler writes the learning rate into its optimizer's ``param_groups``
(host numbers; nothing runs on the device).  As torch's, constructing one
takes the first step (``last_epoch`` becomes 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kernbench.errors import OptimizerValueError
from kernbench.torch.optim.lr_scheduler_chains import (
    ChainedScheduler,
    ReduceLROnPlateau,
    SequentialLR,
)
from kernbench.torch.optim.lr_schedulers_more import (
    ConstantLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    ExponentialLR,
    MultiplicativeLR,
    MultiStepLR,
    PolynomialLR,
)
from kernbench.torch.optim.optimizer import Optimizer
from kernbench.torch.optim.scheduler_base import LRScheduler, _LRScheduler

__all__ = [
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
    "_LRScheduler",
]


class StepLR(LRScheduler):
    """``lr * gamma`` every ``step_size`` steps."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """From the base lr down to ``eta_min`` along half a cosine over ``T_max`` steps."""

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, T, low = self.last_epoch, self.T_max, self.eta_min
        if t == 0:
            return self._lrs()
        if self._step_count == 1 and t > 0:
            return [
                low + (base - low) * (1 + math.cos(t * math.pi / T)) / 2 for base in self.base_lrs
            ]
        if (t - 1 - T) % (2 * T) == 0:
            return [
                lr + (base - low) * (1 - math.cos(math.pi / T)) / 2
                for lr, base in zip(self._lrs(), self.base_lrs, strict=True)
            ]
        return [
            (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T)) * (lr - low)
            + low
            for lr in self._lrs()
        ]

    def _get_closed_form_lr(self) -> list[float]:
        t, T, low = self.last_epoch, self.T_max, self.eta_min
        return [low + (base - low) * (1 + math.cos(math.pi * t / T)) / 2 for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """``base_lr * lr_lambda(last_epoch)`` (one function, or one a group)."""

    def __init__(
        self, optimizer: Optimizer, lr_lambda: Callable | list[Callable], last_epoch: int = -1
    ) -> None:
        count = len(optimizer.param_groups)
        if not isinstance(lr_lambda, list | tuple):
            self.lr_lambdas = [lr_lambda] * count
        elif len(lr_lambda) != count:
            raise OptimizerValueError(f"Expected {count} lr_lambdas, but got {len(lr_lambda)}")
        else:
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [
            base * fn(self.last_epoch)
            for fn, base in zip(self.lr_lambdas, self.base_lrs, strict=True)
        ]


class LinearLR(LRScheduler):
    """The lr times a factor going linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` steps."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise OptimizerValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or "
                "equal to 1."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise OptimizerValueError(
                "Ending multiplicative factor expected to be between 0 and 1."
            )
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, start, end = self.last_epoch, self.start_factor, self.end_factor
        if t == 0:
            return [lr * start for lr in self._lrs()]
        if t > self.total_iters:
            return self._lrs()
        factor = 1.0 + (end - start) / (self.total_iters * start + (t - 1) * (end - start))
        return [lr * factor for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        t, start, end = self.last_epoch, self.start_factor, self.end_factor
        share = min(self.total_iters, t) / self.total_iters
        return [base * (start + (end - start) * share) for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy: up from ``max_lr / div_factor`` to ``max_lr``, then down to
    ``initial_lr / final_div_factor``, with the momentum (or Adam's beta1) cycled the other
    way, as torch's."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise OptimizerValueError(
                    "You must define either total_steps OR (epochs AND steps_per_epoch)"
                )
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise OptimizerValueError(
                f"Expected positive integer total_steps, but got {total_steps}"
            )
        if not 0 <= pct_start <= 1:
            raise OptimizerValueError(
                f"Expected float between 0 and 1 pct_start, but got {pct_start}"
            )
        if anneal_strategy not in ("cos", "linear"):
            raise OptimizerValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self.total_steps, self.cycle_momentum = total_steps, cycle_momentum
        self._anneal = _cosine if anneal_strategy == "cos" else _linear
        up = pct_start * total_steps - 1
        lr_up, lr_down = ("initial_lr", "max_lr"), ("max_lr", "initial_lr")
        m_down, m_up = ("max_momentum", "base_momentum"), ("base_momentum", "max_momentum")
        # (end step, start lr, end lr, start momentum, end momentum) of each phase
        if three_phase:
            self._phases = [
                (up, *lr_up, *m_down),
                (2 * pct_start * total_steps - 2, *lr_down, *m_up),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [(up, *lr_up, *m_down), (total_steps - 1, "max_lr", "min_lr", *m_up)]
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, list | tuple) else [max_lr] * len(groups)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, groups, strict=True):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise OptimizerValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for group in groups:
                    self._set_momentum(group, max_momentum)
                    group["max_momentum"], group["base_momentum"] = max_momentum, base_momentum
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self) -> list[float]:
        t = self.last_epoch
        if t > self.total_steps:
            raise OptimizerValueError(
                f"Tried to step {t} times. The specified number of total steps is "
                f"{self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if t <= end or i == len(self._phases) - 1:
                    pct = (t - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return lrs


def _cosine(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _linear(start: float, end: float, pct: float) -> float:
    return (end - start) * pct + start
