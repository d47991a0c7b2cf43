"""The margin, embedding and likelihood losses (``F.margin_ranking_loss`` ...
``F.gaussian_nll_loss`` and their modules) and the ``CosineSimilarity`` and
``PairwiseDistance`` modules: values against NumPy written out here for each reduction,
gradients against NumPy central differences (float64), torch's argument checks and
errors, and timing-only runs."""

from __future__ import annotations

import math

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


REDUCTIONS = ["none", "mean", "sum"]


def _reduce(loss, reduction):
    return {"none": loss, "mean": np.mean(loss), "sum": np.sum(loss)}[reduction]


def _t(a, dtype=torch.float64):
    return torch.tensor(np.asarray(a), dtype=dtype)


def _signs(shape, seed=7):
    return np.where(np.random.default_rng(seed).random(shape) < 0.5, -1.0, 1.0)


def _classes(n, c, seed=8):
    return np.random.default_rng(seed).integers(0, c, n)


# --------------------------------------------------------------------- NumPy references
def _np_cos(x1, x2, d):
    dot = (x1 * x2).sum(d)
    mags = ((x1 * x1).sum(d) + 1e-12) * ((x2 * x2).sum(d) + 1e-12)
    return dot / np.sqrt(mags)


def _np_cosine_embedding(x1, x2, y, margin):
    cos = _np_cos(x1, x2, y.ndim)
    return np.where(y == 1, 1 - cos, 0.0) + np.where(y == -1, np.maximum(cos - margin, 0), 0.0)


def _np_multi_margin(x, y, p=1, margin=1.0, w=None):
    rows = x.reshape(-1, x.shape[-1])
    out = np.zeros(rows.shape[0])
    for n, (row, k) in enumerate(zip(rows, np.reshape(y, -1), strict=True)):
        for i in range(row.size):
            z = margin - row[k] + row[i]
            if i != k and z > 0:
                out[n] += z**p * (1.0 if w is None else w[k])
    return out / rows.shape[1]


def _np_multilabel_margin(x, y):
    rows, labels = x.reshape(-1, x.shape[-1]), y.reshape(-1, x.shape[-1])
    out = np.zeros(rows.shape[0])
    for n, (row, label) in enumerate(zip(rows, labels, strict=True)):
        listed = []
        for k in label:
            if k == -1:
                break
            listed.append(k)
        for j in listed:
            for i in range(row.size):
                if i not in listed:
                    out[n] += max(0.0, 1 - (row[j] - row[i]))
    return out / rows.shape[1]


def _np_log_sigmoid(x):
    return -np.logaddexp(0, -x)


def _np_distance(a, b, p, eps=1e-6):
    d = np.abs(a - b + eps)
    return d.max(-1) if math.isinf(p) else (d**p).sum(-1) ** (1 / p)


def _np_triplet(a, pos, neg, margin=1.0, p=2.0, swap=False):
    dn = _np_distance(a, neg, p)
    if swap:
        dn = np.minimum(dn, _np_distance(pos, neg, p))
    return np.maximum(margin + _np_distance(a, pos, p) - dn, 0)


def _np_poisson(x, t, log_input=True, full=False, eps=1e-8):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        safe = np.where(t > 1, t, 2.0)
        loss = loss + np.where(
            t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * np.pi * safe), 0
        )
    return loss


def _np_gaussian(x, t, v, full=False, eps=1e-6):
    v = np.maximum(v, eps)
    loss = 0.5 * (np.log(v) + (x - t) ** 2 / v)
    return loss + 0.5 * np.log(2 * np.pi) if full else loss


# ------------------------------------------------------------------ values and gradients
SIGNS_2D, SIGNS_1D = _signs((3, 4)), _signs((5,))
COS_TARGET, COS_TARGET_0D = _signs((4,), seed=9), np.array(-1.0)
CLASSES = _classes(4, 5)
LABELS = np.array([[3, 0, -1, 1, 2], [1, 1, 4, -1, -1], [-1, 2, 0, 0, 0], [0, 1, 2, 3, 4]])
BITS = (np.random.default_rng(10).random((3, 4)) < 0.5).astype(np.float64)
CLASS_WEIGHT = np.array([0.5, 1.0, 2.0, 1.5, 0.25])
COUNTS = np.array([[0.0, 1.0, 3.0, 2.0], [5.0, 0.0, 1.0, 4.0]])

