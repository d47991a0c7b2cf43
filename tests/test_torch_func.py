"""``torch.func``: ``functional_call`` and ``stack_module_state`` (ensembles), ``grad``,
``grad_and_value``, ``vjp`` and ``jacrev`` against closed forms, ``vmap`` (dims, nested
inputs and outputs, randomness) and per-sample gradients against NumPy, and the refusals
(second order, random draws under ``randomness='error'``) by type and message."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import KernBenchError, TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.func import (
    functional_call,
    grad,
    grad_and_value,
    jacrev,
    stack_module_state,
    vjp,
    vmap,
)

nn = torch.nn


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def test_functional_call_runs_the_module_with_other_tensors_and_restores_its_own(ctx):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1)).double()
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    w0, b0 = _values((2, 3), 1), _values(2, 2)
    new_w = torch.from_numpy(w0).requires_grad_()
    x = _values((4, 3), 3)
    out = functional_call(
        model, {"0.weight": new_w, "0.bias": torch.from_numpy(b0)}, (torch.from_numpy(x),)
    )
    w2, b2 = before["2.weight"], before["2.bias"]
    expected = np.maximum(x @ w0.T + b0, 0) @ w2.T + b2
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12)
    assert {k: v.numpy().tolist() for k, v in model.state_dict().items()} == {
        k: v.tolist() for k, v in before.items()
    }
    assert list(dict(model.named_parameters())) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    out.sum().backward()
    hidden = x @ w0.T + b0
    upstream = (hidden > 0) * w2  # d out / d hidden, per row
    np.testing.assert_allclose(new_w.grad.numpy(), upstream.T @ x, rtol=1e-12)
    assert model[0].weight.grad is None


def test_functional_call_checks_its_dicts(ctx):
    model = nn.Linear(2, 2)
    w = torch.zeros(2, 2)
    with pytest.raises(ValueError, match=r"multiple values for keys \['weight'\]"):
        functional_call(model, ({"weight": w}, {"weight": w}), (torch.ones(1, 2),))
    with pytest.raises(
        KernBenchError, match=r"missing key\(s\) \['bias'\], unexpected key\(s\) \[\]"
    ):
        functional_call(model, {"weight": w}, (torch.ones(1, 2),), strict=True)
    with pytest.raises(
        KernBenchError, match="'scale' is neither a parameter nor a buffer of Linear"
    ):
        functional_call(model, {"scale": w}, torch.ones(1, 2))
    out = functional_call(model, {"weight": w, "bias": torch.ones(2)}, torch.ones(1, 2))
    assert out.tolist() == [[1.0, 1.0]]


def test_tied_weights_follow_the_one_given(ctx):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False)
            self.b = nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    model = Tied()
    eye2 = torch.eye(2) * 2
    assert functional_call(model, {"a.weight": eye2}, torch.ones(1, 2)).tolist() == [[4.0, 4.0]]
    untied = functional_call(model, {"a.weight": eye2}, torch.ones(1, 2), tie_weights=False)
    w = model.a.weight.detach().numpy()
    np.testing.assert_allclose(untied.detach().numpy(), (np.full((1, 2), 2.0) @ w.T), rtol=1e-6)


def test_an_ensemble_by_stack_module_state_and_vmap(ctx):
    torch.manual_seed(1)
    models = [nn.Linear(3, 2).double() for _ in range(4)]
    params, buffers = stack_module_state(models)
    assert tuple(params["weight"].shape) == (4, 2, 3) and params["weight"].requires_grad
    base = models[0]
    x = torch.from_numpy(_values((5, 3), 4))

    def run(p, b, data):
        return functional_call(base, (p, b), (data,))

    out = vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    expected = np.stack([m(x).detach().numpy() for m in models])
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12)


def test_grad_of_a_scalar_function_and_its_argnums_and_aux(ctx):
    x0, y0 = _values(3, 5), _values(3, 6)
    x, y = torch.from_numpy(x0), torch.from_numpy(y0)

    def f(a, b):
        return (a * a * b).sum()

    np.testing.assert_allclose(grad(f)(x, y).numpy(), 2 * x0 * y0)
    gx, gy = grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gy.numpy(), x0 * x0)
    g, (value, aux) = grad_and_value(lambda a: ((a * 3).sum(), "aux"), has_aux=True)(x)
    np.testing.assert_allclose(g.numpy(), np.full(3, 3.0))
    assert aux == "aux" and value.item() == pytest.approx(3 * x0.sum())
    assert not x.requires_grad  # the caller's tensors are not made leaves
    np.testing.assert_allclose(grad(lambda a: torch.zeros(()))(x).numpy(), np.zeros(3))


def test_per_sample_gradients_by_vmap_of_grad(ctx):
    w0, xs, ys = _values(3, 7), _values((6, 3), 8), _values(6, 9)

    def loss(w, x, y):
        return ((x * w).sum() - y) ** 2

    grads = vmap(grad(loss), in_dims=(None, 0, 0))(
        torch.from_numpy(w0), torch.from_numpy(xs), torch.from_numpy(ys)
    )
    expected = 2 * ((xs @ w0) - ys)[:, None] * xs
    np.testing.assert_allclose(grads.numpy(), expected, rtol=1e-12)


def test_vjp_and_jacrev(ctx):
    x0 = _values(4, 10)
    x = torch.from_numpy(x0)
    out, vjp_fn = vjp(lambda a: a.sin() * 2, x)
    np.testing.assert_allclose(out.numpy(), 2 * np.sin(x0))
    v = _values(4, 11)
    (g,) = vjp_fn(torch.from_numpy(v))
    np.testing.assert_allclose(g.numpy(), v * 2 * np.cos(x0), rtol=1e-12)
    jac = jacrev(lambda a: a * a)(x)
    np.testing.assert_allclose(jac.numpy(), np.diag(2 * x0), rtol=1e-12)
    m0 = _values((2, 4), 12)
    jac = jacrev(lambda a: torch.from_numpy(m0) @ a)(x)
    np.testing.assert_allclose(jac.numpy(), m0, rtol=1e-12)


def test_vmap_dims_and_nested_inputs_and_outputs(ctx):
    a0, b0 = _values((3, 4), 13), _values((4, 3), 14)
    a, b = torch.from_numpy(a0), torch.from_numpy(b0)
    dot = vmap(lambda u, v: (u * v).sum(), in_dims=(0, 1))(a, b)
    np.testing.assert_allclose(dot.numpy(), (a0 * b0.T).sum(1))
    pair = vmap(
        lambda d: (d["x"] + 1, d["x"] * d["s"]), in_dims=({"x": 0, "s": None},), out_dims=(0, 1)
    )({"x": a, "s": torch.tensor(2.0, dtype=torch.float64)})
    np.testing.assert_allclose(pair[0].numpy(), a0 + 1)
    np.testing.assert_allclose(pair[1].numpy(), (a0 * 2).T)
    assert torch.vmap is vmap


def test_vmap_randomness(ctx):
    x = torch.zeros(3, 2)
    with pytest.raises(TensorError, match="called random operation while in randomness error mode"):
        vmap(lambda r: r + torch.rand(2))(x)
    different = vmap(lambda r: r + torch.rand(2), randomness="different")(x).numpy()
    same = vmap(lambda r: r + torch.rand(2), randomness="same")(x).numpy()
    assert not np.allclose(different[0], different[1])
    np.testing.assert_array_equal(same[0], same[1])
    np.testing.assert_array_equal(same[1], same[2])


def test_refusals(ctx):
    x = torch.ones(3)
    with pytest.raises(TensorError, match="grad of grad, jacrev of grad, hessian.*first-order"):
        grad(lambda a: grad(lambda b: (b * b).sum())(a).sum())(x)
    with pytest.raises(TensorError, match="torch.func.grad_and_value inside torch.func.jacrev"):
        jacrev(grad(lambda b: (b * b * b).sum()))(x)  # a hessian
    with pytest.raises(TensorError, match="inside torch.func.vjp"):
        vjp(lambda a: grad(lambda b: (b * b).sum())(a), x)
    with pytest.raises(
        TensorError,
        match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims",
    ):
        grad(lambda a: a * 2)(x)
    with pytest.raises(
        TensorError, match="same size in the mapped dimension, got sizes \\[2, 3\\]"
    ):
        vmap(lambda u, v: u + v)(torch.ones(2), torch.ones(3))
    with pytest.raises(TensorError, match="Only allowed values for randomness"):
        vmap(lambda u: u, randomness="maybe")
    with pytest.raises(TensorError, match="argnums=5"):
        grad(lambda a: a.sum(), argnums=5)(x)


def test_an_empty_batch_and_a_non_module_are_refused(ctx):
    with pytest.raises(TensorError, match="torch.vmap: the mapped dimension has size 0"):
        vmap(lambda x: x * 2)(torch.zeros(0, 3))
    with pytest.raises(KernBenchError, match="module must be a torch.nn.Module, got int"):
        functional_call(3, {}, ())
