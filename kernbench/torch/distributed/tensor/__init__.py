"""``torch.distributed.tensor`` without DTensor: the placement classes, ``DeviceMesh`` and
``init_device_mesh``, and :mod:`~kernbench.torch.distributed.tensor.parallel`
(``parallelize_module`` with ``ColwiseParallel`` and ``RowwiseParallel``).

``DTensor``, ``distribute_tensor``, ``distribute_module`` and the DTensor factories are
refused, naming the call and what to use instead (ADR 0023): the tensor-parallel styles
leave each rank's parameters as plain local shards.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import unsupported_name
from kernbench.torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from kernbench.torch.distributed.tensor import parallel
from kernbench.torch.distributed.tensor.placement_types import (
    Partial,
    Placement,
    Replicate,
    Shard,
)

__all__ = [
    "DeviceMesh",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "init_device_mesh",
    "parallel",
]

_NO_DTENSOR = (
    "there is no DTensor: tensor parallelism here is parallelize_module with ColwiseParallel "
    "and RowwiseParallel (torch.distributed.tensor.parallel), whose parameters are plain local "
    "shards; or shard tensors yourself and call the collectives, as benches/tp_mlp.py does"
)
_HINTS = dict.fromkeys(
    (
        "DTensor",
        "distribute_tensor",
        "distribute_module",
        "empty",
        "full",
        "ones",
        "rand",
        "randn",
        "zeros",
        "experimental",
        "debug",
    ),
    _NO_DTENSOR,
)


def __getattr__(name: str) -> Any:
    raise unsupported_name(
        "kernbench.torch.distributed.tensor", "torch.distributed.tensor", name, __all__, _HINTS
    )
