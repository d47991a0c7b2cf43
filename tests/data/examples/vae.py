"""A variational autoencoder trained as pytorch/examples' ``vae/main.py`` trains one:
an encoder to a mean and a log-variance, the reparameterisation trick with
``torch.randn_like``, a sigmoid decoder, ``binary_cross_entropy(reduction="sum")`` plus
the KL term, ``Adam``, and samples decoded from ``torch.randn`` under ``no_grad``.

The data are random 8x8 "images" in [0, 1].  Prints one ``RESULT {json}`` line with a
batch, its reconstruction, mean, log-variance and loss (which the test recomputes).
"""

import json

import kernbench.torch as torch
import kernbench.torch.utils.data  # noqa: F401 - as torch.utils.data
from kernbench.torch import nn, optim
from kernbench.torch.nn import functional as F

PIXELS = 64


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(PIXELS, 32)
        self.fc21 = nn.Linear(32, 4)
        self.fc22 = nn.Linear(32, 4)
        self.fc3 = nn.Linear(4, 32)
        self.fc4 = nn.Linear(32, PIXELS)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, PIXELS))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, PIXELS), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


torch.manual_seed(5)
device = torch.device("cpu")
images = torch.rand(24, 1, 8, 8)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(images, torch.zeros(24)), batch_size=8, shuffle=True
)
model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)
epoch_losses = []
for _epoch in range(1, 4):
    model.train()
    train_loss = 0
    for data, _ in loader:
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    epoch_losses.append(train_loss / len(loader.dataset))

model.eval()
with torch.no_grad():
    data = images[:4]
    recon, mu, logvar = model(data)
    check = loss_function(recon, data, mu, logvar).item()
    n = min(data.size(0), 4)
    comparison = torch.cat([data[:n], recon.view(4, 1, 8, 8)[:n]])
    sample = model.decode(torch.randn(6, 4).to(device)).cpu()
print("RESULT " + json.dumps({
    "x": data.view(-1, PIXELS).tolist(), "recon": recon.tolist(), "mu": mu.tolist(),
    "logvar": logvar.tolist(), "loss": check, "epoch_losses": epoch_losses,
    "comparison": list(comparison.shape), "sample": list(sample.shape),
    "sample_range": [sample.min().item(), sample.max().item()],
}))  # fmt: skip
