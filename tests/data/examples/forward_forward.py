"""Hinton's forward-forward training as pytorch/examples' ``mnist_forward_forward`` does
it: the label written into the first pixels of each input (``x_[:, :10] *= 0.0`` and
``x_[range(n), y] = x.max()``), negative data with wrong labels drawn with
``torch.randint``, layers that subclass ``nn.Linear`` and normalise their input by
``x.norm(2, 1, keepdim=True)``, each trained alone on
``torch.log1p(torch.exp(torch.cat([-g_pos + t, g_neg - t]))).mean()`` with its own
``Adam``, and prediction by the label with the largest summed goodness.

The data are two Gaussian blobs per class in 20 dimensions.  Prints one ``RESULT
{json}`` line with an overlaid batch and the goodness-per-label matrix of a few inputs
(the test recomputes both) and the train error.
"""

import json

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.torch.optim import Adam

CLASSES = 4


def overlay_y_on_x(x, y):
    x_ = x.clone()
    x_[:, :CLASSES] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


def make_negative(y):
    y_neg = y.clone()
    for idx, y_samp in enumerate(y):
        allowed = list(range(CLASSES))
        allowed.remove(y_samp.item())
        y_neg[idx] = torch.tensor(allowed)[torch.randint(len(allowed), size=(1,))].item()
    return y_neg


class Layer(nn.Linear):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.relu = torch.nn.ReLU()
        self.opt = Adam(self.parameters(), lr=0.03)
        self.threshold = 2.0
        self.num_epochs = 15

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train(self, x_pos, x_neg):
        for _ in range(self.num_epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log1p(
                torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))
            ).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return self.forward(x_pos).detach(), self.forward(x_neg).detach(), loss.item()


class Net(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = [Layer(dims[d], dims[d + 1]) for d in range(len(dims) - 1)]

    def goodness(self, x):
        per_label = []
        for label in range(CLASSES):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness = goodness + [h.pow(2).mean(1)]
            per_label += [sum(goodness).unsqueeze(1)]
        return torch.cat(per_label, 1)

    def predict(self, x):
        return self.goodness(x).argmax(1)

    def train(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        losses = []
        for layer in self.layers:
            h_pos, h_neg, loss = layer.train(h_pos, h_neg)
            losses.append(loss)
        return losses


torch.manual_seed(1234)
centres = torch.randn(CLASSES, 20) * 2
y = torch.arange(32) % CLASSES
x = centres[y] + 0.5 * torch.randn(32, 20)
net = Net([20, 16, 16])
x_pos = overlay_y_on_x(x, y)
x_neg = overlay_y_on_x(x, make_negative(y))
losses = net.train(x_pos, x_neg)
with torch.no_grad():
    goodness = net.goodness(x[:3])
    weights = [(layer.weight.tolist(), layer.bias.tolist()) for layer in net.layers]
print("RESULT " + json.dumps({
    "x": x[:3].tolist(), "x_max": x.max().item(), "x_pos": x_pos[:3].tolist(), "y": y[:3].tolist(),
    "goodness": goodness.tolist(), "weights": weights, "losses": losses,
    "train_error": 1.0 - net.predict(x).eq(y).float().mean().item(),
}))  # fmt: skip
