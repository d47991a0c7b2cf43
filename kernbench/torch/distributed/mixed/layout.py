"""The TP x DP layout of a mixed handler: which world ranks form each TP and DP group.

Ranks form a two-level machine: ``local`` ranks share a SIP, ``inter`` ranks
are the SIPs, and each level is split into a tensor-parallel and a
data-parallel part (see :mod:`kernbench.torch.distributed.mixed`).  Also the
ops a layout serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.errors import DistributedError

__all__ = ["FUSED_OPS", "OPS", "SINGLE_OPS", "MixedLayout", "split_level"]

SINGLE_OPS = ("all_reduce", "all_gather", "reduce_scatter")
FUSED_OPS = ("all_reduce_all_gather", "reduce_scatter_all_reduce")
OPS = SINGLE_OPS + FUSED_OPS


@dataclass(frozen=True)
class MixedLayout:
    """How ``local_size * inter_size`` world ranks split into TP and DP groups."""

    local_size: int
    inter_size: int
    local_tp_size: int
    local_dp_size: int
    inter_tp_size: int
    inter_dp_size: int

    @property
    def world_size(self) -> int:
        return self.local_size * self.inter_size

    @property
    def tp_size(self) -> int:
        return self.local_tp_size * self.inter_tp_size

    @property
    def dp_size(self) -> int:
        return self.local_dp_size * self.inter_dp_size

    def coords(self, world_rank: int) -> tuple[int, int, int, int]:
        """(local_tp_rank, local_dp_rank, inter_tp_rank, inter_dp_rank) of a world rank."""
        local, inter = world_rank % self.local_size, world_rank // self.local_size
        return (
            local % self.local_tp_size,
            local // self.local_tp_size,
            inter % self.inter_tp_size,
            inter // self.inter_tp_size,
        )

    def world_rank(self, ltp: int, ldp: int, itp: int, idp: int) -> int:
        local = ltp + ldp * self.local_tp_size
        inter = itp + idp * self.inter_tp_size
        return local + inter * self.local_size

    def tp_rank(self, world_rank: int) -> int:
        ltp, _, itp, _ = self.coords(world_rank)
        return ltp + itp * self.local_tp_size

    def dp_rank(self, world_rank: int) -> int:
        _, ldp, _, idp = self.coords(world_rank)
        return ldp + idp * self.local_dp_size

    def tp_groups(self) -> list[tuple[int, ...]]:
        """Every TP group (ranks sharing DP coordinates), in DP-rank order, members by TP rank."""
        return [
            tuple(
                self.world_rank(ltp, ldp, itp, idp)
                for itp in range(self.inter_tp_size)
                for ltp in range(self.local_tp_size)
            )
            for idp in range(self.inter_dp_size)
            for ldp in range(self.local_dp_size)
        ]

    def dp_groups(self) -> list[tuple[int, ...]]:
        """Every DP group (ranks sharing TP coordinates), in TP-rank order, members by DP rank."""
        return [
            tuple(
                self.world_rank(ltp, ldp, itp, idp)
                for idp in range(self.inter_dp_size)
                for ldp in range(self.local_dp_size)
            )
            for itp in range(self.inter_tp_size)
            for ltp in range(self.local_tp_size)
        ]

    def tp_group_of(self, world_rank: int) -> tuple[int, ...]:
        return self.tp_groups()[self.dp_rank(world_rank)]

    def dp_group_of(self, world_rank: int) -> tuple[int, ...]:
        return self.dp_groups()[self.tp_rank(world_rank)]

    def valid_ops(self) -> list[str]:
        ops = list(SINGLE_OPS) if self.tp_size > 1 else []
        if self.tp_size > 1 and self.dp_size > 1:
            ops += FUSED_OPS
        return ops


def split_level(size: int, tp: int | None, dp: int | None, level: str) -> tuple[int, int]:
    """(tp, dp) of one level; a missing one is derived from the other, and with neither
    given the level is all TP (``(size, 1)``, FlashInfer's default)."""
    for name, value in ((f"{level}_tp_size", tp), (f"{level}_dp_size", dp)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise DistributedError(f"MixedCommHandler: {name}={value!r} must be a positive int")
    if tp is None and dp is None:
        tp, dp = size, 1
    elif tp is None:
        tp = size // dp if size % dp == 0 else 0
    elif dp is None:
        dp = size // tp if size % tp == 0 else 0
    if tp * dp != size or not tp or not dp:
        raise DistributedError(
            f"MixedCommHandler: {level}_tp_size ({tp or '?'}) x {level}_dp_size ({dp or '?'}) "
            f"must equal {level}_size ({size})"
        )
    return tp, dp
