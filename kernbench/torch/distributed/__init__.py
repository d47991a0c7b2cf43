"""``torch.distributed`` for simulated ranks: same names, arguments and defaults.

Import it as ``import kernbench.torch.distributed as dist``.  Collectives run
as programs on the PEs that hold the ranks' tensors, over IPCQ, and cost
simulated time; ``async_op=True`` returns a :class:`Work`.

The package face only re-exports: process groups are in
:mod:`~kernbench.torch.distributed.groups`, collectives in
:mod:`~kernbench.torch.distributed.collectives` and
:mod:`~kernbench.torch.distributed.all_to_all`, object collectives in
:mod:`~kernbench.torch.distributed.objects`, point-to-point in
:mod:`~kernbench.torch.distributed.p2p`, device meshes in
:mod:`~kernbench.torch.distributed.device_mesh`, and the checks every call
shares in :mod:`~kernbench.torch.distributed.arguments`; ``ZeroRedundancyOptimizer`` is in
:mod:`~kernbench.torch.distributed.optim`, ``FullyShardedDataParallel`` in
:mod:`~kernbench.torch.distributed.fsdp`, tensor parallelism (``parallelize_module``) in
:mod:`~kernbench.torch.distributed.tensor.parallel`.
"""

from __future__ import annotations

from typing import Any

from kernbench.distributed.world import ProcessGroup, Work
from kernbench.errors import unsupported_name
from kernbench.kernels.ranks import DistributedState, set_rank_provider
from kernbench.torch.distributed import (
    _tensor,  # noqa: F401 - torch's older path of .tensor
    data_parallel,  # noqa: F401 - registers torch.nn.parallel (DistributedDataParallel)
    fsdp,  # noqa: F401 - torch.distributed.fsdp (FullyShardedDataParallel)
    ipcq_install,  # noqa: F401 - registers install_ipcq
    optim,  # noqa: F401 - torch.distributed.optim (ZeroRedundancyOptimizer)
    sync_batch_norm,  # noqa: F401 - registers torch.nn.SyncBatchNorm
    tensor,  # noqa: F401 - torch.distributed.tensor (.parallel: parallelize_module)
)
from kernbench.torch.distributed.all_to_all import all_to_all, all_to_all_single
from kernbench.torch.distributed.collectives import (
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    gather,
    monitored_barrier,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
)
from kernbench.torch.distributed.constants import Backend, GroupMember, ReduceOp, group, reduce_op
from kernbench.torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from kernbench.torch.distributed.groups import (
    destroy_process_group,
    get_backend,
    get_default_backend_for_device,
    get_global_rank,
    get_group_rank,
    get_node_local_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_backend_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    is_ucc_available,
    is_xccl_available,
    new_group,
    new_subgroups,
    new_subgroups_by_enumeration,
)
from kernbench.torch.distributed.objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from kernbench.torch.distributed.p2p import (
    P2POp,
    batch_isend_irecv,
    irecv,
    isend,
    recv,
    send,
)

__all__ = [
    "Backend",
    "DeviceMesh",
    "GroupMember",
    "group",
    "P2POp",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
    "batch_isend_irecv",
    "broadcast",
    "broadcast_object_list",
    "destroy_process_group",
    "gather",
    "gather_object",
    "get_backend",
    "get_default_backend_for_device",
    "get_node_local_rank",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "init_device_mesh",
    "init_process_group",
    "irecv",
    "is_available",
    "is_backend_available",
    "is_gloo_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "is_torchelastic_launched",
    "is_ucc_available",
    "is_xccl_available",
    "isend",
    "new_group",
    "new_subgroups",
    "new_subgroups_by_enumeration",
    "recv",
    "recv_object_list",
    "reduce",
    "reduce_op",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "send_object_list",
]


def _compile_ranks() -> DistributedState:
    """The process group as compile_and_load sees it (the kernel layer asks, never imports)."""
    if not is_initialized():
        return DistributedState(False)
    return DistributedState(True, get_rank(), get_world_size(), barrier)


set_rank_provider(_compile_ranks)

_HINTS = {
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor per tensor",
    "all_reduce_coalesced": "all_reduce per tensor (async_op=True lets them queue)",
    # The libraries built on torch.distributed: here their collectives are written out.
    "pipelining": "there is no pipeline runtime: pass activations with isend/irecv or "
    "batch_isend_irecv, as benches/pipeline_parallel.py does (GPipe and 1F1B)",
    "DTensor": "there is no DTensor: torch.distributed.tensor.parallel.parallelize_module "
    "(ColwiseParallel, RowwiseParallel) shards modules into plain local tensors; or shard "
    "tensors yourself and call the collectives, as benches/tp_mlp.py does",
    "checkpoint": "there is no distributed checkpoint (DCP) here: save each rank's part with "
    "torch.save(model.state_dict(), f'ckpt_rank{rank}.pt'), or gather a full state dict "
    "(FSDP's FULL_STATE_DICT) and save it from rank 0",
    "_composable": "FSDP2's fully_shard is not here: wrap the model in "
    "torch.distributed.fsdp.FullyShardedDataParallel (auto_wrap_policy for the blocks)",
    "algorithms": "there are no DDP communication hooks (DDP all-reduces each gradient): "
    "call the collectives "
    "on your gradient buckets, as benches/dp_training_step.py does",
}


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.torch.distributed", "dist", name, __all__, _HINTS)
