"""``kernbench run`` on distributed scripts: summary, report, trace, exit codes.

Every case runs the command line in a fresh interpreter, as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = str(ROOT / "benches" / "dist_tutorial.py")
MULTI_SIP = "multi_sip"
DEFAULT = "default"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def kernbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernbench.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=120,
    )


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


# --------------------------------------------------------------------------- the tutorial
def test_run_tutorial_prints_simulated_time() -> None:
    result = kernbench("run", TUTORIAL, "--topology", MULTI_SIP)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "simulated time" in out
    assert "on multi_sip, 4 ranks" in out
    assert "per-rank time" in out and "busiest component" in out
    for rank in range(4):
        assert f"Rank {rank} has data 10.0 after ring all-reduce" in out
    assert "Rank 1 has data 2.0 after all_reduce on a group" in out


def test_run_tutorial_at_cube_level_in_timing_only_mode() -> None:
    result = kernbench(
        "run",
        TUTORIAL,
        "--topology",
        DEFAULT,
        "--set",
        "system.device_level=cube",
        "--world-size",
        "8",
        "--timing-only",
    )
    assert result.returncode == 0, result.stderr
    assert "on default, 8 ranks (timing-only)" in result.stdout


def test_report_json(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.json"
    result = kernbench("run", TUTORIAL, "--topology", MULTI_SIP, "--report", str(out))
    assert result.returncode == 0, result.stderr
    assert f"report: {out}" in result.stdout
    report = json.loads(out.read_text())
    assert report["world_size"] == 4
    assert report["simulated_time_ps"] > 0
    assert len(report["per_rank_time_ps"]) == 4
    assert max(report["per_rank_time_ps"]) == report["simulated_time_ps"]
    assert all(0 < t <= report["simulated_time_ps"] for t in report["per_rank_time_ps"])
    by_class = report["bytes_by_link_class"]
    assert by_class and all(isinstance(v, int) and v > 0 for v in by_class.values())
    assert "sip_link" in by_class  # the ranks are SIPs: their messages cross SIP links
    busiest = report["busiest_component"]
    assert {"name", "class", "bytes", "busy_ps", "utilisation"} <= set(busiest)
    assert busiest["class"] in by_class
    assert 0 < busiest["utilisation"] <= 1
    assert report["metadata"]["script"] == TUTORIAL


def _partial_overlaps(events: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of X events on one (pid, tid) that overlap without one containing the other."""
    eps = 1e-6  # one picosecond, in microseconds (ts and dur are floats)
    lanes: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for event in events:
        lanes[(event["pid"], event["tid"])].append(event)
    bad = []
    for lane in lanes.values():
        lane.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict] = []
        for event in lane:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= event["ts"] + eps:
                stack.pop()
            if stack and event["ts"] + event["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + eps:
                bad.append((stack[-1], event))
            stack.append(event)
    return bad


def test_partial_overlap_check_catches_overlaps() -> None:
    a = {"pid": 1, "tid": 1, "ts": 0.0, "dur": 2.0}
    assert _partial_overlaps([a, {"pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}])
    assert not _partial_overlaps([a, {"pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}])
    assert not _partial_overlaps([a, {"pid": 1, "tid": 2, "ts": 1.0, "dur": 2.0}])


@pytest.mark.parametrize(
    "extra",
    [
        ("--topology", MULTI_SIP),
        ("--topology", DEFAULT, "--set", "system.device_level=cube", "--world-size", "8"),
    ],
    ids=["multi_sip", "cube-ws8"],
)
def test_trace_is_chrome_json_without_partial_overlaps(tmp_path: Path, extra) -> None:
    out = tmp_path / "trace.json"
    result = kernbench("run", TUTORIAL, *extra, "--trace", str(out))
    assert result.returncode == 0, result.stderr
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert slices
    for event in slices:
        assert {"name", "ts", "dur", "pid", "tid"} <= set(event)
        assert event["dur"] >= 0
    assert {e["cat"] for e in slices} >= {"collective"}
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in slices} <= named
    assert _partial_overlaps(slices) == []


def test_tutorial_run_directly_uses_multiprocessing() -> None:
    result = subprocess.run(
        [sys.executable, TUTORIAL],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(KERNBENCH_TOPOLOGY=MULTI_SIP),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "simulated time" in out and "on 4 ranks" in out
    for rank in range(4):
        assert f"Rank {rank} has data 1.0 after blocking p2p" in out
        assert f"Rank {rank} has data 10.0 after ring all-reduce" in out


# ------------------------------------------------------------------------------- failures
RAISES = """\
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist


    def check_payload(rank):
        raise ValueError(f"payload of rank {rank} is wrong")


    def run(rank, world_size):
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        t = torch.ones(8)
        dist.all_reduce(t)
        if rank == 1:
            check_payload(rank)
        dist.barrier()
"""


def test_exception_in_rank_1_is_one_line_naming_rank_exception_and_script_line(
    tmp_path: Path,
) -> None:
    path = script(tmp_path, "raises.py", RAISES)
    result = kernbench("run", path, "--topology", MULTI_SIP)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: rank 1 raised ValueError: payload of rank 1 is wrong "
        f"(at {path}:6 in check_payload; KERNBENCH_TRACEBACK=1 shows the traceback)"
    ]
    assert "simulated time" not in result.stdout


def test_exception_in_rank_1_shows_the_original_traceback_when_asked(tmp_path: Path) -> None:
    path = script(tmp_path, "raises.py", RAISES)
    for asked in (
        subprocess.run(
            [sys.executable, "-m", "kernbench.cli", "run", path, "--topology", MULTI_SIP],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=_env(KERNBENCH_TRACEBACK="1"),
            timeout=120,
        ),
        kernbench("--traceback", "run", path, "--topology", MULTI_SIP),
    ):
        assert asked.returncode == 2
        err = asked.stderr
        assert "Traceback (most recent call last)" in err
        assert "raises.py" in err and "check_payload" in err
        assert "ValueError: payload of rank 1 is wrong\n" in err
        assert err.rstrip().splitlines()[-1] == (
            f"error: rank 1 raised ValueError: payload of rank 1 is wrong "
            f"(at {path}:6 in check_payload)"
        )


DEADLOCK = """\
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist


    def run(rank, world_size):
        dist.init_process_group()
        if rank == 3:
            return  # leaves the others in the all_reduce
        dist.all_reduce(torch.ones(8))
"""


def test_deadlock_exits_2_listing_blocked_ranks_without_traceback(tmp_path: Path) -> None:
    path = script(tmp_path, "deadlock.py", DEADLOCK)
    result = kernbench("run", path, "--topology", MULTI_SIP)
    assert result.returncode == 2
    err = result.stderr
    assert err.startswith("error: deadlock")
    for rank in (0, 1, 2):
        assert f"rank {rank} waits for all_reduce" in err
    assert "rank 3 waits" not in err
    assert "ranks that already returned: [3]" in err
    assert "Traceback" not in err


MISMATCH = """\
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist


    def run(rank, world_size):
        dist.init_process_group()
        if rank == 0:
            dist.broadcast(torch.ones(8), src=0)
        else:
            dist.all_reduce(torch.ones(8))
"""


def test_mismatched_collectives_exit_2_without_traceback(tmp_path: Path) -> None:
    path = script(tmp_path, "mismatch.py", MISMATCH)
    result = kernbench("run", path, "--topology", MULTI_SIP, "--world-size", "2")
    assert result.returncode == 2
    assert "does not match across ranks" in result.stderr
    assert "rank 0 called broadcast" in result.stderr
    assert "rank 1 called all_reduce" in result.stderr
    assert "Traceback" not in result.stderr


def test_world_size_too_large_exits_2(tmp_path: Path) -> None:
    result = kernbench("run", TUTORIAL, "--topology", MULTI_SIP, "--world-size", "5")
    assert result.returncode == 2
    assert "has 4 devices" in result.stderr
    assert "Traceback" not in result.stderr


MAIN = """\
    import kernbench.torch.distributed as dist


    def main():
        dist.init_process_group()
        print(f"main on rank {dist.get_rank()} of {dist.get_world_size()}")
        dist.barrier()
"""


def test_script_with_main_runs_once_per_rank(tmp_path: Path) -> None:
    path = script(tmp_path, "with_main.py", MAIN)
    result = kernbench("run", path, "--topology", MULTI_SIP, "--world-size", "3")
    assert result.returncode == 0, result.stderr
    for rank in range(3):
        assert f"main on rank {rank} of 3" in result.stdout
    assert "3 ranks" in result.stdout


# --------------------------------------------------------------------------- torchrun scripts
TORCHRUN_SCRIPT = """
    import os
    import sys
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    MODULE_RANK = os.environ["RANK"]  # module level runs in each rank, as under torchrun

    def train():
        rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
        assert MODULE_RANK == os.environ["RANK"] and local == rank
        torch.cuda.set_device(local)
        dist.init_process_group("nccl")
        t = torch.ones(8) * (rank + 1)
        dist.all_reduce(t)
        print(f"rank {rank} of {dist.get_world_size()}: {t.tolist()[0]:g} {sys.argv[1:]}")
        dist.destroy_process_group()

    if __name__ == "__main__":
        train()
"""


@pytest.mark.parametrize("flag", ["--nproc-per-node", "--nproc_per_node"])
def test_a_torchrun_script_runs_once_per_rank_with_nproc_per_node(tmp_path, flag) -> None:
    path = script(tmp_path, "train.py", TORCHRUN_SCRIPT)
    result = kernbench("run", flag, "4", path, "--topology", "ring8", "--", "--lr", "1")
    assert result.returncode == 0, result.stderr
    lines = sorted(line for line in result.stdout.splitlines() if line.startswith("rank "))
    assert lines == [f"rank {r} of 4: 10 ['--lr', '1']" for r in range(4)]
    assert "simulated time:" in result.stdout and "4 ranks" in result.stdout


def test_a_torchrun_script_run_once_says_to_use_nproc_per_node(tmp_path) -> None:
    path = script(tmp_path, "train.py", TORCHRUN_SCRIPT)
    result = kernbench("run", path, "--topology", "ring8")
    assert result.returncode != 0
    assert "KeyError: 'RANK': $RANK is set in each rank" in result.stderr
    assert "kernbench run --nproc-per-node N SCRIPT" in result.stderr
    assert "Traceback" not in result.stderr
    bare = script(
        tmp_path,
        "bare.py",
        """
        import kernbench.torch.distributed as dist
        if __name__ == "__main__":
            dist.init_process_group()
        """,
    )
    result = kernbench("run", bare, "--topology", "ring8")
    assert result.returncode != 0
    assert "no distributed run is active" in result.stderr
    assert "--nproc-per-node N SCRIPT" in result.stderr


def test_nproc_per_node_and_another_world_size_are_refused(tmp_path) -> None:
    path = script(tmp_path, "train.py", TORCHRUN_SCRIPT)
    result = kernbench("run", "--nproc-per-node", "4", "--world-size", "3", path)
    assert result.returncode == 2
    assert "--world-size 3 and --nproc-per-node 4 disagree" in result.stderr


def test_a_torchrun_script_importing_torch_says_what_to_import_instead(tmp_path) -> None:
    path = script(tmp_path, "train.py", "import torch\nif __name__ == '__main__':\n    pass\n")
    result = kernbench(
        "run", "--no-mirror-imports", "--nproc-per-node", "2", path, "--topology", "ring8"
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "No module named 'torch'" in result.stderr
    assert "`import kernbench.torch as torch`" in result.stderr


def test_starting_ranks_inside_a_rank_is_refused(tmp_path) -> None:
    """With --nproc-per-node the script already runs once per rank; an mp.spawn in it
    ran nested worlds (every collective twice, twice the time)."""
    path = script(
        tmp_path,
        "spawn2.py",
        """
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist
        import kernbench.torch.multiprocessing as mp

        def f(rank):
            dist.init_process_group(rank=rank, world_size=2)
            dist.all_reduce(torch.ones(4))

        if __name__ == "__main__":
            mp.spawn(f, nprocs=2)
        """,
    )
    result = kernbench("run", "--nproc-per-node", "2", path, "--topology", "ring8")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "(or mp.spawn) in rank 0: ranks start ranks only from the script's __main__" in (
        result.stderr
    )
    assert kernbench("run", path, "--topology", "ring8").returncode == 0  # as it is meant
