"""What every ``torch.distributed`` call checks and normalises, in one place.

A call is made from a rank (:func:`calling_rank`) whose default group is
initialised (:func:`initialised`); ``group=`` resolves to a
:class:`~kernbench.distributed.world.ProcessGroup` (:func:`resolve_group`),
``op=`` to the name the collectives take (:func:`reduce_op_name`), a root or
peer given as a global or a group rank to one rank (:func:`root_group_rank`,
:func:`peer_rank`), and each tensor to the runtime tensor under it, on the
caller's own device (:func:`device_tensor`).  A collective's call gathers
these in a :class:`CollectiveCall` and submits itself to the world's
rendezvous with the arguments that must agree across ranks.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernbench.distributed.scheduler import current_rank
from kernbench.distributed.world import ProcessGroup, Work, World, active_world
from kernbench.errors import DistributedError
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.distributed.constants import GroupMember, ReduceOp
from kernbench.torch.distributed.mesh import DeviceMesh
from kernbench.torch.tensor import Tensor

__all__ = [
    "CollectiveCall",
    "ObjectCount",
    "calling_rank",
    "check_count",
    "check_same",
    "check_sized",
    "collective_call",
    "describe",
    "device_tensor",
    "initialised",
    "not_in_group",
    "on_behalf_of",
    "peer_rank",
    "reduce_op_name",
    "resolve_group",
    "root_group_rank",
    "signature",
]


# -- who calls ---------------------------------------------------------------------------
def calling_rank() -> tuple[World, int]:
    """The active world and the calling rank's global rank."""
    world = active_world()
    state = current_rank()
    if state is None:
        world.scheduler.refuse_foreign_thread()
        raise DistributedError("torch.distributed calls must be made from a rank")
    return world, state.rank


def initialised(what: str) -> tuple[World, int]:
    """:func:`calling_rank`, once the rank has called ``init_process_group``."""
    world, me = calling_rank()
    if me not in world.initialised:
        raise DistributedError(
            f"rank {me} called {what} before init_process_group(); call "
            "dist.init_process_group() first"
        )
    return world, me


# -- group, op, root, peer ------------------------------------------------------------------
def resolve_group(group: Any, world: World, what: str = "") -> ProcessGroup:
    """``group=`` of call ``what``: None or WORLD, a ProcessGroup, or a 1-D DeviceMesh."""
    prefix = f"{what}: " if what else ""
    if group is None or group is GroupMember.WORLD:
        return world.world_group
    if group is GroupMember.NON_GROUP_MEMBER:
        raise DistributedError(f"{prefix}this rank is not a member of the group it passed")
    if isinstance(group, ProcessGroup):
        return group
    if isinstance(group, DeviceMesh):
        return group.get_group()
    raise DistributedError(
        f"{prefix}group must be a ProcessGroup (from new_group), a one-dimensional DeviceMesh "
        f"or None, got {type(group).__name__}"
    )


def not_in_group(group: Any, me: int, what: str, stacklevel: int = 3) -> bool:
    """Whether the caller is outside ``group``; if so, warn as PyTorch does.

    PyTorch's ``_rank_not_in_group`` / ``_warn_not_in_group``: a rank given a
    group it does not belong to (``GroupMember.NON_GROUP_MEMBER`` from
    ``new_group``, or a group of other ranks) skips the call with a warning
    and returns at once, touching no tensor and waiting for nobody.
    ``stacklevel`` is the user's frame counted from this function's caller (1).
    """
    outside = group is GroupMember.NON_GROUP_MEMBER or (
        isinstance(group, ProcessGroup) and group.group_rank(me) < 0
    )
    if outside:
        warnings.warn(
            f"Running {what} on global rank {me} which does not belong to the given group.",
            stacklevel=stacklevel + 1,
        )
    return outside


def reduce_op_name(op: Any, what: str = "") -> str:
    """The name the collectives take for ``op=`` of call ``what``."""
    if op is ReduceOp.PREMUL_SUM:
        raise DistributedError(
            f"{what or 'this call'}: ReduceOp.PREMUL_SUM is not supported; scale the tensor "
            "first (t.mul_(factor)) and reduce with ReduceOp.SUM"
        )
    if isinstance(op, ReduceOp):
        return op.value
    prefix = f"{what}: " if what else ""
    valid = ", ".join(f"ReduceOp.{o.name}" for o in ReduceOp if o is not ReduceOp.PREMUL_SUM)
    raise DistributedError(f"{prefix}op must be a dist.ReduceOp ({valid}); got {op!r}")


