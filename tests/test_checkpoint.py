"""torch.utils.checkpoint, both variants: gradients equal to the plain run's (parameters
closed over, dropout's masks redrawn the same), the peak memory it saves and the forward
it pays again in backward, checkpoint_sequential, and torch's refusals by message."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn
from kernbench.torch.utils.checkpoint import checkpoint, checkpoint_sequential


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _block(seed=0, width=16):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(width, 4 * width), nn.GELU(), nn.Dropout(0.25), nn.Linear(4 * width, width)
    )


def _grads(model, x, wrap):
    """Loss and gradients of (model(x) + x).square().mean() with model wrapped by ``wrap``."""
    model.zero_grad()
    if x.grad is not None:
        x.grad = None
    torch.manual_seed(123)
    out = wrap(model, x) + x
    loss = out.square().mean()
    loss.backward()
    grads = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    grads["x"] = x.grad.numpy().copy() if x.grad is not None else None
    return loss.item(), grads


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradients_equal_the_plain_runs_with_dropout(ctx, use_reentrant):
    model = _block()
    x = torch.tensor(np.random.default_rng(0).normal(size=(8, 16)), dtype=torch.float32)
    x.requires_grad_(True)
    plain_loss, plain = _grads(model, x, lambda m, v: m(v))
    loss, got = _grads(model, x, lambda m, v: checkpoint(m, v, use_reentrant=use_reentrant))
    assert loss == plain_loss
    assert set(got) == set(plain)
    for name in plain:
        np.testing.assert_array_equal(got[name], plain[name], err_msg=name)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_the_recomputation_runs_in_the_forwards_autocast_region(ctx, use_reentrant):
    model = _block(2)
    model.eval()
    x = torch.tensor(np.random.default_rng(3).normal(size=(4, 16)), dtype=torch.float32)
    x.requires_grad_(True)

    def autocast_wrap(call):
        def run(m, v):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return call(m, v).float()

        return run

    _, plain = _grads(model, x, autocast_wrap(lambda m, v: m(v)))
    _, got = _grads(
        model, x, autocast_wrap(lambda m, v: checkpoint(m, v, use_reentrant=use_reentrant))
    )
    for name in plain:
        np.testing.assert_array_equal(got[name], plain[name], err_msg=name)


def test_non_reentrant_reaches_parameters_without_an_input_requiring_grad(ctx):
    model = _block(1)
    model.eval()
    x = torch.ones(4, 16)
    out = checkpoint(model, x, use_reentrant=False)
    assert out.requires_grad and out.grad_fn.name() == "CheckpointBackward"
    out.sum().backward()
    plain = _block(1)
    plain.eval()
    plain(x).sum().backward()
    for (name, p), q in zip(model.named_parameters(), plain.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, err_msg=name)
    # the reentrant variant needs an input that requires grad, as torch's
    model.zero_grad()
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        out = checkpoint(model, x, use_reentrant=True)
    assert not out.requires_grad


def test_keyword_arguments_and_several_outputs(ctx):
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def fn(a, scale=1.0, *, shift):
        h = (a * w).tanh()
        return h * scale + shift, {"sq": h.square()}

    a = torch.tensor([0.1, -0.2, 0.3], requires_grad=True)
    first, rest = checkpoint(fn, a, scale=2.0, shift=1.0, use_reentrant=False)
    (first.sum() + rest["sq"].sum()).backward()
    av, wv = np.array([0.1, -0.2, 0.3]), np.array([1.0, 2.0, 3.0])
    h = np.tanh(av * wv)
    dh = 2.0 + 2.0 * h
    np.testing.assert_allclose(a.grad.numpy(), dh * (1 - h**2) * wv, rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), dh * (1 - h**2) * av, rtol=1e-6)
    with pytest.raises(TensorError, match="Unexpected keyword arguments: scale"):
        checkpoint(fn, a, scale=2.0, use_reentrant=True)


def test_checkpoint_sequential_matches_the_plain_sequential(ctx):
    torch.manual_seed(7)
    model = nn.Sequential(*(nn.Linear(8, 8) for _ in range(5)))
    x = torch.tensor(np.random.default_rng(2).normal(size=(3, 8)), dtype=torch.float32)
    model(x).square().sum().backward()
    plain = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    checkpoint_sequential(model, 2, x, use_reentrant=False).square().sum().backward()
    for got, want in zip((p.grad.numpy() for p in model.parameters()), plain, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_refusals_name_the_call(ctx):
    f = lambda v: v * 2.0  # noqa: E731
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(TensorError, match="please pass in use_reentrant=True or use_reentrant"):
        checkpoint(f, x)
    with pytest.raises(TensorError, match="please pass in use_reentrant=True or use_reentrant"):
        checkpoint_sequential([f], 1, x)
    with pytest.raises(TensorError, match="context_fn or debug is only supported when"):
        checkpoint(f, x, use_reentrant=True, debug=True)
    with pytest.raises(TensorError, match="determinism_check should be one of"):
        checkpoint(f, x, use_reentrant=False, determinism_check="always")
    shapes = iter([(2,), (3,)])

    def changing(v):
        return torch.ones(next(shapes)) * v.sum()

    out = checkpoint(changing, x, use_reentrant=False)
    with pytest.raises(TensorError, match="different metadata than during the forward pass"):
        out.sum().backward()


def test_saves_peak_memory_and_pays_the_forward_again():
    width, depth = 256, 6
    measured = {}
    for mode in ("plain", "checkpoint"):
        context = RuntimeContext("ring8", timing_only=True)
        with use_context(context):
            torch.manual_seed(0)
            layers = [nn.Linear(width, width) for _ in range(depth)]
            x = torch.ones(512, width, requires_grad=True)
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            h = x
            start = context.now
            for layer in layers:
                if mode == "plain":
                    h = F.gelu(layer(h))
                else:
                    h = checkpoint(lambda v, lay=layer: F.gelu(lay(v)), h, use_reentrant=False)
            forward = context.now - start
            kept = torch.cuda.memory_allocated() - base
            loss = h.sum()
            start = context.now
            loss.backward()
            measured[mode] = (
                forward,
                context.now - start,
                kept,
                torch.cuda.max_memory_allocated() - base,
            )
    (f0, b0, k0, m0), (f1, b1, k1, m1) = measured["plain"], measured["checkpoint"]
    activation = 512 * width * 4
    # after the forward each layer keeps its Linear output and the GELU's: 2 activations a
    # layer in the plain run, 1 (the region's output, the next one's input) checkpointed
    # (and its random-number state, a few hundred bytes)
    assert k0 == 2 * depth * activation
    assert k1 == depth * activation
    # the peak (during backward) keeps that difference less the one region recomputed
    assert m0 - m1 >= (depth - 3) * activation
    # the forward is the same work (placed in other memory, so not to the picosecond), and
    # the backward runs it again
    assert abs(f1 - f0) <= 0.05 * f0, (f0, f1)
    assert b1 >= b0 + 0.9 * f0, (b0, b1, f0)
