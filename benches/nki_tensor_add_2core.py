"""Tensor addition over two cores with an SPMD grid, after the NKI tutorial.

Shows the NKI "SPMD tensor addition using multiple Neuron Cores" example: a
kernel adds one ``[128, 512]`` tile per program (partition dimension 128, free
dimension 512) of two ``(256, 1024)`` tensors.  It is launched

* on one core with the grid ``(rows // 128, cols // 512)``, and
* on two cores with ``(spmd_dim(rows // (128 * 2), nc(2)), cols // 512)``:
  programs whose first index is even run on one PE, odd ones on another.

As in the tutorial, the tensors live in one PE's HBM (``dp=None``) and both
cores read and write it.  In the simulated machine that memory is a single HBM
slice that both PEs share, so it bounds the speed-up; a third row places the
tensors split by rows over the two PEs' own HBM (``--no-split`` drops it) to
show the speed-up the second core gives when it has its own memory.  The SPMD
grid deals row tiles to the cores in turn (even, odd) while a row-wise split
gives each PE one contiguous half, so the two line up only when
``rows == 256``; with more rows each core reads the other's HBM half the time.

The default dtype is bfloat16 (``--dtype float32`` also works); the result is
checked against NumPy's sum of the same inputs rounded to that dtype, except in
timing-only mode, where tensors carry sizes but no values.

Run from the repository root::

    python benches/nki_tensor_add_2core.py [--rows 256] [--cols 1024] [--dtype bfloat16]
    KERNBENCH_TOPOLOGY=topologies/tiny.yaml python benches/nki_tensor_add_2core.py

Prints one row per launch: cores, where the tensors live, grid, simulated
time (µs), bytes moved (3 tensors' worth), achieved GB/s, the speed-up over
one core, and whether the values were checked.
"""

from __future__ import annotations

import argparse

import numpy as np

import kernbench.kernels.language as tl
from kernbench.kernels import jit, nc, spmd_dim
from kernbench.placement import DPPolicy
from kernbench.runtime import current_context

# Rows split over the first two PEs of one cube: each core's tiles in its own HBM.
TWO_PE_ROWS = DPPolicy(num_sips=1, num_cubes=1, pe="row_wise", num_pes=2)
PMAX = 128  # partition-dimension tile size (the hardware limit)
FREE = 512  # free-dimension tile size


@jit
def nki_tensor_add_kernel_(
    a_input, b_input, c_output, n_cols, TILE_P: tl.constexpr = PMAX, TILE_F: tl.constexpr = FREE
):
    # This program's tile: rows [x*TILE_P, (x+1)*TILE_P), columns [y*TILE_F, (y+1)*TILE_F).
    offset_i_x = tl.program_id(0) * TILE_P
    offset_i_y = tl.program_id(1) * TILE_F
    ix = offset_i_x + tl.arange(0, TILE_P)[:, None]
    iy = offset_i_y + tl.arange(0, TILE_F)[None, :]
    offsets = ix * n_cols + iy  # row-major element offsets of the tile
    a_tile = tl.load(a_input + offsets)
    b_tile = tl.load(b_input + offsets)
    c_tile = a_tile + b_tile
    tl.store(c_output + offsets, c_tile)


def run(
    ctx,
    rows: int = 256,
    cols: int = 1024,
    cores: int = 2,
    dtype: str = "bfloat16",
    split: bool = False,
    seed: int = 0,
) -> dict:
    """Add two random ``(rows, cols)`` tensors with ``cores`` cores; return the figures.

    ``split`` places the tensors row-wise over two PEs instead of in one PE's HBM.
    ``rows`` must be a multiple of ``128 * cores`` and ``cols`` of 512.
    """
    if cores < 1 or rows % (PMAX * cores) or cols % FREE:
        raise ValueError(
            f"shape ({rows}, {cols}) with {cores} core(s): rows must be a multiple of "
            f"{PMAX * max(cores, 1)} and cols a multiple of {FREE}"
        )
    rng = np.random.default_rng(seed)
    a_host = rng.random((rows, cols), dtype=np.float32)
    b_host = rng.random((rows, cols), dtype=np.float32)

    dp = TWO_PE_ROWS if split else None
    a = ctx.empty((rows, cols), dtype, dp=dp, name="a_input")
    b = ctx.empty((rows, cols), dtype, dp=dp, name="b_input")
    c = ctx.empty((rows, cols), dtype, dp=dp, name="c_output")
    a.copy_(a_host)
    b.copy_(b_host)

    if cores == 1:
        grid = (rows // PMAX, cols // FREE)
    else:
        grid = (spmd_dim(rows // (PMAX * cores), nc(cores)), cols // FREE)
    result = nki_tensor_add_kernel_[grid](a, b, c, cols)

    checked = False
    if not ctx.timing_only:
        # The device rounds the inputs to ``dtype``; add those in float32 and round again.
        a_in = ctx.from_numpy(a_host, dtype).numpy()
        b_in = ctx.from_numpy(b_host, dtype).numpy()
        expected = ctx.from_numpy(a_in + b_in, dtype).numpy()
        np.testing.assert_allclose(c.numpy(), expected, rtol=0, atol=0)
        checked = True
    nbytes = 3 * a.nbytes
    for t in (a, b, c):
        t.free()

    seconds = result.elapsed_ps * 1e-12
    return {
        "cores": cores,
        "memory": "split over 2 PEs" if split else "one PE's HBM",
        "shape": (rows, cols),
        "dtype": dtype,
        "grid": result.record.grid.dims,
        "pes": sorted(result.placement),
        "elapsed_ps": result.elapsed_ps,
        "time_us": result.elapsed_ps / 1e6,
        "bytes": nbytes,
        "gbps": nbytes / seconds / 1e9,
        "checked": checked,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description="NKI SPMD tensor add on 1 and 2 cores")
    parser.add_argument("--rows", type=int, default=256, help="a multiple of 256")
    parser.add_argument("--cols", type=int, default=1024, help="a multiple of 512")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument(
        "--no-split", action="store_true", help="skip the row with tensors split over the two PEs"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    ctx = current_context()
    common = {"rows": args.rows, "cols": args.cols, "dtype": args.dtype, "seed": args.seed}
    rows = [run(ctx, cores=1, **common), run(ctx, cores=2, **common)]
    if not args.no_split:
        rows.append(run(ctx, cores=2, split=True, **common))
    base = rows[0]["elapsed_ps"]
    for r in rows:
        r["speedup"] = base / r["elapsed_ps"]

    mode = "timing-only (values not checked)" if ctx.timing_only else "functional"
    print(
        f"NKI tensor add {args.rows}x{args.cols} {args.dtype}, tile {PMAX}x{FREE}, "
        f"on {ctx.topology.name}, {mode}"
    )
    header = (
        f"{'cores':>5} {'tensors in':<17} {'grid':>8} {'time (us)':>10} {'bytes':>9} "
        f"{'GB/s':>7} {'speed-up':>8} {'checked':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        grid = "x".join(str(d) for d in r["grid"])
        print(
            f"{r['cores']:>5} {r['memory']:<17} {grid:>8} {r['time_us']:>10.3f} "
            f"{r['bytes']:>9} {r['gbps']:>7.1f} {r['speedup']:>7.2f}x {str(r['checked']):>7}"
        )
    return rows


if __name__ == "__main__":
    main()
