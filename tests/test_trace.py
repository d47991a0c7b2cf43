"""The Chrome/Perfetto trace of a run: valid JSON, nested slices, tracks, counters, span."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.bench.runner import run_script
from kernbench.bench.trace import micros

SCRIPT = """
import kernbench.torch as torch
import kernbench.torch.distributed as dist

def main():
    dist.init_process_group()
    t = torch.ones(1 << 14) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    assert float(t.numpy()[0]) == 10.0
"""


def _trace(tmp_path: Path) -> tuple[dict, dict]:
    script = tmp_path / "all_reduce4.py"
    script.write_text(SCRIPT)
    trace_path, report_path = tmp_path / "trace.json", tmp_path / "report.json"
    run_script(
        str(script),
        topology="multi_sip",
        trace_path=str(trace_path),
        report_path=str(report_path),
        echo=lambda _: None,
    )
    return json.loads(trace_path.read_text()), json.loads(report_path.read_text())


def test_four_rank_all_reduce_trace(tmp_path):
    trace, report = _trace(tmp_path)
    assert trace["displayTimeUnit"] == "ns"
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    counters = [e for e in events if e["ph"] == "C"]
    assert slices and counters
    for e in slices:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0

    # Slices on one track never partially overlap.
    tracks = defaultdict(list)
    for e in slices:
        tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends: list[float] = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start + 1e-9:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-9
            open_ends.append(end)

    # As Perfetto's importer reads them (ts and dur each times 1000, truncated to
    # whole ns), slices on one track still never overlap.
    perfetto = defaultdict(list)
    for e in slices:
        begin = int(e["ts"] * 1000.0)
        perfetto[(e["pid"], e["tid"])].append((begin, begin + int(e["dur"] * 1000.0)))
    for spans in perfetto.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1]
            open_ends.append(end)

    # The trace spans exactly the reported simulated time.
    span_us = max(e["ts"] + e["dur"] for e in slices) - min(e["ts"] for e in slices)
    assert abs(span_us - report["simulated_time_ps"] / 1e6) < 1e-6

    # One process per cube (plus host and interconnect); tracks per engine, IPCQ, link.
    processes = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert {f"sip{s}.cube0" for s in range(4)} <= processes
    assert {"host", "interconnect"} <= processes
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert "pe0 collectives" in threads
    assert any(t.startswith("pe0.vector") for t in threads)  # the reductions
    assert any(t.startswith("pe0.ipcq") for t in threads)  # messages sent
    assert any(t.startswith("link:sip0->sip1") for t in threads)
    assert any(t.startswith("port:sip0.cube0.hbm0") for t in threads)
    assert all(0.0 <= c["args"]["utilisation"] <= 1.0 for c in counters)


def test_same_run_same_trace(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, _ = _trace(tmp_path / "a")
    second, _ = _trace(tmp_path / "b")
    assert first["traceEvents"] == second["traceEvents"]


def _seeded(seed_shift: int) -> float:
    dist.init_process_group()
    t = torch.rand(64) + seed_shift
    dist.all_reduce(t)
    return float(t.sum().item())


def test_reports_carry_a_trace_digest_that_replays():
    import kernbench

    runs = [
        kernbench.simulate(_seeded, topology="multi_sip", seed=seed, args=(0,))
        for seed in (7, 7, 8)
    ]
    digests = [run.report["trace_digest"] for run in runs]
    assert digests[0] == digests[1]  # same seed, same everything
    assert runs[0].returns == runs[1].returns
    assert runs[0].returns != runs[2].returns  # another seed draws other values


def test_the_trace_digest_does_not_depend_on_asking_for_a_trace(tmp_path):
    """Watching the links (--trace) may record rows that end at one picosecond in
    another order; the digest is of what the rows say, so it stays the same."""
    from kernbench.bench.runner import run_script

    args = ["-b", "4KiB", "-e", "64KiB", "-f", "2", "-n", "1", "-w", "1"]
    runs = [
        run_script(
            str(Path(__file__).resolve().parents[1] / "benches" / "allreduce_perf.py"),
            topology="ring8",
            timing_only=True,
            trace_path=trace,
            script_args=args,
            echo=lambda _text: None,
        )
        for trace in (None, str(tmp_path / "trace.json"))
    ]
    rows = [[(r.kind, r.src, r.start_ps, r.end_ps, r.tag) for r in run.trace] for run in runs]
    assert sorted(rows[0]) == sorted(rows[1])
    assert runs[0].report["trace_digest"] == runs[1].report["trace_digest"]


def test_a_collectives_slices_carry_its_bytes_as_the_report_gives_them(tmp_path):
    trace, report = _trace(tmp_path)
    (call,) = report["collectives"]
    slices = [e for e in trace["traceEvents"] if e.get("cat") == "collective"]
    assert len(slices) == 4 and call["bytes"] == 4 * (1 << 14)
    assert {e["args"]["bytes"] for e in slices} == {call["bytes"]}


@pytest.mark.parametrize("ps", [0, 999, 1000, 1001000, 1003000, 123456789, 10**15, 2**62])
def test_micros_read_as_whole_ns_by_a_truncating_viewer(ps):
    value = micros(ps)
    assert int(value * 1000.0) == ps // 1000
    assert abs(value - ps / 1e6) <= 4 * math.ulp(ps / 1e6)


def test_micros_nudges_exact_nanoseconds_that_floats_store_short():
    # 1001 ns is stored just below 1.001 us: read back times 1000 it truncates to 1000.
    assert int((1_001_000 / 1e6) * 1000.0) == 1000
    assert micros(1_001_000) > 1_001_000 / 1e6
