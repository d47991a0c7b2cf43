"""``median``, ``nanmedian``, ``quantile`` and ``nanquantile`` as a sort and a pick kernel,
against NumPy (values, indices as torch's CPU kernel gives them, NaN rules), errors, and
what they cost in both modes and on both backends."""

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


def _median_reference(a, axis, ignore_nan):
    """torch's CPU picks: the element at (n - 1) // 2 of the stable order (of the numbers
    for nanmedian), or a line's first NaN for median."""
    order = np.argsort(a, axis=axis, kind="stable")  # NaN last, as torch sorts
    nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    numbers = np.sum(~nan, axis=axis, keepdims=True)
    if ignore_nan:
        at = np.maximum(numbers - 1, 0) // 2
    else:
        at = np.where(numbers < a.shape[axis], numbers, (a.shape[axis] - 1) // 2)
    index = np.take_along_axis(order, at, axis)
    if not ignore_nan:  # the first NaN (by index) is where a stable sort puts the first NaN
        first_nan = np.argmax(nan, axis=axis, keepdims=True)
        index = np.where(numbers < a.shape[axis], first_nan, index)
    return np.take_along_axis(a, index, axis).squeeze(axis), index.squeeze(axis)


def _with_nans(shape, dtype, seed=0):
    a = np.random.default_rng(seed).integers(-6, 6, shape).astype(dtype)  # many ties
    if a.dtype.kind == "f":
        a.flat[::5] = np.nan
        a[(0,) * (a.ndim - 1)] = np.nan  # a line of NaNs along the last dim
    return a


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
@pytest.mark.parametrize("shape", [(9,), (4, 6), (3, 5, 4)])
def test_median_and_nanmedian_along_every_dim_as_torch_picks(ctx, dtype, shape):
    a = _with_nans(shape, dtype)
    t = torch.from_numpy(a)
    for dim in range(-len(shape), len(shape)):
        for method, ignore_nan in (("median", False), ("nanmedian", True)):
            values, indices = _median_reference(a, dim, ignore_nan)
            result = getattr(t, method)(dim)
            assert type(result).__name__ == method and result.indices.dtype == torch.int64
            assert result.values.dtype == t.dtype
            np.testing.assert_array_equal(result.values.numpy(), values)
            np.testing.assert_array_equal(result.indices.numpy(), indices)
            kept = getattr(torch, method)(t, dim, keepdim=True)
            np.testing.assert_array_equal(kept.indices.numpy(), np.expand_dims(indices, dim))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_median_of_all_elements(ctx, dtype):
    a = np.random.default_rng(1).standard_normal(101).astype(dtype) * 50
    t = torch.from_numpy(a.reshape(101, 1))
    lower = np.sort(a)[50]
    assert t.median().ndim == 0 and t.median().item() == lower == np.median(a)
    even = torch.from_numpy(a[:100])
    assert even.median().item() == np.sort(a[:100])[49]  # the lower of the two middle values
    if dtype != "int64":
        a[[3, 70]] = np.nan
        t = torch.from_numpy(a)
        assert np.isnan(t.median().item()) and np.isnan(torch.median(t).item())
        assert t.nanmedian().item() == np.sort(a)[(99 - 1) // 2]
        assert np.isnan(torch.full((3,), float("nan")).nanmedian().item())
        assert np.isnan(torch.ones(0).median().item())  # torch gives NaN for no elements


def _quantile_cases():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 9, 5))
    a[2, 3, :] = np.nan
    a[4, :, 1] = np.nan
    return a


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")  # NumPy's, on NaN lines
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_quantile_and_nanquantile_match_numpy(ctx, interpolation, dtype):
    a = _quantile_cases().astype(dtype)
    tight = {"rtol": 1e-13, "atol": 1e-15} if dtype == "float64" else {"rtol": 2e-6, "atol": 1e-6}
    t = torch.from_numpy(a)
    qs = np.array([0.0, 0.125, 0.3, 0.5, 0.875, 1.0])
    q = torch.from_numpy(qs.astype(dtype))
    for dim in (0, 1, -1):
        for method, numpy_fn in (("quantile", np.quantile), ("nanquantile", np.nanquantile)):
            expected = numpy_fn(a.astype(np.float64), qs, axis=dim, method=interpolation)
            got = getattr(t, method)(q, dim, interpolation=interpolation)
            assert got.dtype == t.dtype and tuple(got.shape) == expected.shape
            np.testing.assert_allclose(got.numpy(), expected, **tight)
            one = getattr(torch, method)(t, 0.3, dim, keepdim=True, interpolation=interpolation)
            np.testing.assert_allclose(
                one.numpy(),
                numpy_fn(a.astype(np.float64), 0.3, axis=dim, keepdims=True, method=interpolation),
                **tight,
            )


