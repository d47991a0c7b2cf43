"""The fast backend against the detailed one: the worst case per algorithm configuration.

Runs kernbench.bench.crossval.compare for every catalogue configuration on
ring8 and fc8 (p = 2..8), multi_sip at cube level and a two-SIP rack at cube
level (p = 2..16 and 64 / 32), timing-only, and prints per configuration the
number of collectives compared, how many the fast backend priced step-wide
(the others ran message by message), and the largest relative difference
with where it happened.  Bounds (ADR 0015): 0.1% where no link carried two
flows at once, 5% elsewhere.

    python benchmarks/crossval.py [--machines ring8 fc8 multi_sip small_rack]
        [--configs ring direct ...] [--bytes 256KiB]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_index  # noqa: E402

from kernbench.bench.crossval import compare  # noqa: E402
from kernbench.ccl.catalogue import load_catalogue  # noqa: E402
from kernbench.units import parse_size  # noqa: E402

MACHINES = {
    "ring8": ("ring8", [], (2, 3, 4, 5, 7, 8)),
    "fc8": ("fc8", [], (2, 3, 4, 5, 7, 8)),
    "multi_sip": ("multi_sip", ["system.device_level=cube"], (2, 3, 4, 5, 7, 8, 16, 64)),
    "small_rack": (
        "rack",
        ["system.sips.count=2", "system.device_level=cube"],
        (2, 3, 4, 5, 7, 8, 16, 32),
    ),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", nargs="+", default=list(MACHINES), choices=list(MACHINES))
    parser.add_argument("--configs", nargs="+", default=sorted(load_catalogue().configs))
    parser.add_argument("--bytes", default="256KiB")
    args = parser.parse_args(argv)
    nbytes = parse_size(args.bytes)
    print(machine_index(), flush=True)
    print(
        f"{'config':>20} {'points':>6} {'priced':>6} {'over':>4} {'worst':>8}  where",
        flush=True,
    )
    start = time.perf_counter()
    total = over = 0
    for config in args.configs:
        points = []
        for machine in args.machines:
            topology, overrides, sizes = MACHINES[machine]
            points += [
                (machine, pt)
                for pt in compare(topology, config, sizes, overrides=overrides, nbytes=nbytes)
            ]
        if not points:
            continue
        machine, worst = max(points, key=lambda item: item[1].error)
        bad = sum(pt.error > pt.bound for _, pt in points)
        total += len(points)
        over += bad
        print(
            f"{config:>20} {len(points):>6} {sum(pt.evaluated for _, pt in points):>6} "
            f"{bad:>4} {worst.error:>8.3%}  {machine} {worst.op} p={worst.p} "
            f"(detailed {worst.detailed_ps} ps, fast {worst.fast_ps} ps, "
            f"{'shared links' if worst.shared else 'no shared link'})",
            flush=True,
        )
    print(
        f"{total} collectives, {over} over their bound, {time.perf_counter() - start:.1f} s wall",
        flush=True,
    )


if __name__ == "__main__":
    main()
