"""``torch.nn.utils``' parameter helpers, the split of ``clip_grad_norm_``, parametrizations
(``parametrize``, ``parametrizations.weight_norm``/``spectral_norm``) and the hook-based
``weight_norm``/``spectral_norm``: values and gradients against NumPy, state-dict keys,
removal, errors as torch raises them, and the same simulated time in timing-only runs."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context
    torch.manual_seed(0)


def _array(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _linear(out_features=3, in_features=4, seed=0):
    layer = nn.Linear(in_features, out_features)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(_array((out_features, in_features), seed)))
        layer.bias.copy_(torch.from_numpy(_array((out_features,), seed + 1)))
    return layer


# -- parameters_to_vector, vector_to_parameters ------------------------------------------


def test_parameters_to_vector_concatenates_in_order_and_records(ctx):
    layer = _linear()
    vec = nn.utils.parameters_to_vector(layer.parameters())
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    np.testing.assert_array_equal(vec.detach().numpy(), np.concatenate([w.ravel(), b]))
    scale = _array((15,), 7)
    (vec * torch.from_numpy(scale)).sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), scale[:12].reshape(3, 4), rtol=1e-6)
    np.testing.assert_allclose(layer.bias.grad.numpy(), scale[12:], rtol=1e-6)


def test_vector_to_parameters_shares_the_vectors_memory(ctx):
    layer = _linear()
    weight = layer.weight
    values = np.arange(15, dtype=np.float32)
    vec = torch.from_numpy(values)
    assert nn.utils.vector_to_parameters(vec, layer.parameters()) is None
    assert layer.weight is weight and layer.weight.requires_grad
    np.testing.assert_array_equal(layer.weight.detach().numpy(), values[:12].reshape(3, 4))
    np.testing.assert_array_equal(layer.bias.detach().numpy(), values[12:])
    vec[0] = 100.0  # a view, as torch's
    assert layer.weight.detach().numpy()[0, 0] == 100.0


def test_vector_to_parameters_errors(ctx):
    layer = _linear()
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        nn.utils.vector_to_parameters([1.0] * 15, layer.parameters())
    with pytest.raises(TensorError, match="shape .* is invalid for input of size"):
        nn.utils.vector_to_parameters(torch.zeros(5), layer.parameters())
    with pytest.raises(TensorError, match="non-empty"):
        nn.utils.parameters_to_vector([])


# -- get_total_norm, clip_grads_with_norm_ -----------------------------------------------


def _with_grads(*grads):
    out = []
    for g in grads:
        p = torch.ones(len(g))
        p.grad = torch.tensor(g)
        out.append(p)
    return out


def test_get_total_norm_then_clip_grads_with_norm_is_clip_grad_norm_(ctx):
    params = _with_grads([3.0, 4.0, 0.0], [0.0, 12.0])
    total = nn.utils.get_total_norm([p.grad for p in params])
    np.testing.assert_allclose(total.item(), 13.0, rtol=1e-6)
    assert nn.utils.get_total_norm(params[0].grad, norm_type="inf").item() == 4.0
    assert nn.utils.get_total_norm([params[0].grad], norm_type=1).item() == 7.0
    assert nn.utils.get_total_norm([]).item() == 0.0
    assert nn.utils.clip_grads_with_norm_(params, 1.0, total) is None
    scale = 1.0 / (13.0 + 1e-6)
    np.testing.assert_allclose(params[0].grad.numpy(), np.array([3, 4, 0]) * scale, rtol=1e-6)
    np.testing.assert_allclose(params[1].grad.numpy(), np.array([0, 12]) * scale, rtol=1e-6)
    small = _with_grads([0.3, 0.4])
    nn.utils.clip_grads_with_norm_(small, 1.0, nn.utils.get_total_norm([small[0].grad]))
    np.testing.assert_allclose(small[0].grad.numpy(), [0.3, 0.4], rtol=1e-6)  # not scaled up


def test_get_total_norm_errors(ctx):
    bad = _with_grads([float("nan"), 1.0])
    with pytest.raises(TensorError, match="The total norm of order 2.0 .* is non-finite"):
        nn.utils.get_total_norm([bad[0].grad], error_if_nonfinite=True)
    with pytest.raises(TensorError, match="get_total_norm: norm_type is 1, 2 or inf here"):
        nn.utils.get_total_norm([bad[0].grad], norm_type=3)
    with pytest.raises(TypeError, match="get_total_norm: tensors must be a Tensor or an"):
        nn.utils.get_total_norm(5)
    with pytest.raises(TypeError, match="clip_grads_with_norm_: total_norm must be a Tensor"):
        nn.utils.clip_grads_with_norm_(bad, 1.0, 2.0)


def test_split_clipping_costs_what_clip_grad_norm_costs():
    def run(split: bool) -> int:
        context = RuntimeContext("tiny", timing_only=True)
        with use_context(context):
            params = [torch.ones(128, 64) for _ in range(3)]
            for p in params:
                p.grad = torch.ones(128, 64)
            before = context.now
            if split:
                total = nn.utils.get_total_norm([p.grad for p in params])
                nn.utils.clip_grads_with_norm_(params, 1.0, total)
            else:
                nn.utils.clip_grad_norm_(params, 1.0)
            return context.now - before

    assert run(split=True) == run(split=False) > 0
