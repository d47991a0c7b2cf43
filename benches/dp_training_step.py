"""One data-parallel training step: backward matmuls overlapped with gradient all-reduces.

Every rank holds the same model of ``--layers`` linear layers (weights
``W_l`` of shape ``(H, H)``, float32) and its own local batch of ``--batch``
rows.  The backward pass walks the layers in reverse order; for layer ``l``
it computes the weight gradient ``dW_l = X_lᵀ · dY_l`` and, below the first
layer, the gradient flowing down ``dY_{l-1} = dY_l · W_lᵀ``, each with a
blocked ``@jit`` matmul kernel.  ``X_l`` (the layer inputs the forward pass
saved) and the top gradient ``dY`` are random per rank.

Gradients are grouped into buckets of ``--bucket-layers`` layers (one
contiguous tensor each), as PyTorch's DistributedDataParallel does: as soon as
a bucket's last gradient is written, ``dist.all_reduce(bucket, op=AVG,
async_op=True)`` starts, and the next layers' matmuls run while it travels;
the step ends when every bucket's ``Work`` has been waited on.

Three runs, each after a barrier, measure:

* ``compute`` -- the backward matmuls alone (no communication);
* ``comm`` -- the bucket all-reduces alone (all started, then all waited on);
* ``step`` -- the overlapped step.

``overlap_efficiency`` = (compute + comm - step) / min(compute, comm): the
share of the shorter phase hidden behind the longer one (1 = fully hidden,
0 = serialized).  After the step each rank checks its averaged gradients
against NumPy (an ``AssertionError`` on a mismatch), except in timing-only
mode, where tensors hold no values.

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/dp_training_step.py --topology topologies/ring8.yaml
    kernbench run benches/dp_training_step.py --topology topologies/ring8.yaml --timing-only \\
        -- --layers 8 --hidden 1024 --batch 512 --bucket-layers 2 --algorithm ring_pipelined

Rank 0 prints the model, the times (µs) of the three runs, the serialized sum,
the exposed communication (step - compute) and the overlap efficiency, and
returns them as one row (``--csv`` / ``--report`` record it).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import kernbench.kernels.language as tl
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.bench.perf import BenchArgumentParser
from kernbench.distributed.world import active_world
from kernbench.kernels import cdiv, jit
from kernbench.runtime import current_context

RTOL = 1e-4


@jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    c_offset,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # C[c_offset:] (row-major M x N) = A @ B; strides let A or B be read transposed.
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + c_offset + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class Model:
    """One rank's weights, saved activations, top gradient and gradient buckets."""

    def __init__(self, args: argparse.Namespace, rank: int) -> None:
        self.args = args
        h, b, layers = args.hidden, args.batch, args.layers
        weights, inputs, top = host_data(args, rank)
        self.weights = [torch.from_numpy(w) for w in weights]
        self.inputs = [torch.from_numpy(x) for x in inputs]
        self.top = torch.from_numpy(top)
        self.down = [torch.empty(b, h) for _ in range(2)]  # dY ping-pong
        # Buckets fill in backward order: bucket 0 holds the last layers.
        order = list(range(layers - 1, -1, -1))
        size = args.bucket_layers
        self.bucket_layers = [order[i : i + size] for i in range(0, layers, size)]
        self.buckets = [torch.empty(len(group) * h, h) for group in self.bucket_layers]

    def matmul(self, a, b, c, m, n, k, a_strides, b_strides, c_offset=0) -> None:
        blk = self.args.block
        matmul_kernel[(cdiv(m, blk), cdiv(n, blk))](
            a, b, c, m, n, k, *a_strides, *b_strides, c_offset,
            BLOCK_M=blk, BLOCK_N=blk, BLOCK_K=blk,
        )  # fmt: skip

    def backward(self, reduce: bool) -> list[Any]:
        """The backward pass; with ``reduce``, a bucket's AVG all-reduce starts once it is full."""
        h, b = self.args.hidden, self.args.batch
        works = []
        grad = self.top
        for bucket, layers in zip(self.buckets, self.bucket_layers, strict=True):
            for slot, layer in enumerate(layers):
                # dW_l = X_lᵀ (H x B) @ dY_l (B x H), into the bucket's slot
                self.matmul(self.inputs[layer], grad, bucket, h, h, b, (1, h), (h, 1), slot * h * h)
                if layer > 0:  # dY_{l-1} = dY_l (B x H) @ W_lᵀ (H x H)
                    below = self.down[layer % 2]
                    self.matmul(grad, self.weights[layer], below, b, h, h, (h, 1), (1, h))
                    grad = below
            if reduce:
                works.append(self.all_reduce(bucket))
        return works

    def all_reduce(self, bucket) -> Any:
        return dist.all_reduce(
            bucket, op=dist.ReduceOp.AVG, async_op=True, algorithm=self.args.algorithm
        )


