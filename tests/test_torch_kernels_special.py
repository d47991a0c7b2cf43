"""The special functions, the two-operand float math and the bit shifts as device kernels,
against NumPy and math (values, dtypes as torch gives them, errors), and their cost."""

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


def _lgamma(a: np.ndarray) -> np.ndarray:
    def one(v: float) -> float:
        if math.isnan(v):
            return math.nan
        if math.isinf(v) or (v <= 0 and v == math.floor(v)):
            return math.inf
        return math.lgamma(v)

    return np.array([one(float(v)) for v in a.reshape(-1)]).reshape(a.shape)


def _logit(a: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.log(a / (1 - a))


POINTS = np.array([-7.25, -2.5, -0.7, -1e-5, 0.0, 1e-5, 0.3, 0.5, 1.0, 2.0, 2.5, 9.75, 31.0])


@pytest.mark.parametrize(
    ("name", "reference", "values"),
    [
        ("sinc", np.sinc, POINTS),
        ("deg2rad", np.deg2rad, POINTS * 40),
        ("rad2deg", np.rad2deg, POINTS),
        ("lgamma", _lgamma, np.concatenate([POINTS, [-3.0, 0.0, 171.5, 1e10, np.inf, -np.inf]])),
        ("i0", np.i0, np.concatenate([POINTS * 3, [-14.9, 15.1, 40.0, 300.0, -700.0]])),
        ("logit", _logit, np.array([0.0, 1e-6, 0.1, 0.5, 0.75, 0.999, 1.0])),
    ],
)
@pytest.mark.parametrize(("dtype", "rtol"), [("float64", 1e-11), ("float32", 2e-6)])
def test_unary_special_functions_match_the_references(ctx, name, reference, values, dtype, rtol):
    a = values.astype(dtype)
    with np.errstate(over="ignore"):  # i0(-700) is past float32: inf, as the kernel stores
        expected = reference(a.astype(np.float64)).astype(dtype)
    t = torch.from_numpy(a)
    for result in (getattr(t, name)(), getattr(torch, name)(t)):
        assert result.dtype == t.dtype
        np.testing.assert_allclose(result.numpy(), expected, rtol=rtol, atol=rtol)
    in_place = torch.from_numpy(a.copy())
    assert getattr(in_place, f"{name}_")() is in_place
    np.testing.assert_allclose(in_place.numpy(), expected, rtol=rtol, atol=rtol)


def test_digamma_recurrence_reflection_known_values_and_poles(ctx):
    x = np.array([1e-6, 0.25, 0.5, 1.0, 1.5, 3.3, 9.9, 10.0, 57.0, 1e6, -0.5, -2.75])
    t = torch.from_numpy(x)
    d, d1 = t.digamma().numpy(), torch.digamma(t + 1).numpy()
    np.testing.assert_allclose(d1 - d, 1 / x, rtol=1e-12, atol=1e-12)  # psi(x+1) = psi(x) + 1/x
    euler = 0.5772156649015329
    np.testing.assert_allclose(d[[2, 3]], [-euler - 2 * math.log(2), -euler], rtol=1e-14)
    # reflection: psi(1 - x) - psi(x) = pi / tan(pi x)
    part = [0, 1, 2, 4, 5, 10, 11]
    reflected = torch.from_numpy(1 - x[part]).digamma().numpy()
    np.testing.assert_allclose(reflected - d[part], np.pi / np.tan(np.pi * x[part]), atol=1e-9)
    # the slope of lgamma, float64's digits from a central difference
    h = 1e-5
    slope = (_lgamma(x[1:9] + h) - _lgamma(x[1:9] - h)) / (2 * h)
    np.testing.assert_allclose(d[1:9], slope, rtol=1e-8)
    edges = torch.tensor([0.0, -0.0, -1.0, -4.0, float("inf"), float("nan")], dtype=torch.float64)
    got = edges.digamma().numpy()
    assert got[0] == -np.inf and got[1] == np.inf and got[4] == np.inf  # torch's signs at 0
    assert np.isnan(got[[2, 3, 5]]).all()


def test_erfinv_inverts_erf_with_infinities_at_one(ctx):
    y = np.array([-0.999999, -0.9, -0.5, -1e-8, 0.0, 0.1, 0.6, 0.99, 0.9999999999])
    for dtype, rtol in (("float64", 1e-14), ("float32", 2e-6)):
        got = torch.from_numpy(y.astype(dtype)).erfinv().numpy().astype(np.float64)
        back = np.array([math.erf(v) for v in got])
        np.testing.assert_allclose(back, y.astype(dtype), rtol=rtol, atol=1e-15)
    np.testing.assert_allclose(torch.tensor([0.5]).erfinv().item(), 0.4769362762044699, 1e-6)
    edges = torch.tensor([1.0, -1.0, 1.5, -2.0]).erfinv().numpy()
    assert edges[0] == np.inf and edges[1] == -np.inf and np.isnan(edges[2:]).all()


def test_logit_eps_clamps_and_integers_give_the_default_dtype(ctx):
    p = np.array([0.0, 0.3, 1.0], np.float32)
    got = torch.logit(torch.from_numpy(p), eps=1e-3).numpy()
    clamped = np.clip(p, np.float32(1e-3), np.float32(1) - np.float32(1e-3))
    np.testing.assert_allclose(got, np.log(clamped / (1 - clamped)), rtol=1e-6)
    assert torch.logit(torch.tensor([0.5]), 0.1).item() == 0.0
    with pytest.raises(TensorError, match="logit of .*eps must be a number or None"):
        torch.tensor([0.5]).logit("0.1")
    for name in ("lgamma", "digamma", "erfinv", "i0", "sinc", "deg2rad", "logit"):
        ints = torch.tensor([1, 2])
        assert getattr(ints, name)().dtype == torch.float32
        with pytest.raises(TensorError, match=f"{name}_ of .*can't be cast to the in-place"):
            getattr(ints, f"{name}_")()
    out = torch.empty(2)
    assert torch.lgamma(torch.tensor([1.0, 3.0]), out=out) is out
    np.testing.assert_allclose(out.numpy(), [0.0, math.log(2)], atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_signbit_reads_the_sign_bit_of_zeros_and_nans(ctx, dtype):
    a = np.array([-0.0, 0.0, -1.5, 2.0, -np.inf, np.inf, np.nan, -np.nan], np.float64)
    t = torch.tensor(a.tolist(), dtype=getattr(torch, dtype))
    result = torch.signbit(t)
    assert result.dtype == torch.bool
    assert result.tolist() == list(np.signbit(a))


def test_signbit_of_integers_and_bools(ctx):
    assert torch.tensor([-3, 0, 4]).signbit().tolist() == [True, False, False]
    assert torch.tensor([0, 255], dtype=torch.uint8).signbit().tolist() == [False, False]
    assert torch.tensor([True, False]).signbit().tolist() == [False, False]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_frexp_matches_numpy_with_int32_exponents(ctx, dtype):
    info = np.finfo(dtype)
    a = np.array(
        [0.0, -0.0, 1.0, -3.5, 0.1, 1e-30, info.max, info.smallest_subnormal, info.tiny, 7e7],
        dtype=dtype,
    )
    a = np.concatenate([a, np.array([np.inf, -np.inf, np.nan], dtype)])
    mantissa, exponent = torch.frexp(torch.from_numpy(a))
    want_m, want_e = np.frexp(a)
    assert mantissa.dtype == getattr(torch, dtype) and exponent.dtype == torch.int32
    np.testing.assert_array_equal(mantissa.numpy(), want_m)
    np.testing.assert_array_equal(exponent.numpy()[:-3], want_e[:-3])
    assert exponent.numpy()[-3:].tolist() == [0, 0, 0]
    out = (torch.empty(len(a), dtype=getattr(torch, dtype)), torch.empty(len(a), dtype=torch.int32))
    result = torch.frexp(torch.from_numpy(a), out=out)
    assert result.mantissa is out[0] and result.exponent is out[1]
    with pytest.raises(TensorError, match=r"frexp of .*only supports floating-point dtypes"):
        torch.tensor([1, 2]).frexp()


# ------------------------------------------------------------------------- two operands

A = np.array([-2.0, -0.0, 0.0, 0.0, 1.5, 3.0, np.inf, -np.inf, np.nan, 2.0, 1e-30, 700.0])
B = np.array([3.0, 2.0, -1.0, 0.0, -0.0, np.nan, 1.0, -np.inf, 1.0, np.inf, 5.0, 710.0])


def _xlogy(a, b):
    with np.errstate(all="ignore"):
        return np.where(np.isnan(b), np.nan, np.where(a == 0, 0.0, a * np.log(b)))


@pytest.mark.parametrize(
    ("name", "reference", "rtol"),
    [
        ("xlogy", _xlogy, 1e-12),
        ("copysign", np.copysign, 0),
        ("hypot", np.hypot, 1e-15),
        ("logaddexp", np.logaddexp, 1e-15),
        ("logaddexp2", np.logaddexp2, 1e-15),
        ("fmax", np.fmax, 0),
        ("fmin", np.fmin, 0),
        ("nextafter", np.nextafter, 0),
        ("float_power", np.float_power, 1e-13),
    ],
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_two_operand_float_math_matches_numpy(ctx, name, reference, rtol, dtype):
    a, b = A.astype(dtype), B.astype(dtype)
    with np.errstate(all="ignore"):
        expected = reference(a, b)
    x, y = torch.from_numpy(a), torch.from_numpy(b)
    for result in (getattr(x, name)(y), getattr(torch, name)(x, y)):
        assert result.dtype == (torch.float64 if name == "float_power" else x.dtype)
        got = result.numpy()
        np.testing.assert_allclose(got, expected, rtol=max(rtol, 1e-6 * (dtype == "float32")))
        if name in ("copysign", "nextafter", "fmax", "fmin"):
            assert list(np.signbit(got)) == list(np.signbit(expected))


def test_xlogy_is_zero_for_zero_x_and_takes_numbers_either_side(ctx):
    y = torch.tensor([0.0, 2.0, float("nan"), float("inf")])
    np.testing.assert_array_equal(torch.xlogy(0, y).numpy(), [0.0, 0.0, np.nan, 0.0])
    np.testing.assert_allclose(
        torch.xlogy(torch.tensor([3.0, 0.0]), 2).numpy(), [3 * math.log(2), 0]
    )
    ints = torch.xlogy(torch.tensor([2, 0]), torch.tensor([3, 0]))
    assert ints.dtype == torch.float32
    np.testing.assert_allclose(ints.numpy(), [2 * math.log(3), 0.0], rtol=1e-6)
    x = torch.tensor([1.0, 2.0])
    assert x.xlogy_(torch.tensor([math.e, 1.0])) is x
    np.testing.assert_allclose(x.numpy(), [1.0, 0.0], atol=1e-7)
    with pytest.raises(TensorError, match="xlogy_ of .*can't be cast to the in-place"):
        torch.tensor([1, 2]).xlogy_(2)


def test_two_operand_ops_broadcast_and_promote_as_torch(ctx):
    rows = torch.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2))
    col = torch.tensor([[1.0], [-1.0], [0.5]], dtype=torch.float64)
    result = torch.hypot(rows, col)
    assert result.dtype == torch.float64 and tuple(result.shape) == (3, 2)
    np.testing.assert_allclose(result.numpy(), np.hypot(rows.numpy(), col.numpy()), rtol=1e-15)
    assert torch.fmax(torch.tensor([1, 5]), torch.tensor([2.5, 1.0])).tolist() == [2.5, 5.0]
    assert torch.fmax(torch.tensor([1, 5]), torch.tensor([3, 2])).dtype == torch.int64
    assert torch.copysign(torch.tensor([1, 2]), -1).tolist() == [-1.0, -2.0]
    assert torch.copysign(rows.T, -1.0).numpy().tolist() == (-rows.numpy().T).tolist()
    ldexp = torch.ldexp(torch.tensor([1.0, -3.0]), torch.tensor([3, -2]))
    assert ldexp.dtype == torch.float32 and ldexp.tolist() == [8.0, -0.75]
    assert torch.ldexp(torch.tensor([1, 2]), torch.tensor([1, 1])).dtype == torch.float32
    power = torch.float_power(torch.tensor([2, -2]), 3)
    assert power.dtype == torch.float64 and power.tolist() == [8.0, -8.0]
    assert torch.float_power(2, torch.tensor([0.5, -1.0])).tolist() == [math.sqrt(2), 0.5]
    assert torch.true_divide(torch.tensor([3, 4]), 2).tolist() == [1.5, 2.0]
    assert torch.true_divide(3, torch.tensor([2.0])).tolist() == [1.5]
    t = torch.tensor([3.0])
    assert t.true_divide_(2) is t and t.item() == 1.5


def test_two_operand_ops_refuse_what_torch_refuses(ctx):
    ints = torch.tensor([1, 2])
    for name in ("hypot", "logaddexp", "logaddexp2", "nextafter"):
        with pytest.raises(TensorError, match=f"{name} of .*not implemented for torch.int64"):
            getattr(torch, name)(ints, ints)
    with pytest.raises(
        TensorError, match="heaviside is not yet implemented for tensors with different dtypes"
    ):
        torch.heaviside(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64))
    with pytest.raises(TensorError, match="hypot of .*other must be a Tensor"):
        torch.tensor([1.0]).hypot(2.0)
    with pytest.raises(TensorError, match="float_power_ of .*can't be cast"):
        torch.tensor([1.0]).float_power_(2)
    x = torch.tensor([2.0], dtype=torch.float64)
    assert x.float_power_(3) is x and x.item() == 8.0
    with pytest.raises(TensorError, match="float_power: one of input and other must be a Tensor"):
        torch.float_power(2, 3)
    with pytest.raises(TensorError, match="torch.xlogy: it takes torch.xlogy"):
        torch.xlogy(torch.tensor([1.0]))
    with pytest.raises(TensorError, match="doesn't match the broadcast shape"):
        torch.tensor([1.0]).copysign_(torch.tensor([1.0, -1.0]))


