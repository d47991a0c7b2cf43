"""``DeviceMesh``: global ranks in an n-D grid, with one process group per dimension.

:func:`~kernbench.torch.distributed.device_mesh.init_device_mesh` makes one
on every rank; a one-dimensional mesh can be passed wherever a ``group`` is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import DistributedError

__all__ = ["DeviceMesh"]


class DeviceMesh:
    """A mesh of global ranks; ``get_group(dim)`` is the group along ``dim`` holding me."""

    def __init__(
        self,
        device_type: str,
        mesh: np.ndarray,
        names: tuple[str, ...] | None,
        groups: dict[int, Any],
        me: int,
    ) -> None:
        self.device_type = device_type
        self.mesh = mesh
        self.mesh_dim_names = names
        self._groups = groups
        self._me = me

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
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self) -> list[Any]:
        """The group along each dimension holding me, in dimension order."""
        return [self._groups[d] for d in range(self.ndim)]

    def size(self, mesh_dim: int | str | None = None) -> int:
        return (
            int(self.mesh.size) if mesh_dim is None else int(self.mesh.shape[self._dim(mesh_dim)])
        )

    def get_rank(self) -> int:
        return self._me

    def get_coordinate(self) -> list[int]:
        return [int(i) for i in np.argwhere(self.mesh == self._me)[0]]

    def get_local_rank(self, mesh_dim: int | str | None = None) -> int:
        return self.get_coordinate()[self._dim(mesh_dim)]

    def __getitem__(self, name: str | tuple[str, ...]) -> DeviceMesh:
        if isinstance(name, tuple):
            if len(name) != 1:
                raise DistributedError("only one-dimensional sub-meshes are supported")
            name = name[0]
        dim = self._dim(name)
        coord = self.get_coordinate()
        index = tuple(slice(None) if d == dim else coord[d] for d in range(self.ndim))
        return DeviceMesh(
            self.device_type,
            self.mesh[index],
            (self.mesh_dim_names[dim],),
            {0: self._groups[dim]},
            self._me,
        )

    def __repr__(self) -> str:
        return (
            f"DeviceMesh({self.device_type!r}, {self.mesh.tolist()}, names={self.mesh_dim_names})"
        )
