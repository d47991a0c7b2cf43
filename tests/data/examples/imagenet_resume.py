"""Training with checkpoints and resumption, as pytorch/examples' ``imagenet/main.py``
does it: the model wrapped in ``nn.DataParallel``, ``CrossEntropyLoss``, ``SGD`` with
momentum and weight decay, ``StepLR``, ``AverageMeter``s summing tensors, top-1/top-5
accuracy by ``output.topk(maxk, 1, True, True)`` and ``pred.eq(target.view(1, -1)
.expand_as(pred))``, ``best_acc1 = max(acc1, best_acc1)`` on tensors, and
``torch.save({"epoch", "arch", "state_dict", "best_acc1", "optimizer", "scheduler"})``
with ``shutil.copyfile`` to ``model_best.pth.tar``; ``--resume`` loads that dictionary
back (``model.load_state_dict``, ``optimizer.load_state_dict``,
``scheduler.load_state_dict``) and carries on.

The data are random 8x8 three-channel images of 6 classes.  Prints one ``RESULT {json}``
line with the last validation batch's logits and targets, its accuracies and loss (the
test recomputes them), and where the run started and ended.
"""

import argparse
import json
import os
import shutil

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.optim  # noqa: F401 - as torch.optim
import kernbench.torch.utils.data  # noqa: F401 - as torch.utils.data
from kernbench.torch.optim.lr_scheduler import StepLR

parser = argparse.ArgumentParser(description="imagenet-style training")
parser.add_argument("--epochs", default=2, type=int)
parser.add_argument("--start-epoch", default=0, type=int)
parser.add_argument("--lr", default=0.1, type=float)
parser.add_argument("--momentum", default=0.9, type=float)
parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
parser.add_argument("--resume", default="", type=str)
parser.add_argument("--seed", default=3, type=int)


class AverageMeter:
    def __init__(self, name, fmt=":f"):
        self.name, self.fmt = name, fmt
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        return ("{name} {val" + self.fmt + "} ({avg" + self.fmt + "})").format(**self.__dict__)


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def make_model():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(), nn.Linear(32, 6),
    )  # fmt: skip


def train(loader, model, criterion, optimizer, device):
    losses = AverageMeter("Loss", ":.4e")
    model.train()
    for images, target in loader:
        images, target = images.to(device, non_blocking=True), target.to(device, non_blocking=True)
        output = model(images)
        loss = criterion(output, target)
        losses.update(loss.item(), images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses.avg


def validate(loader, model, criterion, device, last):
    top1, top5 = AverageMeter("Acc@1", ":6.2f"), AverageMeter("Acc@5", ":6.2f")
    model.eval()
    with torch.no_grad():
        for images, target in loader:
            images, target = images.to(device), target.to(device)
            output = model(images)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            top1.update(acc1[0], images.size(0))
            top5.update(acc5[0], images.size(0))
            last.update(logits=output.tolist(), targets=target.tolist(), loss=loss.item(),
                        acc1=acc1.item(), acc5=acc5.item())  # fmt: skip
    print(f" * {top1} {top5}")
    return top1.avg


def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "model_best.pth.tar")


def main():
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.accelerator.current_accelerator()
    model = torch.nn.DataParallel(make_model()).to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)  # fmt: skip
    scheduler = StepLR(optimizer, step_size=1, gamma=0.5)
    best_acc1, resumed = 0, None
    if args.resume and os.path.isfile(args.resume):
        checkpoint = torch.load(args.resume, map_location=f"{device.type}:0")
        args.start_epoch = checkpoint["epoch"]
        best_acc1 = checkpoint["best_acc1"]
        model.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        resumed = {"epoch": checkpoint["epoch"], "lr": optimizer.param_groups[0]["lr"],
                   "best_acc1": float(best_acc1)}  # fmt: skip
    images = torch.randn(24, 3, 8, 8)
    labels = torch.randint(0, 6, (24,))
    dataset = torch.utils.data.TensorDataset(images, labels)
    train_loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True)
    val_loader = torch.utils.data.DataLoader(dataset, batch_size=12, shuffle=False)
    last, losses = {}, []
    if resumed is not None:  # the loaded model evaluates the data it was saved with
        resumed["acc1"] = float(validate(val_loader, model, criterion, device, last))
    for epoch in range(args.start_epoch, args.epochs):
        losses.append(train(train_loader, model, criterion, optimizer, device))
        acc1 = validate(val_loader, model, criterion, device, last)
        scheduler.step()
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        save_checkpoint({
            "epoch": epoch + 1, "arch": "small", "state_dict": model.state_dict(),
            "best_acc1": best_acc1, "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
        }, is_best)  # fmt: skip
    print("RESULT " + json.dumps({
        **last, "losses": losses, "resumed": resumed, "best_acc1": float(best_acc1),
        "lr": optimizer.param_groups[0]["lr"], "keys": list(model.state_dict())[:2],
        "best_saved": os.path.isfile("model_best.pth.tar"),
        "final_acc1": float(acc1) if args.start_epoch < args.epochs else None,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
