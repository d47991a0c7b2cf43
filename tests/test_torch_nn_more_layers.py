"""``InstanceNorm1d``/``2d``/``3d``, ``PReLU``, ``LocalResponseNorm``, ``ChannelShuffle``
and the further activation modules and functionals (``softmin``, the shrinks,
``threshold``, ``rrelu``, the alpha dropouts): values against NumPy written out here,
gradients against NumPy central differences (float64), the modules' parameters,
buffers and ``repr`` as torch's, the errors torch raises, and timing-only runs."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture(scope="module", autouse=True)
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _normal(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _t(a, requires_grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# ----------------------------------------------------------------------------- instance norm
def _np_instance_norm(x, w=None, b=None, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape)
    if b is not None:
        out = out + b.reshape(shape)
    return out


@pytest.mark.parametrize(
    ("cls", "shape"),
    [
        (nn.InstanceNorm1d, (2, 3, 5)),
        (nn.InstanceNorm2d, (2, 3, 4, 3)),
        (nn.InstanceNorm3d, (1, 2, 2, 3, 2)),
    ],
)
def test_instance_norm_modules_match_numpy(cls, shape):
    x = _normal(shape)
    m = cls(shape[1], affine=True)
    m.weight.data.copy_(_t(np.arange(1, shape[1] + 1) * 0.5))
    m.bias.data.copy_(_t(np.arange(shape[1]) - 1.0))
    m.double()
    want = _np_instance_norm(x, np.arange(1, shape[1] + 1) * 0.5, np.arange(shape[1]) - 1.0)
    np.testing.assert_allclose(m(_t(x)).detach().numpy(), want, rtol=1e-6, atol=1e-9)
    unbatched = m(_t(x[0])).detach().numpy()  # no N: a batch of one
    np.testing.assert_allclose(unbatched, want[0], rtol=1e-6, atol=1e-9)


def test_instance_norm_gradients_in_input_weight_and_bias():
    check(
        lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
        _np_instance_norm,
        (2, 3, 4),
        (3,),
        (3,),
    )


def test_instance_norm_parameters_buffers_and_repr():
    plain = nn.InstanceNorm2d(4)
    assert list(plain.state_dict()) == [] and list(plain.parameters()) == []
    assert repr(plain) == (
        "InstanceNorm2d(4, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False)"
    )
    full = nn.InstanceNorm1d(3, eps=1e-3, momentum=0.2, affine=True, track_running_stats=True)
    assert list(full.state_dict()) == [
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ]
    assert [tuple(p.shape) for p in full.parameters()] == [(3,), (3,)]
    assert full.weight.tolist() == [1.0] * 3 and full.bias.tolist() == [0.0] * 3
    assert full.running_var.tolist() == [1.0] * 3 and full.num_batches_tracked.item() == 0


def test_instance_norm_tracks_running_statistics_in_training_and_uses_them_in_eval():
    x = _normal((3, 2, 6), seed=1)
    m = nn.InstanceNorm1d(2, momentum=0.3, track_running_stats=True).double()
    m(_t(x))
    count = x.shape[2]
    batch_mean = x.mean(2).mean(0)
    batch_var = (x.var(2) * count / (count - 1)).mean(0)
    np.testing.assert_allclose(m.running_mean.numpy(), 0.3 * batch_mean, rtol=1e-6)
    np.testing.assert_allclose(m.running_var.numpy(), 0.7 + 0.3 * batch_var, rtol=1e-6)
    m.eval()
    rm, rv = m.running_mean.numpy(), m.running_var.numpy()
    want = (x - rm[None, :, None]) / np.sqrt(rv[None, :, None] + 1e-5)
    np.testing.assert_allclose(m(_t(x)).numpy(), want, rtol=1e-6)


def test_instance_norm_refuses_what_torch_refuses():
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.InstanceNorm1d(3)(torch.ones(1, 3, 2, 2))
    with pytest.raises(ValueError, match=r"expected 4D or 5D input \(got 3D input\)"):
        nn.InstanceNorm3d(3)(torch.ones(1, 3, 2))
    with pytest.raises(ValueError, match=r"size at dim=1 to match num_features \(3\), but got: 4"):
        nn.InstanceNorm1d(3, affine=True)(torch.ones(2, 4, 5))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(3)(torch.ones(2, 4, 5))


# ------------------------------------------------------------------------------------ prelu
def _np_prelu(x, w):
    slope = w.reshape((-1,) + (1,) * (x.ndim - 2)) if w.size > 1 else w.reshape(())
    return np.where(x > 0, x, slope * x)


@pytest.mark.parametrize(("shape", "weights"), [((2, 3, 4), 3), ((2, 3, 4), 1), ((5,), 1)])
def test_prelu_values_and_gradients(shape, weights):
    check(F.prelu, _np_prelu, shape, (weights,))


def test_prelu_module_parameters_init_and_errors():
    m = nn.PReLU(4, init=0.1)
    assert list(m.state_dict()) == ["weight"] and tuple(m.weight.shape) == (4,)
    np.testing.assert_allclose(m.weight.detach().numpy(), [0.1] * 4, rtol=1e-6)
    assert repr(m) == "PReLU(num_parameters=4)" and nn.PReLU().weight.tolist() == [0.25]
    with pytest.raises(TensorError, match="parameter numbers = 4 and channel size = 3"):
        m(torch.ones(2, 3))
    with pytest.raises(TensorError, match="scalar or 1D tensor, but got: ndim = 2"):
        F.prelu(torch.ones(2, 3), torch.ones(3, 1))


def test_prelu_module_learns_its_slopes():
    x = _normal((4, 2, 3), seed=2)
    m = nn.PReLU(2).double()
    m(_t(x)).sum().backward()
    want = np.where(x > 0, 0.0, x).sum((0, 2))
    np.testing.assert_allclose(m.weight.grad.numpy(), want, rtol=1e-6)


# ------------------------------------------------------------------------------- local norm
def _np_lrn(x, size, alpha=1e-4, beta=0.75, k=1.0):
    c = x.shape[1]
    sq = x * x
    div = np.zeros_like(x)
    for ch in range(c):
        lo, hi = ch - size // 2, ch + (size - 1) // 2
        div[:, ch] = sq[:, max(lo, 0) : min(hi, c - 1) + 1].sum(1) / size
    return x / (k + alpha * div) ** beta


@pytest.mark.parametrize(
    ("shape", "size", "alpha", "beta", "k"),
    [
        ((2, 5, 3), 3, 1e-4, 0.75, 1.0),
        ((1, 4, 2, 3), 2, 0.5, 0.6, 2.0),
        ((1, 6, 2, 1, 2), 5, 1.0, 1.0, 1.5),
    ],
)
def test_local_response_norm_values_and_gradients(shape, size, alpha, beta, k):
    check(
        lambda x: F.local_response_norm(x, size, alpha, beta, k),
        lambda x: _np_lrn(x, size, alpha, beta, k),
        shape,
    )
    m = nn.LocalResponseNorm(size, alpha, beta, k)
    assert repr(m) == f"LocalResponseNorm({size}, alpha={alpha}, beta={beta}, k={k})"
    x = _normal(shape)
    np.testing.assert_allclose(m(_t(x)).numpy(), _np_lrn(x, size, alpha, beta, k), rtol=1e-6)


def test_local_response_norm_refuses_fewer_than_three_dims():
    with pytest.raises(ValueError, match=r"Expected 3D or higher dimensionality input \(got 2"):
        F.local_response_norm(torch.ones(2, 3), 2)


# -------------------------------------------------------------------------- channel shuffle
def test_channel_shuffle_values_gradient_and_errors():
    x = np.arange(2 * 6 * 2, dtype=np.float64).reshape(2, 6, 2)
    want = x.reshape(2, 2, 3, 2).transpose(0, 2, 1, 3).reshape(2, 6, 2)
    np.testing.assert_array_equal(F.channel_shuffle(_t(x), 2).numpy(), want)
    np.testing.assert_array_equal(nn.ChannelShuffle(2)(_t(x)).numpy(), want)
    assert repr(nn.ChannelShuffle(3)) == "ChannelShuffle(groups=3)"
    check(
        lambda t: F.channel_shuffle(t, 3),
        lambda a: a.reshape(1, 3, 2, 2, 1).transpose(0, 2, 1, 3, 4).reshape(1, 6, 2, 1),
        (1, 6, 2, 1),
    )
    with pytest.raises(TensorError, match="Got 6 channels and 4 groups"):
        F.channel_shuffle(_t(x), 4)
    with pytest.raises(TensorError, match="at least 3 dimensions"):
        F.channel_shuffle(torch.ones(2, 6), 2)


# ------------------------------------------------------------------------------ activations
SHAPES = [(7,), (2, 3, 4)]


def _np_softmin(x, dim):
    e = np.exp(-x - (-x).max(dim, keepdims=True))
    return e / e.sum(dim, keepdims=True)


ACTIVATIONS = {
    "hardshrink": (lambda x: F.hardshrink(x, 0.3), lambda x: np.where(np.abs(x) > 0.3, x, 0.0)),
    "softshrink": (
        lambda x: F.softshrink(x, 0.3),
        lambda x: np.where(x > 0.3, x - 0.3, np.where(x < -0.3, x + 0.3, 0.0)),
    ),
    "threshold": (lambda x: F.threshold(x, 0.2, -2.0), lambda x: np.where(x > 0.2, x, -2.0)),
    "rrelu_eval": (
        lambda x: F.rrelu(x, 0.1, 0.3),
        lambda x: np.where(x >= 0, x, 0.2 * x),
    ),
    "softmin": (lambda x: F.softmin(x, -1), lambda x: _np_softmin(x, -1)),
    "logsigmoid": (F.logsigmoid, lambda x: -np.log1p(np.exp(-x))),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_values_and_gradients(name, shape):
    torch_fn, numpy_fn = ACTIVATIONS[name]
    check(torch_fn, numpy_fn, shape, low=-1.0, high=1.0)


MODULES = [
    (nn.Hardshrink(0.3), ACTIVATIONS["hardshrink"][1], "Hardshrink(0.3)"),
    (nn.Softshrink(0.3), ACTIVATIONS["softshrink"][1], "Softshrink(0.3)"),
    (nn.Threshold(0.2, -2.0), ACTIVATIONS["threshold"][1], "Threshold(threshold=0.2, value=-2.0)"),
    (nn.Softmin(dim=-1), lambda x: _np_softmin(x, -1), "Softmin(dim=-1)"),
    (nn.LogSigmoid(), ACTIVATIONS["logsigmoid"][1], "LogSigmoid()"),
    (nn.Softsign(), ACTIVATIONS["softsign"][1], "Softsign()"),
    (nn.Tanhshrink(), ACTIVATIONS["tanhshrink"][1], "Tanhshrink()"),
    (nn.Hardsigmoid(), lambda x: np.clip(x + 3, 0, 6) / 6, "Hardsigmoid()"),
    (
        nn.Hardtanh(-0.5, 0.5),
        lambda x: np.clip(x, -0.5, 0.5),
        "Hardtanh(min_val=-0.5, max_val=0.5)",
    ),
    (nn.ReLU6(), lambda x: np.clip(x, 0, 6), "ReLU6()"),
    (
        nn.CELU(0.5),
        lambda x: np.maximum(x, 0) + np.minimum(0, 0.5 * np.expm1(x / 0.5)),
        "CELU(alpha=0.5)",
    ),
    (
        nn.SELU(),
        lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
        "SELU()",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("module", "numpy_fn", "shown"), MODULES, ids=[m[2] for m in MODULES])
def test_activation_modules_match_numpy_and_print_as_torch(module, numpy_fn, shown):
    x = _normal((2, 3, 4), seed=3) * 2
    np.testing.assert_allclose(module(_t(x)).numpy(), numpy_fn(x), rtol=1e-6, atol=1e-12)
    assert repr(module) == shown


def test_hardtanh_asserts_its_bounds_as_torch():
    with pytest.raises(AssertionError, match="max_val .0.5. must be greater than min_val"):
        nn.Hardtanh(0.5, 0.5)


def test_softmax2d_is_a_softmax_over_channels():
    x = _normal((2, 3, 2, 2))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(nn.Softmax2d()(_t(x)).numpy(), e / e.sum(1, keepdims=True))
    np.testing.assert_allclose(nn.Softmax2d()(_t(x[0])).numpy(), (e / e.sum(1, keepdims=True))[0])
    with pytest.raises(ValueError, match="expected input to be 3D or 4D, got 2D instead"):
        nn.Softmax2d()(torch.ones(2, 3))


def test_nan_stays_nan_and_threshold_takes_integers():
    x = torch.tensor([float("nan"), 1.0, -1.0])
    for got in (F.hardshrink(x), F.threshold(x, 0.0, 5.0), F.softshrink(x)):
        assert np.isnan(got.numpy()[0])
    assert F.threshold(torch.tensor([1, 3, 5]), 2, 0).tolist() == [0, 3, 5]


def test_softmin_without_dim_warns_as_torch():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        got = F.softmin(_t([[1.0, 2.0]]))
    np.testing.assert_allclose(got.numpy(), _np_softmin(np.array([[1.0, 2.0]]), 1))


def test_inplace_threshold_and_rrelu_write_the_input():
    x = _t([-1.0, 0.5, 2.0])
    assert F.threshold(x, 1.0, 0.0, inplace=True) is x and x.tolist() == [0.0, 0.0, 2.0]
    y = _t([-1.0, 2.0])
    assert nn.RReLU(0.2, 0.2, inplace=True).eval()(y) is y
    np.testing.assert_allclose(y.numpy(), [-0.2, 2.0])


def test_in_place_functional_forms_write_the_input_and_record():
    x = _t([-1.0, 0.5, 2.0])
    assert F.threshold_(x, 1.0, -3.0) is x and x.tolist() == [-3.0, -3.0, 2.0]
    y = _t([-1.0, 2.0])
    assert F.rrelu_(y, 0.5, 0.5) is y and y.tolist() == [-0.5, 2.0]
    leaf = _t([-1.0, 0.5, 2.0], requires_grad=True)
    hidden = leaf * 2
    F.threshold_(hidden, 0.5, 0.0)
    hidden.sum().backward()
    assert leaf.grad.tolist() == [0.0, 2.0, 2.0]
    with pytest.raises(TensorError, match="leaf Variable that requires grad"):
        F.threshold_(leaf, 0.0, 0.0)


def test_rrelu_in_training_draws_slopes_from_the_ranks_generator():
    x = _t(-np.ones(200))
    x.requires_grad_(True)
    torch.manual_seed(5)
    out = nn.RReLU(0.1, 0.3)(x)
    slopes = -out.detach().numpy()
    assert 0.1 <= slopes.min() and slopes.max() <= 0.3 and slopes.std() > 0.03
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes)  # the gradient is each drawn slope
    torch.manual_seed(5)
    np.testing.assert_array_equal(F.rrelu(x.detach(), 0.1, 0.3, training=True).numpy(), -slopes)
    positive = F.rrelu(_t(np.ones(5)), training=True)
    assert positive.tolist() == [1.0] * 5
    assert repr(nn.RReLU()) == "RReLU(lower=0.125, upper=0.3333333333333333)"
    with pytest.raises(TensorError, match="Lower bound should be less than or equal"):
        F.rrelu(x, 0.5, 0.1, training=True)


def test_softshrink_refuses_a_negative_lambda():
    with pytest.raises(TensorError, match="lambda must be greater or equal to 0"):
        F.softshrink(torch.ones(2), -0.5)


# --------------------------------------------------------------------------- alpha dropout
_ALPHA = 1.7580993408473766


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_keeps_or_saturates_then_maps_affinely(feature):
    x = _normal((4, 6, 5), seed=4)
    p = 0.3
    torch.manual_seed(11)
    fn = F.feature_alpha_dropout if feature else F.alpha_dropout
    leaf = _t(x, requires_grad=True)
    out = fn(leaf, p, training=True)
    a = 1 / np.sqrt((_ALPHA**2 * p + 1) * (1 - p))
    got = out.detach().numpy()
    dropped = np.isclose(got, -_ALPHA * a + _ALPHA * a * p)
    np.testing.assert_allclose(got[~dropped], (x * a + _ALPHA * a * p)[~dropped])
    assert 0.1 < dropped.mean() < 0.5
    if feature:  # one draw per (sample, channel)
        assert (dropped.all(2) | ~dropped.any(2)).all()
    out.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), np.where(dropped, 0.0, a))


def test_alpha_dropout_modules_train_and_eval():
    x = _t(_normal((3, 4)))
    m = nn.AlphaDropout(0.2)
    assert repr(m) == "AlphaDropout(p=0.2, inplace=False)"
    assert repr(nn.FeatureAlphaDropout(0.1)) == "FeatureAlphaDropout(p=0.1, inplace=False)"
    assert m.eval()(x) is x and F.alpha_dropout(x, 0.5) is x  # training=False by default
    assert F.alpha_dropout(x, 1.0, True).tolist() == [[0.0] * 4] * 3
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.AlphaDropout(1.5)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.alpha_dropout(x, -0.1, True)
    with pytest.raises(TensorError, match="Feature dropout requires at least 2 dimensions"):
        F.feature_alpha_dropout(torch.ones(3), 0.5, True)


# ------------------------------------------------------------------------------ timing only
def test_layers_cost_time_in_timing_only_mode():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.ones(2, 4, 8, 8, requires_grad=True)
        for layer in (
            nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
            nn.PReLU(4),
            nn.LocalResponseNorm(3),
            nn.ChannelShuffle(2),
            nn.RReLU(),
            nn.AlphaDropout(0.2),
            nn.Softshrink(),
        ):
            before = context.now
            out = layer(x)
            assert out.shape == x.shape and context.now > before
            before = context.now
            out.sum().backward()
            assert context.now > before and x.grad.shape == x.shape


# ------------------------------------------------------------------------- a small model
def test_a_small_model_of_the_new_layers_trains():
    torch.manual_seed(0)
    x, y = torch.randn(4, 4, 5, 5), torch.randint(0, 3, (4,))
    model = nn.Sequential(
        nn.Conv2d(4, 6, 3, padding=1),
        nn.InstanceNorm2d(6, affine=True),
        nn.PReLU(6),
        nn.LocalResponseNorm(3),
        nn.ChannelShuffle(2),
        nn.Softshrink(0.1),
        nn.RReLU(),
        nn.AlphaDropout(0.1),
        nn.Flatten(),
        nn.Linear(150, 3),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(6):
        optimizer.zero_grad()
        out = model(x)
        loss = nn.MultiMarginLoss()(out, y) + nn.CrossEntropyLoss()(out, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(p.grad is not None for p in model.parameters())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize(
    ("file", "names"),
    [
        ("instancenorm", ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d")),
        ("normalization", ("LocalResponseNorm",)),
        ("channelshuffle", ("ChannelShuffle",)),
        ("activation", ("PReLU", "RReLU", "Softmin", "Softmax2d", "Threshold", "Hardshrink")),
        ("dropout", ("AlphaDropout", "FeatureAlphaDropout")),
        ("linear", ("Bilinear",)),
        ("sparse", ("EmbeddingBag",)),
        ("distance", ("CosineSimilarity", "PairwiseDistance")),
        ("loss", ("MultiMarginLoss", "TripletMarginWithDistanceLoss", "GaussianNLLLoss")),
    ],
)
def test_the_layers_are_in_torchs_files_too(file, names):
    module = getattr(nn.modules, file)
    for name in names:
        assert getattr(module, name) is getattr(nn, name) and name in module.__all__
