"""Two vectors' product (``dot``, ``a @ b``, ``torch.matmul``/``inner``/``vdot`` of 1-D
tensors) is a dot, as torch's: products then a parallel sum, not one matrix tile stepping
through ``K``; its gradient is ``DotBackward0``."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def test_values_against_numpy(ctx):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(1000), rng.standard_normal(1000)
    for dtype, rtol in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
        x, y = torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype)
        for got in (x.dot(y), x @ y, torch.matmul(x, y), torch.inner(x, y)):
            assert got.shape == () and got.dtype is dtype
            assert got.item() == pytest.approx(float(a @ b), rel=rtol)
    ints = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert ints.dot(ints).item() == 14 and ints.dot(ints).dtype is torch.int32
    # half precision accumulates in float32, as torch's dot: 5000 x 0.01 is not lost
    h = torch.full((5000,), 0.1, dtype=torch.float16)
    expected = float(np.float16(0.1)) ** 2 * 5000
    assert h.dot(h).dtype is torch.float16
    assert h.dot(h).item() == pytest.approx(expected, rel=1e-3)


def test_the_gradient_is_a_dot_s(ctx):
    x = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = torch.tensor([3.0, 0.25, 4.0], requires_grad=True)
    z = x @ y
    assert "DotBackward0" in repr(z.grad_fn)
    (z * 2).backward()
    assert x.grad.tolist() == [6.0, 0.5, 8.0] and y.grad.tolist() == [2.0, -4.0, 1.0]


def test_a_long_dot_costs_what_its_products_and_sum_cost(ctx):
    x, y = torch.randn(32768), torch.randn(32768)
    clock = ctx.machine
    start = clock.now
    x.dot(y)
    dot = clock.now - start
    start = clock.now
    x.mul(y).sum()
    pieces = clock.now - start
    start = clock.now
    x.view(1, -1).mm(y.view(-1, 1))  # a (1 x K)(K x 1) matrix product: one tile through K
    tile = clock.now - start
    assert dot == pytest.approx(pieces, rel=0.1) and tile > 3 * dot


def test_sizes_must_agree(ctx):
    with pytest.raises(TensorError, match=r"inconsistent tensor size, expected tensor \[3\]"):
        torch.ones(3).dot(torch.ones(4))
    with pytest.raises(TensorError, match="same dtype"):
        torch.ones(3) @ torch.ones(3, dtype=torch.float64)