def root_group_rank(
    group: ProcessGroup, rank: int | None, group_rank: int | None, what: str
) -> int:
    """The root's rank in ``group``, from its global ``rank`` or its ``group_rank``."""
    if group_rank is not None and rank is not None:  # torch: "Can't specify both"
        raise DistributedError(
            f"{what}: give the root as a global rank or as a group rank, not both "
            f"(got {rank!r} and group rank {group_rank!r})"
        )
    if group_rank is not None:
        _check_rank_type(group_rank, what, "the root's group rank")
        if not 0 <= group_rank < group.size():
            raise DistributedError(f"{what}: group rank {group_rank} is not in {group!r}")
        return int(group_rank)
    if rank is None:
        raise DistributedError(f"{what}: give the root rank")
    _check_rank_type(rank, what, "the root rank")
    root = group.group_rank(int(rank))
    if root < 0:
        raise DistributedError(f"{what}: root rank {rank} is not a member of {group!r}")
    return root


def _check_rank_type(rank: Any, what: str, name: str) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int | np.integer):
        raise DistributedError(f"{what}: {name} must be an int (got {rank!r})")


def peer_rank(
    group: Any, world: World, rank: int | None, group_rank: int | None, what: str, arg: str
) -> int:
    """The global rank of a point-to-point peer, from its global rank ``arg`` (``dst`` or
    ``src``) or its rank in ``group`` (``group_dst`` / ``group_src``)."""
    pg = resolve_group(group, world, what)
    if group_rank is not None and rank is not None:
        raise DistributedError(f"{what}: give {arg}= or group_{arg}=, not both")
    if group_rank is not None:
        _check_rank_type(group_rank, what, f"group_{arg}")
        group_rank = int(group_rank)
        if not 0 <= group_rank < pg.size():
            raise DistributedError(
                f"{what}: group_{arg}={group_rank} is not a rank of {pg!r} "
                f"(valid: 0..{pg.size() - 1})"
            )
        return pg.ranks[group_rank]
    if rank is None:
        raise DistributedError(f"{what}: give the peer rank ({arg}= or group_{arg}=)")
    _check_rank_type(rank, what, arg)
    rank = int(rank)
    if pg is not world.world_group and pg.group_rank(rank) < 0:
        raise DistributedError(  # torch: "Global rank N is not part of group G"
            f"{what}: global rank {rank} ({arg}={rank}) is not part of {pg!r}; {arg} is a "
            f"global rank of a member of the group (group_{arg}= takes a rank within it)"
        )
    return rank


# -- tensors -------------------------------------------------------------------------------
def device_tensor(tensor: Any, what: str) -> DeviceTensor:
    """The device tensor behind a torch tensor, checked to be on the caller's device."""
    inner = tensor.device_tensor if isinstance(tensor, Tensor) else tensor
    if not isinstance(inner, DeviceTensor):
        raise DistributedError(
            f"{what}: expected a device tensor (kernbench.torch tensor), "
            f"got {type(tensor).__name__}"
        )
    _check_on_device(inner, what)
    return inner


def _check_on_device(tensor: DeviceTensor, what: str) -> None:
    """A rank may only hand collectives tensors on its own device (its set_device)."""
    ctx = tensor.context
    device = ctx.current_device()
    if device is None:
        return
    sip, cube, pe = ctx.device_coords(device)
    for placement in tensor.placements:
        s = placement.shard
        if s.sip != sip or cube is not None and s.cube != cube or pe is not None and s.pe != pe:
            state = current_rank()
            who = f"rank {state.rank}" if state else "this rank"
            raise DistributedError(
                f"{what}: tensor {tensor.name!r} has a shard on {placement.pe_name}, which is "
                f"not on {who}'s device {device}; create the tensor while that device is "
                "current (torch.cuda.set_device) or pass it to the rank that owns it"
            )


def check_count(items: list, group: ProcessGroup, what: str, arg: str) -> None:
    """A tensor list holds one tensor per member of ``group``."""
    if len(items) != group.size():
        raise DistributedError(
            f"{what}: {arg} has {len(items)} tensors; the group has {group.size()} ranks"
        )


# What to do instead of a list of tensors of different sizes, per call.
_UNEVEN = {
    "all_gather": "tensors of different sizes (torch's NCCL backend runs those as one "
    "broadcast per rank): pad them to one size, or call dist.broadcast(tensor_list[i], src=i) "
    "for each rank i",
}


def check_same(a: DeviceTensor, b: DeviceTensor, what: str, arg: str = "", i: int = -1) -> None:
    """``a`` (``arg[i]`` when named) has the dtype and element count of ``b``."""
    if (a.dtype, a.numel) != (b.dtype, b.numel):
        named = f"{arg}[{i}] " if arg else ""
        instead = f"; {what} here takes no {_UNEVEN[what]}" if what in _UNEVEN else ""
        raise DistributedError(
            f"{what}: {named}tensor {a.name!r} ({a.dtype.name}, {a.numel} elements) does not "
            f"match {b.name!r} ({b.dtype.name}, {b.numel} elements){instead}"
        )


