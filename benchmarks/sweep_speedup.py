"""Speed-up of a 16-point sweep with 2 local workers against 1, in the same process.

The sweep: 2 topologies (ring8, fc8) x 2 all-reduce algorithms x 4 size ranges
of benches/allreduce_perf.py, timing-only, each size timed over ``--iters``
iterations as nccl-tests does by default (20: a point then takes a few
seconds, as sweep points of real studies do, rather than a few tenths of a
second, where the pool's start-up and the final plot would be most of what
is measured).  Prints the wall time with 1 and 2
workers and the speed-up (target >= 1.7x on this 2-core machine).  One worker
runs the points in this process (no pool start-up: the fair baseline); two
workers are a process pool.

    python benchmarks/sweep_speedup.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kernbench.bench.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[1]

SWEEP = f"""
bench: {ROOT}/benches/allreduce_perf.py
topologies: [{ROOT}/topologies/ring8.yaml, {ROOT}/topologies/fc8.yaml]
set:
  ccl.all_reduce: [ring, recursive_doubling]
args:
  -b: [4KiB, 8KiB, 16KiB, 32KiB]
  -e: [{{max_bytes}}]
  -f: [2]
  -n: [{{iters}}]
timing_only: true
"""


def timed(jobs: int, workdir: Path, max_bytes: str, iters: int = 20) -> float:
    sweep = workdir / f"sweep_j{jobs}.yaml"
    sweep.write_text(SWEEP.replace("{max_bytes}", max_bytes).replace("{iters}", str(iters)))
    start = time.perf_counter()
    outcome = run_sweep(
        sweep,
        jobs=jobs,
        executor="local",
        output=workdir / f"out_j{jobs}",
        progress=False,
        echo=lambda _: None,
    )
    wall = time.perf_counter() - start
    assert outcome.ok == 16, outcome
    return wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-bytes", default="1GiB", help="largest size of each point (1GiB)")
    parser.add_argument(
        "--iters", type=int, default=20, help="timed iterations per size (20, as nccl-tests)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        one = timed(1, Path(tmp), args.max_bytes, args.iters)
        two = timed(2, Path(tmp), args.max_bytes, args.iters)
    print("points: 16")
    print(f"1 worker:  {one:.2f} s")
    print(f"2 workers: {two:.2f} s")
    print(f"speed-up: {one / two:.2f}x (target >= 1.7x)")


if __name__ == "__main__":
    main()
