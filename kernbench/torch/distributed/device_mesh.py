"""``torch.distributed.device_mesh``: ``init_device_mesh`` and the ``DeviceMesh`` it returns."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernbench.errors import DistributedError
from kernbench.torch.distributed.groups import (
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
    new_group,
)
from kernbench.torch.distributed.mesh import DeviceMesh, set_group_maker

__all__ = ["DeviceMesh", "init_device_mesh"]


def init_device_mesh(
    device_type: str, mesh_shape: Sequence[int], *, mesh_dim_names: Sequence[str] | None = None
) -> DeviceMesh:
    """Every rank calls it; it creates one group per slice of each dimension, in order.

    As in PyTorch, a rank that has not called ``init_process_group`` joins the
    default group here first.
    """
    try:
        shape = tuple(operator.index(s) for s in mesh_shape)
    except TypeError:
        shape = ()
    if not shape or min(shape) < 1:
        raise DistributedError(
            f"init_device_mesh: mesh_shape must be a non-empty tuple of positive ints, got "
            f"{mesh_shape!r}"
        )
    if not is_initialized():
        init_process_group()
    world_size = get_world_size()
    if int(np.prod(shape)) != world_size:
        raise DistributedError(
            f"init_device_mesh: mesh shape {shape} holds {int(np.prod(shape))} ranks but the "
            f"world has {world_size}"
        )
    names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
    if names is not None and len(names) != len(shape):
        raise DistributedError(f"mesh_dim_names {names} must name each of {len(shape)} dims")
    if names is not None and len(set(names)) != len(names):
        raise DistributedError(f"init_device_mesh: mesh_dim_names {names} must be unique")
    return DeviceMesh(device_type, np.arange(world_size).reshape(shape), mesh_dim_names=names)


def _mesh_groups(mesh: np.ndarray) -> tuple[dict[int, Any], int]:
    """A new mesh's process groups: one per slice along each dimension, made by every rank
    in order (joining the default group first, as torch's); those holding me, by dim."""
    if not is_initialized():
        init_process_group()
    world_size = get_world_size()
    if mesh.min() < 0 or mesh.max() >= world_size:
        raise DistributedError(
            f"DeviceMesh: mesh {mesh.tolist()} names ranks outside the world (0..{world_size - 1})"
        )
    me = get_rank()
    groups: dict[int, Any] = {}
    for dim in range(mesh.ndim):
        moved = np.moveaxis(mesh, dim, -1).reshape(-1, mesh.shape[dim])
        for ranks in moved:
            group = new_group([int(r) for r in ranks])
            if me in ranks:
                groups[dim] = group
    return groups, me


set_group_maker(_mesh_groups)
