"""``DistributedSampler``: each rank's share of a dataset, as torch's.

The same ``seed + epoch`` gives every rank the same shuffled order; the order is padded
by repeating its start (or cut, with ``drop_last``) to a multiple of the replicas, and
rank ``r`` takes every ``num_replicas``-th index from ``r``.  Call ``set_epoch`` each
epoch for a new order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from kernbench.errors import DataError
from kernbench.torch import distributed as dist
from kernbench.torch import random as torch_random
from kernbench.torch.utils.data.samplers import Sampler, boolean

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """The indices of ``dataset`` rank ``rank`` of ``num_replicas`` loads."""

    def __init__(
        self,
        dataset: Any,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
            raise DataError(f"num_replicas must be a positive int, got {num_replicas!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise DataError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = boolean(drop_last, "drop_last")
        n = len(dataset)
        if self.drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            rng = torch_random.Generator().manual_seed(self.seed + self.epoch).rng
            indices = rng.permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next pass shuffles for (every rank must set the same)."""
        self.epoch = epoch
