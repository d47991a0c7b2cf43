"""Blocked matrix multiplication with an fp32 accumulator, on the simulated machine.

Shows the Triton tutorial's matmul structure: each program computes one
``BLOCK_M x BLOCK_N`` tile of ``C = A @ B``, starting from
``acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)`` and walking K in
``BLOCK_K`` steps with ``acc += tl.dot(a, b)``.  Masks make ragged M, N and K
(sizes that are not multiples of the blocks) correct: out-of-range lanes load
0 and are not stored.  The three matrices live in one PE's HBM (``dp=None``),
so the programs run one after another on that PE; ``tl.dot`` runs on its
matrix engine while the loads stream from HBM.

The result is checked against NumPy's ``A @ B`` (an ``AssertionError`` on a
mismatch), except in timing-only mode, where tensors carry sizes but no values.

Run from the repository root::

    python benches/matmul.py [--m 256] [--n 256] [--k 256] [--block-m 64] [--block-n 64]
                             [--block-k 32] [--dtype float32]
    KERNBENCH_TOPOLOGY=topologies/tiny.yaml python benches/matmul.py --m 100 --n 70 --k 50

Prints the shape, blocks, programs, simulated time (µs), FLOPs (2·M·N·K),
achieved TFLOP/s, the bytes the programs loaded and stored, and whether the
values were checked.
"""

from __future__ import annotations

import argparse

import numpy as np

import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.runtime import current_context

TOLERANCE = {"float32": 1e-4, "float16": 2e-2}  # relative, of the output's dtype


@triton.jit
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
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
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
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def run(
    ctx,
    m: int = 256,
    n: int = 256,
    k: int = 256,
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 32,
    dtype: str = "float32",
    seed: int = 0,
) -> dict:
    """``C = A @ B`` for random ``A (m, k)`` and ``B (k, n)`` on ``ctx``; return the figures."""
    rng = np.random.default_rng(seed)
    a_host = rng.standard_normal((m, k), dtype=np.float32)
    b_host = rng.standard_normal((k, n), dtype=np.float32)

    a = ctx.empty((m, k), dtype, name="A")
    b = ctx.empty((k, n), dtype, name="B")
    c = ctx.empty((m, n), dtype, name="C")
    a.copy_(a_host)
    b.copy_(b_host)

    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    strides = (k, 1, n, 1, n, 1)  # row-major A (m, k), B (k, n) and C (m, n)
    result = matmul_kernel[grid](
        a, b, c, m, n, k, *strides, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k
    )

    checked = False
    if not ctx.timing_only:
        # The device holds the inputs rounded to ``dtype``; multiply those in float64.
        a_in = ctx.from_numpy(a_host, dtype).numpy().astype(np.float64)
        b_in = ctx.from_numpy(b_host, dtype).numpy().astype(np.float64)
        expected = a_in @ b_in
        scale = np.sqrt(k)  # entries of A @ B have a standard deviation of sqrt(k)
        tol = TOLERANCE[dtype]
        np.testing.assert_allclose(c.numpy(), expected, rtol=tol, atol=tol * scale)
        checked = True
    for t in (a, b, c):
        t.free()

    flops = 2 * m * n * k
    seconds = result.elapsed_ps * 1e-12
    return {
        "shape": (m, n, k),
        "blocks": (block_m, block_n, block_k),
        "dtype": dtype,
        "programs": result.record.grid.num_programs,
        "pes": len(result.placement),
        "elapsed_ps": result.elapsed_ps,
        "time_us": result.elapsed_ps / 1e6,
        "flops": flops,
        "tflops": flops / seconds / 1e12,
        "bytes_loaded": result.record.bytes_loaded,
        "bytes_stored": result.record.bytes_stored,
        "checked": checked,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description="Blocked matmul on the simulated machine")
    parser.add_argument("--m", type=int, default=256)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--block-m", type=int, default=64)
    parser.add_argument("--block-n", type=int, default=64)
    parser.add_argument("--block-k", type=int, default=32)
    parser.add_argument("--dtype", default="float32", choices=sorted(TOLERANCE))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    ctx = current_context()
    r = run(
        ctx,
        m=args.m,
        n=args.n,
        k=args.k,
        block_m=args.block_m,
        block_n=args.block_n,
        block_k=args.block_k,
        dtype=args.dtype,
        seed=args.seed,
    )
    mode = "timing-only (values not checked)" if ctx.timing_only else "functional"
    print(f"matmul {args.dtype} on {ctx.topology.name}, one PE, {mode}")
    header = (
        f"{'M x N x K':>15} {'blocks':>10} {'programs':>8} {'time (us)':>10} "
        f"{'FLOPs':>11} {'TFLOP/s':>8} {'loaded':>10} {'stored':>9} {'checked':>7}"
    )
    print(header)
    print("-" * len(header))
    shape = "x".join(str(d) for d in r["shape"])
    blocks = "x".join(str(d) for d in r["blocks"])
    print(
        f"{shape:>15} {blocks:>10} {r['programs']:>8} {r['time_us']:>10.3f} {r['flops']:>11} "
        f"{r['tflops']:>8.3f} {r['bytes_loaded']:>10} {r['bytes_stored']:>9} "
        f"{str(r['checked']):>7}"
    )
    return [r]


if __name__ == "__main__":
    main()
