"""Device memory returns when the last user reference to a tensor goes.

Collectives, point-to-point transfers, async ``Work`` handles, kernel launches
and the records a run keeps for its report must not keep tensors alive once
they are done with them.  Accounting is the allocators' own: the bytes in use
in each PE's HBM partition (``RuntimeContext.memory``) and the memory store's
live segments, read right after ``del``.

tiny.yaml has 1 GB of HBM per PE, so a loop that kept every 64M-float (256 MiB)
tensor ran out of memory on its 4th pass.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import yaml

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.distributed.world import active_world
from kernbench.fabric import Fabric
from kernbench.memory import MemoryKind
from kernbench.runtime import DeviceTensor, RuntimeContext, current_context

TINY = "tiny"
PE_LEVEL = ("system.device_level=pe",)  # tiny: 4 ranks, one per PE
FLOATS = 64 * 2**20  # 256 MiB of float32: four do not fit in a 1 GB partition
PASSES = 10


def _partition_used(rank: int) -> int:
    """Bytes in use in the HBM partition of the calling rank's PE."""
    ctx = current_context()
    sip, cube, pe = ctx.device_coords(rank)
    name = f"sip{sip}.cube{cube or 0}.pe{pe or 0} HBM partition"
    return next(
        (u.used for u in ctx.memory.usage() if u.kind is MemoryKind.HBM and u.name == name), 0
    )


def _simulate(fn, *, world_size: int | None = None, overrides=(), timing_only: bool = True):
    return kernbench.simulate(
        fn, topology=TINY, world_size=world_size, overrides=overrides, timing_only=timing_only
    )


def _after_each_pass(step) -> list[int]:
    """Run ``step()`` PASSES times; the partition's bytes in use after each, minus before."""
    dist.init_process_group()
    rank = dist.get_rank()
    base = _partition_used(rank)
    used = []
    for _ in range(PASSES):
        step()
        used.append(_partition_used(rank) - base)
    return used


# -- collectives -----------------------------------------------------------------------
def _all_reduce_loop() -> list[int]:
    def step() -> None:
        t = torch.empty(FLOATS)
        dist.all_reduce(t)
        del t

    return _after_each_pass(step)


def test_an_all_reduce_loop_gives_memory_back_every_pass():
    result = _simulate(_all_reduce_loop)
    assert result.returns == [[0] * PASSES]


def test_an_all_reduce_loop_on_four_ranks_gives_memory_back_every_pass():
    result = _simulate(_all_reduce_loop, overrides=PE_LEVEL)
    assert result.returns == [[0] * PASSES] * 4


def test_a_functional_all_reduce_loop_drops_the_stored_bytes_too():
    def step() -> None:
        t = torch.ones(1024)
        dist.all_reduce(t)
        assert t.numpy().tolist() == [4.0] * 1024
        del t

    result = _simulate(lambda: _after_each_pass(step), overrides=PE_LEVEL, timing_only=False)
    assert result.returns == [[0] * PASSES] * 4
    assert result.context.store.segment_count == 0


