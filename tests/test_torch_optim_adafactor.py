"""torch.optim.Adafactor over hand-assigned gradients against a NumPy transcription (float64)
of the algorithm torch documents for it (a factored 2-D parameter and a vector), its state
as torch names it, a state_dict round trip and torch's argument errors."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import KernBenchError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim

STEPS = 6
# float64 runs against a float64 reference: only the order of sums differs
RTOL = 1e-12


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.random.default_rng(seed).uniform(-1, 1, shape)


def _run(make, p0: np.ndarray, grads: list[np.ndarray]) -> np.ndarray:
    p = nn.Parameter(torch.from_numpy(p0.copy()))
    opt = make([p])
    for g in grads:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
    return p.detach().numpy()


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x * x)))


def adafactor_reference(p, grads, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                        weight_decay=0.0, maximize=False, clipped=None):  # fmt: skip
    """torch's documented algorithm, with the means (not sums) of g*g for the factors and
    eps1 applied to the variance estimate and the update, as its note describes."""
    eps1 = np.finfo(p.dtype).eps if eps[0] is None else eps[0]
    eps2 = eps[1]
    row = np.zeros(p.shape[:-1] + (1,)) if p.ndim > 1 else None
    col = np.zeros(p.shape[:-2] + (1, p.shape[-1])) if p.ndim > 1 else None
    v = np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = -g if maximize else g
        beta2_t = 1 - t**beta2_decay
        rho_t = min(lr, 1 / np.sqrt(t))
        alpha_t = max(eps2, _rms(p)) * rho_t
        p = p - lr * weight_decay * p
        if p.ndim > 1:
            row = beta2_t * row + (1 - beta2_t) * np.mean(g * g, axis=-1, keepdims=True)
            col = beta2_t * col + (1 - beta2_t) * np.mean(g * g, axis=-2, keepdims=True)
            v_hat = row * col / max(float(np.mean(row)), eps1)
        else:
            v = beta2_t * v + (1 - beta2_t) * g * g
            v_hat = v
        u = g / np.maximum(np.sqrt(v_hat), eps1)
        if clipped is not None and _rms(u) / d > 1.0:
            clipped.append(t)
        u_hat = u / max(1.0, _rms(u) / d)
        p = p - alpha_t * u_hat
    return p


ADAFACTOR_CASES = [
    {},
    {"lr": 0.5, "weight_decay": 0.1},  # rho_t = 1/sqrt(t) below lr; decoupled decay
    {"beta2_decay": -0.5, "eps": (1e-3, 1e-2), "d": 2.0, "maximize": True},
    {"lr": 0.05, "weight_decay": 0.2, "maximize": True},
]


@pytest.mark.parametrize("shape", [(5,), (3, 4)], ids=["vector", "factored"])
@pytest.mark.parametrize("kwargs", ADAFACTOR_CASES)
def test_adafactor_matches_torchs_documented_algorithm(ctx, shape, kwargs):
    p0 = _values(shape, 0)
    grads = [_values(shape, s, scale=0.1 * s) for s in range(1, STEPS + 1)]
    got = _run(lambda ps: optim.Adafactor(ps, **kwargs), p0, grads)
    np.testing.assert_allclose(got, adafactor_reference(p0, grads, **kwargs), rtol=RTOL)


@pytest.mark.parametrize("shape", [(5,), (3, 4)], ids=["vector", "factored"])
def test_adafactor_clips_large_updates(ctx, shape):
    """A gradient far larger than the ones before makes RMS(update) > d: the clipping
    branch runs (the cases above may not reach it)."""
    p0 = _values(shape, 0)
    grads = [np.full(shape, 1e-3), np.full(shape, 1e-3), _values(shape, 1, scale=10.0)]
    clipped: list[int] = []
    expected = adafactor_reference(p0, grads, clipped=clipped)
    assert clipped == [3]
    got = _run(lambda ps: optim.Adafactor(ps), p0, grads)
    np.testing.assert_allclose(got, expected, rtol=RTOL)


def test_adafactor_state_and_device_time(ctx):
    w, b, unused = (nn.Parameter(torch.ones(2, 3, 4)), nn.Parameter(torch.ones(4)),
                    nn.Parameter(torch.ones(4)))  # fmt: skip
    opt = optim.Adafactor([w, b, unused])
    w.grad, b.grad = torch.full((2, 3, 4), 0.5), torch.full((4,), 0.5)
    before = ctx.now
    opt.step()
    assert ctx.now > before
    assert set(opt.state[w]) == {"step", "row_var", "col_var"} and opt.state[w]["step"] == 1.0
    assert tuple(opt.state[w]["row_var"].shape) == (2, 3, 1)
    assert tuple(opt.state[w]["col_var"].shape) == (2, 1, 4)
    assert set(opt.state[b]) == {"step", "variance"}
    assert unused not in opt.state and unused.tolist() == [1.0] * 4
    # a 3-D parameter factors over its last two dims, as the reference does
    p0, grads = np.ones((2, 3, 4)), [np.full((2, 3, 4), 0.5)]
    np.testing.assert_allclose(w.detach().numpy(), adafactor_reference(p0, grads), rtol=1e-6)


def test_adafactor_state_dict_round_trip(ctx):
    p0 = _values((3, 4), 0)
    grads = [_values((3, 4), s) for s in range(1, STEPS + 1)]
    kwargs = {"lr": 0.1, "weight_decay": 0.1}
    straight = _run(lambda ps: optim.Adafactor(ps, **kwargs), p0, grads)
    p = nn.Parameter(torch.from_numpy(p0.copy()))
    first = optim.Adafactor([p], **kwargs)
    for g in grads[:3]:
        p.grad = torch.from_numpy(g.copy())
        first.step()
    saved = first.state_dict()
    assert saved["state"][0]["step"] == 3.0 and set(saved["state"][0]) == {
        "step", "row_var", "col_var"}  # fmt: skip
    second = optim.Adafactor([p])
    second.load_state_dict(saved)
    assert second.param_groups[0]["weight_decay"] == 0.1
    for g in grads[3:]:
        p.grad = torch.from_numpy(g.copy())
        second.step()
    np.testing.assert_allclose(p.detach().numpy(), straight, rtol=1e-12)


def test_defaults_are_torchs(ctx):
    p = nn.Parameter(torch.ones(1))
    assert optim.Adafactor([p]).defaults == {
        "lr": 1e-2, "beta2_decay": -0.8, "eps": (None, 1e-3), "d": 1.0, "weight_decay": 0.0,
        "foreach": None, "maximize": False,
    }  # fmt: skip
    with pytest.raises(TypeError):
        optim.Adafactor([p], 1e-2, -0.8, (None, 1e-3), 1.0, 0.0, None)  # foreach keyword-only


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: optim.Adafactor(p, lr=-1), "Learning rate should be >= 0 but is: -1"),
        (lambda p: optim.Adafactor(p, beta2_decay=0.5), "beta2_decay should be <= 0 but is: 0.5"),
        (lambda p: optim.Adafactor(p, eps=(-1, 1e-3)), "epsilon1 should be >= 0 but is: -1"),
        (lambda p: optim.Adafactor(p, eps=(None, -1)), "epsilon2 should be >= 0 but is: -1"),
        (lambda p: optim.Adafactor(p, d=0.5), "Clipping threshold d should be >= 1 but is: 0.5"),
        (lambda p: optim.Adafactor(p, weight_decay=-1), "weight_decay should be >= 0 but is: -1"),
    ],
)
def test_bad_hyper_parameters_raise_torchs_errors(ctx, make, message):
    with pytest.raises(ValueError, match=f"^{message}$") as caught:
        make([nn.Parameter(torch.ones(1))])
    assert isinstance(caught.value, KernBenchError)


def test_imports(ctx):
    namespace: dict = {}
    exec("from kernbench.torch.optim import Adafactor", namespace)
    assert namespace["Adafactor"] is optim.Adafactor and "Adafactor" in optim.__all__


def _adafactor_step_time(timing_only: bool) -> int:
    context = RuntimeContext("tiny", timing_only=timing_only)
    with use_context(context):
        w, b = nn.Parameter(torch.ones(8, 16)), nn.Parameter(torch.ones(16))
        opt = optim.Adafactor([w, b], weight_decay=0.1)
        w.grad, b.grad = torch.ones(8, 16), torch.ones(16)
        before = context.now
        opt.step()
        return context.now - before


def test_adafactor_timing_only_step_costs_a_functional_steps_time():
    """The two RMS reads return no values in timing-only mode; the step still runs every op
    and read, so it takes the time a functional step takes."""
    elapsed = _adafactor_step_time(timing_only=True)
    assert elapsed > 0 and elapsed == _adafactor_step_time(timing_only=False)
