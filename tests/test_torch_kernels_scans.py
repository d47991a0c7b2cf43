"""``prod``, ``cumsum`` and ``cumprod`` as device kernels along any dim, against NumPy
(values, torch's dtypes, errors), and what they cost."""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode
from run_modes import simulated_ps as cost

import kernbench.torch as torch
from kernbench.errors import TensorError, TensorTypeError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed=0, low=0.5, high=1.5):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(7,), (3, 1500, 5), (4, 2, 1100), (2049, 3)])
def test_cumsum_and_cumprod_along_every_dim(ctx, shape):
    a = _values(shape)
    t = torch.from_numpy(a)
    for dim in range(-len(shape), len(shape)):
        np.testing.assert_allclose(
            t.cumsum(dim).numpy(), np.cumsum(a.astype(np.float64), dim), rtol=1e-5
        )
        near_one = 1 + (a - 1) / 100  # long running products stay normal floats
        np.testing.assert_allclose(
            torch.cumprod(torch.from_numpy(near_one), dim).numpy(),
            np.cumprod(near_one.astype(np.float64), dim),
            rtol=1e-4,
        )
        assert t.cumsum(dim).dtype == torch.float32 and t.cumsum(dim).shape == t.shape


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "int64", "bool"])
def test_integer_and_bool_scans_give_int64_as_torch(ctx, dtype):
    a = np.array([[1, 0, 3, 1], [2, 5, 1, 1]], dtype=dtype)
    t = torch.from_numpy(a)
    for result, expected in (
        (t.cumsum(1), np.cumsum(a, 1, dtype=np.int64)),
        (torch.cumsum(t, 0), np.cumsum(a, 0, dtype=np.int64)),
        (t.cumprod(1), np.cumprod(a, 1, dtype=np.int64)),
    ):
        assert result.dtype == torch.int64
        np.testing.assert_array_equal(result.numpy(), expected)


def test_scans_take_a_dtype_wrap_in_it_and_work_in_place(ctx):
    t = torch.tensor([1.5, 2.5, 3.5])
    assert t.cumsum(0, dtype=torch.int32).tolist() == [1, 3, 6]  # converted first, as torch
    big = torch.tensor([100, 100, 100], dtype=torch.int8)
    assert big.cumprod(0, dtype=torch.int8).tolist() == [100, 16, 64]  # wraps as torch's
    assert big.cumprod(0).tolist() == [100, 10000, 1000000]
    u = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
    assert u.cumsum_(1) is u and u.tolist() == [[1, 3], [3, 7]] and u.dtype == torch.int32
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    col = v[:, 1]  # a view that is not one run of memory, written back in place
    col.cumprod_(0)
    assert v.tolist() == [[1.0, 2.0], [3.0, 8.0]]
    out = torch.empty(3)
    assert torch.cumsum(t, 0, out=out) is out and out.tolist() == [1.5, 4.0, 7.5]


def test_scans_of_empty_and_zero_dim_tensors(ctx):
    assert tuple(torch.ones(0, 3).cumsum(0).shape) == (0, 3)
    assert torch.tensor(2.5).cumsum(0).item() == 2.5
    assert torch.tensor(3).cumprod(-1).dtype == torch.int64


def test_scans_need_a_dim_and_a_valid_one(ctx):
    with pytest.raises(TensorError, match=r"cumsum\(\) of .*missing the dim"):
        torch.ones(3).cumsum()
    with pytest.raises(TensorTypeError, match=r"torch.cumprod: .*dim"):
        torch.cumprod(torch.ones(3))
    with pytest.raises(TensorError, match="out of range"):
        torch.ones(3).cumsum(1)


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod_matches_numpy(ctx, dim, keepdim):
    a = _values((6, 1300), seed=2, low=0.99, high=1.01)
    t = torch.from_numpy(a)
    result = t.prod() if dim is None else t.prod(dim, keepdim)
    if dim is None:
        expected = np.prod(a.astype(np.float64))
    else:
        expected = np.prod(a.astype(np.float64), dim, keepdims=keepdim)
    assert result.dtype == torch.float32 and tuple(result.shape) == np.shape(expected)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-4)


