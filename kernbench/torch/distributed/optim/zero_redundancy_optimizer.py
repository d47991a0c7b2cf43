"""``torch.distributed.optim.ZeroRedundancyOptimizer``: each rank keeps the optimizer state of
its own share of the parameters only (ZeRO stage 1), as torch's.

The parameters are partitioned as torch's ``_partition_parameters`` does it: group by group,
largest first (a stable sort by ``numel``), each to the rank with the smallest total so far
(the lowest such rank on a tie; the totals carry over from one group to the next).  Each
rank builds ``optimizer_class`` over its own partition, so its state (Adam's moments, SGD's
momentum) exists for those parameters only.  ``step()`` steps that local optimizer and then
brings every rank's updated parameters to all ranks: one ``broadcast`` per parameter from
the rank that owns it, all started asynchronously and then waited for, in torch's order;
with ``parameters_as_bucket_view=True`` each rank's parameters are views into one flat
bucket and there is one broadcast per rank.  The broadcasts run on the PEs and cost
simulated time like any collective.

``consolidate_state_dict(to)`` sends each rank's local state dict to rank ``to`` with
``broadcast_object_list`` (torch broadcasts the pickled bytes from each rank in turn);
``state_dict()`` then works on that rank only, and gives torch's global-index form.  The
consolidated state stays on the ``to`` rank's device (torch moves it to the CPU; there is
no host tensor here).

``overlap_with_ddp=True`` (it needs DDP communication hooks) and ``join_hook`` (it needs
``torch.distributed.algorithms.join``) are refused with what to do instead.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from itertools import chain
from typing import Any

from kernbench.errors import DistributedError, DistributedValueError, TensorTypeError
from kernbench.torch.autograd import no_grad
from kernbench.torch.distributed.collectives import broadcast
from kernbench.torch.distributed.groups import get_global_rank, get_rank, get_world_size
from kernbench.torch.distributed.objects import broadcast_object_list
from kernbench.torch.factories import empty, zeros
from kernbench.torch.optim.optimizer import Optimizer
from kernbench.torch.tensor import Tensor

__all__ = ["ZeroRedundancyOptimizer"]

_NAME = "ZeroRedundancyOptimizer"


class ZeroRedundancyOptimizer(Optimizer):
    """``ZeroRedundancyOptimizer(params, optimizer_class, process_group=None,
    parameters_as_bucket_view=False, overlap_with_ddp=False, **defaults)``: ``defaults`` go
    to ``optimizer_class``; call every method on every rank of the group, as torch says."""

    def __init__(
        self,
        params: Any,
        optimizer_class: type[Optimizer],
        process_group: Any = None,
        parameters_as_bucket_view: bool = False,
        overlap_with_ddp: bool = False,
        **defaults: Any,
    ) -> None:
        if overlap_with_ddp:
            raise DistributedError(
                f"{_NAME}(overlap_with_ddp=True): overlapping the step with DDP's gradient "
                "reduction needs DDP communication hooks (ddp_zero_hook), which are not "
                "modelled; leave overlap_with_ddp=False and call step() after backward()"
            )
        groups = self._verify_and_init_params(params)
        self._verify_same_dense_param_type()
        # Optimizer.__init__ calls add_param_group, which repartitions only once initialized.
        self.initialized = False
        super().__init__(groups, defaults)
        self._partition_cache: list[list[dict[str, Any]]] = []
        self._param_to_rank_cache: dict[int, int] = {}
        self._param_to_index_cache: dict[int, int] = {}
        self._is_trainable_mask = self._get_is_trainable_mask()
        self._default_device = self._all_params[0].device
        self.process_group = process_group
        self.world_size: int = get_world_size(process_group)
        self.rank: int = get_rank(process_group)
        self.global_rank: int = (
            self.rank if process_group is None else get_global_rank(process_group, self.rank)
        )
        self._overlap_with_ddp = False
        self._optim_defaults = defaults
        self._optim_constructor = optimizer_class
        self._init_local_optimizer()
        self.parameters_as_bucket_view = parameters_as_bucket_view
        self._buckets: list[list[Tensor]] = []
        self._build_param_buckets()
        self._all_state_dicts: list[dict[str, Any]] = []
        self.initialized = True

    # -- arguments ------------------------------------------------------------------------
    def _verify_and_init_params(self, params: Any) -> list[Any]:
        """Torch's checks: an iterable of tensors or of dicts, not empty."""
        if isinstance(params, Tensor):
            raise TensorTypeError(
                f"`params` argument should be an iterable of Tensors, but got {params.type()}"
            )
        try:
            all_params = list(params)
        except TypeError as exc:
            raise TensorTypeError(
                "`params` argument should be an iterable of Tensors or dicts, but got "
                f"{type(params).__name__}"
            ) from exc
        if not all_params:
            raise DistributedValueError("ZeroRedundancyOptimizer got an empty parameter list")
        all_tensors = all(isinstance(p, Tensor) for p in all_params)
        all_dicts = all(isinstance(p, dict) for p in all_params)
        if not all_tensors and not all_dicts:
            raise TensorTypeError("`params` argument should be an iterable of Tensors or dicts")
        if all_tensors:
            self._all_params: list[Tensor] = all_params
        else:
            self._all_params = []
            for group in all_params:
                if "params" not in group:
                    raise DistributedValueError(
                        "Each parameter group passed-in via `params` must have a 'params' key "
                        "mapping to the parameters in the group"
                    )
                group_params = group["params"]
                if isinstance(group_params, Tensor):
                    group_params = [group_params]
                self._all_params.extend(group_params)
        return all_params

    def _verify_same_dense_param_type(self) -> None:
        typename = self._all_params[0].type()
        for param in self._all_params[1:]:
            other = param.type()
            if other != typename:
                raise DistributedValueError(
                    "ZeroRedundancyOptimizer only supports using the same dense type for all "
                    f"parameters but got both {typename} and {other}"
                )

    def _get_is_trainable_mask(self) -> list[bool]:
        return [p.requires_grad for p in self._all_params]

    # -- the partition --------------------------------------------------------------------
    def _partition_parameters(self) -> list[list[dict[str, Any]]]:
        """Per rank, its parameter groups: each group's parameters sorted largest first
        (stable), each to the rank with the smallest total so far, the totals carried
        across groups (torch's sorted-greedy rule)."""
        if not self._partition_cache:
            self._partition_cache = [[] for _ in range(self.world_size)]
            sizes = [0] * self.world_size
            for group in self.param_groups:
                per_rank: list[list[Tensor]] = [[] for _ in range(self.world_size)]
                for param in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
                    rank = sizes.index(min(sizes))
                    per_rank[rank].append(param)
                    sizes[rank] += param.numel()
                for rank, params in enumerate(per_rank):
                    rank_group = copy.copy(group)
                    rank_group["params"] = params
                    self._partition_cache[rank].append(rank_group)
        return self._partition_cache

    def _param_to_rank(self, param: Tensor) -> int:
        if not self._param_to_rank_cache:
            for rank, groups in enumerate(self._partition_parameters()):
                for group in groups:
                    for p in group["params"]:
                        self._param_to_rank_cache[id(p)] = rank
        return self._param_to_rank_cache[id(param)]

    def _index_to_param(self) -> list[Tensor]:
        return list(chain.from_iterable(g["params"] for g in self.param_groups))

    def _param_to_index(self, param: Tensor) -> int:
        if not self._param_to_index_cache:
            self._param_to_index_cache = {id(p): i for i, p in enumerate(self._index_to_param())}
        return self._param_to_index_cache[id(param)]

    def _clear_cache(self) -> None:
        self._partition_cache = []
        self._param_to_rank_cache = {}
        self._param_to_index_cache = {}

    def _init_local_optimizer(self) -> None:
        """This rank's ``optimizer_class`` over its partition (groups given as dicts, so a
        rank with no parameters still gets one, as torch's)."""
        self.optim = self._optim_constructor(
            self._partition_parameters()[self.rank], **self._optim_defaults
        )
        _sync_param_groups(self.optim.param_groups, self.param_groups)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group and repartition; the earlier groups keep their ranks, so the local
        optimizer only gains this rank's share of the new group.  Call it on every rank."""
        super().add_param_group(param_group)
        if self.initialized:
            self._clear_cache()
            groups = self._partition_parameters()[self.rank]
            if len(groups) == len(self.optim.param_groups) + 1:
                self.optim.add_param_group(groups[-1])
            if self.parameters_as_bucket_view:
                self._build_param_buckets()

    # -- buckets --------------------------------------------------------------------------
    def _build_param_buckets(self) -> None:
        """With ``parameters_as_bucket_view``: per device and rank, one flat bucket holding
        that rank's trainable parameters, which become views into it (torch's layout)."""
        if not self.parameters_as_bucket_view:
            return
        per_device: dict[Any, list[list[Tensor]]] = {}
        for rank, groups in enumerate(self._partition_parameters()):
            for group in groups:
                for param in group["params"]:
                    lists = per_device.setdefault(
                        param.device, [[] for _ in range(self.world_size)]
                    )
                    lists[rank].append(param)
        self._buckets = []
        with no_grad():
            for device, params_per_rank in per_device.items():
                buckets = []
                for params in params_per_rank:
                    trainable = [p for p in params if p.requires_grad]
                    for p in params:
                        if not p.requires_grad:  # out of any bucket it was in
                            p.data = p.data.detach().clone()
                    size = sum(p.numel() for p in trainable)
                    if size == 0:
                        buckets.append(zeros(1, device=device))
                        continue
                    bucket = empty(size, dtype=params[0].dtype, device=device)
                    offset = 0
                    for p in trainable:
                        view = bucket[offset : offset + p.numel()]
                        view.copy_(p.data.flatten())
                        p.data = view.view_as(p.data)
                        offset += p.numel()
                    buckets.append(bucket)
                self._buckets.append(buckets)

    # -- the step -------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None, **kwargs: Any) -> Any:
        """Step the local optimizer on this rank's partition, then broadcast every rank's
        parameters from it to all ranks."""
        loss = self._local_step(closure, **kwargs)
        self._sync_params()
        return loss

    def _local_step(self, closure: Callable[[], Any] | None, **kwargs: Any) -> Any:
        mask = self._get_is_trainable_mask()
        if mask != self._is_trainable_mask:  # torch rebuilds the buckets (and warns)
            self._build_param_buckets()
            self._is_trainable_mask = mask
        _sync_param_groups(self.param_groups, self.optim.param_groups)
        if closure is None:
            loss = self.optim.step(**kwargs)
        else:
            loss = self.optim.step(closure=closure, **kwargs)
        _sync_param_groups(self.optim.param_groups, self.param_groups)
        return loss

    def _sync_params(self) -> None:
        """Every rank's shard to every rank: all broadcasts started, then waited for."""
        handles = []
        for rank in range(self.world_size):
            if self.parameters_as_bucket_view:
                tensors = [buckets[rank] for buckets in self._buckets]
            else:
                groups = self._partition_parameters()[rank]
                tensors = [p for group in groups for p in group["params"]]
            with no_grad():  # as DDP's broadcasts: parameters are leaves that need grad
                for tensor in tensors:
                    handles.append(
                        broadcast(tensor, group=self.process_group, group_src=rank, async_op=True)
                    )
        for handle in handles:
            if handle is not None:
                handle.wait()

    # -- state dicts ----------------------------------------------------------------------
    def consolidate_state_dict(self, to: int = 0) -> None:
        """Every rank's local state dict to group rank ``to`` (call it on every rank)."""
        _sync_param_groups(self.param_groups, self.optim.param_groups)
        self._all_state_dicts = []
        for rank in range(self.world_size):
            if rank == to:
                if self.rank == to:  # its own: a snapshot, as torch's copy to the CPU
                    self._all_state_dicts.append(_cloned(self.optim.state_dict()))
                continue
            carried = [self.optim.state_dict() if rank == self.rank else None]
            broadcast_object_list(carried, group=self.process_group, group_src=rank)
            if self.rank == to:
                self._all_state_dicts.append(carried[0])

    def state_dict(self) -> dict[str, Any]:
        """The global state (torch's indices over all groups) last consolidated on this
        rank."""
        if not self._all_state_dicts:
            raise DistributedError(
                "Optimizer state has not been consolidated on this rank. Please call "
                f"`consolidate_state_dict(to={self.rank})` on all ranks beforehand if you "
                "meant to save the global state."
            )
        state_dict = super().state_dict()
        partition = self._partition_parameters()
        for rank, local in enumerate(self._all_state_dicts):
            for local_group, global_group in zip(
                local["param_groups"], partition[rank], strict=True
            ):
                for local_index, param in zip(
                    local_group["params"], global_group["params"], strict=True
                ):
                    if local_index in local["state"]:
                        index = self._param_to_index(param)
                        state_dict["state"][index] = local["state"][local_index]
        state_dict["state"] = dict(sorted(state_dict["state"].items()))
        return state_dict

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the hyper-parameters of every group, and the state of this rank's own
        parameters only (into its local optimizer)."""
        super().load_state_dict({"state": {}, "param_groups": state_dict["param_groups"]})
        self._param_to_index_cache = {}
        by_param = {}
        index_to_param = self._index_to_param()
        for index, value in state_dict["state"].items():
            if not 0 <= index < len(index_to_param):
                raise DistributedError(
                    f"{_NAME}.load_state_dict: state for parameter {index} has no parameter "
                    f"({len(index_to_param)} parameters)"
                )
            param = index_to_param[index]
            if self._param_to_rank(param) == self.rank:
                by_param[id(param)] = value
        local = self.optim.state_dict()
        local_params = chain.from_iterable(g["params"] for g in self.optim.param_groups)
        local_state = {}
        for local_index, param in enumerate(local_params):
            if id(param) in by_param:
                local_state[local_index] = by_param[id(param)]
        _sync_param_groups(self.param_groups, local["param_groups"])
        self.optim.load_state_dict({"state": local_state, "param_groups": local["param_groups"]})

    # -- what is not modelled -------------------------------------------------------------
    def join_hook(self, **kwargs: Any) -> Any:
        raise DistributedError(
            f"{_NAME}.join_hook: there is no torch.distributed.algorithms.join (training on "
            "uneven inputs); give every rank the same number of steps"
        )


def _sync_param_groups(src: list[dict[str, Any]], dst: list[dict[str, Any]]) -> None:
    """Every setting but ``params`` from ``src``'s groups to ``dst``'s (lr a scheduler set,
    the local optimizer's defaults), as torch's ``_sync_param_groups``."""
    if len(src) != len(dst):
        raise DistributedError(
            f"{_NAME}: {len(src)} parameter groups where {len(dst)} were expected; "
            "call add_param_group on the ZeroRedundancyOptimizer, not its local optimizer"
        )
    for src_group, dst_group in zip(src, dst, strict=True):
        for key, value in src_group.items():
            if key != "params":
                dst_group[key] = value


def _cloned(value: Any) -> Any:
    """``value`` with every tensor in it copied (lists, tuples and dicts rebuilt)."""
    if isinstance(value, Tensor):
        return value.clone()
    if isinstance(value, list | tuple):
        return type(value)(_cloned(v) for v in value)
    if isinstance(value, dict):
        return {k: _cloned(v) for k, v in value.items()}
    return value
