"""torch.optim.SparseAdam: torch's arguments, defaults and errors, and its refusal of the
dense gradients every parameter here has, nn.Embedding(sparse=True)'s weight too, since
sparse tensors are held dense (ADR 0029, ADR 0034)."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import KernBenchError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def test_defaults_are_torchs(ctx):
    opt = optim.SparseAdam([nn.Parameter(torch.ones(1))])
    assert opt.defaults == {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "maximize": False}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": 0}, "Invalid learning rate: 0"),
        ({"lr": -1e-3}, "Invalid learning rate: -0.001"),
        ({"eps": 0.0}, "Invalid epsilon value: 0.0"),
        ({"betas": (1.0, 0.9)}, "Invalid beta parameter at index 0: 1.0"),
        ({"betas": (0.9, -1)}, "Invalid beta parameter at index 1: -1"),
    ],
)
def test_bad_hyper_parameters_raise_torchs_errors(ctx, kwargs, message):
    with pytest.raises(ValueError, match=f"^{message}$") as caught:
        optim.SparseAdam([nn.Parameter(torch.ones(1))], **kwargs)
    assert isinstance(caught.value, KernBenchError)


@pytest.mark.parametrize("maximize", [False, True])
def test_dense_gradients_raise_torchs_error_and_nothing_moves(ctx, maximize):
    emb = nn.Embedding(6, 3, sparse=True)
    opt = optim.SparseAdam(emb.parameters(), maximize=maximize)
    assert opt.step() is None  # no gradient yet: nothing to refuse
    emb(torch.tensor([1, 4])).sum().backward()
    before = emb.weight.detach().numpy()
    closure_calls = []

    def closure():
        closure_calls.append(1)
        return torch.ones(())

    with pytest.raises(RuntimeError, match="^SparseAdam does not support dense gradients, "
                       "please consider Adam instead") as caught:  # fmt: skip
        opt.step(closure)
    assert isinstance(caught.value, KernBenchError) and "ADR 0029" in str(caught.value)
    assert closure_calls == [1]  # torch runs the closure before it looks at the gradients
    np.testing.assert_array_equal(emb.weight.detach().numpy(), before)
    assert not opt.state


def test_state_dict_round_trip_and_param_groups(ctx):
    a, b = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(3))
    opt = optim.SparseAdam([{"params": [a]}, {"params": [b], "lr": 0.1}], betas=(0.8, 0.9))
    saved = opt.state_dict()
    assert saved["state"] == {} and [g["params"] for g in saved["param_groups"]] == [[0], [1]]
    assert [g["lr"] for g in saved["param_groups"]] == [1e-3, 0.1]
    again = optim.SparseAdam([{"params": [a]}, {"params": [b]}], lr=0.5)
    again.load_state_dict(saved)
    assert [g["lr"] for g in again.param_groups] == [1e-3, 0.1]
    assert again.param_groups[1]["betas"] == (0.8, 0.9) and again.param_groups[1]["params"] == [b]


def test_imports(ctx):
    namespace: dict = {}
    exec("from kernbench.torch.optim import SparseAdam", namespace)
    assert namespace["SparseAdam"] is optim.SparseAdam is torch.optim.SparseAdam
    assert "SparseAdam" in optim.__all__
