"""A tensor-parallel MLP block (Megatron-LM style): ``Y = GeLU(X · A) · B`` over the ranks.

``X`` is ``(batch, hidden)`` and the same on every rank; ``A`` is
``(hidden, ffn)``, split by columns, and ``B`` is ``(ffn, hidden)``, split by
rows, so rank r holds ``A_r = A[:, r·f:(r+1)·f]`` and ``B_r = B[r·f:(r+1)·f, :]``
with ``f = ffn / n``.  Each rank computes ``Z_r = GeLU(X · A_r)`` (a blocked
``@jit`` matmul with GeLU fused into its epilogue; no communication is needed
since GeLU is elementwise) and its partial ``Y_r = Z_r · B_r`` (a second
matmul), and the partials are summed over the ranks by one of two modes:

* ``allreduce`` -- ``dist.all_reduce(Y_r)``: every rank ends with all of ``Y``;
* ``rs_ag`` -- ``dist.reduce_scatter_tensor`` gives each rank ``batch / n`` rows
  of ``Y`` (where sequence parallelism would continue), then
  ``dist.all_gather_into_tensor`` rebuilds ``Y`` on every rank.

GeLU is the tanh form, ``x · sigmoid(1.5957691·(x + 0.044715·x³))``.  Each
mode runs once untimed (it installs the collectives' tables), then once timed
after a barrier; ``Y`` is checked against NumPy's full, unsharded MLP on every
rank (an ``AssertionError`` on a mismatch), except in timing-only mode.

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/tp_mlp.py --topology topologies/ring8.yaml
    kernbench run benches/tp_mlp.py --topology topologies/ring8.yaml --timing-only \\
        -- --batch 1024 --hidden 1024 --mode rs_ag --algorithm ring_pipelined

``--ffn`` defaults to 4 x ``--hidden`` and must divide over the ranks, as must
``--batch`` for ``rs_ag``.  Rank 0 prints, per mode, the times (µs) of the two
matmuls, the communication and the whole block, and the matmul FLOPs per rank,
and returns one row per mode (``--csv`` / ``--report`` record them).
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
from kernbench.errors import ConfigError
from kernbench.kernels import cdiv, jit
from kernbench.runtime import current_context

RTOL = 1e-4
GELU_SCALE = 1.5957691216057308  # 2·sqrt(2/pi): tanh(u) = 2·sigmoid(2u) - 1
MODES = ("allreduce", "rs_ag")


@jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GELU: tl.constexpr,
):
    # C (M x N) = A (M x K) @ B (K x N), all row-major; GeLU applied to C when GELU.
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    if GELU:
        acc = acc * tl.sigmoid(GELU_SCALE * (acc + 0.044715 * acc * acc * acc))
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def gelu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-GELU_SCALE * (x + 0.044715 * x**3)))


def host_data(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X``, ``A`` and ``B`` in full (every rank draws the same values)."""
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((args.batch, args.hidden), dtype=np.float32)
    a = (rng.standard_normal((args.hidden, args.ffn)) / np.sqrt(args.hidden)).astype(np.float32)
    b = (rng.standard_normal((args.ffn, args.hidden)) / np.sqrt(args.ffn)).astype(np.float32)
    return x, a, b


