"""The constants of ``torch.distributed``: ``ReduceOp``, ``Backend``, ``GroupMember``."""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["BACKEND", "Backend", "GroupMember", "ReduceOp", "group", "reduce_op"]

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
    AHBM = "ahbm"


class _NonGroupMember:
    def __repr__(self) -> str:
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    WORLD: Any = None  # the default group, resolved per run
    NON_GROUP_MEMBER = _NonGroupMember()


group = GroupMember  # dist.group.WORLD, as torch spells the default group too
