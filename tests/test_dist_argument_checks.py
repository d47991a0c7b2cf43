"""torch.distributed and torch.cuda arguments of the wrong kind name the call.

Each used to escape from inside KernBench as a bare TypeError, ValueError or
AttributeError; ``new_group("01")`` and ``new_group([0, 1.0])`` were even taken
as ranks 0 and 1.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import DistributedError, PlacementError, RankError, SimulationError


def _raised(body):
    def fn():
        dist.init_process_group()
        body(dist.get_rank())

    with pytest.raises(RankError) as info:
        kernbench.simulate(fn, topology="ring8", world_size=2)
    return info.value.original


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (lambda r: dist.all_gather(None, torch.ones(4)), "all_gather: expected a list of tensors"),
        (lambda r: dist.new_group(3), "new_group: ranks must be a list of ints"),
        (lambda r: dist.new_group("01"), "new_group: ranks must be a list of ints"),
        (lambda r: dist.new_group([0, 1.0]), "new_group: ranks must be a list of ints"),
        (
            lambda r: dist.all_reduce(torch.ones(4), async_op=np.array([1, 2])),
            "all_reduce: async_op must be True or False",
        ),
        (
            lambda r: dist.all_to_all_single(torch.ones(4), torch.ones(4), 3, None),
            "all_to_all_single: output_split_sizes must be a list of ints, got 3",
        ),
        (lambda r: dist.batch_isend_irecv(None), "p2p_op_list must be a list of dist.P2POp"),
        (
            lambda r: dist.init_device_mesh("ahbm", "ab"),
            "init_device_mesh: mesh_shape must be a non-empty tuple of positive ints",
        ),
        (
            lambda r: dist.init_device_mesh("ahbm", (-2, -1)),
            "init_device_mesh: mesh_shape must be a non-empty tuple of positive ints",
        ),
    ],
)
def test_distributed_arguments_are_checked(body, message):
    error = _raised(body)
    assert isinstance(error, DistributedError)
    assert message in str(error)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            lambda r: torch.cuda.Event(enable_timing=True).elapsed_time(None),
            "Event.elapsed_time: end_event must be a torch.cuda.Event, got NoneType",
        ),
        (
            lambda r: torch.cuda.current_stream().record_event(3),
            "Stream.record_event: event must be a torch.cuda.Event or None, got int",
        ),
    ],
)
def test_event_arguments_are_checked(body, message):
    error = _raised(body)
    assert isinstance(error, SimulationError)
    assert message in str(error)


def test_well_formed_calls_still_run():
    def fn():
        dist.init_process_group()
        t = torch.ones(4)
        dist.all_reduce(t, group=dist.new_group((0, np.int64(1))), async_op=False)
        dist.init_device_mesh("ahbm", (2,))
        out = torch.empty(4)
        dist.all_to_all_single(out, torch.ones(4), [2, 2], (2, 2))
        return t.numpy().tolist()

    result = kernbench.simulate(fn, topology="ring8", world_size=2)
    assert result.returns == [[2.0] * 4, [2.0] * 4]


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.cuda.get_device_name(100),
        lambda: torch.cuda.synchronize(100),
        lambda: torch.cuda.current_stream("ahbm:100"),
    ],
)
def test_device_queries_refuse_a_device_the_machine_lacks(call):
    def fn():
        assert torch.cuda.get_device_name(7).endswith(" 7")  # ring8: devices 0..7
        call()

    with pytest.raises(RankError) as info:
        kernbench.simulate(fn, topology="ring8", world_size=1)
    assert isinstance(info.value.original, PlacementError)
    assert "device 100 does not exist: this machine has 8 devices" in str(info.value.original)
