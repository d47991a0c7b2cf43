"""``ColwiseParallel`` and ``RowwiseParallel`` with torch's default layouts, and the
styles refused here.

``ColwiseParallel`` shards an ``nn.Linear``'s weight by rows (its output features) and its
bias alike, or an ``nn.Embedding``'s weight by columns; it takes a replicated input and
leaves its output sharded on the last dimension, and the gradient of a linear layer's
input is all-reduced in backward.  ``RowwiseParallel`` shards an ``nn.Linear``'s weight by
columns (its input features), keeps its bias whole and adds it once after the partial
outputs are all-reduced; it takes an input sharded on the last dimension (what a
``ColwiseParallel`` layer gives).  An ``nn.Embedding`` under ``RowwiseParallel`` is
sharded by rows (the vocabulary) and takes replicated indices (``input_layouts=
Replicate()``, as torch's plans write it); each rank looks up the indices it holds and the
partial rows are all-reduced.
"""

from __future__ import annotations

import types
from typing import Any

from kernbench.errors import DistributedError, UnsupportedNameError
from kernbench.torch.distributed.collectives import broadcast, scatter
from kernbench.torch.distributed.tensor.parallel.comm import (
    CopyToTensorParallel,
    LocalShard,
    ReduceFromTensorParallel,
)
from kernbench.torch.distributed.tensor.placement_types import Placement, Replicate, Shard
from kernbench.torch.factories import empty
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.layers import Embedding, Linear
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = [
    "ColwiseParallel",
    "ParallelStyle",
    "PrepareModuleInput",
    "PrepareModuleOutput",
    "RowwiseParallel",
    "SequenceParallel",
]

_NO_DTENSOR = "there is no DTensor here (ADR 0023)"


class ParallelStyle:
    """What ``parallelize_module`` applies to a module (torch's ``ParallelStyle``)."""

    src_data_rank: int | None = 0

    def _apply(self, module: Module, device_mesh: Any) -> Module:
        raise NotImplementedError


def _refuse(call: str, instead: str) -> UnsupportedNameError:
    return UnsupportedNameError(f"{call} is not supported in KernBench: {instead}")


def _check_layout(style: str, argument: str, given: Any, default: Placement) -> None:
    """Only torch's default layout runs here: any other needs DTensor's redistribution."""
    if given is None or given == default:
        return
    raise _refuse(
        f"{style}({argument}={given!r})",
        f"only the default {argument}={default!r} is; {_NO_DTENSOR} to redistribute to "
        "other layouts: leave the argument out, or write the collectives yourself "
        "(benches/tp_mlp.py)",
    )


def _check_local_output(style: str, use_local_output: bool) -> None:
    if not use_local_output:
        raise _refuse(
            f"{style}(use_local_output=False)",
            f"the output would be a DTensor and {_NO_DTENSOR}: outputs are local tensors "
            "(use_local_output=True, the default)",
        )


def _group(device_mesh: Any) -> Any:
    return device_mesh.get_group()


def _shard(
    module: Module, name: str, placement: Placement, device_mesh: Any, src_data_rank: int | None
) -> None:
    """Replace ``module.<name>`` by this rank's piece of it, taken from the mesh rank
    ``src_data_rank`` (scattered or broadcast, as torch's ``distribute_tensor``), or from
    the rank's own values when it is ``None``."""
    full = getattr(module, name)
    if full is None:
        return
    group, world = _group(device_mesh), device_mesh.size()
    me = device_mesh.get_local_rank()
    data = full.detach()
    if isinstance(placement, Shard):
        size = data.shape[placement.dim]
        if size % world:
            raise DistributedError(
                f"{type(module).__name__}.{name} of shape {tuple(data.shape)}: dimension "
                f"{placement.dim} ({size}) must divide over the {world} ranks of the mesh to "
                "be sharded here (torch pads uneven shards; KernBench does not)"
            )
        pieces = [p.contiguous() for p in data.chunk(world, placement.dim)]
        local = empty(pieces[0].shape, dtype=data.dtype, device=data.device)
        if src_data_rank is None:
            local.copy_(pieces[me])
        else:
            src = int(device_mesh.mesh.reshape(-1)[src_data_rank])
            scatter(local, pieces if me == src_data_rank else None, src=src, group=group)
    else:
        local = data.clone()
        if src_data_rank is not None:
            src = int(device_mesh.mesh.reshape(-1)[src_data_rank])
            broadcast(local, src=src, group=group)
    module.register_parameter(name, LocalShard(local, placement, device_mesh, group))


def _check_module(style: str, module: Module) -> None:
    if not isinstance(module, Linear | Embedding):
        raise DistributedError(
            f"{style} currently only support nn.Linear and nn.Embedding! (got "
            f"{type(module).__name__}, as torch refuses it)"
        )
    if isinstance(getattr(module, "weight", None), LocalShard):
        raise DistributedError(
            f"{type(module).__name__} is already sharded by a tensor-parallel style; "
            "parallelize each module once"
        )


