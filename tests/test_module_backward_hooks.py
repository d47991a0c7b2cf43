"""``nn.Module.register_full_backward_hook`` against NumPy: ``grad_input`` and
``grad_output`` of a Linear, a hook that replaces ``grad_input``, inputs that need no
gradient, non-tensor arguments, and removal."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def test_grad_input_and_grad_output_of_a_linear(ctx) -> None:
    layer = nn.Linear(3, 2)
    seen = []
    layer.register_full_backward_hook(
        lambda m, gi, go: seen.append((m, [g.numpy() for g in gi], [g.numpy() for g in go]))
    )
    x = torch.tensor(np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32),
                     requires_grad=True)  # fmt: skip
    w_out = np.random.default_rng(2).normal(size=(4, 2)).astype(np.float32)
    (layer(x) * torch.tensor(w_out)).sum().backward()
    assert len(seen) == 1 and seen[0][0] is layer
    (grad_input,), (grad_output,) = seen[0][1], seen[0][2]
    np.testing.assert_allclose(grad_output, w_out, rtol=1e-6)
    w = layer.weight.detach().numpy()
    np.testing.assert_allclose(grad_input, w_out @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), w_out @ w, rtol=1e-5, atol=1e-6)


def test_a_hook_can_replace_grad_input(ctx) -> None:
    layer = nn.Linear(2, 2)
    handle = layer.register_full_backward_hook(lambda m, gi, go: tuple(g * 0 for g in gi))
    x = torch.ones(1, 2, requires_grad=True)
    layer(x).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0]]
    assert layer.weight.grad is not None and np.abs(layer.weight.grad.numpy()).sum() > 0
    handle.remove()
    x.grad = None
    layer(x).sum().backward()
    assert np.abs(x.grad.numpy()).sum() > 0


def test_inputs_without_grad_and_non_tensor_arguments(ctx) -> None:
    class Scale(nn.Module):
        def forward(self, x, factor):
            return x * factor

    model = nn.Sequential(nn.Linear(2, 2))
    scale = Scale()
    seen = []
    scale.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    hidden = model(torch.ones(3, 2))  # requires grad through the weights
    scale(hidden, 3.0).sum().backward()
    (grad_input, grad_output) = seen[0]
    assert len(grad_input) == 2 and grad_input[1] is None
    np.testing.assert_allclose(grad_input[0].numpy(), np.full((3, 2), 3.0))
    np.testing.assert_allclose(grad_output[0].numpy(), np.ones((3, 2)))
    leaf_only = nn.Linear(2, 1)
    calls = []
    leaf_only.register_full_backward_hook(lambda m, gi, go: calls.append(gi))
    leaf_only(torch.ones(1, 2)).sum().backward()  # the input needs no gradient
    assert calls == [(None,)]


def test_no_hook_runs_without_recording(ctx) -> None:
    layer = nn.Linear(2, 2)
    calls = []
    layer.register_full_backward_hook(lambda *a: calls.append(a))
    with torch.no_grad():
        out = layer(torch.ones(1, 2))
    assert out.requires_grad is False and calls == []


def test_get_parameter_and_get_buffer_by_dotted_path(ctx) -> None:
    from kernbench.errors import ModuleAttributeError

    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    assert model.get_parameter("0.weight") is model[0].weight
    assert model.get_buffer("1.running_mean") is model[1].running_mean
    with pytest.raises(ModuleAttributeError, match="`running_mean` is not an nn.Parameter"):
        model.get_parameter("1.running_mean")
    with pytest.raises(ModuleAttributeError, match="`weight` is not a buffer"):
        model.get_buffer("0.weight")
    with pytest.raises(ModuleAttributeError, match="Linear has no attribute `scale`"):
        model.get_parameter("0.scale")
