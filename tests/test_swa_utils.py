"""``torch.optim.swa_utils`` against NumPy: ``AveragedModel``'s running mean and EMA,
buffers, ``update_bn``'s cumulative statistics, ``SWALR``'s annealing, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.errors import TensorTypeError, TensorValueError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.optim.swa_utils import (
    SWALR,
    AveragedModel,
    get_ema_avg_fn,
    get_ema_multi_avg_fn,
    update_bn,
)


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _snapshots(model, steps):
    """Move ``model``'s weights ``steps`` times, yielding the weights after each move."""
    for step in range(steps):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * (step + 1))
        yield [p.detach().numpy().copy() for p in model.parameters()]


def test_averaged_model_keeps_the_running_mean(ctx) -> None:
    model = nn.Linear(3, 2)
    swa = AveragedModel(model)
    assert swa.n_averaged.dtype is torch.int64 and swa.n_averaged.item() == 0
    seen = []
    for weights in _snapshots(model, 4):
        swa.update_parameters(model)
        seen.append(weights)
    for i, p in enumerate(swa.module.parameters()):
        mean = np.mean([w[i] for w in seen], axis=0)
        np.testing.assert_allclose(p.detach().numpy(), mean, rtol=1e-5, atol=1e-6)
    assert swa.n_averaged.item() == 4
    x = torch.ones(1, 3)
    np.testing.assert_allclose(swa(x).detach().numpy(), swa.module(x).detach().numpy())
    assert [name for name, _ in swa.named_parameters()] == ["module.weight", "module.bias"]
    assert "n_averaged" in swa.state_dict()


@pytest.mark.parametrize("multi", [True, False])
def test_ema_averages(ctx, multi) -> None:
    model = nn.Linear(2, 2)
    fn = {"multi_avg_fn": get_ema_multi_avg_fn(0.9)} if multi else {"avg_fn": get_ema_avg_fn(0.9)}
    ema = AveragedModel(model, **fn)
    expected = None
    for weights in _snapshots(model, 3):
        ema.update_parameters(model)
        expected = (
            [w.copy() for w in weights]
            if expected is None
            else [0.9 * e + 0.1 * w for e, w in zip(expected, weights, strict=True)]
        )
    for p, e in zip(ema.module.parameters(), expected, strict=True):
        np.testing.assert_allclose(p.detach().numpy(), e, rtol=1e-5, atol=1e-6)


def test_buffers_follow_or_are_averaged(ctx) -> None:
    model = nn.BatchNorm1d(2)
    follow, average = AveragedModel(model), AveragedModel(model, use_buffers=True)
    means = []
    for shift in (1.0, 3.0):
        model(torch.tensor([[shift, 0.0], [shift + 2, 2.0]]))
        means.append(model.running_mean.numpy().copy())
        follow.update_parameters(model)
        average.update_parameters(model)
    np.testing.assert_allclose(follow.module.running_mean.numpy(), means[-1], rtol=1e-6)
    np.testing.assert_allclose(average.module.running_mean.numpy(), np.mean(means, 0), rtol=1e-5)


def test_update_bn_takes_a_cumulative_average_over_the_loader(ctx) -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    model.eval()
    batches = [np.random.default_rng(i).normal(size=(4, 2)).astype(np.float32) for i in range(3)]
    loader = [(torch.tensor(b), torch.zeros(4)) for b in batches]
    update_bn(loader, model)
    with torch.no_grad():
        hidden = [model[0](torch.tensor(b)).numpy() for b in batches]
    bn = model[1]
    np.testing.assert_allclose(
        bn.running_mean.numpy(), np.mean([h.mean(0) for h in hidden], 0), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        bn.running_var.numpy(), np.mean([h.var(0, ddof=1) for h in hidden], 0), rtol=1e-5
    )
    assert bn.momentum == 0.1 and model.training is False  # restored


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_swalr_anneals_to_swa_lr(ctx, strategy) -> None:
    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
    scheduler = SWALR(optimizer, swa_lr=0.1, anneal_epochs=4, anneal_strategy=strategy)
    lrs = [optimizer.param_groups[0]["lr"]]
    for _ in range(6):
        optimizer.step()
        scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])

    def anneal(t):
        return (1 - math.cos(math.pi * t)) / 2 if strategy == "cos" else t

    # torch's closed form: lr_t = swa_lr * a(t) + lr_0 * (1 - a(t)), t = step / anneal_epochs
    expected = [0.1 * anneal(min(1, s / 4)) + 1.0 * (1 - anneal(min(1, s / 4))) for s in range(7)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-9)
    assert scheduler.get_last_lr() == pytest.approx([0.1])


def test_swa_utils_errors(ctx) -> None:
    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=1.0)
    with pytest.raises(TensorValueError, match="anneal_strategy must by one of 'cos' or 'linear'"):
        SWALR(optimizer, 0.1, anneal_strategy="step")
    with pytest.raises(TensorValueError, match="anneal_epochs must be equal or greater than 0"):
        SWALR(optimizer, 0.1, anneal_epochs=-1)
    with pytest.raises(TensorValueError, match="swa_lr must have the same length"):
        SWALR(optimizer, [0.1, 0.2])
    with pytest.raises(TensorValueError, match="Only one of avg_fn and multi_avg_fn"):
        AveragedModel(nn.Linear(1, 1), avg_fn=get_ema_avg_fn(), multi_avg_fn=get_ema_multi_avg_fn())
    with pytest.raises(TensorTypeError, match="model must be an nn.Module"):
        AveragedModel(3)
    assert torch.optim.swa_utils.AveragedModel is AveragedModel
