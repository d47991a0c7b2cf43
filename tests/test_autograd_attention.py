"""Backward formulas of attention and masking (ADR 0020's addendum): gradients against NumPy
central differences in float64 for F.scaled_dot_product_attention (causal, bool and float
masks, scale, enable_gqa, dropout with the forward's mask), masked_fill, torch.where,
tril/triu, narrow, split, chunk and unbind (some results unused); a tiny nanoGPT whose
sdpa path and manual masked-softmax path give the same loss and gradients, and whose SGD
step moves parameters as central differences of its loss say."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check, numeric_grad, rand

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _check(torch_fn, numpy_fn, *shapes, seed=0):
    """Gradients checked (see gradcheck.check); the output's node name."""
    return check(torch_fn, numpy_fn, *shapes, seed=seed, atol=1e-7).grad_fn.name()


def _softmax(x, d):
    e = np.exp(x - x.max(d, keepdims=True))
    return e / e.sum(d, keepdims=True)


def _np_sdpa(q, k, v, mask=None, causal=False, scale=None, groups=1, keep=None, p=0.0):
    if groups > 1:
        k, v = np.repeat(k, groups, axis=-3), np.repeat(v, groups, axis=-3)
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * factor
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    elif mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    w = _softmax(s, -1)
    if keep is not None:
        w = w * keep * float(np.float32(1) / np.float32(1 - p))
    return w @ v


SDPA = F.scaled_dot_product_attention


def test_sdpa_gradients_causal_masks_scale_and_groups(ctx):
    q, k, v = (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)
    assert _check(lambda a, b, c: SDPA(a, b, c), _np_sdpa, q, k, v) == (
        "ScaledDotProductEfficientAttentionBackward0"
    )
    _check(lambda a, b, c: SDPA(a, b, c, is_causal=True, scale=0.7),
           lambda a, b, c: _np_sdpa(a, b, c, causal=True, scale=0.7), q, k, v)  # fmt: skip
    bool_mask = rand((3, 5), 7) > 0
    bool_mask[:, 0] = True  # no row left without a key
    mask_t = torch.tensor(bool_mask)
    _check(lambda a, b, c: SDPA(a, b, c, attn_mask=mask_t),
           lambda a, b, c: _np_sdpa(a, b, c, mask=bool_mask), q, k, v)  # fmt: skip
    # a float mask, broadcast over the batch, is added to the scores; it gets a gradient too
    _check(lambda a, b, c, m: SDPA(a, b, c, attn_mask=m),
           lambda a, b, c, m: _np_sdpa(a, b, c, mask=m), q, k, v, (2, 1, 3, 5))  # fmt: skip
    _check(lambda a, b, c, m: SDPA(a, b, c, attn_mask=m, scale=2.0),  # a mask of the scores' shape
           lambda a, b, c, m: _np_sdpa(a, b, c, mask=m, scale=2.0),
           q, k, v, (2, 2, 3, 5))  # fmt: skip
    fixed = rand((3, 5), 8)
    fixed_t = torch.tensor(fixed, dtype=torch.float64)
    _check(lambda a, b, c: SDPA(a, b, c, attn_mask=fixed_t, scale=0.3),
           lambda a, b, c: _np_sdpa(a, b, c, mask=fixed, scale=0.3), q, k, v)  # fmt: skip
    # grouped-query attention: 4 query heads over 2 key/value heads; a key broadcast over batch
    _check(lambda a, b, c: SDPA(a, b, c, is_causal=True, enable_gqa=True),
           lambda a, b, c: _np_sdpa(a, b, c, causal=True, groups=2),
           (2, 4, 3, 4), (1, 2, 3, 4), (2, 2, 3, 2))  # fmt: skip
    # only some inputs require grad
    qt = torch.tensor(rand(q, 1), dtype=torch.float64, requires_grad=True)
    kt, vt = torch.tensor(rand(k, 2)), torch.tensor(rand(v, 3))
    SDPA(qt, kt, vt).sum().backward()
    expected = numeric_grad(lambda a: float(_np_sdpa(a, rand(k, 2), rand(v, 3)).sum()),
                             [rand(q, 1)], 0)  # fmt: skip
    np.testing.assert_allclose(qt.grad.numpy(), expected, rtol=1e-5, atol=1e-7)


