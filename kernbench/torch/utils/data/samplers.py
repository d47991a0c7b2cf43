"""Samplers of ``torch.utils.data``: the order a data loader fetches a dataset in.

Orders are drawn on the host with the rank's generator (or the one given), as torch
draws them on the CPU, so they cost no simulated time and ``torch.manual_seed``
repeats them.  Arguments are checked as torch checks them, with its messages.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from kernbench.errors import DataError
from kernbench.torch import random as torch_random
from kernbench.torch.tensor import Tensor

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "fresh_rng",
]


def fresh_rng(generator: Any) -> np.random.Generator:
    """``generator``'s NumPy generator, or, without one, a generator seeded by a draw from
    the rank's default generator (as torch seeds a fresh ``torch.Generator`` from the
    default one each epoch, so each pass over the data has its own order)."""
    if generator is not None:
        return torch_random.resolve(generator)
    seed = int(torch_random.resolve(None).integers(0, 1 << 63))
    return torch_random.Generator().manual_seed(seed).rng


def positive_int(value: Any, name: str) -> int:
    """``value`` if it is a positive int (not a bool), else torch's ValueError."""
    if isinstance(value, bool):
        raise DataError(f"{name} should be a positive integer value, but got {name}={value}")
    try:
        number = operator.index(value)
    except TypeError:
        raise DataError(
            f"{name} should be a positive integer value, but got {name}={value}"
        ) from None
    if number <= 0:
        raise DataError(f"{name} should be a positive integer value, but got {name}={value}")
    return number


def boolean(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise DataError(f"{name} should be a boolean value, but got {name}={value}")
    return value


class Sampler:
    """The base of samplers: iterating one gives dataset indices (or batches of them)."""

    def __init__(self, data_source: Any = None) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order of the dataset's indices (``num_samples`` of them; with
    ``replacement``, drawn independently)."""

    def __init__(
        self,
        data_source: Any,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Any = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = boolean(replacement, "replacement")
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None:
            positive_int(num_samples, "num_samples")
        else:
            positive_int(self.num_samples, "num_samples")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = fresh_rng(self.generator)
        count = self.num_samples
        if self.replacement:
            for _ in range(count // 32):
                yield from rng.integers(0, n, 32).tolist()
            yield from rng.integers(0, n, count % 32).tolist()
            return
        for _ in range(count // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n).tolist()[: count % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order (drawn again on each pass)."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = torch_random.resolve(self.generator)
        for i in rng.permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(
        self,
        weights: Sequence[float] | Tensor,
        num_samples: int,
        replacement: bool = True,
        generator: Any = None,
    ) -> None:
        self.num_samples = positive_int(num_samples, "num_samples")
        self.replacement = boolean(replacement, "replacement")
        values = weights.numpy(force=True) if isinstance(weights, Tensor) else weights
        self.weights = np.asarray(values, dtype=np.float64)
        if self.weights.ndim != 1:
            raise DataError(
                "weights should be a 1d sequence but given weights have shape "
                f"{tuple(self.weights.shape)}"
            )
        if (self.weights < 0).any() or not np.isfinite(self.weights).all():
            raise DataError("weights must be finite and non-negative (as torch.multinomial)")
        if not self.weights.sum() > 0:
            raise DataError("weights must hold at least one positive weight")
        if not self.replacement and self.num_samples > int((self.weights > 0).sum()):
            raise DataError(
                f"cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                f"({self.num_samples} from {int((self.weights > 0).sum())} non-zero weights)"
            )
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = torch_random.resolve(self.generator)
        p = self.weights / self.weights.sum()
        drawn = rng.choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Batches of ``batch_size`` indices from ``sampler`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler: Iterable[Any], batch_size: int, drop_last: bool) -> None:
        self.batch_size = positive_int(batch_size, "batch_size")
        self.drop_last = boolean(drop_last, "drop_last")
        self.sampler = sampler

    def __iter__(self) -> Iterator[list[Any]]:
        batch: list[Any] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
