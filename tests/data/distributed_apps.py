"""PyTorch's "Writing Distributed Applications" tutorial and the torch.distributed calls
real programs add to it, written for KernBench (only the imports differ).

Ranks start as the tutorial starts them (``mp.set_start_method("spawn")``, one
``mp.Process(target=init_process, args=(rank, size, run))`` per rank, ``init_process``
joining the group with the "gloo" backend).  ``run`` goes through point-to-point
(blocking and ``isend``/``irecv``), an ``all_reduce`` on ``new_group([0, 1])``, the
tutorial's hand-written ring all-reduce, ``gather``/``scatter``/``reduce``/``all_gather``/
``broadcast``, the object collectives, ``batch_isend_irecv`` over ``P2POp``s,
``all_to_all_single`` with split sizes (the example of torch's docstring) and
``all_to_all``, a 2x2 ``init_device_mesh``, and the tutorial's data-partitioned training of
its MNIST ``Net`` (``nn.Dropout2d``, ``F.log_softmax(x)`` without ``dim``) with
``average_gradients``, on random images.  Every rank prints one ``RESULT {json}`` line per
pattern; ``tests/test_real_programs.py`` checks the values.
"""

import json
import os
from math import ceil
from random import Random

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.multiprocessing as mp
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.optim as optim
from kernbench.torch.distributed.device_mesh import init_device_mesh
from kernbench.torch.distributed.elastic.multiprocessing.errors import record

WORLD_SIZE = 4


def report(rank, pattern, value):
    print("RESULT " + json.dumps({"rank": rank, "pattern": pattern, "value": value}))


# -- point to point, as the tutorial writes it --------------------------------------------
def blocking(rank, size):
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        dist.send(tensor=tensor, dst=1)
    elif rank == 1:
        dist.recv(tensor=tensor, src=0)
    print("Rank ", rank, " has data ", tensor[0])
    report(rank, "blocking", tensor.item())


def nonblocking(rank, size):
    tensor = torch.zeros(1)
    req = None
    if rank == 0:
        tensor += 1
        req = dist.isend(tensor=tensor, dst=1)
    elif rank == 1:
        req = dist.irecv(tensor=tensor, src=0)
    if req is not None:
        req.wait()
    report(rank, "nonblocking", tensor.item())


def group_all_reduce(rank, size):
    group = dist.new_group([0, 1])
    tensor = torch.ones(1)
    if rank in (0, 1):  # the others are not in the group (torch warns when they call it)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    report(rank, "group_all_reduce", tensor.item())


def allreduce(send, recv):
    """The tutorial's ring all-reduce, by hand."""
    rank = dist.get_rank()
    size = dist.get_world_size()
    send_buff = send.clone()
    recv_buff = send.clone()
    accum = send.clone()
    left = ((rank - 1) + size) % size
    right = (rank + 1) % size
    for i in range(size - 1):
        if i % 2 == 0:
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    recv[:] = accum[:]


def ring(rank, size):
    send = torch.arange(4, dtype=torch.float32) + 10 * rank
    recv = torch.zeros(4)
    allreduce(send, recv)
    report(rank, "ring", recv.tolist())


# -- the collectives ---------------------------------------------------------------------
def collectives(rank, size):
    t = torch.tensor([float(rank)])
    gathered = [torch.zeros(1) for _ in range(size)] if rank == 0 else None
    dist.gather(t, gather_list=gathered, dst=0)
    scattered = torch.zeros(1)
    pieces = [torch.tensor([10.0 * i]) for i in range(size)] if rank == 0 else None
    dist.scatter(scattered, scatter_list=pieces, src=0)
    product = torch.tensor([rank + 1.0])
    dist.reduce(product, dst=0, op=dist.ReduceOp.PRODUCT)
    everyone = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(everyone, torch.tensor([rank, rank * 2.0]))
    sent = torch.tensor([rank + 5.0])
    dist.broadcast(sent, src=1)
    report(rank, "collectives", {
        "gather": None if gathered is None else [g.item() for g in gathered],
        "scatter": scattered.item(),
        "reduce": product.item() if rank == 0 else None,
        "all_gather": [e.tolist() for e in everyone],
        "broadcast": sent.item(),
    })  # fmt: skip


def objects(rank, size):
    everyone = [None] * size
    dist.all_gather_object(everyone, {"rank": rank, "name": f"r{rank}"})
    listed = ["a", 1, {"k": 2}] if rank == 0 else [None, None, None]
    dist.broadcast_object_list(listed, src=0)
    gathered = [None] * size if rank == 0 else None
    dist.gather_object(("x", rank), gathered, dst=0)
    mine = [None]
    dist.scatter_object_list(mine, [i * i for i in range(size)] if rank == 0 else None, src=0)
    passed = [None]
    if rank == 0:
        dist.send_object_list([{"from": 0}], dst=1)
    elif rank == 1:
        dist.recv_object_list(passed, src=0)
    report(rank, "objects", {
        "all_gather": everyone, "broadcast": listed, "gather": gathered, "scatter": mine[0],
        "send": passed[0],
    })  # fmt: skip


