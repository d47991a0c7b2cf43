"""Shared helpers of the benchmark scripts: an event-counting SimPy environment, peak RSS."""

from __future__ import annotations

import resource

import simpy

__all__ = ["CountingEnvironment", "peak_rss_mib"]


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
