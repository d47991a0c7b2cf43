"""A recurrent image classifier trained as pytorch/examples' ``mnist_rnn/main.py`` trains
one: each image read row by row by ``nn.LSTM(input_size, hidden_size, batch_first=True)``,
the last step's output (``output[:, -1, :]``) through ``BatchNorm1d``, ``Dropout2d`` on
the 2-D features, two ``Linear`` layers and ``log_softmax``; ``nll_loss``, ``Adadelta``
with ``StepLR``, the evaluation pass summing ``nll_loss(reduction="sum")``.

Images are random 6x6 arrays whose class is the brightest row band.  Prints one
``RESULT {json}`` line with the evaluation's log-probabilities, targets and summed loss
(recomputed by the test), and the LSTM's output shapes.
"""

import argparse
import json

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.optim as optim
from kernbench.torch.optim.lr_scheduler import StepLR

SIDE = 6


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(input_size=SIDE, hidden_size=12, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(12)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(12, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, input):
        input = input.reshape(-1, SIDE, SIDE)
        output, hidden = self.rnn(input)
        self.shapes = [list(output.shape), [list(h.shape) for h in hidden]]
        output = output[:, -1, :]
        output = self.batchnorm(output)
        output = self.dropout1(output)
        output = F.relu(self.fc1(output))
        output = self.dropout2(output)
        return F.log_softmax(self.fc2(output), dim=1)


def make_data(count):
    labels = torch.randint(0, 3, (count,))
    images = torch.rand(count, 1, SIDE, SIDE) * 0.5
    for i, label in enumerate(labels.tolist()):
        images[i, 0, 2 * label : 2 * label + 2, :] += 0.5
    return images, labels


parser = argparse.ArgumentParser(description="row-by-row LSTM classifier")
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--gamma", type=float, default=0.7)
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = torch.device("cpu")
train_set = torch.utils.data.TensorDataset(*make_data(24))
test_set = torch.utils.data.TensorDataset(*make_data(12))
train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=12)
model = Net().to(device)
optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
losses = []
for _epoch in range(1, args.epochs + 1):
    model.train()
    for data, target in train_loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    scheduler.step()
model.eval()
test_loss, correct = 0, 0
with torch.no_grad():
    for data, target in test_loader:
        data, target = data.to(device), target.to(device)
        output = model(data)
        test_loss += F.nll_loss(output, target, reduction="sum").item()
        pred = output.argmax(dim=1, keepdim=True)
        correct += pred.eq(target.view_as(pred)).sum().item()
print("RESULT " + json.dumps({
    "log_probs": output.tolist(), "targets": target.tolist(), "test_loss": test_loss,
    "correct": correct, "losses": losses, "shapes": model.shapes,
    "running_var": model.batchnorm.running_var.tolist(),
}))  # fmt: skip
