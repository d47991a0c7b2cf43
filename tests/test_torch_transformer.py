"""nn.Transformer and its encoder/decoder layers and stacks, and MultiheadAttention's backward.

Names, ``state_dict`` keys, defaults and error messages are torch's; forward values and
the gradients of the inputs and of every parameter are checked against a NumPy
reference of torch's slow path (central differences in float64 for the gradients),
sequence-first and ``batch_first``, post-norm and ``norm_first``.  The last test is
PyTorch's "Language Modeling with nn.Transformer" tutorial model, a few steps on a
repeated batch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError, TensorTypeError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn
from tests.gradcheck import numeric_grad

F64 = torch.float64


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _rand(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


# ------------------------------------------------------------------ NumPy reference (L, N, E)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layer_norm(x, p, name, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return y * p[f"{name}.weight"] + p.get(f"{name}.bias", 0.0)


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _relu(x):
    return np.maximum(x, 0)


def _additive(mask, padding, N):
    """(N, 1, L, S) or None from a (L, S) bool/float mask and an (N, S) bool/float padding."""
    total = None
    for m, shape in ((mask, lambda m: m[None, None]), (padding, lambda m: m[:, None, None])):
        if m is not None:
            add = np.where(m, -np.inf, 0.0) if m.dtype == bool else m
            total = shape(add) if total is None else total + shape(add)
    return total


def _mha(p, name, q, k, v, H, mask=None):
    L, N, E = q.shape
    S, D = k.shape[0], E // H
    W, b = p[f"{name}.in_proj_weight"], p[f"{name}.in_proj_bias"]

    def heads(x, i, n):
        y = x @ W[i * E : (i + 1) * E].T + b[i * E : (i + 1) * E]
        return y.reshape(n, N, H, D).transpose(1, 2, 0, 3)

    scores = heads(q, 0, L) @ heads(k, 1, S).swapaxes(-1, -2) / math.sqrt(D)
    if mask is not None:
        scores = scores + mask
    out = (_softmax(scores) @ heads(v, 2, S)).transpose(2, 0, 1, 3).reshape(L, N, E)
    return out @ p[f"{name}.out_proj.weight"].T + p[f"{name}.out_proj.bias"]


def _ff(p, x, act, prefix=""):
    h = act(x @ p[f"{prefix}linear1.weight"].T + p[f"{prefix}linear1.bias"])
    return h @ p[f"{prefix}linear2.weight"].T + p[f"{prefix}linear2.bias"]


def _encoder_layer(p, x, H, mask, norm_first, act, prefix=""):
    def sa(y):
        return _mha(p, f"{prefix}self_attn", y, y, y, H, mask)

    def norm(y, i):
        return _layer_norm(y, p, f"{prefix}norm{i}")

    if norm_first:
        x = x + sa(norm(x, 1))
        return x + _ff(p, norm(x, 2), act, prefix)
    x = norm(x + sa(x), 1)
    return norm(x + _ff(p, x, act, prefix), 2)


def _decoder_layer(p, x, mem, H, masks, norm_first, act, prefix=""):
    self_mask, cross_mask = masks

    def sa(y):
        return _mha(p, f"{prefix}self_attn", y, y, y, H, self_mask)

    def ca(y):
        return _mha(p, f"{prefix}multihead_attn", y, mem, mem, H, cross_mask)

    def norm(y, i):
        return _layer_norm(y, p, f"{prefix}norm{i}")

    if norm_first:
        x = x + sa(norm(x, 1))
        x = x + ca(norm(x, 2))
        return x + _ff(p, norm(x, 3), act, prefix)
    x = norm(x + sa(x), 1)
    x = norm(x + ca(x), 2)
    return norm(x + _ff(p, x, act, prefix), 3)


def _params(module):
    return {name: p.detach().numpy().copy() for name, p in module.named_parameters()}


def _randomise(module, seed=5):
    """Non-trivial values in every parameter (biases and norms too), so each one is seen."""
    with torch.no_grad():
        for i, p in enumerate(module.parameters()):
            p.copy_(torch.tensor(_rand(tuple(p.shape), seed + i) * 0.7, dtype=p.dtype))


def _check_grads(module, inputs, torch_fn, numpy_fn, atol=1e-6):
    """Forward values and the gradients of ``inputs`` and of every parameter of ``module``
    against central differences of ``numpy_fn(params, *inputs)`` (all in float64)."""
    names = [n for n, _ in module.named_parameters()]
    p = _params(module)
    leaves = [torch.tensor(a, dtype=F64, requires_grad=True) for a in inputs]
    out = torch_fn(*leaves)
    expected = numpy_fn(p, *inputs)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-9, atol=1e-9)
    w = _rand(expected.shape, 99)
    (out * torch.tensor(w, dtype=F64)).sum().backward()
    arrays = [a.copy() for a in inputs] + [p[n] for n in names]

    def scalar(*a):
        return float(
            np.sum(numpy_fn(dict(zip(names, a[len(inputs) :], strict=True)), *a[: len(inputs)]) * w)
        )

    got = [leaf.grad for leaf in leaves] + [dict(module.named_parameters())[n].grad for n in names]
    for i, grad in enumerate(got):
        label = f"input {i}" if i < len(inputs) else names[i - len(inputs)]
        assert grad is not None, label
        np.testing.assert_allclose(
            grad.numpy(), numeric_grad(scalar, arrays, i), rtol=1e-5, atol=atol, err_msg=label
        )
    return out


def _seq_first(x, batch_first):
    return x.transpose(1, 0, 2) if batch_first else x


# ---------------------------------------------------------------- MultiheadAttention backward


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_backward_reaches_inputs_and_projections(ctx, need_weights):
    L, S, N, E, H = 3, 4, 2, 4, 2
    mha = nn.MultiheadAttention(E, H, dtype=F64)
    _randomise(mha)
    padding = np.zeros((N, S), bool)
    padding[1, -1] = True
    mask = _rand((L, S), 7)

    def run(q, k, v):
        out, _ = mha(
            q,
            k,
            v,
            attn_mask=torch.tensor(mask, dtype=F64),
            key_padding_mask=torch.from_numpy(padding),
            need_weights=need_weights,
        )
        return out

    def reference(p, q, k, v):
        return _mha(p, "", q, k, v, H, _additive(mask, padding, N)).copy()

    def prefixed(p, q, k, v):
        return reference({f".{n}": a for n, a in p.items()}, q, k, v)

    _check_grads(
        mha, [_rand((L, N, E), 1), _rand((S, N, E), 2), _rand((S, N, E), 3)], run, prefixed
    )


def test_multihead_attention_refuses_an_integer_mask(ctx):
    mha = nn.MultiheadAttention(4, 2)
    x = torch.zeros(3, 1, 4)
    with pytest.raises(TensorTypeError, match="only bool and floating types of attn_mask"):
        mha(x, x, x, attn_mask=torch.zeros(3, 3, dtype=torch.int64))


# ------------------------------------------------------------------------- the encoder layer


ENCODER_KEYS = [
    "self_attn.in_proj_weight",
    "self_attn.in_proj_bias",
    "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",
    "linear1.weight",
    "linear1.bias",
    "linear2.weight",
    "linear2.bias",
    "norm1.weight",
    "norm1.bias",
    "norm2.weight",
    "norm2.bias",
]


def test_encoder_layer_names_defaults_and_errors(ctx):
    layer = nn.TransformerEncoderLayer(8, 2)
    assert list(layer.state_dict()) == ENCODER_KEYS
    assert [n for n, _ in layer.named_children()] == [
        "self_attn",
        "linear1",
        "dropout",
        "linear2",
        "norm1",
        "norm2",
        "dropout1",
        "dropout2",
    ]
    assert layer.linear1.out_features == 2048 and layer.dropout.p == 0.1
    assert layer.norm1.eps == 1e-5 and layer.norm_first is False
    assert layer.self_attn.batch_first is False and layer.self_attn.dropout == 0.1
    assert layer.activation is F.relu and layer.activation_relu_or_gelu == 1
    with_gelu = nn.TransformerEncoderLayer(8, 2, activation="gelu")
    assert with_gelu.activation is F.gelu and with_gelu.activation_relu_or_gelu == 2
    assert nn.TransformerEncoderLayer(8, 2, activation=torch.tanh).activation_relu_or_gelu == 0
    gelu = nn.GELU()
    with_module = nn.TransformerEncoderLayer(8, 2, activation=gelu)
    assert with_module.activation is gelu and "activation" in dict(with_module.named_children())
    no_bias = nn.TransformerEncoderLayer(8, 2, 16, bias=False)
    assert list(no_bias.state_dict()) == [
        "self_attn.in_proj_weight",
        "self_attn.out_proj.weight",
        "linear1.weight",
        "linear2.weight",
        "norm1.weight",
        "norm2.weight",
    ]
    with pytest.raises(TensorError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    small = nn.TransformerEncoderLayer(8, 2, 16)
    x = torch.zeros(3, 2, 8)
    with pytest.raises(TensorTypeError, match="only bool and floating types of src_mask"):
        small(x, src_mask=torch.zeros(3, 3, dtype=torch.int64))
    with pytest.raises(TensorError, match="Need attn_mask if specifying the is_causal hint"):
        small(x, is_causal=True)


@pytest.mark.parametrize(
    ("norm_first", "batch_first", "activation"),
    [(False, False, "relu"), (True, False, "gelu"), (False, True, "gelu"), (True, True, "relu")],
)
def test_encoder_layer_matches_numpy_forward_and_backward(ctx, norm_first, batch_first, activation):
    L, N, E, H, FF = 3, 2, 4, 2, 6
    layer = nn.TransformerEncoderLayer(
        E, H, FF, activation=activation, batch_first=batch_first, norm_first=norm_first, dtype=F64
    )
    _randomise(layer)
    layer.eval()  # dropout 0.1 off
    causal = np.triu(np.ones((L, L), bool), 1)
    padding = np.zeros((N, L), bool)
    padding[0, -1] = True
    act = _gelu if activation == "gelu" else _relu

    def run(x):
        return layer(
            x, src_mask=torch.from_numpy(causal), src_key_padding_mask=torch.from_numpy(padding)
        )

    def reference(p, x):
        y = _encoder_layer(
            p, _seq_first(x, batch_first), H, _additive(causal, padding, N), norm_first, act
        )
        return _seq_first(y, batch_first)

    shape = (N, L, E) if batch_first else (L, N, E)
    _check_grads(layer, [_rand(shape, 1)], run, reference)


def test_encoder_layer_unbatched_float_masks_and_train_without_dropout(ctx):
    L, E, H = 4, 4, 2
    layer = nn.TransformerEncoderLayer(E, H, 6, dropout=0.0, dtype=F64)
    _randomise(layer)
    x = _rand((L, E), 3)
    mask = _rand((L, L), 4)
    padding = np.array([0.0, 0.0, -1.5, 0.0])
    out = layer(
        torch.tensor(x, dtype=F64),
        src_mask=torch.tensor(mask, dtype=F64),
        src_key_padding_mask=torch.tensor(padding, dtype=F64),
    )
    expected = _encoder_layer(
        _params(layer), x[:, None], H, _additive(mask, padding[None], 1), False, _relu
    )
    assert tuple(out.shape) == (L, E)
    np.testing.assert_allclose(out.detach().numpy(), expected[:, 0], rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------- the decoder layer


def test_decoder_layer_names(ctx):
    layer = nn.TransformerDecoderLayer(8, 2, 16)
    assert [n for n, _ in layer.named_children()] == [
        "self_attn",
        "multihead_attn",
        "linear1",
        "dropout",
        "linear2",
        "norm1",
        "norm2",
        "norm3",
        "dropout1",
        "dropout2",
        "dropout3",
    ]
    assert list(layer.state_dict())[4:8] == [
        "multihead_attn.in_proj_weight",
        "multihead_attn.in_proj_bias",
        "multihead_attn.out_proj.weight",
        "multihead_attn.out_proj.bias",
    ]
    assert nn.TransformerDecoderLayer(8, 2).linear1.out_features == 2048


@pytest.mark.parametrize(("norm_first", "batch_first"), [(False, False), (True, True)])
def test_decoder_layer_matches_numpy_forward_and_backward(ctx, norm_first, batch_first):
    T, S, N, E, H, FF = 3, 4, 2, 4, 2, 5
    layer = nn.TransformerDecoderLayer(
        E, H, FF, batch_first=batch_first, norm_first=norm_first, dtype=F64
    )
    _randomise(layer, seed=11)
    layer.eval()
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=F64)
    memory_padding = np.zeros((N, S), bool)
    memory_padding[1, :2] = True
    tgt_padding = np.zeros((N, T), bool)
    tgt_padding[0, -1] = True

    def run(tgt, memory):
        return layer(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            tgt_key_padding_mask=torch.from_numpy(tgt_padding),
            memory_key_padding_mask=torch.from_numpy(memory_padding),
            tgt_is_causal=True,
        )

    def reference(p, tgt, memory):
        masks = (
            _additive(tgt_mask.numpy(), tgt_padding, N),
            _additive(None, memory_padding, N),
        )
        tgt, memory = _seq_first(tgt, batch_first), _seq_first(memory, batch_first)
        return _seq_first(_decoder_layer(p, tgt, memory, H, masks, norm_first, _relu), batch_first)

    shapes = [(N, T, E), (N, S, E)] if batch_first else [(T, N, E), (S, N, E)]
    _check_grads(layer, [_rand(shapes[0], 1), _rand(shapes[1], 2)], run, reference)


# ------------------------------------------------------------------------------ the stacks


def test_encoder_stack_clones_its_layer_and_matches_numpy(ctx):
    L, N, E, H = 3, 2, 4, 2
    layer = nn.TransformerEncoderLayer(E, H, 6, dtype=F64)
    encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E, dtype=F64))
    assert encoder.num_layers == 2 and isinstance(encoder.layers, nn.ModuleList)
    assert encoder.layers[0] is not layer and encoder.layers[0] is not encoder.layers[1]
    assert encoder.layers[0].linear1.weight is not encoder.layers[1].linear1.weight
    np.testing.assert_array_equal(
        encoder.layers[1].linear1.weight.detach().numpy(), layer.linear1.weight.detach().numpy()
    )
    keys = list(encoder.state_dict())
    assert keys == [f"layers.{i}.{k}" for i in range(2) for k in ENCODER_KEYS] + [
        "norm.weight",
        "norm.bias",
    ]
    _randomise(encoder, seed=21)
    encoder.eval()
    mask = nn.Transformer.generate_square_subsequent_mask(L, dtype=F64)

    def run(x):
        return encoder(x, mask=mask)

    def reference(p, x):
        additive = mask.numpy()[None, None]
        for i in range(2):
            x = _encoder_layer(p, x, H, additive, False, _relu, prefix=f"layers.{i}.")
        return _layer_norm(x, p, "norm")

    _check_grads(encoder, [_rand((L, N, E), 4)], run, reference)
    no_norm = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    assert no_norm.norm is None and no_norm.enable_nested_tensor is False


def test_transformer_names_init_mask_and_errors(ctx):
    model = nn.Transformer(8, 2, 1, 1, 16)
    keys = list(model.state_dict())
    assert keys[:12] == [f"encoder.layers.0.{k}" for k in ENCODER_KEYS]
    assert keys[12:14] == ["encoder.norm.weight", "encoder.norm.bias"]
    assert keys[14] == "decoder.layers.0.self_attn.in_proj_weight"
    assert keys[-2:] == ["decoder.norm.weight", "decoder.norm.bias"]
    assert (model.d_model, model.nhead, model.batch_first) == (8, 2, False)
    # xavier_uniform_ on every matrix: linear1 (16, 8) within sqrt(6 / 24) = 0.5,
    # wider than nn.Linear's own kaiming bound 1/sqrt(8).
    w = model.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= 0.5 and np.abs(w).max() > 1 / math.sqrt(8)
    assert model.decoder.layers[0].norm1.weight.detach().numpy().tolist() == [1.0] * 8
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.tolist() == [
        [0.0, float("-inf"), float("-inf")],
        [0.0, 0.0, float("-inf")],
        [0.0, 0.0, 0.0],
    ]
    assert mask.dtype is torch.float32
    with pytest.raises(TensorError, match="the batch number of src and tgt must be equal"):
        model(torch.zeros(3, 2, 8), torch.zeros(3, 1, 8))
    with pytest.raises(TensorError, match="the feature number of src and tgt must be equal to d"):
        model(torch.zeros(3, 2, 8), torch.zeros(3, 2, 4))
    custom = nn.Transformer(8, 2, custom_encoder=nn.Identity(), num_decoder_layers=1)
    assert isinstance(custom.encoder, nn.Identity)


def test_transformer_matches_numpy_batch_first(ctx):
    S, T, N, E, H = 4, 3, 2, 4, 2
    model = nn.Transformer(E, H, 1, 1, 6, batch_first=True, dtype=F64)
    _randomise(model, seed=31)
    model.eval()
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=F64)
    src_padding = np.zeros((N, S), bool)
    src_padding[1, -1] = True

    def run(src, tgt):
        padding = torch.from_numpy(src_padding)
        return model(
            src,
            tgt,
            tgt_mask=tgt_mask,
            src_key_padding_mask=padding,
            memory_key_padding_mask=padding,
        )

    def reference(p, src, tgt):
        src, tgt = src.transpose(1, 0, 2), tgt.transpose(1, 0, 2)
        padding = _additive(None, src_padding, N)
        memory = _encoder_layer(p, src, H, padding, False, _relu, "encoder.layers.0.")
        memory = _layer_norm(memory, p, "encoder.norm")
        masks = (tgt_mask.numpy()[None, None], padding)
        out = _decoder_layer(p, tgt, memory, H, masks, False, _relu, "decoder.layers.0.")
        return _layer_norm(out, p, "decoder.norm").transpose(1, 0, 2)

    _check_grads(model, [_rand((N, S, E), 1), _rand((N, T, E), 2)], run, reference)


# ------------------------------------------- PyTorch's "Language Modeling with nn.Transformer"


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.linear.bias.data.zero_()
        self.linear.weight.data.uniform_(-initrange, initrange)

    def forward(self, src, src_mask=None):
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        if src_mask is None:
            src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        output = self.transformer_encoder(src, src_mask)
        return self.linear(output)


def test_language_model_tutorial_trains_on_a_repeated_batch(ctx):
    torch.manual_seed(0)
    ntokens, bptt, batch = 11, 5, 2
    model = TransformerModel(ntokens, d_model=8, nhead=2, d_hid=16, nlayers=2, dropout=0.2)
    criterion = nn.CrossEntropyLoss()
    # The tutorial's lr is 5.0; on a model this small that step oscillates, so 1.0.
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)
    ids = np.random.default_rng(0).integers(0, ntokens, (bptt + 1, batch))
    data, targets = torch.tensor(ids[:-1]), torch.tensor(ids[1:]).reshape(-1)
    model.train()
    start = ctx.now
    losses = []
    for _ in range(5):
        output = model(data)
        loss = criterion(output.view(-1, ntokens), targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert ctx.now > start
    assert scheduler.get_last_lr() == pytest.approx([0.95**5])
