"""``torch.utils.data``: samplers give torch's orders and partitions (drawn on the host,
repeatable under ``manual_seed``), loaders give NumPy's batches, and arguments torch
refuses are refused with its messages."""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import DataError, UnsupportedNameError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    get_worker_info,
    random_split,
)


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


class Squares(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, i: int) -> int:
        return i * i

    def __len__(self) -> int:
        return self.n


class Stream(IterableDataset):
    def __init__(self, n: int, with_len: bool = True) -> None:
        self.n, self.with_len = n, with_len

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        if not self.with_len:
            raise TypeError("Stream has no len()")
        return self.n


# ---------------------------------------------------------------------------- samplers
def test_random_orders_are_permutations_repeated_by_the_seed_and_new_each_pass(ctx):
    data = range(50)
    assert list(SequentialSampler(data)) == list(range(50))
    torch.manual_seed(7)
    sampler = RandomSampler(data)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(50)) and first != second
    torch.manual_seed(7)
    assert list(RandomSampler(data)) == first  # the seed repeats the passes
    fixed = torch.Generator().manual_seed(3)
    again = torch.Generator().manual_seed(3)
    assert list(RandomSampler(data, generator=fixed)) == list(RandomSampler(data, generator=again))
    many = list(RandomSampler(range(10), num_samples=25))
    assert len(many) == 25 and sorted(many[:10]) == sorted(many[10:20]) == list(range(10))
    drawn = list(RandomSampler(range(4), replacement=True, num_samples=100))
    assert len(drawn) == 100 and set(drawn) == {0, 1, 2, 3}
    subset = list(SubsetRandomSampler([10, 20, 30, 40]))
    assert sorted(subset) == [10, 20, 30, 40]
    weighted = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 400))
    counts = np.bincount(weighted, minlength=4)
    assert counts[0] == counts[2] == 0 and 0.2 < counts[1] / 400 < 0.3
    assert sorted(WeightedRandomSampler([1, 1, 1], 3, replacement=False)) == [0, 1, 2]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: RandomSampler(range(3), num_samples=0), "num_samples should be a positive"),
        (lambda: RandomSampler(range(3), replacement=1), "replacement should be a boolean"),
        (lambda: RandomSampler([]), r"num_samples=0"),
        (lambda: BatchSampler(range(3), 0, False), "batch_size should be a positive integer"),
        (lambda: BatchSampler(range(3), True, False), "batch_size should be a positive integer"),
        (lambda: BatchSampler(range(3), 2, "no"), "drop_last should be a boolean value"),
        (lambda: WeightedRandomSampler([1, 1], 3, False), "cannot sample n_sample > prob"),
        (lambda: WeightedRandomSampler([[1.0]], 1), "weights should be a 1d sequence"),
        (lambda: WeightedRandomSampler([0.0, -1.0], 1), "non-negative"),
    ],
)
def test_sampler_arguments_are_checked_as_torch_checks_them(ctx, make, message):
    with pytest.raises(DataError, match=message) as info:
        make()
    assert isinstance(info.value, ValueError)


def test_batches_and_their_count(ctx):
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3
    assert len(BatchSampler(range(7), 3, True)) == 2


def _torch_distributed_order(n, replicas, rank, seed, epoch, shuffle, drop_last):
    """torch's DistributedSampler.__iter__, over the same permutation."""
    gen = torch.Generator().manual_seed(seed + epoch)
    indices = gen.rng.permutation(n).tolist() if shuffle else list(range(n))
    if drop_last and n % replicas:
        samples = math.ceil((n - replicas) / replicas)
    else:
        samples = math.ceil(n / replicas)
    total = samples * replicas
    if not drop_last:
        pad = total - len(indices)
        indices += indices[:pad] if pad <= len(indices) else (indices * math.ceil(pad / n))[:pad]
    else:
        indices = indices[:total]
    return indices[rank:total:replicas]


