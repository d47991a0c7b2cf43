"""The PE: matrix and vector engines that turn FLOPs into time, and its MMU.

Each engine serves one piece of work at a time (a SimPy resource of capacity
one), so work queued on one engine serialises while the two engines of a PE,
and all PEs, run in parallel on the simulated clock.
"""

from __future__ import annotations

import simpy

from kernbench.topology.schema import PeCoreAttrs
from kernbench.units import PS_PER_S

__all__ = ["PeUnit"]


class PeUnit:
    """State of one PE: its engines and (lazily) its page table."""

    __slots__ = ("name", "engines", "flops_per_s", "launch_overhead_ps", "page_table")

    def __init__(
        self, env: simpy.Environment, name: str, core: PeCoreAttrs, slowdown: float = 1.0
    ) -> None:
        self.name = name
        self.engines = {
            "matrix": simpy.Resource(env, capacity=1),
            "vector": simpy.Resource(env, capacity=1),
        }
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
