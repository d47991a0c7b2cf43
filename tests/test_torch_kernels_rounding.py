"""Rounding, sign, the base-2/10 exp and log, floor division and remainders as device
kernels, against NumPy (values, dtypes as torch gives them, errors), and their cost."""

from __future__ import annotations

import re

import numpy as np
import pytest
from run_modes import simulated_ps as cost

import kernbench.torch as torch
from kernbench.errors import KernBenchError, TensorError, TensorZeroDivisionError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


EDGES = np.array(
    [-2.5, -1.5, -0.5, -0.4, 0.5, 1.5, 2.5, 2.6, -3.7, 1e8 + 0.5, np.inf, -np.inf, np.nan, -0.0],
    dtype=np.float32,
)


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("floor", np.floor),
        ("ceil", np.ceil),
        ("round", np.round),  # half to even, as torch
        ("trunc", np.trunc),
        ("fix", np.trunc),
        ("frac", lambda a: a - np.trunc(a)),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_rounding_of_floats_matches_numpy_bit_for_bit(ctx, name, reference, dtype):
    with np.errstate(all="ignore"):  # 1e8 overflows float16; inf - inf is NaN
        a = EDGES.astype(dtype)
        expected = reference(a)
    t = torch.from_numpy(a)
    for result in (getattr(t, name)(), getattr(torch, name)(t)):
        assert result.dtype == t.dtype
        np.testing.assert_array_equal(result.numpy(), expected)
        assert list(np.signbit(result.numpy())) == list(np.signbit(expected))
    in_place = torch.from_numpy(a.copy())
    assert getattr(in_place, f"{name}_")() is in_place
    np.testing.assert_array_equal(in_place.numpy(), expected)


def test_round_with_decimals_scales_as_torch(ctx):
    a = np.array([1.2345, 2.5551, -0.125, 1234.5, 15.0, 25.0], dtype=np.float32)
    t = torch.from_numpy(a)
    scale = np.float32(100)
    np.testing.assert_array_equal(torch.round(t, decimals=2).numpy(), np.round(a * scale) / scale)
    np.testing.assert_array_equal(t.round(decimals=-1).numpy(), np.round(a / 10) * 10)
    with pytest.raises(TensorError, match="decimals must be an int"):
        t.round(decimals=1.5)
    with pytest.raises(TensorError, match="round of .*not implemented for torch.int64"):
        torch.tensor([15]).round(decimals=-1)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc"])
def test_rounding_an_integer_tensor_returns_a_copy_in_its_dtype(ctx, name):
    t = torch.tensor([-3, 0, 7], dtype=torch.int16)
    result = getattr(torch, name)(t)
    assert result.dtype == torch.int16 and result.tolist() == [-3, 0, 7]
    assert result.storage_device_tensor is not t.storage_device_tensor
    with pytest.raises(TensorError, match=f"{name} of .*not implemented for torch.bool"):
        getattr(torch.tensor([True]), name)()


