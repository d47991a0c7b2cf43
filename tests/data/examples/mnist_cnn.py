"""A small convolutional classifier trained the way pytorch/examples' ``mnist/main.py``
trains one: two convolutions, max-pooling, dropout, ``log_softmax`` and ``nll_loss``,
``Adadelta`` with a ``StepLR`` schedule, a ``DataLoader`` over a ``TensorDataset`` of
random 12x12 "digits", an evaluation pass under ``no_grad`` that counts correct
predictions, and the weights saved with ``torch.save(model.state_dict())``.

Prints one ``RESULT {json}`` line with the last batch's log-probabilities, targets and
loss, the learning rates the schedule gave, the accuracy count and the state's keys.
"""

import argparse
import json

import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.optim as optim
from kernbench.torch.optim.lr_scheduler import StepLR
from kernbench.torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(8 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, device, loader, optimizer, log):
    model.train()
    for _batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        log.append(loss.item())


def test(model, device, loader):
    model.eval()
    test_loss, correct, sums = 0.0, 0, []
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            sums.append(F.nll_loss(output, target, reduction="sum").item())
            test_loss += sums[-1]
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    return test_loss / len(loader.dataset), correct, output, target, sums, pred


def main():
    parser = argparse.ArgumentParser(description="small MNIST-style classifier")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    rng = np.random.default_rng(args.seed)
    images = rng.random((32, 1, 12, 12), dtype=np.float32)
    labels = rng.integers(0, 10, size=32)
    images = (images - 0.1307) / 0.3081
    dataset = TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
    train_loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(dataset, batch_size=16)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    losses, rates = [], []
    for _ in range(args.epochs):
        train(model, device, train_loader, optimizer, losses)
        rates.append(optimizer.param_groups[0]["lr"])
        scheduler.step()
    test_loss, correct, output, target, sums, pred = test(model, device, test_loader)
    state = model.state_dict()
    torch.save(state, "mnist_cnn.pt")
    print("RESULT " + json.dumps({
        "log_probs": output.tolist(), "targets": target.tolist(),
        "test_loss": test_loss, "correct": correct, "count": len(test_loader.dataset),
        "batch_sums": sums, "pred": pred.tolist(),
        "losses": losses, "rates": rates, "keys": list(state),
        "last_lr": scheduler.get_last_lr(),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
