"""Vector addition, the Triton tutorial kernel, on the simulated machine.

Shows how a kernel written for Triton runs here with only its imports changed:
``out = x + y`` over ``n`` float32 elements, one program per ``BLOCK_SIZE``
elements, with a mask for the ragged last block.  It runs twice:

* ``one PE`` -- the three tensors live in one PE's HBM (``dp=None``), so every
  program runs on that PE, one after another, through one HBM slice;
* ``sharded`` -- the tensors are split row-wise over every cube and every PE
  (``DPPolicy(cube="row_wise", pe="row_wise")``) and each program runs on the
  PE holding its block, so the PEs work in parallel.

The result is checked against NumPy (an ``AssertionError`` on a mismatch),
except in timing-only mode, where tensors carry sizes but no values.

Run from the repository root::

    python benches/vector_add.py [--size 98432] [--block 1024] [--seed 0]
    KERNBENCH_TOPOLOGY=topologies/tiny.yaml python benches/vector_add.py --size 1000
    KERNBENCH_TIMING_ONLY=1 python benches/vector_add.py --size 4194304

Prints one row per placement: programs, PEs used, simulated time (µs), bytes
moved (3·n·4: read x and y, write out), achieved GB/s, and whether the values
were checked.  A placement that does not divide ``n`` over the machine is
reported as skipped.
"""

from __future__ import annotations

import argparse

import numpy as np

import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import PlacementError
from kernbench.placement import DPPolicy
from kernbench.runtime import current_context

SHARDED = DPPolicy(cube="row_wise", pe="row_wise")


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


def run(ctx, size: int = 98432, block: int = 1024, sharded: bool = False, seed: int = 0) -> dict:
    """Add two random float32 vectors of ``size`` elements on ``ctx``; return the figures.

    ``sharded`` places the tensors with ``DPPolicy(cube="row_wise", pe="row_wise")``
    (``size`` must divide over the machine's PEs); otherwise they live on one PE.
    """
    dp = SHARDED if sharded else None
    rng = np.random.default_rng(seed)
    x_host = rng.random(size, dtype=np.float32)
    y_host = rng.random(size, dtype=np.float32)

    x = ctx.empty(size, "float32", dp=dp, name="x")
    y = ctx.empty(size, "float32", dp=dp, name="y")
    out = ctx.empty(size, "float32", dp=dp, name="out")
    x.copy_(x_host)
    y.copy_(y_host)

    grid = lambda meta: (triton.cdiv(size, meta["BLOCK_SIZE"]),)  # noqa: E731 - as in the tutorial
    result = add_kernel[grid](x, y, out, size, BLOCK_SIZE=block)

    checked = False
    if not ctx.timing_only:
        np.testing.assert_allclose(out.numpy(), x_host + y_host, rtol=0, atol=0)
        checked = True
    for t in (x, y, out):
        t.free()

    nbytes = 3 * size * 4
    seconds = result.elapsed_ps * 1e-12
    return {
        "placement": "sharded" if sharded else "one PE",
        "n": size,
        "block": block,
        "programs": result.record.grid.num_programs,
        "pes": len(result.placement),
        "elapsed_ps": result.elapsed_ps,
        "time_us": result.elapsed_ps / 1e6,
        "bytes": nbytes,
        "gbps": nbytes / seconds / 1e9,
        "checked": checked,
    }


def _print_table(ctx, rows: list[dict]) -> None:
    mode = "timing-only (values not checked)" if ctx.timing_only else "functional"
    print(f"vector add on {ctx.topology.name} ({ctx.topology.num_pes} PEs), {mode}")
    header = f"{'placement':<10} {'n':>10} {'block':>6} {'programs':>8} {'PEs':>4} "
    header += f"{'time (us)':>11} {'bytes':>10} {'GB/s':>9} {'checked':>7}"
    print(header)
    print("-" * len(header))
    for r in rows:
        if "skipped" in r:
            print(f"{r['placement']:<10} skipped: {r['skipped']}")
            continue
        print(
            f"{r['placement']:<10} {r['n']:>10} {r['block']:>6} {r['programs']:>8} {r['pes']:>4} "
            f"{r['time_us']:>11.3f} {r['bytes']:>10} {r['gbps']:>9.1f} {str(r['checked']):>7}"
        )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description="Triton vector add on the simulated machine")
    parser.add_argument("--size", type=int, default=98432, help="number of elements")
    parser.add_argument("--block", type=int, default=1024, help="BLOCK_SIZE (a power of two)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    ctx = current_context()
    rows = []
    for sharded in (False, True):
        try:
            rows.append(run(ctx, size=args.size, block=args.block, sharded=sharded, seed=args.seed))
        except PlacementError as exc:
            rows.append({"placement": "sharded" if sharded else "one PE", "skipped": str(exc)})
    _print_table(ctx, rows)
    return rows


if __name__ == "__main__":
    main()
