"""all_to_all bandwidth over a range of sizes, as nccl-tests' ``alltoall_perf``.

Measures ``dist.all_to_all_single``: every rank sends block j of its
``size``-byte buffer to rank j and receives one block from every rank. In
place, the send and receive buffer are one tensor.

It takes nccl-tests' flags with their defaults (``-b 32M -e 32M -f 1 -i 1M
-n 20 -w 5 -c 1 -d float -z 0 -a 1``; ``-h`` lists them all;
:mod:`kernbench.bench.perf_options` says what each means here) and
``--algorithm``: a configuration of ``ccl/ccl.yaml``, an algorithm name, or
``auto`` for the tuner's choice. Sizes are read as nccl-tests reads them:
``8``, ``4K``, ``1.5M``, ``1e6`` (only the unit's first
letter counts; K, M and G are binary).

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/alltoall_perf.py --set system.device_level=cube -- -b 8 -e 128M -f 2
    kernbench run benches/alltoall_perf.py --topology topologies/ring8.yaml --timing-only \\
        --csv alltoall.csv -- -b 1M -e 256M -f 4 --algorithm auto

The default topology has one rank (one SIP), where nothing crosses a link and
busbw is 0; ``--set system.device_level=cube`` makes each of its 16 cubes a
rank.  Rank 0 prints nccl-tests' header, one line per size with the
out-of-place and the in-place time (µs per call), algbw (size / time, GB/s
with GB = 10^9 B), busbw (algbw x (n-1)/n) and ``#wrong`` (elements that
differ from NumPy's answer, summed over ranks; ``N/A`` in timing-only mode),
and the footer; it returns the rows, which ``--report`` and ``--csv`` record.
See :mod:`kernbench.bench.perf`.
"""

from __future__ import annotations

from typing import Any

import kernbench.torch.distributed as dist
from kernbench.bench.perf import BenchArgumentParser, add_perf_arguments, perf_from_args


def main(argv: list[str] | None = None) -> list[dict[str, Any]] | None:
    parser = BenchArgumentParser(description="all_to_all bandwidth (nccl-tests style)")
    add_perf_arguments(parser, reduction=False)
    args = parser.parse_args(argv)
    dist.init_process_group()
    return perf_from_args("all_to_all", args)
