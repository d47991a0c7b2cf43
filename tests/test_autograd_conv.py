"""Backward of conv1d/conv2d, the max, average and adaptive pools and batch_norm: gradients
against NumPy central differences (float64) over stride, padding, dilation, groups,
ceil_mode, count_include_pad and divisor_override; a small CNN's SGD step against NumPy;
node names; the simulated cost of a convolution's backward; and the fallback node for an
argument combination without a formula."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gradcheck import check, numeric_grad, rand

import kernbench.torch as torch
import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _check(torch_fn, numpy_fn, *shapes, seed=0):
    return check(torch_fn, numpy_fn, *shapes, seed=seed)


# -- NumPy references (N, C, H, W; a 1-D op is the 2-D one with H = 1) ----------------------
def _conv(x, w, b, stride, before, after, dilation, groups):
    n, c, _, _ = x.shape
    cout, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (before[0], after[0]), (before[1], after[1])))
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, cout, oh, ow))
    og = cout // groups
    for g, i, j in itertools.product(range(groups), range(kh), range(kw)):
        patch = xp[:, g * cg : (g + 1) * cg,
                   i * dh : i * dh + sh * (oh - 1) + 1 : sh,
                   j * dw : j * dw + sw * (ow - 1) + 1 : sw]  # fmt: skip
        out[:, g * og : (g + 1) * og] += np.einsum(
            "ncij,oc->noij", patch, w[g * og : (g + 1) * og, :, i, j]
        )
    return out if b is None else out + b[None, :, None, None]


def _conv1(x, w, b, stride, before, after, dilation, groups):
    out = _conv(x[:, :, None], w[:, :, None], b, (1, stride), (0, before), (0, after),
                (1, dilation), groups)  # fmt: skip
    return out[:, :, 0]


def _pooled(size, k, p, s, d, ceil):
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool(x, kernel, stride, pad, dilation, ceil, kind, include=True, divisor=None):
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, pad, dilation
    oh, ow = _pooled(h, kh, ph, sh, dh, ceil), _pooled(w, kw, pw, sw, dw, ceil)
    out = np.zeros((n, c, oh, ow))
    for a, b in itertools.product(range(oh), range(ow)):
        h0, w0 = a * sh - ph, b * sw - pw
        rows = [h0 + i * dh for i in range(kh) if 0 <= h0 + i * dh < h]
        cols = [w0 + j * dw for j in range(kw) if 0 <= w0 + j * dw < w]
        window = x[:, :, rows][:, :, :, cols]
        if kind == "max":
            out[:, :, a, b] = window.max((2, 3))
            continue
        if divisor is not None:
            count = divisor
        elif include:
            count = (min(h0 + kh, h + ph) - h0) * (min(w0 + kw, w + pw) - w0)
        else:
            count = len(rows) * len(cols)
        out[:, :, a, b] = window.sum((2, 3)) / count
    return out


def _adaptive(x, size, kind):
    h, w = x.shape[2:]
    oh, ow = size
    out = np.zeros((*x.shape[:2], oh, ow))
    for a, b in itertools.product(range(oh), range(ow)):
        window = x[:, :, a * h // oh : -(-(a + 1) * h // oh), b * w // ow : -(-(b + 1) * w // ow)]
        out[:, :, a, b] = window.max((2, 3)) if kind == "max" else window.mean((2, 3))
    return out


def _batch_norm(x, w, b, eps=1e-5):
    dims = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mu = x.mean(dims, keepdims=True)
    var = ((x - mu) ** 2).mean(dims, keepdims=True)
    out = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        out = out * w.reshape(shape)
    return out if b is None else out + b.reshape(shape)


# -- convolutions -----------------------------------------------------------------------------
CONV2D = [
    ("plain", dict(), (2, 2, 5, 5), (3, 2, 3, 3), True, ((1, 1), (0, 0), (0, 0), (1, 1), 1)),
    ("stride2_pad1", dict(stride=2, padding=1), (2, 2, 6, 5), (3, 2, 3, 3), True,
     ((2, 2), (1, 1), (1, 1), (1, 1), 1)),
    ("dilation2_pad12", dict(dilation=2, padding=(1, 2)), (1, 2, 6, 6), (2, 2, 2, 3), False,
     ((1, 1), (1, 2), (1, 2), (2, 2), 1)),
    ("groups2_stride21", dict(groups=2, stride=(2, 1)), (2, 4, 5, 4), (4, 2, 2, 2), True,
     ((2, 1), (0, 0), (0, 0), (1, 1), 2)),
    ("same_even_kernel", dict(padding="same"), (1, 2, 4, 5), (2, 2, 2, 4), True,
     ((1, 1), (0, 1), (1, 2), (1, 1), 1)),
    ("valid_strided_dilated", dict(padding="valid", stride=3, dilation=(1, 2)), (1, 1, 7, 8),
     (2, 1, 2, 2), True, ((3, 3), (0, 0), (0, 0), (1, 2), 1)),
    ("big_padding", dict(padding=2, stride=2), (1, 1, 3, 3), (1, 1, 1, 2), True,
     ((2, 2), (2, 2), (2, 2), (1, 1), 1)),
]  # fmt: skip


@pytest.mark.parametrize("name,kwargs,xs,ws,bias,ref", CONV2D, ids=[c[0] for c in CONV2D])
def test_conv2d_gradients(ctx, name, kwargs, xs, ws, bias, ref):
    if bias:
        out = _check(lambda x, w, b: F.conv2d(x, w, b, **kwargs),
                     lambda x, w, b: _conv(x, w, b, *ref), xs, ws, (ws[0],))  # fmt: skip
    else:
        out = _check(lambda x, w: F.conv2d(x, w, **kwargs),
                     lambda x, w: _conv(x, w, None, *ref), xs, ws)  # fmt: skip
    assert out.grad_fn.name() == "ConvolutionBackward0"


def test_conv1d_unbatched_and_module_gradients(ctx):
    _check(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
           lambda x, w, b: _conv1(x, w, b, 2, 1, 1, 2, 2), (2, 4, 9), (4, 2, 3), (4,))  # fmt: skip
    _check(lambda x, w: F.conv1d(x, w, padding="same"),
           lambda x, w: _conv1(x, w, None, 1, 1, 2, 1, 1), (1, 2, 6), (3, 2, 4))  # fmt: skip
    _check(lambda x, w: F.conv2d(x, w, padding=1),  # unbatched (C, H, W)
           lambda x, w: _conv(x[None], w, None, (1, 1), (1, 1), (1, 1), (1, 1), 1)[0],
           (2, 4, 3), (2, 2, 3, 3))  # fmt: skip
    # only the weight requires grad (a first layer): the input gets no gradient
    torch.manual_seed(0)
    conv = nn.Conv2d(1, 2, 3, stride=2)
    x = torch.tensor(rand((2, 1, 5, 5), 4), dtype=torch.float32)
    conv(x).sum().backward()
    xn = x.numpy().astype(np.float64)
    expected = numeric_grad(
        lambda w: _conv(xn, w, None, (2, 2), (0, 0), (0, 0), (1, 1), 1).sum(),
        [conv.weight.detach().numpy().astype(np.float64)], 0,
    )  # fmt: skip
    np.testing.assert_allclose(conv.weight.grad.numpy(), expected, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(conv.bias.grad.numpy(), [8.0, 8.0])
    assert x.grad is None


# -- pools ----------------------------------------------------------------------------------
def _ref(kernel, stride, pad, dilation, ceil, kind, **options):
    return lambda x: _pool(x, kernel, stride, pad, dilation, ceil, kind, **options)


K2, K3, ONE, NONE = (2, 2), (3, 3), (1, 1), (0, 0)
POOL2D = [
    ("max_k2", lambda x: F.max_pool2d(x, 2), _ref(K2, K2, NONE, ONE, False, "max"), (2, 2, 5, 4)),
    (
        "max_k3_s2_p1",
        lambda x: F.max_pool2d(x, 3, 2, 1),
        _ref(K3, K2, ONE, ONE, False, "max"),
        (1, 2, 6, 5),
    ),
    (
        "max_dilation_ceil",
        lambda x: F.max_pool2d(x, (2, 3), (2, 1), 1, dilation=2, ceil_mode=True),
        _ref((2, 3), (2, 1), ONE, K2, True, "max"),
        (1, 2, 6, 7),
    ),
    (
        "max_module_indices",
        lambda x: nn.MaxPool2d(2, 1, return_indices=True)(x)[0],
        _ref(K2, ONE, NONE, ONE, False, "max"),
        (1, 1, 4, 4),
    ),
    ("avg_k2", lambda x: F.avg_pool2d(x, 2), _ref(K2, K2, NONE, ONE, False, "avg"), (2, 2, 5, 4)),
    (
        "avg_overlap",
        lambda x: F.avg_pool2d(x, 3, 1),
        _ref(K3, ONE, NONE, ONE, False, "avg"),
        (1, 2, 5, 4),
    ),
    (
        "avg_pad_include",
        lambda x: F.avg_pool2d(x, 3, 2, 1),
        _ref(K3, K2, ONE, ONE, False, "avg"),
        (1, 2, 6, 5),
    ),
    (
        "avg_pad_exclude_ceil",
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        _ref(K3, K2, ONE, ONE, True, "avg", include=False),
        (1, 2, 6, 5),
    ),
    (
        "avg_ceil_include",
        lambda x: F.avg_pool2d(x, 2, ceil_mode=True),
        _ref(K2, K2, NONE, ONE, True, "avg"),
        (1, 2, 5, 5),
    ),
    (
        "avg_divisor",
        lambda x: F.avg_pool2d(x, (2, 3), (1, 2), 1, divisor_override=4),
        _ref((2, 3), (1, 2), ONE, ONE, False, "avg", divisor=4),
        (1, 2, 4, 6),
    ),
    (
        "adaptive_avg_irregular",
        lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
        lambda x: _adaptive(x, (2, 3), "avg"),
        (2, 2, 5, 7),
    ),
    (
        "adaptive_avg_regular",
        lambda x: nn.AdaptiveAvgPool2d(2)(x),
        lambda x: _adaptive(x, (2, 2), "avg"),
        (1, 2, 4, 6),
    ),
    (
        "adaptive_avg_global",
        lambda x: F.adaptive_avg_pool2d(x, 1),
        lambda x: _adaptive(x, (1, 1), "avg"),
        (2, 3, 3, 3),
    ),
    (
        "adaptive_max",
        lambda x: F.adaptive_max_pool2d(x, (2, 3)),
        lambda x: _adaptive(x, (2, 3), "max"),
        (1, 2, 5, 7),
    ),
]


@pytest.mark.parametrize("name,torch_fn,numpy_fn,shape", POOL2D, ids=[p[0] for p in POOL2D])
def test_pool2d_gradients(ctx, name, torch_fn, numpy_fn, shape):
    out = _check(torch_fn, numpy_fn, shape)
    names = {"max": "MaxPool2DWithIndicesBackward0", "avg": "AvgPool2DBackward0",
             "adaptive_avg": "AdaptiveAvgPool2DBackward0",
             "adaptive_max": "AdaptiveMaxPool2DBackward0"}  # fmt: skip
    kind = "_".join(name.split("_")[:2]) if name.startswith("adaptive") else name.split("_")[0]
    assert out.grad_fn.name() == names[kind]


def _as_2d(fn):
    return lambda x: fn(x[:, :, None])[:, :, 0]


def test_pool1d_gradients_and_indices(ctx):
    one = (0, 1)
    _check(
        lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True),
        _as_2d(_ref((1, 3), (1, 2), one, ONE, True, "max")),
        (2, 2, 8),
    )
    _check(
        lambda x: F.max_pool1d(x, 2, dilation=2),
        _as_2d(_ref((1, 2), (1, 2), NONE, (1, 2), False, "max")),
        (1, 2, 7),
    )
    _check(
        lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        _as_2d(_ref((1, 3), (1, 2), one, ONE, True, "avg", include=False)),
        (2, 2, 8),
    )
    _check(
        lambda x: F.avg_pool1d(x, 3, 2, 1),
        _as_2d(_ref((1, 3), (1, 2), one, ONE, False, "avg")),
        (1, 2, 7),
    )
    _check(
        lambda x: F.adaptive_avg_pool1d(x, 3),
        _as_2d(lambda x: _adaptive(x, (1, 3), "avg")),
        (2, 2, 7),
    )
    _check(
        lambda x: F.adaptive_max_pool1d(x, 3),
        _as_2d(lambda x: _adaptive(x, (1, 3), "max")),
        (1, 2, 7),
    )
    _check(  # unbatched (C, H, W)
        lambda x: F.max_pool2d(x, 2),
        lambda x: _pool(x[None], K2, K2, NONE, ONE, False, "max")[0],
        (2, 4, 4),
    )
    x = torch.tensor(rand((1, 1, 4, 4), 3), requires_grad=True)
    values, indices = F.max_pool2d(x, 2, return_indices=True)
    assert values.requires_grad and not indices.requires_grad and indices.dtype == torch.int64
    plain = F.max_pool2d(x.detach(), 2, return_indices=True)[1]
    np.testing.assert_array_equal(indices.numpy(), plain.numpy())
    values.sum().backward()
    assert x.grad.numpy().sum() == 4.0


# -- batch norm -----------------------------------------------------------------------------
def test_batch_norm_training_gradients(ctx):
    def bn(x, w=None, b=None):
        return F.batch_norm(x, None, None, w, b, training=True)

    out = _check(bn, _batch_norm, (3, 2, 2, 3), (2,), (2,))
    assert out.grad_fn.name() == "NativeBatchNormBackward0"
    _check(bn, lambda x: _batch_norm(x, None, None), (4, 3))
    _check(lambda x, w: bn(x, w), lambda x, w: _batch_norm(x, w, None), (2, 3, 4), (3,))
    # running statistics are updated as the forward's, and take no part in the gradient
    mean, var = torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    xs = rand((4, 2, 3), 7)
    x = torch.tensor(xs, requires_grad=True)
    F.batch_norm(x, mean, var, training=True, momentum=0.5).sum().backward()
    np.testing.assert_allclose(mean.numpy(), 0.5 * xs.mean((0, 2)), rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), 0.5 + 0.5 * xs.var((0, 2), ddof=1), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), 0.0, atol=1e-9)  # the sum of a normalized x


def test_batch_norm_eval_gradients_and_modules(ctx):
    rm, rv = rand((3,), 11), rand((3,), 12, 0.5, 1.5)

    def eval_bn(x, w, b):
        return F.batch_norm(x, torch.tensor(rm), torch.tensor(rv), w, b, training=False)

    def reference(x, w, b):
        shape = (1, -1, 1)
        return (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + 1e-5) * w.reshape(
            shape
        ) + b.reshape(shape)

    _check(eval_bn, reference, (2, 3, 4), (3,), (3,))
    bn = nn.BatchNorm2d(2)
    x = torch.tensor(rand((2, 2, 3, 3), 13), dtype=torch.float32, requires_grad=True)
    (bn(x) * bn(x)).sum().backward()
    xn = x.detach().numpy().astype(np.float64)
    expected = numeric_grad(lambda a: float((_batch_norm(a, None, None) ** 2).sum()), [xn], 0)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-3, atol=1e-3)
    assert bn.weight.grad is not None and bn.bias.grad is not None
    bn.eval()
    x.grad = None
    bn(x).sum().backward()
    scale = 1 / np.sqrt(bn.running_var.numpy().astype(np.float64) + 1e-5)
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(scale[:, None, None], (2, 2, 3, 3)),
                               rtol=1e-5)  # fmt: skip


def test_a_combination_without_a_formula_falls_back_to_the_refusing_node(ctx):
    running = torch.zeros(2, requires_grad=True)  # gradients of running statistics: none here
    x = torch.ones(3, 2, requires_grad=True)
    out = F.batch_norm(x, running, torch.ones(2), training=False)
    assert out.grad_fn.name() == "NotImplemented[nn.functional.batch_norm]"
    with pytest.raises(TensorError, match=r"backward through torch\.nn\.functional\.batch_norm"):
        out.sum().backward()


# -- a CNN training step --------------------------------------------------------------------
class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.norm = nn.BatchNorm2d(3)
        self.fc = nn.Linear(3 * 3 * 3, 4)

    def forward(self, x):
        x = self.norm(self.pool(F.relu(self.conv(x))))
        return self.fc(torch.flatten(x, 1))


def _net_loss(p, x, t):
    h = np.maximum(_conv(x, p["conv.weight"], p["conv.bias"], (1, 1), (1, 1), (1, 1), (1, 1), 1), 0)
    h = _pool(h, (2, 2), (2, 2), (0, 0), (1, 1), False, "max")
    h = _batch_norm(h, p["norm.weight"], p["norm.bias"])
    z = h.reshape(len(h), -1) @ p["fc.weight"].T + p["fc.bias"]
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -logp[np.arange(len(t)), t].mean()


def test_cnn_sgd_step_matches_central_differences_of_the_loss(ctx):
    torch.manual_seed(0)
    net = _Net()
    names = [n for n, _ in net.named_parameters()]
    params = {n: p.detach().numpy().astype(np.float64) for n, p in net.named_parameters()}
    x_np = rand((4, 1, 6, 6), 21).astype(np.float32)
    t_np = np.array([0, 3, 1, 2])
    opt = optim.SGD(net.parameters(), lr=0.5)
    opt.zero_grad()
    loss = F.cross_entropy(net(torch.from_numpy(x_np)), torch.tensor(t_np))
    loss.backward()
    opt.step()
    xs = x_np.astype(np.float64)
    assert abs(loss.item() - _net_loss(params, xs, t_np)) < 1e-5
    arrays = [params[n] for n in names]
    for i, name in enumerate(names):
        grad = numeric_grad(
            lambda *a: _net_loss(dict(zip(names, a, strict=True)), xs, t_np), arrays, i
        )
        updated = dict(net.named_parameters())[name].detach().numpy()
        np.testing.assert_allclose(updated, params[name] - 0.5 * grad, rtol=1e-4, atol=1e-5,
                                   err_msg=name)  # fmt: skip
    assert net.norm.num_batches_tracked.item() == 1


# -- cost -----------------------------------------------------------------------------------
def test_conv_backward_costs_simulated_time_in_proportion_to_the_forward():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.ones(8, 16, 12, 12, requires_grad=True)
        w = torch.ones(32, 16, 3, 3, requires_grad=True)
        before = context.now
        F.conv2d(x.detach(), w.detach(), padding=1)
        forward = context.now - before
        out = F.conv2d(x, w, padding=1)
        g = torch.ones(*out.shape)
        before = context.now
        out.backward(g)
        backward = context.now - before
        # two convolutions of the forward's FLOPs, plus the dense copies they read (the
        # input and the output gradient with batch and channels swapped, the flipped
        # weight, the weight gradient transposed back): about 3.3 forwards at this size
        assert 2.5 * forward <= backward <= 4.0 * forward
        # a first layer: only the weight's gradient, one convolution and its transposes
        out = F.conv2d(x.detach(), w, padding=1)
        before = context.now
        out.backward(g)
        weight_only = context.now - before
        assert 1.2 * forward <= weight_only <= 2.2 * forward  # about 1.7
        # a max pool's backward: a zero fill of the input's size and a scatter of the
        # output's (about 2.9 forwards; the forward also writes the indices, about 1.7)
        before = context.now
        F.max_pool2d(x.detach(), 2)
        pool = context.now - before
        y = F.max_pool2d(x, 2)
        assert 1.3 * pool <= context.now - before - pool <= 2.2 * pool
        before = context.now
        y.backward(torch.ones(*y.shape))
        assert 2.0 * pool <= context.now - before <= 4.0 * pool