def test_prod_of_integers_bools_and_nothing_as_torch(ctx):
    i = torch.tensor([[1, 2, 3], [4, 5, -6]], dtype=torch.int32)
    assert i.prod().item() == -720 and i.prod().dtype == torch.int64
    assert torch.prod(i, 1).tolist() == [6, -120]
    assert torch.prod(i, 0, keepdim=True).tolist() == [[4, 10, -18]]
    assert torch.prod(i, dtype=torch.float32).dtype == torch.float32
    assert torch.tensor([True, False]).prod().item() == 0
    assert torch.tensor([True, False]).prod().dtype == torch.int64
    assert torch.prod(torch.empty(0)).item() == 1.0
    assert torch.ones(2, 0).prod(1).tolist() == [1.0, 1.0]
    nan = torch.tensor([2.0, float("nan"), 0.0])
    assert np.isnan(nan.prod().item())
    with pytest.raises(TensorError, match=r"prod\(dim=\(0, 1\)\): torch.prod takes one dim"):
        i.prod((0, 1))
    out = torch.empty((), dtype=torch.int64)
    assert torch.prod(i, out=out) is out and out.item() == -720


def test_scans_and_prod_cost_about_one_streaming_pass():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        for shape in ((4096, 1000), (64, 1 << 16)):
            x, y = torch.ones(*shape), torch.ones(*shape)
            elementwise = cost(context, lambda x=x, y=y: x + y)
            for dim in (0, 1):
                assert cost(context, lambda d=dim, x=x: x.cumsum(d)) <= 1.5 * elementwise
                assert cost(context, lambda d=dim, x=x: x.cumprod(d)) <= 1.5 * elementwise
                assert cost(context, lambda d=dim, x=x: x.prod(d)) <= 1.3 * elementwise
        small, large = torch.ones(512, 1024), torch.ones(4096, 1024)
        assert cost(context, lambda: large.cumsum(1)) > 4 * cost(context, lambda: small.cumsum(1))


def test_scans_take_the_same_time_timing_only():
    times = []
    for timing_only in (False, True):
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            x = torch.ones(300, 70)
            start = context.now
            x.cumsum(0)
            x.cumprod(1)
            x.prod(0)
            times.append(context.now - start)
    assert times[0] == times[1]


def _running_extreme(a, axis, largest):
    """torch's CPU loop: a later element takes over when it is NaN, or when the running
    value is not NaN and it is >= (<= for the minimum) the running one."""
    lines = np.moveaxis(a, axis, -1)
    values, indices = np.empty_like(lines), np.zeros(lines.shape, np.int64)
    for at in np.ndindex(lines.shape[:-1]):
        best, k = lines[at][0], 0
        for j, x in enumerate(lines[at]):
            nan_x = x != x
            if nan_x or (best == best and (x >= best if largest else x <= best)):
                best, k = x, j
            values[at + (j,)], indices[at + (j,)] = best, k
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16", "uint8"])
@pytest.mark.parametrize("shape", [(7,), (3, 1500, 2), (2050, 3)])
def test_cummax_and_cummin_give_torchs_values_and_last_indices(ctx, dtype, shape):
    a = np.random.default_rng(7).integers(0, 9, shape).astype(dtype)  # many ties
    if a.dtype.kind == "f":
        flat = a.reshape(-1)
        flat[5::97] = np.nan
        flat[3::89] = -0.0
    t = torch.from_numpy(a)
    for dim in range(-len(shape), len(shape)):
        for method, largest in (("cummax", True), ("cummin", False)):
            values, indices = _running_extreme(a, dim, largest)
            result = getattr(t, method)(dim)
            assert type(result).__name__ == method and result.indices.dtype == torch.int64
            assert result.values.dtype == t.dtype
            got = result.values.numpy()
            np.testing.assert_array_equal(got, values)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(values))  # -0.0 kept
            np.testing.assert_array_equal(result.indices.numpy(), indices)


def test_cummax_forms_and_errors(ctx):
    t = torch.tensor([[1.0, 3.0, 3.0], [2.0, 1.0, 2.0]])
    values, indices = torch.cummax(t, 1)
    assert values.tolist() == [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]
    assert indices.tolist() == [[0, 1, 2], [0, 0, 2]]
    out = (torch.empty(2, 3), torch.empty(2, 3, dtype=torch.int64))
    result = torch.cummin(t, 0, out=out)
    assert result.values is out[0] and out[1].tolist() == [[0, 0, 0], [0, 1, 1]]
    bools = torch.tensor([False, True, False])
    assert bools.cummax(0).values.tolist() == [False, True, True]
    assert bools.cummax(0).indices.tolist() == [0, 1, 1]
    assert torch.tensor(2.5).cummin(0).indices.item() == 0
    assert tuple(torch.ones(0, 3).cummax(0).values.shape) == (0, 3)
    with pytest.raises(TensorError, match="out of range"):
        t.cummax(2)
    with pytest.raises(TensorError, match=r"cummax\(\) of .*missing the dim"):
        torch.cummax(t)


