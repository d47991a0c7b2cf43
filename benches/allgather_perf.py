"""all_gather bandwidth over a range of sizes, as nccl-tests' ``allgather_perf``.

Measures ``dist.all_gather_into_tensor``: every rank contributes ``size / n``
bytes and receives the whole ``size``-byte buffer. For every size it makes
``-w`` warm-up calls, waits on a barrier and times ``-n`` back-to-back calls by
the simulated clock; then it fills the buffers with rank-dependent values,
makes one more call and checks every rank's values against NumPy (not in
timing-only mode, where tensors hold no values). The collective runs with
``--algorithm``: a configuration of ``ccl/ccl.yaml``, an algorithm name, or
``auto`` for the tuner's choice.

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/allgather_perf.py --topology topologies/ring8.yaml
    kernbench run benches/allgather_perf.py --topology topologies/ring8.yaml --timing-only \\
        --csv allgather.csv -- -b 1MiB -e 256MiB -f 4 --algorithm bruck
    kernbench run benches/allgather_perf.py --set system.device_level=cube

Flags: ``-b/--minbytes`` (4KiB), ``-e/--maxbytes`` (16MiB), ``-f/--stepfactor``
(2), ``-d/--datatype`` (float32), ``-n/--iters`` (1), ``-w/--warmup_iters``
(1), ``-c/--check`` (1), ``--algorithm`` (the catalogue's default). Sizes take
``8``, ``4KiB``, ``1MB`` or nccl-tests' ``64M`` (K, M and G are binary). The
default topology has one rank (one SIP), where nothing crosses a link and busbw
is 0; ``--set system.device_level=cube`` makes each of its 16 cubes a rank.

Rank 0 prints one row per size: size (bytes of the gathered (output) buffer),
count (elements), type, redop, the configuration used, time (µs per call),
algbw (size / time, GB/s with GB = 10^9 B), busbw (algbw x (n-1)/n, comparable
to a link's bandwidth) and whether the values were checked; it returns the
rows, which ``--report`` and ``--csv`` record. See :mod:`kernbench.bench.perf`.
"""

from __future__ import annotations

from typing import Any

import kernbench.torch.distributed as dist
from kernbench.bench.perf import BenchArgumentParser, add_perf_arguments, perf_from_args


def main(argv: list[str] | None = None) -> list[dict[str, Any]] | None:
    parser = BenchArgumentParser(description="all_gather bandwidth (nccl-tests style)")
    add_perf_arguments(parser, reduction=False)
    args = parser.parse_args(argv)
    dist.init_process_group()
    return perf_from_args("all_gather", args)
