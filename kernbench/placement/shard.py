"""Planning the shards of one tensor on one machine from its DP policy.

The policy is applied level by level, outermost first.  The whole tensor is one
block; at each level every block is handed to each of the level's members,
either whole (``replicate``) or cut into equal contiguous pieces along
dimension 0 (``row_wise``) or the last dimension (``column_wise``).  After the
PE level each (sip, cube, pe) holds exactly one block: its :class:`ShardSpec`.

Rank decisions (shapes of fewer than two dimensions):

* A 1-D tensor's only dimension is both dimension 0 and the last dimension, so
  ``row_wise`` and ``column_wise`` both split it.  It is *not* treated as a
  ``(1, n)`` row, under which ``row_wise`` over more than one member could
  never divide.
* A 0-d tensor can only be replicated: a ``row_wise`` or ``column_wise`` level
  raises :class:`~kernbench.errors.PlacementError` whatever its count, so a
  policy's meaning does not depend on how large the machine is.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

from kernbench.errors import PlacementError
from kernbench.placement.policy import LEVELS, REPLICATE, ROW_WISE, DPPolicy, count_field

__all__ = ["ShardSpec", "plan_shards"]

Coord = tuple[int, int, int]

_PLURAL = {"sip": "SIPs", "cube": "cubes", "pe": "PEs"}


@dataclass(frozen=True)
class ShardSpec:
    """The block of a tensor held by one PE.

    ``index`` selects the block from the global tensor (``array[shard.index]``),
    one slice with explicit int start/stop and no step per dimension.  ``replica``
    is 0 for the first copy of a block and 1, 2, … for the copies that
    ``replicate`` levels make, numbered in (sip, cube, pe) order.  Two blocks
    are the same block when they came down the same path of splits; for
    tensors with no zero-sized dimension that is the same as equal ``index``.
    """

    sip: int
    cube: int
    pe: int
    # Slices are unhashable before Python 3.12; the remaining fields identify a shard.
    index: tuple[slice, ...] = field(hash=False)
    shape: tuple[int, ...]
    nbytes: int
    replica: int
    global_shape: tuple[int, ...]
    itemsize: int

    @property
    def coord(self) -> Coord:
        """The absolute machine coordinate ``(sip, cube, pe)`` of the PE holding the shard."""
        return (self.sip, self.cube, self.pe)

    @property
    def contiguous_offset_bytes(self) -> int | None:
        """Byte offset of the block within the row-major global tensor, if it is one run there.

        A block is one contiguous run of the global buffer only when, for some
        dimension ``j``, every dimension before ``j`` has extent 1 and every
        dimension after ``j`` is whole — always so when only ``row_wise`` levels
        split, rarely when a ``column_wise`` level splits a 2-D or larger tensor.
        ``None`` when the block is not one run (no single offset describes it)
        or is empty.
        """
        if self.nbytes == 0:
            return None
        pairs = list(zip(self.shape, self.global_shape, strict=True))
        partial = [d for d, (extent, size) in enumerate(pairs) if extent != size]
        # Dimensions after the last partial one are whole, so the block is one run
        # exactly when every dimension before that one is a single index.
        if partial and any(extent != 1 for extent, _ in pairs[: partial[-1]]):
            return None
        flat = 0
        for sl, size in zip(self.index, self.global_shape, strict=True):
            flat = flat * size + sl.start
        return flat * self.itemsize


@dataclass(frozen=True)
class _Level:
    name: str
    mode: str
    count: int
    base: int


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise PlacementError(f"{name} must be a positive int, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise PlacementError(f"{name} must be a positive int, got {value!r}") from None
    if number <= 0:
        raise PlacementError(f"{name} must be a positive int, got {number}")
    return number


def _non_negative(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise PlacementError(f"{name} must be a non-negative int, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise PlacementError(f"{name} must be a non-negative int, got {value!r}") from None
    if number < 0:
        raise PlacementError(f"{name} must be a non-negative int, got {number}")
    return number


def _level(policy: DPPolicy, name: str, available: int, base: int, base_arg: str) -> _Level:
    machine_arg = {"sip": "num_sips", "cube": "cubes_per_sip", "pe": "pes_per_cube"}[name]
    if base >= available:
        raise PlacementError(
            f"{base_arg}={base} is outside the machine: {machine_arg}={available}, "
            f"so {base_arg} must be at most {available - 1}"
        )
    maximum = available - base
    requested = policy.count(name)
    if requested is None:
        return _Level(name, policy.mode(name), maximum, base)
    if requested > maximum:
        raise PlacementError(
            f"DPPolicy {count_field(name)}={requested} exceeds the machine: at most {maximum} "
            f"{_PLURAL[name]} are available ({machine_arg}={available}, {base_arg}={base})"
        )
    return _Level(name, policy.mode(name), requested, base)


def _divisibility_error(
    shape: tuple[int, ...],
    dim: int,
    block_extent: int,
    level: _Level,
    outer: list[_Level],
    split_so_far: int,
    maximum: int,
) -> PlacementError:
    what = (
        f"cannot place a tensor of shape {shape} with {level.name}={level.mode!r} over "
        f"{level.count} {_PLURAL[level.name]}: dimension {dim} has size {shape[dim]}"
    )
    if split_so_far > 1:
        cuts = ", ".join(f"{lv.name}={lv.mode!r} x{lv.count}" for lv in outer)
        what += f", {block_extent} per block after {cuts}"
    what += f", which does not split into {level.count} equal parts"
    fitting = [k for k in range(1, min(block_extent, maximum) + 1) if block_extent % k == 0]
    counts = ", ".join(str(k) for k in fitting)
    return PlacementError(
        f"{what}. Valid {count_field(level.name)} for this shape: {counts} "
        f"(at most {maximum} available); or make dimension {dim} a multiple of "
        f"{split_so_far * level.count}"
    )


def plan_shards(
    policy: DPPolicy,
    shape: Sequence[int],
    itemsize: int,
    *,
    num_sips: int,
    cubes_per_sip: int,
    pes_per_cube: int,
    sip_base: int = 0,
    cube_base: int = 0,
    pe_base: int = 0,
) -> list[ShardSpec]:
    """The shards of a tensor of ``shape`` (elements of ``itemsize`` bytes) under ``policy``.

    The machine has ``num_sips`` SIPs, each with ``cubes_per_sip`` cubes of
    ``pes_per_cube`` PEs.  Members of a level are taken from its base upwards:
    SIPs ``sip_base .. sip_base + k - 1``, and in each of them the same cube
    numbers from ``cube_base``, and in each cube the same PE numbers from
    ``pe_base``.  Returns one shard per participating PE, sorted by
    ``(sip, cube, pe)``.  Raises :class:`PlacementError` when a count exceeds
    what the machine has or a split dimension does not divide evenly.
    """
    if not isinstance(policy, DPPolicy):
        raise PlacementError(f"policy must be a DPPolicy, got {type(policy).__name__}")
    try:
        dims = tuple(_non_negative("shape entry", n) for n in shape)
    except TypeError:
        raise PlacementError(f"shape must be a sequence of ints, got {shape!r}") from None
    itemsize = _positive("itemsize", itemsize)
    machine = {
        "sip": (_positive("num_sips", num_sips), _non_negative("sip_base", sip_base), "sip_base"),
        "cube": (
            _positive("cubes_per_sip", cubes_per_sip),
            _non_negative("cube_base", cube_base),
            "cube_base",
        ),
        "pe": (
            _positive("pes_per_cube", pes_per_cube),
            _non_negative("pe_base", pe_base),
            "pe_base",
        ),
    }
    levels = [_level(policy, name, *machine[name]) for name in LEVELS]

    # Every block at a given level has the same extents, so one list of
    # (start, stop) bounds per path is enough and divisibility is checked once.
    paths: list[tuple[tuple[int, ...], tuple[tuple[int, int], ...], int]] = [
        ((), tuple((0, n) for n in dims), 0)
    ]
    splits = [1] * len(dims)
    for depth, level in enumerate(levels):
        if level.mode == REPLICATE:
            paths = [
                (coords + (level.base + m,), bounds, replica * level.count + m)
                for coords, bounds, replica in paths
                for m in range(level.count)
            ]
            continue
        if not dims:
            raise PlacementError(
                f"cannot place a 0-d tensor with {level.name}={level.mode!r}: it has no "
                f"dimension to split; use {level.name}='replicate'"
            )
        dim = 0 if level.mode == ROW_WISE else len(dims) - 1
        start, stop = paths[0][1][dim]
        extent = stop - start
        if extent % level.count:
            outer = [lv for lv in levels[:depth] if _split_dim(lv.mode, len(dims)) == dim]
            maximum = machine[level.name][0] - level.base
            raise _divisibility_error(dims, dim, extent, level, outer, splits[dim], maximum)
        step = extent // level.count
        splits[dim] *= level.count
        new_paths = []
        for coords, bounds, replica in paths:
            lo = bounds[dim][0]
            for m in range(level.count):
                cut = (lo + m * step, lo + (m + 1) * step)
                new_paths.append(
                    (coords + (level.base + m,), bounds[:dim] + (cut,) + bounds[dim + 1 :], replica)
                )
        paths = new_paths

    shards = []
    for (sip, cube, pe), bounds, replica in paths:
        local = tuple(stop - start for start, stop in bounds)
        shards.append(
            ShardSpec(
                sip=sip,
                cube=cube,
                pe=pe,
                index=tuple(slice(start, stop) for start, stop in bounds),
                shape=local,
                nbytes=math.prod(local) * itemsize,
                replica=replica,
                global_shape=dims,
                itemsize=itemsize,
            )
        )
    shards.sort(key=lambda s: s.coord)
    return shards


def _split_dim(mode: str, ndim: int) -> int | None:
    if mode == REPLICATE:
        return None
    return 0 if mode == ROW_WISE else ndim - 1
