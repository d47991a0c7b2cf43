"""A pipeline-parallel training step over the ranks: GPipe forward or 1F1B forward and backward.

Rank ``s`` is pipeline stage ``s`` and holds one layer, ``y = GeLU(x · W_sᵀ +
b_s)`` (``torch.nn.functional.linear`` then ``gelu``, tanh form), with
``W_s`` of shape ``(hidden, hidden)``.  Stage 0 splits a batch into
``--micro-batches`` micro-batches of ``--micro-batch-size`` rows and feeds
them in; every other stage receives a micro-batch's activation from the stage
before it, runs its layer and sends the result on.  Two schedules
(``--schedule``):

* ``gpipe`` -- the forward pass only, micro-batch after micro-batch: while
  stage ``s`` works on micro-batch ``i``, stage ``s+1`` works on ``i-1``;
* ``1f1b`` -- a training step as Megatron-LM schedules it: each stage runs
  ``stages - s - 1`` warm-up forwards, then alternates one forward and one
  backward, then drains the backwards.  The last stage's loss is
  ``0.5·|y|² / rows``; the backward pass is written by hand (there is no
  autograd): ``dz = dy · GeLU'(z)``, ``dW += dzᵀ·x``, ``db += Σ dz``,
  ``dx = dz · W``, and ``dx`` is sent to the stage before.

Activations and gradients travel in one of two ways (``--p2p``):

* ``isend`` -- ``dist.isend`` / ``dist.irecv``; a stage waits on a receive
  only when it needs that tensor (GPipe posts all its receives up front);
* ``batch`` -- ``dist.batch_isend_irecv`` of ``dist.P2POp`` s (GPipe sends the
  previous micro-batch's output and receives the next input in one batch).

The last stage checks its outputs, and in ``1f1b`` every stage its weight
and bias gradients, against NumPy's unsharded model (an ``AssertionError`` on
a mismatch), except in timing-only mode, where tensors hold no values.

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/pipeline_parallel.py --topology topologies/ring8.yaml
    kernbench run benches/pipeline_parallel.py --topology topologies/ring8.yaml \\
        --set simulation.backend=fast -- --schedule 1f1b --micro-batches 8 --p2p batch

Rank 0 prints the time (µs) of the step, of one stage's forward alone and the
share of the step not covered by that stage's own work (the bubble), and
returns one row (``--csv`` / ``--report`` record it).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn.functional as F
from kernbench.runtime import current_context

GELU_C = math.sqrt(2.0 / math.pi)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Pipeline-parallel training step")
    parser.add_argument("--micro-batches", type=int, default=4, help="micro-batches (4)")
    parser.add_argument("--micro-batch-size", type=int, default=16, help="rows each (16)")
    parser.add_argument("--hidden", type=int, default=64, help="layer width (64)")
    parser.add_argument("--schedule", choices=("gpipe", "1f1b"), default="gpipe")
    parser.add_argument("--p2p", choices=("isend", "batch"), default="isend")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name in ("micro_batches", "micro_batch_size", "hidden"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def make_model(args: argparse.Namespace, stages: int):
    """Every stage's weight and bias and the input batch (the same on every rank)."""
    rng = np.random.default_rng(args.seed)
    h = args.hidden
    weights = [(rng.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32) for _ in range(stages)]
    biases = [(0.1 * rng.standard_normal(h)).astype(np.float32) for _ in range(stages)]
    batch = rng.standard_normal((args.micro_batches * args.micro_batch_size, h))
    return weights, biases, batch.astype(np.float32)


def gelu_tanh(z: np.ndarray) -> np.ndarray:
    return 0.5 * z * (1.0 + np.tanh(GELU_C * (z + 0.044715 * z**3)))


def gelu_tanh_grad(z: np.ndarray) -> np.ndarray:
    t = np.tanh(GELU_C * (z + 0.044715 * z**3))
    return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * z * z)


