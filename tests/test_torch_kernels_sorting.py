"""``sort``, ``argsort`` and ``topk`` as device kernels (a bitonic network; twice for
8-byte dtypes), against NumPy's stable sort (values, int64 indices, NaN last as torch),
errors, and what they cost."""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import simulated_ps as cost

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.sorting import MAX_BITONIC


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _stable(a, axis, descending):
    """NumPy's stable order, descending as torch's (equal values keep their order)."""
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    if a.dtype.kind == "f":
        keys = -a
    elif a.dtype.kind == "i":
        keys = ~a  # -a - 1: reversed, and no overflow at the dtype's minimum
    else:
        keys = np.iinfo(a.dtype).max - a
    if a.dtype.kind == "f":  # NaN first when descending, as torch
        keys = np.where(np.isnan(a), -np.inf, keys)
        order = np.argsort(keys, axis=axis, kind="stable")
        nan_first = np.argsort(~np.isnan(np.take_along_axis(a, order, axis)), axis, kind="stable")
        return np.take_along_axis(order, nan_first, axis)
    return np.argsort(keys, axis=axis, kind="stable")


@pytest.mark.parametrize("shape", [(9,), (4, 300), (3, 5, 7), (130, 2)])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])  # one bitonic network; two
def test_sort_matches_a_stable_numpy_sort_along_every_dim(ctx, shape, descending, dtype):
    a = np.random.default_rng(3).integers(-20, 20, shape).astype(dtype)  # many ties
    t = torch.from_numpy(a)
    for dim in range(-len(shape), len(shape)):
        order = _stable(a, dim, descending)
        result = t.sort(dim, descending=descending)
        assert type(result).__name__ == "sort" and result.indices.dtype == torch.int64
        np.testing.assert_array_equal(result.indices.numpy(), order)
        np.testing.assert_array_equal(result.values.numpy(), np.take_along_axis(a, order, dim))
        values, indices = torch.sort(t, dim, descending)
        np.testing.assert_array_equal(indices.numpy(), order)
        np.testing.assert_array_equal(
            torch.argsort(t, dim=dim, descending=descending).numpy(), order
        )


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_nan_sorts_last_and_first_descending_as_torch(ctx, dtype):
    a = np.array([3.0, np.nan, -np.inf, 1.0, np.nan, np.inf, -0.0], dtype=np.float32)
    t = torch.from_numpy(a).to(getattr(torch, dtype))
    up = t.sort()
    np.testing.assert_array_equal(up.values.float().numpy(), np.sort(a))
    assert up.indices.tolist() == [2, 6, 3, 0, 5, 1, 4]
    down = t.sort(descending=True)
    assert down.indices.tolist() == [1, 4, 5, 0, 3, 6, 2]


@pytest.mark.parametrize(
    "dtype", ["int32", "int64", "uint8", "uint32", "int8", "float16", "float64", "bool"]
)
def test_sort_keeps_the_dtype(ctx, dtype):
    a = np.random.default_rng(1).integers(0, 100, 40).astype(dtype)
    t = torch.from_numpy(a)
    result = t.sort(stable=True)
    assert result.values.dtype == t.dtype
    np.testing.assert_array_equal(result.values.numpy(), np.sort(a, kind="stable"))
    np.testing.assert_array_equal(result.indices.numpy(), np.argsort(a, kind="stable"))


@pytest.mark.parametrize("dtype", ["int64", "uint64", "float64"])
@pytest.mark.parametrize("descending", [False, True])
def test_eight_byte_values_sort_by_all_64_bits(ctx, dtype, descending):
    rng = np.random.default_rng(5)
    if dtype == "float64":
        a = rng.standard_normal(3000) * 10.0 ** rng.integers(-300, 300, 3000)
        a[::11] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 5e-324, -5e-324] * 39
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, 3000, dtype=dtype, endpoint=True)
        a[::11] = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=dtype).repeat(55)[:273]
        a[1::13] = a[2]  # ties across the whole range, on both words
    t = torch.from_numpy(a)
    order = _stable(a, 0, descending)
    result = t.sort(descending=descending)
    np.testing.assert_array_equal(result.indices.numpy(), order)
    np.testing.assert_array_equal(result.values.numpy(), a[order])
    top = t.topk(17, largest=descending)
    np.testing.assert_array_equal(top.indices.numpy(), order[:17])


