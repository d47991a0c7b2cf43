"""Cost of one fabric message against a bare SimPy baseline, in the same process.

The baseline moves N messages through ``simpy.Store``s with a timeout per hop
(what a hand-written SimPy model of one link does); the fabric moves N
``Transfer`` messages over one idle link of ring8.yaml.  Prints messages per
second of each and their ratio (target: fabric cost <= 3x the bare message).

    python benchmarks/engine_overhead.py [--messages 20000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bare_simpy_seconds  # noqa: E402

from kernbench.fabric import Fabric  # noqa: E402
from kernbench.machine import Transfer  # noqa: E402
from kernbench.topology import load_topology  # noqa: E402


def fabric_messages(messages: int) -> float:
    fabric = Fabric(load_topology("topologies/ring8.yaml"))

    def sender():
        for _ in range(messages):
            handle = fabric.submit(
                Transfer(src="sip0.cube0.noc", dst="sip1.cube0.noc", nbytes=4096)
            )
            yield handle.event

    fabric.env.process(sender())
    start = time.perf_counter()
    fabric.run()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000)
    args = parser.parse_args(argv)
    bare = bare_simpy_seconds(args.messages)
    fab = fabric_messages(args.messages)
    print(f"messages: {args.messages}")
    print(f"bare SimPy: {args.messages / bare:12.0f} msg/s  ({bare:.3f} s)")
    print(f"fabric:     {args.messages / fab:12.0f} msg/s  ({fab:.3f} s)")
    print(f"ratio fabric/bare cost: {fab / bare:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