CASES = {
    "margin_ranking_2d": (
        lambda r: lambda a, b: F.margin_ranking_loss(a, b, _t(SIGNS_2D), 0.3, reduction=r),
        lambda r: lambda a, b: _reduce(np.maximum(0, -SIGNS_2D * (a - b) + 0.3), r),
        [(3, 4), (3, 4)],
    ),
    "margin_ranking_1d": (
        lambda r: lambda a, b: F.margin_ranking_loss(a, b, _t(SIGNS_1D), reduction=r),
        lambda r: lambda a, b: _reduce(np.maximum(0, -SIGNS_1D * (a - b)), r),
        [(5,), (5,)],
    ),
    "hinge_embedding": (
        lambda r: lambda x: F.hinge_embedding_loss(x, _t(SIGNS_2D), 0.7, reduction=r),
        lambda r: lambda x: _reduce(
            np.where(SIGNS_2D == 1, x, np.maximum(0, 0.7 - x)), r
        ),
        [(3, 4)],
    ),
    "soft_margin": (
        lambda r: lambda x: F.soft_margin_loss(x, _t(SIGNS_2D), reduction=r),
        lambda r: lambda x: _reduce(np.log1p(np.exp(-SIGNS_2D * x)), r),
        [(3, 4)],
    ),
    "cosine_embedding_2d": (
        lambda r: lambda a, b: F.cosine_embedding_loss(a, b, _t(COS_TARGET), 0.1, reduction=r),
        lambda r: lambda a, b: _reduce(_np_cosine_embedding(a, b, COS_TARGET, 0.1), r),
        [(4, 3), (4, 3)],
    ),
    "cosine_embedding_1d": (
        lambda r: lambda a, b: F.cosine_embedding_loss(a, b, _t(COS_TARGET_0D), reduction=r),
        lambda r: lambda a, b: _reduce(_np_cosine_embedding(a, b, COS_TARGET_0D, 0.0), r),
        [(6,), (6,)],
    ),
    "multi_margin_p1": (
        lambda r: lambda x: F.multi_margin_loss(x, _t(CLASSES, torch.int64), reduction=r),
        lambda r: lambda x: _reduce(_np_multi_margin(x, CLASSES), r),
        [(4, 5)],
    ),
    "multi_margin_p2_weight": (
        lambda r: lambda x: F.multi_margin_loss(
            x, _t(CLASSES, torch.int64), 2, 0.6, _t(CLASS_WEIGHT), reduction=r
        ),
        lambda r: lambda x: _reduce(_np_multi_margin(x, CLASSES, 2, 0.6, CLASS_WEIGHT), r),
        [(4, 5)],
    ),
    "multi_margin_1d": (
        lambda r: lambda x: F.multi_margin_loss(x, _t(2, torch.int64), reduction=r),
        lambda r: lambda x: _reduce(_np_multi_margin(x, 2)[0], r),
        [(5,)],
    ),
    "multilabel_margin": (
        lambda r: lambda x: F.multilabel_margin_loss(x, _t(LABELS, torch.int64), reduction=r),
        lambda r: lambda x: _reduce(_np_multilabel_margin(x, LABELS), r),
        [(4, 5)],
    ),
    "multilabel_margin_1d": (
        lambda r: lambda x: F.multilabel_margin_loss(x, _t(LABELS[0], torch.int64), reduction=r),
        lambda r: lambda x: _reduce(_np_multilabel_margin(x, LABELS[0])[0], r),
        [(5,)],
    ),
    "multilabel_soft_margin": (
        lambda r: lambda x: F.multilabel_soft_margin_loss(
            x, _t(BITS), _t(CLASS_WEIGHT[:4]), reduction=r
        ),
        lambda r: lambda x: _reduce(
            (-(BITS * _np_log_sigmoid(x) + (1 - BITS) * _np_log_sigmoid(-x)) * CLASS_WEIGHT[:4])
            .mean(-1),
            r,
        ),
        [(3, 4)],
    ),
    "triplet_p2": (
        lambda r: lambda a, p, n: F.triplet_margin_loss(a, p, n, reduction=r),
        lambda r: lambda a, p, n: _reduce(_np_triplet(a, p, n), r),
        [(3, 4), (3, 4), (3, 4)],
    ),
    "triplet_p1_swap": (
        lambda r: lambda a, p, n: F.triplet_margin_loss(a, p, n, 0.5, 1, swap=True, reduction=r),
        lambda r: lambda a, p, n: _reduce(_np_triplet(a, p, n, 0.5, 1, True), r),
        [(3, 4), (3, 4), (3, 4)],
    ),
    "triplet_p3_1d": (
        lambda r: lambda a, p, n: F.triplet_margin_loss(a, p, n, 2.0, 3, reduction=r),
        lambda r: lambda a, p, n: _reduce(_np_triplet(a, p, n, 2.0, 3), r),
        [(4,), (4,), (4,)],
    ),
    "triplet_with_distance": (
        lambda r: lambda a, p, n: F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda u, v: ((u - v) ** 2).sum(-1), margin=2.0,
            swap=True, reduction=r,
        ),
        lambda r: lambda a, p, n: _reduce(
            np.maximum(
                2.0 + ((a - p) ** 2).sum(-1)
                - np.minimum(((a - n) ** 2).sum(-1), ((p - n) ** 2).sum(-1)),
                0,
            ),
            r,
        ),
        [(3, 4), (3, 4), (3, 4)],
    ),
    "poisson_log_input": (
        lambda r: lambda x: F.poisson_nll_loss(x, _t(COUNTS), reduction=r),
        lambda r: lambda x: _reduce(_np_poisson(x, COUNTS), r),
        [(2, 4)],
    ),
    "poisson_rates_full": (
        lambda r: lambda x: F.poisson_nll_loss(x, _t(COUNTS), False, True, eps=1e-3, reduction=r),
        lambda r: lambda x: _reduce(_np_poisson(x, COUNTS, False, True, 1e-3), r),
        [((2, 4), 0.5, 3.0)],
    ),
    "gaussian": (
        lambda r: lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction=r),
        lambda r: lambda x, t, v: _reduce(_np_gaussian(x, t, v), r),
        [(3, 4), (3, 4), ((3, 4), 0.2, 2.0)],
    ),
    "gaussian_one_variance_per_sample_full": (
        lambda r: lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True, reduction=r),
        lambda r: lambda x, t, v: _reduce(_np_gaussian(x, t, v[:, None], full=True), r),
        [(3, 4), (3, 4), ((3,), 0.2, 2.0)],
    ),
}  # fmt: skip


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", list(CASES))
def test_loss_values_and_gradients_match_numpy(name, reduction):
    torch_fn, numpy_fn, shapes = CASES[name]
    check(torch_fn(reduction), numpy_fn(reduction), *shapes)


