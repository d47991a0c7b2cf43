"""The programs users start DDP from, written for KernBench (only the imports differ).

First PyTorch's "Getting Started with Distributed Data Parallel" tutorial: ``setup`` with
the backend ``get_default_backend_for_device`` picks, ``demo_basic``, ``demo_checkpoint``
(rank 0 saves, ``dist.barrier()``, every rank loads with ``map_location={"cuda:0":
f"cuda:{rank}"}``) and ``demo_model_parallel`` (``ToyMpModel`` split over two devices per
rank, DDP without ``device_ids``), each started by ``mp.spawn(demo, args=(world_size,),
nprocs=world_size, join=True)``.  Then pytorch/examples' ``ddp-tutorial-series/
multigpu.py``: a ``Trainer`` over a ``DistributedSampler`` ``DataLoader``, ``F.cross_entropy``
of a ``Linear(20, 1)`` against float targets, and ``torch.save`` of the module's
``state_dict`` by rank 0, started by ``mp.spawn(main, args=(world_size, save_every,
total_epochs, batch_size), nprocs=world_size)``.

Each demo rank prints one ``RESULT {json}`` line (what it started from, its data and
what it ended with), which ``tests/test_real_programs.py`` checks against NumPy.
"""

import json
import os
import sys
import tempfile

from kernbench.torch.nn.parallel import DistributedDataParallel as DDP

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.multiprocessing as mp
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.optim as optim
from kernbench.torch.distributed import destroy_process_group, init_process_group
from kernbench.torch.utils.data import DataLoader, Dataset
from kernbench.torch.utils.data.distributed import DistributedSampler


def report(demo, rank, **values):
    as_lists = {k: v.tolist() if hasattr(v, "tolist") else v for k, v in values.items()}
    print("RESULT " + json.dumps({"demo": demo, "rank": rank, **as_lists}))


def parameters_of(module):
    return {name: p.detach().cpu().numpy().tolist() for name, p in module.state_dict().items()}


# -- the DDP tutorial ----------------------------------------------------------------------
def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    acc = torch.accelerator.current_accelerator()
    backend = torch.distributed.get_default_backend_for_device(acc)
    dist.init_process_group(backend, rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def demo_basic(rank, world_size):
    print(f"Running basic DDP example on rank {rank}.")
    setup(rank, world_size)
    model = ToyModel().to(rank)
    ddp_model = DDP(model, device_ids=[rank])
    start = parameters_of(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    optimizer.zero_grad()
    inputs = torch.randn(20, 10)
    outputs = ddp_model(inputs)
    labels = torch.randn(20, 5).to(rank)
    loss_fn(outputs, labels).backward()
    optimizer.step()
    report("basic", rank, start=start, x=inputs, y=labels, end=parameters_of(model))
    cleanup()


def demo_checkpoint(rank, world_size):
    print(f"Running DDP checkpoint example on rank {rank}.")
    setup(rank, world_size)
    model = ToyModel().to(rank)
    ddp_model = DDP(model, device_ids=[rank])
    CHECKPOINT_PATH = tempfile.gettempdir() + f"/model.{os.getpid()}.checkpoint"
    if rank == 0:
        torch.save(ddp_model.state_dict(), CHECKPOINT_PATH)
    dist.barrier()
    map_location = {"cuda:0": f"cuda:{rank}"}
    loaded = torch.load(CHECKPOINT_PATH, map_location=map_location, weights_only=True)
    devices = sorted({t.get_device() for t in loaded.values()})
    ddp_model.load_state_dict(loaded)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    optimizer.zero_grad()
    outputs = ddp_model(torch.randn(20, 10))
    labels = torch.randn(20, 5).to(rank)
    loss_fn(outputs, labels).backward()
    optimizer.step()
    dist.barrier()
    if rank == 0:
        os.remove(CHECKPOINT_PATH)
    report("checkpoint", rank, loaded_on=devices, keys=sorted(loaded), end=parameters_of(model))
    cleanup()


class ToyMpModel(nn.Module):
    def __init__(self, dev0, dev1):
        super().__init__()
        self.dev0 = dev0
        self.dev1 = dev1
        self.net1 = torch.nn.Linear(10, 10).to(dev0)
        self.relu = torch.nn.ReLU()
        self.net2 = torch.nn.Linear(10, 5).to(dev1)

    def forward(self, x):
        x = x.to(self.dev0)
        x = self.relu(self.net1(x))
        x = x.to(self.dev1)
        return self.net2(x)


def demo_model_parallel(rank, world_size):
    print(f"Running DDP with model parallel example on rank {rank}.")
    setup(rank, world_size)
    dev0 = rank * 2
    dev1 = rank * 2 + 1
    mp_model = ToyMpModel(dev0, dev1)
    ddp_mp_model = DDP(mp_model)
    start = parameters_of(mp_model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_mp_model.parameters(), lr=0.001)
    optimizer.zero_grad()
    inputs = torch.randn(20, 10)
    outputs = ddp_mp_model(inputs)
    labels = torch.randn(20, 5).to(dev1)
    loss_fn(outputs, labels).backward()
    optimizer.step()
    devices = [mp_model.net1.weight.get_device(), mp_model.net2.weight.get_device()]
    report(
        "model_parallel", rank, start=start, x=inputs, y=labels, end=parameters_of(mp_model),
        devices=devices, output_device=outputs.get_device(),
    )  # fmt: skip
    cleanup()


def run_demo(demo_fn, world_size):
    mp.spawn(demo_fn, args=(world_size,), nprocs=world_size, join=True)


# -- pytorch/examples ddp-tutorial-series/multigpu.py --------------------------------------
class MyTrainDataset(Dataset):
    def __init__(self, size):
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


def ddp_setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"
    init_process_group(backend="nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)


class Trainer:
    def __init__(self, model, train_data, optimizer, gpu_id, save_every):
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.model = DDP(model, device_ids=[gpu_id])

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        steps = len(self.train_data)
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batch size: {b_sz} | Steps: {steps}")
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            source = source.to(self.gpu_id)
            targets = targets.to(self.gpu_id)
            self._run_batch(source, targets)

    def _save_checkpoint(self, epoch):
        ckp = self.model.module.state_dict()
        PATH = "checkpoint.pt"
        torch.save(ckp, PATH)
        print(f"Epoch {epoch} | Training checkpoint saved at {PATH}")

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_checkpoint(epoch)


def load_train_objs():
    train_set = MyTrainDataset(64)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=True,
        shuffle=False,
        sampler=DistributedSampler(dataset),
    )


def main(rank, world_size, save_every, total_epochs, batch_size):
    ddp_setup(rank, world_size)
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, rank, save_every)
    start = parameters_of(trainer.model.module)
    trainer.train(total_epochs)
    report("multigpu", rank, start=start, end=parameters_of(trainer.model.module))
    destroy_process_group()


if __name__ == "__main__":
    n_gpus = torch.accelerator.device_count()
    assert n_gpus >= 2, f"Requires at least 2 GPUs to run, but got {n_gpus}"
    world_size = n_gpus
    run_demo(demo_basic, world_size)
    run_demo(demo_checkpoint, world_size)
    run_demo(demo_model_parallel, n_gpus // 2)
    total_epochs, save_every = int(sys.argv[1]), int(sys.argv[2])
    mp.spawn(main, args=(world_size, save_every, total_epochs, 16), nprocs=world_size)