def test_sdpa_dropout_reuses_the_forward_mask(ctx):
    p, shape_q, shape_kv = 0.3, (2, 2, 4, 3), (2, 2, 4, 3)
    arrays = [rand(shape_q, 1), rand(shape_kv, 2), rand(shape_kv, 3)]
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    torch.manual_seed(11)
    out = SDPA(*leaves, dropout_p=p, is_causal=True)
    # the same generator state draws the same mask through F.dropout (one draw, same shape)
    torch.manual_seed(11)
    keep = F.dropout(torch.ones(2, 2, 4, 4, dtype=torch.float64), p).numpy() != 0
    assert 0 < keep.sum() < keep.size

    def f(q, k, v):
        return _np_sdpa(q, k, v, causal=True, keep=keep, p=p)

    np.testing.assert_allclose(out.detach().numpy(), f(*arrays), rtol=1e-10, atol=1e-12)
    w = rand(out.shape, 99)
    (out * torch.tensor(w, dtype=torch.float64)).sum().backward()
    for i, leaf in enumerate(leaves):
        expected = numeric_grad(lambda *a: float(np.sum(f(*a) * w)), arrays, i)
        np.testing.assert_allclose(leaf.grad.numpy(), expected, rtol=1e-5, atol=1e-7)
    # dropout_p=1 zeroes the weights: zero gradients
    x = torch.tensor(arrays[0], dtype=torch.float64, requires_grad=True)
    SDPA(x, x, x, dropout_p=1.0).sum().backward()
    assert not x.grad.numpy().any()


def test_masked_fill_and_where_gradients(ctx):
    mask = rand((3, 1), 5) > 0
    mask_t = torch.tensor(mask)
    _check(lambda x: x.masked_fill(mask_t, float("-inf")).exp(),
           lambda x: np.exp(np.where(mask, -np.inf, x)), (3, 4))  # fmt: skip
    assert _check(lambda x: torch.masked_fill(x, mask_t, 2.5),
                  lambda x: np.where(mask, 2.5, x), (3, 4)) == "MaskedFillBackward0"  # fmt: skip
    # a 0-dim tensor value gets the sum of the filled elements' gradients
    assert _check(lambda x, val: x.masked_fill(mask_t, val.reshape(())),
                  lambda x, val: np.where(mask, val.reshape(()), x), (3, 4), (1,)) == (
        "MaskedFillBackward1")  # fmt: skip
    cond = rand((2, 3), 6) > 0
    c = torch.tensor(cond)
    assert _check(lambda a, b: torch.where(c, a, b), lambda a, b: np.where(cond, a, b),
                  (2, 3), (3,)) == "WhereBackward0"  # fmt: skip
    _check(lambda a: torch.where(c, a, 0.5), lambda a: np.where(cond, a, 0.5), (2, 1))
    _check(lambda b: torch.where(c, -1, b), lambda b: np.where(cond, -1, b), (1, 3))
    _check(lambda a, b: a.where(c, b), lambda a, b: np.where(cond, a, b), (2, 3), (2, 3))
    _check(lambda a: a.where(c, 0.0), lambda a: np.where(cond, a, 0.0), (2, 3))
    # a float32 branch promoted by a float64 one gets a float32 gradient
    a32 = torch.ones(2, 3, requires_grad=True)
    torch.where(c, a32, torch.zeros(2, 3, dtype=torch.float64)).sum().backward()
    assert a32.grad.dtype is torch.float32
    np.testing.assert_array_equal(a32.grad.numpy(), cond.astype(np.float32))


def test_tril_triu_and_narrow_gradients(ctx):
    assert _check(lambda x: x.tril(), np.tril, (3, 4)) == "TrilBackward0"
    assert _check(lambda x: torch.triu(x, 1), lambda x: np.triu(x, 1), (2, 3, 3)) == (
        "TriuBackward0"
    )
    _check(lambda x: x.tril(-1), lambda x: np.tril(x, -1), (4, 3))
    assert _check(lambda x: x.narrow(1, 1, 2), lambda x: x[:, 1:3], (3, 4)) == "SliceBackward0"
    _check(lambda x: torch.narrow(x, -1, -3, 2), lambda x: x[..., 1:3], (2, 4))


def test_split_chunk_unbind_with_some_results_used(ctx):
    x_np = rand((2, 7), 3)
    # two of three pieces used, one of them twice
    assert _check(lambda x: (lambda p: p[0] * 2 + p[2][:, :3] * p[0])(x.split(3, dim=1)),
                  lambda x: x[:, 0:3] * 2 + x[:, 6:7][:, :3] * x[:, 0:3], (2, 7)) == (
        "AddBackward0")  # fmt: skip
    x = torch.tensor(x_np, dtype=torch.float64, requires_grad=True)
    parts = x.split([2, 4, 1], dim=-1)
    assert [p.grad_fn.name() for p in parts] == ["SplitWithSizesBackward0"] * 3
    parts[1].sum().backward()
    expected = np.zeros((2, 7))
    expected[:, 2:6] = 1
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    _check(lambda x: torch.split(x, 2)[1] * 3, lambda x: x[2:4] * 3, (5, 2))
    _check(lambda x: x.chunk(3, 1)[-1], lambda x: x[:, 4:], (2, 5))
    _check(lambda x: torch.chunk(x, 2, dim=0)[0].exp(), lambda x: np.exp(x[:2]), (3, 2))
    q, k, v = None, None, None

    def qkv(x):
        nonlocal q, k, v
        q, k, v = x.unbind(0)
        return q * v

    assert _check(qkv, lambda x: x[0] * x[2], (3, 2, 2)) == "MulBackward0"
    assert k.grad_fn.name() == "UnbindBackward0"
    _check(lambda x: torch.unbind(x, dim=-1)[1], lambda x: x[..., 1], (2, 3))
    # a split whose pieces all reach the loss: each piece's gradient lands in its place
    _check(lambda x: sum(p.sum(1, keepdim=True) * (i + 1) for i, p in enumerate(x.split(2, 1))),
           lambda x: x[:, :2].sum(1, keepdims=True) + 2 * x[:, 2:4].sum(1, keepdims=True)
           + 3 * x[:, 4:].sum(1, keepdims=True), (2, 5))  # fmt: skip


