"""A training script as the PyTorch DDP tutorial and its mixed-precision recipe write it
(imports changed only): DataLoader over a DistributedSampler, DDP, autocast, GradScaler,
backward, SGD, and a checkpoint saved by rank 0."""

import sys

from kernbench.torch.nn.parallel import DistributedDataParallel as DDP

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn as nn
import kernbench.torch.optim as optim
from kernbench.torch.utils.data import DataLoader, TensorDataset
from kernbench.torch.utils.data.distributed import DistributedSampler


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def demo_basic():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device_id = rank % torch.cuda.device_count()
    model = ToyModel().to(device_id)
    ddp_model = DDP(model, device_ids=[device_id])
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    data = TensorDataset(torch.randn(64, 10), torch.randn(64, 5))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = loss_fn(ddp_model(x.to(device_id)), y.to(device_id))
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
            torch.save(model.state_dict(), sys.argv[1])
    dist.destroy_process_group()


if __name__ == "__main__":
    demo_basic()
