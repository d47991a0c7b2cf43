"""A word-level language model trained the way pytorch/examples' ``word_language_model``
trains one, written for KernBench (its imports are KernBench's).

The calls are that program's: a corpus read from ``train.txt``/``valid.txt`` into a
dictionary, ``batchify`` with ``narrow``/``view``/``t().contiguous()``, truncated
backpropagation through time with the hidden state detached between batches, an
``nn.Embedding`` -> ``nn.LSTM``/``GRU``/``RNN`` (or ``nn.TransformerEncoder`` with a
positional encoding buffer) -> ``nn.Linear`` model, plain SGD written as
``p.data.add_(p.grad, alpha=-lr)`` after ``clip_grad_norm_``, the whole model saved with
``torch.save(model, f)`` and loaded back inside ``torch.serialization.safe_globals``
naming torch's ``torch.nn.modules.<file>`` paths, ``flatten_parameters()``, the legacy
``torch.LongTensor(n).zero_()`` constructor and ``import torch.onnx``.

Prints one ``RESULT {json}`` line: the training losses, the logits and targets of one
evaluation batch with the loss computed of them (checked against NumPy by the test), and
what loading found.
"""

import argparse
import json
import math
import os
import pickle

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.onnx

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="./corpus")
parser.add_argument("--model", default="LSTM")
parser.add_argument("--emsize", type=int, default=12)
parser.add_argument("--nhid", type=int, default=12)
parser.add_argument("--nlayers", type=int, default=2)
parser.add_argument("--lr", type=float, default=5.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--bptt", type=int, default=6)
parser.add_argument("--batch_size", type=int, default=3)
parser.add_argument("--save", default="lm.pt")
args = parser.parse_args()

torch.manual_seed(7)


class Vocabulary:
    def __init__(self):
        self.index = {}
        self.words = []

    def add(self, word):
        if word not in self.index:
            self.index[word] = len(self.words)
            self.words.append(word)
        return self.index[word]


class Corpus:
    def __init__(self, where):
        self.vocabulary = Vocabulary()
        self.train = self.read(os.path.join(where, "train.txt"))
        self.valid = self.read(os.path.join(where, "valid.txt"))

    def read(self, path):
        ids = []
        with open(path, encoding="utf8") as f:
            for line in f:
                ids.extend(self.vocabulary.add(w) for w in line.split() + ["<eos>"])
        return torch.tensor(ids, dtype=torch.int64)


def batchify(data, columns):
    rows = data.size(0) // columns
    return data.narrow(0, 0, rows * columns).view(columns, -1).t().contiguous()


def batch_at(source, i):
    length = min(args.bptt, len(source) - 1 - i)
    return source[i : i + length], source[i + 1 : i + 1 + length].reshape(-1)


class Recurrent(nn.Module):
    def __init__(self, kind, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.kind = kind
        self.drop = nn.Dropout(0.1)
        self.encoder = nn.Embedding(ntoken, ninp)
        if kind in ("LSTM", "GRU"):
            self.rnn = getattr(nn, kind)(ninp, nhid, nlayers, dropout=0.1)
        else:
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity="tanh", dropout=0.1)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, tokens, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        return F.log_softmax(
            self.decoder(self.drop(out)).view(-1, self.decoder.out_features), 1
        ), hidden

    def init_hidden(self, columns):
        weight = next(self.parameters())
        zeros = weight.new_zeros(self.nlayers, columns, self.nhid)
        return (
            (zeros, weight.new_zeros(self.nlayers, columns, self.nhid))
            if self.kind == "LSTM"
            else zeros
        )


class Positions(nn.Module):
    def __init__(self, width, longest=64):
        super().__init__()
        position = torch.arange(0, longest, dtype=torch.float).unsqueeze(1)
        rate = torch.exp(torch.arange(0, width, 2).float() * (-math.log(10000.0) / width))
        table = torch.zeros(longest, width)
        table[:, 0::2] = torch.sin(position * rate)
        table[:, 1::2] = torch.cos(position * rate)
        self.register_buffer("table", table.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return x + self.table[: x.size(0), :]


class Attention(nn.Transformer):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers):
        super().__init__(
            d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers, dropout=0.1
        )
        self.decoder = None  # the encoder stack alone, as a language model uses it
        self.positions = Positions(ninp)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.head = nn.Linear(ninp, ntoken)

    def forward(self, tokens, hidden=None):
        mask = nn.Transformer.generate_square_subsequent_mask(len(tokens))
        x = self.positions(self.input_emb(tokens) * math.sqrt(self.ninp))
        out = self.head(self.encoder(x, mask=mask))
        return F.log_softmax(out.view(-1, out.size(-1)), dim=-1), None

    def init_hidden(self, columns):
        return None


def detached(hidden):
    if hidden is None or isinstance(hidden, torch.Tensor):
        return None if hidden is None else hidden.detach()
    return tuple(detached(h) for h in hidden)


corpus = Corpus(args.data)
train = batchify(corpus.train, args.batch_size)
valid = batchify(corpus.valid, 2)
ntokens = len(corpus.vocabulary.words)
if args.model == "Transformer":
    model = Attention(ntokens, args.emsize, 2, args.nhid, args.nlayers)
else:
    model = Recurrent(args.model, ntokens, args.emsize, args.nhid, args.nlayers)
criterion = nn.NLLLoss()

losses = []
model.train()
hidden = model.init_hidden(args.batch_size)
for i in range(0, train.size(0) - 1, args.bptt):
    inputs, targets = batch_at(train, i)
    hidden = detached(hidden)
    model.zero_grad()
    output, hidden = model(inputs, hidden)
    loss = criterion(output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    for p in model.parameters():
        if p.grad is not None:
            p.data.add_(p.grad, alpha=-args.lr)
    losses.append(loss.item())

with open(args.save, "wb") as f:
    torch.save(model, f)

refused = ""
with open(args.save, "rb") as f:
    try:
        torch.load(f)
    except pickle.UnpicklingError as exc:
        refused = str(exc)

allowed = [
    Recurrent,
    Attention,
    Positions,
    torch.nn.functional.relu,
    torch.nn.modules.activation.MultiheadAttention,
    torch.nn.modules.container.ModuleList,
    torch.nn.modules.dropout.Dropout,
    torch.nn.modules.linear.Linear,
    torch.nn.modules.linear.NonDynamicallyQuantizableLinear,
    torch.nn.modules.normalization.LayerNorm,
    torch.nn.modules.sparse.Embedding,
    torch.nn.modules.rnn.GRU,
    torch.nn.modules.rnn.LSTM,
    torch.nn.modules.rnn.RNN,
    torch.nn.modules.transformer.TransformerEncoder,
    torch.nn.modules.transformer.TransformerEncoderLayer,
]
with open(args.save, "rb") as f:
    with torch.serialization.safe_globals(allowed):
        loaded = torch.load(f)
if args.model != "Transformer":
    loaded.rnn.flatten_parameters()

before, after = model.state_dict(), loaded.state_dict()
same = list(before) == list(after) and all(bool(torch.equal(before[k], after[k])) for k in before)
loaded.eval()
inputs, targets = batch_at(valid, 0)
with torch.no_grad():
    output, _ = loaded(inputs, loaded.init_hidden(2))
    eval_loss = criterion(output, targets).item()
dummy = torch.LongTensor(args.bptt * 2).zero_().view(-1, 2)

print(
    "RESULT "
    + json.dumps(
        {
            "model": args.model,
            "type": type(loaded).__name__,
            "losses": losses,
            "same_state": same,
            "refused": refused,
            "log_probs": output.tolist(),
            "targets": targets.tolist(),
            "eval_loss": eval_loss,
            "dummy": [list(dummy.shape), str(dummy.dtype), int(dummy.sum().item())],
            "exporting": kernbench.torch.onnx.is_in_onnx_export(),
        }
    )
)
