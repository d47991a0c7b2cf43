"""``torch.isin`` (a sort and a binary search) and ``unique_consecutive`` (a comparison,
a running sum and a gather): NumPy's values, torch's result types and errors, and device
ops that cost time in both modes and give the same values on both backends."""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode, simulated_ps

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


RNG = np.random.default_rng(9)


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "float64"])
@pytest.mark.parametrize("invert", [False, True])
def test_isin_is_numpys(ctx, dtype, invert):
    elements = RNG.integers(-5, 15, (6, 7)).astype(dtype)
    test = RNG.integers(0, 10, (3, 4)).astype(dtype)
    got = torch.isin(torch.from_numpy(elements), torch.from_numpy(test), invert=invert)
    assert got.dtype == torch.bool and tuple(got.shape) == elements.shape
    np.testing.assert_array_equal(got.numpy(), np.isin(elements, test, invert=invert))


def test_isin_promotes_takes_numbers_and_leaves_nan_out(ctx):
    floats = torch.tensor([1.0, 1.5, float("nan"), 3.0])
    ints = torch.tensor([3, 1, 2])
    assert torch.isin(floats, ints).tolist() == [True, False, False, True]
    assert torch.isin(ints, torch.tensor([2.0, float("nan")])).tolist() == [False, False, True]
    assert torch.isin(floats, torch.tensor([float("nan")])).tolist() == [False] * 4
    assert torch.isin(ints, 2).tolist() == [False, False, True]
    assert torch.isin(ints, 2, invert=True).tolist() == [True, True, False]
    scalar = torch.isin(2, ints)
    assert scalar.shape == () and scalar.item() is True
    assert torch.isin(ints, torch.tensor([], dtype=torch.int64)).tolist() == [False] * 3
    assert torch.isin(ints, torch.ones(0), invert=True).tolist() == [True] * 3
    bools = torch.tensor([True, False, True])
    assert torch.isin(bools, torch.tensor([False])).tolist() == [False, True, False]
    strided = torch.arange(12).reshape(3, 4).T  # a view as test elements
    assert torch.isin(torch.tensor([11, 12]), strided).tolist() == [True, False]
    assert torch.isin(ints, ints, assume_unique=True).tolist() == [True] * 3
    with pytest.raises(TensorError, match="cannot both be numbers"):
        torch.isin(1, 2)
    with pytest.raises(TensorError, match="test_elements must be a Tensor or a number"):
        torch.isin(ints, "a")


def _runs_reference(a):
    flat = a.reshape(-1)
    starts = np.ones(flat.size, bool)
    starts[1:] = flat[1:] != flat[:-1]
    positions = np.flatnonzero(starts)
    counts = np.diff(np.append(positions, flat.size))
    return flat[starts], (np.cumsum(starts) - 1).reshape(a.shape), counts


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_unique_consecutive_is_the_runs_of_the_flattened_tensor(ctx, dtype):
    a = RNG.integers(0, 3, (5, 8)).astype(dtype)
    values, inverse, counts = _runs_reference(a)
    t = torch.from_numpy(a)
    out = torch.unique_consecutive(t)
    assert out.dtype == t.dtype
    np.testing.assert_array_equal(out.numpy(), values)
    got = t.unique_consecutive(return_inverse=True, return_counts=True)
    assert len(got) == 3 and got[1].dtype == got[2].dtype == torch.int64
    for g, want in zip(got, (values, inverse, counts), strict=True):
        np.testing.assert_array_equal(g.numpy(), want)
    only_inverse = torch.unique_consecutive(t, return_inverse=True)
    np.testing.assert_array_equal(only_inverse[1].numpy(), inverse)
    only_counts = torch.unique_consecutive(t.T, return_counts=True)  # a strided view
    np.testing.assert_array_equal(only_counts[1].numpy(), _runs_reference(a.T.copy())[2])


def test_unique_consecutive_edges_and_the_dim_it_refuses(ctx):
    nans = torch.tensor([1.0, float("nan"), float("nan"), 1.0, 1.0])
    values, counts = nans.unique_consecutive(return_counts=True)
    assert counts.tolist() == [1, 1, 1, 2]  # each NaN its own run, as torch's loop
    empty = torch.ones(0).unique_consecutive(return_inverse=True, return_counts=True)
    assert [tuple(e.shape) for e in empty] == [(0,), (0,), (0,)]
    assert torch.tensor(4).unique_consecutive(return_inverse=True)[1].shape == ()
    with pytest.raises(TensorError, match=r"unique_consecutive\(dim=0\) is not supported"):
        torch.unique_consecutive(torch.ones(2, 2), dim=0)


def _membership(context):
    rng = np.random.default_rng(10)
    elements = torch.from_numpy(rng.integers(0, 500, (64, 64)))
    test = torch.from_numpy(rng.integers(0, 500, 300))
    sorted_runs = torch.from_numpy(np.sort(rng.integers(0, 50, 4096)))
    start = context.now
    results = [torch.isin(elements, test), *sorted_runs.unique_consecutive(True, True)]
    return context.now - start, results


def test_isin_and_unique_consecutive_run_on_the_device_in_every_mode():
    times, (detailed, fast) = in_every_mode(_membership)
    assert all(t > 0 for t in times)
    assert_same_values(detailed, fast)
    assert detailed[0].any() and detailed[3].sum() == 4096


def test_an_isin_costs_more_for_more_test_elements():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        elements = torch.zeros(4096, dtype=torch.int64)
        small, large = (torch.zeros(n, dtype=torch.int64) for n in (64, 8192))
        costs = [simulated_ps(context, lambda t=t: torch.isin(elements, t)) for t in (small, large)]
        assert 0 < costs[0] < costs[1]
