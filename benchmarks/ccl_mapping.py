"""What rank placement from the machine graph buys: bytes per link class and time.

Two cases, timing-only, on the detailed backend unless ``--backend fast``:

* ``multi_sip``: multi_sip.yaml with ranks at cube level (64 ranks), all-reduce
  of 16 MiB and 256 MiB with the flat ring, ``multi_cube``, ``hierarchical``
  and ``hierarchical_leader``: the collective's time (first program start to
  last end), bytes over cube links and SIP links, and the bound of the busiest
  HBM port (its bytes over its bandwidth).
* ``rack``: rack.yaml with ranks at PE level (1024 ranks), one 1 GiB ring
  all-reduce (minutes on the detailed backend): how many times per step the
  ring crosses each inter-SIP link in each direction (bytes on the link over
  ``2(p-1)`` chunks), and how close the run comes to the bound of each link
  class (the busiest link of the class: its bytes over its bandwidth).

    python benchmarks/ccl_mapping.py [multi_sip] [rack] [--backend fast]
        [--rack-bytes 1GiB] [--rack-algorithm ring_pipelined] [--rack-chunks 2]
        [--set KEY=VALUE ...]

``--rack-chunks N`` sets the rack configuration's pieces per chunk for the run
(``--set ccl.configs.<name>.chunks=N``): the tuner gives groups above 256 ranks
one piece, and two pieces hide the SIP crossings behind the transfers.
``--set`` overrides the rack machine (e.g. ``system.sips.count=2``,
``sip.cube_mesh.w=1``) for a smaller run of the same shape.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_index  # noqa: E402

import kernbench  # noqa: E402
from kernbench.units import PS_PER_S, parse_size  # noqa: E402


def _all_reduce(nbytes: int, algorithm: str):
    def body() -> None:
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        dist.init_process_group()
        dist.all_reduce(torch.empty(nbytes // 4), algorithm=algorithm)

    return body


def run(topology: str, level: str, algorithm: str, nbytes: int, backend: str, extra: tuple = ()):
    start = time.perf_counter()
    result = kernbench.simulate(
        _all_reduce(nbytes, algorithm),
        topology=topology,
        overrides=[f"system.device_level={level}", f"simulation.backend={backend}", *extra],
        timing_only=True,
    )
    return result, time.perf_counter() - start


def multi_sip(backend: str) -> None:
    print("multi_sip.yaml, cube level (64 ranks): all-reduce")
    print(
        f"{'size':>8} {'algorithm':>19} {'time (us)':>11} {'cube_link GB':>13} "
        f"{'sip_link GB':>12} {'hbm_port bound (us)':>20}"
    )
    for size in ("16MiB", "256MiB"):
        for algorithm in ("ring", "multi_cube", "hierarchical", "hierarchical_leader"):
            result, _ = run("multi_sip", "cube", algorithm, parse_size(size), backend)
            record = result.report["collectives"][-1]
            by_class = result.report["bytes_by_link_class"]
            span_us = (record["end_ps"] - record["start_ps"]) / 1e6
            # The busiest HBM port: its bytes over its bandwidth.
            hbm_us = max(
                carried / edge.bandwidth * 1e6
                for edge, carried in zip(
                    result.context.machine.graph.edges, result.link_bytes, strict=True
                )
                if edge.link_class == "hbm_port"
            )
            print(
                f"{size:>8} {algorithm:>19} {span_us:>11.1f} {by_class['cube_link'] / 1e9:>13.3f} "
                f"{by_class['sip_link'] / 1e9:>12.3f} {hbm_us:>20.1f}"
            )


def rack(
    backend: str, nbytes: int, algorithm: str, chunks: int | None = None, overrides: tuple = ()
) -> None:
    extra = (f"ccl.configs.{algorithm}.chunks={chunks}",) if chunks else ()
    extra += tuple(overrides)
    result, wall = run("rack", "pe", algorithm, nbytes, backend, extra)
    record = result.report["collectives"][-1]
    ranks = result.report["world_size"]
    span_ps = record["end_ps"] - record["start_ps"]
    pieces = f", {chunks} pieces per chunk" if chunks else ""
    print(f"rack.yaml, PE level ({ranks} ranks): {algorithm} all-reduce of {nbytes} bytes{pieces}")
    print(f"wall {wall:.1f} s, collective {span_ps / 1e6:.1f} us")
    print(f"rank order: {record.get('rank_order', 'the user order')}")
    chunk = nbytes // ranks
    edges = result.context.machine.graph.edges
    busiest: dict[str, tuple[float, str, int]] = defaultdict(lambda: (0.0, "", 0))
    crossings = []
    for edge, carried in zip(edges, result.link_bytes, strict=True):
        if edge.link_class == "sip_link":
            crossings.append(carried / (2 * (ranks - 1) * chunk))
        busy_ps = carried * PS_PER_S / edge.bandwidth
        if busy_ps > busiest[edge.link_class][0]:
            busiest[edge.link_class] = (busy_ps, edge.name, carried)
    print(
        f"inter-SIP links: {len(crossings)}, crossings per step per direction: "
        f"min {min(crossings):.3f}, max {max(crossings):.3f}"
    )
    print(f"{'link class':>10} {'busiest link':>34} {'bytes':>14} {'bound (us)':>11} {'of run':>7}")
    for name, (busy_ps, link, carried) in sorted(busiest.items(), key=lambda x: -x[1][0]):
        if carried:
            print(
                f"{name:>10} {link:>34} {carried:>14} {busy_ps / 1e6:>11.1f} "
                f"{busy_ps / span_ps:>7.1%}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=["multi_sip", "rack"])
    parser.add_argument("--backend", default="detailed")
    parser.add_argument("--rack-bytes", default="1GiB")
    parser.add_argument("--rack-algorithm", default="ring", help="a ring configuration")
    parser.add_argument("--rack-chunks", type=int, default=None, help="its pieces per chunk")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], help="rack.yaml KEY=VALUE"
    )
    args = parser.parse_args(argv)
    print(machine_index())
    if "multi_sip" in args.cases:
        multi_sip(args.backend)
    if "rack" in args.cases:
        rack(
            args.backend,
            parse_size(args.rack_bytes),
            args.rack_algorithm,
            args.rack_chunks,
            tuple(args.overrides),
        )


if __name__ == "__main__":
    main()
