"""More of ``torch.optim.lr_scheduler``: ``MultiStepLR``, ``ExponentialLR``, ``ConstantLR``,
``PolynomialLR``, ``MultiplicativeLR``, ``CosineAnnealingWarmRestarts`` and ``CyclicLR``.

Each keeps torch's chainable rule in ``get_lr`` (it scales the lr the groups
hold, so schedulers compose) and, where torch has one, its closed form for
``step(epoch)``.  Host numbers only: nothing runs on the device.
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from kernbench.errors import OptimizerValueError, TensorTypeError
from kernbench.torch.optim.optimizer import Optimizer
from kernbench.torch.optim.scheduler_base import LRScheduler

__all__ = [
    "ConstantLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "ExponentialLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "PolynomialLR",
]


class MultiStepLR(LRScheduler):
    """``lr * gamma`` at each milestone (``gamma**k`` at a milestone listed k times)."""

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Iterable[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma**passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``lr * gamma`` every step."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:  # resuming must not move the lr one step ahead of itself
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """The lr times ``factor`` until step ``total_iters``, then the lr itself."""

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if factor > 1.0 or factor < 0:
            raise OptimizerValueError(
                "Constant multiplicative factor expected to be between 0 and 1."
            )
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch != self.total_iters:
            return self._lrs()
        return [lr * (1.0 / self.factor) for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        done = self.last_epoch >= self.total_iters
        return [base * (self.factor + done * (1 - self.factor)) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """``base_lr * (1 - t / total_iters) ** power`` down to 0 at ``total_iters``."""

    def __init__(
        self,
        optimizer: Optimizer,
        total_iters: int = 5,
        power: float = 1.0,
        last_epoch: int = -1,
    ) -> None:
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, total = self.last_epoch, self.total_iters
        if self._is_initial or t > total:
            return self._lrs()
        factor = ((1.0 - t / total) / (1.0 - (t - 1) / total)) ** self.power
        return [lr * factor for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        share = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (1.0 - share) ** self.power for base in self.base_lrs]


def _lambdas(optimizer: Optimizer, lr_lambda: Any) -> list[Callable[[int], float]]:
    count = len(optimizer.param_groups)
    if not isinstance(lr_lambda, list | tuple):
        return [lr_lambda] * count
    if len(lr_lambda) != count:
        raise OptimizerValueError(f"Expected {count} lr_lambdas, but got {len(lr_lambda)}")
    return list(lr_lambda)


class MultiplicativeLR(LRScheduler):
    """``lr * lr_lambda(last_epoch)`` every step (one function, or one a group)."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TensorTypeError(
                    f"lr_lambda should be a function, but got {type(fn).__name__}"
                )
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return self._lrs()
        return [
            lr * fn(self.last_epoch) for fn, lr in zip(self.lr_lambdas, self._lrs(), strict=True)
        ]

    def state_dict(self) -> dict[str, Any]:
        """As torch: the functions' own attributes for callable objects, None for plain
        functions and lambdas (which are not saved)."""
        state = super().state_dict()
        state["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
            for fn in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("lr_lambdas", [])
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for fn, attributes in zip(self.lr_lambdas, saved, strict=False):
            if attributes is not None:
                fn.__dict__.update(attributes)


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine from the base lr to ``eta_min`` over ``T_i`` steps, then a restart with
    ``T_i *= T_mult``; ``step(epoch)`` takes a fractional epoch."""

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise OptimizerValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise OptimizerValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, float | int):
            raise OptimizerValueError(
                f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}"
            )
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        cosine = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:  # type: ignore[override]
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur %= self.T_i
                self.T_i *= self.T_mult
        elif epoch < 0:
            raise OptimizerValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                restarts = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**restarts - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult**restarts
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = self._lrs()


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    count = len(optimizer.param_groups)
    if not isinstance(value, list | tuple):
        return [value] * count
    if len(value) != count:
        raise OptimizerValueError(
            f"{name} must have the same length as optimizer.param_groups. "
            f"{name} has {len(value)} values, param_groups has {count}."
        )
    return list(value)


_CYCLIC_MODES = ("triangular", "triangular2", "exp_range")


class CyclicLR(LRScheduler):
    """The cyclical lr policy: up from ``base_lr`` to ``max_lr`` in ``step_size_up`` steps and
    back in ``step_size_down``, the amplitude scaled per cycle (``triangular``,
    ``triangular2``) or per step (``exp_range``, or ``scale_fn``); momentum (or Adam's
    beta1) cycles the other way."""

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.8,
        max_momentum: float | list[float] = 0.9,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TensorTypeError(f"{type(optimizer).__name__} is not an Optimizer")
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in _CYCLIC_MODES and scale_fn is None:
            raise OptimizerValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_mode()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise OptimizerValueError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(
                    self.max_momentums, self.base_momentums, optimizer.param_groups, strict=True
                ):
                    self._set_momentum(group, high)
                    group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_mode(self) -> None:
        if self._scale_fn_custom is None:  # the built-in policies fix their scale mode
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            height = x / self.step_ratio
        else:
            height = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [
            base + (high - base) * height * scale
            for base, high in zip(self.base_lrs, self.max_lrs, strict=True)
        ]
        if self.cycle_momentum:
            for group, low, high in zip(
                self.optimizer.param_groups, self.base_momentums, self.max_momentums, strict=True
            ):
                self._set_momentum(group, high - (high - low) * height * scale)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """As torch: a custom ``scale_fn`` is kept as its attributes when it is a callable
        object, and not at all when it is a function or lambda."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        keep = fn is not None and not isinstance(fn, types.FunctionType)
        state["_scale_fn_custom"] = dict(fn.__dict__) if keep else None
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        attributes = state_dict.get("_scale_fn_custom")
        fn = self._scale_fn_custom
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_scale_fn_custom"})
        if attributes is not None and fn is not None:
            fn.__dict__.update(attributes)
        self._init_scale_mode()