class ShardedMLP:
    """Rank ``rank``'s shards of ``A`` and ``B``, the input and the buffers of one mode."""

    def __init__(self, args: argparse.Namespace, rank: int, world_size: int) -> None:
        self.args, self.n = args, world_size
        x, a, b = host_data(args)
        f = args.ffn // world_size
        cols = slice(rank * f, (rank + 1) * f)
        self.f = f
        self.x = torch.from_numpy(x)
        self.a = torch.from_numpy(np.ascontiguousarray(a[:, cols]))
        self.b = torch.from_numpy(np.ascontiguousarray(b[cols, :]))
        self.z = torch.empty(args.batch, f)
        self.partial = torch.empty(args.batch, args.hidden)
        self.rows = torch.empty(args.batch // world_size, args.hidden)
        self.y = torch.empty(args.batch, args.hidden)

    def matmul(self, a, b, c, m, n, k, gelu_epilogue: bool) -> None:
        blk = self.args.block
        matmul_kernel[(cdiv(m, blk), cdiv(n, blk))](
            a, b, c, m, n, k, BLOCK_M=blk, BLOCK_N=blk, BLOCK_K=blk, GELU=gelu_epilogue
        )

    def forward(self, mode: str, ctx: Any) -> tuple[int, int, int, torch.Tensor]:
        """One pass; the picosecond times of matmul 1, matmul 2 and the communication."""
        args, algo = self.args, self.args.algorithm
        start = ctx.now
        self.matmul(self.x, self.a, self.z, args.batch, self.f, args.hidden, True)
        first = ctx.now
        self.matmul(self.z, self.b, self.partial, args.batch, args.hidden, self.f, False)
        second = ctx.now
        if mode == "allreduce":
            dist.all_reduce(self.partial, algorithm=algo)
            out = self.partial
        else:
            dist.reduce_scatter_tensor(self.rows, self.partial, algorithm=algo)
            dist.all_gather_into_tensor(self.y, self.rows, algorithm=algo)
            out = self.y
        return first - start, second - first, ctx.now - second, out


def main(argv: list[str] | None = None) -> list[dict[str, Any]] | None:
    parser = BenchArgumentParser(description="Tensor-parallel MLP (Megatron style)")
    parser.add_argument("--batch", type=int, default=256, help="rows of X (256)")
    parser.add_argument("--hidden", type=int, default=512, help="columns of X and Y (512)")
    parser.add_argument("--ffn", type=int, default=None, help="inner width (4 x hidden)")
    parser.add_argument("--mode", default="both", choices=(*MODES, "both"), help="(both)")
    parser.add_argument("--block", type=int, default=128, help="matmul block size (128)")
    parser.add_argument("--algorithm", default=None, help="collective configuration or 'auto'")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.ffn = args.ffn or 4 * args.hidden
    for name in ("batch", "hidden", "ffn", "block"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    modes = MODES if args.mode == "both" else (args.mode,)

    dist.init_process_group()
    ctx = current_context()
    rank, n = dist.get_rank(), dist.get_world_size()
    if args.ffn % n:
        raise ConfigError(f"--ffn {args.ffn} must divide over the {n} ranks")
    if "rs_ag" in modes and args.batch % n:
        raise ConfigError(f"--batch {args.batch} must divide over the {n} ranks for rs_ag")
    mlp = ShardedMLP(args, rank, n)
    expected = None
    if not ctx.timing_only:
        x, a, b = (v.astype(np.float64) for v in host_data(args))
        expected = gelu(x @ a) @ b

    rows = []
    for mode in modes:
        mlp.forward(mode, ctx)  # untimed: installs the collectives' tables
        dist.barrier()
        mm1, mm2, comm, out = mlp.forward(mode, ctx)
        launched = active_world().collectives[-len(mode.split("_")) :]
        algorithm = "+".join(c.config_name for c in launched)
        checked: bool | str = "n/a"
        if expected is not None:
            scale = np.abs(expected).max()
            np.testing.assert_allclose(
                out.numpy(), expected, rtol=RTOL, atol=RTOL * scale, err_msg=f"Y ({mode})"
            )
            checked = True
        flops = 2 * args.batch * mlp.f * args.hidden * 2
        rows.append(
            {
                "mode": mode,
                "world_size": n,
                "batch": args.batch,
                "hidden": args.hidden,
                "ffn": args.ffn,
                "algorithm": algorithm,
                "matmul1_us": mm1 / 1e6,
                "matmul2_us": mm2 / 1e6,
                "compute_us": (mm1 + mm2) / 1e6,
                "comm_us": comm / 1e6,
                "total_us": (mm1 + mm2 + comm) / 1e6,
                "flops_per_rank": flops,
                "tflops_per_rank": flops / ((mm1 + mm2) * 1e-12) / 1e12,
                "checked": checked,
            }
        )
    dist.barrier()
    if rank != 0:
        return None
    state = "timing-only (values not checked)" if ctx.timing_only else "functional"
    print(
        f"tensor-parallel MLP on {ctx.topology.name}, {n} ranks, {state}: X {args.batch}x"
        f"{args.hidden}, A {args.hidden}x{args.ffn} by columns, B {args.ffn}x{args.hidden} by rows"
    )
    header = (
        f"{'mode':<10} {'algorithm':>14} {'matmul1(us)':>12} {'matmul2(us)':>12} "
        f"{'comm(us)':>10} {'total(us)':>10} {'TFLOP/s':>8} {'checked':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['mode']:<10} {r['algorithm']:>14} {r['matmul1_us']:>12.3f} "
            f"{r['matmul2_us']:>12.3f} {r['comm_us']:>10.3f} {r['total_us']:>10.3f} "
            f"{r['tflops_per_rank']:>8.3f} {str(r['checked']):>7}"
        )
    return rows
