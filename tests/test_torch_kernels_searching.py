"""``torch.searchsorted`` and ``torch.bucketize`` as a binary search kernel, against NumPy's
``searchsorted`` (and torch's own bisection where a NaN in the sequence makes them
differ), dtypes, errors, and their cost in both modes and on both backends."""

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


def _torch_bisect(line, value, right):
    """torch's cus_lower_bound / cus_upper_bound, step by step."""
    start, end = 0, len(line)
    while start < end:
        mid = start + ((end - start) >> 1)
        ahead = line[mid] > value if right else line[mid] >= value
        if ahead:
            end = mid
        else:
            start = mid + 1
    return start


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int8", "float16"])
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_of_a_1d_sequence_matches_numpy(ctx, dtype, right):
    rng = np.random.default_rng(0)
    seq = np.sort(rng.integers(-40, 40, 57)).astype(dtype)  # repeated values
    values = rng.integers(-50, 50, (6, 11)).astype(dtype)
    side = "right" if right else "left"
    result = torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(values), right=right)
    assert result.dtype == torch.int64 and tuple(result.shape) == values.shape
    np.testing.assert_array_equal(result.numpy(), np.searchsorted(seq, values, side))
    by_side = torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(values), side=side)
    np.testing.assert_array_equal(by_side.numpy(), np.searchsorted(seq, values, side))
    small = torch.bucketize(
        torch.from_numpy(values), torch.from_numpy(seq), out_int32=True, right=right
    )
    assert small.dtype == torch.int32
    np.testing.assert_array_equal(small.numpy(), np.searchsorted(seq, values, side))


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_of_an_nd_sequence_searches_the_matching_line(ctx, right):
    rng = np.random.default_rng(1)
    seq = np.sort(rng.standard_normal((3, 4, 33)), axis=-1)
    values = rng.standard_normal((3, 4, 9))
    values[0, 0, :3] = seq[0, 0, :3]  # equal to elements
    values[1, 2, 0] = np.nan  # goes past every number
    got = torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(values), right=right)
    side = "right" if right else "left"
    lines = zip(seq.reshape(12, 33), values.reshape(12, 9), strict=True)
    expected = np.stack([np.searchsorted(s, v, side) for s, v in lines]).reshape(3, 4, 9)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_sorter_numbers_nans_and_promotion(ctx):
    rng = np.random.default_rng(2)
    unsorted = rng.standard_normal(40).astype(np.float32)
    values = rng.standard_normal(25).astype(np.float32)
    sorter = np.argsort(unsorted, kind="stable")
    got = torch.searchsorted(
        torch.from_numpy(unsorted), torch.from_numpy(values), sorter=torch.from_numpy(sorter)
    )
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(unsorted, values, sorter=sorter))
    seq = torch.tensor([1.0, 3.0, 3.0, 5.0, 7.0])
    scalar = torch.searchsorted(seq, 3)  # a number: a 0-d result
    assert scalar.ndim == 0 and scalar.item() == 1
    assert torch.searchsorted(seq, 3.5, right=True).item() == 3
    assert torch.bucketize(torch.tensor(7.0), seq, right=True).item() == 5
    # a NaN in the sequence: torch's bisection, not NumPy's NaN-last rule
    nan_seq = np.array([1, 3, 3, 5, 7, np.nan], np.float32)
    probe = np.array([0, 3, 4, 7, 9, np.nan], np.float32)
    for right in (False, True):
        got = torch.searchsorted(torch.from_numpy(nan_seq), torch.from_numpy(probe), right=right)
        assert got.tolist() == [_torch_bisect(nan_seq, v, right) for v in probe]
    # int64 sequence, float values: both compared as float32, as torch promotes
    ints = torch.tensor([1, 2, 4, 8])
    assert torch.searchsorted(ints, torch.tensor([2.5, 0.5, 8.0])).tolist() == [2, 0, 3]
    assert torch.searchsorted(ints, 2.5).item() == 2
    assert torch.searchsorted(torch.ones(0), torch.tensor([1.0, 2.0])).tolist() == [0, 0]
    out = torch.empty(3, dtype=torch.int64)
    assert torch.searchsorted(ints, torch.tensor([1, 2, 3]), out=out) is out
    assert out.tolist() == [0, 1, 2]


def test_searchsorted_and_bucketize_errors_say_what_torch_says(ctx):
    seq = torch.tensor([1.0, 2.0, 3.0])
    values = torch.tensor([1.5])
    with pytest.raises(TensorError, match="side can only be 'left' or 'right' but got 'middle'"):
        torch.searchsorted(seq, values, side="middle")
    with pytest.raises(TensorError, match="side and right can't be set to opposites"):
        torch.searchsorted(seq, values, side="left", right=True)
    with pytest.raises(TensorError, match="boundaries tensor should have positive dimension"):
        torch.searchsorted(torch.tensor(1.0), values)
    with pytest.raises(TensorError, match="first N-1 dimensions of boundaries tensor"):
        torch.searchsorted(torch.ones(2, 3), torch.ones(3, 1))
    with pytest.raises(TensorError, match="input value can be a scalar only when boundaries"):
        torch.searchsorted(torch.ones(2, 3), 1.0)
    with pytest.raises(TensorError, match="sorter must be a tensor of long dtype"):
        torch.searchsorted(seq, values, sorter=torch.tensor([0, 1, 2], dtype=torch.int32))
    with pytest.raises(TensorError, match="boundary and sorter must have the same size"):
        torch.searchsorted(seq, values, sorter=torch.tensor([0, 1]))
    with pytest.raises(TensorError, match="sorter index out of range"):
        torch.searchsorted(seq, values, sorter=torch.tensor([0, 1, 3]))
    with pytest.raises(TensorError, match="boundaries tensor must be 1 dimension, but got dim.2."):
        torch.bucketize(values, torch.ones(2, 3))
    with pytest.raises(TensorError, match="not implemented for 'Bool'"):
        torch.searchsorted(torch.tensor([False, True]), torch.tensor([True]))


def _searches(context):
    rng = np.random.default_rng(3)
    seq = torch.from_numpy(np.sort(rng.standard_normal((16, 1000)), axis=1).astype(np.float32))
    values = torch.from_numpy(rng.standard_normal((16, 500)).astype(np.float32))
    flat = seq[0].contiguous()
    start = context.now
    results = [
        torch.searchsorted(seq, values),
        torch.bucketize(values, flat, right=True),
        torch.searchsorted(flat, values, sorter=torch.arange(1000)),
    ]
    elapsed = context.now - start
    return elapsed, results


def test_search_takes_the_same_time_timing_only_and_the_same_values_on_the_fast_backend():
    times, (detailed, fast) = in_every_mode(_searches)
    assert times[0] == times[1]
    assert_same_values(detailed, fast)


def test_a_search_costs_log2_of_the_line_loads_a_value():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        values = torch.ones(1 << 18)

        def cost(call):
            return simulated_ps(context, call)

        copy = cost(lambda: values.clone())
        lines = [torch.ones(n) for n in (16, 256, 65536)]
        costs = [cost(lambda s=s: torch.searchsorted(s, values)) for s in lines]
        # 5, 9 and 17 loads a value: more for a longer line, but a line 4096 times as long
        # costs less than twice as much
        assert copy < costs[0] < costs[1] < costs[2] < 2 * costs[0]