def test_gaussian_nll_takes_one_number_as_the_variance_of_all():
    x, t = _t([[0.5, -0.2], [1.0, 0.0]]), _t([[0.0, 0.0], [0.5, 0.5]])
    got = F.gaussian_nll_loss(x, t, 0.5, reduction="none")
    np.testing.assert_allclose(got.numpy(), _np_gaussian(x.numpy(), t.numpy(), 0.5))
    np.testing.assert_allclose(
        nn.GaussianNLLLoss()(x, t, 2).item(), _np_gaussian(x.numpy(), t.numpy(), 2.0).mean()
    )


def test_gaussian_nll_clamps_the_variance_for_the_forward_only():
    x, t = _t([0.5, -0.2]), _t([0.0, 0.0])
    v = torch.tensor([1e-9, 2.0], dtype=torch.float64, requires_grad=True)
    F.gaussian_nll_loss(x, t, v, eps=1e-3, reduction="sum").backward()
    clamped = np.array([1e-3, 2.0])  # as torch: the clamp is not differentiated
    want = 0.5 / clamped - 0.5 * np.array([0.25, 0.04]) / clamped**2
    np.testing.assert_allclose(v.grad.numpy(), want, rtol=1e-9)


@pytest.mark.parametrize("p", [3, 1.5, float("inf")])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance_of_any_p_and_its_gradients(p, keepdim):
    def numpy_fn(a, b):
        d = _np_distance(a, b, p)
        return d[..., None] if keepdim else d

    check(lambda a, b: nn.PairwiseDistance(p, keepdim=keepdim)(a, b), numpy_fn, (3, 4), (4,))


