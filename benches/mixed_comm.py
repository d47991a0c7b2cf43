"""Mixed TP x DP collectives on 64 cube ranks: the autotune table and two-step vs fused times.

Runs ``kernbench.torch.distributed.mixed.MixedCommHandler`` on ``topologies/multi_sip.yaml``
with ranks at cube level (``system.device_level=cube``: 4 SIPs x 16 cubes =
64 ranks), in timing-only mode.  Every rank builds the handler with the
default split (TP over the 16 cubes of a SIP, DP over the 4 SIPs), which runs
the autotune; the bench prints the tuned mode per (op, size) and the times the
autotune measured for each mode: from a common start until the last rank
finishes, in microseconds.

    python benches/mixed_comm.py [--max-coef N] [--steps N] [--local-tp N]

``--max-coef`` sizes run 8 KiB, 16 KiB, ... per rank (the default keeps the
run short; every extra size costs more than all the previous ones together).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import kernbench
import kernbench.torch.distributed as dist
from kernbench.torch.distributed.mixed import AUTOTUNE_BASE_BYTES, MODES, MixedCommHandler

__all__ = ["main", "run"]

TOPOLOGY = Path(__file__).resolve().parents[1] / "topologies" / "multi_sip.yaml"
OVERRIDES = ("system.device_level=cube",)
LOCAL = 16  # cubes (ranks) per SIP


def _rank(max_coef: int, steps: int, local_tp: int) -> dict:
    dist.init_process_group()
    r, ws = dist.get_rank(), dist.get_world_size()
    h = MixedCommHandler(
        r,
        ws,
        r % LOCAL,
        LOCAL,
        r // LOCAL,
        ws // LOCAL,
        local_tp_size=local_tp,
        min_num_steps=steps,
        max_coef=max_coef,
    )
    layout = (h.local_tp_size, h.local_dp_size, h.inter_tp_size, h.inter_dp_size)
    return {"map": h.autotune_map, "times": h.autotune_times, "layout": layout}


def run(max_coef: int = 2, steps: int = 4, local_tp: int = LOCAL) -> tuple[dict, float]:
    """Rank 0's tables and the wall time of the run."""
    start = time.perf_counter()
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGY,
        world_size=64,
        overrides=OVERRIDES,
        args=(max_coef, steps, local_tp),
        timing_only=True,
    )
    first = result.returns[0]
    assert all(r["map"] == first["map"] for r in result.returns), "ranks tuned differently"
    return first, time.perf_counter() - start


def _size(i: int) -> str:
    kib = (AUTOTUNE_BASE_BYTES << i) // 1024
    return f"{kib} KiB" if kib < 1024 else f"{kib // 1024} MiB"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-coef", type=int, default=2, help="autotune sizes (default 2)")
    parser.add_argument("--steps", type=int, default=4, help="fused pieces (min_num_steps)")
    parser.add_argument("--local-tp", type=int, default=LOCAL, help="TP ranks per SIP")
    args = parser.parse_args(argv)
    tables, wall = run(args.max_coef, args.steps, args.local_tp)
    ltp, ldp, itp, idp = tables["layout"]
    print(
        f"64 cube ranks on multi_sip: local {ltp} TP x {ldp} DP, inter {itp} TP x {idp} DP; "
        f"fused pieces: {args.steps}"
    )
    sizes = [_size(i) for i in range(args.max_coef)]
    width = max(len(op) for op in tables["map"]) if tables["map"] else 10
    print("\nautotune table (tuned mode per input size per rank)")
    print(f"{'op':<{width}}  " + "  ".join(f"{s:>9}" for s in sizes))
    for op, modes in tables["map"].items():
        print(f"{op:<{width}}  " + "  ".join(f"{m:>9}" for m in modes))
    print("\ntwo-step vs fused (us, common start to last rank done)")
    print(f"{'op':<{width}}  {'size':>8}  " + "  ".join(f"{m:>9}" for m in MODES) + "  fused/two")
    for op, rows in tables["times"].items():
        for size, row in zip(sizes, rows, strict=True):
            times = "  ".join(f"{row[m] / 1e6:9.2f}" for m in MODES)
            print(f"{op:<{width}}  {size:>8}  {times}  {row['fused'] / row['two_step']:9.2f}")
    print(f"\nwall time {wall:.1f} s")


if __name__ == "__main__":
    main()
