"""Datasets of ``torch.utils.data``: ``Dataset``, ``TensorDataset``, ``Subset``,
``ConcatDataset``, ``StackDataset``, ``IterableDataset``, ``ChainDataset`` and
``random_split``, as torch's.

An item of a ``TensorDataset`` is a tuple of views (``t[i]``): it costs nothing until
a batch is stacked from them.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from kernbench.errors import DataError
from kernbench.torch import random as torch_random
from kernbench.torch.tensor import Tensor

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]


class Dataset:
    """A map-style dataset: ``dataset[i]`` is its i-th item (subclasses define it and
    usually ``__len__``); ``a + b`` concatenates two."""

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read by iterating it (subclasses define ``__iter__``); ``a + b`` chains
    two."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Item ``i`` is ``tuple(t[i] for t in tensors)``: tensors of one first-dim size."""

    def __init__(self, *tensors: Tensor) -> None:
        for t in tensors:
            if not isinstance(t, Tensor):
                raise DataError(
                    f"TensorDataset takes tensors, got a {type(t).__name__} (make it one with "
                    "torch.tensor or torch.from_numpy)"
                )
            if t.ndim == 0:
                raise DataError("TensorDataset: a 0-dim tensor has no first dim to index")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            raise DataError(f"Size mismatch between tensors: first dims {sizes}")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0] if self.tensors else 0


class StackDataset(Dataset):
    """Datasets of one length side by side: item ``i`` is a tuple (positional datasets) or
    a dict (keyword ones) of their items ``i``."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args and kwargs:
            raise DataError(
                "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                "input/output, but both types are given."
            )
        datasets = args or tuple(kwargs.values())
        if not datasets:
            raise DataError("At least one dataset should be passed")
        self._length = len(datasets[0])  # type: ignore[arg-type]
        if any(self._length != len(d) for d in datasets):  # type: ignore[arg-type]
            raise DataError("Size mismatch between datasets")
        self.datasets: Any = args if args else kwargs

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {k: dataset[index] for k, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """Map-style datasets one after another."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise DataError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise DataError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> Any:
        if idx < 0:
            if -idx > len(self):
                raise DataError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        if which == len(self.datasets):
            raise IndexError(f"index {idx} is out of range for a dataset of {len(self)}")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise DataError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise DataError("ChainDataset only supports IterableDataset")
            total += len(d)  # type: ignore[arg-type]
        return total


class Subset(Dataset):
    """The items of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(
    dataset: Dataset, lengths: Sequence[int | float], generator: Any = None
) -> list[Subset]:
    """``dataset`` split at random into subsets of ``lengths`` (counts, or fractions
    summing to 1: the remainder goes one each to the first splits), as torch's."""
    lengths = list(lengths)
    n = len(dataset)  # type: ignore[arg-type]
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, fraction in enumerate(lengths):
            if fraction < 0 or fraction > 1:
                raise DataError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * fraction)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warnings.warn(
                    f"Length of split at index {i} is 0. This might result in an empty dataset.",
                    stacklevel=2,
                )
        lengths = counts
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in lengths):
        raise DataError(
            f"random_split: lengths must be non-negative ints or fractions summing to 1, got "
            f"{lengths}"
        )
    if sum(lengths) != n:
        raise DataError("Sum of input lengths does not equal the length of the input dataset!")
    order = torch_random.resolve(generator).permutation(n).tolist()
    return [
        Subset(dataset, order[end - length : end])
        for end, length in zip(itertools.accumulate(lengths), lengths, strict=True)
    ]