def test_a_long_int64_line_sorts_past_the_old_rank_count_cap(ctx):
    a = np.random.default_rng(6).integers(-(2**62), 2**62, 70000)
    a[::5] = a[1]
    result = torch.from_numpy(a).sort()
    np.testing.assert_array_equal(result.indices.numpy(), np.argsort(a, kind="stable"))


@pytest.mark.parametrize("largest", [True, False])
def test_topk_gives_the_k_largest_or_smallest_in_order(ctx, largest):
    a = np.random.default_rng(2).standard_normal((5, 200)).astype(np.float32)
    t = torch.from_numpy(a)
    for dim, k in ((1, 7), (0, 3), (-1, 200), (1, 0)):
        order = _stable(a, dim, largest)
        expected = np.take(order, np.arange(k), axis=dim)
        result = t.topk(k, dim, largest=largest)
        assert type(result).__name__ == "topk"
        np.testing.assert_array_equal(result.indices.numpy(), expected)
        np.testing.assert_array_equal(result.values.numpy(), np.take_along_axis(a, expected, dim))
    values, indices = torch.topk(t, 2, largest=largest, sorted=False)
    assert tuple(values.shape) == (5, 2) and indices.dtype == torch.int64


def test_sort_of_zero_dim_and_empty_tensors(ctx):
    values, indices = torch.tensor(2.5).sort()
    assert values.item() == 2.5 and indices.item() == 0 and values.ndim == 0
    assert tuple(torch.ones(0, 4).sort(0).values.shape) == (0, 4)
    assert tuple(torch.ones(3, 0).topk(0).values.shape) == (3, 0)


def test_sort_and_topk_errors_name_the_call(ctx):
    t = torch.ones(2, 5)
    with pytest.raises(TensorError, match=r"topk of .*selected index k out of range .*\[0, 5\]"):
        t.topk(6)
    with pytest.raises(TensorError, match="selected index k out of range"):
        t.topk(-1)
    with pytest.raises(TensorError, match="out of range"):
        t.sort(2)
    with pytest.raises(TensorError, match="descending must be True or False"):
        t.sort(descending="yes")
    with pytest.raises(TensorError, match="out must be a .values, indices. pair"):
        torch.sort(t, out=torch.empty(2, 5))
    with pytest.raises(TensorError, match=r"sort of .*a line of 1048577 elements; lines of at"):
        torch.zeros(MAX_BITONIC + 1, dtype=torch.int8).sort()
    values, indices = torch.empty(2, 5), torch.empty(2, 5, dtype=torch.int64)
    result = torch.sort(t, out=(values, indices))
    assert result.values is values and result.indices is indices


def test_sort_cost_follows_the_network_it_runs():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        # float32: a bitonic network, log2(L) * (log2(L) + 1) / 2 stages a line of L
        short, long, longest = torch.ones(4096, 256), torch.ones(1024, 1024), torch.ones(16, 65536)
        elementwise = cost(context, lambda: short + short)  # the same elements each
        by_short = cost(context, lambda: short.sort())
        assert elementwise < by_short <= 6 * elementwise
        assert 1.1 * by_short < cost(context, lambda: long.sort())
        assert 2 * by_short < cost(context, lambda: longest.sort()) <= 6 * by_short
        assert cost(context, lambda: long.topk(5)) >= 0.9 * cost(context, lambda: long.sort())
        # 8-byte dtypes: the network twice (by the low, then the high 32 bits)
        for wide in (short.to(torch.float64), short.to(torch.int64)):
            assert 1.7 * by_short < cost(context, wide.sort) < 2.5 * by_short


def test_sort_takes_the_same_time_timing_only():
    times = []
    for timing_only in (False, True):
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            x = torch.ones(40, 100)
            start = context.now
            x.sort(1)
            x.topk(3, 0)
            times.append(context.now - start)
    assert times[0] == times[1]
