"""``torch.nn.SyncBatchNorm``: batch norm over the whole batch of every rank in a group.

In training, each rank sums its inputs and their squares per channel and counts its
elements; one ``all_reduce`` of those makes the global mean and (biased) variance, which
normalise the rank's input; the running statistics take the unbiased variance of the
global batch, as torch's.  The all-reduce is a differentiable op (its backward
all-reduces the gradient of the statistics), so the backward costs one more all-reduce,
as torch's SyncBatchNorm's does, and the gradients are those of batch norm over the
concatenated batch.  In eval, outside an initialised process group, or in a group of one,
it is ``BatchNorm``.  ``convert_sync_batchnorm(module)`` swaps every batch norm in a
module, sharing its parameters and buffers.

It lives with the collectives and registers itself as ``torch.nn.SyncBatchNorm`` (the
layers sit below ``torch.distributed`` here, ADR 0013).
"""

from __future__ import annotations

from typing import Any

from kernbench.torch import nn
from kernbench.torch.autograd import Function, no_grad
from kernbench.torch.distributed.collectives import all_reduce
from kernbench.torch.distributed.constants import ReduceOp
from kernbench.torch.distributed.groups import get_world_size, is_initialized
from kernbench.torch.factories import cat, tensor
from kernbench.torch.nn.layers import BatchNormBase
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = ["SyncBatchNorm"]


class _AllReduceSums(Function):
    """Per-channel sums and sums of squares of every rank, with one ``all_reduce(SUM)`` of
    both (and the element count), as an op in the graph: its backward all-reduces their
    gradients, once."""

    @staticmethod
    def forward(ctx: Any, sums: Tensor, squares: Tensor, count: float, group: Any) -> Any:
        ctx.group = group
        ctx.channels = sums.numel()
        flat = cat([sums, squares, tensor([float(count)], dtype=sums.dtype)])
        all_reduce(flat, ReduceOp.SUM, group=group)
        c = ctx.channels
        return flat[:c].clone(), flat[c : 2 * c].clone(), flat[2 * c :].clone()

    @staticmethod
    def backward(ctx: Any, g_sums: Tensor, g_squares: Tensor, g_count: Tensor) -> Any:
        flat = cat([g_sums, g_squares])
        all_reduce(flat, ReduceOp.SUM, group=ctx.group)
        c = ctx.channels
        return flat[:c].clone(), flat[c:].clone(), None, None


class SyncBatchNorm(BatchNormBase):
    """``SyncBatchNorm(num_features, eps=1e-05, momentum=0.1, affine=True,
    track_running_stats=True, process_group=None, device=None, dtype=None)``."""

    _dims = (2, 3, 4, 5)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
        training = self.training or (self.running_mean is None and self.running_var is None)
        if not training or not is_initialized() or get_world_size(self.process_group) == 1:
            return super().forward(input)
        channels = input.shape[1]
        dims = (0, *range(2, input.ndim))
        shape = (1, channels) + (1,) * (input.ndim - 2)
        x = input.float()
        count = input.numel() // channels
        sums, squares, n = _AllReduceSums.apply(
            x.sum(dims), (x * x).sum(dims), count, self.process_group
        )
        mean = sums / n
        var = squares / n - mean * mean
        if self.track_running_stats and self.running_mean is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
                factor = self.momentum
                if factor is None:
                    factor = 1.0 / float(self.num_batches_tracked.item())
                unbiased = var.detach() * n / (n - 1)
                self.running_mean.mul_(1 - factor).add_(mean.detach() * factor)
                self.running_var.mul_(1 - factor).add_(unbiased * factor)
        out = (x - mean.reshape(shape)) * (var.reshape(shape) + self.eps).rsqrt()
        if self.weight is not None:
            out = out * self.weight.reshape(shape) + self.bias.reshape(shape)
        return out.to(input.dtype)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """``module`` with every batch norm in it (itself included) a SyncBatchNorm
        sharing its parameters and buffers, as torch's."""
        out = module
        if isinstance(module, BatchNormBase) and not isinstance(module, SyncBatchNorm):
            out = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
            )
            if module.affine:
                with no_grad():
                    out.weight = module.weight
                    out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


nn.SyncBatchNorm = SyncBatchNorm
