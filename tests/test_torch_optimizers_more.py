"""torch.optim.RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam over hand-assigned
gradients, against NumPy transcriptions (float64) of the algorithms torch documents for
them; their state as torch names it, a state_dict round trip, and torch's argument errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import KernBenchError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim

STEPS = 8  # RAdam's rectified step starts once rho_t > 5 (step 6 with beta2 = 0.999)


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape)


def _run(make, p0: np.ndarray, grads: list[np.ndarray]) -> np.ndarray:
    p = nn.Parameter(torch.from_numpy(p0.copy()))
    opt = make([p])
    for g in grads:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
    return p.detach().numpy()


def _decayed(p, g, weight_decay, maximize, decoupled=False, lr=0.0):
    """torch's preamble: g <- -g when maximizing; then L2 decay into g, or AdamW's decay
    of the parameter."""
    g = -g if maximize else g
    if weight_decay:
        if decoupled:
            p = p - lr * weight_decay * p
        else:
            g = g + weight_decay * p
    return p, g


def rmsprop_reference(p, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                      centered=False, maximize=False):  # fmt: skip
    v = np.zeros_like(p)
    g_ave = np.zeros_like(p)
    b = np.zeros_like(p)
    for g in grads:
        p, g = _decayed(p, g, weight_decay, maximize)
        v = alpha * v + (1 - alpha) * g**2
        v_tilde = v
        if centered:
            g_ave = g_ave * alpha + (1 - alpha) * g
            v_tilde = v_tilde - g_ave**2
        if momentum > 0:
            b = momentum * b + g / (np.sqrt(v_tilde) + eps)
            p = p - lr * b
        else:
            p = p - lr * g / (np.sqrt(v_tilde) + eps)
    return p


def adagrad_reference(p, grads, lr=1e-2, lr_decay=0, weight_decay=0,
                      initial_accumulator_value=0, eps=1e-10, maximize=False):  # fmt: skip
    state_sum = np.full_like(p, initial_accumulator_value)
    for t, g in enumerate(grads, 1):
        p, g = _decayed(p, g, weight_decay, maximize)
        clr = lr / (1 + (t - 1) * lr_decay)
        state_sum = state_sum + g**2
        p = p - clr * g / (np.sqrt(state_sum) + eps)
    return p


def adadelta_reference(p, grads, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    v = np.zeros_like(p)
    u = np.zeros_like(p)
    for g in grads:
        p, g = _decayed(p, g, weight_decay, maximize)
        v = v * rho + g**2 * (1 - rho)
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = u * rho + delta**2 * (1 - rho)
        p = p - lr * delta
    return p


def adamax_reference(p, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                     maximize=False):  # fmt: skip
    b1, b2 = betas
    m = np.zeros_like(p)
    u = np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        p, g = _decayed(p, g, weight_decay, maximize)
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g) + eps)
        p = p - lr * m / ((1 - b1**t) * u)
    return p


def nadam_reference(p, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                    momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):  # fmt: skip
    b1, b2 = betas
    m = np.zeros_like(p)
    v = np.zeros_like(p)

    def mu(t):
        return b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))

    for t, g in enumerate(grads, 1):
        p, g = _decayed(p, g, weight_decay, maximize, decoupled_weight_decay, lr)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        prod_t = math.prod(mu(i) for i in range(1, t + 1))
        m_hat = mu(t + 1) * m / (1 - prod_t * mu(t + 1)) + (1 - mu(t)) * g / (1 - prod_t)
        v_hat = v / (1 - b2**t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p


def radam_reference(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                    decoupled_weight_decay=False, maximize=False, rectified=None):  # fmt: skip
    b1, b2 = betas
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, 1):
        p, g = _decayed(p, g, weight_decay, maximize, decoupled_weight_decay, lr)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        m_hat = m / (1 - b1**t)
        rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho_t > 5:
            if rectified is not None:
                rectified.append(t)
            l_t = math.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
            r_t = math.sqrt(
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            )
            p = p - lr * m_hat * r_t * l_t
        else:
            p = p - lr * m_hat
    return p


CASES = [
    ("RMSprop", rmsprop_reference, {}),
    ("RMSprop", rmsprop_reference, {"lr": 0.01, "alpha": 0.9, "weight_decay": 0.1}),
    ("RMSprop", rmsprop_reference, {"lr": 0.01, "momentum": 0.9, "centered": True}),
    ("RMSprop", rmsprop_reference, {"momentum": 0.5, "eps": 1e-3, "maximize": True}),
    ("Adagrad", adagrad_reference, {}),
    ("Adagrad", adagrad_reference, {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1}),
    ("Adagrad", adagrad_reference, {"initial_accumulator_value": 0.5, "eps": 1e-3}),
    ("Adagrad", adagrad_reference, {"lr": 0.1, "maximize": True}),
    ("Adadelta", adadelta_reference, {}),
    ("Adadelta", adadelta_reference, {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1}),
    ("Adadelta", adadelta_reference, {"maximize": True}),
    ("Adamax", adamax_reference, {}),
    ("Adamax", adamax_reference, {"lr": 0.01, "betas": (0.8, 0.95), "weight_decay": 0.1}),
    ("Adamax", adamax_reference, {"eps": 0.5, "maximize": True}),
    ("NAdam", nadam_reference, {}),
    ("NAdam", nadam_reference, {"lr": 0.01, "momentum_decay": 0.1, "weight_decay": 0.1}),
    ("NAdam", nadam_reference, {"weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", nadam_reference, {"betas": (0.8, 0.9), "maximize": True}),
    ("RAdam", radam_reference, {}),
    ("RAdam", radam_reference, {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.1}),
    ("RAdam", radam_reference, {"weight_decay": 0.2, "decoupled_weight_decay": True}),
    ("RAdam", radam_reference, {"eps": 1e-3, "maximize": True}),
]


@pytest.mark.parametrize(("name", "reference", "kwargs"), CASES)
def test_updates_match_torchs_documented_algorithms(ctx, name, reference, kwargs):
    p0 = _values((3, 4), 0)
    grads = [_values((3, 4), s) for s in range(1, STEPS + 1)]
    got = _run(lambda ps: getattr(optim, name)(ps, **kwargs), p0, grads)
    np.testing.assert_allclose(got, reference(p0, grads, **kwargs), rtol=1e-10, atol=1e-12)


def test_radam_takes_both_branches():
    rectified: list[int] = []
    radam_reference(np.zeros(1), [np.ones(1)] * STEPS, rectified=rectified)
    assert rectified == [6, 7, 8]  # so the cases above cover the plain and rectified steps


@pytest.mark.parametrize(
    ("name", "kwargs", "keys"),
    [
        ("RMSprop", {}, {"step", "square_avg"}),
        (
            "RMSprop",
            {"momentum": 0.9, "centered": True},
            {"step", "square_avg", "momentum_buffer", "grad_avg"},
        ),
        ("Adagrad", {}, {"step", "sum"}),
        ("Adadelta", {}, {"step", "square_avg", "acc_delta"}),
        ("Adamax", {}, {"step", "exp_avg", "exp_inf"}),
        ("NAdam", {}, {"step", "mu_product", "exp_avg", "exp_avg_sq"}),
        ("RAdam", {}, {"step", "exp_avg", "exp_avg_sq"}),
    ],
)
def test_state_names_device_time_and_params_without_grad(ctx, name, kwargs, keys):
    a, b = nn.Parameter(torch.ones(4)), nn.Parameter(torch.ones(4))
    opt = getattr(optim, name)([a, b], **kwargs)
    a.grad = torch.full((4,), 0.5)
    before = ctx.now
    opt.step()
    assert ctx.now > before  # the update is device ops, and they cost time
    assert set(opt.state[a]) == keys and opt.state[a]["step"] == 1.0
    assert b.tolist() == [1.0] * 4
    if name == "Adagrad":  # torch fills Adagrad's state for every parameter up front
        assert opt.state[b]["step"] == 0.0 and opt.state[b]["sum"].tolist() == [0.0] * 4
    else:
        assert b not in opt.state


def test_adagrad_initial_accumulator_value_in_state(ctx):
    p = nn.Parameter(torch.ones(3))
    opt = optim.Adagrad([p], initial_accumulator_value=0.25)
    assert opt.state[p]["sum"].tolist() == [0.25] * 3


def test_nadam_mu_product_is_the_running_product(ctx):
    p = nn.Parameter(torch.ones(2))
    opt = optim.NAdam([p], betas=(0.9, 0.999), momentum_decay=4e-3)
    for _ in range(3):
        p.grad = torch.ones(2)
        opt.step()
    expected = math.prod(0.9 * (1 - 0.5 * 0.96 ** (t * 4e-3)) for t in (1, 2, 3))
    assert opt.state[p]["mu_product"] == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True}),
        ("Adagrad", {"lr": 0.1, "lr_decay": 0.1}),
        ("Adadelta", {"rho": 0.8}),
        ("Adamax", {"lr": 0.01}),
        ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
        ("RAdam", {"lr": 0.01}),
    ],
)
def test_state_dict_round_trip_continues_the_same_trajectory(ctx, name, kwargs):
    p0 = _values((5,), 0)
    grads = [_values((5,), s) for s in range(1, STEPS + 1)]
    straight = _run(lambda ps: getattr(optim, name)(ps, **kwargs), p0, grads)
    p = nn.Parameter(torch.from_numpy(p0.copy()))
    first = getattr(optim, name)([p], **kwargs)
    for g in grads[:5]:
        p.grad = torch.from_numpy(g.copy())
        first.step()
    saved = first.state_dict()
    assert saved["state"][0]["step"] == 5.0 and saved["param_groups"][0]["params"] == [0]
    second = getattr(optim, name)([p], **kwargs)
    second.load_state_dict(saved)
    assert second.state[p]["step"] == 5.0
    for g in grads[5:]:
        p.grad = torch.from_numpy(g.copy())
        second.step()
    np.testing.assert_allclose(p.detach().numpy(), straight, rtol=1e-12)


def test_defaults_are_torchs(ctx):
    p = nn.Parameter(torch.ones(1))
    defaults = {
        "RMSprop": {"lr": 1e-2, "alpha": 0.99, "eps": 1e-8, "momentum": 0, "centered": False},
        "Adagrad": {"lr": 1e-2, "lr_decay": 0, "eps": 1e-10, "initial_accumulator_value": 0},
        "Adadelta": {"lr": 1.0, "rho": 0.9, "eps": 1e-6, "weight_decay": 0},
        "Adamax": {"lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8},
        "NAdam": {"lr": 2e-3, "momentum_decay": 4e-3, "decoupled_weight_decay": False},
        "RAdam": {"lr": 1e-3, "betas": (0.9, 0.999), "decoupled_weight_decay": False},
    }
    for name, expected in defaults.items():
        opt = getattr(optim, name)([p])
        assert {k: opt.defaults[k] for k in expected} == expected, name
        assert opt.defaults["maximize"] is False, name


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: optim.RMSprop(p, lr=-0.1), "Invalid learning rate: -0.1"),
        (lambda p: optim.RMSprop(p, alpha=-1), "Invalid alpha value: -1"),
        (lambda p: optim.RMSprop(p, momentum=-0.5), "Invalid momentum value: -0.5"),
        (lambda p: optim.Adagrad(p, lr_decay=-1), "Invalid lr_decay value: -1"),
        (
            lambda p: optim.Adagrad(p, initial_accumulator_value=-1),
            "Invalid initial_accumulator_value value: -1",
        ),
        (lambda p: optim.Adagrad(p, eps=-1), "Invalid epsilon value: -1"),
        (lambda p: optim.Adadelta(p, rho=1.5), "Invalid rho value: 1.5"),
        (lambda p: optim.Adadelta(p, weight_decay=-1), "Invalid weight_decay value: -1"),
        (lambda p: optim.Adamax(p, betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
        (lambda p: optim.NAdam(p, momentum_decay=-1), "Invalid momentum_decay value: -1"),
        (lambda p: optim.NAdam(p, betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
        (lambda p: optim.RAdam(p, eps=-1e-8), "Invalid epsilon value: -1e-08"),
    ],
)
def test_bad_hyper_parameters_raise_torchs_errors(ctx, make, message):
    with pytest.raises(ValueError, match=f"^{message}$") as caught:
        make([nn.Parameter(torch.ones(1))])
    assert isinstance(caught.value, KernBenchError)


def test_imports(ctx):
    namespace: dict = {}
    exec(
        "from kernbench.torch.optim import RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam",
        namespace,
    )
    assert namespace["NAdam"] is optim.NAdam and torch.optim.RAdam is optim.RAdam
    for name in ("RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"):
        assert name in optim.__all__


def test_the_earlier_optimizers_and_schedulers_raise_kernbench_errors_too(ctx):
    p = nn.Parameter(torch.ones(1))
    refused = [
        lambda: optim.SGD([], lr=0.1),
        lambda: optim.Adam([p], lr=-1),
        lambda: optim.SGD([p], nesterov=True),
        lambda: optim.lr_scheduler.LinearLR(optim.SGD([p]), start_factor=0),
        lambda: optim.lr_scheduler.OneCycleLR(optim.SGD([p]), max_lr=1.0),
    ]
    for make in refused:
        with pytest.raises(ValueError) as caught:
            make()
        assert isinstance(caught.value, KernBenchError)
