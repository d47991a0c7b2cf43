"""``DeviceMesh``: global ranks in an n-D grid, with one process group per dimension.

:func:`~kernbench.torch.distributed.device_mesh.init_device_mesh` makes one on every
rank, and so does ``DeviceMesh(device_type, mesh, mesh_dim_names=...)`` as torch's (every
rank calls it with the same mesh); a one-dimensional mesh can be passed wherever a
``group`` is.  The process groups are made by the function
:mod:`~kernbench.torch.distributed.device_mesh` registers (:func:`set_group_maker`):
this module sits below the group functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import DistributedError

__all__ = ["DeviceMesh", "set_group_maker"]

# mesh -> (the group along each dimension holding the caller, the caller's global rank)
_GROUP_MAKER: list[Callable[[np.ndarray], tuple[dict[int, Any], int]]] = []


def set_group_maker(maker: Callable[[np.ndarray], tuple[dict[int, Any], int]]) -> None:
    """Register the function that makes a new mesh's process groups."""
    _GROUP_MAKER[:] = [maker]


class DeviceMesh:
    """A mesh of global ranks; ``get_group(dim)`` is the group along ``dim`` holding me.

    ``DeviceMesh(device_type, mesh, *, mesh_dim_names=None, backend_override=None,
    _init_backend=True)`` as torch's: ``mesh`` (a tensor, array or nested list of global
    ranks) gets one process group per slice along each dimension; every rank calls it.
    """

    def __init__(
        self,
        device_type: str,
        mesh: Any,
        *,
        mesh_dim_names: tuple[str, ...] | None = None,
        backend_override: Any = None,
        _init_backend: bool = True,
        _groups: dict[int, Any] | None = None,
        _rank: int | None = None,
    ) -> None:
        ranks = np.asarray(mesh.tolist() if hasattr(mesh, "tolist") else mesh)
        if ranks.ndim == 0 or ranks.size == 0 or ranks.dtype.kind not in "iu":
            raise DistributedError(
                f"DeviceMesh: mesh must be a non-empty tensor or nested list of global ranks "
                f"(ints), got {mesh!r}"
            )
        if len(np.unique(ranks)) != ranks.size:
            raise DistributedError(f"DeviceMesh cannot have duplicate values, got {ranks.tolist()}")
        names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
        if names is not None and len(names) != ranks.ndim:
            raise DistributedError(
                f"mesh_dim_names {names} must name each of the mesh's {ranks.ndim} dims"
            )
        if names is not None and len(set(names)) != len(names):
            raise DistributedError(f"DeviceMesh: mesh_dim_names {names} must be unique")
        if _groups is None:
            _groups, _rank = _GROUP_MAKER[0](ranks)
        self.device_type = device_type
        self.mesh = ranks
        self.mesh_dim_names = names
        self._groups = _groups
        self._me = _rank

    @property
    def ndim(self) -> int:
        return self.mesh.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.mesh.shape)

    def _dim(self, mesh_dim: int | str | None) -> int:
        if mesh_dim is None:
            if self.ndim != 1:
                raise DistributedError("this mesh has several dimensions; name one")
            return 0
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise DistributedError(
                    f"no mesh dimension {mesh_dim!r}; names: {self.mesh_dim_names}"
                )
            return self.mesh_dim_names.index(mesh_dim)
        if not 0 <= mesh_dim < self.ndim:
            raise DistributedError(f"mesh dimension {mesh_dim} is not in 0..{self.ndim - 1}")
        return mesh_dim

    def get_group(self, mesh_dim: int | str | None = None) -> Any:
        dim = self._dim(mesh_dim)
        if dim not in self._groups:
            raise DistributedError(f"rank {self._me} is not in this mesh ({self.mesh.tolist()})")
        return self._groups[dim]

    def get_all_groups(self) -> list[Any]:
        """The group along each dimension holding me, in dimension order."""
        return [self.get_group(d) for d in range(self.ndim)]

    def size(self, mesh_dim: int | str | None = None) -> int:
        return (
            int(self.mesh.size) if mesh_dim is None else int(self.mesh.shape[self._dim(mesh_dim)])
        )

    def get_rank(self) -> int:
        return self._me

    def get_coordinate(self) -> list[int] | None:
        """My index along each dimension; ``None`` when I am not in the mesh, as torch."""
        found = np.argwhere(self.mesh == self._me)
        return [int(i) for i in found[0]] if len(found) else None

    def get_local_rank(self, mesh_dim: int | str | None = None) -> int:
        coordinate = self.get_coordinate()
        if coordinate is None:
            raise DistributedError(f"rank {self._me} is not in this mesh ({self.mesh.tolist()})")
        return coordinate[self._dim(mesh_dim)]

    def __getitem__(self, name: str | tuple[str, ...]) -> DeviceMesh:
        """The sub-mesh of the named dimensions (in the mesh's order) holding me; its
        groups are this mesh's along those dimensions."""
        names = name if isinstance(name, tuple) else (name,)
        dims = [self._dim(n) for n in names]
        if not dims or dims != sorted(set(dims)):
            raise DistributedError(
                f"Invalid mesh_dim_names {names} specified: name distinct dimensions of "
                f"{self.mesh_dim_names} in that order"
            )
        coordinate = self.get_coordinate()
        if coordinate is None:
            raise DistributedError(f"rank {self._me} is not in this mesh ({self.mesh.tolist()})")
        index = tuple(slice(None) if d in dims else coordinate[d] for d in range(self.ndim))
        assert self.mesh_dim_names is not None  # _dim() named them
        return DeviceMesh(
            self.device_type,
            self.mesh[index],
            mesh_dim_names=tuple(self.mesh_dim_names[d] for d in dims),
            _groups={i: self._groups[d] for i, d in enumerate(dims) if d in self._groups},
            _rank=self._me,
        )

    def __repr__(self) -> str:
        return (
            f"DeviceMesh({self.device_type!r}, {self.mesh.tolist()}, names={self.mesh_dim_names})"
        )
