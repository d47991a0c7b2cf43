"""Mixed TP x DP collectives: the autotune table and two-step vs fused times.

Runs ``kernbench.torch.distributed.mixed.MixedCommHandler`` in timing-only
mode on one of:

* ``multi_sip`` (default): ``topologies/multi_sip.yaml`` with ranks at cube
  level (``system.device_level=cube``: 4 SIPs x 16 cubes = 64 ranks); TP over
  ``--local-tp`` cubes of a SIP (default all 16), DP over the rest;
* ``fc8`` / ``ring8``: 8 ranks, one per SIP; TP over ``--tp`` neighbouring
  SIPs (default 4), DP over the rest.  On ``fc8`` every pair of ranks has its
  own link, so the fused mode's phases overlap; on ``ring8`` they share links.

Every rank builds the handler, which runs the autotune; the bench prints the
tuned mode per (op, size) and the times the autotune measured for each mode:
from a common start until the last rank finishes, in microseconds.

    python benches/mixed_comm.py [--machine M] [--max-coef N] [--local-tp N] [--tp N]

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

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"
# machine -> (topology, overrides, ranks, ranks per SIP)
MACHINES = {
    "multi_sip": ("multi_sip.yaml", ("system.device_level=cube",), 64, 16),
    "fc8": ("fc8.yaml", (), 8, 1),
    "ring8": ("ring8.yaml", (), 8, 1),
}


def _rank(max_coef: int, local: int, local_tp: int, inter_tp: int) -> dict:
    dist.init_process_group()
    r, ws = dist.get_rank(), dist.get_world_size()
    h = MixedCommHandler(
        r,
        ws,
        r % local,
        local,
        r // local,
        ws // local,
        local_tp_size=local_tp,
        inter_tp_size=inter_tp,
        max_coef=max_coef,
    )
    layout = (h.local_tp_size, h.local_dp_size, h.inter_tp_size, h.inter_dp_size)
    return {"map": h.autotune_map, "times": h.autotune_times, "layout": layout}


def run(
    max_coef: int = 2, machine: str = "multi_sip", local_tp: int = 16, tp: int = 4
) -> tuple[dict, float]:
    """Rank 0's tables and the wall time of the run (``tp``: TP size on fc8 / ring8)."""
    topology, overrides, world, local = MACHINES[machine]
    split = (local_tp, 1) if local > 1 else (1, tp)
    start = time.perf_counter()
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGIES / topology,
        world_size=world,
        overrides=overrides,
        args=(max_coef, local, *split),
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
    parser.add_argument("--machine", choices=sorted(MACHINES), default="multi_sip")
    parser.add_argument("--max-coef", type=int, default=2, help="autotune sizes (default 2)")
    parser.add_argument("--local-tp", type=int, default=16, help="TP cubes per SIP (multi_sip)")
    parser.add_argument("--tp", type=int, default=4, help="TP size (fc8, ring8)")
    args = parser.parse_args(argv)
    tables, wall = run(args.max_coef, args.machine, args.local_tp, args.tp)
    ltp, ldp, itp, idp = tables["layout"]
    _, _, world, _ = MACHINES[args.machine]
    print(f"{world} ranks on {args.machine}: local {ltp} TP x {ldp} DP, inter {itp} TP x {idp} DP")
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
