"""A siamese network trained as pytorch/examples' ``siamese_network/main.py`` trains one:
a small convolutional backbone cut from a classifier with
``nn.Sequential(*list(net.children())[:-1])``, both images through it, the features
joined with ``torch.cat`` and scored by a linear head and ``Sigmoid``; ``xavier_uniform_``
and ``m.bias.data.fill_(0.01)`` applied with ``model.apply``; a ``Dataset`` subclass that
pairs images of the same or different classes with ``torch.tensor(1, dtype=torch.float)``
targets; ``BCELoss``, ``Adadelta`` + ``StepLR``; predictions by
``torch.where(outputs > 0.5, 1, 0)``.

Prints one ``RESULT {json}`` line with the last evaluation batch's outputs, targets and
loss, and the correct count.
"""

import json
import random

import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.optim as optim
from kernbench.torch.optim.lr_scheduler import StepLR
from kernbench.torch.utils.data import DataLoader, Dataset


class SmallResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(4, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        backbone = SmallResNet()
        self.fc_in_features = backbone.fc.in_features
        self.backbone = nn.Sequential(*(list(backbone.children())[:-1]))
        self.fc = nn.Sequential(
            nn.Linear(self.fc_in_features * 2, 8),
            nn.ReLU(inplace=True),
            nn.Linear(8, 1),
        )
        self.sigmoid = nn.Sigmoid()
        self.backbone.apply(self.init_weights)
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.backbone(x)
        return output.view(output.size()[0], -1)

    def forward(self, input1, input2):
        output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(output))


class PairDataset(Dataset):
    def __init__(self, images, labels):
        self.data = images.unsqueeze(1).clone()
        self.targets = labels
        np_arr = np.array(self.targets.clone())
        self.grouped = {i: np.where(np_arr == i)[0] for i in range(3)}

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, index):
        cls = random.randint(0, 2)
        first, second = random.choice(self.grouped[cls]), random.choice(self.grouped[cls])
        image_1 = self.data[first].clone().float()
        if index % 2 == 0:
            image_2 = self.data[second].clone().float()
            target = torch.tensor(1, dtype=torch.float)
        else:
            other = random.choice([c for c in range(3) if c != cls])
            image_2 = self.data[random.choice(self.grouped[other])].clone().float()
            target = torch.tensor(0, dtype=torch.float)
        return image_1, image_2, target


random.seed(2)
torch.manual_seed(2)
device = torch.device("cpu")
labels = torch.arange(18) % 3
images = torch.rand(18, 8, 8) + labels.view(-1, 1, 1).float()
dataset = PairDataset(images, labels)
train_loader = DataLoader(dataset, batch_size=6, shuffle=True)
test_loader = DataLoader(dataset, batch_size=9)
model = SiameseNetwork().to(device)
optimizer = optim.Adadelta(model.parameters(), lr=1.0)
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
criterion = nn.BCELoss()
losses = []
for _epoch in range(2):
    model.train()
    for images_1, images_2, targets in train_loader:
        images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    scheduler.step()
model.eval()
test_loss, correct = 0.0, 0
with torch.no_grad():
    for images_1, images_2, targets in test_loader:
        outputs = model(images_1, images_2).squeeze()
        batch_loss = criterion(outputs, targets)
        test_loss += batch_loss.sum().item()
        pred = torch.where(outputs > 0.5, 1, 0)
        correct += pred.eq(targets.view_as(pred)).sum().item()
print("RESULT " + json.dumps({
    "outputs": outputs.tolist(), "targets": targets.tolist(), "loss": batch_loss.item(),
    "pred": pred.tolist(), "pred_dtype": str(pred.dtype), "correct": correct,
    "losses": losses, "backbone": [type(m).__name__ for m in model.backbone],
}))  # fmt: skip
