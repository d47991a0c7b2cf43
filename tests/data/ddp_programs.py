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
total_epochs, batch_size), nprocs=world_size)``.  Last pytorch/examples'
``distributed/minGPT-ddp`` (a GPT with ``nn.MultiheadAttention``, AdamW parameter groups,
``GradScaler`` and ``autocast``, ``clip_grad_norm_``, ``random_split``, a ``Snapshot``
dataclass saved with the optimizer's state), its ``main(cfg)`` spawned twice on 2 ranks:
one epoch, then a run that resumes from the snapshot for a second (hydra's config is a
dict here, and fsspec's ``open`` Python's).

Each demo rank prints one ``RESULT {json}`` line (what it started from, its data and
what it ended with), which ``tests/test_real_programs.py`` checks against NumPy.
"""

import json
import math
import os
import sys
import tempfile
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

from kernbench.torch.nn.parallel import DistributedDataParallel as DDP

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.multiprocessing as mp
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.optim as optim
from kernbench.torch.distributed import destroy_process_group, init_process_group
from kernbench.torch.utils.data import DataLoader, Dataset, random_split
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


# -- pytorch/examples distributed/minGPT-ddp (hydra and fsspec left out) ---------------
@dataclass
class GPTConfig:
    model_type: str = "gpt2"
    n_layer: int = None
    n_head: int = None
    n_embd: int = None
    vocab_size: int = 50257
    block_size: int = 1024
    embd_pdrop: float = 0.1
    resid_pdrop: float = 0.1
    attn_pdrop: float = 0.1


@dataclass
class OptimizerConfig:
    learning_rate: float = 3e-4
    weight_decay: float = 0.1


class MultiheadAttentionLayer(nn.Module):
    def __init__(self, config, device="cpu", dtype=torch.float32):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.resid_drop = nn.Dropout(config.resid_pdrop)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, device=device, dtype=dtype)
        self.register_buffer(
            "mask",
            torch.tril(torch.ones(config.block_size, config.block_size)).view(
                1, 1, config.block_size, config.block_size
            ),
        )
        self.attn = torch.nn.MultiheadAttention(
            embed_dim=config.n_embd,
            num_heads=config.n_head,
            dropout=config.attn_pdrop,
            batch_first=True,
            device=device,
            dtype=dtype,
        )

    def forward(self, x):
        _, seq_size, _ = x.size()
        y = self.attn(x, x, x, attn_mask=self.mask[0, 0, :seq_size, :seq_size])[0]
        return self.resid_drop(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.attn = MultiheadAttentionLayer(config)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
            nn.Dropout(config.resid_pdrop),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class EmbeddingStem(nn.Module):
    def __init__(self, config, device="cpu", dtype=torch.float32):
        super().__init__()
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd, device=device, dtype=dtype)
        self.pos_emb = nn.Parameter(
            torch.zeros(1, config.block_size, config.n_embd, device=device, dtype=dtype)
        )
        self.drop = nn.Dropout(config.embd_pdrop)
        self.block_size = config.block_size

    def reset_parameters(self):
        self.tok_emb.reset_parameters()

    def forward(self, idx):
        b, t = idx.size()
        assert t <= self.block_size
        return self.drop(self.tok_emb(idx) + self.pos_emb[:, :t, :])


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block_size = config.block_size
        self.emb_stem = EmbeddingStem(config)
        self.blocks = nn.Sequential(*[Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                p.data.normal_(mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        n_params = sum(p.numel() for p in self.blocks.parameters())
        print(f"number of parameters: {n_params / 1e6:.2f}M")

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def forward(self, idx, targets=None):
        x = self.ln_f(self.blocks(self.emb_stem(idx)))
        logits = self.head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size :]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, top_k)
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            if do_sample:
                idx_next = torch.multinomial(probs, num_samples=1)
            else:
                _, idx_next = torch.topk(probs, k=1, dim=-1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def create_optimizer(model, opt_config):
    decay, no_decay = set(), set()
    whitelist = (torch.nn.Linear,)
    blacklist = (torch.nn.LayerNorm, torch.nn.Embedding)
    for mn, m in model.named_modules():
        for pn, _p in m.named_parameters():
            fpn = f"{mn}.{pn}" if mn else pn
            if pn.endswith("bias"):
                no_decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, whitelist):
                decay.add(fpn)
            elif pn.endswith("in_proj_weight"):
                decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, blacklist):
                no_decay.add(fpn)
            elif pn.endswith("pos_emb"):
                no_decay.add(fpn)
    param_dict = {pn: p for pn, p in model.named_parameters()}
    assert len(decay & no_decay) == 0
    assert len(param_dict.keys() - (decay | no_decay)) == 0, str(
        param_dict.keys() - (decay | no_decay)
    )
    optim_groups = [
        {
            "params": [param_dict[pn] for pn in sorted(list(decay))],
            "weight_decay": opt_config.weight_decay,
        },
        {"params": [param_dict[pn] for pn in sorted(list(no_decay))], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(optim_groups, lr=opt_config.learning_rate, betas=(0.9, 0.95))


@dataclass
class DataConfig:
    path: str = None
    block_size: int = None
    train_split: float = None
    truncate: float = 1.0


class CharDataset(Dataset):
    def __init__(self, data_cfg):
        with open(data_cfg.path, "rb") as f:
            data = f.read().decode("utf-8")
        data = data[: int(len(data) * data_cfg.truncate)]
        chars = sorted(list(set(data)))
        data_size, vocab_size = len(data), len(chars)
        print(f"Data has {data_size} characters, {vocab_size} unique.")
        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.itos = {i: ch for i, ch in enumerate(chars)}
        self.block_size = data_cfg.block_size
        self.vocab_size = vocab_size
        self.data = data

    def __len__(self):
        return len(self.data) - self.block_size

    def __getitem__(self, idx):
        chunk = self.data[idx : idx + self.block_size + 1]
        dix = [self.stoi[s] for s in chunk]
        return torch.tensor(dix[:-1], dtype=torch.long), torch.tensor(dix[1:], dtype=torch.long)


@dataclass
class TrainerConfig:
    max_epochs: int = None
    batch_size: int = None
    data_loader_workers: int = None
    grad_norm_clip: float = None
    snapshot_path: str | None = None
    save_every: int = None
    use_amp: bool = None


@dataclass
class Snapshot:
    model_state: "OrderedDict[str, torch.Tensor]"
    optimizer_state: dict[str, Any]
    finished_epoch: int


class GPTTrainer:  # minGPT-ddp's Trainer (multigpu.py has one too)
    def __init__(self, trainer_config, model, optimizer, train_dataset, test_dataset=None):
        self.config = trainer_config
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.train_dataset = train_dataset
        self.train_loader = self._prepare_dataloader(train_dataset)
        self.test_loader = self._prepare_dataloader(test_dataset) if test_dataset else None
        self.epochs_run = 0
        self.model = model.to(self.local_rank)
        self.optimizer = optimizer
        self.save_every = self.config.save_every
        if self.config.use_amp:
            self.scaler = torch.cuda.amp.GradScaler()
        if self.config.snapshot_path is None:
            self.config.snapshot_path = "snapshot.pt"
        self._load_snapshot()
        self.model = DDP(self.model, device_ids=[self.local_rank])

    def _prepare_dataloader(self, dataset):
        return DataLoader(
            dataset,
            batch_size=self.config.batch_size,
            pin_memory=True,
            shuffle=False,
            num_workers=self.config.data_loader_workers,
            sampler=DistributedSampler(dataset),
        )

    def _load_snapshot(self):
        try:
            with open(self.config.snapshot_path, "rb") as f:
                snapshot_data = torch.load(f, map_location="cpu")
        except FileNotFoundError:
            print("Snapshot not found. Training model from scratch")
            return
        snapshot = Snapshot(**snapshot_data)
        self.model.load_state_dict(snapshot.model_state)
        self.optimizer.load_state_dict(snapshot.optimizer_state)
        self.epochs_run = snapshot.finished_epoch
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets, train=True):
        with (
            torch.set_grad_enabled(train),
            torch.amp.autocast(
                device_type="cuda", dtype=torch.float16, enabled=(self.config.use_amp)
            ),
        ):
            _, loss = self.model(source, targets)
        if train:
            self.optimizer.zero_grad(set_to_none=True)
            if self.config.use_amp:
                self.scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch, dataloader, train=True):
        dataloader.sampler.set_epoch(epoch)
        for iter, (source, targets) in enumerate(dataloader):
            step_type = "Train" if train else "Eval"
            source = source.to(self.local_rank)
            targets = targets.to(self.local_rank)
            batch_loss = self._run_batch(source, targets, train)
            if iter % 100 == 0:
                where = f"[GPU{self.global_rank}] Epoch {epoch} | Iter {iter}"
                print(f"{where} | {step_type} Loss {batch_loss:.5f}")

    def _save_snapshot(self, epoch):
        model = self.model
        raw_model = model.module if hasattr(model, "module") else model
        snapshot = Snapshot(
            model_state=raw_model.state_dict(),
            optimizer_state=self.optimizer.state_dict(),
            finished_epoch=epoch,
        )
        snapshot = asdict(snapshot)
        torch.save(snapshot, self.config.snapshot_path)
        print(f"Snapshot saved at epoch {epoch}")

    def train(self):
        for epoch in range(self.epochs_run, self.config.max_epochs):
            epoch += 1
            self._run_epoch(epoch, self.train_loader, train=True)
            if self.local_rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)
            if self.test_loader:
                self._run_epoch(epoch, self.test_loader, train=False)


def gpt_ddp_setup():
    acc = torch.accelerator.current_accelerator()
    rank = int(os.environ["LOCAL_RANK"])
    device: torch.device = torch.device(f"{acc}:{rank}")
    backend = torch.distributed.get_default_backend_for_device(device)
    init_process_group(backend=backend)
    torch.accelerator.set_device_index(rank)


def gpt_main(rank, cfg):
    """minGPT-ddp's ``main(cfg)`` (its $LOCAL_RANK and $RANK are set in each rank)."""
    gpt_ddp_setup()
    gpt_cfg = GPTConfig(**cfg["gpt_config"])
    opt_cfg = OptimizerConfig(**cfg["optimizer_config"])
    data_cfg = DataConfig(**cfg["data_config"])
    trainer_cfg = TrainerConfig(**cfg["trainer_config"])
    dataset = CharDataset(data_cfg)
    train_len = int(len(dataset) * data_cfg.train_split)
    train_set, test_set = random_split(dataset, [train_len, len(dataset) - train_len])
    gpt_cfg.vocab_size = dataset.vocab_size
    gpt_cfg.block_size = dataset.block_size
    model = GPT(gpt_cfg)
    optimizer = create_optimizer(model, opt_cfg)
    trainer = GPTTrainer(trainer_cfg, model, optimizer, train_set, test_set)
    start_epoch = trainer.epochs_run
    trainer.train()
    raw = trainer.model.module
    report(
        f"mingpt_{trainer_cfg.max_epochs}_epochs",
        rank,
        resumed_at=start_epoch,
        steps=[s["step"] for s in optimizer.state_dict()["state"].values()],
        scale=trainer.scaler.get_scale(),
        end=sum(p.detach().double().sum().item() for p in raw.parameters()),
    )
    destroy_process_group()


def gpt_config(text_path, snapshot_path, max_epochs):
    return {
        "gpt_config": {"n_layer": 1, "n_head": 2, "n_embd": 8},
        "data_config": {"path": text_path, "block_size": 4, "train_split": 0.75},
        "optimizer_config": {"weight_decay": 0.1, "learning_rate": 0.0003},
        "trainer_config": {
            "data_loader_workers": 0,
            "max_epochs": max_epochs,
            "batch_size": 8,
            "use_amp": True,
            "save_every": 1,
            "snapshot_path": snapshot_path,
            "grad_norm_clip": 1.0,
        },
    }


if __name__ == "__main__":
    n_gpus = torch.accelerator.device_count()
    assert n_gpus >= 2, f"Requires at least 2 GPUs to run, but got {n_gpus}"
    world_size = n_gpus
    run_demo(demo_basic, world_size)
    run_demo(demo_checkpoint, world_size)
    run_demo(demo_model_parallel, n_gpus // 2)
    total_epochs, save_every = int(sys.argv[1]), int(sys.argv[2])
    mp.spawn(main, args=(world_size, save_every, total_epochs, 16), nprocs=world_size)
    text, snapshot = sys.argv[3], sys.argv[4]
    mp.spawn(gpt_main, args=(gpt_config(text, snapshot, 1),), nprocs=2)
    mp.spawn(gpt_main, args=(gpt_config(text, snapshot, 2),), nprocs=2)  # resumes at epoch 1
