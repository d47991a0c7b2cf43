"""``torch.distributed.fsdp.fully_sharded_data_parallel``: the module path torch's FSDP
tutorial imports ``CPUOffload`` and ``BackwardPrefetch`` from; the names are the
package's (:mod:`kernbench.torch.distributed.fsdp`)."""

from kernbench.torch.distributed.fsdp import (
    BackwardPrefetch,
    CPUOffload,
    FullStateDictConfig,
    FullyShardedDataParallel,
    MixedPrecision,
    ShardingStrategy,
    StateDictType,
)

__all__ = [
    "BackwardPrefetch",
    "CPUOffload",
    "FullStateDictConfig",
    "FullyShardedDataParallel",
    "MixedPrecision",
    "ShardingStrategy",
    "StateDictType",
]
