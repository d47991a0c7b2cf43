"""ZeRO-style optimizer steps: sharded gradients, a sharded Adam / SGD update, gathered weights.

Every rank holds the full weight ``W`` of a linear model (``(d_in, d_out)``,
float32, kept as one flat parameter tensor) and its own batch ``(X_r, T_r)``.
One step, as ZeRO stage 2 runs it:

1. gradient of the mean squared error ``|X_r·W - T_r|² / batch``, written by
   hand (``dW = 2/batch · X_rᵀ·(X_r·W - T_r)``, so the step holds only ZeRO's
   own work; the update is written out too);
2. ``--reduce reduce_scatter``: ``dist.reduce_scatter_tensor(..., op=AVG,
   async_op=True)`` leaves each rank the rank-averaged gradient of its ``1/n``
   of the parameters; ``--reduce all_reduce``: ``dist.all_reduce(..., op=AVG)``
   of the whole gradient, then each rank keeps its chunk (ZeRO stage 1);
3. gradient clipping by the global norm (``--max-grad-norm``): each rank's
   sum of squares (``square().sum()``, a 0-d tensor) is all-reduced, and the
   shard is scaled by ``clamp(max_norm / (norm + 1e-6), max=1)``;
4. the optimizer update of that shard only, with the optimizer state
   (moments) held for that shard only: ``--optimizer adam`` is AdamW as
   ``torch.optim.AdamW`` computes it (``mul_``, ``lerp_``, ``addcmul_``,
   ``sqrt``, ``addcdiv_``), ``--optimizer sgd`` SGD with momentum and
   weight decay (as ``torch.optim.SGD``);
5. ``dist.all_gather_into_tensor`` of the updated shards into the flat
   parameter, in place (each rank's input is its own chunk of the output).

After ``--steps`` steps every rank checks the weights against NumPy running
the same unsharded optimizer (an ``AssertionError`` on a mismatch), except in
timing-only mode, where tensors hold no values.

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/zero_optimizer_step.py --topology topologies/ring8.yaml
    kernbench run benches/zero_optimizer_step.py --topology topologies/ring8.yaml \\
        --set simulation.backend=fast -- --optimizer sgd --reduce all_reduce --steps 2

``d_in · d_out`` must divide over the ranks.  Rank 0 prints the time (µs) of
the gradient, the reduction (with the clipping), the update and the gather
of the last step, and returns one row (``--csv`` / ``--report`` record it).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.runtime import current_context


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ZeRO optimizer step")
    parser.add_argument("--d-in", type=int, default=64)
    parser.add_argument("--d-out", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16, help="rows per rank (16)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    parser.add_argument("--reduce", choices=("reduce_scatter", "all_reduce"),
                        default="reduce_scatter")  # fmt: skip
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--weight-decay", type=float, default=1e-2)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--max-grad-norm", type=float, default=1.0,
                        help="clip the global gradient norm (1.0; 0: off)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


BETAS = (0.9, 0.999)
EPS = 1e-8


def make_data(args, world_size):
    rng = np.random.default_rng(args.seed)
    w = (rng.standard_normal((args.d_in, args.d_out)) / np.sqrt(args.d_in)).astype(np.float32)
    xs = [rng.standard_normal((args.batch, args.d_in)).astype(np.float32)
          for _ in range(world_size)]  # fmt: skip
    ts = [rng.standard_normal((args.batch, args.d_out)).astype(np.float32)
          for _ in range(world_size)]  # fmt: skip
    return w, xs, ts


def reference(args, w, xs, ts):
    """The same steps, unsharded, in float64."""
    w = w.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    beta1, beta2 = BETAS
    for step in range(1, args.steps + 1):
        grads = [2.0 / args.batch * x.T @ (x @ w - t) for x, t in zip(xs, ts, strict=True)]
        grad = np.mean(grads, axis=0)
        if args.max_grad_norm > 0:
            total_norm = np.sqrt((grad * grad).sum())
            grad = grad * min(args.max_grad_norm / (total_norm + 1e-6), 1.0)
        if args.optimizer == "adam":
            w = w * (1 - args.lr * args.weight_decay)
            m = beta1 * m + (1 - beta1) * grad
            v = beta2 * v + (1 - beta2) * grad * grad
            denom = np.sqrt(v) / math.sqrt(1 - beta2**step) + EPS
            w = w - args.lr / (1 - beta1**step) * m / denom
        else:
            grad = grad + args.weight_decay * w
            m = grad if step == 1 else args.momentum * m + grad
            w = w - args.lr * m
    return w


class ShardedOptimizer:
    """The optimizer state for this rank's shard of a flat parameter."""

    def __init__(self, args, shard):
        self.args = args
        self.step_count = 0
        self.exp_avg = torch.zeros_like(shard)
        self.exp_avg_sq = torch.zeros_like(shard)
        self.momentum_buffer = None

    @torch.no_grad()
    def step(self, param, grad):
        args = self.args
        self.step_count += 1
        if args.optimizer == "adam":
            beta1, beta2 = BETAS
            param.mul_(1 - args.lr * args.weight_decay)
            self.exp_avg.lerp_(grad, 1 - beta1)
            self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1**self.step_count
            bias_correction2 = 1 - beta2**self.step_count
            step_size = args.lr / bias_correction1
            denom = (self.exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(EPS)
            param.addcdiv_(self.exp_avg, denom, value=-step_size)
        else:
            grad = grad.add(param, alpha=args.weight_decay)
            if self.momentum_buffer is None:
                self.momentum_buffer = torch.clone(grad).detach()
            else:
                self.momentum_buffer.mul_(args.momentum).add_(grad)
            param.add_(self.momentum_buffer, alpha=-args.lr)


def clip_grad_norm_(grad_shard, max_norm):
    """Scale the sharded gradient so that its global 2-norm is at most ``max_norm``."""
    norm_sq = grad_shard.square().sum()
    dist.all_reduce(norm_sq)  # the sum of every shard's squares
    total_norm = norm_sq.sqrt()
    clip_coef = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
    grad_shard.mul_(clip_coef)
    return total_norm


def main():
    args = parse_args()
    dist.init_process_group(backend="nccl")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{rank}")
    torch.cuda.set_device(device)
    numel = args.d_in * args.d_out
    if numel % world_size:
        raise ValueError(f"d_in*d_out={numel} must divide over {world_size} ranks")
    shard_size = numel // world_size

    w_np, xs, ts = make_data(args, world_size)
    flat_param = torch.from_numpy(w_np.reshape(-1)).to(device)
    weight = flat_param.view(args.d_in, args.d_out)
    x = torch.from_numpy(xs[rank]).to(device)
    target = torch.from_numpy(ts[rank]).to(device)
    param_shard = flat_param.narrow(0, rank * shard_size, shard_size)
    grad_shard = torch.empty(shard_size, device=device)
    optimizer = ShardedOptimizer(args, param_shard)

    events = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
    for _ in range(args.steps):
        dist.barrier()
        events[0].record()
        with torch.no_grad():
            err = x @ weight - target
            grad = (2.0 / args.batch) * (x.t() @ err)
            flat_grad = grad.flatten()
        events[1].record()
        if args.reduce == "reduce_scatter":
            work = dist.reduce_scatter_tensor(
                grad_shard, flat_grad, op=dist.ReduceOp.AVG, async_op=True
            )
            work.wait()
        else:
            dist.all_reduce(flat_grad, op=dist.ReduceOp.AVG)
            grad_shard.copy_(flat_grad.chunk(world_size)[rank])
        if args.max_grad_norm > 0:
            clip_grad_norm_(grad_shard, args.max_grad_norm)
        events[2].record()
        optimizer.step(param_shard, grad_shard)
        events[3].record()
        dist.all_gather_into_tensor(flat_param, param_shard)
        events[4].record()
    torch.cuda.synchronize()
    times_us = [events[i].elapsed_time(events[i + 1]) * 1e3 for i in range(4)]

    checked = "n/a"
    if not current_context().timing_only:
        expected = reference(args, w_np, xs, ts)
        np.testing.assert_allclose(weight.cpu().numpy(), expected, rtol=1e-4, atol=1e-5)
        checked = True
    dist.barrier()
    if rank != 0:
        return None
    row = {
        "world_size": world_size,
        "optimizer": args.optimizer,
        "reduce": args.reduce,
        "params": numel,
        "steps": args.steps,
        "grad_us": times_us[0],
        "reduce_us": times_us[1],
        "update_us": times_us[2],
        "gather_us": times_us[3],
        "step_us": sum(times_us),
        "checked": checked,
    }
    print(
        f"ZeRO step on {world_size} ranks: {args.optimizer}, {args.reduce}, {numel} parameters "
        f"({shard_size} per rank), {args.steps} steps; last step:"
    )
    for name in ("grad_us", "reduce_us", "update_us", "gather_us", "step_us"):
        print(f"  {name:<10} {row[name]:>10.3f}")
    print(f"  checked    {checked}")
    return [row]
