"""nn.RNN, nn.LSTM, nn.GRU, their cells and nn.utils.rnn, against a NumPy reference.

The reference below runs torch's equations step by step (gates i, f, g, o for the
LSTM; r, z, n for the GRU, ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``); the
gradients are NumPy central differences of the same reference.  A small rewrite of
pytorch/examples' word_language_model ``RNNModel`` trains a few steps at the end.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorAttributeError, TensorError, TensorValueError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn
from tests.gradcheck import numeric_grad

F64 = torch.float64


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


# ---------------------------------------------------------------------------- NumPy reference


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _step(mode, gi, h, c, p, sfx):
    gh = h @ p[f"weight_hh_{sfx}"].T + p.get(f"bias_hh_{sfx}", 0.0)
    if mode == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        if f"weight_hr_{sfx}" in p:
            h = h @ p[f"weight_hr_{sfx}"].T
        return h, c
    if mode == "GRU":
        i_r, i_z, i_n = np.split(gi, 3, axis=1)
        h_r, h_z, h_n = np.split(gh, 3, axis=1)
        r, z = _sigmoid(i_r + h_r), _sigmoid(i_z + h_z)
        n = np.tanh(i_n + r * h_n)
        return (1.0 - z) * n + z * h, c
    pre = gi + gh
    return (np.maximum(pre, 0.0) if mode == "RNN_RELU" else np.tanh(pre)), c


def reference(mode, p, x, h0, c0, num_layers, directions):
    """``(output, h_n, c_n)`` for a time-major ``x (T, N, I)``."""
    steps = x.shape[0]
    layer_in, h_n, c_n = x, [], []
    for layer in range(num_layers):
        outs = []
        for d in range(directions):
            sfx = f"l{layer}" + ("_reverse" if d else "")
            index = layer * directions + d
            h, c = h0[index], None if c0 is None else c0[index]
            out = [None] * steps
            for t in range(steps - 1, -1, -1) if d else range(steps):
                gi = layer_in[t] @ p[f"weight_ih_{sfx}"].T + p.get(f"bias_ih_{sfx}", 0.0)
                h, c = _step(mode, gi, h, c, p, sfx)
                out[t] = h
            outs.append(np.stack(out))
            h_n.append(h)
            c_n.append(c)
        layer_in = np.concatenate(outs, axis=2)
    return layer_in, np.stack(h_n), None if c0 is None else np.stack(c_n)


def _params(module):
    return {name: p.detach().numpy().copy() for name, p in module.named_parameters()}


def _rand(shape, seed):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape)


MODES = {"RNN_TANH": "tanh", "RNN_RELU": "relu", "LSTM": None, "GRU": None}


def _make(mode, *args, **kwargs):
    if mode.startswith("RNN"):
        return nn.RNN(*args, nonlinearity=MODES[mode], **kwargs)
    return getattr(nn, mode)(*args, **kwargs)


def _hidden_size(module):
    return module.proj_size or module.hidden_size


# ---------------------------------------------------------------------------- parameters


def test_parameter_names_shapes_and_init_are_torchs(ctx):
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2)
    names = [(n, tuple(p.shape)) for n, p in lstm.named_parameters()]
    per_direction = [
        ("weight_ih_l{}", (16, None)),
        ("weight_hh_l{}", (16, 2)),
        ("bias_ih_l{}", (16,)),
        ("bias_hh_l{}", (16,)),
        ("weight_hr_l{}", (2, 4)),
    ]
    expected = []
    for layer, width in ((0, 3), (1, 4)):
        for suffix in ("", "_reverse"):
            for name, shape in per_direction:
                shape = tuple(width if s is None else s for s in shape)
                expected.append((name.format(layer) + suffix, shape))
    assert names == expected
    assert list(lstm.state_dict()) == [n for n, _ in expected]
    assert repr(lstm) == "LSTM(3, 4, proj_size=2, num_layers=2, bidirectional=True)"
    assert len(lstm.all_weights) == 4 and lstm.all_weights[1][0] is lstm.weight_ih_l0_reverse
    assert lstm.flatten_parameters() is None

    gru = nn.GRU(5, 3, bias=False, batch_first=True)
    assert [(n, tuple(p.shape)) for n, p in gru.named_parameters()] == [
        ("weight_ih_l0", (9, 5)),
        ("weight_hh_l0", (9, 3)),
    ]
    assert repr(gru) == "GRU(5, 3, bias=False, batch_first=True)"
    rnn = nn.RNN(2, 16, 3, "relu", dropout=0.25)
    assert rnn.nonlinearity == "relu" and rnn.mode == "RNN_RELU"
    assert repr(rnn) == "RNN(2, 16, num_layers=3, dropout=0.25)"
    bound = 1 / math.sqrt(16)
    values = np.concatenate([p.detach().numpy().ravel() for p in rnn.parameters()])
    assert np.all(np.abs(values) <= bound) and values.std() > bound / 3
    assert all(p.requires_grad for p in rnn.parameters())

    cell = nn.LSTMCell(3, 2)
    assert [(n, tuple(p.shape)) for n, p in cell.named_parameters()] == [
        ("weight_ih", (8, 3)),
        ("weight_hh", (8, 2)),
        ("bias_ih", (8,)),
        ("bias_hh", (8,)),
    ]
    assert repr(nn.RNNCell(3, 2, bias=False, nonlinearity="relu")) == (
        "RNNCell(3, 2, bias=False, nonlinearity=relu)"
    )
    assert tuple(nn.GRUCell(3, 2).weight_hh.shape) == (6, 2)
    assert nn.LSTM(2, 3, dtype=F64).weight_ih_l0.dtype is F64


# ---------------------------------------------------------------------------- forward values


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(
    ("layers", "bidirectional", "batch_first", "given"),
    [(1, False, False, False), (2, True, True, True)],
)
def test_forward_matches_numpy(ctx, mode, layers, bidirectional, batch_first, given):
    torch.manual_seed(3)
    module = _make(
        mode, 3, 4, layers, bidirectional=bidirectional, batch_first=batch_first, dtype=F64
    )
    directions = 2 if bidirectional else 1
    steps, batch = 3, 2
    x = _rand((steps, batch, 3), 1)
    h0 = (
        _rand((layers * directions, batch, 4), 2)
        if given
        else np.zeros((layers * directions, batch, 4))
    )
    c0 = _rand((layers * directions, batch, 4), 3) if given else np.zeros_like(h0)
    inp = torch.tensor(x.transpose(1, 0, 2) if batch_first else x, dtype=F64)
    state = None
    if given:
        state = torch.tensor(h0, dtype=F64)
        if mode == "LSTM":
            state = (state, torch.tensor(c0, dtype=F64))
    out, hidden = module(inp, state)
    want, h_n, c_n = reference(mode, _params(module), x, h0, c0 if mode == "LSTM" else None,
                               layers, directions)  # fmt: skip
    if batch_first:
        want = want.transpose(1, 0, 2)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    if mode == "LSTM":
        hidden, cell = hidden
        np.testing.assert_allclose(cell.detach().numpy(), c_n, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hidden.detach().numpy(), h_n, rtol=1e-10, atol=1e-12)
    assert tuple(hidden.shape) == (layers * directions, batch, 4)  # never batch-first


def test_lstm_projection_and_unbatched_input(ctx):
    torch.manual_seed(4)
    lstm = nn.LSTM(3, 4, 2, bidirectional=True, proj_size=2, dtype=F64)
    x = _rand((3, 3), 5)
    h0, c0 = _rand((4, 2), 6), _rand((4, 4), 7)
    out, (h, c) = lstm(
        torch.tensor(x, dtype=F64), (torch.tensor(h0, dtype=F64), torch.tensor(c0, dtype=F64))
    )
    want, h_n, c_n = reference("LSTM", _params(lstm), x[:, None], h0[:, None], c0[:, None], 2, 2)
    assert tuple(out.shape) == (3, 4) and tuple(h.shape) == (4, 2) and tuple(c.shape) == (4, 4)
    np.testing.assert_allclose(out.detach().numpy(), want[:, 0], rtol=1e-10)
    np.testing.assert_allclose(h.detach().numpy(), h_n[:, 0], rtol=1e-10)
    np.testing.assert_allclose(c.detach().numpy(), c_n[:, 0], rtol=1e-10)
    gru = nn.GRU(3, 2, batch_first=True, dtype=F64)
    out, h = gru(torch.tensor(x, dtype=F64))  # unbatched (L, H_in) whatever batch_first says
    want, h_n, _ = reference("GRU", _params(gru), x[:, None], np.zeros((1, 1, 2)), None, 1, 1)
    assert tuple(out.shape) == (3, 2) and tuple(h.shape) == (1, 2)
    np.testing.assert_allclose(out.detach().numpy(), want[:, 0], rtol=1e-10)


# ---------------------------------------------------------------------------- backward


@pytest.mark.parametrize("mode", list(MODES))
def test_backward_matches_central_differences(ctx, mode):
    torch.manual_seed(5)
    module = _make(mode, 2, 2, 2, bidirectional=True, batch_first=True, dtype=F64)
    x = _rand((2, 3, 2), 8)  # (N, T, I)
    h0, c0 = _rand((4, 2, 2), 9), _rand((4, 2, 2), 10)
    w_out, w_h = _rand((2, 3, 4), 11), _rand((4, 2, 2), 12)
    lstm = mode == "LSTM"
    names = [n for n, _ in module.named_parameters()]
    p = _params(module)

    def loss(x, h0, c0, *weights):
        params = dict(zip(names, weights, strict=True))
        out, h_n, c_n = reference(mode, params, x.transpose(1, 0, 2), h0, c0 if lstm else None,
                                  2, 2)  # fmt: skip
        total = np.sum(out.transpose(1, 0, 2) * w_out) + np.sum(h_n * w_h)
        return total + (np.sum(c_n * w_h * 0.5) if lstm else 0.0)

    xt = torch.tensor(x, dtype=F64, requires_grad=True)
    ht = torch.tensor(h0, dtype=F64, requires_grad=True)
    ct = torch.tensor(c0, dtype=F64, requires_grad=True)
    out, hidden = module(xt, (ht, ct) if lstm else ht)
    h_n, c_n = hidden if lstm else (hidden, None)
    total = (out * torch.tensor(w_out, dtype=F64)).sum() + (
        h_n * torch.tensor(w_h, dtype=F64)
    ).sum()
    if lstm:
        total = total + (c_n * torch.tensor(w_h * 0.5, dtype=F64)).sum()
    total.backward()
    arrays = [x, h0, c0, *(p[n] for n in names)]
    np.testing.assert_allclose(total.item(), loss(*arrays), rtol=1e-10)
    got = [xt.grad, ht.grad, ct.grad if lstm else None] + [
        param.grad for param in module.parameters()
    ]
    for i, grad in enumerate(got):
        if i == 2 and not lstm:
            assert ct.grad is None
            continue
        expected = numeric_grad(loss, arrays, i)
        np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_numpy_forward_and_backward(ctx, mode):
    torch.manual_seed(6)
    cell = getattr(nn, mode)(3, 2, dtype=F64)
    ref_mode = {"RNNCell": "RNN_TANH", "LSTMCell": "LSTM", "GRUCell": "GRU"}[mode]
    p = {f"{n}_l0": v for n, v in _params(cell).items()}
    x, h0, c0, w = _rand((2, 3), 13), _rand((2, 2), 14), _rand((2, 2), 15), _rand((2, 2), 16)
    lstm = mode == "LSTMCell"

    def loss(x, h0, c0):
        gi = x @ p["weight_ih_l0"].T + p["bias_ih_l0"]
        h, c = _step(ref_mode, gi, h0, c0, p, "l0")
        return np.sum(h * w) + (np.sum(c * w * 2) if lstm else 0.0)

    xt, ht, ct = (torch.tensor(a, dtype=F64, requires_grad=True) for a in (x, h0, c0))
    result = cell(xt, (ht, ct) if lstm else ht)
    h, c = result if lstm else (result, None)
    total = (h * torch.tensor(w, dtype=F64)).sum()
    if lstm:
        total = total + (c * torch.tensor(w * 2, dtype=F64)).sum()
    total.backward()
    np.testing.assert_allclose(total.item(), loss(x, h0, c0), rtol=1e-10)
    for i, leaf in enumerate((xt, ht) + ((ct,) if lstm else ())):
        np.testing.assert_allclose(leaf.grad.numpy(), numeric_grad(loss, [x, h0, c0], i),
                                   rtol=1e-5, atol=1e-8)  # fmt: skip
    # unbatched input and no state: zeros, as torch
    single = cell(torch.tensor(x[0], dtype=F64))
    h1 = single[0] if lstm else single
    gi = x[:1] @ p["weight_ih_l0"].T + p["bias_ih_l0"]
    want, _ = _step(ref_mode, gi, np.zeros((1, 2)), np.zeros((1, 2)), p, "l0")
    assert tuple(h1.shape) == (2,)
    np.testing.assert_allclose(h1.detach().numpy(), want[0], rtol=1e-10)


def test_dropout_between_layers_only_in_training(ctx):
    torch.manual_seed(7)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(2, 3, dropout=0.5)
    gru = nn.GRU(2, 3, 2, dropout=0.5, dtype=F64)
    x = torch.tensor(_rand((3, 2, 2), 17), dtype=F64)
    want, _, _ = reference("GRU", _params(gru), x.numpy(), np.zeros((2, 2, 3)), None, 2, 1)
    trained, _ = gru(x)
    assert not np.allclose(trained.detach().numpy(), want)
    gru.eval()
    evaluated, _ = gru(x)
    np.testing.assert_allclose(evaluated.detach().numpy(), want, rtol=1e-10)


# ---------------------------------------------------------------------------- packed sequences


def test_packed_sequences_match_each_sequence_run_alone(ctx):
    torch.manual_seed(8)
    lstm = nn.LSTM(2, 3, bidirectional=True, batch_first=True, dtype=F64)
    lengths = [2, 4, 3]
    x = _rand((3, 4, 2), 18)  # (N, T, I), padded
    xt = torch.tensor(x, dtype=F64, requires_grad=True)
    packed = nn.utils.rnn.pack_padded_sequence(xt, lengths, batch_first=True, enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [3, 3, 2, 1]
    assert packed.sorted_indices.tolist() == [1, 2, 0]
    assert packed.unsorted_indices.tolist() == [2, 0, 1]
    out, (h, c) = lstm(packed)
    assert isinstance(out, nn.utils.rnn.PackedSequence)
    padded, got_lengths = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=5)
    assert got_lengths.tolist() == lengths and tuple(padded.shape) == (3, 5, 6)
    p = _params(lstm)
    for b, n in enumerate(lengths):
        zero = np.zeros((2, 1, 3))
        want, h_n, c_n = reference("LSTM", p, x[b, :n, None], zero, zero, 1, 2)
        np.testing.assert_allclose(padded[b, :n].detach().numpy(), want[:, 0], rtol=1e-10)
        np.testing.assert_array_equal(padded[b, n:].detach().numpy(), 0.0)
        np.testing.assert_allclose(h[:, b].detach().numpy(), h_n[:, 0], rtol=1e-10)
        np.testing.assert_allclose(c[:, b].detach().numpy(), c_n[:, 0], rtol=1e-10)
    padded.sum().backward()
    assert np.all(xt.grad.numpy()[0, 2:] == 0.0) and np.all(xt.grad.numpy()[0, :2] != 0.0)
    # an initial state is in the caller's batch order, and so is h_n (torch permutes both)
    gru = nn.GRU(2, 3, dtype=F64)
    h0 = _rand((1, 3, 3), 19)
    _, h = gru(packed, torch.tensor(h0, dtype=F64))
    for b, n in enumerate(lengths):
        _, h_n, _ = reference("GRU", _params(gru), x[b, :n, None], h0[:, b : b + 1], None, 1, 1)
        np.testing.assert_allclose(h[:, b].detach().numpy(), h_n[:, 0], rtol=1e-10)


def test_pad_and_pack_sequence(ctx):
    a, b = torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([[4.0]])
    padded = nn.utils.rnn.pad_sequence([a, b], padding_value=-1.0)
    assert padded.tolist() == [[[1.0], [4.0]], [[2.0], [-1.0]], [[3.0], [-1.0]]]
    left = nn.utils.rnn.pad_sequence([a, b], batch_first=True, padding_side="left")
    assert left.tolist() == [[[1.0], [2.0], [3.0]], [[0.0], [0.0], [4.0]]]
    packed = nn.utils.rnn.pack_sequence([a, b])
    assert packed.data.tolist() == [[1.0], [4.0], [2.0], [3.0]]
    assert packed.batch_sizes.tolist() == [2, 1, 1] and packed.sorted_indices is None
    c = torch.tensor([[5.0], [6.0]])
    unsorted = nn.utils.rnn.pack_sequence([b, a, c], enforce_sorted=False)
    assert [t.tolist() for t in nn.utils.rnn.unpack_sequence(unsorted)] == [
        [[4.0]],
        [[1.0], [2.0], [3.0]],
        [[5.0], [6.0]],
    ]
    pieces = nn.utils.rnn.unpad_sequence(padded, torch.tensor([3, 1]))
    assert [t.tolist() for t in pieces] == [[[1.0], [2.0], [3.0]], [[4.0]]]
    doubled = unsorted.double()
    assert doubled.data.dtype is F64 and doubled.batch_sizes is unsorted.batch_sizes
    assert isinstance(doubled, nn.utils.rnn.PackedSequence) and unsorted.float() is unsorted
    with pytest.raises(TensorError, match="must be sorted in decreasing order"):
        nn.utils.rnn.pack_sequence([b, a])
    with pytest.raises(TensorValueError, match="Expected total_length to be at least"):
        nn.utils.rnn.pad_packed_sequence(packed, total_length=2)


def _lstm_step_time(timing_only):
    context = RuntimeContext("tiny", timing_only=timing_only)
    with use_context(context):
        torch.manual_seed(11)
        lstm = nn.LSTM(3, 4, bidirectional=True)
        x = torch.randn(4, 3, 3, requires_grad=True)
        packed = nn.utils.rnn.pack_padded_sequence(x, [2, 4, 3], enforce_sorted=False)
        start = context.now
        out, (h, c) = lstm(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out)
        (padded.sum() + h.sum() + c.sum()).backward()
        assert tuple(lstm.weight_hh_l0_reverse.grad.shape) == (16, 4)
        return context.now - start


def test_timing_only_runs_packed_sequences_in_the_same_time():
    """Lengths given as a list are host ints, as torch keeps them on the CPU: a timing-only
    run, whose tensors carry no values, packs, runs and unpacks, in the same time."""
    functional = _lstm_step_time(False)
    assert functional > 0 and _lstm_step_time(True) == functional


# ---------------------------------------------------------------------------- errors


def test_errors_are_torchs(ctx):
    with pytest.raises(TensorValueError, match="Unknown nonlinearity 'gelu'. Select from"):
        nn.RNN(2, 3, nonlinearity="gelu")
    with pytest.raises(TensorValueError, match=r"dropout should be a number in range \[0, 1\]"):
        nn.LSTM(2, 3, 2, dropout=1.5)
    with pytest.raises(TensorValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(2, 3, proj_size=3)
    with pytest.raises(TypeError, match="hidden_size should be of type int, got: float"):
        nn.GRU(2, 3.0)
    with pytest.raises(TensorValueError, match="num_layers must be greater than zero"):
        nn.GRU(2, 3, 0)
    lstm, rnn = nn.LSTM(2, 3), nn.RNN(2, 3)
    with pytest.raises(TensorValueError, match="LSTM: Expected input to be 2D or 3D, got 4D"):
        lstm(torch.zeros(1, 1, 1, 2))
    with pytest.raises(TensorValueError, match="RNN: Expected input to be 2D or 3D, got 1D tensor"):
        rnn(torch.zeros(2))
    with pytest.raises(
        TensorError, match="input.size\\(-1\\) must be equal to input_size. Expected 2, got 5"
    ):
        rnn(torch.zeros(3, 1, 5))
    with pytest.raises(TensorError, match=r"Expected hidden size \(1, 4, 3\), got \[1, 2, 3\]"):
        rnn(torch.zeros(3, 4, 2), torch.zeros(1, 2, 3))
    with pytest.raises(
        TensorError, match=r"Expected hidden\[1\] size \(1, 4, 3\), got \[1, 4, 2\]"
    ):
        lstm(torch.zeros(3, 4, 2), (torch.zeros(1, 4, 3), torch.zeros(1, 4, 2)))
    with pytest.raises(
        TensorError, match="For batched 3-D input, hx should also be 3-D but got 2-D"
    ):
        rnn(torch.zeros(3, 4, 2), torch.zeros(1, 3))
    with pytest.raises(TensorError, match=r"hx and cx should also be 2-D but got \(3-D, 3-D\)"):
        lstm(torch.zeros(3, 2), (torch.zeros(1, 1, 3), torch.zeros(1, 1, 3)))
    with pytest.raises(
        TensorValueError, match="input must have the type torch.float32, got type torch.float64"
    ):
        rnn(torch.zeros(3, 1, 2, dtype=F64))
    with pytest.raises(TensorValueError, match="GRUCell: Expected input to be 1D or 2D, got 3D"):
        nn.GRUCell(2, 3)(torch.zeros(1, 1, 2))
    with pytest.raises(TensorError, match="input has inconsistent input_size: got 4 expected 2"):
        nn.RNNCell(2, 3)(torch.zeros(1, 4))
    with pytest.raises(
        TensorError, match="hidden0 has inconsistent hidden_size: got 2, expected 3"
    ):
        nn.LSTMCell(2, 3)(torch.zeros(1, 2), (torch.zeros(1, 2), torch.zeros(1, 3)))
    with pytest.raises(TensorAttributeError, match="has no attribute 'CrossMapLRN2d'"):
        _ = nn.CrossMapLRN2d


# ---------------------------------------------------------------------------- word language model


class RNNModel(nn.Module):
    """pytorch/examples word_language_model/model.py's RNNModel: encoder, recurrent module,
    decoder (weights optionally tied to the encoder's)."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):  # noqa: A002 - the example's name
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return torch.nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))  # fmt: skip
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


@pytest.mark.parametrize("tied", [False, True])
def test_word_language_model_trains(ctx, tied):
    torch.manual_seed(9)
    ntokens, bptt, batch, lr = 11, 4, 2, 2.0
    model = RNNModel("LSTM", ntokens, 6, 6, 2, dropout=0.2, tie_weights=tied)
    assert (model.decoder.weight is model.encoder.weight) == tied
    criterion = nn.NLLLoss()
    rng = np.random.default_rng(10)
    data = torch.tensor(rng.integers(0, ntokens, (bptt, batch)), dtype=torch.int64)
    targets = torch.tensor(rng.integers(0, ntokens, bptt * batch), dtype=torch.int64)
    model.train()
    hidden = model.init_hidden(batch)
    losses = []
    for _ in range(4):
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]
    assert hidden[0].grad_fn is not None and not repackage_hidden(hidden)[0].requires_grad
