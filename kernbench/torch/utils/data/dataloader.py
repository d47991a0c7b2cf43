"""``DataLoader``: batches of a dataset in a sampler's order, as torch's.

Arguments are checked as torch checks them (the same ``ValueError`` messages).  All
loading happens in the rank's own process: ``num_workers`` > 0 gives the batches
``num_workers=0`` gives (a map-style dataset's in the same order; an iterable dataset
is read once, not once per worker), ``worker_init_fn(0)`` is called at the start of
each pass, and ``pin_memory``, ``timeout`` and ``prefetch_factor`` change nothing.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator
from typing import Any

from kernbench.errors import DataError
from kernbench.torch.utils.data.collate import default_collate, default_convert
from kernbench.torch.utils.data.datasets import IterableDataset
from kernbench.torch.utils.data.samplers import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

__all__ = ["DataLoader", "default_collate", "get_worker_info"]


def get_worker_info() -> None:
    """None: data is loaded in the rank's own process (no worker processes)."""
    return None


class _InfiniteConstantSampler(Sampler):
    """An iterable dataset's sampler: None, forever."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class DataLoader:
    """Iterating it gives the dataset's batches (see the module docstring)."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if (
            isinstance(num_workers, bool)
            or not isinstance(num_workers, numbers.Integral)
            or num_workers < 0
        ):
            raise DataError(
                "num_workers option should be non-negative; use num_workers=0 to disable "
                "multiprocessing."
            )
        if timeout < 0:
            raise DataError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise DataError(
                "prefetch_factor option could only be specified in multiprocessing.let "
                "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor "
                "to None."
            )
        if persistent_workers and num_workers == 0:
            raise DataError("persistent_workers option needs num_workers > 0")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (False, None):
                raise DataError(
                    "DataLoader with IterableDataset: expected unspecified shuffle option, "
                    f"but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise DataError(
                    "DataLoader with IterableDataset: expected unspecified sampler option, "
                    f"but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise DataError(
                    "DataLoader with IterableDataset: expected unspecified batch_sampler "
                    f"option, but got batch_sampler={batch_sampler}"
                )
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise DataError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise DataError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                    "sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise DataError(
                "batch_size=None option disables auto-batching and is mutually exclusive "
                "with drop_last"
            )
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers and self.worker_init_fn is not None:
            self.worker_init_fn(0)
        collate = self.collate_fn
        if isinstance(self.dataset, IterableDataset):
            items = iter(self.dataset)
            if self.batch_size is None:
                for item in items:
                    yield collate(item)
                return
            while True:
                batch = [item for _, item in zip(range(self.batch_size), items, strict=False)]
                if not batch or (self.drop_last and len(batch) < self.batch_size):
                    return
                yield collate(batch)
                if len(batch) < self.batch_size:
                    return
        dataset = self.dataset
        if self.batch_sampler is not None:
            fetch = getattr(dataset, "__getitems__", None)
            for indices in self.batch_sampler:
                samples = fetch(indices) if fetch is not None else [dataset[i] for i in indices]
                yield collate(samples)
            return
        for index in self.sampler:
            yield collate(dataset[index])

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            length = len(self.dataset)  # a TypeError when it has none, as torch's
            if self.batch_size is not None:
                if self.drop_last:
                    return length // self.batch_size
                return math.ceil(length / self.batch_size)
            return length
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
