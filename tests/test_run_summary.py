"""The run summary: the collectives' own time first, the host's work apart, sizes readable."""

from __future__ import annotations

import types
from pathlib import Path

from kernbench.bench.runner import format_run_summary, run_script
from kernbench.bench.simulate import collective_time_ps
from kernbench.units import format_size_iec

BENCHES = Path(__file__).resolve().parents[1] / "benches"


def _call(launch: int, end: int | None) -> types.SimpleNamespace:
    return types.SimpleNamespace(launch_ps=launch, end_ps=end)


def test_collective_time_counts_overlaps_once() -> None:
    calls = [_call(0, 10), _call(5, 20), _call(30, 40), _call(32, 35), _call(50, None)]
    assert collective_time_ps(calls) == 20 + 10
    assert collective_time_ps([]) == 0


def test_sizes_read_the_same_way() -> None:
    sizes = [512, 1536, 218_628_096, 12_582_942 * 1024, int(401.6 * 2**30), 5 * 2**40]
    assert [format_size_iec(s) for s in sizes] == [
        "512B", "1.500KiB", "208.5MiB", "12.00GiB", "401.6GiB", "5.000TiB"
    ]  # fmt: skip


def _component(name: str, busy_ps: int, nbytes: int) -> dict:
    return {"name": name, "class": "x", "bytes": nbytes, "busy_ps": busy_ps, "utilisation": 0}


def test_summary_leads_with_the_collectives() -> None:
    report = {
        "topology": "t",
        "world_size": 2,
        "timing_only": False,
        "collectives": [{"op": "all_reduce"}] * 3 + [{"op": "barrier"}],
        "collective_time_ps": 6_000_000,
        "bytes_by_link_class": {"cube_link": 12_582_942 * 1024, "host_link": 4 * 2**30},
        "busiest_component": _component("link:host->sip0", 5_000_000, 4 * 2**30),
        "busiest_fabric_component": _component("link:a->b", 4_000_000, 2**30),
        "busiest_host_link": _component("link:host->sip0", 5_000_000, 4 * 2**30),
    }
    result = types.SimpleNamespace(elapsed_ps=10_000_000, per_rank_ps=[10_000_000] * 2,
                                   report=report)  # fmt: skip
    assert format_run_summary(result).splitlines() == [
        "collectives: 6us in flight (60.0% of the run) over 4 calls: all_reduce 3, barrier 1",
        "  busiest link outside the host links: link:a->b busy 4us (40.0% of the run)",
        "simulated time: 10us (10000000 ps) on t, 2 ranks",
        "per-rank time: 10us, 10us",
        "outside collectives: 4us (40.0% of the run: host fills and reads, value checks, kernels)",
        "  busiest host link: link:host->sip0 busy 5us (50.0% of the run), 4.000GiB moved",
        "bytes moved per link class: cube_link 12.00GiB, host_link 4.000GiB",
        "busiest component of the whole run: link:host->sip0 busy 5us (50.0% of the run)",
    ]


def test_a_perf_run_reports_its_collective_time() -> None:
    lines: list[str] = []
    result = run_script(str(BENCHES / "allreduce_perf.py"), topology="ring8", timing_only=True,
                        script_args=["-b", "1K", "-e", "1K", "-n", "2", "-w", "1"],
                        echo=lines.append)  # fmt: skip
    report = result.report
    assert 0 < report["collective_time_ps"] < report["simulated_time_ps"]
    summary = lines[0].splitlines()
    assert (
        summary[0].startswith("collectives: ") and "all_reduce 7, barrier 1" in summary[0]
    )  # 1 warm-up, 2 x (1 + 2)
    assert report["busiest_host_link"]["name"].startswith("link:host->")
    assert not report["busiest_fabric_component"]["name"].startswith("link:host")
    assert any(line.startswith("outside collectives: ") for line in summary)
