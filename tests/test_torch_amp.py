"""``torch.autocast`` casts as torch's CUDA autocast does (values equal to the explicit
casts, costs equal to them), and ``GradScaler`` scales, unscales, skips and updates as
torch's."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context

BF16 = torch.bfloat16


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _timed(context, call):
    start = context.now
    out = call()
    return out, context.now - start


def _fresh(body):
    """``body(a, b)``'s result and simulated time on a fresh machine (op costs depend on
    what ran before, so each variant starts from the same state)."""
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        a, b = torch.randn(32, 48), torch.randn(48, 16)
        start = context.now
        out = body(a, b)
        return out.float().numpy(), out.dtype, context.now - start


def _autocast(product):
    def body(a, b):
        with torch.autocast("cuda", dtype=BF16):
            return product(a, b)

    return body


@pytest.mark.parametrize(
    "product",
    [
        lambda a, b: a @ b,
        lambda a, b: torch.matmul(a, b),
        lambda a, b: a.mm(b),
        lambda a, b: torch.einsum("ij,jk->ik", a, b),
    ],
    ids=["@", "torch.matmul", "mm", "einsum"],
)
def test_matmuls_run_in_the_regions_dtype_as_the_explicit_casts_would(product):
    values, dtype, cost = _fresh(lambda a, b: a.to(BF16) @ b.to(BF16))
    got, got_dtype, spent = _fresh(_autocast(product))
    assert got_dtype is dtype is BF16 and spent == cost  # the two casts and the product
    np.testing.assert_array_equal(got, values)


def test_what_autocast_leaves_alone(ctx):
    a = torch.randn(32, 48)
    with torch.autocast("cuda", dtype=BF16):
        assert torch.randn(2, 3, 4).bmm(torch.randn(2, 4, 5)).dtype is BF16
        doubles = torch.ones(3, 3, dtype=torch.float64)
        assert (doubles @ doubles).dtype is torch.float64  # float64 is never cast
        assert (a.half() @ a.half().T).dtype is BF16
    assert (a @ a.T).dtype is torch.float32  # outside: as written


def test_linear_casts_its_bias_and_attention_and_softmax_take_their_lists(ctx):
    torch.manual_seed(1)
    layer = nn.Linear(16, 8)
    x = torch.randn(4, 16)
    expected = F.linear(x.to(BF16), layer.weight.to(BF16), layer.bias.to(BF16))
    with torch.autocast("cuda", dtype=BF16):
        y = layer(x)
        assert y.dtype is BF16
        np.testing.assert_array_equal(y.float().detach().numpy(), expected.float().detach().numpy())
        probabilities = F.softmax(y, dim=-1)  # float32's list: cast up
        assert probabilities.dtype is torch.float32
        np.testing.assert_allclose(
            probabilities.detach().numpy(),
            F.softmax(y.float(), dim=-1).detach().numpy(),
            rtol=0,
            atol=0,
        )
        loss = F.cross_entropy(y, torch.tensor([0, 1, 2, 3]))
        assert loss.dtype is torch.float32
        assert F.layer_norm(y, (8,)).dtype is torch.float32
        assert F.mse_loss(y, y).dtype is torch.float32
        q = torch.randn(1, 2, 4, 8)
        assert F.scaled_dot_product_attention(q, q, q).dtype is BF16
        assert (y + x[:, :8]).dtype is torch.float32  # others promote as usual
        assert torch.relu(y).dtype is BF16


def test_regions_nest_disable_and_answer_what_is_on(ctx):
    a = torch.ones(4, 4)
    assert not torch.is_autocast_enabled()
    with torch.autocast("cuda"):  # float16 by default on the accelerator
        assert torch.is_autocast_enabled() and torch.get_autocast_dtype("cuda") is torch.float16
        assert (a @ a).dtype is torch.float16
        with torch.autocast("cuda", enabled=False):
            assert not torch.is_autocast_enabled() and (a @ a).dtype is torch.float32
        with torch.autocast("cpu"):  # no CPU tensors here: the outer region holds
            assert (a @ a).dtype is torch.float16 and not torch.is_autocast_enabled("cpu")
        with torch.cuda.amp.autocast(dtype=BF16):
            assert (a @ a).dtype is BF16
        with torch.amp.autocast("cuda", dtype=BF16):
            assert (a @ a).dtype is BF16
    assert not torch.is_autocast_enabled()

    @torch.autocast("cuda", dtype=BF16)
    def step(x):
        return x @ x

    assert step(a).dtype is BF16 and (a @ a).dtype is torch.float32
    with pytest.raises(TensorError, match="torch.autocast: device_type must be one of"):
        torch.autocast("tpu")
    with pytest.raises(TensorError, match="autocast runs in torch.float16 or torch.bfloat16"):
        torch.autocast("cuda", dtype=torch.float32)


def _two_products(body):
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(2)
        w = nn.Parameter(torch.randn(64, 64))
        x1, x2 = torch.randn(8, 64), torch.randn(8, 64)
        start = context.now
        body(w, x1, x2)
        return context.now - start


def test_a_parameter_is_cast_once_per_region_unless_the_cache_is_off():
    def once(w, x1, x2):
        lw = w.to(BF16)
        return x1.to(BF16) @ lw, x2.to(BF16) @ lw

    def twice(w, x1, x2):
        return x1.to(BF16) @ w.to(BF16), x2.to(BF16) @ w.to(BF16)

    def cached(w, x1, x2):
        with torch.autocast("cuda", dtype=BF16):
            return x1 @ w, x2 @ w

    def uncached(w, x1, x2):
        with torch.autocast("cuda", dtype=BF16, cache_enabled=False):
            return x1 @ w, x2 @ w

    assert _two_products(cached) == _two_products(once)
    assert _two_products(uncached) == _two_products(twice) > _two_products(once)


def _grads(model):
    return [p.grad for p in model.parameters()]


def test_grad_scaler_scales_unscales_skips_and_updates(ctx):
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", init_scale=8.0, growth_interval=2)
    assert scaler.get_scale() == 8.0
    assert scaler.scale(torch.tensor(1.5)).item() == 12.0
    before = [p.detach().numpy().copy() for p in model.parameters()]
    for p in model.parameters():
        p.grad = torch.full(p.shape, 8.0)
    scaler.unscale_(opt)
    assert all(g.tolist() == np.ones(g.shape).tolist() for g in _grads(model))
    with pytest.raises(TensorError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    for p, b in zip(model.parameters(), before, strict=True):
        np.testing.assert_allclose(p.detach().numpy(), b - 0.1, rtol=1e-6)
    scaler.update()
    assert scaler.get_scale() == 8.0  # one good step of two
    for p in model.parameters():
        p.grad = torch.full(p.shape, float("inf"))
    kept = [p.detach().numpy().copy() for p in model.parameters()]
    scaler.step(opt)  # unscales, finds the inf, skips the step
    assert all(
        np.array_equal(p.detach().numpy(), k) for p, k in zip(model.parameters(), kept, strict=True)
    )
    scaler.update()
    assert scaler.get_scale() == 4.0  # backed off
    for _ in range(2):
        for p in model.parameters():
            p.grad = torch.zeros(p.shape)
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 8.0  # grown after two good steps
    state = scaler.state_dict()
    other = torch.cuda.amp.GradScaler()
    other.load_state_dict(state)
    assert other.get_scale() == 8.0 and other.state_dict() == state
    off = torch.amp.GradScaler(enabled=False)
    assert off.scale(torch.tensor(2.0)).item() == 2.0 and off.get_scale() == 1.0
    with pytest.raises(TensorError, match="No inf checks were recorded prior to update"):
        torch.amp.GradScaler().update()


def test_backward_through_an_autocast_region_gives_the_explicit_casts_gradients(ctx):
    def grads(forward):
        torch.manual_seed(3)
        layer = nn.Linear(16, 4)
        x, y = torch.randn(8, 16), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
        loss = forward(layer, x, y)
        loss.backward()
        return (
            loss.dtype,
            [p.grad.dtype for p in layer.parameters()],
            [p.grad.numpy() for p in layer.parameters()],
        )

    def autocast(layer, x, y):
        with torch.autocast("cuda", dtype=BF16):
            return F.cross_entropy(layer(x), y)

    def explicit(layer, x, y):
        out = F.linear(x.to(BF16), layer.weight.to(BF16), layer.bias.to(BF16))
        return F.cross_entropy(out.float(), y)

    got, expected = grads(autocast), grads(explicit)
    assert got[0] is expected[0] is torch.float32
    assert got[1] == expected[1] == [torch.float32, torch.float32]  # back in the leaves' dtype
    for g, e in zip(got[2], expected[2], strict=True):
        np.testing.assert_array_equal(g, e)


def test_a_float32_gradient_reaching_a_bfloat16_operand_is_cast_to_its_dtype(ctx):
    # A residual block in autocast: x + proj(x), proj's output bfloat16 and x float32, so
    # the sum and its gradient are float32; torch's engine casts the gradient flowing into
    # the bfloat16 branch to bfloat16 (that input's dtype) before proj's backward.  Before,
    # proj's backward multiplied a float32 gradient by a bfloat16 weight and raised.
    def grads(forward):
        torch.manual_seed(5)
        proj = nn.Linear(8, 8)
        x = torch.randn(4, 8, requires_grad=True)
        out = forward(proj, x)
        assert out.dtype is torch.float32
        out.sum().backward()
        return x.grad, proj.weight.grad

    def autocast(proj, x):
        with torch.autocast("cuda", dtype=BF16):
            h = proj(x)
            assert h.dtype is BF16
            return x + h

    def explicit(proj, x):
        h = F.linear(x.to(BF16), proj.weight.to(BF16), proj.bias.to(BF16))
        return x + h.float()

    (gx, gw), (ex, ew) = grads(autocast), grads(explicit)
    assert gx.dtype is gw.dtype is torch.float32
    np.testing.assert_array_equal(gx.numpy(), ex.numpy())
    np.testing.assert_array_equal(gw.numpy(), ew.numpy())
    torch.manual_seed(5)
    w = nn.Linear(8, 8).weight.detach().numpy()
    ones = np.ones((4, 8), dtype=np.float32)
    np.testing.assert_allclose(gx.numpy(), ones + ones @ w, rtol=1e-2, atol=1e-2)
