"""Backward of ``cumprod`` (zeros in the input too, as torch's formula takes them) and
``logcumsumexp`` (large inputs that would overflow ``exp``), against NumPy central
differences in float64; ``torch.<name>`` and the tensor method; node names."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check, numeric_grad

import kernbench.torch as torch
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _logcumsumexp(x, d):
    return np.logaddexp.accumulate(x, axis=d)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod(ctx, dim):
    check(lambda x: x.cumprod(dim), lambda x: np.cumprod(x, dim), (4, 5), node="CumprodBackward0")
    check(lambda x: torch.cumprod(x, dim), lambda x: np.cumprod(x, dim), (3, 4, 2))


@pytest.mark.parametrize("dim", [0, 1])
def test_logcumsumexp(ctx, dim):
    check(
        lambda x: x.logcumsumexp(dim),
        lambda x: _logcumsumexp(x, dim),
        (4, 5),
        node="LogcumsumexpBackward0",
    )
    check(lambda x: torch.logcumsumexp(x, dim), lambda x: _logcumsumexp(x, dim), (3, 4, 2))


def _grad(fn, a, w):
    x = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    (fn(x) * torch.tensor(w, dtype=torch.float64)).sum().backward()
    return x.grad.numpy()


def test_cumprod_with_zeros(ctx):
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 1.5, (5, 7)) * rng.choice([-1, 1], (5, 7))
    a[0, 2] = 0.0  # one zero
    a[1, 1] = a[1, 4] = 0.0  # two zeros: the gradient past the first is 0
    a[2, 0] = 0.0  # a zero first
    a[3, 6] = 0.0  # a zero last
    a[4, :] = 0.0  # all zeros
    w = rng.uniform(-1, 1, a.shape)
    got = _grad(lambda x: x.cumprod(1), a, w)
    # the products are polynomials of degree 1 in each element: central differences are exact
    want = numeric_grad(lambda x: float(np.sum(np.cumprod(x, 1) * w)), [a.copy()], 0)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)
    assert (got[1, 5:] == 0).all() and (got[4, 1:] == 0).all()
    assert np.isfinite(got).all()
    # along dim 0 too
    got = _grad(lambda x: x.cumprod(0), a.T.copy(), w.T.copy())
    want = numeric_grad(lambda x: float(np.sum(np.cumprod(x, 0) * w.T)), [a.T.copy()], 0)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_cumprod_of_float32_and_0d(ctx):
    x = torch.tensor([2.0, 0.0, 3.0, 4.0], requires_grad=True)
    x.cumprod(0).sum().backward()
    # d/dx0 = 1, d/dx1 = x0 + x0 x2 + x0 x2 x3 = 2 + 6 + 24, past the zero 0
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 32.0, 0.0, 0.0])
    assert x.grad.dtype is torch.float32
    s = torch.tensor(3.0, requires_grad=True)
    s.cumprod(0).backward()
    assert s.grad.item() == 1.0


def test_logcumsumexp_of_large_values_does_not_overflow(ctx):
    a = np.array([1000.0, 1001.0, -1000.0, 999.0])
    w = np.array([1.0, -2.0, 0.0, 0.5])
    got = _grad(lambda x: x.logcumsumexp(0), a, w)
    y = _logcumsumexp(a, 0)
    want = np.array([sum(w[j] * np.exp(a[i] - y[j]) for j in range(i, 4)) for i in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    s = torch.tensor(3.0, requires_grad=True)
    s.logcumsumexp(0).backward()
    assert s.grad.item() == 1.0


def test_cumprod_with_dtype_and_in_place(ctx):
    x = torch.tensor([2.0, 0.5, 3.0], requires_grad=True)
    y = x.cumprod(0, dtype=torch.float64)
    assert y.dtype is torch.float64
    y.sum().backward()
    # d/dx0 = 1 + x1 + x1 x2, d/dx1 = x0 + x0 x2, d/dx2 = x0 x1
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 8.0, 1.0])
    assert x.grad.dtype is torch.float32
    x.grad = None
    h = x * 1
    h.cumprod_(0)
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 8.0, 1.0])
