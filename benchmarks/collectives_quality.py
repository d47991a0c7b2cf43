"""How well the cost model predicts the simulation: machine x op x configuration x size.

For every catalogue configuration that can run an op on a machine's group, the op
is simulated (timing-only, detailed backend, the second of two calls, launch to
end, as ``kernbench tune`` measures it) and predicted
(:func:`kernbench.ccl.tuner.predict_detail`).  Each row prints the simulated
time, the bandwidth bound of the links the op uses (its bytes on its busiest
link or memory port over that link's bandwidth), the prediction and its error,
the pieces the pipelined algorithms cut their data into, and the bytes the op
puts on each link class.

    python benchmarks/collectives_quality.py [--machines ring8 fc8 ...]
        [--ops all_reduce ...] [--configs ring ...] [--sizes 4KiB 1MiB ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_index  # noqa: E402

import kernbench  # noqa: E402
import kernbench.torch as torch  # noqa: E402
import kernbench.torch.distributed as dist  # noqa: E402
from kernbench.ccl.tuner import candidates, predict_detail  # noqa: E402
from kernbench.runtime import RuntimeContext  # noqa: E402
from kernbench.topology import load_topology  # noqa: E402
from kernbench.units import parse_size  # noqa: E402

# name: (topology, overrides, world size)
MACHINES = {
    "ring8": ("ring8", [], 8),
    "fc8": ("fc8", [], 8),
    "multi_sip_cube": ("multi_sip", ["system.device_level=cube"], 32),
    "default_cube": ("default", ["system.device_level=cube"], 16),
    "default_pe": ("default", ["system.device_level=pe"], 16),
}
OPS = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "all_to_all",
)
SIZES = ("4KiB", "64KiB", "1MiB", "16MiB", "256MiB")


def _body(op: str, config: str, sizes: Sequence[int]) -> None:
    """Two calls of ``op`` per size (n bytes: the op's whole buffer, as the tuner sees it)."""
    dist.init_process_group()
    p, rank = dist.get_world_size(), dist.get_rank()
    for nbytes in sizes:
        n = nbytes // 4
        whole, other, part = torch.empty(n), torch.empty(n), torch.empty(n // p)
        blocks = [torch.empty(n // p) for _ in range(p)] if rank == 0 else None
        for _ in range(2):
            if op == "all_reduce":
                dist.all_reduce(whole, algorithm=config)
            elif op == "reduce_scatter":
                dist.reduce_scatter_tensor(part, whole, algorithm=config)
            elif op == "all_gather":
                dist.all_gather_into_tensor(whole, part, algorithm=config)
            elif op == "broadcast":
                dist.broadcast(whole, src=0, algorithm=config)
            elif op == "reduce":
                dist.reduce(whole, dst=0, algorithm=config)
            elif op == "gather":
                dist.gather(part, gather_list=blocks, dst=0, algorithm=config)
            elif op == "scatter":
                dist.scatter(part, scatter_list=blocks, src=0, algorithm=config)
            else:
                dist.all_to_all_single(other, whole, algorithm=config)


def group_sizes(sizes: Sequence[int], ranks: int) -> list[int]:
    """``sizes`` cut to whole float32 elements per rank's block."""
    unit = 4 * ranks * ranks
    return [max(unit, size // unit * unit) for size in sizes]


def simulated_ps(machine: str, op: str, config: str, sizes: Sequence[int]) -> list[int]:
    """Picoseconds of the second call at each size, launch to end."""
    topology, overrides, ranks = MACHINES[machine]
    run = kernbench.simulate(
        _body,
        topology=topology,
        timing_only=True,
        world_size=ranks,
        overrides=overrides,
        args=(op, config, tuple(sizes)),
    )
    records = run.report["collectives"][1::2]
    return [c["end_ps"] - c["launch_ps"] for c in records]


def probe(machine: str) -> tuple[RuntimeContext, list[str]]:
    """A context of the machine and the PEs of its group's ranks."""
    topology, overrides, ranks = MACHINES[machine]
    ctx = RuntimeContext(load_topology(topology, overrides), timing_only=True)
    return ctx, [ctx.device_pe(rank) for rank in range(ranks)]


def rows(machine: str, ops: Sequence[str], configs: Sequence[str] | None, sizes: Sequence[int]):
    """One dict per (op, configuration, size): simulated, bound, predicted, error, bytes."""
    ctx, pes = probe(machine)
    classes = {e.name: e.link_class for e in ctx.machine.graph.edges}
    sizes = group_sizes(sizes, len(pes))
    for op in ops:
        for name, config in candidates(ctx, op, pes):
            if configs and name not in configs:
                continue
            measured = simulated_ps(machine, op, name, sizes)
            for nbytes, simulated in zip(sizes, measured, strict=True):
                predicted = predict_detail(ctx, op, config, pes, nbytes)
                by_class: dict[str, float] = defaultdict(float)
                for link, carried in predicted.link_bytes.items():
                    by_class[classes.get(link, "?")] += carried
                yield {
                    "machine": machine,
                    "op": op,
                    "config": name,
                    "bytes": nbytes,
                    "simulated_us": simulated / 1e6,
                    "bound_us": predicted.bound * 1e6,
                    "predicted_us": predicted.seconds * 1e6,
                    "error": predicted.seconds * 1e12 / simulated - 1,
                    "pieces": predicted.pieces,
                    "bytes_by_class": dict(sorted(by_class.items())),
                }


def size_name(nbytes: int) -> str:
    """A size as the ladder writes it (64KiB, 16MiB)."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes}B"


def _classes(by_class: dict[str, float]) -> str:
    return " ".join(f"{k}={v / (1 << 20):.3g}M" for k, v in by_class.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", nargs="+", default=list(MACHINES), choices=list(MACHINES))
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=list(OPS))
    parser.add_argument("--configs", nargs="+", default=None)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES))
    parser.add_argument("--within", type=float, default=0.10, help="error bound counted")
    args = parser.parse_args(argv)
    sizes = [parse_size(s) for s in args.sizes]
    print(machine_index(), flush=True)
    header = (
        f"{'machine':>14} {'op':>14} {'config':>18} {'size':>8} {'sim us':>11} "
        f"{'bound us':>11} {'pred us':>11} {'error':>7} {'pcs':>4}  bytes by link class"
    )
    print(header, flush=True)
    start = time.perf_counter()
    total = outside = 0
    worst = (0.0, "")
    for machine in args.machines:
        for row in rows(machine, args.ops, args.configs, sizes):
            total += 1
            error = row["error"]
            if abs(error) > args.within:
                outside += 1
            where = f"{machine} {row['op']} {row['config']} {size_name(row['bytes'])}"
            if abs(error) > abs(worst[0]):
                worst = (error, where)
            print(
                f"{machine:>14} {row['op']:>14} {row['config']:>18} {size_name(row['bytes']):>8} "
                f"{row['simulated_us']:>11.2f} {row['bound_us']:>11.2f} "
                f"{row['predicted_us']:>11.2f} {error:>+7.1%} {row['pieces']:>4}  "
                f"{_classes(row['bytes_by_class'])}",
                flush=True,
            )
    print(
        f"{total} points, {outside} outside {args.within:.0%}, worst {worst[0]:+.1%} ({worst[1]}); "
        f"{time.perf_counter() - start:.0f} s",
        flush=True,
    )


if __name__ == "__main__":
    main()