def test_frac_refuses_integers_as_torch(ctx):
    with pytest.raises(TensorError, match="frac of .*not implemented for torch.int64"):
        torch.tensor([1, 2]).frac()


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "uint8", "bool", "float64"])
def test_sign_keeps_the_dtype_and_gives_zero_for_nan(ctx, dtype):
    if dtype == "bool":
        a = np.array([True, False])
    elif dtype.startswith("float"):
        a = np.array([-2.5, 0.0, -0.0, 3.0, np.inf, -np.inf, np.nan], dtype=dtype)
    else:
        a = np.array([0, 5, 1, 127 if dtype != "uint8" else 255], dtype=dtype)
        if dtype != "uint8":
            a[0] = -4
    t = torch.from_numpy(a)
    result = torch.sign(t)
    assert result.dtype == t.dtype
    expected = np.nan_to_num(np.sign(a), nan=0.0) if dtype != "bool" else a
    np.testing.assert_array_equal(result.numpy(), expected)
    if dtype.startswith("float"):
        assert not np.signbit(result.numpy()[2])  # sign(-0.0) is 0.0: (0 < x) - (x < 0)


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("exp2", np.exp2),
        ("log2", np.log2),
        ("log10", np.log10),
        ("log1p", np.log1p),
        ("expm1", np.expm1),
    ],
)
def test_base_two_ten_and_near_zero_exp_and_log(ctx, name, reference):
    a = np.array([1e-10, -1e-7, 0.5, 1.0, 3.0, 1000.0, 0.0, 20.0], dtype=np.float32)
    t = torch.from_numpy(a)
    with np.errstate(all="ignore"):
        expected = reference(a.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(getattr(torch, name)(t).numpy(), expected, rtol=2e-7)
    ints = torch.tensor([1, 2, 8])
    assert getattr(ints, name)().dtype == torch.float32
    with pytest.raises(TensorError, match=f"{name}_ of .*can't be cast to the in-place"):
        getattr(ints, f"{name}_")()
    out = torch.empty(8)
    assert getattr(torch, name)(t, out=out) is out


def test_log_of_negative_and_inf_follow_ieee(ctx):
    t = torch.tensor([-1.0, float("inf"), -2.0])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(t.log1p().numpy(), np.log1p(t.numpy()))
        np.testing.assert_array_equal(t.expm1().numpy(), np.expm1(t.numpy()))


# ----------------------------------------------------------------------------- division


def _pairs(dtype):
    x = np.array([-7, 7, 5, -5, 0, 9, -9, 3], dtype=dtype)
    y = np.array([2, -2, 3, 3, 4, -4, -3, 7], dtype=dtype)
    return x, y


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "float32", "float64"])
def test_floor_divide_remainder_fmod_match_python_and_c(ctx, dtype):
    x, y = _pairs(dtype)
    a, b = torch.from_numpy(x), torch.from_numpy(y)
    cases = [
        (a // b, np.floor_divide(x, y)),
        (torch.floor_divide(a, b), np.floor_divide(x, y)),
        (a % b, np.remainder(x, y)),
        (torch.remainder(a, b), np.remainder(x, y)),
        (a.fmod(b), np.fmod(x, y)),
        (torch.fmod(a, 3), np.fmod(x, x.dtype.type(3))),
        (a // 3, np.floor_divide(x, x.dtype.type(3))),
        (a % -3, np.remainder(x, x.dtype.type(-3))),
        (11 // b, np.floor_divide(y.dtype.type(11), y)),
        (11 % b, np.remainder(y.dtype.type(11), y)),
        (torch.remainder(11, b), np.remainder(y.dtype.type(11), y)),
    ]
    for result, expected in cases:
        assert result.dtype == a.dtype
        np.testing.assert_array_equal(result.numpy(), expected)


def test_division_family_broadcasts_and_promotes_as_torch(ctx):
    x = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    y = np.array([2, -3, 5, 7], dtype=np.int64)
    a, b = torch.from_numpy(x), torch.from_numpy(y)
    result = a // b
    assert result.dtype == torch.int64 and tuple(result.shape) == (3, 4)
    np.testing.assert_array_equal(result.numpy(), np.floor_divide(x, y))
    assert (a % 2.5).dtype == torch.float32  # an int tensor and a float scalar: float32
    np.testing.assert_allclose((a % 2.5).numpy(), np.remainder(x, 2.5).astype(np.float32))
    half = torch.tensor([5.0, -5.0], dtype=torch.float16)
    assert (half // 2).dtype == torch.float16
    np.testing.assert_array_equal((half // 2).numpy(), [2.0, -3.0])
    t = a.T  # a view that is not one run of memory
    np.testing.assert_array_equal((t % 4).numpy(), np.remainder(x.T, 4))


def test_float_division_by_zero_gives_inf_and_nan(ctx):
    a = torch.tensor([1.0, -1.0, 0.0])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((a // 0).numpy(), np.array([1.0, -1.0, 0.0]) / 0)
        assert np.isnan((a % 0).numpy()).all()
        assert np.isnan(a.fmod(0.0).numpy()).all()


def test_in_place_division_and_its_dtype_rule(ctx):
    a = torch.tensor([7, -7, 9])
    b = a
    a //= 2
    assert a is b and a.tolist() == [3, -4, 4]
    a %= 3
    assert a.tolist() == [0, 2, 1]
    assert a.fmod_(2) is a and a.tolist() == [0, 0, 1]
    c = torch.tensor([7.5, -7.5])
    assert c.remainder_(2).tolist() == [1.5, 0.5]
    assert c.floor_divide_(0.5).tolist() == [3.0, 1.0]
    with pytest.raises(TensorError, match="can't be cast to the in-place output type"):
        torch.tensor([1, 2]).floor_divide_(1.5)
    view = torch.arange(6).view(2, 3).T  # written back through the strided copy
    view %= 4
    assert view.tolist() == [[0, 3], [1, 0], [2, 1]]


@pytest.mark.parametrize("call", ["a // 0", "a % 0", "a.fmod(0)", "a // z", "5 // z", "5 % z"])
def test_integer_division_by_zero_raises_as_torch(ctx, call):
    a, z = torch.tensor([1, 2, 3]), torch.tensor([1, 0, 2])  # noqa: F841 - read by eval
    with pytest.raises(TensorZeroDivisionError, match=r"ZeroDivisionError: .*division by zero"):
        eval(call)
    with pytest.raises(ZeroDivisionError):  # also Python's own, for except clauses
        eval(call)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_div_rounding_modes_floor_and_trunc(ctx, dtype):
    x, y = _pairs(dtype)
    a, b = torch.from_numpy(x), torch.from_numpy(y)
    floor = torch.div(a, b, rounding_mode="floor")
    trunc = a.div(b, rounding_mode="trunc")
    assert floor.dtype == trunc.dtype == a.dtype  # no true-division promotion, as torch
    np.testing.assert_array_equal(floor.numpy(), np.floor_divide(x, y))
    np.testing.assert_array_equal(trunc.numpy(), np.trunc(x / y).astype(dtype))
    np.testing.assert_array_equal(a.div(-4, rounding_mode="trunc").numpy(), np.trunc(x / -4))
    c = a.clone()
    assert c.div_(b, rounding_mode="trunc") is c
    np.testing.assert_array_equal(c.numpy(), np.trunc(x / y).astype(dtype))
    if not a.dtype.is_floating_point:
        with pytest.raises(TensorZeroDivisionError, match=r"div\(rounding_mode='trunc'\) of"):
            a.div(0, rounding_mode="trunc")


def test_division_errors_name_the_call(ctx):
    with pytest.raises(TensorError, match="floor_divide of .*not implemented for 'Bool'"):
        torch.tensor([True]) // torch.tensor([True])
    with pytest.raises(TensorError, match="remainder of .*operand list is not supported"):
        torch.tensor([1]) % [2]
    with pytest.raises(TensorError, match=re.escape("torch.fmod: expected a Tensor as input")):
        torch.fmod(3, torch.tensor([2]))
    with pytest.raises(TensorError, match="doesn't match the broadcast shape"):
        torch.ones(3).fmod_(torch.ones(2, 3))
    assert issubclass(TensorZeroDivisionError, KernBenchError)


def test_rounding_and_division_cost_one_elementwise_pass():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        x = torch.ones(1 << 20)
        y = torch.ones(1 << 20)
        big = torch.ones(1 << 22)
        elementwise = cost(context, lambda: x.abs())
        for call in (x.floor, x.round, x.sign, x.trunc):
            assert 0.9 * elementwise <= cost(context, call) <= 1.3 * elementwise
        # log1p computes in float64 (a transcendental and a division a lane): more work
        assert elementwise < cost(context, x.log1p) <= 2 * elementwise
        binary = cost(context, lambda: x + y)
        assert 0.9 * binary <= cost(context, lambda: x % y) <= 1.3 * binary
        assert 0.9 * binary <= cost(context, lambda: x.fmod(y)) <= 1.3 * binary
        # a float floor division is torch's fmod, divide, floor and two corrections a lane
        assert binary < cost(context, lambda: x // y) <= 2.5 * binary
        i = torch.ones(1 << 20, dtype=torch.int32)
        # an integer divisor's zeros are looked up host-side: one pass, as torch's kernel
        assert 0.5 * binary < cost(context, lambda: i % i) <= 1.5 * binary
        assert cost(context, lambda: big % 3) > 3 * cost(context, lambda: x % 3)


def test_timing_only_runs_take_the_functional_time():
    times = []
    for timing_only in (False, True):
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            x = torch.ones(5000)
            i = torch.ones(5000, dtype=torch.int32)
            start = context.now
            x.round(decimals=2)
            x.floor()
            x % 0.3
            i // 3
            i % i  # the divisor tensor's zero test reads one byte in both modes
            times.append(context.now - start)
    assert times[0] == times[1]
