"""``torch.histc`` as one atomic-add kernel, against NumPy (torch's linear bin map in the
input's dtype, the data's range, values outside it and NaNs left out), errors, and runs
in both modes and on both backends."""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _histc_reference(a, bins, low, high):
    """torch's CPU histc: int((x - min) * bins / (max - min)) in the input's dtype, max in
    the last bin; min == max means the data's range, widened by 1 when it is one value."""
    if low == high and a.size:
        low, high = float(a.min()), float(a.max())
    if low == high:
        low, high = low - 1, high + 1
    kind = a.dtype.type
    lo, hi = kind(low), kind(high)
    keep = (a >= lo) & (a <= hi)
    position = ((a[keep] - lo) * kind(bins) / (hi - lo)).astype(np.int64)
    return np.bincount(np.minimum(position, bins - 1), minlength=bins).astype(a.dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize(("bins", "low", "high"), [(100, 0, 0), (7, -1.5, 2.0), (3, 0.5, 0.5)])
def test_histc_counts_as_torchs_linear_bins(ctx, dtype, bins, low, high):
    a = (np.random.default_rng(2).standard_normal((30, 40)) * 2).astype(dtype)
    got = torch.histc(torch.from_numpy(a), bins, low, high)
    assert got.dtype == getattr(torch, dtype) and tuple(got.shape) == (bins,)
    np.testing.assert_array_equal(got.numpy(), _histc_reference(a, bins, low, high))


def test_histc_of_float64_is_numpys_histogram_and_edges_go_right(ctx):
    a = np.random.default_rng(3).standard_normal(5000)
    got = torch.from_numpy(a).histc(bins=25)  # the data's range, as np.histogram's default
    np.testing.assert_array_equal(got.numpy(), np.histogram(a, 25)[0])
    edges = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 4.5, -0.1, float("nan"), float("inf")])
    assert edges.histc(4, 0, 4).tolist() == [1.0, 1.0, 1.0, 2.0]  # 4 is in the last bin
    assert torch.tensor([2.0, 2.0]).histc(4).tolist() == [0.0, 0.0, 2.0, 0.0]  # [1, 3]
    assert torch.ones(0).histc(3).tolist() == [0.0, 0.0, 0.0]


def test_histc_errors_are_torchs(ctx):
    with pytest.raises(TensorError, match='"histogram_cpu" not implemented for torch.int64'):
        torch.histc(torch.arange(4))
    with pytest.raises(TensorError, match=r"bins must be > 0, but got 0"):
        torch.ones(3).histc(0)
    with pytest.raises(TensorError, match="max must be larger than min"):
        torch.ones(3).histc(5, 2, 1)
    with pytest.raises(TensorError, match=r"range of \[1, inf\] is not finite"):
        torch.tensor([1.0, float("inf")]).histc()
    with pytest.raises(TensorError, match=r"range of \[nan, nan\] is not finite"):
        torch.tensor([1.0, float("nan")]).histc()
    with pytest.raises(TensorError, match="bins must be an int"):
        torch.ones(3).histc(2.5)


def _histograms(context):
    x = torch.from_numpy(np.random.default_rng(4).standard_normal((64, 300)).astype(np.float32))
    start = context.now
    results = [x.histc(), torch.histc(x, 16, -1, 1)]
    return context.now - start, results


def test_histc_runs_timing_only_and_gives_the_same_counts_on_the_fast_backend():
    times, (detailed, fast) = in_every_mode(_histograms)
    assert all(t > 0 for t in times)
    assert_same_values(detailed, fast)
    np.testing.assert_array_equal(detailed[0].sum(), 64 * 300)
