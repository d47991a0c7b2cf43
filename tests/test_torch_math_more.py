"""The trigonometric and hyperbolic ops, ``atan2``, ``pow`` with a tensor exponent, the
NaN-skipping reductions, ``aminmax`` and the further products: values against NumPy,
gradients against NumPy formulas or central differences, errors, and their cost."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from tests.run_modes import assert_same_values, in_every_mode, simulated_ps


@pytest.fixture(scope="module", autouse=True)
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------- trigonometric, hyperbolic

UNARY = {
    "tan": (np.tan, -1.4, 1.4),
    "sinh": (np.sinh, -3.0, 3.0),
    "cosh": (np.cosh, -3.0, 3.0),
    "asinh": (np.arcsinh, -50.0, 50.0),
    "acosh": (np.arccosh, 1.0, 50.0),
    "atanh": (np.arctanh, -0.99, 0.99),
}
ALIASES = {"arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh"}


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5)])
def test_unary_values_match_numpy(name, shape):
    ref, low, high = UNARY[name]
    values = _rng().uniform(low, high, shape).astype(np.float32)
    x = torch.tensor(values)
    for result in (getattr(torch, name)(x), getattr(x, name)()):
        assert result.dtype is torch.float32 and tuple(result.shape) == shape
        np.testing.assert_allclose(result.numpy(), ref(values.astype(np.float64)), rtol=2e-6)
    wide = torch.tensor(values.astype(np.float64))
    np.testing.assert_allclose(getattr(wide, name)().numpy(), ref(values.astype(np.float64)))


def test_unary_edge_values_as_torch():
    with np.errstate(all="ignore"):
        edges = np.array([-1.0, -0.9999999, 0.0, -0.0, 0.9999999, 1.0, 1.5, np.nan])
        np.testing.assert_array_equal(
            torch.tensor(edges).atanh().numpy(), np.arctanh(edges)
        )  # ±inf at ±1, NaN past them
        points = np.array([0.5, 1.0, 1.0 + 1e-12, 1e300, np.inf, -np.inf, np.nan])
        np.testing.assert_allclose(
            torch.tensor(points).acosh().numpy(), np.arccosh(points), rtol=1e-15
        )
        big = np.array([-1e300, -710.0, 710.0, 1e300, np.inf])
        np.testing.assert_array_equal(torch.tensor(big).sinh().numpy(), np.sinh(big))
        np.testing.assert_array_equal(torch.tensor(big).cosh().numpy(), np.cosh(big))
        np.testing.assert_allclose(torch.tensor(big).asinh().numpy(), np.arcsinh(big))
    assert np.signbit(torch.tensor([-0.0]).atanh().numpy()[0])


def test_unary_integer_input_gives_the_default_dtype_and_refuses_in_place():
    ints = torch.tensor(np.array([0, 1, 2], np.int32))
    out = torch.sinh(ints)
    assert out.dtype is torch.float32
    np.testing.assert_allclose(out.numpy(), np.sinh([0.0, 1.0, 2.0]), rtol=1e-6)
    with pytest.raises(TensorError, match="can't be cast to the in-place output type"):
        ints.tan_()


def test_unary_in_place_out_and_aliases():
    values = np.array([[0.1, -0.5], [0.7, 0.3]], np.float32)
    for name in UNARY:
        if name == "acosh":
            continue
        ref = UNARY[name][0]
        x = torch.tensor(values)
        assert getattr(x, f"{name}_")() is x
        np.testing.assert_allclose(x.numpy(), ref(values.astype(np.float64)), rtol=2e-6)
        target = torch.empty(2, 2)
        assert getattr(torch, name)(torch.tensor(values), out=target) is target
        np.testing.assert_allclose(target.numpy(), ref(values.astype(np.float64)), rtol=2e-6)
    above_one = np.abs(values) + 1
    strided = torch.tensor(above_one).t()
    np.testing.assert_allclose(strided.acosh().numpy(), np.arccosh(above_one.T), rtol=2e-6)
    for alias, name in ALIASES.items():
        x = torch.tensor(above_one if name == "acosh" else values)
        expected = getattr(torch, name)(x).numpy()
        np.testing.assert_array_equal(getattr(torch, alias)(x).numpy(), expected)
        np.testing.assert_array_equal(getattr(x, alias)().numpy(), expected)
        np.testing.assert_array_equal(getattr(x.clone(), f"{alias}_")().numpy(), expected)


# Each gradient: torch's formula in NumPy, and central differences through check().
GRADS = {
    "tan": lambda x: 1 + np.tan(x) ** 2,
    "sinh": np.cosh,
    "cosh": np.sinh,
    "asinh": lambda x: 1 / np.sqrt(x * x + 1),
    "acosh": lambda x: 1 / np.sqrt(x * x - 1),
    "atanh": lambda x: 1 / (1 - x * x),
}
NODES = {
    "tan": "TanBackward0",
    "sinh": "SinhBackward0",
    "cosh": "CoshBackward0",
    "asinh": "AsinhBackward0",
    "acosh": "AcoshBackward0",
    "atanh": "AtanhBackward0",
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_gradients(name):
    ref, low, high = UNARY[name]
    low, high = (1.2, 4.0) if name == "acosh" else (max(low, -0.9), min(high, 0.9))
    check(lambda x: getattr(x, name)(), ref, ((2, 3), low, high), node=NODES[name])
    values = _rng(3).uniform(low, high, (4,))
    leaf = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    getattr(torch, name)(leaf).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), GRADS[name](values), rtol=1e-12)


@pytest.mark.parametrize("alias", list(ALIASES))
def test_alias_gradients(alias):
    low, high = (1.2, 3.0) if alias == "arccosh" else (-0.8, 0.8)
    check(lambda x: getattr(torch, alias)(x), UNARY[ALIASES[alias]][0], ((5,), low, high))


def test_in_place_gradient_records_the_op():
    leaf = torch.tensor([0.2, -0.4], dtype=torch.float64, requires_grad=True)
    y = leaf * 1.0
    y.atanh_()
    assert y.grad_fn.name() == "AtanhBackward0"
    y.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), 1 / (1 - np.array([0.2, -0.4]) ** 2))


# ------------------------------------------------------------------------------ atan2


@pytest.mark.parametrize(
    ("a_shape", "b_shape"), [((5,), (5,)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((3,), ())]
)
def test_atan2_broadcasts_as_numpy(a_shape, b_shape):
    a = _rng(1).standard_normal(a_shape).astype(np.float32)
    b = _rng(2).standard_normal(b_shape).astype(np.float32)
    for result in (
        torch.atan2(torch.tensor(a), torch.tensor(b)),
        torch.tensor(a).atan2(torch.tensor(b)),
        torch.arctan2(torch.tensor(a), torch.tensor(b)),
    ):
        np.testing.assert_allclose(result.numpy(), np.arctan2(a, b), rtol=1e-6, atol=1e-7)


def test_atan2_signed_zeros_infinities_integers_and_in_place():
    a = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, np.inf, np.nan])
    b = np.array([0.0, 0.0, -0.0, -0.0, np.inf, -np.inf, np.inf, -1.0, 1.0])
    got = torch.atan2(torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_array_equal(got, np.arctan2(a, b))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.arctan2(a, b)))
    ints = torch.atan2(torch.tensor([1, -2]), torch.tensor([3, 4]))
    assert ints.dtype is torch.float32
    np.testing.assert_allclose(ints.numpy(), np.arctan2([1.0, -2.0], [3.0, 4.0]), rtol=1e-6)
    x = torch.tensor([[1.0, 2.0], [-3.0, 4.0]])
    assert x.atan2_(torch.tensor([2.0, -1.0])) is x
    np.testing.assert_allclose(
        x.numpy(), np.arctan2([[1.0, 2.0], [-3.0, 4.0]], [2.0, -1.0]), rtol=1e-6
    )
    target = torch.empty(2)
    torch.atan2(torch.tensor([1.0, 1.0]), torch.tensor([1.0, -1.0]), out=target)
    np.testing.assert_allclose(target.numpy(), [np.pi / 4, 3 * np.pi / 4], rtol=1e-6)


def test_atan2_errors_as_torch():
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(TensorError, match="other must be a Tensor"):
        torch.atan2(x, 2.0)
    with pytest.raises(TensorError, match="must match|broadcast"):
        torch.atan2(x, torch.ones(3))
    with pytest.raises(TensorError, match="can't be cast to the in-place output type"):
        torch.tensor([1, 2]).atan2_(x)


@pytest.mark.parametrize(("a_shape", "b_shape"), [((3, 4), (3, 4)), ((2, 3), (3,)), ((4,), ())])
def test_atan2_gradients(a_shape, b_shape):
    check(torch.atan2, np.arctan2, a_shape, b_shape, node="Atan2Backward0")
    a, b = _rng(4).uniform(-2, 2, (3,)), _rng(5).uniform(-2, 2, (3,))
    la = torch.tensor(a, requires_grad=True, dtype=torch.float64)
    lb = torch.tensor(b, requires_grad=True, dtype=torch.float64)
    la.arctan2(lb).sum().backward()
    np.testing.assert_allclose(la.grad.numpy(), b / (a * a + b * b))
    np.testing.assert_allclose(lb.grad.numpy(), -a / (a * a + b * b))


# ------------------------------------------------------------------ pow, tensor exponent


def test_pow_of_two_tensors_broadcasts():
    base = _rng(6).uniform(0.5, 3.0, (3, 4)).astype(np.float32)
    exponent = _rng(7).uniform(-2.0, 2.0, (4,)).astype(np.float32)
    expected = np.power(base.astype(np.float64), exponent)
    b, e = torch.tensor(base), torch.tensor(exponent)
    for result in (torch.pow(b, e), b.pow(e), b**e):
        np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)
    c = b.clone()
    c **= e
    np.testing.assert_allclose(c.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(b.clone().pow_(e).numpy(), expected, rtol=1e-6)
    target = torch.empty(3, 4)
    assert torch.pow(b, e, out=target) is target


def test_pow_number_base_and_negative_bases_as_torch():
    e = np.array([0.0, 1.0, 2.0, 3.0, 0.5, -1.0])
    for base in (2.0, -2.0, 0.0, 1.0):
        with np.errstate(all="ignore"):
            expected = np.power(base, e)
        got = torch.pow(base, torch.tensor(e)).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-15)
        np.testing.assert_allclose((base ** torch.tensor(e)).numpy(), expected, rtol=1e-15)
    ints = torch.tensor(np.array([0, 1, 5, 10], np.int32))
    powers = 2**ints
    assert powers.dtype is torch.int32 and powers.tolist() == [1, 2, 32, 1024]
    assert ((-3) ** ints).tolist() == [1, -3, -243, 59049]
    pair = torch.tensor([2, 3]) ** torch.tensor([10, 3])
    assert pair.dtype is torch.int64 and pair.tolist() == [1024, 27]
    mixed = torch.tensor([2, 4]) ** torch.tensor([0.5, -0.5])
    assert mixed.dtype is torch.float32
    np.testing.assert_allclose(mixed.numpy(), [np.sqrt(2), 0.5], rtol=1e-6)
    with np.errstate(invalid="ignore"):
        negative = torch.tensor([-8.0, -8.0]) ** torch.tensor([1 / 3, 2.0])
    assert np.isnan(negative.numpy()[0]) and negative.numpy()[1] == 64.0


def test_integer_pow_of_tensors_wraps_as_torch():
    """Integers by repeated squaring in their own type: past the width they wrap (int32
    3 ** 30 is -1010140999, as torch's), a negative exponent gives 0 but for bases 1 and
    -1; uint8 wraps mod 256."""
    a = torch.tensor(np.array([3, 2, -3, 5, 1, -1, -1, 2, 0, 0, 7], np.int32))
    b = torch.tensor(np.array([30, 31, 3, -1, -5, -3, -2, 40, 0, 3, 2], np.int32))
    got = a**b
    assert got.dtype is torch.int32
    assert got.tolist() == [-1010140999, -(2**31), -27, 0, 1, -1, 1, 0, 1, 0, 49]
    wide = torch.tensor([3, 7]) ** torch.tensor([39, 22])
    assert wide.tolist() == [3**39, 7**22]  # int64, exact
    small = torch.tensor(np.array([3, 200], np.uint8)) ** torch.tensor(np.array([5, 2], np.uint8))
    assert small.dtype is torch.uint8 and small.tolist() == [243, 64]


@pytest.mark.parametrize(("a_shape", "b_shape"), [((2, 3), (2, 3)), ((2, 3), (3,)), ((3,), ())])
def test_pow_tensor_gradients(a_shape, b_shape):
    check(
        torch.pow,
        np.power,
        (a_shape, 0.5, 2.0),
        (b_shape, -1.5, 1.5),
        node="PowBackward1",
    )
    a, b = _rng(8).uniform(0.5, 2, (4,)), _rng(9).uniform(-1, 2, (4,))
    la = torch.tensor(a, requires_grad=True, dtype=torch.float64)
    lb = torch.tensor(b, requires_grad=True, dtype=torch.float64)
    (la**lb).sum().backward()
    np.testing.assert_allclose(la.grad.numpy(), b * a ** (b - 1))
    np.testing.assert_allclose(lb.grad.numpy(), a**b * np.log(a))


def test_pow_gradient_at_zero_base_and_number_bases():
    a = torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([2.0, 0.0, 3.0], dtype=torch.float64, requires_grad=True)
    (a**b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.0, 0.0, 12.0])  # 0 where b is 0
    np.testing.assert_allclose(b.grad.numpy(), [0.0, 0.0, 8 * np.log(2.0)])
    e = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    out = torch.pow(3.0, e)
    assert out.grad_fn.name() == "PowBackward2"
    out.sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), 3.0 ** np.array([1, 2]) * np.log(3.0))
    e = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    zero = 0.0**e
    assert zero.grad_fn.name() == "PowBackward2"
    zero.sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), [0.0, 0.0])
    e = torch.tensor([2.0], dtype=torch.float64, requires_grad=True)
    negative = (-2.0) ** e
    assert negative.item() == 4.0
    negative.sum().backward()
    assert np.isnan(e.grad.item())  # log of a negative base, as torch's


# ------------------------------------------------------------- nansum, nanmean, aminmax


def _with_nans(shape, seed=10):
    values = _rng(seed).standard_normal(shape)
    values[_rng(seed + 1).uniform(size=shape) < 0.3] = np.nan
    return values


@pytest.mark.parametrize(
    ("shape", "dim", "keepdim"),
    [((7,), None, False), ((3, 4), 1, False), ((3, 4), 0, True), ((2, 3, 4), (0, 2), False),
     ((2, 3, 4), -1, True), ((2, 3, 4), None, True)],
)  # fmt: skip
def test_nansum_and_nanmean_match_numpy(shape, dim, keepdim):
    values = _with_nans(shape)
    values[(0,) * len(shape)] = np.nan  # (a slice may be all NaN: nanmean gives NaN there)
    x = torch.tensor(values)
    axis = tuple(dim) if isinstance(dim, tuple) else dim
    with np.errstate(all="ignore"):
        total = np.nansum(values, axis=axis, keepdims=keepdim)
        mean = np.nanmean(values, axis=axis, keepdims=keepdim)
    for got in (torch.nansum(x, dim, keepdim), x.nansum(dim, keepdim=keepdim)):
        assert tuple(got.shape) == np.shape(total)
        np.testing.assert_allclose(got.numpy(), total, rtol=1e-12)
    for got in (torch.nanmean(x, dim, keepdim), x.nanmean(dim, keepdim=keepdim)):
        np.testing.assert_allclose(got.numpy(), mean, rtol=1e-12)


def test_nan_reductions_all_nan_dtypes_and_out():
    x = torch.tensor([[np.nan, np.nan], [1.0, np.nan]])
    assert torch.nansum(x, 1).tolist() == [0.0, 1.0]
    got = torch.nanmean(x, 1).numpy()
    assert np.isnan(got[0]) and got[1] == 1.0
    ints = torch.tensor(np.array([[1, 2], [3, 4]], np.int32))
    assert torch.nansum(ints).dtype is torch.int64 and torch.nansum(ints).item() == 10
    as_float = torch.nansum(ints, 0, dtype=torch.float64)
    assert as_float.dtype is torch.float64 and as_float.tolist() == [4.0, 6.0]
    half = torch.tensor([1.0, np.nan, 3.0], dtype=torch.float16)
    assert torch.nansum(half).dtype is torch.float16 and torch.nanmean(half).item() == 2.0
    wide = torch.nanmean(torch.tensor([1.0, np.nan, 2.0]), dtype=torch.float64)
    assert wide.dtype is torch.float64 and wide.item() == 1.5
    target = torch.empty(2)
    assert torch.nansum(x, 1, out=target) is target and target.tolist() == [0.0, 1.0]
    with pytest.raises(TensorError, match="nanmean\\(\\): expected input to have floating point"):
        torch.nanmean(ints)
    with pytest.raises(TensorError, match="out of range"):
        x.nansum(2)


@pytest.mark.parametrize(("shape", "dim", "keepdim"), [((5,), None, False), ((3, 4), 1, False),
                                                      ((3, 4), 0, True), ((2, 3, 4), -1, False),
                                                      ((2, 3), None, True)])  # fmt: skip
def test_aminmax_matches_numpy(shape, dim, keepdim):
    values = _rng(12).integers(-5, 5, shape).astype(np.float32)
    x = torch.tensor(values)
    result = torch.aminmax(x, dim=dim, keepdim=keepdim)
    assert type(result).__name__ == "aminmax" and result._fields == ("min", "max")
    low, high = result
    expected_low = values.min(axis=dim, keepdims=keepdim)
    expected_high = values.max(axis=dim, keepdims=keepdim)
    assert tuple(low.shape) == np.shape(expected_low)
    np.testing.assert_array_equal(low.numpy(), expected_low)
    np.testing.assert_array_equal(result.max.numpy(), expected_high)
    method = x.aminmax(dim=dim, keepdim=keepdim)
    np.testing.assert_array_equal(method.min.numpy(), expected_low)


def test_aminmax_integers_nan_and_errors():
    ints = torch.tensor(np.array([[3, -1], [0, 7]], np.int64))
    low, high = ints.aminmax(dim=0)
    assert low.dtype is torch.int64 and low.tolist() == [0, -1] and high.tolist() == [3, 7]
    low, high = torch.aminmax(torch.tensor([1.0, np.nan, -2.0]))
    assert np.isnan(low.item()) and np.isnan(high.item())  # NaN propagates, as torch
    with pytest.raises(TensorError, match="cannot compute aminmax over an empty dimension"):
        torch.aminmax(torch.empty(0))
    with pytest.raises(TensorError, match="cannot compute aminmax over an empty dimension"):
        torch.empty(2, 0).aminmax(dim=1)
    with pytest.raises(TensorError, match="out of range"):
        ints.aminmax(dim=2)


@pytest.mark.parametrize(("dim", "keepdim"), [(None, False), (1, False), ((0, 2), True)])
def test_nan_reduction_gradients(dim, keepdim):
    values = _with_nans((2, 3, 4), seed=20)
    present = ~np.isnan(values)
    leaf = torch.tensor(values, requires_grad=True)
    out = torch.nansum(leaf, dim, keepdim)
    assert out.grad_fn.name() == "NansumBackward0"
    weights = _rng(21).standard_normal(tuple(out.shape))
    (out * torch.tensor(weights)).sum().backward()
    axis = dim if dim is not None else (0, 1, 2)
    spread = np.broadcast_to(
        weights if keepdim or dim is None else np.expand_dims(weights, axis), values.shape
    )
    np.testing.assert_allclose(leaf.grad.numpy(), np.where(present, spread, 0.0))
    leaf = torch.tensor(values, requires_grad=True)
    out = leaf.nanmean(dim, keepdim=keepdim)
    assert out.grad_fn.name() == "DivBackward0"
    (out * torch.tensor(weights)).sum().backward()
    count = present.sum(axis=axis, keepdims=True)
    np.testing.assert_allclose(leaf.grad.numpy(), np.where(present, spread / count, 0.0))
    check(
        lambda x: torch.nansum(x, dim, keepdim),
        lambda x: np.sum(x, axis=dim, keepdims=keepdim),
        (2, 3, 4),
    )
    check(
        lambda x: x.nanmean(dim, keepdim),
        lambda x: np.mean(x, axis=dim, keepdims=keepdim),
        (2, 3, 4),
    )


def test_aminmax_gradients_split_among_ties():
    values = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.5]])
    leaf = torch.tensor(values, requires_grad=True)
    low, high = torch.aminmax(leaf, dim=1)
    assert low.grad_fn.name() == "AminmaxBackward0" and high.grad_fn is low.grad_fn
    (low * 2 + high * torch.tensor([10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), [[2.0, 5.0, 5.0], [50.0, 50.0, 2.0]])
    leaf = torch.tensor(values, requires_grad=True)
    leaf.aminmax().max.backward()  # only one output's gradient arrives
    np.testing.assert_allclose(leaf.grad.numpy(), [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]])
    check(
        lambda x: torch.aminmax(x, dim=0, keepdim=True).min * 3,
        lambda x: x.min(0, keepdims=True) * 3,
        (3, 4),
    )


# ------------------------------------------------------------------------------ products


def _f64(shape, seed):
    return _rng(seed).standard_normal(shape)


@pytest.mark.parametrize("input_shape", [(3,), (1,), ()])
@pytest.mark.parametrize(("beta", "alpha"), [(1, 1), (0.5, 2.0), (0, -1.5)])
def test_addmv_matches_numpy(input_shape, beta, alpha):
    i, m, v = _f64(input_shape, 1), _f64((3, 4), 2), _f64((4,), 3)
    expected = beta * i + alpha * m @ v
    got = torch.addmv(torch.tensor(i), torch.tensor(m), torch.tensor(v), beta=beta, alpha=alpha)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    method = torch.tensor(i).addmv(torch.tensor(m), torch.tensor(v), beta=beta, alpha=alpha)
    np.testing.assert_allclose(method.numpy(), expected, rtol=1e-12)


def test_addmv_addr_addbmm_in_place_out_and_beta_zero_ignores_nan():
    i, m, v = _f64((3,), 1), _f64((3, 4), 2), _f64((4,), 3)
    x = torch.tensor(i)
    assert x.addmv_(torch.tensor(m), torch.tensor(v), alpha=2) is x
    np.testing.assert_allclose(x.numpy(), i + 2 * m @ v, rtol=1e-12)
    nan = torch.tensor([np.nan, np.nan, np.nan], dtype=torch.float64)
    np.testing.assert_allclose(
        torch.addmv(nan, torch.tensor(m), torch.tensor(v), beta=0).numpy(), m @ v, rtol=1e-12
    )
    target = torch.empty(3, dtype=torch.float64)
    assert torch.addmv(torch.tensor(i), torch.tensor(m), torch.tensor(v), out=target) is target
    a, b, base = _f64((3,), 4), _f64((5,), 5), _f64((3, 5), 6)
    y = torch.tensor(base)
    assert y.addr_(torch.tensor(a), torch.tensor(b), beta=2) is y
    np.testing.assert_allclose(y.numpy(), 2 * base + np.outer(a, b), rtol=1e-12)
    b1, b2 = _f64((2, 3, 4), 7), _f64((2, 4, 5), 8)
    z = torch.tensor(base)
    assert z.addbmm_(torch.tensor(b1), torch.tensor(b2), beta=0.5, alpha=3) is z
    expected = 0.5 * base + 3 * np.einsum("bij,bjk->ik", b1, b2)
    np.testing.assert_allclose(z.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("input_shape", [(3, 5), (5,), (3, 1), ()])
def test_addr_and_addbmm_broadcast_input(input_shape):
    base, a, b = _f64(input_shape, 9), _f64((3,), 10), _f64((5,), 11)
    got = torch.addr(torch.tensor(base), torch.tensor(a), torch.tensor(b), beta=-1, alpha=0.5)
    np.testing.assert_allclose(got.numpy(), -base + 0.5 * np.outer(a, b), rtol=1e-12)
    b1, b2 = _f64((4, 3, 2), 12), _f64((4, 2, 5), 13)
    got = torch.addbmm(torch.tensor(base), torch.tensor(b1), torch.tensor(b2))
    np.testing.assert_allclose(got.numpy(), base + np.einsum("bij,bjk->ik", b1, b2), rtol=1e-12)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: torch.addmv(torch.ones(3), torch.ones(3, 4), torch.ones(5)), "size mismatch"),
        (lambda: torch.addmv(torch.ones(3), torch.ones(3, 4, 1), torch.ones(4)), "size mismatch"),
        (lambda: torch.addmv(torch.ones(4), torch.ones(3, 4), torch.ones(4)), "expanded size"),
        (lambda: torch.ones(3).addmv_(torch.ones(2, 4), torch.ones(4)), "expanded size"),
        (lambda: torch.ones(1).addmv_(torch.ones(2, 4), torch.ones(4)), "doesn't match"),
        (lambda: torch.addmv(torch.ones(3), torch.ones(3, 4), torch.ones(4), beta="x"), "beta"),
        (lambda: torch.addr(torch.ones(2, 2), torch.ones(2, 1), torch.ones(2)), "argument vec1"),
        (lambda: torch.addbmm(torch.ones(2, 2), torch.ones(2, 2), torch.ones(2, 2, 2)), "3D"),
        (lambda: torch.addbmm(torch.ones(3, 5), torch.ones(2, 3, 4), torch.ones(3, 4, 5)), "batch"),
        (lambda: torch.addbmm(torch.ones(3, 5), torch.ones(2, 3, 4), torch.ones(2, 3, 5)), "bmm"),
        (lambda: torch.inner(torch.ones(2, 3), torch.ones(4)), "last dimension must match"),
        (lambda: torch.vdot(torch.ones(2, 3), torch.ones(3)), "1D tensors expected"),
        (lambda: torch.vdot(torch.ones(3), torch.ones(3, dtype=torch.float64)), "same dtype"),
        (lambda: torch.vdot(torch.ones(3), torch.ones(4)), "inconsistent tensor size"),
        (lambda: torch.diag_embed(torch.ones(3), 0, 0, -2), "cannot be identical"),
        (lambda: torch.rot90(torch.ones(2, 2), 1, (0, 1, 0)), "total rotation dims == 2"),
        (lambda: torch.rot90(torch.ones(2), 1), "total dims >= 2"),
        (lambda: torch.rot90(torch.ones(2, 2), 1, (1, -1)), "rotation dims to be different"),
        (lambda: torch.dist(torch.ones(2), torch.ones(3)), "match|broadcast"),
        (lambda: torch.dist(torch.tensor([1, 2]), torch.tensor([1, 2])), "floating point"),
        (lambda: torch.renorm(torch.ones(2, 2), 0, 0, 1.0), "non-positive-norm"),
        (lambda: torch.renorm(torch.ones(2, 2), 2, 0, -1.0), "maxnorm to be >= 0"),
        (lambda: torch.renorm(torch.ones(2), 2, 0, 1.0), "at least 2 dimensions"),
        (lambda: torch.chain_matmul(), "one or more matrices"),
        (lambda: torch.chain_matmul(torch.ones(2, 3), torch.ones(3)), "must be 2D"),
        (lambda: torch.linalg.multi_dot([torch.ones(2, 3)]), "at least 2 tensors"),
        (lambda: torch.linalg.multi_dot([torch.ones(2, 3, 1), torch.ones(1, 2)]), "1D or 2D"),
        (lambda: torch.linalg.multi_dot([torch.ones(2, 3), torch.ones(4, 2)]), "cannot be"),
        (lambda: torch.linalg.multi_dot(torch.ones(2, 2)), "list or tuple"),
    ],
)  # fmt: skip
def test_product_errors_as_torch(call, error):
    with pytest.raises(TensorError, match=error):
        call()


@pytest.mark.parametrize(
    ("a_shape", "b_shape"), [((4,), (4,)), ((2, 3, 4), (5, 4)), ((3,), (2, 3)), ((), (2, 3))]
)
def test_inner_matches_numpy(a_shape, b_shape):
    a, b = _f64(a_shape, 14), _f64(b_shape, 15)
    got = torch.inner(torch.tensor(a), torch.tensor(b))
    assert tuple(got.shape) == np.shape(np.inner(a, b))
    np.testing.assert_allclose(got.numpy(), np.inner(a, b), rtol=1e-12)
    np.testing.assert_allclose(torch.tensor(a).inner(torch.tensor(b)).numpy(), np.inner(a, b))


def test_vdot_and_chain_products():
    a, b = _f64((6,), 16), _f64((6,), 17)
    assert torch.vdot(torch.tensor(a), torch.tensor(b)).item() == pytest.approx(np.vdot(a, b))
    assert torch.tensor(a).vdot(torch.tensor(b)).ndim == 0
    for shapes in ([(4, 6), (6, 2), (2, 3)], [(2, 2)], [(3, 1), (1, 7), (7, 2), (2, 5)]):
        mats = [_f64(s, 18 + i) for i, s in enumerate(shapes)]
        expected = mats[0] if len(mats) == 1 else np.linalg.multi_dot(mats)
        got = torch.chain_matmul(*[torch.tensor(m) for m in mats])
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    for shapes in ([(4,), (4, 6), (6,)], [(4,), (4, 3)], [(2, 4), (4,)], [(5, 2), (2, 8), (8, 3)]):
        mats = [_f64(s, 30 + i) for i, s in enumerate(shapes)]
        got = torch.linalg.multi_dot([torch.tensor(m) for m in mats])
        np.testing.assert_allclose(got.numpy(), np.linalg.multi_dot(mats), rtol=1e-12)
    target = torch.empty(2, 3, dtype=torch.float64)
    mats = [torch.tensor(_f64(s, 40 + i)) for i, s in enumerate([(2, 4), (4, 3)])]
    assert torch.linalg.multi_dot(mats, out=target) is target


def test_multi_dot_takes_the_cheapest_order():
    """(10x100)(100x5)(5x50): left first is 5,000 + 2,500 multiplications against
    25,000 + 50,000 the other way; the time says which order ran."""
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        a, b, c = torch.empty(10, 100), torch.empty(100, 5), torch.empty(5, 50)
        torch.linalg.multi_dot([a, b, c])  # (the first products on fresh tensors cost less)
        chain = simulated_ps(context, lambda: torch.linalg.multi_dot([a, b, c]))
        left = simulated_ps(context, lambda: (a @ b) @ c)
        right = simulated_ps(context, lambda: a @ (b @ c))
        assert chain == pytest.approx(left, rel=0.01) and left < 0.97 * right


def _np_diag_embed(x, offset, dim1, dim2):
    n = x.shape[-1] + abs(offset)
    out_ndim = x.ndim + 1
    d1, d2 = dim1 % out_ndim, dim2 % out_ndim
    base = np.zeros(x.shape[:-1] + (n, n))
    rows = np.arange(x.shape[-1]) + max(-offset, 0)
    cols = np.arange(x.shape[-1]) + max(offset, 0)
    base[..., rows, cols] = x
    return np.moveaxis(base, (-2, -1), (d1, d2))


@pytest.mark.parametrize(
    ("shape", "offset", "dim1", "dim2"),
    [((3,), 0, -2, -1), ((2, 3), 1, -2, -1), ((2, 3), -2, 0, 2), ((2, 3, 4), 0, 1, 3),
     ((2, 3), 1, -1, 0)],
)  # fmt: skip
def test_diag_embed_matches_numpy(shape, offset, dim1, dim2):
    x = _f64(shape, 50)
    got = torch.diag_embed(torch.tensor(x), offset, dim1, dim2)
    expected = _np_diag_embed(x, offset, dim1, dim2)
    assert tuple(got.shape) == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)
    np.testing.assert_array_equal(torch.tensor(x).diag_embed(offset, dim1, dim2).numpy(), expected)


@pytest.mark.parametrize("k", [-3, -1, 0, 1, 2, 3, 5])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (2, 0), (-1, 1)])
def test_rot90_matches_numpy(k, dims):
    x = _f64((2, 3, 4), 51)
    got = torch.rot90(torch.tensor(x), k, dims)
    np.testing.assert_array_equal(got.numpy(), np.rot90(x, k, dims))
    np.testing.assert_array_equal(torch.tensor(x).rot90(k, dims).numpy(), np.rot90(x, k, dims))


@pytest.mark.parametrize("p", [2, 1, 3.5, 0.5, 0, np.inf, -np.inf])
def test_dist_matches_numpy(p):
    a, b = _f64((3, 4), 52), _f64((4,), 53)
    b[1] = a[0, 1]  # one equal pair: p = 0 counts the others
    diff = (a - b).ravel()
    expected = np.linalg.norm(diff, p) if p != 0 else np.count_nonzero(diff)
    assert torch.dist(torch.tensor(a), torch.tensor(b), p).item() == pytest.approx(expected)
    assert torch.tensor(a).dist(torch.tensor(b), p).item() == pytest.approx(expected)


def _np_renorm(x, p, dim, maxnorm):
    moved = np.moveaxis(x, dim, 0).reshape(x.shape[dim], -1)
    norms = np.linalg.norm(moved, p, axis=1)
    factor = np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    shape = [1] * x.ndim
    shape[dim] = -1
    return x * factor.reshape(shape)


@pytest.mark.parametrize(("p", "dim", "maxnorm"), [(2, 0, 1.0), (1, 1, 2.0), (3, -1, 0.5),
                                                    (np.inf, 0, 1.0), (2, 2, 100.0)])  # fmt: skip
def test_renorm_matches_numpy(p, dim, maxnorm):
    x = _f64((3, 2, 4), 54) * 2
    expected = _np_renorm(x, p, dim, maxnorm)
    np.testing.assert_allclose(torch.renorm(torch.tensor(x), p, dim, maxnorm).numpy(), expected)
    t = torch.tensor(x)
    assert t.renorm_(p, dim, maxnorm) is t
    np.testing.assert_allclose(t.numpy(), expected)


PRODUCT_GRADS = {
    "addmv": (
        lambda i, m, v: torch.addmv(i, m, v, beta=0.5, alpha=-2.0),
        lambda i, m, v: 0.5 * i + -2.0 * m @ v,
        [(1,), (3, 4), (4,)],
        "AddmvBackward0",
    ),
    "addmv_beta0": (
        lambda i, m, v: torch.addmv(i, m, v, beta=0),
        lambda i, m, v: 0 * i + m @ v,
        [(3,), (3, 4), (4,)],
        "AddmvBackward0",
    ),
    "addr": (
        lambda i, a, b: i.addr(a, b, beta=2.0, alpha=3.0),
        lambda i, a, b: 2.0 * i + 3.0 * np.outer(a, b),
        [(3, 1), (3,), (5,)],
        "AddrBackward0",
    ),
    "addbmm": (
        lambda i, a, b: torch.addbmm(i, a, b, alpha=0.5),
        lambda i, a, b: i + 0.5 * np.einsum("bij,bjk->ik", a, b),
        [(3, 5), (2, 3, 4), (2, 4, 5)],
        "AddbmmBackward0",
    ),
    "inner": (torch.inner, np.inner, [(2, 3), (4, 3)], None),
    "vdot": (torch.vdot, np.vdot, [(5,), (5,)], "DotBackward0"),
    "chain_matmul": (
        torch.chain_matmul,
        lambda a, b, c: a @ b @ c,
        [(2, 3), (3, 4), (4, 2)],
        None,
    ),
    "multi_dot": (
        lambda a, b, c: torch.linalg.multi_dot([a, b, c]),
        lambda a, b, c: np.linalg.multi_dot([a, b, c]),
        [(3,), (3, 4), (4,)],
        None,
    ),
    "diag_embed": (
        lambda x: torch.diag_embed(x, 1, 0, 2),
        lambda x: _np_diag_embed(x, 1, 0, 2),
        [(2, 3)],
        "DiagEmbedBackward0",
    ),
    "rot90": (lambda x: x.rot90(1, (0, 2)), lambda x: np.rot90(x, 1, (0, 2)), [(2, 3, 4)], None),
    "dist": (
        lambda a, b: torch.dist(a, b, 3),
        lambda a, b: np.sum(np.abs(a - b) ** 3) ** (1 / 3),
        [(3, 4), (4,)],
        None,
    ),
    "dist2": (
        lambda a, b: a.dist(b),
        lambda a, b: np.linalg.norm((a - b).ravel()),
        [(3, 4), (3, 4)],
        None,
    ),
}


@pytest.mark.parametrize(
    ("p", "dim", "maxnorm"), [(2, 0, 0.8), (1, 1, 1.0), (3, -1, 0.6), (0.5, 0, 3.0),
                              (np.inf, 1, 0.5), (2, 0, 100.0)],
)  # fmt: skip
def test_renorm_gradients(p, dim, maxnorm):
    check(
        lambda x: torch.renorm(x, p, dim, maxnorm),
        lambda x: _np_renorm(x, p, dim, maxnorm),
        (3, 4, 2),
        node="RenormBackward0",
    )


def test_renorm_in_place_in_the_graph():
    values = _f64((3, 4), 64)
    leaf = torch.tensor(values, requires_grad=True)
    y = leaf * 1
    y.renorm_(2, 0, 0.5)
    assert y.grad_fn.name() == "RenormBackward0"
    weights = _f64((3, 4), 65)
    (y * torch.tensor(weights)).sum().backward()
    reference = torch.tensor(values, requires_grad=True)
    (torch.renorm(reference, 2, 0, 0.5) * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), reference.grad.numpy())


@pytest.mark.parametrize("name", list(PRODUCT_GRADS))
def test_product_gradients(name):
    torch_fn, numpy_fn, shapes, node = PRODUCT_GRADS[name]
    check(torch_fn, numpy_fn, *shapes, node=node)


def test_addmv_gradients_against_formulas():
    i, m, v = _f64((3,), 60), _f64((3, 4), 61), _f64((4,), 62)
    leaves = [torch.tensor(a, requires_grad=True) for a in (i, m, v)]
    out = torch.addmv(*leaves, beta=2.0, alpha=3.0)
    g = _f64((3,), 63)
    (out * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(leaves[0].grad.numpy(), 2.0 * g)
    np.testing.assert_allclose(leaves[1].grad.numpy(), 3.0 * np.outer(g, v))
    np.testing.assert_allclose(leaves[2].grad.numpy(), 3.0 * m.T @ g)


# --------------------------------------------------------------------------------- cost

N = 1 << 16


def test_costs_in_timing_only_mode():
    """The elementwise ops cost one elementwise pass as sin does; atan2 what a binary op
    costs; the fused products what their matmul costs plus the scale and the add."""
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x, y = torch.empty(N), torch.empty(N)
        sin = simulated_ps(context, x.sin)
        for name in UNARY:
            assert 0.9 * sin <= simulated_ps(context, getattr(x, name)) <= 1.2 * sin, name
        add = simulated_ps(context, lambda: x + y)
        assert 0.9 * add <= simulated_ps(context, lambda: torch.atan2(x, y)) <= 1.2 * add
        assert add <= simulated_ps(context, lambda: x**y) <= 4 * add
        total = simulated_ps(context, x.sum)
        assert total < simulated_ps(context, x.nansum) < 4 * total + 2 * sin
        mat, vec, bias = torch.empty(256, 256), torch.empty(256), torch.empty(256)
        mv = simulated_ps(context, lambda: mat @ vec)
        scale = simulated_ps(context, lambda: bias * 3)
        add = simulated_ps(context, lambda: bias.add_(bias, alpha=2))
        fused = simulated_ps(context, lambda: torch.addmv(bias, mat, vec, beta=2, alpha=3))
        assert mv < fused <= 1.1 * (mv + scale + add)
        b1, b2, base = torch.empty(4, 64, 32), torch.empty(4, 32, 64), torch.empty(64, 64)
        bmm = simulated_ps(context, lambda: torch.bmm(b1, b2))
        assert 0.5 * bmm < simulated_ps(context, lambda: torch.addbmm(base, b1, b2)) < 3 * bmm


def test_same_time_in_both_modes_and_values_on_both_backends():
    a = np.linspace(-0.9, 0.9, 2048)

    def run(context):
        x = torch.from_numpy(a.astype(np.float32))
        m = torch.from_numpy(np.outer(a[:64], a[:32]).astype(np.float32))
        before = context.now
        results = [
            x.atanh(),
            torch.atan2(x, x.flip(0)),
            x.abs() ** x,
            torch.nanmean(x.reshape(32, 64), 1),
            torch.addmv(x[:64], m, x[:32]),
            torch.renorm(m, 2, 0, 0.1),
            *torch.aminmax(m, dim=0),
            torch.diag_embed(m[:4], 1),
            torch.rot90(m, 3),
            torch.inner(m, m),
            torch.dist(m, m.flip(1), 3),
            torch.linalg.multi_dot([m.t(), m, x[:32]]),
            torch.addbmm(m[:8, :8], m.reshape(4, 16, 32)[:, :8], m.reshape(4, 32, 16)[:, :, :8]),
        ]
        return context.now - before, results

    times, values = in_every_mode(run)
    assert times[0] == times[1]
    assert_same_values(*values)
    np.testing.assert_allclose(values[0][0], np.arctanh(a.astype(np.float32)), rtol=1e-6)


def test_autocast_covers_the_new_products_and_float32_ops():
    m = torch.randn(3, 4, requires_grad=True)
    v = torch.randn(4, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    with torch.autocast("cuda"):
        y = torch.addmv(b, m, v)
        w = torch.zeros(3, 1).addr(b, v)
        h = torch.ones(3, dtype=torch.float16)
        assert h.tan().dtype is torch.float32 and torch.sinh(h).dtype is torch.float32
    assert y.dtype is torch.float16 and w.dtype is torch.float16
    (y.float().sum() + w.float().sum()).backward()
    assert m.grad.dtype is v.grad.dtype is b.grad.dtype is torch.float32
