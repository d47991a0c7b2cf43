"""Process groups: ``init_process_group``, ``new_group``, ranks and world sizes.

Every rank joins the default group (WORLD) with ``init_process_group`` before
any other call; ``new_group`` is called by every rank in the same order and
gives non-members ``GroupMember.NON_GROUP_MEMBER``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernbench.distributed.world import ProcessGroup, World
from kernbench.errors import DistributedError, DistributedValueError
from kernbench.runtime.current import current_context
from kernbench.torch.devices import device as torch_device
from kernbench.torch.distributed.arguments import calling_rank, initialised, resolve_group
from kernbench.torch.distributed.constants import BACKEND, BACKENDS, Backend, GroupMember

__all__ = [
    "destroy_process_group",
    "get_backend",
    "get_default_backend_for_device",
    "get_node_local_rank",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "is_available",
    "is_backend_available",
    "is_gloo_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "is_torchelastic_launched",
    "is_ucc_available",
    "is_xccl_available",
    "new_group",
    "new_subgroups",
    "new_subgroups_by_enumeration",
]


def is_available() -> bool:
    return True


def is_backend_available(backend: str) -> bool:
    """Whether ``init_process_group`` takes ``backend``: every name of
    :class:`~kernbench.torch.distributed.constants.Backend` (one simulated backend)."""
    return isinstance(backend, str) and backend.lower() in BACKENDS


def is_nccl_available() -> bool:
    return True


def is_gloo_available() -> bool:
    return True


def is_mpi_available() -> bool:
    return True


def is_ucc_available() -> bool:
    return True


def is_xccl_available() -> bool:
    return True


def is_torchelastic_launched() -> bool:
    """As torch: whether ``$TORCHELASTIC_RUN_ID`` is set (a run sets torchrun's rank
    variables, not the elastic agent's)."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """The rank's index on its node: ``$LOCAL_RANK`` (set in each rank of a run, as torchrun
    sets it), else ``fallback_rank``; neither raises torch's error."""
    local = os.environ.get("LOCAL_RANK")
    if local is not None:
        return int(local)
    if fallback_rank is not None:
        return int(fallback_rank)
    raise DistributedError(
        "LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
        "`get_node_local_rank` to work, assuming you are not running in a multi-device "
        "context and want the code to run locally instead."
    )


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: Any = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """Join the default group.

    ``rank`` and ``world_size`` (-1: not given) are checked: ``world_size``
    against the machine's devices and the ranks this run started, ``rank``
    against ``0..world_size-1`` and the calling rank.  ``backend``,
    ``init_method``, ``store`` and the environment (``MASTER_ADDR``, ...) are
    accepted and mean nothing here: there is one simulated backend.
    """
    world, me = calling_rank()
    if me in world.initialised:
        raise DistributedError(
            f"rank {me}: init_process_group() was already called; the default process group "
            "is initialised once (destroy_process_group() first to start again)"
        )
    devices = world.ctx.num_devices
    if world_size not in (-1, None):
        world_size = _whole("world_size", world_size)
        if not 1 <= world_size <= devices:
            level = world.ctx.topology.system.device_level
            raise DistributedError(
                f"init_process_group(world_size={world_size}): this machine has {devices} "
                f"devices at level {level!r}, so world_size must be in 1..{devices}"
            )
        if world_size != world.world_size:
            raise DistributedError(
                f"rank {me}: init_process_group(world_size={world_size}) but this run has "
                f"{world.world_size} ranks (started processes, or --world-size)"
            )
    if rank not in (-1, None):
        rank = _whole("rank", rank)
        if not 0 <= rank < world.world_size:
            raise DistributedError(
                f"init_process_group(rank={rank}): rank must be in 0..{world.world_size - 1} "
                f"(this run has {world.world_size} ranks)"
            )
        if rank != me:
            raise DistributedError(
                f"init_process_group(rank={rank}) was called on rank {me}: each rank must pass "
                "its own rank (ranks are numbered in the order processes are started)"
            )
    world.initialised.add(me)
    if isinstance(backend, str) and backend:
        _BACKENDS[world] = backend.lower()


# The backend name each run's ranks passed init_process_group, for get_backend().
_BACKENDS: weakref.WeakKeyDictionary[World, str] = weakref.WeakKeyDictionary()


def _whole(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise DistributedError(f"init_process_group: {name} must be an int (got {value!r})")
    return int(value)


def is_initialized() -> bool:
    try:
        world, me = calling_rank()
    except DistributedError:
        return False
    return me in world.initialised


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    world, me = calling_rank()
    if group is None or group is world.world_group:
        world.initialised.discard(me)


def get_rank(group: Any = None) -> int:
    world, me = initialised("get_rank()")
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve_group(group, world).group_rank(me)


def get_world_size(group: Any = None) -> int:
    world, me = initialised("get_world_size()")
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    pg = resolve_group(group, world)
    return pg.size() if pg.group_rank(me) >= 0 else -1


def get_backend(group: Any = None) -> str:
    """The backend init_process_group was given ("nccl", "gloo": there is one simulated
    backend, so scripts that branch on its name take the branch they would); else "ahbm"."""
    world, _ = initialised("get_backend()")
    return _BACKENDS.get(world, BACKEND)


def get_default_backend_for_device(device: Any) -> str:
    """The backend torch picks for ``device`` (a ``torch.device`` or its name): "nccl" for
    cuda, "gloo" for cpu, and "ahbm" for this machine's accelerator; each names the one
    simulated backend, so the answer goes straight to ``init_process_group``."""
    kind = device.type if isinstance(device, torch_device) else torch_device(device).type
    backend = Backend.default_device_backend_map.get(kind)
    if backend is None:
        raise DistributedValueError(f"Default backend not registered for device : {device}")
    return backend


def get_process_group_ranks(group: Any) -> list[int]:
    """The global ranks of ``group``, in group-rank order."""
    world, _ = initialised("get_process_group_ranks()")
    return list(resolve_group(group, world, "get_process_group_ranks").ranks)


def get_global_rank(group: Any, group_rank: int) -> int:
    """The global rank of ``group``'s rank ``group_rank``."""
    world, _ = initialised("get_global_rank()")
    ranks = resolve_group(group, world, "get_global_rank").ranks
    if isinstance(group_rank, bool) or not isinstance(group_rank, int):
        raise DistributedError(f"get_global_rank: group_rank must be an int, got {group_rank!r}")
    if not 0 <= group_rank < len(ranks):
        raise DistributedError(
            f"get_global_rank: group rank {group_rank} is not in the group (0..{len(ranks) - 1})"
        )
    return ranks[group_rank]


def get_group_rank(group: Any, global_rank: int) -> int:
    """``global_rank``'s rank within ``group``."""
    world, _ = initialised("get_group_rank()")
    pg = resolve_group(group, world, "get_group_rank")
    found = pg.group_rank(global_rank) if isinstance(global_rank, int) else -1
    if found < 0:
        raise DistributedError(
            f"get_group_rank: global rank {global_rank!r} is not part of the group "
            f"(its ranks: {list(pg.ranks)})"
        )
    return found


def new_group(
    ranks: Sequence[int] | None = None,
    timeout: Any = None,
    backend: str | None = None,
    pg_options: Any = None,
    use_local_synchronization: bool = False,
    group_desc: str | None = None,
    device_id: Any = None,
) -> Any:
    """Every rank calls it in the same order; non-members get ``GroupMember.NON_GROUP_MEMBER``."""
    world, me = initialised("new_group()")
    group = world.new_group(ranks)
    return group if group.group_rank(me) >= 0 else GroupMember.NON_GROUP_MEMBER


def new_subgroups(
    group_size: int | None = None,
    group: Any = None,
    timeout: Any = None,
    backend: str | None = None,
    pg_options: Any = None,
    group_desc: str | None = None,
) -> tuple[Any, list[Any]]:
    """Split the world into groups of ``group_size`` consecutive ranks (by default the
    devices a rank sees, ``torch.cuda.device_count()``, as torch's one group per node):
    ``(the calling rank's subgroup, every subgroup)``, as torch; every rank calls it."""
    world, _ = initialised("new_subgroups()")
    if group is not None:
        raise DistributedError(
            "new_subgroups: group= is not supported (as in torch, which takes the default "
            "group only); split that group's ranks with new_subgroups_by_enumeration"
        )
    size = current_context().num_devices if group_size is None else group_size
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise DistributedError(f"new_subgroups: group_size must be a positive int, got {size!r}")
    n = world.world_size
    if size > n:
        raise DistributedError(
            f"new_subgroups: group_size {size} must not exceed the world size ({n})"
        )
    if n % size:
        raise DistributedError(
            f"new_subgroups: the world size ({n}) must be divisible by group_size ({size})"
        )
    return new_subgroups_by_enumeration([list(range(s, s + size)) for s in range(0, n, size)])


def new_subgroups_by_enumeration(
    ranks_per_subgroup_list: Sequence[Sequence[int]],
    timeout: Any = None,
    backend: str | None = None,
    pg_options: Any = None,
    group_desc: str | None = None,
) -> tuple[Any, list[Any]]:
    """One group per list of ranks (disjoint, as torch checks): ``(the calling rank's
    subgroup or None, every subgroup)``; every rank calls it."""
    world, me = initialised("new_subgroups_by_enumeration()")
    if not isinstance(ranks_per_subgroup_list, Sequence) or not ranks_per_subgroup_list:
        raise DistributedError(
            "new_subgroups_by_enumeration: ranks_per_subgroup_list must be a non-empty list "
            f"of rank lists, got {ranks_per_subgroup_list!r}"
        )
    seen: dict[int, int] = {}
    for index, ranks in enumerate(ranks_per_subgroup_list):
        if not isinstance(ranks, Sequence) or isinstance(ranks, str):
            raise DistributedError(
                f"new_subgroups_by_enumeration: subgroup {index} must be a list of ranks, "
                f"got {ranks!r}"
            )
        for rank in ranks:
            if rank in seen:
                where = (
                    f"twice in subgroup {index}"
                    if seen[rank] == index
                    else f"in both subgroup {seen[rank]} and subgroup {index}"
                )
                raise DistributedError(
                    f"new_subgroups_by_enumeration: rank {rank} has appeared {where} (as "
                    "torch, subgroups are disjoint)"
                )
            seen[rank] = index
    subgroups = [world.new_group(list(ranks)) for ranks in ranks_per_subgroup_list]
    mine = next((g for g in subgroups if g.group_rank(me) >= 0), None)
    return mine, subgroups