def host_data(args: argparse.Namespace, rank: int):
    """Weights (the same on every rank), rank ``rank``'s saved inputs and top gradient."""
    h, b = args.hidden, args.batch
    shared = np.random.default_rng([args.seed, 0])
    weights = [
        (shared.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32) for _ in range(args.layers)
    ]
    local = np.random.default_rng([args.seed, 1, rank])
    inputs = [local.standard_normal((b, h), dtype=np.float32) for _ in range(args.layers)]
    top = local.standard_normal((b, h), dtype=np.float32)
    return weights, inputs, top


def reference_gradients(args: argparse.Namespace, world_size: int) -> list[np.ndarray]:
    """The rank-averaged weight gradients of every layer, in float64."""
    total = [np.zeros((args.hidden, args.hidden)) for _ in range(args.layers)]
    for rank in range(world_size):
        weights, inputs, top = host_data(args, rank)
        grad = top.astype(np.float64)
        for layer in range(args.layers - 1, -1, -1):
            total[layer] += inputs[layer].astype(np.float64).T @ grad
            grad = grad @ weights[layer].astype(np.float64).T
    return [g / world_size for g in total]


def check(model: Model, args: argparse.Namespace, world_size: int) -> None:
    expected = reference_gradients(args, world_size)
    h = args.hidden
    scale = np.sqrt(args.batch)  # entries of Xᵀ·dY have a standard deviation near sqrt(batch)
    for bucket, layers in zip(model.buckets, model.bucket_layers, strict=True):
        values = bucket.numpy().reshape(len(layers), h, h)
        for slot, layer in enumerate(layers):
            np.testing.assert_allclose(
                values[slot], expected[layer], rtol=RTOL, atol=RTOL * scale,
                err_msg=f"averaged gradient of layer {layer}",
            )  # fmt: skip


def _timed(ctx, fn) -> int:
    dist.barrier()
    start = ctx.now
    fn()
    return ctx.now - start


def main(argv: list[str] | None = None) -> list[dict[str, Any]] | None:
    parser = BenchArgumentParser(description="Data-parallel training step with overlap")
    parser.add_argument("--layers", type=int, default=4, help="linear layers (4)")
    parser.add_argument("--hidden", type=int, default=256, help="H: weights are H x H (256)")
    parser.add_argument("--batch", type=int, default=256, help="rows of each rank's batch (256)")
    parser.add_argument("--bucket-layers", type=int, default=1, help="layers per bucket (1)")
    parser.add_argument("--block", type=int, default=128, help="matmul block size (128)")
    parser.add_argument("--algorithm", default=None, help="all-reduce configuration or 'auto'")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("layers", "hidden", "batch", "bucket_layers", "block"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")

    dist.init_process_group()
    ctx = current_context()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = Model(args, rank)

    model.all_reduce(model.buckets[0]).wait()  # installs the algorithm's tables: not timed
    algorithm = active_world().collectives[-1].config_name

    def comm_alone() -> None:
        for work in [model.all_reduce(bucket) for bucket in model.buckets]:
            work.wait()

    def step() -> None:
        for work in model.backward(reduce=True):
            work.wait()

    comm_ps = _timed(ctx, comm_alone)
    compute_ps = _timed(ctx, lambda: model.backward(reduce=False))
    step_ps = _timed(ctx, step)
    checked: bool | str = "n/a"
    if not ctx.timing_only:
        check(model, args, world_size)
        checked = True
    dist.barrier()
    if rank != 0:
        return None

    hidden_ps = compute_ps + comm_ps - step_ps
    shorter = min(compute_ps, comm_ps)
    row = {
        "world_size": world_size,
        "layers": args.layers,
        "hidden": args.hidden,
        "batch": args.batch,
        "buckets": len(model.buckets),
        "bucket_B": args.bucket_layers * args.hidden * args.hidden * 4,
        "algorithm": algorithm,
        "compute_us": compute_ps / 1e6,
        "comm_us": comm_ps / 1e6,
        "serialized_us": (compute_ps + comm_ps) / 1e6,
        "step_us": step_ps / 1e6,
        "exposed_comm_us": (step_ps - compute_ps) / 1e6,
        "overlap_efficiency": hidden_ps / shorter if shorter else 0.0,
        "checked": checked,
    }
    mode = "timing-only (values not checked)" if ctx.timing_only else "functional"
    print(
        f"data-parallel step on {ctx.topology.name}, {world_size} ranks, {mode}: "
        f"{args.layers} layers of {args.hidden}x{args.hidden} float32, batch {args.batch} "
        f"per rank, {row['buckets']} buckets, all-reduce {algorithm}"
    )
    for label, key in (
        ("compute alone", "compute_us"),
        ("communication alone", "comm_us"),
        ("serialized (sum)", "serialized_us"),
        ("overlapped step", "step_us"),
        ("exposed communication", "exposed_comm_us"),
    ):
        print(f"  {label:<22} {row[key]:>12.3f} us")
    print(f"  {'overlap efficiency':<22} {row['overlap_efficiency']:>12.3f}")
    print(f"  {'checked':<22} {str(checked):>12}")
    return [row]
