"""A spatial transformer network trained as PyTorch's spatial transformer tutorial trains
one: a localisation net (``Conv2d``, ``MaxPool2d``, ``ReLU``) and a regressor whose last
layer starts at the identity (``weight.data.zero_()``,
``bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))``), the input
resampled by ``F.affine_grid(theta, x.size())`` and ``F.grid_sample(x, grid)`` before a
small classifier; ``SGD``, ``nll_loss``.

Inputs are random 12x12 images.  Prints one ``RESULT {json}`` line with a batch and the
untrained transformer's output on it (the identity: the test checks they are equal),
the trained ``theta`` of that batch and its resampled output (recomputed by the test).
"""

import json

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.optim as optim


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
        self.fc = nn.Linear(4 * 5 * 5, 10)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=3),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
        )
        self.fc_loc = nn.Sequential(nn.Linear(4 * 5 * 5, 8), nn.ReLU(True), nn.Linear(8, 3 * 2))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def theta(self, x):
        xs = self.localization(x).view(-1, 4 * 5 * 5)
        return self.fc_loc(xs).view(-1, 2, 3)

    def stn(self, x):
        grid = F.affine_grid(self.theta(x), x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    def forward(self, x):
        x = self.stn(x)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.dropout(x.view(-1, 4 * 5 * 5), training=self.training)
        return F.log_softmax(self.fc(x), dim=1)


torch.manual_seed(4)
model = Net()
optimizer = optim.SGD(model.parameters(), lr=0.05)
images, labels = torch.rand(16, 1, 12, 12), torch.randint(0, 10, (16,))
with torch.no_grad():
    untrained = model.stn(images[:2])
losses = []
for _epoch in range(2):
    model.train()
    for batch in range(2):
        data, target = images[8 * batch : 8 * batch + 8], labels[8 * batch : 8 * batch + 8]
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
model.eval()
with torch.no_grad():
    theta = model.theta(images[:2])
    warped = model.stn(images[:2])
print("RESULT " + json.dumps({
    "images": images[:2].tolist(), "untrained": untrained.tolist(), "theta": theta.tolist(),
    "warped": warped.tolist(), "losses": losses,
}))  # fmt: skip
