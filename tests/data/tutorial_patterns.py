"""The patterns of PyTorch's "Writing Distributed Applications", written for KernBench.

Only the imports differ from a PyTorch program: ranks start with
``mp.Process`` in the ``__main__`` block, join the default group in
``init_process`` and run ``run(rank, size)``.  Runs with ``python`` (the
machine from ``$KERNBENCH_TOPOLOGY``) and with ``kernbench run`` (which runs
the ``__main__`` block on the machine it builds).  Every rank prints one
``RESULT {json}`` line per pattern; ``tests/test_tutorial_patterns.py``
checks the values against NumPy.

"""

import json
import os

import numpy as np

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.multiprocessing as mp

WORLD_SIZE = 4
ELEMENTS = 8  # per tensor; a multiple of WORLD_SIZE, so that the ring cuts it evenly
SGD_STEPS = 2
LEARNING_RATE = 0.5


def report(rank, pattern, value, **extra):
    print("RESULT " + json.dumps({"rank": rank, "pattern": pattern, "value": value, **extra}))


# -- blocking point to point ------------------------------------------------------------
def blocking_p2p(rank, size):
    tensor = torch.zeros(ELEMENTS)
    sender = None
    if rank == 0:
        tensor += 7
        for peer in range(1, size):
            dist.send(tensor=tensor, dst=peer)
    else:
        sender = dist.recv(tensor=tensor, src=0)
    print("Rank ", rank, " has data ", tensor[0])
    report(rank, "blocking_p2p", tensor.numpy().tolist(), sender=sender, first=tensor[0].item())


# -- non-blocking point to point: every rank passes its tensor to the right --------------
def nonblocking_p2p(rank, size):
    mine = torch.full((ELEMENTS,), float(rank + 1))
    incoming = torch.zeros(ELEMENTS)
    requests = [
        dist.isend(tensor=mine, dst=(rank + 1) % size),
        dist.irecv(tensor=incoming, src=(rank - 1) % size),
    ]
    for request in requests:
        request.wait()
    report(rank, "nonblocking_p2p", incoming.numpy().tolist())


# -- a collective on a group that leaves the last rank out -------------------------------
def group_all_reduce(rank, size):
    group = dist.new_group(list(range(size - 1)))
    tensor = torch.full((ELEMENTS,), float(rank + 1))
    returned = dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    also = [dist.broadcast(tensor, src=0, group=group), dist.barrier(group=group)]
    report(
        rank,
        "group_all_reduce",
        tensor.numpy().tolist(),
        returned_none=returned is None and also == [None, None],
        group_rank=dist.get_rank(group),
    )


# -- a ring all-reduce by hand: reduce-scatter, then all-gather, slice by slice ---------------
def ring_all_reduce(rank, size):
    buffer = torch.from_numpy(np.arange(ELEMENTS, dtype=np.float32) + 10 * rank)
    c = ELEMENTS // size
    scratch = torch.zeros(c)
    right, left = (rank + 1) % size, (rank - 1) % size
    for step in range(size - 1):
        outgoing, incoming = (rank - step) % size, (rank - step - 1) % size
        request = dist.isend(buffer[outgoing * c : (outgoing + 1) * c], right)
        dist.recv(scratch, left)
        buffer[incoming * c : (incoming + 1) * c] += scratch
        request.wait()
    for step in range(size - 1):
        outgoing, incoming = (rank - step + 1) % size, (rank - step) % size
        request = dist.isend(buffer[outgoing * c : (outgoing + 1) * c], right)
        dist.recv(buffer[incoming * c : (incoming + 1) * c], left)
        request.wait()
    report(rank, "ring_all_reduce", buffer.numpy().tolist())


# -- synchronous SGD with average_gradients -------------------------------------------------
class TinyModel:
    def __init__(self):
        self.weight = torch.ones(ELEMENTS)
        self.bias = torch.zeros(ELEMENTS // 2)

    def parameters(self):
        return [self.weight, self.bias]


def local_gradient(rank, step, numel):
    """The gradient rank ``rank`` computes at ``step`` (different on every rank)."""
    return (np.arange(numel, dtype=np.float32) + 1) * (rank + 1) * (step + 1) / 4


def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def synchronous_sgd(rank, size):
    model = TinyModel()
    for step in range(SGD_STEPS):
        for param in model.parameters():
            grad = local_gradient(rank, step, param.data.numel())
            param.grad = torch.from_numpy(grad)
        average_gradients(model)
        for param in model.parameters():
            param.data -= param.grad.data * LEARNING_RATE
    report(rank, "synchronous_sgd", [p.data.numpy().tolist() for p in model.parameters()])


def run(rank, size):
    blocking_p2p(rank, size)
    nonblocking_p2p(rank, size)
    group_all_reduce(rank, size)
    ring_all_reduce(rank, size)
    synchronous_sgd(rank, size)


def init_process(rank, size, fn, backend="gloo"):
    """Initialize the distributed environment."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)


if __name__ == "__main__":
    size = int(os.environ.get("WORLD_SIZE", WORLD_SIZE))
    processes = []
    mp.set_start_method("spawn")
    for rank in range(size):
        p = mp.Process(target=init_process, args=(rank, size, run))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
    from kernbench.runtime import current_context

    print(f"SIMULATED {current_context().now}")
