"""``torch.distributed.optim``: :class:`ZeroRedundancyOptimizer` (in
:mod:`~kernbench.torch.distributed.optim.zero_redundancy_optimizer`).

The RPC-based optimizers (``DistributedOptimizer``) and the local-SGD ones are not here:
there is no RPC framework and no DDP communication hook to build them on.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import unsupported_name
from kernbench.torch.distributed.optim.zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]

_HINTS = {
    "DistributedOptimizer": "there is no torch.distributed.rpc: run one optimizer per rank "
    "(torch.optim) or shard its state with ZeroRedundancyOptimizer",
    "PostLocalSGDOptimizer": "there are no DDP communication hooks: average the parameters "
    "yourself every few steps with all_reduce",
}


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.torch.distributed.optim", "dist.optim", name, __all__, _HINTS)