@pytest.mark.parametrize("n", [3, 10, 12])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_sampler_shares_one_order_among_the_ranks(ctx, n, drop_last, shuffle):
    replicas = 4
    for epoch in (0, 1):
        parts = []
        for rank in range(replicas):
            sampler = DistributedSampler(
                range(n), replicas, rank, shuffle=shuffle, seed=5, drop_last=drop_last
            )
            sampler.set_epoch(epoch)
            part = list(sampler)
            assert part == _torch_distributed_order(n, replicas, rank, 5, epoch, shuffle, drop_last)
            assert len(part) == len(sampler)
            parts.append(part)
        merged = sorted(i for part in parts for i in part)
        if drop_last:
            assert len(merged) == len(set(merged)) == replicas * (n // replicas)
        else:  # every index, the first few twice to fill the last round
            assert set(merged) == set(range(n)) and len(merged) == replicas * math.ceil(n / 4)
    shuffled = DistributedSampler(range(12), 2, 0, seed=5)
    first = list(shuffled)
    shuffled.set_epoch(1)
    assert list(shuffled) != first and sorted(first) != first
    with pytest.raises(DataError, match=r"Invalid rank 4, rank should be in the interval \[0, 3\]"):
        DistributedSampler(range(4), 4, 4)


def test_distributed_sampler_reads_the_process_group():
    def body():
        dist.init_process_group()
        x = torch.arange(10, dtype=torch.float32)
        loader = DataLoader(TensorDataset(x), batch_size=2, sampler=DistributedSampler(x))
        return [v for (batch,) in loader for v in batch.tolist()]

    result = kernbench.simulate(body, topology="multi_sip", world_size=2)
    first, second = result.returns
    assert sorted(first + second) == list(range(10)) and len(first) == len(second) == 5


# ------------------------------------------------------------------------------- loader
def test_a_loader_gives_numpys_batches_of_a_tensor_dataset(ctx):
    a = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    labels = np.arange(10)
    ds = TensorDataset(torch.from_numpy(a), torch.from_numpy(labels))
    loader = DataLoader(ds, batch_size=4)
    assert len(loader) == 3
    batches = list(loader)
    for k, (xb, yb) in enumerate(batches):
        np.testing.assert_array_equal(xb.numpy(), a[4 * k : 4 * k + 4])
        assert yb.dtype is torch.int64 and yb.tolist() == labels[4 * k : 4 * k + 4].tolist()
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [len(b[1]) for b in DataLoader(ds, batch_size=4, drop_last=True)] == [4, 4]
    torch.manual_seed(2)
    shuffled = [v for _, yb in DataLoader(ds, batch_size=3, shuffle=True) for v in yb.tolist()]
    assert sorted(shuffled) == list(range(10)) and shuffled != list(range(10))
    one = [yb for _, yb in DataLoader(ds, batch_size=None)][:2]
    assert [t.ndim for t in one] == [0, 0] and [t.item() for t in one] == [0, 1]
    assert get_worker_info() is None
    workers = DataLoader(ds, batch_size=4, num_workers=2, prefetch_factor=2)
    assert [yb.tolist() for _, yb in workers] == [yb.tolist() for _, yb in loader]


def test_default_collate_by_kind(ctx):
    Point = namedtuple("Point", "x y")
    assert default_collate([1, 2, 3]).dtype is torch.int64
    assert default_collate([1.5, 2.0]).dtype is torch.float64
    assert default_collate([True, False]).dtype is torch.bool
    assert default_collate(["a", "b"]) == ["a", "b"]
    arrays = default_collate([np.ones(2, np.float32), np.zeros(2, np.float32)])
    assert arrays.dtype is torch.float32 and arrays.tolist() == [[1, 1], [0, 0]]
    rows = default_collate([{"v": 1, "s": "a"}, {"v": 2, "s": "b"}])
    assert rows["v"].tolist() == [1, 2] and rows["s"] == ["a", "b"]
    points = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert type(points) is Point and points.x.tolist() == [1, 3]
    pairs = default_collate([(1, 2), (3, 4)])
    assert type(pairs) is list and [p.tolist() for p in pairs] == [[1, 3], [2, 4]]
    with pytest.raises(DataError, match="stack expects each tensor to be equal size"):
        default_collate([torch.ones(2), torch.ones(3)])
    with pytest.raises(DataError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(DataError, match="batch must contain tensors, numpy arrays, numbers"):
        default_collate([object(), object()])


def test_iterable_datasets_are_batched_in_order(ctx):
    batches = [b.tolist() for b in DataLoader(Stream(7), batch_size=3)]
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Stream(7), batch_size=3, drop_last=True)] == [
        [0, 1, 2],
        [3, 4, 5],
    ]
    assert len(DataLoader(Stream(7), batch_size=3)) == 3
    with pytest.raises(TypeError, match="no len"):
        len(DataLoader(Stream(7, with_len=False), batch_size=3))
    chained = [b.tolist() for b in DataLoader(Stream(2) + Stream(3), batch_size=5)]
    assert chained == [[0, 1, 0, 1, 2]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shuffle": True, "sampler": [0, 1]}, "sampler option is mutually exclusive with shuffle"),
        (
            {"batch_sampler": [[0]], "batch_size": 2},
            "batch_sampler option is mutually exclusive with batch_size",
        ),
        ({"num_workers": -1}, "num_workers option should be non-negative"),
        ({"prefetch_factor": 2}, "prefetch_factor option could only be specified in multi"),
        ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
        ({"timeout": -1}, "timeout option should be non-negative"),
        ({"batch_size": None, "drop_last": True}, "batch_size=None option disables auto-bat"),
    ],
)
def test_loader_arguments_are_checked_as_torch_checks_them(ctx, kwargs, message):
    with pytest.raises(DataError, match=message):
        DataLoader(Squares(4), **kwargs)
    with pytest.raises(DataError, match="expected unspecified shuffle option"):
        DataLoader(Stream(3), shuffle=True)


