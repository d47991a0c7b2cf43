"""Fitting a polynomial with one linear layer, all of it at module level, as
pytorch/examples' ``regression/main.py`` is written (no ``main()``, no ``__main__``
block: ``python`` runs it top to bottom, and so does ``kernbench run``).

Features ``[x, x^2, x^3, x^4]`` of random ``x``, a target polynomial drawn at random,
``F.smooth_l1_loss`` and a hand-written SGD step (``param.data.add_(-lr *
param.grad)``), until the loss falls below 1e-3.  Prints one ``RESULT {json}`` line with
the target and learned coefficients and the first batch, its prediction and its loss
(checked against NumPy by the test).
"""

import json
import sys
from itertools import count

import kernbench.torch as torch
import kernbench.torch.nn.functional as F

DEGREE = 4
TOLERANCE = float(sys.argv[1]) if len(sys.argv) > 1 else 1e-3
torch.manual_seed(11)
W_true = torch.randn(DEGREE, 1) * 5
b_true = torch.randn(1) * 5


def features(x):
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, DEGREE + 1)], 1)


def target(x):
    return x.mm(W_true) + b_true.item()


def batch(size=32):
    x = features(torch.randn(size))
    return x, target(x)


fc = torch.nn.Linear(W_true.size(0), 1)
first = None
for step in count(1):
    x, y = batch()
    fc.zero_grad()
    prediction = fc(x)
    loss = F.smooth_l1_loss(prediction, y)
    if first is None:
        first = {
            "x": x.tolist(),
            "y": y.tolist(),
            "prediction": prediction.tolist(),
            "loss": loss.item(),
        }
    loss.backward()
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)
    if loss.item() < TOLERANCE or step == 2000:
        break

print(
    "RESULT "
    + json.dumps(
        {
            "steps": step,
            "loss": loss.item(),
            "w_true": W_true.view(-1).tolist(),
            "b_true": b_true.item(),
            "w": fc.weight.view(-1).tolist(),
            "b": fc.bias.item(),
            "first": first,
        }
    )
)
