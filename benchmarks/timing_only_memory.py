"""Peak memory of a 1 GiB tensor in timing-only mode on rack.yaml.

Creates two 1 GiB float32 tensors split over all 1024 PEs of the rack,
zero-fills one and copies it into the other (device to device), then prints
the wall time, the simulated time and the process's peak resident set size.
Timing-only mode carries sizes, not bytes, so the peak must stay far below the
tensor's size.  Exits with status 1 if the peak RSS reaches 1 GiB.

Run from the repository root::

    python benchmarks/timing_only_memory.py [--topology topologies/rack.yaml]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext

GiB = 1 << 30
ROOT = Path(__file__).resolve().parents[1]


def peak_rss_bytes() -> int:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default=str(ROOT / "topologies" / "rack.yaml"))
    args = parser.parse_args(argv)

    start = time.perf_counter()
    ctx = RuntimeContext(args.topology, timing_only=True)
    shape = (1024, 262144)  # float32: exactly 1 GiB
    dp = DPPolicy(sip="row_wise", cube="row_wise", pe="row_wise")
    src = ctx.zeros(shape, "float32", dp=dp, name="src")
    dst = ctx.empty(shape, "float32", dp=dp, name="dst")
    dst.copy_(src)
    src.free()
    dst.free()
    wall = time.perf_counter() - start

    peak = peak_rss_bytes()
    print(f"topology: {args.topology}")
    print(f"tensor: {shape} float32, {src.nbytes} B, {len(ctx.trace)} requests")
    print(f"wall time: {wall:.2f} s")
    print(f"simulated time: {ctx.now} ps ({ctx.now / 1e9:.3f} ms)")
    print(f"peak RSS: {peak // 1024} KiB ({peak / GiB:.3f} GiB)")
    if peak >= GiB:
        print("FAIL: peak RSS reached 1 GiB in timing-only mode", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
