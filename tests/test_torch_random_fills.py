"""torch.normal, bernoulli, poisson and the in-place random fills: deterministic under
torch.manual_seed (and the streams they share with rand/randn/randint), their moments on
large samples, shapes, dtypes, errors, and their cost (the copy in, as rand's)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from tests.run_modes import assert_same_values, in_every_mode, simulated_ps


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


N = 1 << 17
FILLS = [
    # (method, args, mean, variance) of the distribution
    ("normal_", (2.0, 3.0), 2.0, 9.0),
    ("uniform_", (-1.0, 3.0), 1.0, 16 / 12),
    ("exponential_", (2.0,), 0.5, 0.25),
    ("geometric_", (0.25,), 4.0, 0.75 / 0.25**2),
    ("log_normal_", (0.0, 0.5), math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)),
    ("bernoulli_", (0.3,), 0.3, 0.21),
]


def _check_moments(values: np.ndarray, mean: float, variance: float) -> None:
    """Sample mean within 5 standard errors; sample variance within 6% (its standard error
    on N draws is below 1% for these distributions)."""
    v = values.astype(np.float64)
    assert abs(v.mean() - mean) < 5 * math.sqrt(variance / v.size), (v.mean(), mean)
    assert abs(v.var() / variance - 1) < 0.06, (v.var(), variance)


@pytest.mark.parametrize(("name", "args", "mean", "variance"), FILLS)
def test_fills_have_their_distributions_moments(ctx, name, args, mean, variance):
    t = torch.empty(N)
    assert getattr(t, name)(*args) is t
    _check_moments(t.numpy(), mean, variance)


@pytest.mark.parametrize(("name", "args"), [(f[0], f[1]) for f in FILLS] + [("cauchy_", ())])
def test_fills_repeat_under_a_seed_and_differ_across_seeds(ctx, name, args):
    runs = []
    for seed in (7, 7, 8):
        torch.manual_seed(seed)
        runs.append(getattr(torch.empty(64), name)(*args).numpy())
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])
    g = torch.Generator().manual_seed(7)
    np.testing.assert_array_equal(
        getattr(torch.empty(64), name)(*args, generator=g).numpy(), runs[0]
    )


def test_fills_read_the_factories_streams(ctx):
    torch.manual_seed(3)
    z = torch.randn(100).numpy()
    torch.manual_seed(3)
    np.testing.assert_array_equal(torch.empty(100).normal_().numpy(), z)
    torch.manual_seed(3)
    u = torch.rand(100).numpy().astype(np.float64)
    torch.manual_seed(3)
    got = torch.empty(100, dtype=torch.float64).uniform_(2, 5).numpy()
    np.testing.assert_allclose(got, 2 + 3 * u, rtol=1e-15)
    torch.manual_seed(3)
    ints = torch.randint(-4, 9, (100,)).numpy()
    torch.manual_seed(3)
    np.testing.assert_array_equal(torch.empty(100, dtype=torch.int64).random_(-4, 9).numpy(), ints)


def test_cauchy_median_and_quartiles(ctx):
    v = torch.empty(N).cauchy_(1.0, 2.0).numpy()
    q1, median, q3 = np.quantile(v, [0.25, 0.5, 0.75])
    assert abs(median - 1.0) < 0.04 and abs(q1 + 1.0) < 0.05 and abs(q3 - 3.0) < 0.05


def test_geometric_values_are_whole_and_at_least_one(ctx):
    v = torch.empty(N, dtype=torch.int32).geometric_(0.5).numpy()
    assert v.min() == 1 and np.mean(v == 1) == pytest.approx(0.5, abs=0.01)


def test_random_forms_and_their_ranges(ctx):
    v = torch.empty(N, dtype=torch.int16).random_(-5, 5).numpy()
    assert v.min() == -5 and v.max() == 4 and v.dtype == np.int16
    assert set(torch.empty(1000).random_(3).numpy().tolist()) == {0.0, 1.0, 2.0}
    full = torch.empty(N, dtype=torch.uint8).random_().numpy()
    assert full.min() == 0 and full.max() == 255
    signed = torch.empty(N, dtype=torch.int8).random_().numpy()
    assert signed.min() == 0 and signed.max() == 127  # [0, max], as torch
    high = torch.empty(N, dtype=torch.int8).random_(100, None).numpy()
    assert high.min() == 100 and high.max() == 127
    floats = torch.empty(N).random_().numpy()
    assert floats.max() > 2**23 and floats.max() <= 2**24 and (floats == np.floor(floats)).all()
    assert set(torch.empty(100, dtype=torch.bool).random_().numpy().tolist()) == {False, True}
    assert torch.empty(100).random_(**{"from": 2, "to": 4}).numpy().min() == 2
    with pytest.raises(TensorError, match="random_ expects 'from' to be less than 'to'"):
        torch.empty(3).random_(5, 5)
    with pytest.raises(TensorError, match=r"random_ of .*\[0, 300\) does not fit torch.uint8"):
        torch.empty(3, dtype=torch.uint8).random_(300)


def test_fills_keep_dtype_and_write_through_views(ctx):
    half = torch.empty(1000, dtype=torch.float16).uniform_(0, 1)
    assert half.dtype == torch.float16 and 0 <= half.numpy().min() and half.numpy().max() <= 1
    base = torch.zeros(4, 6)
    view = base.T[1:4]  # not one run of memory
    assert view.normal_(5.0, 0.1) is view
    values = base.numpy()
    assert (np.abs(values[:, 1:4] - 5) < 1).all() and (values[:, [0, 4, 5]] == 0).all()


def test_fills_refuse_what_torch_refuses(ctx):
    ints = torch.empty(3, dtype=torch.int32)
    for name in ("normal_", "uniform_", "exponential_", "log_normal_", "cauchy_"):
        with pytest.raises(TensorError, match=f"{name} of .*not implemented for torch.int32"):
            getattr(ints, name)()
    t = torch.empty(3)
    for call, message in (
        (lambda: t.normal_(0, -1), "normal expects std >= 0.0"),
        (lambda: t.uniform_(2, 1), r"uniform_ expects to return a \[from, to\) range"),
        (lambda: t.exponential_(0), "exponential_ expects lambda > 0.0"),
        (lambda: t.geometric_(1.0), r"geometric_ expects p to be in \(0, 1\)"),
        (lambda: t.log_normal_(1, 0), "log_normal_ expects std > 0.0"),
        (lambda: t.cauchy_(0, 0), "cauchy_ expects sigma > 0.0"),
        (lambda: t.bernoulli_(1.5), r"bernoulli_ expects p to be in \[0, 1\]"),
        (lambda: t.normal_("0"), "normal_: mean must be a number"),
        (lambda: t.uniform_(0, 1, frm=2), "unexpected argument"),
    ):
        with pytest.raises(TensorError, match=message):
            call()


# ----------------------------------------------------------------------------- normal


def test_normal_overloads_shapes_and_dtypes(ctx):
    mean = torch.from_numpy(np.arange(4, dtype=np.float64).reshape(4, 1) * 100)
    std = torch.tensor([0.0, 1.0, 2.0])
    both = torch.normal(mean, std)
    assert tuple(both.shape) == (4, 3) and both.dtype == torch.float64
    values = both.numpy()
    np.testing.assert_array_equal(values[:, 0], [0.0, 100.0, 200.0, 300.0])  # std 0
    assert (np.abs(values - mean.numpy()) < 12).all()
    assert tuple(torch.normal(mean, 2.0).shape) == (4, 1)
    assert torch.normal(1.0, std).dtype == torch.float32
    sized = torch.normal(2.0, 3.0, size=(N,))
    assert sized.dtype == torch.float32 and tuple(sized.shape) == (N,)
    _check_moments(sized.numpy(), 2.0, 9.0)
    assert torch.normal(0.0, 1.0, (2, 2), dtype=torch.float64).dtype == torch.float64
    out = torch.empty(4, 3, dtype=torch.float64)
    assert torch.normal(mean, std, out=out) is out


def test_normal_of_tensors_is_mean_plus_std_times_randns_stream(ctx):
    mean, std = torch.tensor([1.0, -1.0, 10.0]), torch.tensor([2.0, 0.5, 3.0])
    torch.manual_seed(11)
    z = torch.randn(3).numpy()
    torch.manual_seed(11)
    got = torch.normal(mean, std).numpy()
    np.testing.assert_allclose(got, mean.numpy() + std.numpy() * z, rtol=1e-6)
    g = torch.Generator().manual_seed(11)
    np.testing.assert_allclose(torch.normal(mean, std, generator=g).numpy(), got)


def test_normal_refuses_what_torch_refuses(ctx):
    with pytest.raises(TensorError, match="normal expects all elements of std >= 0.0"):
        torch.normal(torch.zeros(2), torch.tensor([1.0, -1.0]))
    with pytest.raises(TensorError, match="normal expects std >= 0.0"):
        torch.normal(torch.zeros(2), -1.0)
    with pytest.raises(TensorError, match="give size"):
        torch.normal(0.0, 1.0)
    with pytest.raises(TensorError, match="not floating"):
        torch.normal(torch.tensor([1, 2]), 1.0)
    with pytest.raises(TensorError, match="size=, dtype= and device= go with number"):
        torch.normal(torch.zeros(2), 1.0, (2,))
    with pytest.raises(TensorError, match="mean must be a Tensor or a number"):
        torch.normal("0", 1.0, (2,))


# ------------------------------------------------------------------- bernoulli, poisson


def test_bernoulli_of_probabilities_and_of_a_number(ctx):
    p = torch.from_numpy(np.tile(np.array([0.0, 0.2, 0.9, 1.0], np.float32), N // 4))
    drawn = torch.bernoulli(p)
    assert drawn.dtype == torch.float32 and tuple(drawn.shape) == (N,)
    v = drawn.numpy().reshape(-1, 4)
    assert set(np.unique(v).tolist()) <= {0.0, 1.0}
    assert (v[:, 0] == 0).all() and (v[:, 3] == 1).all()
    _check_moments(v[:, 1], 0.2, 0.16)
    _check_moments(v[:, 2], 0.9, 0.09)
    same = p.bernoulli()
    assert same.dtype == p.dtype
    _check_moments(torch.bernoulli(p, 0.4).numpy(), 0.4, 0.24)
    half = torch.empty(N, dtype=torch.float64).bernoulli_()
    _check_moments(half.numpy(), 0.5, 0.25)


def test_bernoulli_in_place_with_a_tensor_of_probabilities(ctx):
    t = torch.empty(N // 4, 4, dtype=torch.int32)
    p = torch.tensor([0.0, 0.5, 0.25, 1.0])
    assert t.bernoulli_(p) is t
    v = t.numpy()
    assert (v[:, 0] == 0).all() and (v[:, 3] == 1).all()
    _check_moments(v[:, 1], 0.5, 0.25)
    torch.manual_seed(5)
    a = torch.bernoulli(torch.full((64,), 0.5)).numpy()
    torch.manual_seed(5)
    u = torch.rand(64).numpy()
    np.testing.assert_array_equal(a, (u < 0.5).astype(np.float32))  # rand's stream
    with pytest.raises(TensorError, match=r"expects all elements of p to be in \[0, 1\]"):
        torch.bernoulli(torch.tensor([0.5, 1.5]))
    with pytest.raises(TensorError, match="probabilities must be a floating tensor"):
        torch.bernoulli(torch.tensor([0, 1]))


def test_poisson_moments_zeros_and_errors(ctx):
    rates = torch.from_numpy(np.repeat(np.array([0.0, 0.5, 30.0], np.float32), N // 4))
    v = torch.poisson(rates).numpy().reshape(3, -1)
    assert (v[0] == 0).all() and (v == np.floor(v)).all()
    _check_moments(v[1], 0.5, 0.5)
    _check_moments(v[2], 30.0, 30.0)
    torch.manual_seed(2)
    first = torch.poisson(torch.full((32,), 4.0)).numpy()
    torch.manual_seed(2)
    np.testing.assert_array_equal(torch.poisson(torch.full((32,), 4.0)).numpy(), first)
    with pytest.raises(TensorError, match="invalid Poisson rate, expected rate to be non-negative"):
        torch.poisson(torch.tensor([1.0, -1.0]))
    with pytest.raises(TensorError, match="rates must be a floating tensor"):
        torch.poisson(torch.tensor([1, 2]))


# ----------------------------------------------------------------------------- cost


def test_a_fill_costs_what_rand_of_its_size_costs():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        t = torch.empty(1 << 20)
        # rand is a tensor made (its pages mapped), then the draw copied in: a fill is the
        # copy, the same for every distribution
        rand = simulated_ps(context, lambda: torch.rand(1 << 20))
        fills = {
            simulated_ps(context, lambda n=name, a=args: getattr(t, n)(*a))
            for name, args, _, _ in FILLS
        }
        assert len(fills) == 1 and 0.9 * rand <= fills.pop() <= rand
        normal = simulated_ps(context, lambda: torch.normal(0.0, 1.0, (1 << 20,)))
        assert 0.95 * rand <= normal <= 1.05 * rand
        # of a tensor of probabilities: the uniforms drawn in, then one compare on the device
        pair = simulated_ps(context, lambda: t + t)
        drawn = simulated_ps(context, lambda: torch.bernoulli(t))
        assert rand + 0.8 * pair <= drawn <= 1.1 * (rand + pair)


def test_random_ops_take_one_time_in_both_modes_and_one_value_on_both_backends():
    def run(context):
        torch.manual_seed(1)
        p = torch.full((4096,), 0.5)
        before = context.now
        results = [
            torch.empty(4096).normal_(),
            torch.bernoulli(p),
            torch.normal(p, p),
            torch.poisson(p),
            torch.empty(4096, dtype=torch.int32).random_(10),
        ]
        return context.now - before, results

    times, values = in_every_mode(run)
    assert times[0] == times[1]
    assert_same_values(*values)