def test_loading_costs_the_batches_device_copies_and_sampling_costs_nothing(ctx):
    x = torch.ones(64, 256)
    ds = TensorDataset(x)
    start = ctx.now
    order = list(RandomSampler(ds))
    assert ctx.now == start and sorted(order) == list(range(64))
    batches = list(DataLoader(ds, batch_size=16))
    spent = ctx.now - start
    start = ctx.now
    kept = [torch.stack([x[i] for i in range(16 * k, 16 * k + 16)]) for k in range(4)]
    assert spent == ctx.now - start > 0  # what stacking the rows costs, nothing else
    assert len(batches) == len(kept) == 4


# ----------------------------------------------------------------------------- datasets
def test_subsets_concatenations_and_stacks_index_as_torch(ctx):
    cat = Squares(3) + Squares(2)
    assert isinstance(cat, ConcatDataset) and len(cat) == 5
    assert [cat[i] for i in range(5)] == [0, 1, 4, 0, 1] and cat[-1] == 1
    with pytest.raises(DataError, match="absolute value of index should not exceed"):
        cat[-6]
    with pytest.raises(IndexError):
        cat[5]
    sub = Subset(Squares(10), [9, 2])
    assert len(sub) == 2 and sub[0] == 81
    stacked = StackDataset(Squares(3), Squares(3))
    assert stacked[2] == (4, 4)
    assert StackDataset(a=Squares(2), b=Squares(2))[1] == {"a": 1, "b": 1}
    with pytest.raises(DataError, match="Size mismatch between tensors"):
        TensorDataset(torch.ones(3), torch.ones(4))
    with pytest.raises(DataError, match="ConcatDataset does not support IterableDataset"):
        ConcatDataset([Stream(2)])


def test_random_split_by_counts_and_fractions(ctx):
    torch.manual_seed(0)
    parts = random_split(Squares(10), [3, 7])
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    torch.manual_seed(0)
    assert random_split(Squares(10), [3, 7])[0].indices == parts[0].indices
    fractions = random_split(Squares(11), [0.5, 0.3, 0.2], torch.Generator().manual_seed(1))
    assert [len(p) for p in fractions] == [6, 3, 2]  # floor 5, 3, 2, the remainder to the first
    with pytest.raises(DataError, match="Sum of input lengths does not equal"):
        random_split(Squares(10), [3, 3])
    with pytest.raises(DataError, match="Fraction at index 1 is not between 0 and 1"):
        random_split(Squares(10), [0.7, 1.2, -0.9])


def test_names_torch_utils_lacks_say_what_to_use(ctx):
    with pytest.raises(UnsupportedNameError, match=r"torch.utils.tensorboard is not in KernBench"):
        torch.utils.tensorboard  # noqa: B018