def reference(weights, biases, batch):
    """The outputs and every layer's weight and bias gradients, in float64."""
    x = batch.astype(np.float64)
    saved = []
    for w, b in zip(weights, biases, strict=True):
        z = x @ w.astype(np.float64).T + b
        saved.append((x, z))
        x = gelu_tanh(z)
    grads = []
    dy = x / len(batch)  # d(0.5·|y|² / rows) / dy
    for (x_in, z), w in zip(reversed(saved), reversed(weights), strict=True):
        dz = dy * gelu_tanh_grad(z)
        grads.append((dz.T @ x_in, dz.sum(0)))
        dy = dz @ w.astype(np.float64)
    return x, grads[::-1]


class Stage:
    """One layer, its saved activations per micro-batch and its gradients."""

    def __init__(self, weight, bias, device) -> None:
        self.weight = torch.from_numpy(weight).to(device)
        self.bias = torch.from_numpy(bias).to(device)
        self.weight.grad = torch.zeros_like(self.weight)
        self.bias.grad = torch.zeros_like(self.bias)
        self.saved = {}

    def forward(self, x, micro_batch=None):
        z = F.linear(x, self.weight, self.bias)
        if micro_batch is not None:
            self.saved[micro_batch] = (x, z)
        return F.gelu(z, approximate="tanh")

    def backward(self, dy, micro_batch):
        """Accumulate the parameter gradients; the gradient of the stage's input."""
        x, z = self.saved.pop(micro_batch)
        t = torch.tanh(GELU_C * (z + 0.044715 * z.pow(3)))
        slope = 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * z * z)
        dz = dy * slope
        self.weight.grad.add_(dz.t() @ x)
        self.bias.grad.add_(dz.sum(dim=0))
        return dz @ self.weight


def exchange(sends, recvs, p2p):
    """Start sending each ``(tensor, peer)`` of ``sends`` and receiving each of ``recvs``."""
    if p2p == "batch":
        ops = [dist.P2POp(dist.isend, t, peer) for t, peer in sends]
        ops += [dist.P2POp(dist.irecv, t, peer) for t, peer in recvs]
        return dist.batch_isend_irecv(ops) if ops else []
    works = [dist.isend(t, dst=peer) for t, peer in sends]
    return works + [dist.irecv(t, src=peer) for t, peer in recvs]


def gpipe_isend(stage, micro_batches, args, rank, world_size, device):
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
        y = stage.forward(x)
        if nxt < world_size:
            sends.append(dist.isend(y, dst=nxt))
        else:
            outputs.append(y)
    for req in sends:
        req.wait()
    return outputs


def gpipe_batched(stage, micro_batches, args, rank, world_size, device):
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
        y = stage.forward(x)
        if last:
            outputs.append(y)
        else:
            pending = y
    return outputs


def one_f_one_b(stage, micro_batches, args, rank, world_size, device):
    """Megatron's 1F1B schedule: warm-up forwards, steady one-forward-one-backward, drain."""
    shape = (args.micro_batch_size, args.hidden)
    prev, nxt = rank - 1, rank + 1
    first, last = rank == 0, rank == world_size - 1
    rows = args.micro_batches * args.micro_batch_size
    in_flight, outputs = [], []
    stage.weight.grad.zero_()
    stage.bias.grad.zero_()

    def forward(i):
        if first:
            x = micro_batches[i]
        else:
            x = torch.empty(shape, device=device)
            for work in exchange([], [(x, prev)], args.p2p):
                work.wait()
        y = stage.forward(x, micro_batch=i)
        if last:
            outputs.append(y)
        else:
            in_flight.extend(exchange([(y, nxt)], [], args.p2p))

    def backward(i):
        if last:
            dy = outputs[i] / rows
        else:
            dy = torch.empty(shape, device=device)
            for work in exchange([], [(dy, nxt)], args.p2p):
                work.wait()
        dx = stage.backward(dy, i)
        if not first:
            in_flight.extend(exchange([(dx, prev)], [], args.p2p))

    warmup = min(world_size - rank - 1, args.micro_batches)
    for i in range(warmup):
        forward(i)
    for i in range(args.micro_batches - warmup):
        forward(warmup + i)
        backward(i)
    for i in range(args.micro_batches - warmup, args.micro_batches):
        backward(i)
    for work in in_flight:
        work.wait()
    return outputs


