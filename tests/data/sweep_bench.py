"""A small all-reduce bench for the sweep tests, shaped like benches/allreduce_perf.py.

``-b``/``-e`` are the smallest and largest message (``-e`` defaults to ``-b``:
one size per run), ``-f`` the step factor, ``--algorithm`` the all-reduce
configuration (default: the run's, e.g. ``--set ccl.all_reduce=ring``) and
``--delay`` wall-clock seconds to sleep first (so that a test can interrupt a
sweep half-way).  Returns one result row per size.
"""

from __future__ import annotations

import argparse
import time

import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.settings import ccl_settings
from kernbench.runtime import current_context
from kernbench.units import parse_size


def main() -> list[dict]:
    parser = argparse.ArgumentParser()
    parser.add_argument("-b", "--minbytes", default="4KiB")
    parser.add_argument("-e", "--maxbytes", default=None)
    parser.add_argument("-f", "--stepfactor", type=int, default=2)
    parser.add_argument("--algorithm", default=None)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    dist.init_process_group()
    if dist.get_rank() == 0:  # ranks take turns in one thread: one sleep per point
        time.sleep(args.delay)
    p = dist.get_world_size()
    algorithm = args.algorithm or ccl_settings(current_context()).choice("all_reduce")
    rows = []
    size, largest = parse_size(args.minbytes), parse_size(args.maxbytes or args.minbytes)
    while size <= largest:
        n = max(p, size // 4 // p * p)
        tensor = torch.empty(n)
        dist.all_reduce(tensor, algorithm=args.algorithm)  # installs the plan
        start = current_context().now
        dist.all_reduce(tensor, algorithm=args.algorithm)
        dist.barrier()
        time_ps = current_context().now - start
        algbw = n * 4 / (time_ps / 1e12) / 1e9
        rows.append(
            {
                "op": "all_reduce",
                "size_B": n * 4,
                "algorithm": algorithm,
                "time_us": time_ps / 1e6,
                "algbw_GBps": algbw,
                "busbw_GBps": algbw * 2 * (p - 1) / p,
                "checked": False,
            }
        )
        size *= args.stepfactor
    return rows
