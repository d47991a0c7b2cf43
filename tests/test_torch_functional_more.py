"""``torch.nn.functional``'s further activations, elementwise losses, distances and norms
against NumPy computed in float64, with their errors and costs.

Each runs on the tiny machine's device; the cost checks run timing-only on ring8.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from run_modes import simulated_ps as cost

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import KernBenchError, TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context
    torch.manual_seed(0)


def _kernels(ctx, since: int) -> list[str]:
    return [row.tag for row in ctx.trace[since:] if row.kind == "kernel"]


_A = np.array([-800, -30, -5, -0.7, -1e-8, 0, 1e-8, 0.5, 2.9, 3.5, 25, 800], np.float64)


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(np.minimum(x * beta, 50))) / beta)


def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return np.where(x > 0, x * scale, alpha * scale * np.expm1(np.minimum(x, 0) * input_scale))


_REFERENCES = {
    "softplus": (lambda x: F.softplus(x), _softplus),
    "softplus_beta": (
        lambda x: F.softplus(x, beta=2.0, threshold=5.0),
        lambda a: _softplus(a, 2.0, 5.0),
    ),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda a: np.where(a > 0, a, 0.2 * a)),
    "elu": (lambda x: F.elu(x, alpha=0.5), lambda a: _elu(a, 0.5)),
    "selu": (
        F.selu,
        lambda a: _elu(a, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946),
    ),
    "celu": (lambda x: F.celu(x, alpha=2.0), lambda a: _elu(a, 2.0, 1.0, 0.5)),
    "hardsigmoid": (F.hardsigmoid, lambda a: np.clip(a + 3, 0, 6) / 6),
    "hardswish": (F.hardswish, lambda a: a * np.clip(a + 3, 0, 6) / 6),
    "mish": (F.mish, lambda a: a * np.tanh(_softplus(a))),
    "logsigmoid": (F.logsigmoid, lambda a: np.minimum(a, 0) - np.log1p(np.exp(-np.abs(a)))),
    "softsign": (F.softsign, lambda a: a / (1 + np.abs(a))),
    "tanhshrink": (F.tanhshrink, lambda a: a - np.tanh(a)),
    "hardtanh": (lambda x: F.hardtanh(x, -2.0, 3.0), lambda a: np.clip(a, -2, 3)),
    "relu6": (F.relu6, lambda a: np.clip(a, 0, 6)),
}


@pytest.mark.parametrize("name", sorted(_REFERENCES))
def test_activation_matches_numpy(ctx, name):
    call, reference = _REFERENCES[name]
    x = torch.tensor(_A.astype(np.float32))
    got = call(x)
    assert got.dtype is torch.float32 and got.shape == x.shape
    want = reference(_A.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=1e-30)
    h = call(torch.tensor(_A[3:10].astype(np.float16)))
    assert h.dtype is torch.float16
    np.testing.assert_allclose(
        h.float().numpy(), reference(_A[3:10].astype(np.float16).astype(np.float64)), rtol=2e-3
    )


@pytest.mark.parametrize("name", ["softplus", "mish", "logsigmoid", "softsign", "elu"])
def test_activation_keeps_nan(ctx, name):
    got = getattr(F, name)(torch.tensor([float("nan"), 1.0]))
    assert np.isnan(got.numpy()[0])


@pytest.mark.parametrize(
    "name", ["leaky_relu", "elu", "selu", "celu", "hardsigmoid", "hardswish", "mish", "relu6"]
)
def test_activation_inplace_writes_the_input_and_its_views(ctx, name):
    a = np.linspace(-4, 4, 12, dtype=np.float32).reshape(3, 4)
    want = getattr(F, name)(torch.from_numpy(a)).numpy()
    x = torch.from_numpy(a)
    assert getattr(F, name)(x, inplace=True) is x
    np.testing.assert_array_equal(x.numpy(), want)
    y = torch.from_numpy(a)
    column = y[:, 1]  # a strided view: written back through its strides
    assert getattr(F, name)(column, inplace=True) is column
    np.testing.assert_array_equal(y.numpy()[:, 1], want[:, 1])
    np.testing.assert_array_equal(y.numpy()[:, 0], a[:, 0])


def test_activation_is_one_kernel(ctx):
    x = torch.randn(64, 33)
    for call in (F.softplus, F.mish, F.logsigmoid, F.selu, F.hardswish, F.tanhshrink):
        before = len(ctx.trace)
        call(x)
        assert _kernels(ctx, before) == ["_activation_kernel"]
    before = len(ctx.trace)
    F.relu6(x)
    assert _kernels(ctx, before) == ["_clamp_kernel"]


def test_hardtanh_of_integers_and_its_errors(ctx):
    got = F.hardtanh(torch.tensor([-5, 0, 5]), -2.5, 2.5)
    assert got.dtype is torch.int64 and got.tolist() == [-2, 0, 2]
    with pytest.raises(TensorError, match="hardtanh: min_val cannot be greater than max_val"):
        F.hardtanh(torch.ones(2), 1.0, 0.0)
    with pytest.raises(TensorError, match="hardtanh: Bool inputs not supported"):
        F.relu6(torch.ones(2, dtype=torch.bool))


def test_glu_matches_numpy_along_any_dim(ctx):
    a = np.random.default_rng(1).standard_normal((4, 6, 2)).astype(np.float32)
    for dim in (0, 1, -1):
        first, second = np.split(a.astype(np.float64), 2, axis=dim)
        got = F.glu(torch.from_numpy(a), dim)
        np.testing.assert_allclose(got.numpy(), first / (1 + np.exp(-second)), rtol=1e-6)
    with pytest.raises(TensorError, match="glu: Halving dimension must be even"):
        F.glu(torch.ones(3, 5))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: F.softplus(torch.tensor([1, 2])), "softplus: not implemented for torch.int64"),
        (lambda: F.mish([1.0]), "mish: expected a Tensor, got list"),
        (lambda: F.elu(torch.ones(2), alpha="1"), "elu: alpha must be a number"),
        (lambda: F.celu(torch.ones(2), alpha=0), "celu: ZeroDivisionError"),
        (lambda: F.leaky_relu(torch.ones(2), inplace=None), "leaky_relu: inplace must be True"),
        (lambda: F.glu(torch.ones(2, 4), dim=2), "glu: dim 2 is out of range"),
    ],
)
def test_activation_errors_name_the_call(ctx, call, message):
    with pytest.raises(KernBenchError, match=message):
        call()


# ----------------------------------------------------------------------------- losses


def _probabilities(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.01, 0.99, shape).astype(np.float32)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_matches_numpy(ctx, reduction):
    p, t = _probabilities((4, 5)), _probabilities((4, 5), 1)
    w = _probabilities((5,), 2)
    loss = -(t * np.log(p.astype(np.float64)) + (1 - t) * np.log(1 - p.astype(np.float64))) * w
    want = {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]
    got = F.binary_cross_entropy(
        torch.from_numpy(p), torch.from_numpy(t), torch.from_numpy(w), reduction=reduction
    )
    assert got.dtype is torch.float32 and got.shape == np.shape(want)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_binary_cross_entropy_clamps_its_logs_and_checks_its_input(ctx):
    got = F.binary_cross_entropy(
        torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0]), reduction="none"
    )
    assert got.tolist() == [100.0, 100.0]
    with pytest.raises(TensorError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(torch.tensor([1.5]), torch.tensor([1.0]))
    with pytest.raises(TensorError, match="Using a target size .* different to the input size"):
        F.binary_cross_entropy(torch.tensor([0.5, 0.5]), torch.tensor([1.0]))
    with pytest.raises(TensorError, match="reduction 'avg' is not one of 'mean', 'sum', 'none'"):
        F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([1.0]), reduction="avg")


def test_binary_cross_entropy_with_logits_matches_numpy(ctx):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 3)) * 30).astype(np.float32)
    t = _probabilities((6, 3), 4)
    pw = np.array([0.5, 1.0, 3.0], np.float32)
    w = np.array([[2.0], [1.0], [1.0], [0.5], [1.0], [1.0]], np.float32)
    xd = x.astype(np.float64)
    log_sig, log_1m = -np.logaddexp(0, -xd), -np.logaddexp(0, xd)
    want = -(pw * t * log_sig + (1 - t) * log_1m) * w
    got = F.binary_cross_entropy_with_logits(
        torch.from_numpy(x),
        torch.from_numpy(t),
        weight=torch.from_numpy(w),
        reduction="none",
        pos_weight=torch.from_numpy(pw),
    )
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    plain = F.binary_cross_entropy_with_logits(torch.from_numpy(x), torch.from_numpy(t))
    np.testing.assert_allclose(plain.item(), (-(t * log_sig + (1 - t) * log_1m)).mean(), rtol=1e-6)


def test_kl_div_follows_torch_for_each_reduction(ctx):
    p, q = _probabilities((3, 4)), _probabilities((3, 4), 5)
    q[0, 0] = 0.0  # xlogy: a zero target adds nothing
    x, t = torch.from_numpy(np.log(p)), torch.from_numpy(q)
    qd = q.astype(np.float64)
    pointwise = np.where(qd > 0, qd * np.log(np.where(qd > 0, qd, 1)), 0) - qd * np.log(p)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        mean = F.kl_div(x, t)
    np.testing.assert_allclose(mean.item(), pointwise.mean(), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batchmean = F.kl_div(x, t, reduction="batchmean")
        total = F.kl_div(x, t, reduction="sum")
        each = F.kl_div(x, t, reduction="none")
    np.testing.assert_allclose(batchmean.item(), pointwise.sum() / 3, rtol=1e-6)
    np.testing.assert_allclose(total.item(), pointwise.sum(), rtol=1e-6)
    np.testing.assert_allclose(each.numpy(), pointwise, rtol=1e-5, atol=1e-7)
    logged = F.kl_div(x, torch.from_numpy(np.log(p)), reduction="sum", log_target=True)
    assert abs(logged.item()) < 1e-6
    with pytest.raises(TensorError, match="kl_div: reduction 'max' is not one of"):
        F.kl_div(x, t, reduction="max")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_smooth_l1_and_huber_match_numpy(ctx, reduction):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    d = np.abs(a.astype(np.float64) - b)
    reduce = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    x, y = torch.from_numpy(a), torch.from_numpy(b)
    with pytest.warns(UserWarning, match="different to the input size"):
        smooth = F.smooth_l1_loss(x, y, reduction=reduction, beta=0.5)
    np.testing.assert_allclose(
        smooth.numpy(), reduce(np.where(d < 0.5, 0.5 * d * d / 0.5, d - 0.25)), rtol=1e-6
    )
    yy = torch.from_numpy(np.broadcast_to(b, a.shape).copy())
    huber = F.huber_loss(x, yy, reduction=reduction, delta=0.5)
    np.testing.assert_allclose(
        huber.numpy(), reduce(np.where(d < 0.5, 0.5 * d * d, 0.5 * (d - 0.25))), rtol=1e-6
    )
    l1 = F.smooth_l1_loss(x, yy, reduction=reduction, beta=0.0)
    np.testing.assert_allclose(l1.numpy(), F.l1_loss(x, yy, reduction=reduction).numpy(), rtol=1e-6)


def test_loss_errors_name_the_call_and_what_is_valid(ctx):
    x = torch.ones(3)
    with pytest.raises(TensorError, match="smooth_l1_loss does not support negative values"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(TensorError, match="huber_loss does not support non-positive values"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(TensorError, match="huber_loss: input and target must be floating"):
        F.huber_loss(torch.tensor([1, 2]), torch.tensor([1, 2]))
    with pytest.raises(
        TensorError, match="with_logits: shapes \\(3,\\) and \\(2,\\) cannot be broadcast"
    ):
        F.binary_cross_entropy_with_logits(x, x, weight=torch.ones(2))


def test_cosine_similarity_and_pairwise_distance_match_numpy(ctx):
    rng = np.random.default_rng(7)
    a, b = (
        rng.standard_normal((3, 5)).astype(np.float32),
        rng.standard_normal((3, 5)).astype(np.float32),
    )
    ad, bd = a.astype(np.float64), b.astype(np.float64)
    cos = (ad * bd).sum(1) / (np.linalg.norm(ad, axis=1) * np.linalg.norm(bd, axis=1))
    got = F.cosine_similarity(torch.from_numpy(a), torch.from_numpy(b))
    assert got.shape == (3,)
    np.testing.assert_allclose(got.numpy(), cos, rtol=1e-6)
    along0 = F.cosine_similarity(torch.from_numpy(a), torch.from_numpy(b[0]), dim=0)
    bb = np.broadcast_to(bd[0], ad.shape)
    want0 = (ad * bb).sum(0) / (np.linalg.norm(ad, axis=0) * np.linalg.norm(bb, axis=0))
    np.testing.assert_allclose(along0.numpy(), want0, rtol=1e-6)
    zero = F.cosine_similarity(torch.zeros(2, 3), torch.ones(2, 3))
    assert zero.tolist() == [0.0, 0.0]
    dist = F.pairwise_distance(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(dist.numpy(), np.linalg.norm(ad - bd + 1e-6, axis=1), rtol=1e-6)
    one = F.pairwise_distance(torch.from_numpy(a), torch.from_numpy(b), p=1, keepdim=True)
    assert one.shape == (3, 1)
    np.testing.assert_allclose(one.numpy()[:, 0], np.abs(ad - bd + 1e-6).sum(1), rtol=1e-6)
    three = F.pairwise_distance(torch.from_numpy(a), torch.from_numpy(b), p=3)
    want3 = (np.abs(ad - bd + 1e-6) ** 3).sum(1) ** (1 / 3)
    np.testing.assert_allclose(three.numpy(), want3, rtol=1e-5)
    with pytest.raises(TensorError, match="pairwise_distance: p must be positive"):
        F.pairwise_distance(torch.ones(2), torch.ones(2), p=0)
    with pytest.raises(TensorError, match="cosine_similarity: dim 2 is out of range"):
        F.cosine_similarity(torch.ones(2, 3), torch.ones(2, 3), dim=2)


# ----------------------------------------------------------------------------- norms


def _image(shape=(2, 4, 3, 5), seed=8):
    return (np.random.default_rng(seed).standard_normal(shape) * 3 + 1).astype(np.float32)


def test_group_norm_matches_numpy(ctx):
    a = _image()
    w, b = np.arange(1, 5, dtype=np.float32), np.arange(4, dtype=np.float32) - 2
    rows = a.astype(np.float64).reshape(2, 2, -1)
    norm = (rows - rows.mean(-1, keepdims=True)) / np.sqrt(rows.var(-1, keepdims=True) + 1e-5)
    want = norm.reshape(a.shape) * w[:, None, None] + b[:, None, None]
    got = F.group_norm(torch.from_numpy(a), 2, torch.from_numpy(w), torch.from_numpy(b))
    assert got.shape == a.shape and got.dtype is torch.float32
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(TensorError, match="divisible by num_groups, but got input of shape"):
        F.group_norm(torch.from_numpy(a), 3)
    with pytest.raises(TensorError, match="group_norm: weight should contain 4 elements"):
        F.group_norm(torch.from_numpy(a), 2, torch.ones(3))


def test_batch_norm_trains_its_running_statistics_as_torch(ctx):
    a = _image()
    ad = a.astype(np.float64)
    mean, var = ad.mean((0, 2, 3)), ad.var((0, 2, 3))
    rm, rv = torch.zeros(4), torch.ones(4)
    w, b = torch.full((4,), 2.0), torch.full((4,), 0.5)
    got = F.batch_norm(torch.from_numpy(a), rm, rv, w, b, training=True, momentum=0.2)
    want = (ad - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * 2 + 0.5
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rm.numpy(), 0.2 * mean, rtol=1e-5)
    np.testing.assert_allclose(rv.numpy(), 0.8 + 0.2 * ad.var((0, 2, 3), ddof=1), rtol=1e-5)
    evaluated = F.batch_norm(torch.from_numpy(a), rm, rv)
    stats = rm.numpy()[:, None, None], rv.numpy()[:, None, None]
    np.testing.assert_allclose(
        evaluated.numpy(), (ad - stats[0]) / np.sqrt(stats[1] + 1e-5), rtol=1e-5, atol=1e-5
    )
    flat = F.batch_norm(torch.from_numpy(a[:, :, 0, 0]), None, None, training=True)
    two = ad[:, :, 0, 0]
    np.testing.assert_allclose(
        flat.numpy(), (two - two.mean(0)) / np.sqrt(two.var(0) + 1e-5), rtol=1e-5, atol=1e-5
    )
    with pytest.raises(TensorError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(torch.ones(1, 4), None, None, training=True)
    with pytest.raises(TensorError, match="running_mean and running_var must be given"):
        F.batch_norm(torch.ones(2, 4), None, None)


def test_instance_norm_matches_numpy(ctx):
    a = _image()
    ad = a.astype(np.float64)
    m, v = ad.mean((2, 3), keepdims=True), ad.var((2, 3), keepdims=True)
    np.testing.assert_allclose(
        F.instance_norm(torch.from_numpy(a)).numpy(),
        (ad - m) / np.sqrt(v + 1e-5),
        rtol=1e-5,
        atol=1e-5,
    )
    rm, rv = torch.zeros(4), torch.ones(4)
    F.instance_norm(torch.from_numpy(a), rm, rv)
    np.testing.assert_allclose(rm.numpy(), 0.1 * m.mean(0).ravel(), rtol=1e-5)


# ----------------------------------------------------------------------------- costs


@pytest.fixture(scope="module")
def ring8():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        yield context


def test_fused_activations_and_losses_cost_one_pass_or_less_than_their_composition(ring8):
    # The vector engine is charged a FLOP an element for each operation: piecewise-linear
    # activations cost one memory pass; the exp/log ones cost less than the tensor ops that
    # compose them (one kernel, not several passes).  2M elements: enough that a kernel's
    # fixed launch cost is amortised within these bounds (at 1M the mean's 1.2 no longer holds).
    x, y = torch.ones(2048, 1024), torch.ones(2048, 1024)
    unary = cost(ring8, lambda: x.sigmoid())
    for call in (F.leaky_relu, F.hardswish, F.hardsigmoid, F.softsign, F.relu6, F.glu):
        assert cost(ring8, lambda c=call: c(x)) <= 1.1 * unary
    composed = {
        F.softplus: lambda: x.exp().add_(1).log_(),
        F.mish: lambda: x * x.exp().add_(1).log_().tanh_(),
        F.selu: lambda: torch.where(x > 0, x, x.exp().sub_(1).mul_(1.67)).mul_(1.05),
        F.tanhshrink: lambda: x - x.tanh(),
        F.logsigmoid: lambda: x.sigmoid().log_(),
    }
    for call, composition in composed.items():
        assert cost(ring8, lambda c=call: c(x)) <= 1.05 * cost(ring8, composition)
    binary = cost(ring8, lambda: x - y)
    assert cost(ring8, lambda: F.huber_loss(x, y, reduction="none")) <= 1.1 * binary
    assert cost(ring8, lambda: F.kl_div(x, y, reduction="none")) <= 1.1 * binary
    logits = cost(ring8, lambda: F.binary_cross_entropy_with_logits(x, y, reduction="none"))
    assert logits <= cost(ring8, lambda: (1 - y) * x + (-x).sigmoid().log_().neg_()) / 2
    mean = cost(ring8, lambda: F.binary_cross_entropy_with_logits(x, y))
    assert mean <= 1.2 * logits  # and a reduction


def test_timing_only_costs_what_a_run_with_values_costs():
    def run(timing_only: bool) -> int:
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            x = torch.ones(64, 8, 4, 4)
            before = context.now
            F.mish(x)
            F.group_norm(x, 4)
            F.batch_norm(x, torch.zeros(8), torch.ones(8), training=True)
            F.kl_div(x, x, reduction="batchmean")
            F.cosine_similarity(x, x)
            return context.now - before

    assert run(True) == run(False)


def test_torch_forms_of_the_functional_calls(ctx):
    a = np.array([-2.0, -0.5, 0.0, 1.5], np.float32)
    np.testing.assert_array_equal(
        torch.selu(torch.from_numpy(a)).numpy(), F.selu(torch.from_numpy(a)).numpy()
    )
    np.testing.assert_array_equal(
        torch.celu(torch.from_numpy(a), 0.5).numpy(), F.celu(torch.from_numpy(a), 0.5).numpy()
    )
    x = torch.from_numpy(a)
    assert torch.selu_(x) is x and torch.celu_(torch.from_numpy(a)).shape == (4,)
    m = torch.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(
        torch.cosine_similarity(m, m + 1).numpy(), F.cosine_similarity(m, m + 1).numpy()
    )
    np.testing.assert_array_equal(
        torch.pairwise_distance(m, m * 2).numpy(), F.pairwise_distance(m, m * 2).numpy()
    )


def test_norms_cost_their_passes(ring8):
    # group_norm: the layer-norm kernel plus a per-channel multiply and add; batch_norm: two
    # reductions for the statistics and a multiply and an add (the per-channel work is tiny)
    x = torch.ones(16, 256, 32, 32)
    w, b = torch.ones(256), torch.zeros(256)
    one_pass = cost(ring8, lambda: x * 2)
    rows = x.view(16 * 32, -1)
    layer = cost(ring8, lambda: F.layer_norm(rows, (rows.shape[-1],)))
    assert cost(ring8, lambda: F.group_norm(x, 32, w, b)) <= layer + 2.2 * one_pass
    rm, rv = torch.zeros(256), torch.ones(256)
    assert cost(ring8, lambda: F.batch_norm(x, rm, rv, w, b, training=True)) <= 5 * one_pass
    assert cost(ring8, lambda: F.batch_norm(x, rm, rv, w, b)) <= 2.2 * one_pass
