"""``torch.jit`` run eagerly: ``script``/``trace`` return the module or function and warn,
the annotations are the identity, ``is_scripting()`` is False, archives are refused."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.errors import TensorError, UnsupportedNameError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


class Block(nn.Module):
    scale: torch.jit.Final[float]

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.scale = 2.0

    @torch.jit.ignore
    def describe(self) -> str:
        return "block"

    @torch.jit.unused
    def unused_path(self, x):
        return x

    def forward(self, x):
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            raise AssertionError("eager here")
        return self.fc(x) * self.scale


def test_script_and_trace_return_the_eager_module_with_a_warning(ctx) -> None:
    model = Block()
    with pytest.warns(UserWarning, match=r"torch.jit.script: kernbench runs the module eagerly"):
        scripted = torch.jit.script(model)
    assert scripted is model and scripted.describe() == "block"
    x = torch.ones(4, 3)
    with pytest.warns(UserWarning, match=r"torch.jit.trace: kernbench runs the module"):
        traced = torch.jit.trace(model, (x,))
    expected = (
        np.ones((4, 3)) @ model.fc.weight.detach().numpy().T + model.fc.bias.detach().numpy()
    ) * 2
    np.testing.assert_allclose(traced(x).detach().numpy(), expected, rtol=1e-5)

    def double(t):
        return t * 2

    with pytest.warns(UserWarning, match=r"runs the function eagerly"):
        assert torch.jit.script(double) is double
    assert torch.jit.ignore(drop=True)(double) is double
    assert torch.jit.annotate(list, [1]) == [1]


def test_what_torchscript_has_and_this_lacks(ctx) -> None:
    with pytest.raises(TensorError, match=r"torch.jit.script: expected a module or a function"):
        torch.jit.script(3)
    with pytest.raises(UnsupportedNameError, match=r"torch.jit.save .*torch.save\(model\)"):
        torch.jit.save  # noqa: B018
    with pytest.raises(UnsupportedNameError, match=r"torch.jit.load .*torch.load"):
        torch.jit.load  # noqa: B018
