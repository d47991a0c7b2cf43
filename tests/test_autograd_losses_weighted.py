"""Backward of ``F.cross_entropy``/``nn.CrossEntropyLoss`` and ``F.nll_loss``/``nn.NLLLoss``
with class weights: every reduction, ``ignore_index``, label smoothing with weights (torch's
mix of the weighted NLL and the weighted smoothing term, both over the targets' weights
for "mean"), spatial inputs and probability targets, against NumPy central differences
in float64."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _log_softmax(x, d):
    m = x.max(d, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(d, keepdims=True))


def _class_loss(x, target, w, ignore_index=-100, reduction="mean", smooth=0.0, scores=True):
    """torch's cross_entropy (``scores``) or nll_loss of ``x`` as ATen defines them."""
    cdim = 0 if x.ndim == 1 else 1
    lp = np.moveaxis(_log_softmax(x, cdim) if scores else x, cdim, -1)
    classes = lp.shape[-1]
    w = np.ones(classes) if w is None else w
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    taken = np.take_along_axis(lp, safe[..., None], -1)[..., 0]
    weights = w[safe] * valid
    loss = (1 - smooth) * -taken * weights + smooth / classes * -(lp * w).sum(-1) * valid
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / weights.sum()


W5 = np.array([0.5, 2.0, 1.0, 0.25, 3.0])
T8 = np.array([1, 0, 4, 1, 3, 2, 1, 4])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smooth", [0.0, 0.3])
@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_cross_entropy_with_weight(ctx, reduction, smooth, ignore_index):
    target, weight = torch.tensor(T8), torch.tensor(W5, dtype=torch.float64)
    check(
        lambda x: F.cross_entropy(
            x,
            target,
            weight,
            ignore_index=ignore_index,
            reduction=reduction,
            label_smoothing=smooth,
        ),
        lambda x: _class_loss(x, T8, W5, ignore_index, reduction, smooth),
        (8, 5),
        node="NllLossBackward0",
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_with_weight(ctx, reduction):
    target, weight = torch.tensor(T8), torch.tensor(W5, dtype=torch.float64)
    for ignore_index in (-100, 4):
        check(
            lambda x, i=ignore_index: F.nll_loss(
                x, target, weight=weight, ignore_index=i, reduction=reduction
            ),
            lambda x, i=ignore_index: _class_loss(x, T8, W5, i, reduction, scores=False),
            (8, 5),
            node="NllLossBackward0",
        )


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_spatial_and_single_sample_inputs(ctx, reduction):
    w4 = np.array([0.5, 2.0, 1.0, 3.0])
    t = np.array([[0, 3, 1], [2, -100, 3]])
    target, weight = torch.tensor(t), torch.tensor(w4, dtype=torch.float64)
    check(
        lambda x: F.cross_entropy(x, target, weight, reduction=reduction, label_smoothing=0.2),
        lambda x: _class_loss(x, t, w4, reduction=reduction, smooth=0.2),
        (2, 4, 3),
    )
    one = torch.tensor(np.array(2))
    check(
        lambda x: F.cross_entropy(x, one, weight, reduction=reduction),
        lambda x: _class_loss(x, np.array(2), w4, reduction=reduction),
        (4,),
    )


def test_probability_targets_with_weight(ctx):
    weight = torch.tensor(W5, dtype=torch.float64)

    def reference(x, p, smooth, reduction):
        q = (p * (1 - smooth) + smooth / 5) * W5
        loss = -(_log_softmax(x, 1) * q).sum(1)
        return (
            loss if reduction == "none" else loss.sum() / (len(loss) if reduction == "mean" else 1)
        )

    for reduction in ("mean", "sum", "none"):
        check(
            lambda x, p, r=reduction: F.cross_entropy(
                x, p, weight, reduction=r, label_smoothing=0.1
            ),
            lambda x, p, r=reduction: reference(x, p, 0.1, r),
            (3, 5),
            ((3, 5), 0.0, 1.0),
            node="SoftmaxCrossEntropyBackward0",
        )


def test_modules_and_an_all_ignored_mean(ctx):
    weight = torch.tensor(W5, dtype=torch.float64)
    target = torch.tensor(T8)
    check(
        lambda x: nn.CrossEntropyLoss(weight=weight, label_smoothing=0.1, ignore_index=0)(
            x, target
        ),
        lambda x: _class_loss(x, T8, W5, 0, smooth=0.1),
        (8, 5),
    )
    check(
        lambda x: nn.NLLLoss(weight=weight, reduction="sum")(x, target),
        lambda x: _class_loss(x, T8, W5, reduction="sum", scores=False),
        (8, 5),
    )
    # every target ignored: the mean is 0 / 0, its gradient 0 (torch writes no sample)
    x = torch.zeros(2, 5, dtype=torch.float64, requires_grad=True)
    loss = F.cross_entropy(x, torch.tensor([1, 1]), weight, ignore_index=1)
    loss.backward()
    assert np.isnan(loss.item()) and (x.grad.numpy() == 0).all()


def test_weight_that_requires_grad_is_refused_at_backward(ctx):
    x = torch.zeros(2, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.ones(5, dtype=torch.float64, requires_grad=True)
    loss = F.cross_entropy(x, torch.tensor([1, 2]), weight)
    with pytest.raises(TensorError, match="backward through torch.nn.functional.cross_entropy"):
        loss.backward()


def test_weighted_backward_costs_like_the_unweighted(ctx):
    x = torch.randn(64, 100, requires_grad=True)
    target = torch.randint(0, 100, (64,))
    weight = torch.rand(100)

    def cost(w):
        loss = F.cross_entropy(x, target, w)
        before = ctx.now
        loss.backward()
        x.grad = None
        return ctx.now - before

    plain, weighted = cost(None), cost(weight)
    assert plain < weighted < 2 * plain