# -- a tiny nanoGPT ------------------------------------------------------------------------------
class _Attention(nn.Module):
    def __init__(self, n_embd, n_head, block, dropout):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout, self.resid_dropout = nn.Dropout(dropout), nn.Dropout(dropout)
        self.n_head, self.n_embd, self.dropout, self.flash = n_head, n_embd, dropout, True
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                is_causal=True,
            )  # fmt: skip
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class _Block(nn.Module):
    def __init__(self, n_embd, n_head, block, dropout):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = _Attention(n_embd, n_head, block, dropout)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout))  # fmt: skip

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class _GPT(nn.Module):
    def __init__(self, vocab=32, block=8, n_embd=16, n_head=2, n_layer=2, dropout=0.0):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([_Block(n_embd, n_head, block, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def set_flash(self, flash):
        for block in self.h:
            block.attn.flash = flash

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def _batch(vocab=32, t=8):
    rng = np.random.default_rng(4)
    idx, tgt = rng.integers(0, vocab, (2, t)), rng.integers(0, vocab, (2, t))
    tgt[1, -1] = -1
    return torch.tensor(idx), torch.tensor(tgt)


def _loss_and_grads(model, idx, tgt, flash, seed=0):
    model.set_flash(flash)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss = model(idx, tgt)
    loss.backward()
    return loss.item(), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_tiny_gpt_sdpa_and_manual_paths_agree(ctx, dropout):
    torch.manual_seed(0)
    model = _GPT(dropout=dropout)
    idx, tgt = _batch()
    loss_f, grads_f = _loss_and_grads(model, idx, tgt, flash=True, seed=3)
    loss_m, grads_m = _loss_and_grads(model, idx, tgt, flash=False, seed=3)
    assert math.isfinite(loss_f)
    assert loss_f == pytest.approx(loss_m, rel=1e-6)
    assert grads_f.keys() == grads_m.keys() and "h.0.attn.c_attn.weight" in grads_f
    for name, g in grads_f.items():
        assert np.abs(g).max() > 0, name
        np.testing.assert_allclose(g, grads_m[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_tiny_gpt_sgd_step_matches_central_differences(ctx):
    torch.manual_seed(1)
    model = _GPT(n_layer=2).double()
    idx, tgt = _batch()
    entries = [("h.0.attn.c_attn.weight", (3, 5)), ("h.0.attn.c_attn.weight", (20, 1)),
               ("h.1.attn.c_attn.weight", (40, 7)), ("h.1.attn.c_attn.bias", (3,)),
               ("h.1.attn.c_attn.bias", (35,)),
               ("wte.weight", (2, 3))]  # fmt: skip
    params = dict(model.named_parameters())
    with torch.no_grad():
        before = {n: params[n].detach().numpy().copy() for n, _ in entries}

    def loss_at(name, index, delta):
        with torch.no_grad():
            p = params[name]
            p[index] = before[name][index] + delta
            value = model(idx, tgt).item()
            p[index] = before[name][index]
        return value

    eps = 1e-6
    numeric = [(loss_at(n, i, eps) - loss_at(n, i, -eps)) / (2 * eps) for n, i in entries]
    opt = optim.SGD(model.parameters(), lr=0.5)
    opt.zero_grad()
    model(idx, tgt).backward()
    opt.step()
    for (name, index), g in zip(entries, numeric, strict=True):
        assert abs(g) > 1e-6, name
        moved = params[name].detach().numpy()[index]
        np.testing.assert_allclose(moved, before[name][index] - 0.5 * g, rtol=1e-6, atol=1e-8,
                                   err_msg=f"{name}{index}")  # fmt: skip


def test_sdpa_backward_costs_under_three_forwards():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        q, k, v = (torch.ones(2, 4, 128, 64, requires_grad=True) for _ in range(3))
        with torch.no_grad():
            before = context.now
            F.scaled_dot_product_attention(q, k, v)
            forward = context.now - before
        out = F.scaled_dot_product_attention(q, k, v)
        before = context.now
        out.backward(torch.ones(2, 4, 128, 64))
        backward = context.now - before
        assert 1.5 * forward <= backward <= 3.0 * forward
