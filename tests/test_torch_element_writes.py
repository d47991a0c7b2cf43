"""``index_fill``, ``fill_diagonal_``, ``put_``/``put``, ``masked_scatter``,
``take_along_dim`` and ``argwhere``: NumPy's values, torch's errors, and device kernels
that cost time in both modes and give the same values on both backends."""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode, simulated_ps

import kernbench.torch as torch
from kernbench.errors import TensorError, TensorIndexError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


RNG = np.random.default_rng(5)
A = RNG.standard_normal((4, 5)).astype(np.float32)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_fill_fills_the_named_slices(ctx, dim):
    index = np.array([0, -1, 2])
    want = A.copy()
    slices = [slice(None)] * 2
    slices[dim] = index
    want[tuple(slices)] = 7.5
    t = torch.from_numpy(A)
    got = t.index_fill(dim, torch.from_numpy(index), 7.5)
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(t.numpy(), A)  # not in place
    same = torch.index_fill(t, dim, torch.from_numpy(index), torch.tensor(7.5))
    np.testing.assert_array_equal(same.numpy(), want)
    view = torch.from_numpy(A.copy()).T  # through a strided view
    view.index_fill_(1 - dim if dim >= 0 else 0, torch.from_numpy(index), 7.5)
    np.testing.assert_array_equal(view.numpy(), want.T)
    s = torch.tensor(1.0).index_fill_(0, torch.tensor(0), 3.0)
    assert s.item() == 3.0


def test_index_fill_errors_are_torchs(ctx):
    t = torch.ones(3, 4)
    with pytest.raises(TensorError, match="Expected dtype int64 for index"):
        t.index_fill_(0, torch.tensor([0], dtype=torch.int32), 1.0)
    with pytest.raises(TensorError, match="Index has to be a vector/scalar"):
        t.index_fill_(0, torch.zeros(1, 1, dtype=torch.int64), 1.0)
    with pytest.raises(TensorError, match="only supports a 0-dimensional value tensor"):
        t.index_fill_(0, torch.tensor([0]), torch.ones(2))
    with pytest.raises(TensorIndexError, match=r"index 3 is out of range for dimension 0"):
        t.index_fill_(0, torch.tensor([3]), 1.0)
    with pytest.raises(TensorError, match="dim 2 is out of range"):
        t.index_fill_(2, torch.tensor([0]), 1.0)


@pytest.mark.parametrize(("shape", "wrap"), [((4, 5), False), ((7, 3), False), ((7, 3), True)])
def test_fill_diagonal_is_numpys(ctx, shape, wrap):
    want = np.zeros(shape, np.float32)
    np.fill_diagonal(want, 2.0, wrap=wrap)
    got = torch.zeros(*shape).fill_diagonal_(2.0, wrap=wrap)
    np.testing.assert_array_equal(got.numpy(), want)


def test_fill_diagonal_of_a_cube_and_a_view_and_errors(ctx):
    want = np.zeros((3, 3, 3), np.int64)
    np.fill_diagonal(want, 4)
    assert torch.zeros(3, 3, 3, dtype=torch.int64).fill_diagonal_(4).tolist() == want.tolist()
    base = torch.zeros(4, 6)
    base[:, 1:5].fill_diagonal_(1.0)  # a strided view: the diagonal of the window
    want = np.zeros((4, 6), np.float32)
    np.fill_diagonal(want[:, 1:5], 1.0)
    np.testing.assert_array_equal(base.numpy(), want)
    with pytest.raises(TensorError, match="dimensions must larger than 1"):
        torch.zeros(3).fill_diagonal_(1)
    with pytest.raises(TensorError, match="all dimensions of input must be of equal length"):
        torch.zeros(2, 3, 3).fill_diagonal_(1)


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_writes_the_flattened_elements(ctx, accumulate):
    index = np.array([0, 7, -1, 3, 7 if accumulate else 8])
    source = np.arange(1, 6, dtype=np.float32)
    want = A.copy().reshape(-1)
    if accumulate:
        np.add.at(want, index, source)
    else:
        want[index] = source
    t = torch.from_numpy(A)
    got = t.put(torch.from_numpy(index), torch.from_numpy(source), accumulate=accumulate)
    np.testing.assert_array_equal(got.numpy(), want.reshape(A.shape))
    np.testing.assert_array_equal(t.numpy(), A)
    also = torch.put(t, torch.from_numpy(index), torch.from_numpy(source), accumulate)
    np.testing.assert_array_equal(also.numpy(), got.numpy())
    view = torch.from_numpy(A.T.copy()).T  # row-major order of the view, not the storage
    view.put_(torch.from_numpy(index), torch.from_numpy(source), accumulate)
    np.testing.assert_array_equal(view.numpy(), want.reshape(A.shape))


def test_put_errors_are_torchs(ctx):
    t = torch.ones(2, 3)
    with pytest.raises(TensorIndexError, match="Expected a long tensor for index"):
        t.put_(torch.tensor([0], dtype=torch.int32), torch.ones(1))
    with pytest.raises(TensorError, match="self and source expected to have the same dtype"):
        t.put_(torch.tensor([0]), torch.ones(1, dtype=torch.float64))
    with pytest.raises(TensorError, match=r"source.numel\(\) = 2, index.numel\(\) = 1"):
        t.put_(torch.tensor([0]), torch.ones(2))
    with pytest.raises(TensorIndexError, match="tried to access index 6 on a tensor of 6"):
        t.put_(torch.tensor([6]), torch.ones(1))