def test_heaviside_takes_values_where_input_is_zero(ctx):
    x = torch.tensor([-1.5, 0.0, 2.0, -0.0])
    values = torch.tensor([0.5])
    assert torch.heaviside(x, values).tolist() == [0.0, 0.5, 1.0, 0.5]
    assert torch.heaviside(torch.tensor([-2, 0, 3]), torch.tensor([7])).tolist() == [0, 7, 1]


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_shifts_follow_torch_past_the_width(ctx, dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = np.array([1, 5, 3, 100, 7, 1], dtype=dtype)
    if dtype != "uint8":
        a[1] = -5
    s = np.array([0, 1, 3, bits - 1, bits, 2], dtype=dtype)
    if dtype != "uint8":
        s[-1] = -1
    x, k = torch.from_numpy(a), torch.from_numpy(s)
    valid = (s >= 0) & (s < bits)
    safe = np.where(valid, s, 0)
    left = np.where(valid, np.left_shift(a, safe), 0).astype(dtype)
    fill = np.right_shift(a, bits - 1) if dtype != "uint8" else np.zeros_like(a)
    right = np.where(valid, np.right_shift(a, safe), fill).astype(dtype)
    np.testing.assert_array_equal((x << k).numpy(), left)
    np.testing.assert_array_equal(torch.bitwise_left_shift(x, k).numpy(), left)
    np.testing.assert_array_equal((x >> k).numpy(), right)
    np.testing.assert_array_equal(x.bitwise_right_shift(k).numpy(), right)
    y = torch.from_numpy(a.copy())
    same = y
    y <<= 1
    assert y is same
    y >>= 1
    assert y is same


def test_shifts_with_numbers_and_their_errors(ctx):
    assert (1 << torch.tensor([0, 3])).tolist() == [1, 8]
    assert (256 >> torch.tensor([4, 8])).tolist() == [16, 1]
    assert (torch.tensor([1, 2], dtype=torch.int16) << 2).dtype == torch.int16
    assert torch.bitwise_right_shift(torch.tensor([-8]), 1).tolist() == [-4]
    for bad in (torch.tensor([1.0]), torch.tensor([True])):
        with pytest.raises(TensorError, match="bitwise_left_shift of .*not implemented for"):
            bad << torch.tensor([True]) if bad.dtype == torch.bool else bad << 1


def test_sgn_positive_and_the_in_place_forms(ctx):
    t = torch.tensor([-2.0, 0.0, 3.0])
    assert torch.sgn(t).tolist() == [-1.0, 0.0, 1.0]
    assert t.sgn_() is t and t.tolist() == [-1.0, 0.0, 1.0]
    assert torch.positive(t) is t and t.positive() is t
    with pytest.raises(TensorError, match="positive: the `\\+` operator, on a bool tensor"):
        torch.positive(torch.tensor([True]))


def test_names_are_torch_functions_and_tensor_methods(ctx):
    for name in (
        "logit", "xlogy", "copysign", "heaviside", "hypot", "logaddexp", "logaddexp2", "sinc",
        "deg2rad", "rad2deg", "signbit", "float_power", "true_divide", "fmax", "fmin",
        "nextafter", "erfinv", "lgamma", "digamma", "i0", "sgn", "positive", "frexp", "ldexp",
        "bitwise_left_shift", "bitwise_right_shift",
    ):  # fmt: skip
        assert callable(getattr(torch, name)) and name in torch.__all__
        assert callable(getattr(torch.Tensor, name))
    for name in ("logit_", "xlogy_", "copysign_", "hypot_", "erfinv_", "ldexp_", "i0_"):
        assert callable(getattr(torch.Tensor, name))


# ----------------------------------------------------------------------------- cost

N = 1 << 18


def _costs(context):
    x, y = torch.empty(N), torch.empty(N)
    one = simulated_ps(context, lambda: x.exp())
    two = simulated_ps(context, lambda: x + y)
    return x, y, one, two


def test_cheap_ops_cost_one_elementwise_pass():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x, y, one, two = _costs(context)
        for name in ("sinc", "deg2rad", "rad2deg", "logit", "signbit"):
            cost = simulated_ps(context, getattr(x, name))
            assert 0.6 * one <= cost <= 1.1 * one, name
        for name in ("xlogy", "copysign", "hypot", "logaddexp", "fmax", "nextafter", "ldexp"):
            cost = simulated_ps(context, lambda n=name: getattr(x, n)(y))
            assert 0.9 * two <= cost <= 1.1 * two, name
        ints = torch.empty(N, dtype=torch.int32)
        assert 0.9 * two <= simulated_ps(context, lambda: ints << ints) <= 1.1 * two


def test_series_functions_cost_their_vector_work():
    """lgamma, digamma, erfinv and i0 run series and Newton steps: compute-bound at a few
    passes' cost, as torch's are (more than exp, bounded)."""
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x, _, one, _ = _costs(context)
        for name in ("lgamma", "digamma", "erfinv", "i0"):
            cost = simulated_ps(context, getattr(x, name))
            assert 1.5 * one <= cost <= 8 * one, name


def test_same_time_in_both_modes_and_values_on_both_backends():
    a = np.linspace(-3, 3, 4096)

    def run(context):
        x = torch.from_numpy(a.astype(np.float32))
        y = torch.from_numpy((a[::-1] * 2).copy())
        before = context.now
        results = [x.lgamma(), x.hypot(y), torch.frexp(x)[1], x.signbit(), x.logaddexp(y)]
        return context.now - before, results

    times, values = in_every_mode(run)
    assert times[0] == times[1]
    assert_same_values(*values)