class ColwiseParallel(ParallelStyle):
    """``ColwiseParallel(*, input_layouts=None, output_layouts=None, use_local_output=True)``
    with the default layouts: replicated input, output sharded on the last dimension."""

    def __init__(
        self,
        *,
        input_layouts: Placement | None = None,
        output_layouts: Placement | None = None,
        use_local_output: bool = True,
    ) -> None:
        _check_layout("ColwiseParallel", "input_layouts", input_layouts, Replicate())
        _check_layout("ColwiseParallel", "output_layouts", output_layouts, Shard(-1))
        _check_local_output("ColwiseParallel", use_local_output)
        self.input_layouts = (Replicate(),)
        self.output_layouts = (Shard(-1),)
        self.desired_input_layouts = (Replicate(),)
        self.use_local_output = use_local_output

    def _apply(self, module: Module, device_mesh: Any) -> Module:
        _check_module("ColwiseParallel", module)
        group = _group(device_mesh)
        if isinstance(module, Linear):
            for name in ("weight", "bias"):
                _shard(module, name, Shard(0), device_mesh, self.src_data_rank)

            def copy_to_ranks(_module: Module, inputs: tuple) -> tuple:
                first, *rest = inputs
                if isinstance(first, Tensor):
                    first = CopyToTensorParallel.apply(first, group)
                return (first, *rest)

            module.register_forward_pre_hook(copy_to_ranks)
        else:  # the indices need no gradient: nothing to reduce in backward
            _shard(module, "weight", Shard(1), device_mesh, self.src_data_rank)
        return module

    def __repr__(self) -> str:
        return "ColwiseParallel()"


def _rowwise_linear_forward(module: Linear, group: Any, input: Tensor) -> Tensor:  # noqa: A002
    local = module.weight.shape[1]
    if isinstance(input, Tensor) and input.ndim and input.shape[-1] != local:
        raise DistributedError(
            f"RowwiseParallel Linear takes its input sharded on the last dimension: this "
            f"rank's {local} of the {local * module.weight.device_mesh.size()} input features, "
            f"got an input of shape {tuple(input.shape)} (a ColwiseParallel layer's output is "
            "such a shard; a whole input would need DTensor's redistribution)"
        )
    out = ReduceFromTensorParallel.apply(F.linear(input, module.weight), group)
    return out if module.bias is None else out + module.bias


def _rowwise_embedding_forward(
    module: Embedding,
    group: Any,
    start: int,
    rows: int,
    input: Tensor,  # noqa: A002
) -> Tensor:
    """Rows ``start .. start + rows`` of the table are here: other indices look up row 0
    and are zeroed, as Megatron's vocabulary-parallel embedding masks them."""
    local = input - start
    index = local.clamp(0, rows - 1)
    held = 1 - (index - local).abs().clamp(max=1)  # 1 where the index is held here, else 0
    picked = F.embedding(index, module.weight)
    partial = picked * held.unsqueeze(-1).to(picked.dtype)
    return ReduceFromTensorParallel.apply(partial, group)


class RowwiseParallel(ParallelStyle):
    """``RowwiseParallel(*, input_layouts=None, output_layouts=None, use_local_output=True)``
    with the default layouts: input sharded on the last dimension, replicated output."""

    def __init__(
        self,
        *,
        input_layouts: Placement | None = None,
        output_layouts: Placement | None = None,
        use_local_output: bool = True,
    ) -> None:
        self._given_input = input_layouts
        if input_layouts is not None and input_layouts not in (Shard(-1), Replicate()):
            _check_layout("RowwiseParallel", "input_layouts", input_layouts, Shard(-1))
        _check_layout("RowwiseParallel", "output_layouts", output_layouts, Replicate())
        _check_local_output("RowwiseParallel", use_local_output)
        self.input_layouts = (input_layouts or Shard(-1),)
        self.output_layouts = (Replicate(),)
        self.use_local_output = use_local_output

    def _apply(self, module: Module, device_mesh: Any) -> Module:
        _check_module("RowwiseParallel", module)
        group = _group(device_mesh)
        if isinstance(module, Linear):
            _check_layout("RowwiseParallel", "input_layouts", self._given_input, Shard(-1))
            _shard(module, "weight", Shard(1), device_mesh, self.src_data_rank)
            _shard(module, "bias", Replicate(), device_mesh, self.src_data_rank)
            forward = types.MethodType(
                lambda m, input: _rowwise_linear_forward(m, group, input),  # noqa: A006
                module,
            )
        else:
            if self._given_input != Replicate():
                raise _refuse(
                    "RowwiseParallel() of an nn.Embedding with the default input_layouts=Shard(-1)",
                    "torch would all-gather the indices first; pass input_layouts=Replicate() "
                    "(every rank holds all the indices), as torch's own plans do",
                )
            _shard(module, "weight", Shard(0), device_mesh, self.src_data_rank)
            rows = module.weight.shape[0]
            start = device_mesh.get_local_rank() * rows
            forward = types.MethodType(
                lambda m, input: _rowwise_embedding_forward(m, group, start, rows, input),  # noqa: A006
                module,
            )
        self.desired_input_layouts = (Shard(-1) if isinstance(module, Linear) else Replicate(),)
        object.__setattr__(module, "forward", forward)
        return module

    def __repr__(self) -> str:
        return "RowwiseParallel()"


class _Refused(ParallelStyle):
    """A style torch has whose layouts need DTensor: constructing it raises."""

    _instead = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise _refuse(f"torch.distributed.tensor.parallel.{type(self).__name__}", self._instead)


class SequenceParallel(_Refused):
    _instead = (
        f"its inputs and outputs are sharded on the sequence dimension and {_NO_DTENSOR}: "
        "keep the norms and dropouts replicated (leave them out of the plan), or shard the "
        "sequence yourself with reduce_scatter_tensor/all_gather_into_tensor "
        "(benches/tp_mlp.py --mode rs_ag)"
    )


class PrepareModuleInput(_Refused):
    _instead = (
        f"{_NO_DTENSOR} to redistribute inputs: pass each module the local tensor its style "
        "takes (ColwiseParallel: the whole input; RowwiseParallel: the last-dim shard)"
    )


class PrepareModuleOutput(_Refused):
    _instead = (
        f"{_NO_DTENSOR} to redistribute outputs: ColwiseParallel gives the last-dim shard, "
        "RowwiseParallel the whole (all-reduced) output"
    )
