"""A pipeline-parallel forward pass (GPipe-style fill and drain) over the ranks.

Rank ``s`` is pipeline stage ``s`` and holds one layer, ``y = GeLU(x · W_sᵀ +
b_s)`` (``torch.nn.functional.linear`` then ``gelu``, tanh form), with
``W_s`` of shape ``(hidden, hidden)``.  Stage 0 splits a batch into
``--micro-batches`` micro-batches of ``--micro-batch-size`` rows and pushes
them through the pipeline one after another; every other stage receives a
micro-batch's activation from the stage before it, runs its layer and sends
the result on, so while stage ``s`` works on micro-batch ``i``, stage ``s+1``
works on micro-batch ``i-1``.  The last stage keeps the outputs and checks
them against NumPy's unsharded forward pass (an ``AssertionError`` on a
mismatch), except in timing-only mode, where tensors hold no values.

Activations travel in one of two ways (``--p2p``):

* ``isend`` -- every receive is posted up front with ``dist.irecv``, each
  result goes out with ``dist.isend``; a stage waits on a receive only when it
  needs that micro-batch;
* ``batch`` -- Megatron-LM style: at each step a stage sends the previous
  micro-batch's output and receives the next input in one
  ``dist.batch_isend_irecv`` of ``dist.P2POp`` s.

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/pipeline_parallel.py --topology topologies/ring8.yaml
    kernbench run benches/pipeline_parallel.py --topology topologies/ring8.yaml \\
        --set simulation.backend=fast -- --micro-batches 8 --hidden 128 --p2p batch

Rank 0 prints the time (µs) of the whole pipelined pass, of one stage's
compute alone and the pipeline bubble, and returns one row
(``--csv`` / ``--report`` record it).
"""

from __future__ import annotations

import argparse

import numpy as np

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn.functional as F
from kernbench.runtime import current_context


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Pipeline-parallel forward pass")
    parser.add_argument("--micro-batches", type=int, default=4, help="micro-batches (4)")
    parser.add_argument("--micro-batch-size", type=int, default=16, help="rows each (16)")
    parser.add_argument("--hidden", type=int, default=64, help="layer width (64)")
    parser.add_argument("--p2p", choices=("isend", "batch"), default="isend")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_model(args: argparse.Namespace, stages: int):
    """Every stage's weight and bias and the input batch (the same on every rank)."""
    rng = np.random.default_rng(args.seed)
    h = args.hidden
    weights = [(rng.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32) for _ in range(stages)]
    biases = [(0.1 * rng.standard_normal(h)).astype(np.float32) for _ in range(stages)]
    batch = rng.standard_normal((args.micro_batches * args.micro_batch_size, h)).astype(np.float32)
    return weights, biases, batch


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def reference(weights, biases, batch) -> np.ndarray:
    x = batch.astype(np.float64)
    for w, b in zip(weights, biases, strict=True):
        x = gelu_tanh(x @ w.astype(np.float64).T + b)
    return x


class Stage:
    def __init__(self, weight, bias, device) -> None:
        self.weight = torch.from_numpy(weight).to(device)
        self.bias = torch.from_numpy(bias).to(device)

    def __call__(self, x):
        return F.gelu(F.linear(x, self.weight, self.bias), approximate="tanh")


def run_isend(stage, micro_batches, args, rank, world_size, device):
    shape = (args.micro_batch_size, args.hidden)
    prev, nxt = rank - 1, rank + 1
    recvs = []
    buffers = []
    if rank > 0:
        for _ in range(args.micro_batches):
            buf = torch.empty(shape, device=device)
            buffers.append(buf)
            recvs.append(dist.irecv(buf, src=prev))
    sends, outputs = [], []
    for i in range(args.micro_batches):
        if rank == 0:
            x = micro_batches[i]
        else:
            recvs[i].wait()
            x = buffers[i]
        y = stage(x)
        if nxt < world_size:
            sends.append(dist.isend(y, dst=nxt))
        else:
            outputs.append(y)
    for req in sends:
        req.wait()
    return outputs


def run_batched(stage, micro_batches, args, rank, world_size, device):
    shape = (args.micro_batch_size, args.hidden)
    prev, nxt = rank - 1, rank + 1
    first, last = rank == 0, rank == world_size - 1
    outputs = []
    pending = None  # output of the previous micro-batch, still to send
    for i in range(args.micro_batches + 1):
        ops = []
        x = None
        if pending is not None:
            ops.append(dist.P2POp(dist.isend, pending, nxt))
        if i < args.micro_batches and not first:
            x = torch.empty(shape, device=device)
            ops.append(dist.P2POp(dist.irecv, x, prev))
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        pending = None
        if i == args.micro_batches:
            break
        if first:
            x = micro_batches[i]
        y = stage(x)
        if last:
            outputs.append(y)
        else:
            pending = y
    return outputs


def main():
    args = parse_args()
    dist.init_process_group(backend="nccl")
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)

    weights, biases, batch = make_model(args, world_size)
    stage = Stage(weights[rank], biases[rank], device)
    micro_batches = None
    if rank == 0:
        micro_batches = torch.from_numpy(batch).to(device).chunk(args.micro_batches, dim=0)
    run = run_isend if args.p2p == "isend" else run_batched

    run(stage, micro_batches, args, rank, world_size, device)  # warm-up
    dist.barrier()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    outputs = run(stage, micro_batches, args, rank, world_size, device)
    end.record()
    torch.cuda.synchronize()
    pipeline_ms = start.elapsed_time(end)

    # One stage's compute alone, for the bubble estimate.
    x = torch.randn(args.micro_batch_size, args.hidden, device=device)
    dist.barrier()
    start.record()
    stage(x)
    end.record()
    torch.cuda.synchronize()
    stage_ms = start.elapsed_time(end)

    checked = "n/a"
    if not current_context().timing_only and rank == world_size - 1:
        got = torch.cat(outputs, dim=0).cpu().numpy()
        expected = reference(weights, biases, batch)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        checked = True
    results = [None] * world_size
    dist.all_gather_object(results, (pipeline_ms, stage_ms, checked))
    dist.destroy_process_group()
    if rank != 0:
        return None

    pipeline_us = max(r[0] for r in results) * 1e3
    stage_us = max(r[1] for r in results) * 1e3
    ideal_us = stage_us * args.micro_batches
    row = {
        "world_size": world_size,
        "p2p": args.p2p,
        "micro_batches": args.micro_batches,
        "micro_batch_size": args.micro_batch_size,
        "hidden": args.hidden,
        "pipeline_us": pipeline_us,
        "stage_compute_us": stage_us,
        "bubble_fraction": 1.0 - ideal_us / pipeline_us if pipeline_us else 0.0,
        "checked": results[-1][2],
    }
    print(
        f"pipeline of {world_size} stages, {args.micro_batches} micro-batches of "
        f"{args.micro_batch_size}x{args.hidden}, p2p={args.p2p}"
    )
    print(f"  pipelined pass       {pipeline_us:>10.3f} us")
    print(f"  one stage, one batch {stage_us:>10.3f} us")
    print(f"  bubble fraction      {row['bubble_fraction']:>10.3f}")
    print(f"  checked              {str(row['checked']):>10}")
    return [row]
