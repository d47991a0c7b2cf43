"""torch.autograd over the facade's ops: gradients against NumPy central differences (float64)
for every covered op, broadcasting included; accumulation, retain_graph, no_grad, the
in-place and unsupported-op errors; a 2-layer MLP trained with SGD step for step against
NumPy; and the cost of a Linear's backward against its matmuls."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check, rand

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _check(torch_fn, numpy_fn, *shapes, seed=0, positive=False):
    low, high = (0.5, 1.5) if positive else (-1.0, 1.0)
    check(torch_fn, numpy_fn, *shapes, seed=seed, low=low, high=high)


def _softmax(x, d):
    e = np.exp(x - x.max(d, keepdims=True))
    return e / e.sum(d, keepdims=True)


def _erf(x):
    return np.vectorize(math.erf)(x)


BINARY = [
    ("add", lambda a, b: a + b, lambda a, b: a + b, (2, 3), (3,)),
    ("sub", lambda a, b: a - b, lambda a, b: a - b, (2, 1), (2, 3)),
    ("mul", lambda a, b: a * b, lambda a, b: a * b, (4, 1, 3), (2, 1)),
    ("div", lambda a, b: a / b, lambda a, b: a / b, (2, 3), (2, 3)),
    ("add_alpha", lambda a, b: torch.add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b, (3,), (2, 3)),
    ("sub_alpha", lambda a, b: a.sub(b, alpha=0.5), lambda a, b: a - 0.5 * b, (2, 3), (3,)),
    ("matmul", lambda a, b: a @ b, lambda a, b: a @ b, (2, 3), (3, 4)),
    ("matmul_batched", lambda a, b: a @ b, lambda a, b: a @ b, (2, 2, 3), (3, 4)),
    ("matmul_vec", lambda a, b: torch.matmul(a, b), lambda a, b: a @ b, (3,), (3, 2)),
    ("mat_vec", lambda a, b: a.matmul(b), lambda a, b: a @ b, (2, 3), (3,)),
    ("mm", torch.mm, np.matmul, (2, 3), (3, 2)),
    ("bmm", torch.bmm, np.matmul, (2, 2, 3), (2, 3, 2)),
]


@pytest.mark.parametrize("name,torch_fn,numpy_fn,sa,sb", BINARY, ids=[b[0] for b in BINARY])
def test_binary_ops_gradients_with_broadcasting(ctx, name, torch_fn, numpy_fn, sa, sb):
    _check(torch_fn, numpy_fn, sa, sb, positive=name == "div")


UNARY = [
    (
        "scalar_ops",
        lambda x: (2.0 - x) * 3.0 / 4.0 + 1.0 - x / 2.0,
        lambda x: (2.0 - x) * 3.0 / 4.0 + 1.0 - x / 2.0,
        False,
    ),
    ("rdiv", lambda x: 1.5 / x, lambda x: 1.5 / x, True),
    ("neg", lambda x: -x + torch.neg(x), lambda x: -2 * x, False),
    ("pow", lambda x: x**3 + x.pow(2) + torch.pow(x, 0.5), lambda x: x**3 + x**2 + x**0.5, True),
    ("sum_all", lambda x: x.sum(), lambda x: x.sum(), False),
    ("sum_dim", lambda x: x.sum(1), lambda x: x.sum(1), False),
    (
        "sum_dims_keepdim",
        lambda x: torch.sum(x, (0, 2), keepdim=True),
        lambda x: x.sum((0, 2), keepdims=True),
        False,
    ),
    ("mean", lambda x: x.mean(), lambda x: x.mean(), False),
    ("mean_dim", lambda x: x.mean(-1, keepdim=True), lambda x: x.mean(-1, keepdims=True), False),
    (
        "views",
        lambda x: x.view(6, 2).reshape(3, 4).flatten().unsqueeze(0).squeeze(0),
        lambda x: x.reshape(-1),
        False,
    ),
    (
        "transposes",
        lambda x: x.transpose(0, 2).permute(2, 0, 1) * 1.0,
        lambda x: (
            x.transpose(2, 0, 1).transpose(1, 2, 0).transpose(2, 0, 1)
            if False
            else np.transpose(np.swapaxes(x, 0, 2), (2, 0, 1))
        ),
        False,
    ),
    ("t_and_T", lambda x: x[0].t() + x[1].T + x[0].mT, lambda x: x[0].T + x[1].T + x[0].T, False),
    ("getitem", lambda x: x[1:, ::2] * x[0, 1], lambda x: x[1:, ::2] * x[0, 1], False),
    ("relu", lambda x: x.relu() + torch.relu(x) + F.relu(x), lambda x: 3 * np.maximum(x, 0), False),
    ("tanh", torch.tanh, np.tanh, False),
    ("sigmoid", lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), False),
    ("exp", torch.exp, np.exp, False),
    ("log", lambda x: x.log(), np.log, True),
    ("softmax", lambda x: x.softmax(-1), lambda x: _softmax(x, -1), False),
    ("softmax_dim0", lambda x: F.softmax(x, dim=0), lambda x: _softmax(x, 0), False),
    ("log_softmax", lambda x: F.log_softmax(x, 1), lambda x: np.log(_softmax(x, 1)), False),
    ("gelu", F.gelu, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))), False),
    (
        "gelu_tanh",
        lambda x: F.gelu(x, approximate="tanh"),
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        False,
    ),
    ("silu", F.silu, lambda x: x / (1 + np.exp(-x)), False),
    ("clone_contiguous", lambda x: x.t().contiguous().clone(), lambda x: x.T, False),
    ("casts", lambda x: x.float().to(torch.float64) * 2, lambda x: 2 * x, False),
]


@pytest.mark.parametrize("name,torch_fn,numpy_fn,positive", UNARY, ids=[u[0] for u in UNARY])
def test_unary_ops_gradients(ctx, name, torch_fn, numpy_fn, positive):
    shape = {"transposes": (2, 3, 2), "t_and_T": (2, 3, 3), "views": (2, 3, 2),
             "sum_dims_keepdim": (2, 3, 2)}.get(name, (3, 4))  # fmt: skip
    _check(torch_fn, numpy_fn, shape, positive=positive)


def test_cat_and_stack_gradients(ctx):
    _check(lambda a, b: torch.cat([a, b * 2], dim=1), lambda a, b: np.concatenate([a, b * 2], 1),
           (2, 3), (2, 1))  # fmt: skip
    _check(lambda a, b: torch.stack((a, b), -1), lambda a, b: np.stack((a, b), -1), (2, 3), (2, 3))
    assert torch.concatenate is torch.cat


def _layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def test_linear_layer_norm_and_mse_gradients(ctx):
    _check(F.linear, lambda x, w, b: x @ w.T + b, (2, 3, 4), (5, 4), (5,))
    _check(lambda x, w: F.linear(x, w), lambda x, w: x @ w.T, (3, 4), (2, 4))
    _check(lambda x, w, b: F.layer_norm(x, (4,), w, b), _layer_norm, (3, 4), (4,), (4,))
    _check(lambda x, y: F.mse_loss(x, y), lambda x, y: ((x - y) ** 2).mean(), (3, 4), (3, 4))
    _check(lambda x, y: F.mse_loss(x, y, reduction="sum"), lambda x, y: ((x - y) ** 2).sum(),
           (3, 4), (3, 4))  # fmt: skip
    _check(lambda x, y: F.mse_loss(x, y, reduction="none"), lambda x, y: (x - y) ** 2,
           (3, 4), (3, 4))  # fmt: skip


def _cross_entropy(x, t, reduction, ignore=-100):
    logp = np.log(_softmax(x, 1))
    picked = -np.take_along_axis(logp, np.where(t == ignore, 0, t)[:, None], 1)[:, 0]
    picked = np.where(t == ignore, 0.0, picked)
    return picked.sum() / (t != ignore).sum() if reduction == "mean" else picked.sum()


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_and_nll_gradients(ctx, reduction):
    target = np.array([2, 0, 1, 2])
    t = torch.tensor(target)
    _check(lambda x: F.cross_entropy(x, t, reduction=reduction),
           lambda x: _cross_entropy(x, target, reduction), (4, 3))  # fmt: skip
    _check(lambda x: nn.CrossEntropyLoss(ignore_index=1, reduction=reduction)(x, t),
           lambda x: _cross_entropy(x, target, reduction, ignore=1), (4, 3))  # fmt: skip
    _check(lambda x: F.nll_loss(x.log_softmax(1), t, reduction=reduction),
           lambda x: _cross_entropy(x, target, reduction), (4, 3))  # fmt: skip


def test_embedding_and_dropout_gradients(ctx):
    idx = np.array([[0, 2], [2, 3]])
    _check(lambda w: F.embedding(torch.tensor(idx), w), lambda w: w[idx], (4, 3))
    emb = nn.Embedding(5, 2, padding_idx=0)
    emb(torch.tensor([0, 1, 1])).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy(), [[0, 0], [2, 2], [0, 0], [0, 0],
                                                             [0, 0]])  # fmt: skip
    torch.manual_seed(3)
    x = torch.tensor(rand((8, 16), 1), requires_grad=True)
    out = F.dropout(x, p=0.25)
    out.sum().backward()
    kept = out.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 1 / 0.75, 0.0), rtol=1e-6)
    torch.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x.detach(), p=0.25).numpy(), out.detach().numpy())


def test_graph_records_names_leaves_and_stops(ctx):
    a = torch.ones(2, 2, requires_grad=True)
    b = torch.ones(2, 2)
    c = a + b
    assert c.grad_fn.name() == "AddBackward0" and repr(c.grad_fn).startswith("<AddBackward0")
    assert c.requires_grad and not c.is_leaf and a.is_leaf and b.is_leaf
    assert "grad_fn=<AddBackward0>" in repr(c)
    assert (a * 2).grad_fn.name() == "MulBackward0"
    assert (a @ b).grad_fn.name() == "MmBackward0"
    assert not (b * 2).requires_grad and (b * 2).grad_fn is None
    assert c.grad_fn.next_functions[0][0].variable is a
    for stopped in (a.detach() * 2, a.data * 2):
        assert not stopped.requires_grad and stopped.grad_fn is None
    with torch.no_grad():
        assert not (a * 2).requires_grad and not torch.is_grad_enabled()
        with torch.enable_grad():
            assert (a * 2).requires_grad
    with torch.inference_mode():
        assert not (a * 2).requires_grad
    torch.set_grad_enabled(False)
    assert not (a * 2).requires_grad
    torch.set_grad_enabled(True)
    with torch.set_grad_enabled(False):
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()

    @torch.no_grad()
    def untracked(t):
        return t * 2

    assert not untracked(a).requires_grad
    assert torch.autograd.no_grad is torch.no_grad


def test_backward_accumulates_and_frees(ctx):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * 2 * np.array([1.0, 2.0, 3.0]))
    with pytest.raises(TensorError, match="backward through the graph a second time"):
        y.backward()
    x.grad = None
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0, 6.0])
    with pytest.raises(TensorError, match="grad can be implicitly created only for scalar"):
        (x * 2).backward()
    x.grad = None
    (x * 2).backward(torch.tensor([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.0, 4.0])
    with pytest.raises(TensorError, match="does not require grad and does not have a grad_fn"):
        torch.ones(2).sum().backward()
    # one tensor reaching a leaf along two paths: the gradients add, the grads stay apart
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()
    a.grad.add_(1.0)
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 1.0])
    ga, gb = torch.autograd.grad((a * b).sum(), [a, b])
    np.testing.assert_allclose(ga.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(gb.numpy(), [1.0, 2.0])
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 2.0])  # grad() leaves .grad alone


def test_in_place_and_unsupported_ops_raise(ctx):
    w = torch.ones(3, requires_grad=True)
    for op in (lambda: w.add_(1), lambda: w.mul_(2), lambda: w.zero_(), lambda: w.copy_(w * 1)):
        with pytest.raises(TensorError, match="a leaf Variable that requires grad is being used"):
            op()
    h = w * 2
    with pytest.raises(TensorError, match="relu_: an in-place op on a view of a tensor that is"):
        h[:2].relu_()  # (in-place ops on whole tensors are recorded: test_autograd_in_place.py)
    with torch.no_grad():
        w.add_(1)  # as torch: allowed without recording
    np.testing.assert_allclose(w.detach().numpy(), [2.0, 2.0, 2.0])
    out = torch.digamma(w * 2).sum()  # no formula for digamma: a node that refuses
    assert out.requires_grad
    with pytest.raises(TensorError, match=r"backward through torch\.digamma is not supported yet"):
        out.backward()
    with pytest.raises(TensorError, match=r"backward through torch\.Tensor\.digamma"):
        w.digamma().sum().backward()
    assert w.grad is None
    assert not w.argmax().dtype.is_floating_point


def test_two_layer_mlp_sgd_matches_numpy(ctx):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    params = {k: v.numpy().astype(np.float64) for k, v in model.state_dict().items()}
    x_np, y_np = rand((16, 6), 5).astype(np.float32), rand((16, 3), 6).astype(np.float32)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    buf = {}
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        # NumPy: the same step
        h = x_np @ params["0.weight"].T + params["0.bias"]
        r = np.maximum(h, 0)
        o = r @ params["2.weight"].T + params["2.bias"]
        go = 2 * (o - y_np) / o.size
        grads = {"2.weight": go.T @ r, "2.bias": go.sum(0)}
        gh = (go @ params["2.weight"]) * (h > 0)
        grads |= {"0.weight": gh.T @ x_np, "0.bias": gh.sum(0)}
        for k, g in grads.items():
            buf[k] = g if k not in buf else 0.9 * buf[k] + g
            params[k] = params[k] - 0.1 * buf[k]
        for k, v in model.state_dict().items():
            np.testing.assert_allclose(v.numpy(), params[k], rtol=1e-4, atol=1e-5, err_msg=k)
    assert losses[-1] < losses[0]
    assert all(p.is_leaf for p in model.parameters())


def test_linear_backward_costs_about_two_matmuls():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        lin = nn.Linear(256, 256, bias=False)
        x = torch.ones(128, 256, requires_grad=True)
        w = lin.weight.detach()
        before = context.now
        x.detach() @ w.T
        matmul = context.now - before
        out = lin(x)
        g = torch.ones(128, 256)
        before = context.now
        out.backward(g)
        backward = context.now - before
        assert 1.6 * matmul <= backward <= 2.6 * matmul
        with torch.no_grad():
            before = context.now
            lin(x)
            assert context.now - before <= 1.05 * matmul


def test_a_path_that_gives_no_gradient_does_not_hold_back_the_others(ctx):
    # An op whose backward gives no gradient (None) to an input that requires grad: that
    # input's other path must still reach it (the engine counted both edges).
    from kernbench.torch.autograd.formulas import recorded, untracked

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    blocked = recorded(untracked(lambda t: t * 1.0, x), "Blocked", (x,), lambda g: (None,))
    y = blocked * 3.0 + x * 2.0
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    # and one whose every path gives none leaves .grad alone
    z = torch.tensor([1.0], requires_grad=True)
    w = recorded(untracked(lambda t: t * 1.0, z), "Blocked", (z,), lambda g: (None,))
    (w * 5.0).sum().backward()
    assert z.grad is None


def test_numpy_of_a_tensor_that_requires_grad_is_refused_as_in_torch(ctx):
    from kernbench.errors import TensorRuntimeError

    w = torch.tensor([1.5, -2.0, 0.25], requires_grad=True)
    y = w * 2.0
    for t in (w, y):
        with pytest.raises(
            TensorRuntimeError,
            match=r"Can't call numpy\(\) on Tensor that "
            r"requires grad\. Use tensor\.detach\(\)\.numpy\(\) instead",
        ) as err:
            t.numpy()
        assert isinstance(err.value, RuntimeError)  # what torch raises
        with pytest.raises(RuntimeError, match="requires grad"):
            np.asarray(t)  # torch's __array__ refuses it too
    np.testing.assert_array_equal(w.detach().numpy(), [1.5, -2.0, 0.25])
    np.testing.assert_array_equal(y.numpy(force=True), [3.0, -4.0, 0.5])
    # What torch reads from any tensor: item(), tolist(), allclose, equal.
    assert y.sum().item() == -0.5 and w.tolist() == [1.5, -2.0, 0.25]
    assert torch.allclose(y, 2 * w) and torch.equal(w, w)
    with torch.no_grad():
        z = w * 2.0
    np.testing.assert_array_equal(z.numpy(), [3.0, -4.0, 0.5])


def test_view_reshape_and_expand_as_take_grad_from_self_only(ctx):
    """As torch: ``other`` in view_as/reshape_as/expand_as gives a shape, not a history."""
    a = torch.ones(4)
    b = torch.ones(2, 2, requires_grad=True)
    wide = torch.ones(3, 4, requires_grad=True)
    for out in (a.view_as(b), a.reshape_as(b), a.expand_as(wide)):
        assert not out.requires_grad and out.grad_fn is None
    w = torch.ones(4, requires_grad=True)
    (w.view_as(b) * 2.0).sum().backward()
    (w.expand_as(wide) * 3.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full(4, 2.0 + 9.0, np.float32))
