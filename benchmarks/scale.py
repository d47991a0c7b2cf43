"""All-reduce from 256 to 131,072 ranks on both simulation backends, timing-only.

Each point (ranks x algorithm x backend) runs in a child process of its own
(so its peak RSS is its own) on ``cluster128k`` with ranks at PE level (the
first N PEs), 1 GiB per rank unless ``--bytes`` says otherwise.  A point that
exceeds ``--budget`` seconds of wall time is stopped and printed as such, and
the larger N of that algorithm and backend are skipped.  Per point: wall time
(all; and of the all-reduce itself, from the last rank entering it, every
rank's tensor made, to the last leaving), simulated time, SimPy events, peak
RSS, and the growth exponent of the all-reduce's wall time against the
previous N (log(t2/t1) / log(N2/N1)).  The machine index (bare-SimPy msg/s) comes first.

    python benchmarks/scale.py [--ranks 256 1024 ...] [--algorithms ring ...]
        [--backends fast detailed] [--bytes 1GiB] [--budget 300]
        [--topology cluster128k] [--set KEY=VALUE ...]

Targets (fast backend, 1 GiB): 1,024-rank ring <= 1.0 s; 1,024-rank
hierarchical on rack.yaml <= 0.5 s (``--topology rack``); 16,384-rank ring
<= 15 s; 131,072-rank hierarchical on cluster128k <= 5 min and 8 GiB; ring
growth no worse than N^1.2.  The ring targets are for the plain ring, in one
piece (the ring compared with ASTRA-sim): ``--set ccl.configs.ring.chunks=1``.
By default the tuner may cut a ring of 91 to 1,024 ranks (over 16,384
messages in one piece) into two pieces (ADR 0017), twice the messages to
simulate.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CountingEnvironment, add_set_option, machine_index, peak_rss_mib  # noqa: E402

RANKS = [256, 1024, 4096, 16384, 65536, 131072]
ALGORITHMS = ["ring", "recursive_doubling", "double_binary_tree", "hierarchical"]


def one_point(
    topology: str, overrides: list[str], ranks: int, algorithm: str, backend: str, nbytes: int,
    budget: float,
) -> dict:  # fmt: skip
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist
    from kernbench.ccl.settings import CclSettings, split_overrides, use_settings
    from kernbench.distributed.world import World
    from kernbench.errors import SimulationLimitError
    from kernbench.fabric import Fabric
    from kernbench.fast import FastMachine
    from kernbench.runtime import RuntimeContext, use_context
    from kernbench.topology import load_topology

    start = time.perf_counter()
    machine_overrides, ccl_overrides = split_overrides(overrides)  # ccl.*: as kernbench run
    topo = load_topology(
        topology, ["system.device_level=pe", f"simulation.backend={backend}", *machine_overrides]
    )
    env = CountingEnvironment()
    machine = {"detailed": Fabric, "fast": FastMachine}[backend](topo, env=env)
    ctx = RuntimeContext(topo, timing_only=True, machine=machine)
    use_settings(ctx, CclSettings.from_overrides(ccl_overrides))
    world = World(ctx, ranks)
    world.scheduler.max_wall_s = budget
    window: dict[str, float] = {}

    def body(rank: int) -> None:
        dist.init_process_group()
        tensor = torch.empty(nbytes // 4)
        window["enter"] = time.perf_counter()  # the last rank to start it: all tensors made
        dist.all_reduce(tensor, algorithm=algorithm)
        window["leave"] = time.perf_counter()

    stopped = ""
    try:
        with use_context(ctx):
            world.run(body)
    except SimulationLimitError as exc:
        stopped = str(exc).splitlines()[0]
    wall = time.perf_counter() - start
    record = world.collectives[-1] if world.collectives and not stopped else None
    return {
        "wall_s": wall,
        "collective_s": window.get("leave", time.perf_counter()) - window.get("enter", start),
        "sim_ms": (record.end_ps - record.launch_ps) / 1e9 if record else float("nan"),
        "events": env.events_processed,
        "evaluated": bool(record and record.evaluated),
        "drift": float(record.drift) if record else 0.0,
        "bound": record.bound if record else None,
        "refused": record.refused if record else "",
        "peak_rss_MiB": peak_rss_mib(),
        "stopped": stopped,
    }


def _child(queue, args) -> None:
    try:
        queue.put(one_point(*args))
    except BaseException as exc:  # reported by the parent as the point's outcome
        queue.put({"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]})


def run_point(*args) -> dict:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue, args))
    child.start()
    result = queue.get()
    child.join()
    return result


def main(argv: list[str] | None = None) -> None:
    from kernbench.units import parse_size

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=RANKS)
    parser.add_argument("--algorithms", nargs="+", default=ALGORITHMS)
    parser.add_argument("--backends", nargs="+", default=["fast", "detailed"])
    parser.add_argument("--bytes", default="1GiB")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds per point")
    parser.add_argument("--topology", default="cluster128k")
    add_set_option(parser)
    args = parser.parse_args(argv)
    nbytes = parse_size(args.bytes)
    print(machine_index(), flush=True)
    print(
        f"{'backend':>8} {'algorithm':>19} {'ranks':>7} {'wall(s)':>9} {'in AR(s)':>9} "
        f"{'growth':>7} {'sim(ms)':>10} {'events':>9} {'peakRSS(MiB)':>13}  note",
        flush=True,
    )
    for backend in args.backends:
        for algorithm in args.algorithms:
            previous: tuple[int, float] | None = None
            for ranks in args.ranks:
                r = run_point(
                    args.topology, args.overrides, ranks, algorithm, backend, nbytes, args.budget
                )
                if "error" in r:
                    print(f"{backend:>8} {algorithm:>19} {ranks:>7}  error: {r['error']}")
                    break
                growth = ""
                if previous and r["collective_s"] > 0 and previous[1] > 0:
                    ratio = math.log(r["collective_s"] / previous[1])
                    growth = f"{ratio / math.log(ranks / previous[0]):.2f}"
                how = "step-wide" if r["evaluated"] else "message by message"
                if r["refused"]:
                    how += f" ({r['refused']})"
                if r["drift"]:
                    how += f", drifting (skew {r['drift']:.1f}, approximate)"
                if r.get("bound") is not None:
                    how += f", bounded ({r['bound']:.2%})"
                note = r["stopped"] or how
                print(
                    f"{backend:>8} {algorithm:>19} {ranks:>7} {r['wall_s']:>9.2f} "
                    f"{r['collective_s']:>9.2f} {growth:>7} {r['sim_ms']:>10.3f} "
                    f"{r['events']:>9} {r['peak_rss_MiB']:>13.0f}  {note}",
                    flush=True,
                )
                if r["stopped"]:
                    break
                previous = (ranks, r["collective_s"])


if __name__ == "__main__":
    main()
