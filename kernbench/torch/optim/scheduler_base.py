"""``torch.optim.lr_scheduler.LRScheduler``, the base every scheduler builds on.

It lives apart from :mod:`~kernbench.torch.optim.lr_scheduler` so that the
modules holding the other schedulers can subclass it while that module
re-exports them all (modules of a package import one another one way only).
``_initial_step`` and ``_update_lr`` are torch's protocol between schedulers:
``SequentialLR`` restarts the scheduler it hands over to through them.  ``_LRScheduler``
is torch's old name of the base, kept for the custom schedulers that subclass it.
"""

from __future__ import annotations

import warnings
from typing import Any

from kernbench.errors import TensorTypeError
from kernbench.torch.optim.optimizer import Optimizer

__all__ = ["LRScheduler", "_LRScheduler"]


class LRScheduler:
    """Base class: ``step()`` moves ``last_epoch`` on and sets each group's ``lr`` to
    ``get_lr()``."""

    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TensorTypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming an optimizer"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """The step a constructor takes (``last_epoch`` -1 -> 0), with ``_is_initial`` set."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        self._step_count += 1
        if epoch is not None:
            warnings.warn(
                "The epoch parameter in `scheduler.step()` was not necessary and is being "
                "deprecated where possible. Please use `scheduler.step()` to step the scheduler.",
                UserWarning,
                stacklevel=2,
            )
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        """Move to ``epoch`` (the next one if None; the closed form, where there is one, for
        a given epoch) and write the lrs into the optimizer's groups."""
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def _lrs(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]


class _LRScheduler(LRScheduler):
    """torch's old name of :class:`LRScheduler`, which custom schedulers still subclass
    (``class Warmup(torch.optim.lr_scheduler._LRScheduler)``)."""
