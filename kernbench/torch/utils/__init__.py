"""``torch.utils`` for KernBench: ``torch.utils.data`` (datasets, samplers, ``DataLoader``) and
``torch.utils.checkpoint`` (activation checkpointing)."""

from __future__ import annotations

from typing import Any

from kernbench.errors import unsupported_name
from kernbench.torch.utils import checkpoint, data

__all__ = ["checkpoint", "data"]

_HINTS = {
    "tensorboard": "read the run's report, trace and plots (kernbench run --report/--trace)",
    "benchmark": "time on the simulated clock: torch.cuda.Event(enable_timing=True) or "
    "triton.testing.do_bench",
}


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.torch.utils", "torch.utils", name, __all__, _HINTS)
