"""Megatron's conjugate operators as autograd ``Function``s, and the local shards the
tensor-parallel styles leave as parameters.

``CopyToTensorParallel`` (Megatron's *f*) is the identity in forward and all-reduces the
gradient in backward: a replicated input feeding a column-sharded layer gets a partial
gradient from each rank.  ``ReduceFromTensorParallel`` (*g*) all-reduces in forward and
is the identity in backward: a row-sharded layer's partial outputs are summed into the
replicated output, whose gradient every rank already holds whole.
"""

from __future__ import annotations

import copy
from typing import Any

from kernbench.torch.autograd import Function, no_grad
from kernbench.torch.distributed.collectives import all_gather, all_reduce
from kernbench.torch.distributed.constants import ReduceOp
from kernbench.torch.distributed.groups import get_world_size
from kernbench.torch.distributed.tensor.placement_types import Placement, Replicate, Shard
from kernbench.torch.factories import cat, empty_like
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.tensor import Tensor

__all__ = ["CopyToTensorParallel", "LocalShard", "ReduceFromTensorParallel"]


class CopyToTensorParallel(Function):
    """Forward: the input as it is; backward: the gradient all-reduced over ``group``."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, group: Any) -> Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        summed = grad.contiguous().clone()  # the engine may hand the same gradient elsewhere
        all_reduce(summed, ReduceOp.SUM, group=ctx.group)
        return summed, None


class ReduceFromTensorParallel(Function):
    """Forward: the partial input all-reduced over ``group`` (in place: it is the fresh
    output of the layer's matmul); backward: the gradient as it is."""

    @staticmethod
    def forward(ctx: Any, partial: Tensor, group: Any) -> Tensor:
        ctx.mark_dirty(partial)
        all_reduce(partial, ReduceOp.SUM, group=group)
        return partial

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return grad, None


class LocalShard(Parameter):
    """A parameter a tensor-parallel style sharded: this rank's piece, a plain tensor of the
    local shape (torch's would be a DTensor of the global shape).  ``to_local()`` is the
    tensor itself; ``full_tensor()`` all-gathers the pieces (not differentiable here);
    ``placements`` and ``device_mesh`` say how it was laid out."""

    def __init__(self, data: Tensor, placement: Placement, device_mesh: Any, group: Any) -> None:
        super().__init__(data, True)
        self.placements = (placement,)
        self.device_mesh = device_mesh
        self._group = group

    def to_local(self) -> Tensor:
        return self

    def full_tensor(self) -> Tensor:
        """The whole parameter on every rank: one ``all_gather`` of the pieces for a sharded
        one, a copy for a replicated one."""
        placement = self.placements[0]
        with no_grad():
            if isinstance(placement, Replicate):
                return self.detach().clone()
            assert isinstance(placement, Shard)
            local = self.detach().contiguous()
            pieces = [empty_like(local) for _ in range(get_world_size(self._group))]
            all_gather(pieces, local, group=self._group)
            return cat(pieces, dim=placement.dim)

    def __deepcopy__(self, memo: dict) -> LocalShard:
        """A copy on the device that is still a shard of the same layout, with its grad."""
        out = LocalShard(self.detach().clone(), self.placements[0], self.device_mesh, self._group)
        out.requires_grad_(self.requires_grad)
        memo[id(self)] = out
        if self.grad is not None:
            out.grad = copy.deepcopy(self.grad, memo)
        return out

    def __repr__(self) -> str:
        return f"LocalShard({self.placements[0]!r}) containing:\n" + Tensor.__repr__(self)
