"""all_reduce bandwidth over a range of sizes, as nccl-tests' ``allreduce_perf``.

Measures ``dist.all_reduce`` of one ``size``-byte buffer on every rank.
In place it reduces the receive buffer itself; out of place it first copies
the send buffer into it (``recv.copy_(send)``: torch's all_reduce has no
out-of-place form), only before the checked call: NCCL's out-of-place call
moves the same bytes, so both columns take the same time.

It takes nccl-tests' flags with their defaults (``-i 1M -n 20 -w 5 -c 1 -d
float -o sum -z 0 -a 1``; ``-h`` lists them all;
:mod:`kernbench.bench.perf_options` says what each means here) and
``--algorithm``: a configuration of ``ccl/ccl.yaml``, an algorithm name, or
``auto`` for the tuner's choice. Sizes are read as nccl-tests reads them:
``8``, ``4K``, ``1.5M``, ``1e6`` (only the unit's first
letter counts; K, M and G are binary).  The sizes default to ``-b 4K -e
4M -f 2``, not nccl-tests' single 32M: this bench with no flags is the main
job, an all-reduce sweep over sizes that checks its values in about a
minute and a half of CPU on the 16 cubes of the default machine (32M alone
takes several minutes there).

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/allreduce_perf.py --set system.device_level=cube -- -b 8 -e 128M -f 2
    kernbench run benches/allreduce_perf.py --topology topologies/ring8.yaml --timing-only \\
        --csv allreduce.csv -- -b 1M -e 256M -f 4 --algorithm ring_pipelined

The default topology has one rank (one SIP), where nothing crosses a link and
busbw is 0; ``--set system.device_level=cube`` makes each of its 16 cubes a
rank.  Rank 0 prints nccl-tests' header, one line per size with the
out-of-place and the in-place time (µs per call), algbw (size / time, GB/s
with GB = 10^9 B), busbw (algbw x 2(n-1)/n) and ``#wrong`` (elements that
differ from NumPy's answer, summed over ranks; ``N/A`` in timing-only mode),
and the footer; it returns the rows, which ``--report`` and ``--csv`` record.
See :mod:`kernbench.bench.perf`.
"""

from __future__ import annotations

from typing import Any

import kernbench.torch.distributed as dist
from kernbench.bench.perf import BenchArgumentParser, add_perf_arguments, perf_from_args


def main(argv: list[str] | None = None) -> list[dict[str, Any]] | None:
    parser = BenchArgumentParser(description="all_reduce bandwidth (nccl-tests style)")
    add_perf_arguments(parser, reduction=True, minbytes="4K", maxbytes="4M", stepfactor=2)
    args = parser.parse_args(argv)
    dist.init_process_group()
    return perf_from_args("all_reduce", args)
