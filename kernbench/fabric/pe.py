"""The PE: matrix and vector engines that turn FLOPs into time, and its MMU.

Each engine serves one piece of work at a time, first come first served, so
work queued on one engine serialises while the two engines of a PE, and all
PEs, run in parallel on the simulated clock.  Because a piece of work's
duration is known when it is queued, an engine is just the time it becomes
free: queuing is a reservation, not a SimPy resource (the same schedule as a
capacity-one FIFO resource, without its request and release events).
"""

from __future__ import annotations

from kernbench.topology.schema import PeCoreAttrs
from kernbench.units import PS_PER_S

__all__ = ["PeUnit"]


class PeUnit:
    """State of one PE: its engines and (lazily) its page table."""

    __slots__ = ("name", "free_at", "flops_per_s", "launch_overhead_ps", "page_table")

    def __init__(self, name: str, core: PeCoreAttrs, slowdown: float = 1.0) -> None:
        self.name = name
        # When each engine has finished the work queued on it so far.
        self.free_at = {"matrix": 0, "vector": 0}
        # A straggler (faults.pes) runs its engines ``slowdown`` times slower.
        self.flops_per_s = {
            "matrix": max(1, int(core.matrix_flops_per_cycle * core.clock / slowdown)),
            "vector": max(1, int(core.vector_flops_per_cycle * core.clock / slowdown)),
        }
        self.launch_overhead_ps = core.launch_overhead
        self.page_table = None

    def compute_ps(self, engine: str, flops: int) -> int:
        """Time for ``flops`` on ``engine`` when it is free, rounded up to a picosecond."""
        return -(-flops * PS_PER_S // self.flops_per_s[engine])

    def reserve(self, engine: str, flops: int, now: int) -> tuple[int, int]:
        """Queue ``flops`` on ``engine`` at ``now``: the (start, end) it gets."""
        start = max(now, self.free_at[engine])
        end = start + self.compute_ps(engine, flops)
        self.free_at[engine] = end
        return start, end
