"""One piece of a program run in functional and timing-only mode and on both backends, for
the tests that hold an operation to the same time in both modes and the same values on
both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.runtime import RuntimeContext, use_context

Run = Callable[[RuntimeContext], tuple[int, list[Any]]]


def in_every_mode(run: Run, topology: str = "tiny") -> tuple[list[int], list[list[np.ndarray]]]:
    """``run(context) -> (simulated ps, result tensors)`` in functional and timing-only
    mode on the detailed backend, then in functional mode on the fast one: the three
    times, and the results' values of the two functional runs (detailed, fast)."""
    times, values = [], []
    for timing_only, backend in ((False, "detailed"), (True, "detailed"), (False, "fast")):
        context = RuntimeContext(
            topology, timing_only=timing_only, overrides=(f"simulation.backend={backend}",)
        )
        with use_context(context):
            elapsed, results = run(context)
            times.append(elapsed)
            if not timing_only:
                values.append([r.detach().numpy() for r in results])
    return times, values


def simulated_ps(context: RuntimeContext, call: Callable[[], Any]) -> int:
    """The simulated time ``call()`` takes on ``context``'s machine."""
    before = context.now
    call()
    return context.now - before


def assert_same_values(detailed: list[np.ndarray], fast: list[np.ndarray]) -> None:
    """The fast backend's values are the detailed backend's, bit for bit."""
    assert len(detailed) == len(fast)
    for got, expected in zip(fast, detailed, strict=True):
        np.testing.assert_array_equal(got, expected)
