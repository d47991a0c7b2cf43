"""Moving host data between a whole tensor and its shards.

The runtime uses :func:`scatter` to turn a host array into the local array each
PE must hold, and :func:`gather` to rebuild the host array from what the PEs
hold.  Local arrays are contiguous and row-major in the shard's own shape.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from kernbench.errors import PlacementError
from kernbench.placement.shard import Coord, ShardSpec

__all__ = ["gather", "scatter", "shards_by_pe", "unique_blocks"]


def shards_by_pe(shards: Iterable[ShardSpec]) -> dict[Coord, ShardSpec]:
    """Index a tensor's shards by ``(sip, cube, pe)``.

    :func:`~kernbench.placement.plan_shards` gives each PE at most one shard of a
    tensor, so two shards on one PE mean the list mixes tensors or placements.
    """
    by_pe: dict[Coord, ShardSpec] = {}
    for shard in shards:
        if shard.coord in by_pe:
            raise PlacementError(
                f"two shards of one tensor on PE (sip, cube, pe)={shard.coord}: "
                f"{by_pe[shard.coord].index} and {shard.index}; a placement puts at most "
                "one shard on each PE"
            )
        by_pe[shard.coord] = shard
    return by_pe


def unique_blocks(shards: Iterable[ShardSpec]) -> list[ShardSpec]:
    """One shard per distinct block (the replica-0 copy), in the order given."""
    return [shard for shard in shards if shard.replica == 0]


def _global_layout(shards: list[ShardSpec]) -> tuple[tuple[int, ...], int]:
    if not shards:
        raise PlacementError("no shards given; a placement has at least one shard")
    layouts = {(s.global_shape, s.itemsize) for s in shards}
    if len(layouts) > 1:
        raise PlacementError(
            f"shards describe different tensors (global shape, itemsize): {sorted(layouts)}"
        )
    return layouts.pop()


def scatter(array: npt.ArrayLike, shards: Iterable[ShardSpec]) -> dict[Coord, np.ndarray]:
    """The local array each PE holds: a contiguous row-major copy of its block of ``array``.

    ``array`` must have the shape and item size the shards were planned for.
    Replicas get equal but independent arrays, so writing one leaves the
    others as they were.
    """
    shard_list = list(shards)
    global_shape, itemsize = _global_layout(shard_list)
    host = np.asarray(array)
    if host.shape != global_shape:
        raise PlacementError(
            f"cannot scatter an array of shape {host.shape} into shards of a tensor of "
            f"shape {global_shape}"
        )
    if host.dtype.itemsize != itemsize:
        raise PlacementError(
            f"cannot scatter {host.dtype} ({host.dtype.itemsize} bytes per element) into "
            f"shards planned for {itemsize}-byte elements"
        )
    return {
        coord: np.array(host[shard.index], order="C", copy=True)
        for coord, shard in shards_by_pe(shard_list).items()
    }


def gather(
    shards: Iterable[ShardSpec],
    pieces: Mapping[Coord, npt.ArrayLike],
    shape: tuple[int, ...],
    dtype: npt.DTypeLike,
) -> np.ndarray:
    """Rebuild the whole tensor from the local arrays the PEs hold.

    Each block is read from its replica-0 shard, so ``pieces`` needs an entry
    only for those (extra entries are ignored).  A piece may have any shape
    with the right number of elements; it is read in row-major order.
    """
    shard_list = list(shards)
    global_shape, itemsize = _global_layout(shard_list)
    shape = tuple(shape)
    out_dtype = np.dtype(dtype)
    if shape != global_shape:
        raise PlacementError(
            f"cannot gather shards of a tensor of shape {global_shape} into shape {shape}"
        )
    if out_dtype.itemsize != itemsize:
        raise PlacementError(
            f"cannot gather shards planned for {itemsize}-byte elements as {out_dtype} "
            f"({out_dtype.itemsize} bytes per element)"
        )
    blocks = unique_blocks(shard_list)
    # Blocks of one placement are disjoint, so equal element counts mean full coverage;
    # without this a partial shard list would return uninitialised memory.
    covered = sum(math.prod(s.shape) for s in blocks)
    if covered != math.prod(global_shape):
        raise PlacementError(
            f"shards cover {covered} of the {math.prod(global_shape)} elements of a tensor of "
            f"shape {global_shape}; pass every shard of the placement"
        )
    out = np.empty(global_shape, dtype=out_dtype)
    for shard in blocks:
        if shard.coord not in pieces:
            raise PlacementError(
                f"no piece for PE (sip, cube, pe)={shard.coord}, which holds the only "
                f"replica-0 copy of block {shard.index}"
            )
        piece = np.asarray(pieces[shard.coord])
        if piece.size != math.prod(shard.shape):
            raise PlacementError(
                f"piece for PE {shard.coord} has {piece.size} elements; its shard has shape "
                f"{shard.shape} ({math.prod(shard.shape)} elements)"
            )
        out[shard.index] = piece.reshape(shard.shape)
    return out
