"""``torch.special`` by its own names, ``torch.set_printoptions`` and the host thread counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import UnsupportedNameError
from kernbench.runtime import RuntimeContext, use_context

X = np.array([-2.0, -0.5, 0.0, 0.25, 1.5, 3.0], dtype=np.float32)
ERF = np.vectorize(math.erf)


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context
    torch.set_printoptions(profile="default", sci_mode=None)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("expit", 1 / (1 + np.exp(-X))),
        ("erf", ERF(X)),
        ("erfc", 1 - ERF(X)),
        ("ndtr", 0.5 * (1 + ERF(X / math.sqrt(2)))),
        ("log_ndtr", np.log(0.5 * (1 + ERF(X / math.sqrt(2))))),
        ("expm1", np.expm1(X)),
        ("exp2", np.exp2(X)),
        ("gammaln", np.array([math.lgamma(v) if v not in (-2.0, 0.0) else np.inf for v in X])),
        ("sinc", np.sinc(X)),
    ],
)
def test_each_function_matches_numpy(ctx, name, expected):
    got = getattr(torch.special, name)(torch.tensor(X)).numpy()
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=2e-5, atol=2e-6)


def test_entr_xlog1py_and_the_softmaxes(ctx):
    x = np.array([-1.0, 0.0, 0.5, 2.0], dtype=np.float32)
    entr = torch.special.entr(torch.tensor(x)).numpy()
    np.testing.assert_allclose(entr, [-np.inf, 0.0, -0.5 * np.log(0.5), -2 * np.log(2)], rtol=1e-6)
    y = np.array([0.5, 1.0, 3.0, 0.0], dtype=np.float32)
    got = torch.special.xlog1py(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_allclose(got, x * np.log1p(y), rtol=1e-6)
    assert torch.special.xlog1py(torch.tensor([0.0]), torch.tensor([np.nan])).isnan().item()
    m = np.arange(6, dtype=np.float32).reshape(2, 3) / 3
    soft = np.exp(m) / np.exp(m).sum(1, keepdims=True)
    np.testing.assert_allclose(torch.special.softmax(torch.tensor(m), 1).numpy(), soft, rtol=1e-6)
    np.testing.assert_allclose(
        torch.special.log_softmax(torch.tensor(m), dim=1).numpy(), np.log(soft), rtol=1e-5
    )
    np.testing.assert_allclose(
        torch.special.logsumexp(torch.tensor(m), 1).numpy(), np.log(np.exp(m).sum(1)), rtol=1e-6
    )
    assert torch.special.psi is torch.special.digamma


def test_they_are_differentiable_and_take_out(ctx):
    x = torch.tensor(X, requires_grad=True)
    torch.special.expit(x).sum().backward()
    s = 1 / (1 + np.exp(-X))
    np.testing.assert_allclose(x.grad.numpy(), s * (1 - s), rtol=1e-5)
    out = torch.empty(6)
    assert torch.special.erfc(torch.tensor(X), out=out) is out
    np.testing.assert_allclose(out.numpy(), 1 - ERF(X), rtol=2e-5, atol=2e-6)


def test_a_function_without_a_kernel_is_named(ctx):
    with pytest.raises(UnsupportedNameError, match=r"torch.special.zeta is not in KernBench.*"):
        torch.special.zeta  # noqa: B018
    assert not hasattr(torch.special, "bessel_j0")


def test_set_printoptions_changes_how_tensors_print(ctx):
    x = torch.tensor([1.123456, 2.5, 3.0])
    assert str(x) == "tensor([1.1235, 2.5000, 3.0000], device='ahbm:0')"
    torch.set_printoptions(precision=2)
    assert str(x) == "tensor([1.12, 2.50, 3.00], device='ahbm:0')"
    torch.set_printoptions(sci_mode=True)
    assert str(x) == "tensor([1.12e+00, 2.50e+00, 3.00e+00], device='ahbm:0')"
    torch.set_printoptions(profile="default")
    torch.set_printoptions(threshold=5, edgeitems=1)
    assert str(torch.arange(10)) == "tensor([0, ..., 9], device='ahbm:0')"
    torch.set_printoptions(profile="full")
    assert "..." not in str(torch.arange(2000))
    assert torch.get_printoptions()["precision"] == 4
    with pytest.raises(ValueError, match="profile must be one of default, short, full"):
        torch.set_printoptions(profile="long")
    with pytest.raises(ValueError, match="precision must be a number >= 0"):
        torch.set_printoptions(precision=-1)


def test_thread_counts_are_kept_and_change_nothing(ctx):
    assert torch.get_num_threads() == 1 and torch.get_num_interop_threads() == 1
    torch.set_num_threads(8)
    assert torch.get_num_threads() == 8
    with pytest.raises(ValueError, match="Expected a positive number of threads"):
        torch.set_num_threads(0)