# ------------------------------------------------------------------------------ modules
def test_loss_modules_hold_torchs_arguments_and_call_their_functional():
    a, b = _t(np.random.default_rng(1).standard_normal((3, 4))), _t(np.ones((3, 4)))
    y, n = _t(SIGNS_2D), a * 2
    labels = _t([0, 3, 1], torch.int64)
    multi = _t([[3, 0, -1, 1], [1, 1, 2, -1], [-1, 2, 0, 0]], torch.int64)
    pairs = [
        (
            nn.MarginRankingLoss(0.3, reduction="sum")(a, b, y),
            F.margin_ranking_loss(a, b, y, 0.3, reduction="sum"),
        ),
        (nn.HingeEmbeddingLoss(0.5)(a, y), F.hinge_embedding_loss(a, y, 0.5)),
        (nn.SoftMarginLoss(reduce=False)(a, y), F.soft_margin_loss(a, y, reduction="none")),
        (nn.CosineEmbeddingLoss(0.2)(a, b, y[:, 0]), F.cosine_embedding_loss(a, b, y[:, 0], 0.2)),
        (nn.MultiMarginLoss(2, 0.5)(a, labels), F.multi_margin_loss(a, labels, 2, 0.5)),
        (nn.MultiLabelMarginLoss()(a, multi), F.multilabel_margin_loss(a, multi)),
        (nn.MultiLabelSoftMarginLoss()(a, _t(BITS)), F.multilabel_soft_margin_loss(a, _t(BITS))),
        (
            nn.TripletMarginLoss(p=1, swap=True)(a, b, n),
            F.triplet_margin_loss(a, b, n, p=1, swap=True),
        ),
        (nn.TripletMarginWithDistanceLoss()(a, b, n), F.triplet_margin_loss(a, b, n)),
        (nn.PoissonNLLLoss(full=True)(a, b * 3), F.poisson_nll_loss(a, b * 3, full=True)),
        (nn.GaussianNLLLoss(full=True)(a, b, b), F.gaussian_nll_loss(a, b, b, full=True)),
        (nn.CosineSimilarity(dim=0)(a, b), F.cosine_similarity(a, b, 0)),
        (nn.PairwiseDistance(1, keepdim=True)(a, b), F.pairwise_distance(a, b, 1, keepdim=True)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    weight = _t(CLASS_WEIGHT[:4])
    assert list(nn.MultiMarginLoss(weight=weight).state_dict()) == ["weight"]
    assert list(nn.MultiLabelSoftMarginLoss(weight).state_dict()) == ["weight"]
    assert (
        list(nn.MarginRankingLoss().state_dict()) == [] and nn.SoftMarginLoss().reduction == "mean"
    )
    assert repr(nn.TripletMarginLoss()) == "TripletMarginLoss()"
    assert isinstance(nn.PoissonNLLLoss(), nn.modules.loss._Loss)
    assert isinstance(nn.MultiMarginLoss(), nn.modules.loss._WeightedLoss)
    assert nn.PairwiseDistance(3).norm == 3 and nn.CosineSimilarity().dim == 1


def test_module_gradients_reach_the_inputs():
    rng = np.random.default_rng(2)
    a = torch.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    nn.TripletMarginLoss(margin=5.0)(a, _t(np.zeros((3, 4))), _t(np.ones((3, 4)))).backward()
    d_pos = np.sqrt(((a.detach().numpy() + 1e-6) ** 2).sum(-1, keepdims=True))
    d_neg = np.sqrt(((a.detach().numpy() - 1 + 1e-6) ** 2).sum(-1, keepdims=True))
    want = ((a.detach().numpy() + 1e-6) / d_pos - (a.detach().numpy() - 1 + 1e-6) / d_neg) / 3
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-9)


# ------------------------------------------------------------------------------- errors
def test_losses_refuse_what_torch_refuses():
    x, y = torch.ones(3, 4), torch.ones(3, 4)
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        F.soft_margin_loss(x, y, reduction="avg")
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        nn.HingeEmbeddingLoss(reduction="batchmean")(x, y)
    with pytest.raises(TensorError, match="All input tensors should have same dimension"):
        F.margin_ranking_loss(x, y, torch.ones(4))
    with pytest.raises(TensorError, match="0D or 1D target tensor expected"):
        F.cosine_embedding_loss(x, y, torch.ones(3, 4))
    with pytest.raises(TensorError, match="1D target tensor expects 2D input tensors"):
        F.cosine_embedding_loss(torch.ones(3), torch.ones(3), torch.ones(3))
    labels = torch.tensor([0, 1, 2])
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        F.multi_margin_loss(x, labels, p=3)
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="expected weight to be None or 1D tensor, got 2D"):
        nn.MultiMarginLoss(weight=torch.ones(2, 2))
    with pytest.raises(TensorError, match="inconsistent target size, expected 3 but got"):
        F.multi_margin_loss(x, torch.tensor([0, 1]))
    with pytest.raises(TensorError, match="inconsistent weight size, expected 4"):
        F.multi_margin_loss(x, labels, weight=torch.ones(3))
    with pytest.raises(TensorError, match="target out of range"):
        F.multi_margin_loss(x, torch.tensor([0, 1, 4]))
    with pytest.raises(TensorError, match="class indices of an integer dtype"):
        F.multi_margin_loss(x, torch.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(TensorError, match="Expected non-empty vector or matrix"):
        F.multi_margin_loss(torch.ones(2, 3, 4), labels)
    with pytest.raises(TensorError, match=r"inconsistent target size: \[3\] for input of size"):
        F.multilabel_margin_loss(x, labels)
    with pytest.raises(TensorError, match="target index is out of range"):
        F.multilabel_margin_loss(x, torch.tensor([[0, 9, -1, 0]] * 3))
    assert F.multilabel_margin_loss(x, torch.tensor([[0, -1, 9, 0]] * 3)).shape == ()
    with pytest.raises(TensorError, match="same number of dimensions, but got: anchor 2D"):
        F.triplet_margin_loss(x, y, torch.ones(4))
    with pytest.raises(ValueError, match="expected margin to be greater than 0, got 0"):
        F.triplet_margin_with_distance_loss(x, y, x, margin=0)
    with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater"):
        nn.TripletMarginLoss(margin=-1.0)
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(x, y, torch.ones(4))
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, y, -torch.ones(3, 4))


# ---------------------------------------------------------------------------- timing only
def test_losses_cost_time_in_timing_only_mode():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.ones(16, 10, requires_grad=True)
        y, labels = torch.ones(16, 10), torch.zeros(16, dtype=torch.int64)
        calls = [
            lambda: F.margin_ranking_loss(x, y, y),
            lambda: F.hinge_embedding_loss(x, y),
            lambda: F.soft_margin_loss(x, y),
            lambda: F.cosine_embedding_loss(x, y, torch.ones(16)),
            lambda: F.multi_margin_loss(x, labels, weight=torch.ones(10)),
            lambda: F.multilabel_margin_loss(x, torch.zeros(16, 10, dtype=torch.int64)),
            lambda: F.multilabel_soft_margin_loss(x, y),
            lambda: F.triplet_margin_loss(x, y, y, swap=True),
            lambda: F.triplet_margin_with_distance_loss(x, y, y),
            lambda: F.poisson_nll_loss(x, y, full=True),
            lambda: F.gaussian_nll_loss(x, y, y),
        ]
        for call in calls:
            before = context.now
            loss = call()
            assert loss.shape == () and context.now > before
            before = context.now
            loss.backward()
            assert context.now > before and x.grad.shape == (16, 10)
