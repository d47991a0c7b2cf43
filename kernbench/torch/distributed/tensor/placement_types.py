"""``torch.distributed.tensor``'s placements as names: ``Shard(dim)``, ``Replicate()``,
``Partial()``.

There is no DTensor here (ADR 0023): a placement only says, in the arguments of the
tensor-parallel styles, how a module's input or output is laid out over the mesh.
"""

from __future__ import annotations

import operator

from kernbench.errors import DistributedError

__all__ = ["Partial", "Placement", "Replicate", "Shard"]


class Placement:
    """The base of the placements (torch's ``Placement``)."""

    def is_shard(self, dim: int | None = None) -> bool:
        return isinstance(self, Shard) and (dim is None or self.dim == dim)

    def is_replicate(self) -> bool:
        return isinstance(self, Replicate)

    def is_partial(self) -> bool:
        return isinstance(self, Partial)


class Shard(Placement):
    """Split over the mesh along tensor dimension ``dim``."""

    def __init__(self, dim: int) -> None:
        try:
            self.dim = operator.index(dim)
        except TypeError:
            raise DistributedError(f"Shard(dim): dim must be an int, got {dim!r}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self) -> int:
        return hash(("Shard", self.dim))

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"


class Replicate(Placement):
    """The whole tensor on every rank of the mesh."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Replicate)

    def __hash__(self) -> int:
        return hash("Replicate")

    def __repr__(self) -> str:
        return "Replicate()"


class Partial(Placement):
    """Partial values on every rank, to be reduced with ``reduce_op``."""

    def __init__(self, reduce_op: str = "sum") -> None:
        self.reduce_op = reduce_op

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self) -> int:
        return hash(("Partial", self.reduce_op))

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"
