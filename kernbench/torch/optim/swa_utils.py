"""``torch.optim.swa_utils``: stochastic weight averaging and exponential moving averages.

``AveragedModel(model)`` holds a deep copy of ``model`` whose parameters
``update_parameters(model)`` averages with the model's: the running mean by default
(``p += (q - p) / (n + 1)``), or ``avg_fn``/``multi_avg_fn`` (``get_ema_multi_avg_fn
(decay)`` gives the EMA ``p = lerp(p, q, 1 - decay)``); the first call copies.  Buffers
follow the model's (``use_buffers=True`` averages them too).  ``n_averaged`` is an
``int64`` buffer, as torch's.  ``update_bn(loader, model)`` recomputes BatchNorm's
running statistics as a cumulative average over one pass (``momentum=None``), and
``SWALR`` anneals each group's lr to ``swa_lr`` (``cos`` or ``linear``) over
``anneal_epochs`` steps with torch's formula.  Every update is an in-place device op on
the averaged tensors, under ``no_grad``, so it costs device time.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

from kernbench.errors import TensorTypeError, TensorValueError
from kernbench.torch.autograd import no_grad
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.factories import tensor
from kernbench.torch.nn.layers import BatchNorm1d, BatchNorm2d, BatchNorm3d
from kernbench.torch.nn.module import Module
from kernbench.torch.optim.optimizer import Optimizer
from kernbench.torch.optim.scheduler_base import LRScheduler
from kernbench.torch.tensor import Tensor

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]

AvgFn = Callable[[Tensor, Tensor, Any], Tensor]
MultiAvgFn = Callable[[list[Tensor], list[Tensor], Any], None]


def get_ema_multi_avg_fn(decay: float = 0.999) -> MultiAvgFn:
    """``p = lerp(p, q, 1 - decay)`` for each pair, in place."""

    def ema_update(averaged: list[Tensor], current: list[Tensor], _: Any) -> None:
        with no_grad():
            for p, q in zip(averaged, current, strict=True):
                if p.dtype.is_floating_point:
                    p.lerp_(q, 1 - decay)
                else:
                    p.copy_(p * decay + q * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> MultiAvgFn:
    """``p += (q - p) / (n + 1)`` for each pair, in place (the running mean)."""

    def swa_update(averaged: list[Tensor], current: list[Tensor], num_averaged: Any) -> None:
        n = num_averaged.item() if isinstance(num_averaged, Tensor) else num_averaged
        with no_grad():
            for p, q in zip(averaged, current, strict=True):
                if p.dtype.is_floating_point:
                    p.lerp_(q, 1 / (n + 1))
                else:  # integer buffers (num_batches_tracked): the mean cast back
                    p.copy_(p + (q - p) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> AvgFn:
    """``decay * p + (1 - decay) * q``."""

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> AvgFn:
    """``p + (q - p) / (n + 1)``."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """``AveragedModel(model, device=None, avg_fn=None, multi_avg_fn=None,
    use_buffers=False)``: a copy of ``model`` that averages its parameters."""

    def __init__(
        self,
        model: Module,
        device: Any = None,
        avg_fn: AvgFn | None = None,
        multi_avg_fn: MultiAvgFn | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(model, Module):
            raise TensorTypeError(
                f"AveragedModel: model must be an nn.Module, got {type(model).__name__}"
            )
        if avg_fn is not None and multi_avg_fn is not None:
            raise TensorValueError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=DTYPE_OBJECTS["int64"]))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def _tensors(self, model: Module) -> Iterable[Tensor]:
        if self.use_buffers:
            return itertools.chain(model.parameters(), model.buffers())
        return model.parameters()

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s parameters (and buffers, with ``use_buffers``) into the copy."""
        averaged = [p.detach() for p in self._tensors(self.module)]
        current = [p.detach() for p in self._tensors(model)]
        if len(averaged) != len(current):
            raise TensorValueError(
                f"AveragedModel.update_parameters: the model has {len(current)} tensors to "
                f"average, the averaged copy {len(averaged)}"
            )
        n = self.n_averaged.item()
        with no_grad():
            if n == 0:
                for p, q in zip(averaged, current, strict=True):
                    p.copy_(q)
            elif self.avg_fn is not None:
                for p, q in zip(averaged, current, strict=True):
                    p.copy_(self.avg_fn(p, q, self.n_averaged))
            else:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(averaged, current, self.n_averaged)
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers(), strict=False):
                    b_avg.detach().copy_(b_model.detach())
            self.n_averaged.add_(1)


def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute every BatchNorm's running statistics over one pass of ``loader``."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, BatchNorm1d | BatchNorm2d | BatchNorm3d):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, list | tuple):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """``SWALR(optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos")``: each group's
    lr annealed from its value to ``swa_lr`` over ``anneal_epochs`` steps, then held."""

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: Any,
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        groups = optimizer.param_groups if isinstance(optimizer, Optimizer) else []
        swa_lrs = list(swa_lr) if isinstance(swa_lr, list | tuple) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise TensorValueError(
                f"swa_lr must have the same length as optimizer.param_groups: swa_lr has "
                f"{len(swa_lrs)}, optimizer.param_groups has {len(groups)}"
            )
        for lr, group in zip(swa_lrs, groups, strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise TensorValueError(
                f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise TensorValueError(
                f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}"
            )
        self.anneal_func = _cosine_anneal if anneal_strategy == "cos" else _linear_anneal
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        groups = self.optimizer.param_groups
        prev_lrs = [_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        pairs = zip(groups, prev_lrs, strict=True)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in pairs]

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in super().state_dict().items() if k != "anneal_func"}


def _linear_anneal(t: float) -> float:
    return t


def _cosine_anneal(t: float) -> float:
    return (1 - math.cos(math.pi * t)) / 2


def _initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
    if alpha == 1:
        return swa_lr
    return (lr - alpha * swa_lr) / (1 - alpha)