def check_sized(t: DeviceTensor, numel: int, like: DeviceTensor, what: str, arg: str) -> None:
    """``t`` holds ``numel`` elements of ``like``'s dtype."""
    if t.numel != numel or t.dtype != like.dtype:
        raise DistributedError(
            f"{what}: {arg} {t.name!r} has {t.numel} {t.dtype.name} elements; it needs "
            f"{numel} {like.dtype.name} elements (group size x the other tensor)"
        )


def signature(t: DeviceTensor, **others: Any) -> dict[str, Any]:
    """The arguments of a one-tensor collective that must agree across ranks."""
    return {"dtype": t.dtype.name, "shape": tuple(t.shape), **others}


def describe(t: DeviceTensor) -> str:
    """``float32[4, 8]``: a tensor's dtype and shape in a signature."""
    return f"{t.dtype.name}{list(t.shape)}"


# -- collectives made on behalf of another call -----------------------------------------------
# The key of the calling rank's current on_behalf_of call among its RankState.local.
_ON_BEHALF = "torch.distributed: on behalf of"


@dataclass(frozen=True)
class ObjectCount:
    """The length of a list of objects that must be the same on every rank, as an
    argument that must agree across ranks (its repr is what a mismatch shows)."""

    count: int
    agreement = "every rank must pass a list of the same length"

    def __repr__(self) -> str:
        return f"a list of {self.count} object{'s' if self.count != 1 else ''}"


@contextlib.contextmanager
def on_behalf_of(what: str, agreed: dict[str, Any]) -> Iterator[None]:
    """Submit the collectives the calling rank makes inside as call ``what``, with the
    arguments ``agreed`` that must agree across ranks in place of theirs.

    An object collective moves its objects with tensor collectives.  Submitted as the
    user's call, with the user's arguments (a list's length, the root), a rank that
    calls it differently is named in those terms, not in those of the byte tensors
    beneath; those arguments fix the tensors' shapes, so agreeing on them is agreeing
    on the tensors.
    """
    state = current_rank()
    if state is None:
        raise DistributedError(f"{what}: torch.distributed calls must be made from a rank")
    previous = state.local.get(_ON_BEHALF)
    state.local[_ON_BEHALF] = (what, agreed)
    try:
        yield
    finally:
        state.local[_ON_BEHALF] = previous


# -- one collective call ---------------------------------------------------------------------
@dataclass(frozen=True)
class CollectiveCall:
    """One rank's call of a collective: its name, the world, the caller and the group."""

    what: str
    world: World
    rank: int
    group: ProcessGroup

    @property
    def ctx(self) -> Any:
        """The runtime context the collective runs in."""
        return self.world.ctx

    def tensor(self, tensor: Any) -> DeviceTensor:
        return device_tensor(tensor, self.what)

    def tensors(self, tensors: list[Any]) -> list[DeviceTensor]:
        if not isinstance(tensors, list | tuple):
            raise DistributedError(
                f"{self.what}: expected a list of tensors, got {type(tensors).__name__}"
            )
        return [device_tensor(t, self.what) for t in tensors]

    def root(self, rank: int | None, group_rank: int | None) -> int:
        return root_group_rank(self.group, rank, group_rank, self.what)

    def submit(
        self,
        agreed: dict[str, Any],
        payload: Any,
        launch: Callable[[list[Any]], Any],
        async_op: bool,
        result: list[Any] | None = None,
    ) -> Work | None:
        """Join the group's rendezvous; ``agreed`` must be equal on every rank.

        The last rank to arrive runs ``launch`` on the payloads in group-rank
        order; the call returns a :class:`Work` when ``async_op``, whose
        ``result()`` is ``result`` (the call's output tensors, as torch's).  Inside
        :func:`on_behalf_of`, the call joins as that one.
        """
        what = self.what
        state = current_rank()
        behalf = state.local.get(_ON_BEHALF) if state is not None else None
        if behalf is not None:
            what, agreed = behalf
        return self.world.collective(
            self.group,
            what,
            agreed,
            payload,
            launch,
            async_op,
            [] if result is None else result,
        )


def collective_call(what: str, group: Any) -> CollectiveCall | None:
    """The call of collective ``what`` on ``group=`` by an initialised rank.

    ``None`` (after PyTorch's warning) when the caller is not in ``group``:
    the collective then returns ``None`` at once.
    """
    world, me = initialised(what)
    if not_in_group(group, me, what, stacklevel=3):
        return None
    return CollectiveCall(what, world, me, resolve_group(group, world, what))