def test_quantile_of_all_elements_and_its_shapes(ctx):
    a = np.random.default_rng(5).standard_normal((4, 3))
    t = torch.from_numpy(a)
    assert t.quantile(0.25).ndim == 0
    np.testing.assert_allclose(t.quantile(0.25).item(), np.quantile(a, 0.25), rtol=1e-14)
    kept = torch.quantile(t, torch.tensor([0.1, 0.9], dtype=torch.float64), keepdim=True)
    assert tuple(kept.shape) == (2, 1, 1)
    np.testing.assert_allclose(kept.numpy(), np.quantile(a, [0.1, 0.9], keepdims=True), rtol=1e-14)
    zero_d = torch.tensor(0.5, dtype=torch.float64)  # a 0-d q gives no q dim
    assert tuple(t.quantile(zero_d, 1).shape) == (4,)
    np.testing.assert_allclose(t.quantile(zero_d, 1).numpy(), np.median(a, 1), rtol=1e-14)
    # torch's two-sided lerp with an inf (pytorch issue 133998): inf below a weight of 0.5,
    # inf - inf * (1 - w) = NaN from it on
    inf = torch.tensor([0.0, float("inf")])
    for interpolation, expected in (
        ("linear", [np.inf, np.nan]),
        ("lower", [0.0, 0.0]),
        ("higher", [np.inf, np.inf]),
        ("nearest", [0.0, np.inf]),
        ("midpoint", [np.nan, np.nan]),
    ):
        got = inf.quantile(torch.tensor([0.4, 0.6]), interpolation=interpolation)
        np.testing.assert_array_equal(got.numpy(), expected)
    out = torch.empty(2, 3, dtype=torch.float64)
    assert torch.quantile(t, torch.tensor([0.1, 0.9], dtype=torch.float64), 0, out=out) is out


def test_median_and_quantile_errors_name_the_call(ctx):
    t = torch.ones(2, 5)
    with pytest.raises(TensorError, match="input tensor must be either float or double dtype"):
        torch.ones(3, dtype=torch.int32).quantile(0.5)
    with pytest.raises(TensorError, match=r"q must be in the range \[0, 1\] but got 1.5"):
        t.quantile(1.5)
    with pytest.raises(TensorError, match=r"q values must be in the range \[0, 1\]"):
        t.quantile(torch.tensor([0.5, -0.1]))
    with pytest.raises(TensorError, match="q must be a scalar or 1D tensor"):
        t.quantile(torch.ones(2, 2))
    with pytest.raises(TensorError, match="q tensor must be same dtype as the input tensor"):
        t.quantile(torch.tensor([0.5], dtype=torch.float64))
    with pytest.raises(TensorError, match="interpolation must be one of linear, lower"):
        t.quantile(0.5, interpolation="cubic")
    with pytest.raises(TensorError, match="quantile.. input tensor must be non-empty"):
        torch.ones(0).nanquantile(0.5)
    with pytest.raises(TensorIndexError, match="Expected reduction dim 1 to have non-zero size"):
        torch.ones(3, 0).median(1)
    with pytest.raises(TensorError, match="\"median\" not implemented for 'Bool'"):
        torch.ones(3, dtype=torch.bool).median()
    with pytest.raises(TensorError, match="out must be a .values, indices. pair"):
        torch.median(t, 1, out=torch.empty(2))
    values, indices = torch.empty(2), torch.empty(2, dtype=torch.int64)
    result = torch.nanmedian(t, 1, out=(values, indices))
    assert result.values is values and result.indices is indices and values.tolist() == [1.0, 1.0]
    assert tuple(torch.ones(0, 4).median(1).values.shape) == (0,)


def _selections(context):
    x = torch.from_numpy(np.random.default_rng(6).standard_normal((64, 300)).astype(np.float32))
    start = context.now
    results = [
        x.median(1).values,
        x.nanmedian(0).indices,
        x.median(),
        x.quantile(torch.tensor([0.2, 0.7]), 1),
        x.nanquantile(0.4, 0, interpolation="nearest"),
    ]
    elapsed = context.now - start
    return elapsed, results


def test_selection_takes_the_same_time_timing_only_and_the_same_values_on_the_fast_backend():
    times, (detailed, fast) = in_every_mode(_selections)
    assert times[0] == times[1]
    assert_same_values(detailed, fast)


def test_a_median_costs_a_sort_and_a_small_pick():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        x = torch.ones(1024, 1024)
        sort = simulated_ps(context, lambda: x.sort(1))
        median = simulated_ps(context, lambda: x.median(1))
        quantile = simulated_ps(context, lambda: x.quantile(torch.tensor([0.1, 0.5, 0.9]), 1))
        assert sort < median < 1.2 * sort
        assert sort < quantile < 1.2 * sort
