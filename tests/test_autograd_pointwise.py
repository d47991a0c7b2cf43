"""Backward of the pointwise ops, reductions, activations, norms and losses of
``pointwise_formulas``: gradients against NumPy central differences (float64) at points
away from kinks, and torch's values at the kinks (clamp and hardtanh at a bound, abs and
the norms at zero, max/min/amax with ties, prod with zeros)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import linalg


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _check(torch_fn, numpy_fn, *shapes, seed=0, low=-1.0, high=1.0, node=None):
    check(torch_fn, numpy_fn, *shapes, seed=seed, low=low, high=high, node=node)


def _erf(x):
    return np.vectorize(math.erf)(x)


def _softplus(x, beta=1.0, threshold=20.0):
    bx = beta * x
    return np.where(bx > threshold, x, np.log1p(np.exp(bx)) / beta)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _elu(x, alpha=1.0, scale=1.0, in_scale=1.0):
    return scale * np.where(x > 0, x, alpha * (np.exp(x * in_scale) - 1))


def _reduce(v, reduction, divisor=None):
    if reduction == "none":
        return v
    if reduction == "sum":
        return v.sum()
    return v.sum() / (divisor if divisor else v.size)


_SA, _SS = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
S = (2, 3)
POS = ((2, 3), 0.5, 1.5)

POINTWISE = [
    ("sqrt", lambda x: torch.sqrt(x) + x.sqrt(), lambda x: 2 * np.sqrt(x), POS, None),
    ("sqrt_node", torch.sqrt, np.sqrt, POS, "SqrtBackward0"),
    ("rsqrt", lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), POS, "RsqrtBackward0"),
    ("abs", lambda x: x.abs() + abs(x) + torch.abs(x), lambda x: 3 * np.abs(x), S, None),
    ("square", lambda x: torch.square(x) + x.square(), lambda x: 2 * x * x, S, None),
    ("reciprocal", lambda x: torch.reciprocal(x), lambda x: 1 / x, POS, "ReciprocalBackward0"),
    ("sin", lambda x: x.sin(), np.sin, S, "SinBackward0"),
    ("cos", lambda x: torch.cos(x), np.cos, S, "CosBackward0"),
    ("log1p", lambda x: torch.log1p(x), np.log1p, POS, "Log1PBackward0"),
    ("expm1", lambda x: x.expm1(), np.expm1, S, "Expm1Backward0"),
    ("erf", lambda x: torch.erf(x), _erf, S, "ErfBackward0"),
    ("clamp", lambda x: x.clamp(-0.5, 0.4), lambda x: np.clip(x, -0.5, 0.4), S, "ClampBackward1"),
    ("clip_min", lambda x: torch.clip(x, min=-0.3), lambda x: np.maximum(x, -0.3), S, None),
    ("clamp_max", lambda x: torch.clamp(x, max=0.2), lambda x: np.minimum(x, 0.2), S, None),
    ("clamp_min_m", lambda x: x.clamp_min(0.1), lambda x: np.maximum(x, 0.1), S, None),
    ("clamp_max_f", lambda x: torch.clamp_max(x, 0.1), lambda x: np.minimum(x, 0.1), S, None),
    (
        "clamp_min_tensor",
        lambda x: x.clamp_min(torch.tensor([[-0.5], [0.2]], dtype=torch.float64)),
        lambda x: np.maximum(x, np.array([[-0.5], [0.2]])),
        (3,),
        "ClampMinBackward0",
    ),
]


@pytest.mark.parametrize("name,fn,ref,shape,node", POINTWISE, ids=[c[0] for c in POINTWISE])
def test_pointwise_gradients(ctx, name, fn, ref, shape, node):
    _check(fn, ref, shape, node=node)


def test_clamp_with_tensor_bounds_gives_every_input_its_gradient(ctx):
    _check(
        lambda x, lo, hi: x.clamp(lo, hi),
        lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
        (3, 4),
        ((4,), -0.8, 0.0),
        ((3, 1), -0.2, 0.8),
        seed=3,
        node="ClampBackward0",
    )


REDUCTIONS = [
    ("max_dim", lambda x: x.max(1).values, lambda x: x.max(1), "MaxBackward0"),
    ("min_dim", lambda x: torch.min(x, 0)[0], lambda x: x.min(0), "MinBackward0"),
    ("max_keep", lambda x: x.max(-1, keepdim=True)[0], lambda x: x.max(-1, keepdims=True), None),
    ("max_all", lambda x: x.max(), lambda x: x.max(), "MaxBackward1"),
    ("min_all", lambda x: torch.min(x), lambda x: x.min(), "MinBackward1"),
    ("amax", lambda x: x.amax(1), lambda x: x.max(1), "AmaxBackward0"),
    (
        "amin",
        lambda x: torch.amin(x, (0, 2), keepdim=True),
        lambda x: x.min((0, 2), keepdims=True),
        "AminBackward0",
    ),
    ("amax_all", lambda x: torch.amax(x), lambda x: x.max(), None),
    ("var", lambda x: x.var(1), lambda x: x.var(1, ddof=1), "VarBackward0"),
    ("var_c0", lambda x: torch.var(x, correction=0), lambda x: x.var(), None),
    (
        "var_unbiased",
        lambda x: x.var((0, 2), False, keepdim=True),
        lambda x: x.var((0, 2), keepdims=True),
        None,
    ),
    ("std", lambda x: x.std(), lambda x: x.std(ddof=1), "StdBackward0"),
    (
        "std_dim",
        lambda x: torch.std(x, dim=-1, keepdim=True),
        lambda x: x.std(-1, ddof=1, keepdims=True),
        None,
    ),
    (
        "var_mean",
        lambda x: torch.var_mean(x, 1)[0] * 2 + torch.var_mean(x, 1)[1],
        lambda x: x.var(1, ddof=1) * 2 + x.mean(1),
        None,
    ),
    ("std_mean", lambda x: sum(torch.std_mean(x, 0)), lambda x: x.std(0, ddof=1) + x.mean(0), None),
    ("prod", lambda x: x.prod(), lambda x: x.prod(), "ProdBackward0"),
    ("prod_dim", lambda x: torch.prod(x, 1), lambda x: x.prod(1), "ProdBackward1"),
    ("prod_keep", lambda x: x.prod(0, keepdim=True), lambda x: x.prod(0, keepdims=True), None),
    (
        "logsumexp",
        lambda x: x.logsumexp(1),
        lambda x: np.log(np.exp(x).sum(1)),
        "LogsumexpBackward0",
    ),
    (
        "logsumexp_dims",
        lambda x: torch.logsumexp(x, (0, 2), keepdim=True),
        lambda x: np.log(np.exp(x).sum((0, 2), keepdims=True)),
        None,
    ),
    ("norm", lambda x: x.norm(), lambda x: np.sqrt((x * x).sum()), "NormBackward0"),
    ("norm_1", lambda x: x.norm(1, 1), lambda x: np.abs(x).sum(1), "NormBackward1"),
    (
        "norm_keep",
        lambda x: torch.norm(x, dim=(0, 2), keepdim=True),
        lambda x: np.sqrt((x * x).sum((0, 2), keepdims=True)),
        None,
    ),
    (
        "vector_norm",
        lambda x: linalg.vector_norm(x, dim=-1),
        lambda x: np.sqrt((x * x).sum(-1)),
        "LinalgVectorNormBackward0",
    ),
    ("vector_norm_1", lambda x: linalg.vector_norm(x, 1), lambda x: np.abs(x).sum(), None),
    (
        "linalg_norm",
        lambda x: linalg.norm(x, dim=(1, 2)),
        lambda x: np.sqrt((x * x).sum((1, 2))),
        None,
    ),
    ("cumsum", lambda x: x.cumsum(1), lambda x: x.cumsum(1), "CumsumBackward0"),
    ("cumsum_f", lambda x: torch.cumsum(x, -1), lambda x: x.cumsum(-1), None),
]


@pytest.mark.parametrize("name,fn,ref,node", REDUCTIONS, ids=[c[0] for c in REDUCTIONS])
def test_reduction_gradients(ctx, name, fn, ref, node):
    _check(fn, ref, (2, 3, 2), seed=7, low=0.3 if "prod" in name else -1.0, node=node)


def _hardswish(x):
    return x * np.clip(x + 3, 0, 6) / 6


ACTIVATIONS = [
    (
        "leaky_relu",
        lambda x: F.leaky_relu(x, 0.2),
        lambda x: np.where(x > 0, x, 0.2 * x),
        "LeakyReluBackward0",
    ),
    ("elu", lambda x: F.elu(x, alpha=0.7), lambda x: _elu(x, 0.7), "EluBackward0"),
    ("selu", lambda x: F.selu(x) + torch.selu(x), lambda x: 2 * _elu(x, _SA, _SS), None),
    ("celu", lambda x: F.celu(x, 0.5), lambda x: _elu(x, 0.5, 1.0, 2.0), None),
    (
        "softplus",
        lambda x: F.softplus(x, beta=2.0, threshold=3.0),
        lambda x: _softplus(x, 2.0, 3.0),
        "SoftplusBackward0",
    ),
    (
        "hardtanh",
        lambda x: F.hardtanh(x, -2.0, 1.5),
        lambda x: np.clip(x, -2.0, 1.5),
        "HardtanhBackward0",
    ),
    ("relu6", lambda x: F.relu6(x * 2), lambda x: np.clip(x * 2, 0, 6), "HardtanhBackward0"),
    ("mish", F.mish, lambda x: x * np.tanh(_softplus(x)), "MishBackward0"),
    ("hardswish", F.hardswish, _hardswish, "HardswishBackward0"),
    ("hardsigmoid", F.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1), "HardsigmoidBackward0"),
    ("logsigmoid", F.logsigmoid, lambda x: np.log(_sigmoid(x)), "LogSigmoidBackward0"),
    ("softsign", F.softsign, lambda x: x / (1 + np.abs(x)), None),
    ("tanhshrink", F.tanhshrink, lambda x: x - np.tanh(x), None),
]


@pytest.mark.parametrize("name,fn,ref,node", ACTIVATIONS, ids=[c[0] for c in ACTIVATIONS])
def test_activation_gradients(ctx, name, fn, ref, node):
    _check(fn, ref, (3, 4), seed=11, low=-4.0, high=4.0, node=node)


def _rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _group_norm(x, w, b, groups, eps=1e-5):
    rows = x.reshape(x.shape[0], groups, -1)
    mu = rows.mean(-1, keepdims=True)
    var = rows.var(-1, keepdims=True)
    y = ((rows - mu) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    return y * w.reshape(shape) + b.reshape(shape)


def _normalize(x, p, dim, eps=1e-12):
    n = (np.abs(x) ** p).sum(dim, keepdims=True) ** (1 / p)
    return x / np.maximum(n, eps)


def _cos(a, b, dim, eps=1e-8):
    na = np.maximum(np.sqrt((a * a).sum(dim)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(dim)), eps)
    return (a * b).sum(dim) / (na * nb)


NORMS = [
    (
        "rms_norm",
        lambda x, w: F.rms_norm(x, (4,), w, eps=1e-6),
        lambda x, w: _rms_norm(x, w, 1e-6),
        [(2, 3, 4), (4,)],
    ),
    (
        "rms_norm_2d",
        lambda x: F.rms_norm(x, (3, 4), eps=1e-5),
        lambda x: x / np.sqrt((x * x).mean((1, 2), keepdims=True) + 1e-5),
        [(2, 3, 4)],
    ),
    (
        "group_norm",
        lambda x, w, b: F.group_norm(x, 2, w, b),
        lambda x, w, b: _group_norm(x, w, b, 2),
        [(2, 4, 3), (4,), (4,)],
    ),
    (
        "group_norm_plain",
        lambda x: F.group_norm(x, 3),
        lambda x: _group_norm(x, np.ones(3), np.zeros(3), 3),
        [(2, 3, 2, 2)],
    ),
    ("normalize", lambda x: F.normalize(x), lambda x: _normalize(x, 2, 1), [(3, 4)]),
    ("normalize_p1", lambda x: F.normalize(x, p=1, dim=0), lambda x: _normalize(x, 1, 0), [(3, 4)]),
    (
        "cosine_similarity",
        lambda a, b: F.cosine_similarity(a, b, dim=-1),
        lambda a, b: _cos(a, b, -1),
        [(2, 3, 4), (3, 4)],
    ),
    (
        "torch_cosine_similarity",
        lambda a, b: torch.cosine_similarity(a, b),
        lambda a, b: _cos(a, b, 1),
        [(3, 4), (3, 4)],
    ),
]


@pytest.mark.parametrize("name,fn,ref,shapes", NORMS, ids=[c[0] for c in NORMS])
def test_norm_gradients(ctx, name, fn, ref, shapes):
    _check(fn, ref, *shapes, seed=21)


def _smooth_l1(d, beta):
    a = np.abs(d)
    return np.where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta)


def _huber(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


def _bce(x, t, w=1.0):
    return -w * (t * np.log(x) + (1 - t) * np.log(1 - x))


def _bce_logits(x, t, w=1.0, pw=1.0):
    sp = np.log1p(np.exp(-x))
    return w * ((1 - t) * x + (1 + (pw - 1) * t) * sp)


P = ((3, 4), 0.1, 0.9)
W = np.array([0.5, 1.0, 2.0, 1.5])
LOSSES = [
    ("l1_mean", lambda x, y: F.l1_loss(x, y), lambda x, y: np.abs(x - y).mean(), [S, S]),
    (
        "l1_sum",
        lambda x, y: F.l1_loss(x, y, reduction="sum"),
        lambda x, y: np.abs(x - y).sum(),
        [S, S],
    ),
    ("l1_none", lambda x, y: F.l1_loss(x, y, reduction="none"), lambda x, y: np.abs(x - y), [S, S]),
    (
        "smooth_l1",
        lambda x, y: F.smooth_l1_loss(x, y, beta=0.5),
        lambda x, y: _smooth_l1(x - y, 0.5).mean(),
        [(3, 4), (3, 4)],
    ),
    (
        "smooth_l1_beta0",
        lambda x, y: F.smooth_l1_loss(x, y, reduction="sum", beta=0.0),
        lambda x, y: np.abs(x - y).sum(),
        [S, S],
    ),
    (
        "huber",
        lambda x, y: F.huber_loss(x, y, delta=0.5),
        lambda x, y: _huber(x - y, 0.5).mean(),
        [(3, 4), (3, 4)],
    ),
    (
        "huber_weight",
        lambda x, y: F.huber_loss(x, y, "sum", 0.4, torch.tensor(W)),
        lambda x, y: (_huber(x - y, 0.4) * W).sum(),
        [(3, 4), (3, 4)],
    ),
    ("bce", lambda x, t: F.binary_cross_entropy(x, t), lambda x, t: _bce(x, t).mean(), [P, P]),
    (
        "bce_weight",
        lambda x, t: F.binary_cross_entropy(x, t, torch.tensor(W), reduction="none"),
        lambda x, t: _bce(x, t, W),
        [P, P],
    ),
    (
        "bce_logits",
        lambda x, t: F.binary_cross_entropy_with_logits(x, t),
        lambda x, t: _bce_logits(x, t).mean(),
        [(3, 4), P],
    ),
    (
        "bce_logits_weights",
        lambda x, t: F.binary_cross_entropy_with_logits(
            x, t, torch.tensor(W), reduction="sum", pos_weight=torch.tensor(W[::-1].copy())
        ),
        lambda x, t: _bce_logits(x, t, W, W[::-1]).sum(),
        [(3, 4), P],
    ),
    (
        "kl_div",
        lambda x, t: F.kl_div(x, t, reduction="batchmean"),
        lambda x, t: (t * (np.log(t) - x)).sum() / 3,
        [(3, 4), P],
    ),
    (
        "kl_div_log_target",
        lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True),
        lambda x, t: (np.exp(t) * (t - x)).sum(),
        [(3, 4), (3, 4)],
    ),
    (
        "kl_div_none",
        lambda x, t: F.kl_div(x, t, reduction="none"),
        lambda x, t: t * (np.log(t) - x),
        [(3, 4), P],
    ),
]


@pytest.mark.parametrize("name,fn,ref,shapes", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_gradients(ctx, name, fn, ref, shapes):
    _check(fn, ref, *shapes, seed=31)


def test_kl_div_mean_divides_by_every_element(ctx):
    with pytest.warns(UserWarning, match="batchmean"):
        _check(
            lambda x, t: F.kl_div(x, t),
            lambda x, t: (t * (np.log(t) - x)).mean(),
            (3, 4),
            P,
            seed=5,
        )


# -- kinks, ties and zeros: torch's values ----------------------------------------------------
def _grad(fn, values, **kwargs):
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    fn(x, **kwargs).sum().backward()
    return x.grad.numpy()


def test_clamp_and_hardtanh_at_the_bounds(ctx):
    at = [-1.0, -0.5, 0.0, 0.5, 1.0]
    # clamp passes the gradient where min <= x <= max (the bounds included)
    np.testing.assert_array_equal(_grad(lambda x: x.clamp(-0.5, 0.5), at), [0, 1, 1, 1, 0])
    np.testing.assert_array_equal(_grad(lambda x: x.clamp_min(0.5), at), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(_grad(lambda x: torch.clamp_max(x, -0.5), at), [1, 1, 0, 0, 0])
    # hardtanh where min < x < max (the bounds excluded), relu6 too
    np.testing.assert_array_equal(_grad(lambda x: F.hardtanh(x, -0.5, 0.5), at), [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(_grad(F.relu6, [-1.0, 0.0, 3.0, 6.0, 7.0]), [0, 0, 1, 0, 0])
    # a tensor bound equal to x: x gets the gradient, the bound none
    x = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    lo = torch.tensor([0.0, 1.5, 3.0], dtype=torch.float64, requires_grad=True)
    hi = torch.tensor([2.0, 2.0, 2.5], dtype=torch.float64, requires_grad=True)
    x.clamp(lo, hi).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 0, 0])
    np.testing.assert_array_equal(lo.grad.numpy(), [0, 1, 0])
    np.testing.assert_array_equal(hi.grad.numpy(), [0, 0, 1])  # min > max: the result is max


def test_abs_and_activations_at_zero(ctx):
    np.testing.assert_array_equal(_grad(lambda x: x.abs(), [-2.0, 0.0, 3.0]), [-1, 0, 1])
    np.testing.assert_allclose(_grad(lambda x: F.leaky_relu(x, 0.1), [0.0, 1.0]), [0.1, 1])
    np.testing.assert_allclose(_grad(lambda x: F.elu(x, 0.5), [0.0, 1.0]), [0.5, 1.0])
    np.testing.assert_allclose(_grad(F.hardswish, [-3.0, 3.0]), [-0.5, 1.5])
    np.testing.assert_array_equal(_grad(F.hardsigmoid, [-3.0, 3.0]), [0, 0])
    np.testing.assert_allclose(_grad(lambda x: F.l1_loss(x, x.detach()), [1.0, 2.0]), [0, 0])


def test_max_min_ties_and_indices(ctx):
    values = [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    out = x.max(1)
    assert out.values.requires_grad and not out.indices.requires_grad
    out.values.sum().backward()
    expected = np.zeros((2, 3))
    expected[np.arange(2), out.indices.numpy()] = 1  # to the index max returned
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    # over every element and amax/amin: split evenly among ties
    np.testing.assert_allclose(_grad(lambda x: x.max(), values), [[0, 0.5, 0.5], [0, 0, 0]])
    np.testing.assert_allclose(_grad(lambda x: x.amax(1), values), [[0, 0.5, 0.5], [0.5, 0.5, 0]])
    np.testing.assert_allclose(
        _grad(lambda x: torch.amin(x), [[1.0, 1.0], [1.0, 2.0]]), [[1 / 3, 1 / 3], [1 / 3, 0]]
    )


def test_norms_at_zero_and_prod_with_zeros(ctx):
    zeros = [[0.0, 0.0], [3.0, 4.0]]
    np.testing.assert_allclose(_grad(lambda x: x.norm(dim=1), zeros), [[0, 0], [0.6, 0.8]])
    np.testing.assert_allclose(_grad(lambda x: linalg.vector_norm(x), [0.0, 0.0]), [0, 0])
    np.testing.assert_allclose(_grad(lambda x: x.norm(1), [-2.0, 0.0, 1.0]), [-1, 0, 1])
    g = _grad(lambda x: F.normalize(x, dim=1), zeros)
    np.testing.assert_allclose(g[0], [1e12, 1e12])  # below eps: x / eps
    np.testing.assert_allclose(_grad(lambda x: x.prod(), [2.0, 0.0, 3.0]), [0, 6, 0])
    np.testing.assert_allclose(_grad(lambda x: x.prod(1), [[0.0, 0.0, 3.0]]), [[0, 0, 0]])
    np.testing.assert_allclose(_grad(lambda x: torch.prod(x, 0), [[5.0], [0.0]]), [[0], [5]])
    g = _grad(lambda x: x.std(1), [[2.0, 2.0], [1.0, 3.0]])  # 0 where std is 0, as torch
    np.testing.assert_allclose(g, [[0, 0], [-(0.5**0.5), 0.5**0.5]], rtol=1e-12, atol=0)


def test_zero_dim_inputs(ctx):
    for fn in (
        lambda x: x.max(0)[0],
        lambda x: x.amax(),
        lambda x: x.logsumexp(0),
        lambda x: x.prod(0),
        lambda x: x.cumsum(0),
        lambda x: x.norm(dim=0),
    ):
        np.testing.assert_allclose(_grad(fn, 2.0), 1.0)
    assert np.isnan(_grad(lambda x: x.std(), 2.0))  # 0 / 0, as torch
    np.testing.assert_allclose(_grad(lambda x: x.var(correction=0), 2.0), 0.0)


def test_arguments_without_a_formula_fall_back_to_the_refusing_node(ctx):
    x = torch.tensor([0.5, 1.5], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    out = F.huber_loss(x, x.detach() * 2, weight=w)  # no formula for the weight's gradient
    with pytest.raises(TensorError, match=r"backward through torch\.nn\.functional\.huber_loss"):
        out.backward()
    out = x.clamp_min(w)
    with pytest.raises(TensorError, match=r"backward through torch\.Tensor\.clamp_min"):
        out.sum().backward()
    h = x * 2
    assert F.leaky_relu(h, inplace=True) is h  # recorded in place (test_autograd_in_place.py)
    assert h.grad_fn.name() == "LeakyReluBackward0"
    v = x * 2
    assert F.elu(v, 1.0, True) is v and v.grad_fn.name() == "EluBackward0"


@pytest.mark.parametrize("larger", [True, False])
def test_maximum_minimum_gradients_and_ties_split_in_half(ctx, larger):
    fn = torch.maximum if larger else torch.minimum
    pick = np.maximum if larger else np.minimum
    _check(fn, pick, (3, 4), (4,), node="MaximumBackward0" if larger else "MinimumBackward0")
    _check(lambda a, b: a.maximum(b) if larger else a.minimum(b), pick, (2, 3), (2, 3), seed=4)
    # torch.max(a, b) / a.min(b) with a tensor: the same op and node
    node = "MaximumBackward0" if larger else "MinimumBackward0"
    _check(lambda a, b: torch.max(a, b) if larger else a.min(b), pick, (2, 3), (3,), node=node)
    a = torch.tensor([1.0, 2.0, 5.0], requires_grad=True)
    b = torch.tensor([1.0, 3.0, 4.0], requires_grad=True)
    fn(a, b).sum().backward()
    if larger:
        assert a.grad.tolist() == [0.5, 0.0, 1.0] and b.grad.tolist() == [0.5, 1.0, 0.0]
    else:
        assert a.grad.tolist() == [0.5, 1.0, 0.0] and b.grad.tolist() == [0.5, 0.0, 1.0]


def _np_glu(x, dim):
    a, b = np.split(x, 2, axis=dim)
    return a / (1 + np.exp(-b))


@pytest.mark.parametrize("dim", [-1, 0])
def test_glu_gradients(ctx, dim):
    _check(lambda x: F.glu(x, dim), lambda x: _np_glu(x, dim), (4, 6), node="GluBackward0")
