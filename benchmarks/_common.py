"""Shared helpers of the benchmark scripts: an event-counting SimPy environment, peak RSS."""

from __future__ import annotations

import argparse
import resource
import time

import simpy

__all__ = [
    "CountingEnvironment",
    "add_set_option",
    "bare_simpy_seconds",
    "machine_index",
    "peak_rss_mib",
]


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes."""

    def __init__(self, initial_time: int = 0) -> None:
        super().__init__(initial_time)
        self.events_processed = 0

    def step(self) -> None:
        self.events_processed += 1
        super().step()


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bare_simpy_seconds(messages: int) -> float:
    """Wall time to move ``messages`` through a ``simpy.Store`` with a timeout per hop."""
    env = simpy.Environment()
    link = simpy.Store(env)

    def sender():
        for i in range(messages):
            yield env.timeout(10)  # serialisation on the link
            yield link.put(i)

    def receiver():
        for _ in range(messages):
            yield link.get()
            yield env.timeout(5)  # latency

    env.process(sender())
    env.process(receiver())
    start = time.perf_counter()
    env.run()
    return time.perf_counter() - start


def machine_index(messages: int = 20000) -> str:
    """How fast this machine is right now, as bare-SimPy messages per second.

    Shared machines vary by 2x over a day; printing this beside a wall time
    lets figures taken at different times be compared.
    """
    rate = messages / bare_simpy_seconds(messages)
    return f"machine: bare SimPy {rate:.0f} msg/s"


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``overrides``: topology keys, or ``ccl.*``
    as ``kernbench run`` takes them (kernbench.ccl.settings.split_overrides)."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="topology KEY=VALUE, or ccl.KEY=VALUE as kernbench run takes it",
    )
