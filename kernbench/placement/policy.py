"""The data-parallel placement policy: how a tensor is laid out over the machine.

A :class:`DPPolicy` names one mode per machine level — SIP, cube within a SIP,
PE within a cube — and, optionally, how many members of each level take part.
It is plain, frozen data checked where it is built; :func:`kernbench.placement.plan_shards`
turns it into concrete shards for one tensor on one machine.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Final, Literal

from kernbench.errors import PlacementError

__all__ = [
    "COLUMN_WISE",
    "LEVELS",
    "MODES",
    "REPLICATE",
    "ROW_WISE",
    "DPPolicy",
    "Mode",
]

Mode = Literal["replicate", "row_wise", "column_wise"]

REPLICATE: Final = "replicate"
ROW_WISE: Final = "row_wise"
COLUMN_WISE: Final = "column_wise"

#: Every valid mode, in the order error messages list them.
MODES: Final[tuple[str, ...]] = (REPLICATE, ROW_WISE, COLUMN_WISE)

#: Machine levels, outermost first; shards are planned in this order.
LEVELS: Final[tuple[str, ...]] = ("sip", "cube", "pe")


def _check_count(name: str, value: object) -> int | None:
    if value is None:
        return None
    # bool is an int subclass; DPPolicy(num_pes=True) is a typo, not a count of one.
    if isinstance(value, bool):
        raise PlacementError(f"{name} must be a positive int or None, got {value!r}")
    try:
        count = operator.index(value)
    except TypeError:
        raise PlacementError(
            f"{name} must be a positive int or None, got {value!r} ({type(value).__name__})"
        ) from None
    if count <= 0:
        raise PlacementError(f"{name} must be a positive int or None, got {count}")
    return count


@dataclass(frozen=True)
class DPPolicy:
    """Per-level placement modes and optional participant counts.

    Modes (one per level):

    * ``"replicate"`` — every member of the level holds a full copy of the block
      the level received.
    * ``"row_wise"`` — dimension 0 of the block is cut into equal contiguous
      pieces, one per member.
    * ``"column_wise"`` — the last dimension is cut the same way.

    ``num_sips`` / ``num_cubes`` / ``num_pes`` choose how many members of each
    level take part (the first ``k`` from the level's base); ``None`` means all
    that the machine makes available.  Counts are bounded by the machine only
    when the shards are planned.
    """

    sip: Mode = "replicate"
    cube: Mode = "replicate"
    pe: Mode = "replicate"
    num_sips: int | None = None
    num_cubes: int | None = None
    num_pes: int | None = None

    def __post_init__(self) -> None:
        for level in LEVELS:
            mode = getattr(self, level)
            if not isinstance(mode, str) or mode not in MODES:
                valid = ", ".join(repr(m) for m in MODES)
                raise PlacementError(
                    f"DPPolicy {level}={mode!r} is not a placement mode; valid modes: {valid}"
                )
        for level in LEVELS:
            name = count_field(level)
            # Normalise numpy integers to int so equal policies compare and hash equal.
            object.__setattr__(self, name, _check_count(f"DPPolicy {name}", getattr(self, name)))

    def mode(self, level: str) -> Mode:
        """The mode of ``level`` (one of :data:`LEVELS`)."""
        _check_level(level)
        return getattr(self, level)

    def count(self, level: str) -> int | None:
        """The requested participant count of ``level``; ``None`` means all available."""
        _check_level(level)
        return getattr(self, count_field(level))


def count_field(level: str) -> str:
    """The name of the DPPolicy field holding ``level``'s count (``"cube"`` -> ``"num_cubes"``)."""
    return f"num_{level}s"


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise PlacementError(f"unknown machine level {level!r}; valid levels: {', '.join(LEVELS)}")
