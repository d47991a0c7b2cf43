"""``torch.distributed._tensor``: the older path of ``torch.distributed.tensor`` that
pytorch/examples' tensor-parallel scripts still import from; the same names."""

from kernbench.torch.distributed._tensor import device_mesh
from kernbench.torch.distributed.tensor import (
    DeviceMesh,
    Partial,
    Placement,
    Replicate,
    Shard,
    init_device_mesh,
)

__all__ = [
    "DeviceMesh",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "device_mesh",
    "init_device_mesh",
]
