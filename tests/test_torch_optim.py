"""torch.optim over hand-assigned gradients, against a NumPy reimplementation of torch's
single-tensor formulas; the lr schedulers against torch's closed forms; and one 2-rank
data-parallel training loop (an nn.Module MLP, a hand-written backward, an all_reduce of
the gradients, AdamW) checked step by step against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import TensorTypeError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim
from kernbench.torch.optim import lr_scheduler

STEPS = 4


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _run(make, p0: np.ndarray, grads: list[np.ndarray]) -> np.ndarray:
    p = nn.Parameter(torch.from_numpy(p0.copy()))
    opt = make([p])
    for g in grads:
        p.grad = torch.from_numpy(g)
        opt.step()
    return p.detach().numpy()


def sgd_reference(p, grads, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                  maximize=False):  # fmt: skip
    p, buf = p.astype(np.float64), None
    for g in grads:
        g = -g if maximize else g.astype(np.float64)
        if weight_decay:
            g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def adam_reference(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
                   maximize=False, decoupled=False):  # fmt: skip
    b1, b2 = betas
    p = p.astype(np.float64)
    m = v = vmax = np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = -g if maximize else g.astype(np.float64)
        if weight_decay:
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        m = m + (g - m) * (1 - b1)
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        second = vmax if amsgrad else v
        denom = np.sqrt(second) / math.sqrt(1 - b2**t) + eps
        p = p - lr / (1 - b1**t) * m / denom
    return p


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": 0.1},
        {"lr": 0.05, "momentum": 0.9},
        {"lr": 0.05, "momentum": 0.9, "dampening": 0.5, "weight_decay": 0.1},
        {"lr": 0.05, "momentum": 0.8, "nesterov": True},
        {"lr": 0.1, "maximize": True, "weight_decay": 0.01},
    ],
)
def test_sgd_matches_torchs_formulas(ctx, kwargs):
    p0 = _values((3, 4), 0)
    grads = [_values((3, 4), s) for s in range(1, STEPS + 1)]
    got = _run(lambda ps: optim.SGD(ps, **kwargs), p0, grads)
    np.testing.assert_allclose(got, sgd_reference(p0, grads, **kwargs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": 0.01},
        {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1},
        {"lr": 0.01, "amsgrad": True, "weight_decay": 0.05},
        {"lr": 0.01, "maximize": True},
    ],
)
def test_adam_and_adamw_match_torchs_formulas(ctx, cls, kwargs):
    p0 = _values((5, 3), 0)
    grads = [_values((5, 3), s) for s in range(1, STEPS + 1)]
    got = _run(lambda ps: getattr(optim, cls)(ps, **kwargs), p0, grads)
    full = {"weight_decay": 1e-2 if cls == "AdamW" else 0, **kwargs}
    expected = adam_reference(p0, grads, decoupled=cls == "AdamW", **full)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_step_runs_on_the_device_and_skips_params_without_grad(ctx):
    a, b = nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(4))
    opt = optim.AdamW([a, b], lr=0.1)
    a.grad = torch.ones(4)
    before = ctx.now
    opt.step()
    assert ctx.now > before  # the update costs device time
    assert b.tolist() == [1.0] * 4 and b not in opt.state
    assert opt.state[a]["step"] == 1.0 and set(opt.state[a]) == {"step", "exp_avg", "exp_avg_sq"}
    opt.zero_grad(set_to_none=False)
    assert a.grad.tolist() == [0.0] * 4
    opt.zero_grad()
    assert a.grad is None


def test_param_groups_defaults_and_repr(ctx):
    w, b = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))
    opt = optim.SGD([{"params": [w]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["params"] == [b]
    w.grad, b.grad = torch.ones(2), torch.ones(2)
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.detach().numpy(), [0.5, 0.5])
    assert repr(opt).startswith("SGD (\nParameter Group 0\n    dampening: 0\n    differentiable")
    assert optim.AdamW([w]).defaults["weight_decay"] == 1e-2


def test_misuse_raises_torchs_errors(ctx):
    p = nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.AdamW([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero"):
        optim.SGD([p], nesterov=True)
    with pytest.raises(TensorTypeError, match="should be an iterable of Tensors or dicts"):
        optim.SGD(p)
    opt = optim.SGD([p])
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter"):
        opt.add_param_group({"params": [p]})
    with pytest.raises(TensorTypeError, match="ordering of tensors in sets will change"):
        opt.add_param_group({"params": {nn.Parameter(torch.ones(1))}})


def test_state_dict_round_trip_continues_the_same_trajectory(ctx):
    p0 = _values((4,), 0)
    grads = [_values((4,), s) for s in range(1, 5)]
    straight = _run(lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True), p0, grads)
    p = nn.Parameter(torch.from_numpy(p0.copy()))
    first = optim.Adam([p], lr=0.05, amsgrad=True)
    for g in grads[:2]:
        p.grad = torch.from_numpy(g)
        first.step()
    saved = first.state_dict()
    assert saved["param_groups"][0]["params"] == [0] and saved["state"][0]["step"] == 2.0
    second = optim.Adam([p], lr=0.05, amsgrad=True)
    second.load_state_dict(saved)
    for g in grads[2:]:
        p.grad = torch.from_numpy(g)
        second.step()
    np.testing.assert_allclose(p.detach().numpy(), straight, rtol=1e-6)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        second.load_state_dict({"state": {}, "param_groups": []})


# ------------------------------------------------------------------------------ lr schedulers


def _lrs(make_scheduler, steps: int, lr: float = 0.1, opt_cls=optim.SGD) -> list[float]:
    opt = opt_cls([nn.Parameter(torch.ones(1))], lr=lr)
    scheduler = make_scheduler(opt)
    out = [scheduler.get_last_lr()[0]]
    for _ in range(steps):
        opt.step()
        scheduler.step()
        out.append(scheduler.get_last_lr()[0])
    assert out[-1] == opt.param_groups[0]["lr"]
    return out


def test_step_lambda_linear_schedulers(ctx):
    got = _lrs(lambda o: lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 7)
    np.testing.assert_allclose(got, [0.1 * 0.5 ** (t // 3) for t in range(8)])
    got = _lrs(lambda o: lr_scheduler.LambdaLR(o, lambda e: 1 / (e + 1)), 5)
    np.testing.assert_allclose(got, [0.1 / (t + 1) for t in range(6)])
    got = _lrs(lambda o: lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=4), 6)
    np.testing.assert_allclose(got, [0.1 * (0.25 + 0.75 * min(t, 4) / 4) for t in range(7)])


def test_cosine_annealing_follows_the_closed_form(ctx):
    got = _lrs(lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.01), 10)
    expected = [0.01 + 0.09 * (1 + math.cos(math.pi * t / 5)) / 2 for t in range(11)]
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_one_cycle_lr_and_momentum(ctx):
    opt = optim.Adam([nn.Parameter(torch.ones(1))], lr=0.1)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    lrs, betas = [sched.get_last_lr()[0]], [opt.param_groups[0]["betas"][0]]
    for _ in range(9):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
        betas.append(opt.param_groups[0]["betas"][0])

    def anneal(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)

    initial, peak, low, up = 1.0 / 25, 1.0, 1.0 / 25 / 1e4, 0.3 * 10 - 1
    expected_lr, expected_beta = [], []
    for t in range(10):
        if t <= up:
            expected_lr.append(anneal(initial, peak, t / up))
            expected_beta.append(anneal(0.95, 0.85, t / up))
        else:
            expected_lr.append(anneal(peak, low, (t - up) / (9 - up)))
            expected_beta.append(anneal(0.85, 0.95, (t - up) / (9 - up)))
    np.testing.assert_allclose(lrs, expected_lr, rtol=1e-9)
    np.testing.assert_allclose(betas, expected_beta, rtol=1e-9)
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        sched.step()
        sched.step()


def test_imports(ctx):
    namespace: dict = {}
    exec("import kernbench.torch.optim", namespace)
    exec("from kernbench.torch.optim import AdamW, SGD", namespace)
    exec("from kernbench.torch.optim.lr_scheduler import StepLR", namespace)
    assert namespace["AdamW"] is optim.AdamW and namespace["StepLR"] is lr_scheduler.StepLR
    assert torch.optim is optim


# ------------------------------------------------------- end to end: data parallel, 2 ranks

IN, HIDDEN, OUT, BATCH, LR, DECAY = 4, 8, 3, 5, 0.05, 0.1


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(HIDDEN, OUT)

    def forward(self, x):
        self.h = self.fc1(x)  # kept for the hand-written backward
        self.a = self.act(self.h)
        return self.fc2(self.a)


def _batch(rank: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    return _values((BATCH, IN), 100 * rank + step), _values((BATCH, OUT), 100 * rank + step + 50)


def _train_rank(steps: int) -> dict:
    dist.init_process_group()
    torch.manual_seed(0)
    model = MLP()
    initial = {n: p.detach().numpy() for n, p in model.named_parameters()}
    opt = optim.AdamW(model.parameters(), lr=LR, weight_decay=DECAY)
    world = dist.get_world_size()
    for step in range(steps):
        xs, ys = _batch(dist.get_rank(), step)
        x, y = torch.from_numpy(xs), torch.from_numpy(ys)
        with torch.no_grad():  # the backward is written by hand: nothing to record
            out = model(x)
            d_out = (out - y) * (2.0 / out.numel())  # d/d_out of MSE (mean)
            model.fc2.weight.grad = d_out.T @ model.a
            model.fc2.bias.grad = d_out.sum(0)
            d_h = (d_out @ model.fc2.weight) * (model.h > 0).float()
            model.fc1.weight.grad = d_h.T @ x
            model.fc1.bias.grad = d_h.sum(0)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()
    return {
        "initial": initial,
        "final": {n: p.detach().numpy() for n, p in model.named_parameters()},
    }


def _numpy_training(params: dict, steps: int, world: int) -> dict:
    p = {n: v.astype(np.float64) for n, v in params.items()}
    m = {n: np.zeros_like(v) for n, v in p.items()}
    v2 = {n: np.zeros_like(v) for n, v in p.items()}
    for t in range(1, steps + 1):
        total = {n: np.zeros_like(v) for n, v in p.items()}
        for rank in range(world):
            x, y = (a.astype(np.float64) for a in _batch(rank, t - 1))
            h = x @ p["fc1.weight"].T + p["fc1.bias"]
            a = np.maximum(h, 0)
            out = a @ p["fc2.weight"].T + p["fc2.bias"]
            d_out = (out - y) * 2 / out.size
            d_h = (d_out @ p["fc2.weight"]) * (h > 0)
            grads = {"fc2.weight": d_out.T @ a, "fc2.bias": d_out.sum(0),
                     "fc1.weight": d_h.T @ x, "fc1.bias": d_h.sum(0)}  # fmt: skip
            for n in total:
                total[n] += grads[n] / world
        for n, g in total.items():
            p[n] = p[n] * (1 - LR * DECAY)
            m[n] = m[n] + (g - m[n]) * 0.1
            v2[n] = 0.999 * v2[n] + 0.001 * g * g
            denom = np.sqrt(v2[n]) / math.sqrt(1 - 0.999**t) + 1e-8
            p[n] = p[n] - LR / (1 - 0.9**t) * m[n] / denom
    return p


def test_mlp_adamw_data_parallel_two_ranks_matches_numpy():
    steps, world = 3, 2
    result = kernbench.simulate(_train_rank, topology="multi_sip", world_size=world, args=(steps,))
    first = result.returns[0]
    for rank in range(world):  # the same seed gives every rank the same model and update
        for name, value in result.returns[rank]["final"].items():
            np.testing.assert_array_equal(value, first["final"][name])
        for name, value in result.returns[rank]["initial"].items():
            np.testing.assert_array_equal(value, first["initial"][name])
    expected = _numpy_training(first["initial"], steps, world)
    for name, value in first["final"].items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-4, atol=1e-5, err_msg=name)
        assert not np.allclose(value, first["initial"][name])
