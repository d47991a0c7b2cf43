"""Fused row-wise softmax, the Triton tutorial kernel, on the simulated machine.

Shows a reduction kernel: one program per row loads the row once (``BLOCK =
next_power_of_2(n_cols)`` lanes, masked lanes filled with ``-inf``), subtracts
the row maximum, exponentiates, divides by the sum and stores the row -- one
read and one write of the matrix.  The rows are placed
``DPPolicy(cube="row_wise")`` (a block of rows per cube, so the cubes work in
parallel) when the row count divides over the machine's cubes; otherwise the
matrix lives in one PE's HBM (``dp=None``).  Note that ``DPPolicy(cube=
"row_wise")`` keeps the PE level at ``replicate``: every PE of a cube holds a
copy of its cube's rows, and a store writes all the copies.

The result is checked against a NumPy softmax (an ``AssertionError`` on a
mismatch), except in timing-only mode, where tensors carry sizes but no values.

Run from the repository root::

    python benches/fused_softmax.py [--rows 1823] [--cols 781] [--seed 0]
    KERNBENCH_TOPOLOGY=topologies/tiny.yaml python benches/fused_softmax.py --rows 64 --cols 128

Prints the placement, programs, PEs used, simulated time (µs), bytes (one read
and one write of the matrix, 2·rows·cols·4), achieved GB/s and whether the
values were checked.
"""

from __future__ import annotations

import argparse

import numpy as np

import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.placement import DPPolicy
from kernbench.runtime import current_context


@triton.jit
def softmax_kernel(
    output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr
):
    # One program per row; rows are independent.
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    input_ptrs = row_start_ptr + col_offsets
    # BLOCK_SIZE may exceed n_cols: masked lanes read -inf, which exp() turns into 0.
    row = tl.load(input_ptrs, mask=col_offsets < n_cols, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    output_ptrs = output_row_start_ptr + col_offsets
    tl.store(output_ptrs, softmax_output, mask=col_offsets < n_cols)


def reference_softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def run(ctx, rows: int = 1823, cols: int = 781, seed: int = 0) -> dict:
    """Softmax of a random ``(rows, cols)`` float32 matrix on ``ctx``; return the figures."""
    cubes = ctx.topology.num_cubes
    dp = DPPolicy(cube="row_wise") if rows % cubes == 0 else None
    rng = np.random.default_rng(seed)
    x_host = rng.standard_normal((rows, cols), dtype=np.float32)

    x = ctx.empty((rows, cols), "float32", dp=dp, name="x")
    y = ctx.empty((rows, cols), "float32", dp=dp, name="y")
    x.copy_(x_host)

    block = triton.next_power_of_2(cols)
    result = softmax_kernel[(rows,)](y, x, cols, cols, cols, BLOCK_SIZE=block)

    checked = False
    if not ctx.timing_only:
        np.testing.assert_allclose(y.numpy(), reference_softmax(x_host), rtol=1e-5, atol=1e-7)
        checked = True
    for t in (x, y):
        t.free()

    nbytes = 2 * rows * cols * 4
    seconds = result.elapsed_ps * 1e-12
    return {
        "shape": (rows, cols),
        "block": block,
        "placement": f"cube=row_wise x{cubes}" if dp is not None else "one PE",
        "programs": rows,
        "pes": len(result.placement),
        "elapsed_ps": result.elapsed_ps,
        "time_us": result.elapsed_ps / 1e6,
        "bytes": nbytes,
        "gbps": nbytes / seconds / 1e9,
        "checked": checked,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description="Triton fused softmax on the simulated machine")
    parser.add_argument("--rows", type=int, default=1823)
    parser.add_argument("--cols", type=int, default=781)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    ctx = current_context()
    r = run(ctx, rows=args.rows, cols=args.cols, seed=args.seed)
    mode = "timing-only (values not checked)" if ctx.timing_only else "functional"
    print(f"fused softmax on {ctx.topology.name} ({ctx.topology.num_pes} PEs), {mode}")
    header = (
        f"{'shape':>12} {'BLOCK':>6} {'placement':<22} {'programs':>8} {'PEs':>4} "
        f"{'time (us)':>10} {'bytes':>10} {'GB/s':>8} {'checked':>7}"
    )
    print(header)
    print("-" * len(header))
    shape = "x".join(str(d) for d in r["shape"])
    print(
        f"{shape:>12} {r['block']:>6} {r['placement']:<22} {r['programs']:>8} {r['pes']:>4} "
        f"{r['time_us']:>10.3f} {r['bytes']:>10} {r['gbps']:>8.1f} {str(r['checked']):>7}"
    )
    return [r]


if __name__ == "__main__":
    main()
