"""``kthvalue`` and ``mode`` as a sort and a pick, against NumPy (values, indices as the
stable order gives them, torch's run counting), errors, and what they cost in both
modes and on both backends."""

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


def _kth_reference(a, k, axis):
    order = np.argsort(a, axis=axis, kind="stable")  # NaN last, above every number
    index = np.take(order, [k - 1], axis=axis)
    return np.take_along_axis(a, index, axis).squeeze(axis), index.squeeze(axis)


def _mode_reference(line):
    """torch's CPU loop over the sorted line: the longest run of equal values (the first
    of equally long ones, NaN a run of one) and the index sorted last in it."""
    order = np.argsort(line, kind="stable")
    s = line[order]
    best, best_at, run = 0, 0, 0
    for i in range(len(s)):
        run += 1
        if i == len(s) - 1 or s[i] != s[i + 1]:
            if run > best:
                best, best_at = run, i
            run = 0
    return s[best_at], order[best_at]


def _ties(shape, dtype, seed=0):
    a = np.random.default_rng(seed).integers(-4, 4, shape).astype(dtype)
    if a.dtype.kind == "f":
        a.flat[::7] = np.nan
    return a


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
@pytest.mark.parametrize("shape", [(9,), (4, 6), (3, 5, 4)])
def test_kthvalue_along_every_dim_is_the_kth_of_the_stable_order(ctx, dtype, shape):
    a = _ties(shape, dtype)
    t = torch.from_numpy(a)
    for dim in range(-len(shape), len(shape)):
        for k in (1, 2, a.shape[dim]):
            values, indices = _kth_reference(a, k, dim)
            result = t.kthvalue(k, dim)
            assert type(result).__name__ == "kthvalue" and result.indices.dtype == torch.int64
            assert result.values.dtype == t.dtype
            np.testing.assert_array_equal(result.values.numpy(), values)
            np.testing.assert_array_equal(result.indices.numpy(), indices)
            kept = torch.kthvalue(t, k, dim, keepdim=True)
            np.testing.assert_array_equal(kept.values.numpy(), np.expand_dims(values, dim))
            np.testing.assert_array_equal(kept.indices.numpy(), np.expand_dims(indices, dim))


def test_kthvalue_defaults_to_the_last_dim_and_takes_a_0d_tensor(ctx):
    t = torch.tensor([[3.0, 1.0, 2.0], [0.5, -1.0, 9.0]])
    assert t.kthvalue(2).values.tolist() == [2.0, 0.5]
    assert t.kthvalue(2).indices.tolist() == [2, 0]
    scalar = torch.tensor(4.0).kthvalue(1)
    assert scalar.values.item() == 4.0 and scalar.indices.item() == 0
    assert scalar.values.ndim == 0


def test_kthvalue_errors_are_torchs(ctx):
    t = torch.ones(2, 3)
    with pytest.raises(TensorError, match="selected number k out of range for dimension 1"):
        t.kthvalue(4)
    with pytest.raises(TensorError, match="selected number k out of range for dimension 0"):
        t.kthvalue(0, 0)
    with pytest.raises(TensorIndexError, match="Expected reduction dim 1 to have non-zero"):
        torch.ones(2, 0).kthvalue(1)
    with pytest.raises(TensorError, match="not implemented for 'Bool'"):
        torch.ones(3, dtype=torch.bool).kthvalue(1)
    with pytest.raises(TensorError, match="k must be an int"):
        t.kthvalue(1.5)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
@pytest.mark.parametrize("shape", [(11,), (5, 7), (3, 4, 6)])
def test_mode_along_every_dim_counts_runs_as_torch(ctx, dtype, shape):
    a = _ties(shape, dtype, seed=3)
    t = torch.from_numpy(a)
    for dim in range(-len(shape), len(shape)):
        moved = np.moveaxis(a, dim, -1)
        expected = [_mode_reference(line) for line in moved.reshape(-1, moved.shape[-1])]
        values = np.array([v for v, _ in expected], a.dtype).reshape(moved.shape[:-1])
        indices = np.array([i for _, i in expected]).reshape(moved.shape[:-1])
        result = t.mode(dim)
        assert type(result).__name__ == "mode" and result.indices.dtype == torch.int64
        np.testing.assert_array_equal(result.values.numpy(), values)
        np.testing.assert_array_equal(result.indices.numpy(), indices)
        kept = torch.mode(t, dim, keepdim=True)
        np.testing.assert_array_equal(kept.indices.numpy(), np.expand_dims(indices, dim))


def test_mode_is_the_smallest_most_frequent_value_at_its_last_index(ctx):
    result = torch.tensor([5, 2, 5, 2, 7, 2, 5]).mode()
    assert (result.values.item(), result.indices.item()) == (2, 5)
    result = torch.tensor([1.0, float("nan"), 3.0, float("nan")]).mode()
    assert (result.values.item(), result.indices.item()) == (1.0, 0)  # each NaN counts once
    scalar = torch.tensor(7).mode()
    assert (scalar.values.item(), scalar.indices.item()) == (7, 0)
    with pytest.raises(TensorIndexError, match=r"mode\(\): Expected reduction dim 0"):
        torch.ones(0).mode()


def _ranks(context):
    x = torch.from_numpy(np.random.default_rng(6).integers(0, 9, (64, 300)).astype(np.float32))
    start = context.now
    results = [*x.kthvalue(17, 1), *x.mode(0), x.mode(1, keepdim=True).values]
    return context.now - start, results


def test_ranks_take_the_same_time_timing_only_and_the_same_values_on_the_fast_backend():
    times, (detailed, fast) = in_every_mode(_ranks)
    assert times[0] == times[1] > 0
    assert_same_values(detailed, fast)


def test_a_kthvalue_or_mode_costs_about_a_sort():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        x = torch.ones(1024, 1024)
        sort = simulated_ps(context, lambda: x.sort(1))
        kth = simulated_ps(context, lambda: x.kthvalue(3, 1))
        mode = simulated_ps(context, lambda: x.mode(1))
        assert sort < kth < 1.2 * sort
        assert sort < mode < 2 * sort