def batched_p2p(rank, size):
    send_t = torch.full((3,), float(rank))
    recv_t = torch.zeros(3)
    ops = [
        dist.P2POp(dist.isend, send_t, (rank + 1) % size),
        dist.P2POp(dist.irecv, recv_t, (rank - 1 + size) % size),
    ]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    report(rank, "batched_p2p", recv_t.tolist())


def all_to_all(rank, size):
    # torch's docstring example of all_to_all_single with uneven split sizes
    input_splits = [[2, 2, 1, 1], [3, 2, 2, 2], [2, 1, 1, 1], [2, 2, 2, 1]][rank]
    output_splits = [[2, 3, 2, 2], [2, 2, 1, 2], [1, 2, 1, 2], [1, 2, 1, 1]][rank]
    inp = torch.arange(sum(input_splits), dtype=torch.float32) + rank * 10
    out = torch.empty(sum(output_splits))
    dist.all_to_all_single(out, inp, output_splits, input_splits)
    ins = [torch.tensor([rank * size + float(i)]) for i in range(size)]
    outs = [torch.empty(1) for _ in range(size)]
    dist.all_to_all(outs, ins)
    report(rank, "all_to_all", {"single": out.tolist(), "list": [o.item() for o in outs]})


def mesh(rank, size):
    device_mesh = init_device_mesh("cuda", (2, size // 2), mesh_dim_names=("dp", "tp"))
    x = torch.tensor([float(rank)])
    dist.all_reduce(x, group=device_mesh["tp"].get_group())
    y = torch.tensor([float(rank)])
    dist.all_reduce(y, group=device_mesh.get_group("dp"))
    report(rank, "mesh", {
        "coordinate": device_mesh.get_coordinate(), "tp_sum": x.item(), "dp_sum": y.item(),
        "tp_local_rank": device_mesh.get_local_rank("tp"), "dp_size": device_mesh["dp"].size(),
    })  # fmt: skip


# -- the tutorial's distributed training ---------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x)


class Partition:
    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        data_idx = self.index[index]
        return self.data[data_idx]


class DataPartitioner:
    def __init__(self, data, sizes=(0.7, 0.2, 0.1), seed=1234):
        self.data = data
        self.partitions = []
        rng = Random()
        rng.seed(seed)
        data_len = len(data)
        indexes = [x for x in range(0, data_len)]
        rng.shuffle(indexes)
        for frac in sizes:
            part_len = int(frac * data_len)
            self.partitions.append(indexes[0:part_len])
            indexes = indexes[part_len:]

    def use(self, partition):
        return Partition(self.data, self.partitions[partition])


def partition_dataset():
    g = torch.Generator().manual_seed(7)  # random "MNIST" images: torchvision is not here
    images = torch.randn(32, 1, 28, 28, generator=g)
    dataset = torch.utils.data.TensorDataset(images, torch.randint(0, 10, (32,), generator=g))
    size = dist.get_world_size()
    bsz = 16 // size
    partition_sizes = [1.0 / size for _ in range(size)]
    partition = DataPartitioner(dataset, partition_sizes)
    partition = partition.use(dist.get_rank())
    train_set = torch.utils.data.DataLoader(partition, batch_size=bsz, shuffle=True)
    return train_set, bsz


def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def training(rank, size):
    torch.manual_seed(1234)
    train_set, bsz = partition_dataset()
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    num_batches = ceil(len(train_set.dataset) / float(bsz))
    losses = []
    for epoch in range(2):
        epoch_loss = 0.0
        for data, target in train_set:
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model)
            optimizer.step()
        print("Rank ", dist.get_rank(), ", epoch ", epoch, ": ", epoch_loss / num_batches)
        losses.append(epoch_loss / num_batches)
    sums = [p.detach().double().sum().item() for p in model.parameters()]
    report(rank, "training", {"losses": losses, "parameter_sums": sums})


@record
def run(rank, size):
    report(rank, "local_rank", dist.get_node_local_rank(fallback_rank=rank))
    for pattern in (
        blocking, nonblocking, group_all_reduce, ring, collectives, objects, batched_p2p,
        all_to_all, mesh, training,
    ):  # fmt: skip
        pattern(rank, size)


def init_process(rank, size, fn, backend="gloo"):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)


if __name__ == "__main__":
    processes = []
    mp.set_start_method("spawn")
    for rank in range(WORLD_SIZE):
        p = mp.Process(target=init_process, args=(rank, WORLD_SIZE, run))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
