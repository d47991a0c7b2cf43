"""A sequence-to-sequence model with attention, trained as PyTorch's "translation with a
sequence to sequence network" tutorial trains one: an ``Embedding`` + ``GRU(batch_first=
True)`` encoder, a decoder with Bahdanau attention (``Va(tanh(Wa(query) + Ua(keys)))``,
``scores.squeeze(2).unsqueeze(1)``, ``F.softmax``, ``torch.bmm``) that starts from
``torch.empty(b, 1, dtype=torch.long).fill_(SOS)``, feeds back ``topk(1)`` or the target
(teacher forcing), ``torch.cat`` of the step outputs and ``F.log_softmax``; ``NLLLoss``
on ``outputs.view(-1, n)`` and ``targets.view(-1)``, two ``Adam`` optimizers, a
``DataLoader`` with a ``RandomSampler`` over ``TensorDataset(torch.LongTensor(...))``.

The task: reverse a sequence of tokens.  Prints one ``RESULT {json}`` line with the last
batch's log-probabilities, targets and loss, and the attention weights of a greedy decode
(rows sum to one; the test checks both).
"""

import json
import random

import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
from kernbench.torch import optim
from kernbench.torch.utils.data import DataLoader, RandomSampler, TensorDataset

SOS_token, EOS_token, MAX_LENGTH, VOCAB, HIDDEN = 0, 1, 5, 8, 16
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        return self.gru(embedded)


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        return torch.bmm(weights, keys), weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long, device=device).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs, attentions = [], []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None:
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1)
        return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
        return self.out(output), hidden, attn_weights


def make_pairs(count, rng):
    inputs = np.zeros((count, MAX_LENGTH), dtype=np.int32)
    targets = np.zeros((count, MAX_LENGTH), dtype=np.int32)
    for n in range(count):
        tokens = rng.integers(2, VOCAB, size=MAX_LENGTH - 1)
        inputs[n, :-1], inputs[n, -1] = tokens, EOS_token
        targets[n, :-1], targets[n, -1] = tokens[::-1], EOS_token
    return inputs, targets


random.seed(1)
torch.manual_seed(1)
input_ids, target_ids = make_pairs(8, np.random.default_rng(1))
train_data = TensorDataset(torch.LongTensor(input_ids).to(device),
                           torch.LongTensor(target_ids).to(device))  # fmt: skip
train_dataloader = DataLoader(train_data, sampler=RandomSampler(train_data), batch_size=8)
encoder = EncoderRNN(VOCAB, HIDDEN).to(device)
decoder = AttnDecoderRNN(HIDDEN, VOCAB).to(device)
encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
criterion = nn.NLLLoss()
losses = []
for _epoch in range(2):
    total_loss = 0
    for input_tensor, target_tensor in train_dataloader:
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        encoder_outputs, encoder_hidden = encoder(input_tensor)
        decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
        loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
        loss.backward()
        encoder_optimizer.step()
        decoder_optimizer.step()
        total_loss += loss.item()
    losses.append(total_loss / len(train_dataloader))
encoder.eval()
decoder.eval()
with torch.no_grad():
    encoder_outputs, encoder_hidden = encoder(input_tensor[:2])
    greedy, _, attentions = decoder(encoder_outputs, encoder_hidden)
    decoded_ids = greedy.topk(1)[1].squeeze()
print("RESULT " + json.dumps({
    "log_probs": decoder_outputs.view(-1, VOCAB).tolist(),
    "targets": target_tensor.view(-1).tolist(),
    "loss": loss.item(), "losses": losses, "attentions": attentions.tolist(),
    "decoded": decoded_ids.tolist(), "encoder_outputs": list(encoder_outputs.shape),
}))  # fmt: skip
