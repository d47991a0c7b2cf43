"""The fast backend: collectives evaluated step-wide for machines of 1k-100k ranks (ADR 0015).

Chosen per run with ``simulation.backend: fast``.  Everything but collectives
runs on the detailed fabric; a collective's programs (the same algorithm
code) are recorded and priced one operation for all ranks at once.
"""

from typing import Any

from kernbench.fast.machine import FastMachine
from kernbench.machine.backends import register_backend
from kernbench.topology.schema import Topology

__all__ = ["FastMachine", "BACKEND"]

BACKEND = "fast"


def _build(topology: Topology, store: Any) -> FastMachine:
    return FastMachine(topology, store=store)


register_backend(BACKEND, _build)
