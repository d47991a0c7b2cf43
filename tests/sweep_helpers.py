"""Shared pieces of the sweep tests: a bench that can misbehave on request, sweep files, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

# A bench that returns one row, or misbehaves the way --mode says: exits, dies,
# segfaults, sleeps.  It prints to stdout and stderr so a test can find both tails.
HOSTILE_BENCH = '''\
"""A bench for the sweep tests: one row, or the failure --mode asks for."""

import argparse
import os
import signal
import sys
import time

import kernbench.torch.distributed as dist


def main():
    parser = argparse.ArgumentParser(prog="hostile")
    parser.add_argument("-n", type=int, default=1)
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    dist.init_process_group()
    if dist.get_rank() == 0:
        print(f"rank 0 of point n={args.n} mode={args.mode}", flush=True)
        print(f"stderr of point n={args.n} mode={args.mode}", file=sys.stderr, flush=True)
        time.sleep(args.delay)
        if args.mode == "die":
            os._exit(137)
        if args.mode == "segv":
            import ctypes

            ctypes.string_at(0)
        if args.mode == "exit":
            sys.exit(3)
        if args.mode == "raise":
            raise RuntimeError("the bench gave up")
        if args.mode == "kill-parent":
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(30)
        if args.mode == "stubborn":  # swallows the wall-time stop, for --delay seconds
            end = time.monotonic() + 30
            while time.monotonic() < end:
                try:
                    time.sleep(0.1)
                except BaseException:
                    pass
    dist.barrier()
    return [{"n": args.n, "mode": args.mode}]
'''


def write_bench(directory: Path, name: str = "hostile.py", text: str = HOSTILE_BENCH) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def copy_topology(directory: Path, name: str = "tiny") -> Path:
    """A topology (and what it extends) copied into ``directory``, so a test may edit it."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "topologies" / "default.yaml", directory / "default.yaml")
    if name != "default":
        shutil.copy(REPO / "topologies" / f"{name}.yaml", directory / f"{name}.yaml")
    return directory / f"{name}.yaml"


def write_sweep(directory: Path, document: dict, name: str = "sweep.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def hostile_sweep(directory: Path, args: dict, **extra) -> Path:
    """A sweep of the hostile bench on the tiny machine."""
    write_bench(directory)
    copy_topology(directory)
    document = {"bench": "hostile.py", "topologies": ["tiny.yaml"], "args": args, **extra}
    return write_sweep(directory, document)


def interruptible() -> None:
    """``preexec_fn`` of a child that a test interrupts with SIGINT: the default handling,
    even when pytest was started with SIGINT ignored (a background job of a shell
    without job control), since Python only raises KeyboardInterrupt where it is not."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def sweep_command(sweep: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "kernbench.cli", "sweep", str(sweep), *options]


def run_cli(sweep: Path, *options: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``kernbench sweep`` in a process of its own: a point that kills its parent spares pytest."""
    return subprocess.run(
        sweep_command(sweep, *options), capture_output=True, text=True, timeout=timeout
    )


def point_files(out: Path) -> dict[str, dict]:
    """Every ``<id>.json`` in OUT/points, parsed."""
    return {
        path.name: json.loads(path.read_text()) for path in sorted((out / "points").glob("*.json"))
    }


def records_by_label(out: Path) -> dict[str, dict]:
    return {record["point"]["label"]: record for record in point_files(out).values()}


def descendants_alive(pgid: int) -> list[int]:
    """Pids of live (not zombie) processes in process group ``pgid``."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry))
    return alive


# Targets for kernbench.bench.executors tests ("sweep_helpers:<name>"); each takes a JSON item.


def target_loud(item: dict) -> dict:
    """Print ``item["lines"]`` numbered lines to stdout and to stderr, then return."""
    for index in range(item["lines"]):
        print(f"out {index:07d}")
        print(f"err {index:07d}", file=sys.stderr)
    return {"printed": item["lines"]}


def target_thread_left_running(item: dict) -> str:
    import threading
    import time

    threading.Thread(target=time.sleep, args=(60,)).start()  # not a daemon
    return "returned"


def target_exit_with_text(item: dict) -> None:
    sys.exit(item["text"])


def target_timed(item: dict) -> list[float]:
    import time

    start = time.time()
    time.sleep(item["sleep_s"])
    return [start, time.time()]


def target_big_result(item: dict) -> str:
    return "x" * item["size"]