SCHEDULES = {
    ("gpipe", "isend"): gpipe_isend,
    ("gpipe", "batch"): gpipe_batched,
    ("1f1b", "isend"): one_f_one_b,
    ("1f1b", "batch"): one_f_one_b,
}


def check(stage, outputs, model, args, rank, world_size) -> bool:
    expected, grads = reference(*model)
    if rank == world_size - 1:
        got = torch.cat(outputs, dim=0).cpu().numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg="outputs")
    if args.schedule == "1f1b":
        d_weight, d_bias = grads[rank]
        np.testing.assert_allclose(
            stage.weight.grad.cpu().numpy(), d_weight, rtol=1e-4, atol=1e-5,
            err_msg=f"weight gradient of stage {rank}",
        )  # fmt: skip
        np.testing.assert_allclose(
            stage.bias.grad.cpu().numpy(), d_bias, rtol=1e-4, atol=1e-5,
            err_msg=f"bias gradient of stage {rank}",
        )  # fmt: skip
    return True


def main():
    args = parse_args()
    dist.init_process_group(backend="nccl")
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)

    model = make_model(args, world_size)
    weights, biases, batch = model
    stage = Stage(weights[rank], biases[rank], device)
    micro_batches = None
    if rank == 0:
        micro_batches = torch.from_numpy(batch).to(device).chunk(args.micro_batches, dim=0)
    run = SCHEDULES[args.schedule, args.p2p]

    run(stage, micro_batches, args, rank, world_size, device)  # warm-up
    dist.barrier()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    outputs = run(stage, micro_batches, args, rank, world_size, device)
    end.record()
    torch.cuda.synchronize()
    step_ms = start.elapsed_time(end)

    # One stage's forward alone, for the bubble.
    x = torch.randn(args.micro_batch_size, args.hidden, device=device)
    dist.barrier()
    start.record()
    stage.forward(x)
    end.record()
    torch.cuda.synchronize()
    forward_ms = start.elapsed_time(end)

    checked = "n/a"
    if not current_context().timing_only:
        checked = check(stage, outputs, model, args, rank, world_size)
    results = [None] * world_size
    dist.all_gather_object(results, (step_ms, forward_ms, checked))
    dist.destroy_process_group()
    if rank != 0:
        return None

    step_us = max(r[0] for r in results) * 1e3
    forward_us = max(r[1] for r in results) * 1e3
    # a backward is about two forwards' work (two products, against one)
    busy_us = forward_us * args.micro_batches * (1 if args.schedule == "gpipe" else 3)
    row = {
        "world_size": world_size,
        "schedule": args.schedule,
        "p2p": args.p2p,
        "micro_batches": args.micro_batches,
        "micro_batch_size": args.micro_batch_size,
        "hidden": args.hidden,
        "step_us": step_us,
        "stage_forward_us": forward_us,
        "bubble_fraction": max(0.0, 1.0 - busy_us / step_us) if step_us else 0.0,
        "checked": all(r[2] is True for r in results) if checked is True else checked,
    }
    print(
        f"pipeline of {world_size} stages, {args.schedule}, {args.micro_batches} micro-batches "
        f"of {args.micro_batch_size}x{args.hidden}, p2p={args.p2p}"
    )
    print(f"  step                 {step_us:>10.3f} us")
    print(f"  one stage's forward  {forward_us:>10.3f} us")
    print(f"  bubble fraction      {row['bubble_fraction']:>10.3f}")
    print(f"  checked              {str(row['checked']):>10}")
    return [row]
