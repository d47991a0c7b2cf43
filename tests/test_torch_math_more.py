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
