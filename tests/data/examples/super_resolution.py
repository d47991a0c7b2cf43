"""Sub-pixel super-resolution trained as pytorch/examples' ``super_resolution`` trains it:
four convolutions with tuple kernel, stride and padding arguments, ``nn.PixelShuffle``,
weights set by ``init.orthogonal_(w, init.calculate_gain("relu"))``, ``MSELoss``,
``Adam``, PSNR as ``10 * log10(1 / mse)`` under ``no_grad``, and the whole model saved
with ``torch.save(model, path)``.

Low-resolution inputs are 2x2 average pools of random 8x8 images.  Prints one
``RESULT {json}`` line with a prediction, its target, the MSE and PSNR, and the first
convolution's weight (whose rows the test checks are orthogonal at the gain).
"""

import argparse
import json
from math import log10

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.nn.init as init
import kernbench.torch.optim as optim

parser = argparse.ArgumentParser(description="super resolution")
parser.add_argument("--upscale_factor", type=int, default=2)
parser.add_argument("--nEpochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--seed", type=int, default=123)
opt = parser.parse_args()


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 8, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(8, 8, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(8, 4, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(4, upscale_factor**2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


torch.manual_seed(opt.seed)
device = torch.device("cpu")
targets = torch.rand(12, 1, 8, 8)
inputs = F.avg_pool2d(targets, opt.upscale_factor)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(inputs, targets), batch_size=4, shuffle=True
)
model = Net(upscale_factor=opt.upscale_factor).to(device)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=opt.lr)
epoch_losses = []
for _epoch in range(1, opt.nEpochs + 1):
    epoch_loss = 0
    for _iteration, batch in enumerate(loader, 1):
        input, target = batch[0].to(device), batch[1].to(device)
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()
    epoch_losses.append(epoch_loss / len(loader))
avg_psnr = 0
with torch.no_grad():
    input, target = inputs[:2], targets[:2]
    prediction = model(input)
    mse = criterion(prediction, target)
    psnr = 10 * log10(1 / mse.item())
model_out_path = f"model_epoch_{opt.nEpochs}.pth"
torch.save(model, model_out_path)
print("RESULT " + json.dumps({
    "prediction": prediction.tolist(), "target": target.tolist(), "mse": mse.item(),
    "psnr": psnr, "conv1": model.conv1.weight.view(8, -1).tolist(),
    "epoch_losses": epoch_losses, "gain": init.calculate_gain("relu"),
}))  # fmt: skip