def _extremes(context):
    x = torch.from_numpy(_values((40, 1300), seed=8))
    start = context.now
    found = [*x.cummax(1), *x.cummin(0)]
    return context.now - start, found


def test_cummax_takes_the_same_time_timing_only_and_the_same_values_on_the_fast_backend():
    times, (detailed, fast) = in_every_mode(_extremes)
    assert times[0] == times[1]
    assert_same_values(detailed, fast)


def test_a_running_extreme_costs_a_few_streaming_passes():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        x, y = torch.ones(2048, 1000), torch.ones(2048, 1000)
        elementwise = cost(context, lambda: x + y)
        cumsum = cost(context, lambda: x.cumsum(1))
        # two combines an element, a few compares and selects each, and an int64 index written
        assert cumsum < cost(context, lambda: x.cummax(1)) < 6 * elementwise


def _log_cumsum_exp_reference(a, axis):
    with np.errstate(invalid="ignore"):  # inf - inf inside NumPy's logaddexp
        return np.logaddexp.accumulate(a, axis=axis)


@pytest.mark.parametrize("shape", [(7,), (3, 2500), (4, 5, 6)])
def test_logcumsumexp_of_float64_along_every_dim_is_numpys(ctx, shape):
    a = np.random.default_rng(9).standard_normal(shape) * 30
    a.flat[3] = np.inf
    a.flat[-1] = np.nan
    a.flat[:2] = -np.inf
    t = torch.from_numpy(a)
    for dim in range(-len(shape), len(shape)):
        got = torch.logcumsumexp(t, dim)
        assert got.dtype == torch.float64 and tuple(got.shape) == shape
        expected = _log_cumsum_exp_reference(a, dim)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_logcumsumexp_of_float32_and_float16_and_its_infinities(ctx):
    a = np.random.default_rng(10).standard_normal((5, 300)).astype(np.float32) * 10
    got = torch.from_numpy(a).logcumsumexp(1)
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), _log_cumsum_exp_reference(a, 1), rtol=1e-6)
    half = torch.from_numpy(a.astype(np.float16)).logcumsumexp(0)
    assert half.dtype == torch.float16
    expected = _log_cumsum_exp_reference(a.astype(np.float16).astype(np.float32), 0)
    np.testing.assert_allclose(half.numpy().astype(np.float32), expected, rtol=1e-3)
    inf = float("inf")
    assert torch.tensor([-inf, -inf, 0.0]).logcumsumexp(0).tolist() == [-inf, -inf, 0.0]
    assert torch.tensor([inf, inf, -inf]).logcumsumexp(0).tolist() == [inf, inf, inf]
    assert torch.tensor(3.0).logcumsumexp(0).item() == 3.0
    assert tuple(torch.ones(0, 2).logcumsumexp(0).shape) == (0, 2)


def test_logcumsumexp_errors(ctx):
    with pytest.raises(TensorError, match="not implemented for torch.int64"):
        torch.logcumsumexp(torch.arange(3), 0)
    with pytest.raises(TensorError, match="dim must be an int"):
        torch.ones(3).logcumsumexp(None)
    with pytest.raises(TensorError, match="out of range"):
        torch.ones(3).logcumsumexp(1)


def _log_sums(context):
    x = torch.from_numpy(_values((40, 1300), seed=8))
    start = context.now
    found = [x.logcumsumexp(1), torch.logcumsumexp(x, 0)]
    return context.now - start, found


def test_logcumsumexp_takes_the_same_time_timing_only_and_the_same_values_on_the_fast_backend():
    times, (detailed, fast) = in_every_mode(_log_sums)
    assert times[0] == times[1] > 0
    assert_same_values(detailed, fast)


def test_a_logcumsumexp_costs_a_few_streaming_passes():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        x, y = torch.ones(2048, 1000), torch.ones(2048, 1000)
        elementwise = cost(context, lambda: x + y)
        cumsum = cost(context, lambda: x.cumsum(1))
        assert cumsum < cost(context, lambda: x.logcumsumexp(1)) < 8 * elementwise