def test_every_collective_gives_its_tensors_back():
    def step() -> None:
        p = dist.get_world_size()
        t = torch.empty(FLOATS // 4)
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        dist.reduce(t, dst=1)
        gathered = torch.empty(FLOATS // 4 * p)
        dist.all_gather_into_tensor(gathered, t)
        dist.reduce_scatter_tensor(t, gathered)
        dist.barrier()
        del t, gathered

    result = _simulate(lambda: _after_each_pass(step), overrides=PE_LEVEL)
    assert result.returns == [[0] * PASSES] * 4


# -- point to point ------------------------------------------------------------------------
def _p2p_loop(blocking: bool) -> list[int]:
    def step() -> None:
        rank = dist.get_rank()
        t = torch.empty(FLOATS)
        peer = rank ^ 1
        if blocking:
            if rank % 2 == 0:
                dist.send(t, dst=peer)
            else:
                dist.recv(t, src=peer)
        else:
            op = dist.isend if rank % 2 == 0 else dist.irecv
            work = op(t, peer)
            work.wait()
            keep.append(work)  # a completed Work the user keeps must not pin its tensor
        del t

    keep: list = []
    return _after_each_pass(step)


@pytest.mark.parametrize("blocking", [True, False], ids=["send_recv", "isend_irecv"])
def test_a_p2p_loop_gives_memory_back_every_pass(blocking: bool):
    result = _simulate(lambda: _p2p_loop(blocking), overrides=PE_LEVEL)
    assert result.returns == [[0] * PASSES] * 4


# -- async work ------------------------------------------------------------------------------
def test_a_completed_work_kept_by_the_user_does_not_pin_its_tensor():
    keep: list = []

    def step() -> None:
        t = torch.empty(FLOATS)
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        assert work.is_completed()
        keep.append(work)
        del t

    result = _simulate(lambda: _after_each_pass(step), overrides=PE_LEVEL)
    assert result.returns == [[0] * PASSES] * 4


def test_an_async_collective_keeps_its_tensor_until_it_completes():
    def body() -> tuple[int, int, int]:
        dist.init_process_group()
        rank = dist.get_rank()
        base = _partition_used(rank)
        t = torch.empty(FLOATS)
        nbytes = t.nbytes
        work = dist.all_reduce(t, async_op=True)
        del t  # dropped while in flight: the collective still writes into it
        in_flight = _partition_used(rank) - base
        work.wait()
        return nbytes, in_flight, _partition_used(rank) - base

    result = _simulate(body, overrides=PE_LEVEL)
    for nbytes, in_flight, after in result.returns:
        assert in_flight == nbytes
        assert after == 0


# -- kernels -----------------------------------------------------------------------------------
def test_a_kernel_loop_gives_memory_back_every_pass():
    def step() -> None:
        t = torch.ones(4 * 16384)  # a few programs per kernel
        u = t * 2 + 1
        del t, u

    result = _simulate(lambda: _after_each_pass(step), overrides=PE_LEVEL)
    assert result.returns == [[0] * PASSES] * 4


# -- records kept for the report ---------------------------------------------------------------
def _tensors_reachable_from(root: object) -> list[DeviceTensor]:
    """Device tensors reachable from ``root``, not counting through the machine itself."""
    found, seen, todo = [], set(), [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type | RuntimeContext | Fabric):
            continue
        seen.add(id(obj))
        if isinstance(obj, DeviceTensor):
            found.append(obj)
            continue
        todo.extend(gc.get_referents(obj))
    return found


def test_records_of_a_run_hold_no_tensors():
    worlds = []

    def body() -> None:
        dist.init_process_group()
        worlds.append(active_world())
        t = torch.ones(1024)
        dist.all_reduce(t)
        dist.all_reduce(t, async_op=True).wait()
        peer = dist.get_rank() ^ 1
        if dist.get_rank() % 2 == 0:
            dist.send(t, dst=peer)
        else:
            dist.recv(t, src=peer)
        (t + 1).sum()

    result = _simulate(body, overrides=PE_LEVEL, timing_only=False)
    assert len(result.report["collectives"]) == 4  # two all_reduces, two send/recv pairs
    assert _tensors_reachable_from(worlds[0].collectives) == []
    assert result.context.memory.used_bytes() == 0
    assert result.context.store.segment_count == 0


# -- the tuner -----------------------------------------------------------------------------------
def test_kernbench_tune_on_tiny_at_its_default_sizes(tmp_path: Path, capsys):
    from kernbench.cli import main

    table = tmp_path / "t.yaml"
    assert main(["tune", "--topology", TINY, "-o", str(table)]) == 0
    rows = yaml.safe_load(table.read_text())["results"]
    assert [row["bytes"] for row in rows] == [4096 * 2**i for i in range(17)]  # 4KiB..256MiB
    assert all(row["op"] == "all_reduce" for row in rows)


def test_a_run_stopped_inside_a_collective_leaves_nothing_alive():
    """A collective still in flight when its run stops (here by the simulated-time
    limit) is not kept by the record of collectives in flight: its tensors, memory and
    machine go with the run."""
    from kernbench.errors import SimulationLimitError

    contexts = []

    def body() -> None:
        dist.init_process_group()
        contexts.append(weakref.ref(current_context()))
        dist.all_reduce(torch.ones(1 << 16))

    with pytest.raises(SimulationLimitError):  # the all-reduce runs from 5.4 to 18.8 us
        kernbench.simulate(
            body, topology=TINY, overrides=PE_LEVEL, timing_only=True, max_sim_time_ps=10**7
        )
    gc.collect()
    assert contexts and all(ref() is None for ref in contexts)


def test_ranks_after_a_failed_run_on_its_machine_are_refused():
    """A run stopped by an error leaves messages and unwound ranks' cleanup in flight on
    its machine: another run of ranks there would time them as its own."""
    from kernbench.bench.simulate import Run
    from kernbench.errors import DistributedError, RankError

    def fails() -> None:
        dist.init_process_group()
        if dist.get_rank() == 0:
            raise ValueError("boom")
        try:
            dist.all_reduce(torch.ones(8))
        finally:
            torch.ones(4)  # cleanup that would start work on the machine

    run = Run(TINY, world_size=2, overrides=PE_LEVEL)
    with run.active():
        with pytest.raises(RankError, match="boom"):
            run.ranks(fails)
        with pytest.raises(DistributedError, match="an earlier run of ranks on this machine"):
            run.ranks(lambda: None)
