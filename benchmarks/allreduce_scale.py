"""Ring and hierarchical all-reduce at scale, timing-only, on rack.yaml with ranks at PE level.

Prints per run: ranks, algorithm, wall time (all, and of the all-reduce
itself: from the last rank entering it to the last leaving, without setting
up the ranks and mapping their tensors), simulated time, SimPy events
processed, events per second and peak RSS.  Targets (issue 8): 1024-rank ring
all-reduce of 1 GiB, one chunk, <= 60 s wall; hierarchical <= 15 s; RSS <= 2 GiB.
The tuner takes two pieces for that ring by default (ADR 0017): the one-chunk
target is measured with ``--set ccl.configs.ring.chunks=1``.

    python benchmarks/allreduce_scale.py [--ranks 64 256 1024] [--bytes 1GiB]
        [--algorithms ring multi_cube] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CountingEnvironment, add_set_option, machine_index, peak_rss_mib  # noqa: E402

import kernbench.torch as torch  # noqa: E402
import kernbench.torch.distributed as dist  # noqa: E402
from kernbench.ccl.settings import CclSettings, split_overrides, use_settings  # noqa: E402
from kernbench.distributed.world import World  # noqa: E402
from kernbench.fabric import Fabric  # noqa: E402
from kernbench.runtime import RuntimeContext, use_context  # noqa: E402
from kernbench.topology import load_topology  # noqa: E402
from kernbench.units import parse_size  # noqa: E402


def one_run(ranks: int, algorithm: str, nbytes: int, overrides: list[str]) -> dict:
    machine_overrides, ccl_overrides = split_overrides(overrides)  # ccl.*: as kernbench run
    topology = load_topology("topologies/rack.yaml", ["system.device_level=pe", *machine_overrides])
    env = CountingEnvironment()
    ctx = RuntimeContext(topology, timing_only=True, machine=Fabric(topology, env=env))
    use_settings(ctx, CclSettings.from_overrides(ccl_overrides))
    world = World(ctx, ranks)

    window: dict[str, float] = {}

    def body(rank: int) -> None:
        dist.init_process_group()
        tensor = torch.empty(nbytes // 4)
        window["enter"] = time.perf_counter()  # the last rank to start it: all tensors made
        dist.all_reduce(tensor, algorithm=algorithm)
        window["leave"] = time.perf_counter()  # the last rank to finish it

    start = time.perf_counter()
    with use_context(ctx):
        world.run(body)
    wall = time.perf_counter() - start
    record = world.collectives[-1]
    return {
        "ranks": ranks,
        "algorithm": algorithm,
        "wall_s": wall,
        "collective_s": window["leave"] - window["enter"],
        "sim_ms": (record.end_ps - record.launch_ps) / 1e9,
        "events": env.events_processed,
        "events_per_s": env.events_processed / wall,
        "peak_rss_MiB": peak_rss_mib(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--bytes", default="1GiB")
    parser.add_argument("--algorithms", nargs="+", default=["ring", "multi_cube"])
    add_set_option(parser)
    args = parser.parse_args(argv)
    nbytes = parse_size(args.bytes)
    print(machine_index())
    print(
        f"{'ranks':>6} {'algorithm':>12} {'wall(s)':>9} {'in AR(s)':>9} {'sim(ms)':>10} "
        f"{'events':>10} {'events/s':>10} {'peakRSS(MiB)':>13}"
    )
    for ranks in args.ranks:
        for algorithm in args.algorithms:
            r = one_run(ranks, algorithm, nbytes, args.overrides)
            print(
                f"{r['ranks']:>6} {r['algorithm']:>12} {r['wall_s']:>9.2f} "
                f"{r['collective_s']:>9.2f} {r['sim_ms']:>10.3f} "
                f"{r['events']:>10} {r['events_per_s']:>10.0f} {r['peak_rss_MiB']:>13.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
