"""A reduction on a PE: its vector work and memory streams overlap, traced or not."""

from __future__ import annotations

import kernbench


def _ring_all_reduce(rank: int, size: int) -> int:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist
    from kernbench.runtime import current_context

    dist.init_process_group()
    x = torch.empty(1 << 16)
    start = current_context().now
    dist.all_reduce(x, algorithm="ring")
    return current_context().now - start


def test_reduction_time_is_the_same_with_and_without_a_detailed_trace() -> None:
    """A reduction's vector work ends with an event of its own when traced and is
    folded into the memory streams' wait when not; the time must not change,
    whether the reduction is memory-bound or (a slow vector engine) compute-bound."""
    tiny = "tiny"
    slow = "cube.pe_template.components.pe_core.attrs.vector_flops_per_cycle=1"
    times = {}
    for bound, overrides in (("memory", ["system.device_level=pe"]), ("compute", [slow])):
        for detail in (False, True):
            result = kernbench.simulate(
                _ring_all_reduce,
                topology=tiny,
                overrides=["system.device_level=pe", *overrides],
                world_size=4,
                timing_only=True,
                detail=detail,
                rank_args=True,
            )
            times[bound, detail] = result.returns
    assert times["memory", False] == times["memory", True]
    assert times["compute", False] == times["compute", True]
    assert min(times["compute", False]) > max(times["memory", False])
