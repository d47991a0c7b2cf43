"""The Dask executor: a dead point or a killed worker is a failed point; no HTTP server."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from sweep_helpers import hostile_sweep, records_by_label, run_cli


def _listening_ports(process: psutil.Process) -> set[int]:
    return {c.laddr.port for c in process.net_connections("tcp") if c.status == psutil.CONN_LISTEN}


def test_the_local_cluster_serves_no_dashboard() -> None:
    from kernbench.bench.executors import start_local_cluster

    cluster = start_local_cluster(1)
    try:
        assert cluster.dashboard_link == ""
        info = cluster.scheduler_info
        assert info["services"] == {}
        # Every socket listening in the driver and the workers is a Dask comm, nothing else.
        comms = {int(info["address"].rsplit(":", 1)[1])}
        for address, worker in info["workers"].items():
            comms |= {int(address.rsplit(":", 1)[1]), int(worker["nanny"].rsplit(":", 1)[1])}
        me = psutil.Process()
        listening = _listening_ports(me)
        for child in me.children(recursive=True):
            listening |= _listening_ports(child)
        assert 8787 not in listening
        assert listening == comms
    finally:
        cluster.close()


@pytest.mark.parametrize("mode", ["die", "kill-parent"])
def test_dask_records_a_dead_point_or_a_killed_worker_as_failed(tmp_path: Path, mode: str) -> None:
    sweep = hostile_sweep(tmp_path, {"-n": [1, 2, 3], "--mode": ["ok", mode]})
    out = tmp_path / "out"
    result = run_cli(sweep, "-j", "2", "--executor", "dask", "-o", str(out), timeout=180)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "error: 3 of 6 points failed" in result.stderr
    records = records_by_label(out)
    assert len(records) == 6
    for n in (1, 2, 3):
        assert records[f"tiny -n {n} --mode ok"]["status"] == "ok"
        failed = records[f"tiny -n {n} --mode {mode}"]
        assert failed["status"] == "failed"
        if mode == "die":
            assert failed["exit_status"] == 137
            assert f"stderr of point n={n} mode=die" in failed["stderr"]
        else:
            assert "KilledWorker" in failed["error"]
