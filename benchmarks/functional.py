"""Functional-mode all-reduce of real float32 data: wall time and peak RSS against bytes held.

64 ranks (rack.yaml, ranks at PE level) each all-reduce a 64 MiB float32 tensor
with the ring; values are checked against the closed-form sum.  Targets
(issue 8): <= 20 s wall; peak RSS <= 3x the bytes of the tensors held.

    python benchmarks/functional.py [--ranks 64] [--bytes 64MiB] [--algorithm ring]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_index, peak_rss_mib  # noqa: E402

import kernbench  # noqa: E402
import kernbench.torch.distributed as dist  # noqa: E402
from kernbench.runtime import current_context  # noqa: E402
from kernbench.units import parse_size  # noqa: E402

_WINDOW: dict[str, float] = {}


def body(nbytes: int, algorithm: str) -> bool:
    dist.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    ctx = current_context()
    count = nbytes // 4
    tensor = ctx.empty(count, "float32")
    tensor.copy_(np.full(count, rank + 1, dtype=np.float32))
    dist.barrier()
    _WINDOW.setdefault("enter", time.perf_counter())  # the first rank to start it
    dist.all_reduce(tensor, algorithm=algorithm)
    _WINDOW["leave"] = time.perf_counter()  # the last rank to finish it
    expected = size * (size + 1) / 2
    values = tensor.numpy()
    return bool(values[0] == expected and values[-1] == expected)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--bytes", default="64MiB")
    parser.add_argument("--algorithm", default="ring")
    args = parser.parse_args(argv)
    nbytes = parse_size(args.bytes)
    print(machine_index())
    baseline = peak_rss_mib()
    start = time.perf_counter()
    result = kernbench.simulate(
        body,
        topology="topologies/rack.yaml",
        overrides=["system.device_level=pe"],
        world_size=args.ranks,
        args=(nbytes, args.algorithm),
    )
    wall = time.perf_counter() - start
    held = args.ranks * nbytes / 2**20
    peak = peak_rss_mib()
    record = result.report["collectives"][-1]
    print(f"ranks {args.ranks} x {args.bytes} float32, algorithm {args.algorithm}")
    print(f"values checked: {all(result.returns)}")
    print(
        f"wall: {wall:.2f} s in all, {_WINDOW['leave'] - _WINDOW['enter']:.2f} s in the "
        "all-reduce itself (the rest: host fills, copies in, reading back)"
    )
    print(f"simulated all-reduce: {(record['end_ps'] - record['launch_ps']) / 1e9:.3f} ms")
    print(
        f"tensor bytes held: {held:.0f} MiB; peak RSS {peak:.0f} MiB "
        f"(start {baseline:.0f} MiB); ratio {peak / held:.2f}x (target <= 3x)"
    )


if __name__ == "__main__":
    main()
