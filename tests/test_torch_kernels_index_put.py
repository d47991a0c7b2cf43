"""``index_put_``/``index_put`` (and ``torch.index_put``) against NumPy's indexed
assignment and ``np.add.at`` (``accumulate``), torch's checks, and the cost in both modes
and on both backends."""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode

import kernbench.torch as torch
from kernbench.errors import TensorError, TensorTypeError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_index_put_writes_or_accumulates_as_numpy(ctx, dtype):
    rng = np.random.default_rng(0)
    base = rng.integers(-5, 5, (6, 5, 4)).astype(dtype)
    rows = rng.integers(-6, 6, (7,))  # repeated and negative indices
    cols = rng.integers(0, 4, (7,))
    once = rng.permutation(6)[:4] - 3  # no repeats: every write lands
    for key, shape in (
        ((rows,), (7, 5, 4)),
        ((rows, None, cols), (7, 5)),
        ((None, rows[:3] % 5), (6, 3, 4)),
        ((once, None, once % 4), (4, 5)),
    ):
        values = rng.integers(-3, 4, shape).astype(dtype)
        numpy_key = tuple(slice(None) if k is None else k for k in key)
        torch_key = tuple(None if k is None else torch.from_numpy(k) for k in key)
        summed = base.copy()
        np.add.at(summed, numpy_key, values)
        got = torch.from_numpy(base).index_put(torch_key, torch.from_numpy(values), accumulate=True)
        np.testing.assert_array_equal(got.numpy(), summed)
        if key[0] is once:  # repeated indices keep one of the writes (torch leaves which open)
            expected = base.copy()
            expected[numpy_key] = values
            written = torch.from_numpy(base).index_put_(torch_key, torch.from_numpy(values))
            np.testing.assert_array_equal(written.numpy(), expected)


def test_index_put_broadcasts_takes_masks_and_writes_views(ctx):
    t = torch.zeros(4, 3)
    rows = torch.tensor([0, 0, 2])
    assert t.index_put_((rows,), torch.tensor([1.0, 2.0, 3.0]), accumulate=True) is t
    assert t.tolist() == [[2.0, 4.0, 6.0], [0.0] * 3, [1.0, 2.0, 3.0], [0.0] * 3]
    mask = torch.tensor([True, False, True, False])
    added = torch.index_put(t, (mask,), torch.tensor(9.0), True)
    assert added.tolist()[0] == [11.0, 13.0, 15.0] and added.tolist()[2] == [10.0, 11.0, 12.0]
    wide = torch.zeros(3, 6)
    view = wide[:, ::2]  # not one run of memory: written through a copy
    view.index_put_((torch.tensor([1, 1]), torch.tensor([0, 2])), torch.tensor([4.0, 5.0]), True)
    assert wide.tolist()[1] == [4.0, 0.0, 0.0, 0.0, 5.0, 0.0]
    torch.index_put_(wide, (torch.tensor(2),), torch.ones(6))  # a 0-d index: one row
    assert wide.tolist()[2] == [1.0] * 6


def test_index_put_checks_as_torch(ctx):
    t = torch.zeros(3, 2)
    with pytest.raises(TensorError, match="Index put requires the source and destination dtypes"):
        t.index_put_((torch.tensor([0]),), torch.ones(2, dtype=torch.float64))
    with pytest.raises(TensorTypeError, match="indices must be a tuple of Tensors"):
        t.index_put_(torch.tensor([0]), torch.ones(2))
    with pytest.raises(TensorTypeError, match="values must be a Tensor"):
        t.index_put_((torch.tensor([0]),), 1.0)
    with pytest.raises(TensorError, match="index 3 is out of bounds for dimension 0 with size 3"):
        t.index_put_((torch.tensor([3]),), torch.ones(2), accumulate=True)
    with pytest.raises(TensorError, match="accumulate must be True or False"):
        t.index_put_((torch.tensor([0]),), torch.ones(2), accumulate="yes")


def _puts(context):
    rng = np.random.default_rng(1)
    rows = torch.from_numpy(rng.integers(0, 500, 3000))
    values = torch.from_numpy(rng.standard_normal((3000, 64)).astype(np.float32))
    table = torch.zeros(500, 64)
    start = context.now
    table.index_put_((rows,), values)
    copy = table.index_put((rows[:200],), values[:200], accumulate=True)
    elapsed = context.now - start
    return elapsed, [table, copy]


def test_index_put_takes_the_same_time_timing_only_and_the_same_values_on_the_fast_backend():
    times, (detailed, fast) = in_every_mode(_puts)
    # an accumulating put adds through tl.atomic_add, whose traffic counts the distinct places
    # the lanes hit (one in timing-only mode, where the indices read as zeros): a little less
    assert 0.9 * times[0] <= times[1] <= times[0]
    assert_same_values(detailed, fast)
