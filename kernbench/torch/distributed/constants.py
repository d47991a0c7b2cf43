"""The constants of ``torch.distributed``: ``ReduceOp``, ``Backend``, ``GroupMember``."""

from __future__ import annotations

import enum
from typing import Any

from kernbench.distributed.world import current_world

__all__ = ["BACKEND", "BACKENDS", "Backend", "GroupMember", "ReduceOp", "group", "reduce_op"]

BACKEND = "ahbm"  # what get_backend() answers: the one backend there is


class ReduceOp(enum.Enum):
    """Reduction operators (``dist.ReduceOp.SUM``, …)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"  # named as in torch; refused when used (scale, then SUM)

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.name}>"


reduce_op = ReduceOp  # the old alias


class Backend(str):
    """Backend names as ``torch.distributed.Backend`` spells them; any of them names the
    one simulated backend (``init_process_group(backend=Backend.NCCL)``)."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"
    XCCL = "xccl"
    AHBM = "ahbm"

    # What get_default_backend_for_device answers: torch's map, and this machine's device.
    default_device_backend_map: dict[str, str] = {  # noqa: RUF012 - torch's class attribute
        "cpu": "gloo",
        "cuda": "nccl",
        "ahbm": "ahbm",
    }

    def __new__(cls, name: str) -> Backend:
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, got {name!r}")
        return str.__new__(cls, name.lower())


#: The names init_process_group takes (and is_backend_available answers True for).
BACKENDS = ("gloo", "nccl", "ucc", "mpi", "xccl", "ahbm")


class _NonGroupMember:
    def __repr__(self) -> str:
        return "GroupMember.NON_GROUP_MEMBER"


class _DefaultGroup:
    """``GroupMember.WORLD``: the running world's default group (None outside a run)."""

    def __get__(self, instance: Any, owner: Any) -> Any:
        world = current_world()
        return None if world is None else world.world_group


class GroupMember:
    WORLD: Any = _DefaultGroup()
    NON_GROUP_MEMBER = _NonGroupMember()


group = GroupMember  # dist.group.WORLD, as torch spells the default group too
