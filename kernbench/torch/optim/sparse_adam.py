"""``torch.optim.SparseAdam``: torch's arguments, defaults and checks; its step refuses
every gradient here, as torch refuses a dense one (ADR 0034).

torch's SparseAdam updates only the entries a sparse gradient holds (the rows an
``nn.Embedding(sparse=True)`` looked up) and raises ``RuntimeError`` for a dense gradient.
kernbench holds sparse tensors dense (ADR 0029): ``is_sparse`` is False for every tensor,
and ``nn.Embedding(sparse=True)`` gives its weight a dense gradient that does not say which
rows were looked up.  So every gradient here is a dense one and ``step()`` raises torch's
error for it, with what to use instead.  torch's refusal of sparse or complex parameters
cannot arise (there are neither).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import OptimizerStateError, OptimizerValueError
from kernbench.torch.autograd import no_grad
from kernbench.torch.optim.optimizer import Optimizer, parameters_with_grads

__all__ = ["SparseAdam"]

DENSE_GRADIENTS = (
    "SparseAdam does not support dense gradients, please consider Adam instead (kernbench "
    "holds sparse tensors dense, ADR 0029, so every gradient is a dense one, "
    "nn.Embedding(sparse=True)'s too; ADR 0034)"
)


class SparseAdam(Optimizer):
    """``SparseAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False)``, as
    torch's; ``step()`` raises torch's dense-gradient error for the first parameter with a
    gradient (see the module docstring)."""

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        maximize: bool = False,
    ) -> None:
        if not 0.0 < lr:
            raise OptimizerValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise OptimizerValueError(f"Invalid epsilon value: {eps}")
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise OptimizerValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)

    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            if parameters_with_grads(group):  # torch checks each gradient before any state
                raise OptimizerStateError(DENSE_GRADIENTS)
        return loss
