"""``torch.optim.Rprop`` and ``torch.optim.ASGD`` against NumPy written from torch's
single-tensor formulas, step by step (parameters and state), and their argument checks."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import OptimizerValueError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


GRADS = [
    np.array([0.5, -1.0, 0.0, 2.0], dtype=np.float32),
    np.array([0.25, 1.0, -0.5, 2.0], dtype=np.float32),
    np.array([-0.5, 0.5, -0.5, 0.0], dtype=np.float32),
    np.array([-1.0, 0.5, 1.0, -3.0], dtype=np.float32),
]
START = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)


def _stepped(opt_factory, maximize=False):
    p = nn.Parameter(torch.tensor(START))
    opt = opt_factory([p])
    seen = []
    for g in GRADS:
        p.grad = torch.tensor(g)
        opt.step()
        seen.append(p.detach().numpy().copy())
    return p, opt, seen


def _rprop_reference(lr, etas, sizes, maximize=False):
    p, prev = START.astype(np.float64), np.zeros(4)
    step = np.full(4, lr)
    out = []
    for g in GRADS:
        g = -g.astype(np.float64) if maximize else g.astype(np.float64)
        sign = np.sign(g * prev)
        factor = np.where(sign > 0, etas[1], np.where(sign < 0, etas[0], 1.0))
        step = np.clip(step * factor, *sizes)
        g = np.where(sign < 0, 0.0, g)
        p = p - np.sign(g) * step
        prev = g
        out.append(p.copy())
    return out, step, prev


@pytest.mark.parametrize("maximize", [False, True])
def test_rprop_follows_torch_s_formula(ctx, maximize):
    lr, etas, sizes = 0.1, (0.5, 1.2), (1e-3, 0.15)
    p, opt, seen = _stepped(
        lambda ps: optim.Rprop(ps, lr=lr, etas=etas, step_sizes=sizes, maximize=maximize)
    )
    expected, step_size, prev = _rprop_reference(lr, etas, sizes, maximize)
    for got, want in zip(seen, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    state = opt.state[p]
    assert state["step"] == 4.0 and set(state) == {"step", "prev", "step_size"}
    np.testing.assert_allclose(state["step_size"].numpy(), step_size, rtol=1e-6)
    np.testing.assert_allclose(state["prev"].numpy(), prev, rtol=1e-6)


def _asgd_reference(lr, lambd, alpha, t0, decay, maximize=False):
    p, ax = START.astype(np.float64), np.zeros(4)
    eta, mu, out, axes = lr, 1.0, [], []
    for step, g in enumerate(GRADS, start=1):
        g = -g.astype(np.float64) if maximize else g.astype(np.float64)  # torch: first
        if decay:
            g = g + decay * p
        p = p * (1 - lambd * eta) - eta * g
        ax = ax + (p - ax) * mu if mu != 1 else p.copy()
        eta = lr / ((1 + lambd * lr * step) ** alpha)
        mu = 1 / max(1, step - t0)
        out.append(p.copy())
        axes.append(ax.copy())
    return out, axes, eta, mu


@pytest.mark.parametrize(("decay", "maximize", "t0"), [(0, False, 1e6), (0.1, True, 2)])
def test_asgd_follows_torch_s_formula(ctx, decay, maximize, t0):
    lr, lambd, alpha = 0.2, 0.05, 0.75
    p, opt, seen = _stepped(
        lambda ps: optim.ASGD(
            ps, lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=decay, maximize=maximize
        )
    )
    expected, axes, eta, mu = _asgd_reference(lr, lambd, alpha, t0, decay, maximize)
    for got, want in zip(seen, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    state = opt.state[p]
    assert set(state) == {"step", "eta", "mu", "ax"} and state["step"] == 4.0
    assert state["eta"] == pytest.approx(eta) and state["mu"] == pytest.approx(mu)
    np.testing.assert_allclose(state["ax"].numpy(), axes[-1], rtol=1e-5)  # averaged after t0


def test_they_train_a_model_and_check_their_arguments(ctx):
    torch.manual_seed(0)
    x = torch.randn(16, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    for make in (lambda ps: optim.Rprop(ps, lr=0.05), lambda ps: optim.ASGD(ps, lr=0.05)):
        model = nn.Linear(3, 1)
        opt = make(model.parameters())
        losses = []
        for _ in range(20):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < losses[0] / 2
    with pytest.raises(OptimizerValueError, match="Invalid eta values: 1.5, 1.2"):
        optim.Rprop(nn.Linear(2, 1).parameters(), etas=(1.5, 1.2))
    with pytest.raises(OptimizerValueError, match="Invalid learning rate: -1"):
        optim.ASGD(nn.Linear(2, 1).parameters(), lr=-1)
    with pytest.raises(OptimizerValueError, match="Invalid weight_decay value: -0.1"):
        optim.ASGD(nn.Linear(2, 1).parameters(), weight_decay=-0.1)