def test_masked_scatter_takes_source_in_order(ctx):
    mask = RNG.random((4, 5)) > 0.5
    source = np.arange(100, 120, dtype=np.float32).reshape(4, 5)
    want = A.copy()
    want[mask] = source.reshape(-1)[: mask.sum()]
    t = torch.from_numpy(A)
    got = t.masked_scatter(torch.from_numpy(mask), torch.from_numpy(source))
    np.testing.assert_array_equal(got.numpy(), want)
    row = np.array([True, False, True, False, False])  # broadcast over the rows
    want = A.copy()
    want[np.broadcast_to(row, A.shape)] = source.reshape(-1)[:8]
    got = torch.masked_scatter(t, torch.from_numpy(row), torch.from_numpy(source))
    np.testing.assert_array_equal(got.numpy(), want)
    small = torch.zeros(3)
    assert small.masked_scatter(torch.ones(2, 3, dtype=torch.bool), torch.arange(6.0)).shape == (
        2,
        3,
    )
    t.masked_scatter_(torch.from_numpy(row), torch.from_numpy(source))
    np.testing.assert_array_equal(t.numpy(), want)


def test_masked_scatter_errors_are_torchs(ctx):
    t = torch.zeros(2, 3)
    with pytest.raises(TensorError, match="only supports boolean masks"):
        t.masked_scatter_(torch.ones(2, 3, dtype=torch.uint8), torch.ones(6))
    with pytest.raises(TensorError, match="expected self and source to have same dtypes"):
        t.masked_scatter_(torch.ones(2, 3, dtype=torch.bool), torch.ones(6, dtype=torch.int64))
    with pytest.raises(TensorError, match=r"Number of elements of source < number of ones"):
        t.masked_scatter_(torch.ones(2, 3, dtype=torch.bool), torch.ones(5))
    with pytest.raises(TensorError, match="cannot be broadcast to self's shape"):
        torch.zeros(3).masked_scatter_(torch.ones(2, 3, dtype=torch.bool), torch.ones(6))


def test_take_along_dim_is_numpys(ctx):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    order = np.argsort(x, axis=1)
    t = torch.from_numpy(x)
    got = torch.take_along_dim(t, torch.from_numpy(order), dim=1)
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x, order, 1))
    one = np.array([[[2]], [[0]], [[1]]])  # broadcast over dims 1 and 2
    got = t.take_along_dim(torch.from_numpy(one), 0)
    np.testing.assert_array_equal(
        got.numpy(), np.take_along_axis(x, np.broadcast_to(one, (3, 4, 5)), 0)
    )
    flat = np.array([0, 59, 17])
    np.testing.assert_array_equal(
        t.take_along_dim(torch.from_numpy(flat)).numpy(), x.reshape(-1)[flat]
    )
    with pytest.raises(TensorError, match="dtype of indices should be Long"):
        t.take_along_dim(torch.tensor([0], dtype=torch.int32))
    with pytest.raises(TensorError, match="should have the same number of dimensions"):
        t.take_along_dim(torch.tensor([0]), 0)


def test_argwhere_is_numpys(ctx):
    x = np.array([[0, 1.5, 0], [2, 0, -1]], np.float32)
    got = torch.argwhere(torch.from_numpy(x))
    assert got.dtype == torch.int64
    np.testing.assert_array_equal(got.numpy(), np.argwhere(x))
    assert torch.from_numpy(x).argwhere().shape == (3, 2)
    assert torch.tensor(0.0).argwhere().shape == (0, 0)


def _writes(context):
    rng = np.random.default_rng(6)
    x = torch.from_numpy(rng.standard_normal((64, 48)).astype(np.float32))
    index = torch.from_numpy(np.arange(0, 3000, 7))
    start = context.now
    results = [
        x.index_fill(1, torch.tensor([1, 5, 9]), -1.0),
        x.clone().fill_diagonal_(3.0),
        x.put(index, torch.ones(index.numel())),
        x.take_along_dim(torch.from_numpy(np.argsort(rng.random((64, 48)), 1)), 1),
    ]
    return context.now - start, results


def test_the_writes_cost_time_in_both_modes_and_agree_on_both_backends():
    times, (detailed, fast) = in_every_mode(_writes)
    assert all(t > 0 for t in times) and times[0] == times[1]
    assert_same_values(detailed, fast)


def test_a_put_costs_more_for_more_elements():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.zeros(256, 256)
        small, large = (torch.zeros(n, dtype=torch.int64) for n in (256, 16384))
        cost = [
            simulated_ps(context, lambda i=i: x.put_(i, torch.ones(i.numel()), accumulate=True))
            for i in (small, large)
        ]
        assert 0 < cost[0] < cost[1]


def test_masked_scatter_runs_timing_only_as_if_the_mask_took_what_source_can_fill():
    times = []
    for timing_only in (False, True):
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            x, mask = torch.zeros(64, 64), torch.ones(64, 64, dtype=torch.bool)
            source = torch.ones(64 * 64)
            times.append(
                simulated_ps(context, lambda x=x, m=mask, s=source: x.masked_scatter_(m, s))
            )
    assert 0 < times[0] == times[1]


def test_take_along_dim_takes_out(ctx):
    out = torch.empty(1, 2)
    got = torch.take_along_dim(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 0]]), 1, out=out)
    assert got is out and out.tolist() == [[2.0, 1.0]]
