"""Distributed failures: deadlocks name every blocked rank, rank errors name the rank.

A deadlock must be reported (not hang): each case below finishes well within
a second of wall time, raising :class:`DeadlockError` whose ``blocked`` maps
exactly the stuck ranks to what they wait for.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.distributed.scheduler import GC_YOUNG_THRESHOLD, UNWIND_THROWS
from kernbench.errors import (
    CollectiveMismatchError,
    DeadlockError,
    DistributedError,
    KernBenchError,
    RankError,
    SimulationLimitError,
)
from kernbench.runtime import current_context

MULTI_SIP = "multi_sip"
DEFAULT = "default"
TINY = "tiny"
CUBE = ("system.device_level=cube",)


def run(fn, ws: int, *args, topology: str = MULTI_SIP, overrides=()):
    return kernbench.simulate(fn, topology=topology, world_size=ws, overrides=overrides, args=args)


def deadlock(fn, ws: int, *args, **kwargs) -> DeadlockError:
    """Run ``fn``; it must raise DeadlockError promptly (within 5 s, on a busy machine)."""
    start = time.perf_counter()
    with pytest.raises(DeadlockError) as info:
        run(fn, ws, *args, **kwargs)
    assert time.perf_counter() - start < 5.0
    error = info.value
    for rank in error.blocked:
        assert f"rank {rank}" in str(error)
    return error


# ------------------------------------------------------------------------------ deadlocks
def _returns_early(stops: tuple[int, ...]) -> None:
    dist.init_process_group()
    if dist.get_rank() in stops:
        return
    dist.all_reduce(torch.ones(8))


@pytest.mark.parametrize(
    ("ws", "stops"), [(2, (1,)), (3, (2,)), (4, (0, 3))], ids=["ws2", "ws3", "ws4"]
)
def test_rank_returning_while_others_wait_in_a_collective(ws, stops) -> None:
    error = deadlock(_returns_early, ws, stops)
    assert type(error) is DeadlockError
    waiting = set(range(ws)) - set(stops)
    assert set(error.blocked) == waiting
    for rank in waiting:
        assert "all_reduce" in error.blocked[rank]
        assert str(list(stops)) in error.blocked[rank]  # who has not called it
    assert f"ranks that already returned: {list(stops)}" in str(error)


def test_rank_returning_at_cube_level() -> None:
    error = deadlock(_returns_early, 8, (5,), topology=DEFAULT, overrides=CUBE)
    assert set(error.blocked) == {0, 1, 2, 3, 4, 6, 7}


def _different_ops(broadcasters: tuple[int, ...]) -> None:
    dist.init_process_group()
    t = torch.ones(8)
    if dist.get_rank() in broadcasters:
        dist.broadcast(t, src=0)
    else:
        dist.all_reduce(t)


@pytest.mark.parametrize(("ws", "broadcasters"), [(2, (1,)), (3, (2,))], ids=["ws2", "ws3"])
def test_mismatched_collective_ops(ws, broadcasters) -> None:
    assert issubclass(CollectiveMismatchError, DeadlockError)
    error = deadlock(_different_ops, ws, broadcasters)
    assert isinstance(error, CollectiveMismatchError)
    assert isinstance(error, DistributedError)
    assert set(error.blocked) == set(range(ws))
    for rank in range(ws):
        op = "broadcast" if rank in broadcasters else "all_reduce"
        assert error.blocked[rank].startswith(op)
    assert "does not match across ranks" in str(error)


def test_mismatched_collective_ops_lists_every_rank_of_the_group() -> None:
    error = deadlock(_different_ops, 4, (2, 3))
    assert set(error.blocked) == {0, 1, 2, 3}


def _different_shapes() -> None:
    dist.init_process_group()
    rank = dist.get_rank()
    dist.all_reduce(torch.ones(8 if rank == 0 else 16))


def test_mismatched_collective_shapes() -> None:
    error = deadlock(_different_shapes, 2)
    assert isinstance(error, CollectiveMismatchError)
    assert set(error.blocked) == {0, 1}
    assert "(8,)" in error.blocked[0] and "(16,)" in error.blocked[1]


def _different_dtypes() -> None:
    dist.init_process_group()
    dtype = torch.float32 if dist.get_rank() == 0 else torch.int32
    dist.all_reduce(torch.ones(8, dtype=dtype))


def test_mismatched_collective_dtypes() -> None:
    error = deadlock(_different_dtypes, 2)
    assert isinstance(error, CollectiveMismatchError)
    assert set(error.blocked) == {0, 1}
    assert "float32" in error.blocked[0] and "int32" in error.blocked[1]


def _different_roots() -> None:
    dist.init_process_group()
    dist.broadcast(torch.ones(8), src=dist.get_rank())


def test_mismatched_broadcast_roots() -> None:
    error = deadlock(_different_roots, 2)
    assert isinstance(error, CollectiveMismatchError)
    assert set(error.blocked) == {0, 1}


def _different_algorithms() -> None:
    dist.init_process_group()
    rank = dist.get_rank()
    dist.all_reduce(torch.ones(8), algorithm="ring" if rank % 2 == 0 else "recursive_doubling")


def test_mismatched_algorithms_are_an_error_naming_the_ranks_and_values() -> None:
    error = deadlock(_different_algorithms, 4)
    assert isinstance(error, CollectiveMismatchError)
    assert set(error.blocked) == {0, 1, 2, 3}
    assert "algorithm differs: 'ring' on ranks [0, 2], 'recursive_doubling' on ranks [1, 3]" in str(
        error
    )


def _explicit_and_default_algorithm() -> None:
    dist.init_process_group()
    dist.broadcast(torch.ones(8), src=0, algorithm="binomial" if dist.get_rank() else None)


def test_an_algorithm_on_some_ranks_only_is_a_mismatch() -> None:
    error = deadlock(_explicit_and_default_algorithm, 2)
    assert isinstance(error, CollectiveMismatchError)
    assert "algorithm differs: None on ranks [0], 'binomial' on ranks [1]" in str(error)


def _mismatched(case: str) -> None:
    """One argument that must agree across ranks differs between rank 0 and the others."""
    dist.init_process_group()
    first = dist.get_rank() == 0
    p = dist.get_world_size()
    t = torch.ones(8)
    if case == "op":
        dist.all_reduce(t, op=dist.ReduceOp.SUM if first else dist.ReduceOp.MAX)
    elif case == "reduce_op":
        dist.reduce(t, dst=0, op=dist.ReduceOp.SUM if first else dist.ReduceOp.MIN)
    elif case == "reduce_dst":
        dist.reduce(t, dst=0 if first else 1)
    elif case == "reduce_scatter_op":
        out = torch.ones(8)
        dist.reduce_scatter_tensor(
            out, torch.ones(8 * p), op=dist.ReduceOp.SUM if first else dist.ReduceOp.MAX
        )
    elif case == "all_gather_shape":
        n = 8 if first else 16
        dist.all_gather_into_tensor(torch.empty(n * p), torch.ones(n))
    elif case == "gather_dst":
        dst = 0 if first else 1
        blocks = [torch.empty(8) for _ in range(p)] if dist.get_rank() == dst else None
        dist.gather(t, blocks, dst=dst)
    elif case == "scatter_dtype":
        dtype = torch.float32 if first else torch.int32
        blocks = [torch.ones(8, dtype=dtype) for _ in range(p)] if first else None
        dist.scatter(torch.empty(8, dtype=dtype), blocks, src=0)
    elif case == "all_to_all_dtype":
        dtype = torch.float32 if first else torch.int32
        ins = [torch.ones(8, dtype=dtype) for _ in range(p)]
        dist.all_to_all([torch.empty(8, dtype=dtype) for _ in range(p)], ins)
    elif case == "barrier_algorithm":
        dist.barrier(algorithm="dissemination" if first else "direct")


@pytest.mark.parametrize(
    ("case", "differs"),
    [
        ("op", "op differs: 'sum' on ranks [0], 'max' on ranks [1, 2]"),
        ("reduce_op", "op differs: 'sum' on ranks [0], 'min' on ranks [1, 2]"),
        ("reduce_dst", "dst differs: 0 on ranks [0], 1 on ranks [1, 2]"),
        ("reduce_scatter_op", "op differs: 'sum' on ranks [0], 'max' on ranks [1, 2]"),
        ("all_gather_shape", "input differs: 'float32[8]' on ranks [0], 'float32[16]' on"),
        ("gather_dst", "dst differs: 0 on ranks [0], 1 on ranks [1, 2]"),
        ("scatter_dtype", "dtype differs: 'float32' on ranks [0], 'int32' on ranks [1, 2]"),
        ("all_to_all_dtype", "dtype differs: 'float32' on ranks [0], 'int32' on ranks [1, 2]"),
        (
            "barrier_algorithm",
            "algorithm differs: 'dissemination' on ranks [0], 'direct' on ranks [1, 2]",
        ),
    ],
)
def test_every_argument_that_must_agree_is_checked(case: str, differs: str) -> None:
    error = deadlock(_mismatched, 3, case)
    assert isinstance(error, CollectiveMismatchError)
    assert set(error.blocked) == {0, 1, 2}
    assert differs in str(error)


def _all_to_all_single_with_mismatched_splits() -> None:
    dist.init_process_group()
    group = dist.new_group([1, 2])
    if dist.get_rank() in (1, 2):
        splits = [2, 2] if dist.get_rank() == 1 else [1, 3]
        dist.all_to_all_single(
            torch.empty(4), torch.ones(4), output_split_sizes=splits, group=group
        )


def test_all_to_all_splits_that_disagree_name_the_global_ranks_and_counts() -> None:
    with pytest.raises(CollectiveMismatchError) as info:
        run(_all_to_all_single_with_mismatched_splits, 3)
    assert "all_to_all: rank 1 sends 2 elements to rank 2, which expects 1 from it" in str(
        info.value
    )
    assert set(info.value.blocked) == {1, 2}


def _all_to_all_of_mixed_dtypes() -> None:
    dist.init_process_group()
    outs = [torch.empty(8, dtype=torch.int32) for _ in range(2)]
    dist.all_to_all(outs, [torch.ones(8) for _ in range(2)])


def test_all_to_all_with_mixed_dtypes_on_one_rank_is_refused() -> None:
    with pytest.raises(RankError) as info:
        run(_all_to_all_of_mixed_dtypes, 2)
    assert isinstance(info.value.original, DistributedError)
    assert "same dtype; got ['float32', 'int32']" in str(info.value)


def _async_on_some_ranks() -> list[float]:
    dist.init_process_group()
    t = torch.ones(8)
    work = dist.all_reduce(t, async_op=dist.get_rank() == 0)
    if work is not None:
        work.wait()
    return t.numpy().tolist()


def test_async_op_need_not_agree_across_ranks() -> None:
    result = run(_async_on_some_ranks, 2)
    assert result.returns == [[2.0] * 8, [2.0] * 8]


def _different_groups() -> None:
    dist.init_process_group()
    pair = dist.new_group([0, 1])
    t = torch.ones(8)
    if dist.get_rank() == 0:
        dist.all_reduce(t, group=pair)
    else:
        dist.all_reduce(t)  # the world group


def test_collectives_on_different_groups_across_ranks() -> None:
    error = deadlock(_different_groups, 3)
    assert set(error.blocked) == {0, 1, 2}
    assert "[1]" in error.blocked[0]  # rank 0 waits for rank 1 on the pair
    assert "[0]" in error.blocked[1] and "[0]" in error.blocked[2]


def _recv_without_send() -> None:
    dist.init_process_group()
    if dist.get_rank() == 0:
        dist.recv(torch.zeros(4), src=1)


def test_recv_with_no_send() -> None:
    error = deadlock(_recv_without_send, 2)
    assert set(error.blocked) == {0}
    assert "recv from rank 1" in error.blocked[0]


def _recv_from_anyone() -> None:
    dist.init_process_group()
    if dist.get_rank() == 1:
        dist.recv(torch.zeros(4))


def test_recv_from_any_source_with_no_send() -> None:
    error = deadlock(_recv_from_anyone, 3)
    assert set(error.blocked) == {1}
    assert "any rank" in error.blocked[1]


def _send_without_recv() -> None:
    dist.init_process_group()
    if dist.get_rank() == 0:
        dist.send(torch.ones(4), dst=1)


def test_blocking_send_waits_for_its_recv() -> None:
    error = deadlock(_send_without_recv, 2)
    assert set(error.blocked) == {0}
    assert "send to rank 1" in error.blocked[0]


def _head_to_head_sends() -> None:
    dist.init_process_group()
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.send(t, dst=1 - rank)
    dist.recv(t, src=1 - rank)


def test_both_ranks_send_first() -> None:
    error = deadlock(_head_to_head_sends, 2)
    assert set(error.blocked) == {0, 1}


def _wrong_tag() -> None:
    dist.init_process_group()
    if dist.get_rank() == 0:
        dist.send(torch.ones(4), dst=1, tag=1)
    else:
        dist.recv(torch.zeros(4), src=0, tag=2)


def test_send_and_recv_with_different_tags() -> None:
    error = deadlock(_wrong_tag, 2)
    assert set(error.blocked) == {0, 1}


def _mismatched_p2p() -> None:
    dist.init_process_group()
    if dist.get_rank() == 0:
        dist.send(torch.ones(4), dst=1)
    else:
        dist.recv(torch.zeros(8), src=0)


def test_send_recv_with_different_shapes() -> None:
    error = deadlock(_mismatched_p2p, 2)
    assert isinstance(error, CollectiveMismatchError)
    assert set(error.blocked) == {0, 1}


def _send_and_recv_on_different_groups() -> None:
    dist.init_process_group()
    pair = dist.new_group([0, 1])
    if dist.get_rank() == 0:
        dist.send(torch.ones(4), dst=1, group=pair)
    elif dist.get_rank() == 1:
        dist.recv(torch.zeros(4), src=0)  # on the default group: another communicator


def test_send_on_one_group_never_matches_a_recv_on_another() -> None:
    error = deadlock(_send_and_recv_on_different_groups, 3)
    assert set(error.blocked) == {0, 1}
    assert error.blocked[0] == "send to rank 1 (tag 0) on group1"
    assert error.blocked[1] == "recv from rank 0 (tag 0) on WORLD"


def _irecv_on_a_group_the_sender_did_not_use() -> None:
    dist.init_process_group()
    first, second = dist.new_group([0, 1]), dist.new_group([0, 1])
    if dist.get_rank() == 0:
        dist.isend(torch.ones(4), dst=1, group=first)
    else:
        dist.irecv(torch.zeros(4), src=0, group=second)


def test_an_irecv_on_a_group_the_sender_did_not_use_is_unmatched_at_the_end() -> None:
    with pytest.raises(CollectiveMismatchError, match="no other rank matched") as caught:
        run(_irecv_on_a_group_the_sender_did_not_use, 2)
    says = str(caught.value)
    assert "rank 0's isend to rank 1 (tag 0) on group1 was never received by rank 1" in says
    assert "rank 1's irecv from rank 0 (tag 0) on group2 was never matched by a send" in says
    assert set(caught.value.blocked) == {0, 1}


def _p2p_peer_outside_the_group(call: str) -> None:
    dist.init_process_group()
    pair = dist.new_group([0, 1])
    if dist.get_rank() == 0:
        if call == "isend":
            dist.isend(torch.ones(4), dst=2, group=pair)
        elif call == "irecv":
            dist.irecv(torch.zeros(4), src=2, group=pair)
        else:
            dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(4), 2, group=pair)])


@pytest.mark.parametrize(
    ("call", "says"),
    [
        ("isend", "isend: global rank 2 (dst=2)"),
        ("irecv", "irecv: global rank 2 (src=2)"),
        ("batch", "isend: global rank 2 (dst=2)"),
    ],
)
def test_a_p2p_peer_outside_the_group_is_refused(call, says) -> None:
    with pytest.raises(RankError) as info:
        run(_p2p_peer_outside_the_group, 3, call)
    assert info.value.rank == 0
    assert isinstance(info.value.__cause__, DistributedError)
    assert f"{says} is not part of ProcessGroup(group1, ranks=[0, 1])" in str(info.value.__cause__)


def _irecv_while_others_finish() -> None:
    dist.init_process_group()
    if dist.get_rank() == 0:
        dist.irecv(torch.zeros(4), src=1).wait()
    else:
        dist.barrier(group=dist.new_group([1, 2]))


def test_irecv_wait_with_no_send_while_the_others_finish() -> None:
    error = deadlock(_irecv_while_others_finish, 3)
    assert set(error.blocked) == {0}
    assert "recv from rank 1" in error.blocked[0]
    assert "ranks that already returned: [1, 2]" in str(error)


# ------------------------------------------------------------------------- rank errors
def _raises_in(rank: int) -> None:
    dist.init_process_group()
    if dist.get_rank() == rank:
        raise ValueError(f"boom on {rank}")
    dist.barrier()


@pytest.mark.parametrize("bad", [0, 1, 3])
def test_exception_in_a_rank_names_the_rank(bad) -> None:
    with pytest.raises(RankError) as info:
        run(_raises_in, 4, bad)
    error = info.value
    assert error.rank == bad
    assert f"rank {bad}" in str(error)
    assert f"boom on {bad}" in str(error)
    assert isinstance(error.__cause__, ValueError)
    assert error.__cause__ is error.original
    assert str(error.__cause__) == f"boom on {bad}"


def _swallows_every_throw(op: str, caught: dict[int, list[str]]) -> None:
    """Hostile rank code: it hides every exception, the run's unwinding included, and
    keeps calling the simulator."""
    dist.init_process_group()
    rank = dist.get_rank()
    if rank == 2:  # the last to start: the others wait in their first call
        raise ValueError("boom on 2")
    seen = caught.setdefault(rank, [])
    while True:
        try:
            if op == "barrier":
                dist.barrier()
            else:
                torch.ones(4).sum()
        except BaseException as exc:  # noqa: BLE001 - what the test is about
            seen.append(type(exc).__name__)


def _run_guarded(fn, ws: int, *args, max_wall_s=None) -> tuple[dict, float]:
    """Run ``fn`` and then collect garbage, in a thread that must finish within 10 s;
    what the run raised (its type, text, rank and original error) and how long it took.

    The error is dropped before collecting: a suspended rank it kept alive would be
    collected then, and collecting a suspended greenlet throws into it again."""
    outcome: dict = {}

    def body() -> None:
        try:
            kernbench.simulate(
                fn, topology=MULTI_SIP, world_size=ws, args=args, max_wall_s=max_wall_s
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            original = getattr(exc, "original", None)
            outcome.update(
                type=type(exc),
                text=str(exc),
                rank=getattr(exc, "rank", None),
                original=(type(original), str(original)),
            )
        gc.collect()
        outcome["collected"] = True

    start = time.perf_counter()
    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(timeout=10.0)
    assert not worker.is_alive(), "the run (or collecting what it left) did not end in 10 s"
    assert outcome["collected"]
    return outcome, time.perf_counter() - start


@pytest.mark.parametrize("op", ["barrier", "sum"])
def test_a_rank_that_swallows_its_unwinding_is_abandoned_with_the_runs_error(op) -> None:
    caught: dict[int, list[str]] = {}
    error, elapsed = _run_guarded(_swallows_every_throw, 3, op, caught)
    assert elapsed < 5.0
    assert error["type"] is RankError and error["rank"] == 2
    assert error["text"] == "rank 2 raised ValueError: boom on 2"
    assert error["original"] == (ValueError, "boom on 2")
    # Thrown once, then raised by every simulator call it makes, until it is given up on;
    # never resumed after that (not even when the run's objects are collected).
    assert caught == {r: ["GreenletExit"] * (UNWIND_THROWS + 1) for r in (0, 1)}


def test_a_rank_that_swallows_a_wall_time_stop_is_abandoned_with_the_limit_error() -> None:
    def body(caught: dict[int, list[str]]) -> None:
        dist.init_process_group()
        seen = caught.setdefault(dist.get_rank(), [])
        while True:
            try:
                dist.all_reduce(torch.ones(4))
            except BaseException as exc:  # noqa: BLE001 - what the test is about
                seen.append(type(exc).__name__)

    caught: dict[int, list[str]] = {}
    error, elapsed = _run_guarded(body, 2, caught, max_wall_s=0.5)
    assert elapsed < 3.0
    assert error["type"] is SimulationLimitError
    assert error["text"].startswith("stopped at ")
    assert "wall time passed --max-wall-time (0.5 s)" in error["text"]
    for rank in (0, 1):  # a WallTimeExpired it may have hidden, then the unwinding's throws
        assert [k for k in caught[rank] if k != "WallTimeExpired"] == ["GreenletExit"] * (
            UNWIND_THROWS + 1
        )


def _cleans_up_after_a_failure(contexts: list, raised: list) -> None:
    dist.init_process_group()
    contexts.append(weakref.ref(current_context()))
    if dist.get_rank() == 1:  # after rank 0 has started its all-reduce
        raise ValueError("boom on 1")
    try:
        dist.all_reduce(torch.ones(8))
    finally:
        try:
            torch.ones(4).sum()  # cleanup that asks the stopped machine for work
        except BaseException as exc:
            raised.append(type(exc).__name__)
            raise


def test_cleanup_that_calls_the_simulator_while_unwinding_raises_and_frees_the_run() -> None:
    contexts: list = []
    raised: list = []
    with pytest.raises(RankError, match="boom on 1") as info:
        run(_cleans_up_after_a_failure, 2, contexts, raised)
    assert raised == ["GreenletExit"]  # at once, as the run stopped: no rank left suspended
    del info
    gc.collect()
    assert contexts and all(ref() is None for ref in contexts)


def _collective_first() -> None:
    dist.all_reduce(torch.ones(4))


def test_collective_before_init_process_group() -> None:
    with pytest.raises(RankError) as info:
        run(_collective_first, 2)
    cause = info.value.__cause__
    assert isinstance(cause, DistributedError)
    assert "rank 0 called all_reduce before init_process_group()" in str(cause)
    assert "dist.init_process_group()" in str(cause)


def test_collective_outside_any_run() -> None:
    with pytest.raises(DistributedError, match="no distributed run is active"):
        dist.barrier()
    with pytest.raises(DistributedError, match="no distributed run is active"):
        dist.init_process_group()


@pytest.mark.parametrize(
    ("topology", "overrides", "devices", "ws"),
    [
        (MULTI_SIP, (), 4, 5),
        (DEFAULT, (), 1, 2),
        (DEFAULT, CUBE, 16, 17),
        (TINY, ("system.device_level=pe",), 4, 8),
    ],
    ids=["multi_sip", "default", "default-cube", "tiny-pe"],
)
def test_world_size_larger_than_the_topology(topology, overrides, devices, ws) -> None:
    with pytest.raises(DistributedError) as info:
        kernbench.simulate(lambda: None, topology=topology, world_size=ws, overrides=overrides)
    message = str(info.value)
    assert f"world size {ws}" in message
    assert f"has {devices} devices" in message


def test_world_size_zero_is_rejected() -> None:
    with pytest.raises(KernBenchError, match="at least 1"):
        kernbench.simulate(lambda: None, topology=MULTI_SIP, world_size=0)


def _bad_group(ranks: list[int]) -> None:
    dist.init_process_group()
    dist.new_group(ranks)


@pytest.mark.parametrize("ranks", [[0, 0], [0, 2], [-1, 1], [1, 1, 0]])
def test_new_group_with_repeated_or_out_of_range_ranks(ranks) -> None:
    with pytest.raises(RankError) as info:
        run(_bad_group, 2, ranks)
    cause = info.value.__cause__
    assert isinstance(cause, DistributedError)
    assert "must be distinct and in 0..1" in str(cause)


def _groups_in_different_order() -> None:
    dist.init_process_group()
    if dist.get_rank() == 0:
        dist.new_group([0, 1])
    else:
        dist.new_group([1, 2])


def test_new_group_created_differently_on_different_ranks() -> None:
    with pytest.raises(RankError) as info:
        run(_groups_in_different_order, 3)
    assert "same groups in the same order" in str(info.value.__cause__)


def _init_args(kind: str) -> None:
    if kind == "rank":
        dist.init_process_group("gloo", rank=0, world_size=2)
    else:
        dist.init_process_group("gloo", world_size=3)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("rank", "init_process_group(rank=0) was called on rank 1"),
        ("size", "init_process_group(world_size=3) but this run has 2 ranks"),
    ],
)
def test_init_process_group_with_wrong_rank_or_world_size(kind, message) -> None:
    with pytest.raises(RankError) as info:
        run(_init_args, 2, kind)
    assert message in str(info.value.__cause__)


def _send_to(peer: int | None) -> None:
    dist.init_process_group()
    dist.send(torch.ones(4), dst=dist.get_rank() if peer is None else peer)


@pytest.mark.parametrize(
    ("peer", "message"),
    [(None, "send: rank 0 cannot send to itself"), (5, "peer rank 5 is not in 0..1")],
    ids=["self", "missing"],
)
def test_send_to_self_or_to_a_missing_rank(peer, message) -> None:
    with pytest.raises(RankError) as info:
        run(_send_to, 2, peer)
    assert info.value.rank == 0
    assert isinstance(info.value.__cause__, DistributedError)
    assert message in str(info.value.__cause__)


def _non_member_collective() -> None:
    dist.init_process_group()
    group = dist.new_group([0])
    return dist.all_reduce(torch.ones(4), group=group)


def test_collective_on_a_group_the_rank_is_not_in_warns_and_returns_none() -> None:
    # As PyTorch: rank 1 gets GroupMember.NON_GROUP_MEMBER, warns and skips the call.
    with pytest.warns(UserWarning, match="Running all_reduce on global rank 1 which does not"):
        result = run(_non_member_collective, 2)
    assert result.returns == [None, None]


def _foreign_tensor() -> None:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    # Every rank makes its tensor on device 0, then hands it to a collective.
    t = torch.zeros(8, device="ahbm:0")
    dist.all_reduce(t)


def test_a_tensor_on_another_device_is_refused_naming_it() -> None:
    import kernbench
    from kernbench.errors import DistributedError, RankError

    with pytest.raises(RankError) as info:
        kernbench.simulate(_foreign_tensor, topology="multi_sip")
    error = info.value
    assert error.rank == 1  # rank 0's tensor is on its own device
    assert isinstance(error.original, DistributedError)
    assert "sip0.cube0.pe0, which is not on rank 1's device 1" in str(error.original)


def test_a_run_collects_garbage_less_often_and_restores_the_collector() -> None:
    """Ranks run with a raised young-generation threshold; the caller's thresholds
    come back afterwards, also when a rank fails."""
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    def body() -> None:
        dist.init_process_group()
        seen.append(gc.get_threshold())
        if dist.get_rank() == 1:
            raise ValueError("rank 1 fails")

    with pytest.raises(RankError):
        run(body, 2)
    assert seen == [(GC_YOUNG_THRESHOLD, *before[1:])] * 2
    assert gc.get_threshold() == before


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("all_reduce", "#0 on WORLD was called by ranks [0] only; ranks [1, 2, 3] returned"),
        ("isend", "rank 0's isend to rank 1 (tag 0) on WORLD was never received by rank 1"),
        ("irecv", "rank 0's irecv from rank 1 (tag 0) on WORLD was never matched by a send"),
    ],
)
def test_an_async_call_no_rank_matched_is_an_error_at_the_end(kind, says) -> None:
    def body() -> None:
        dist.init_process_group()
        t = torch.ones(16)
        if dist.get_rank() == 0:
            if kind == "all_reduce":
                dist.all_reduce(t, async_op=True)
            elif kind == "isend":
                dist.isend(t, dst=1)
            else:
                dist.irecv(t, src=1)

    with pytest.raises(CollectiveMismatchError, match="no other rank matched") as caught:
        kernbench.simulate(body, topology="multi_sip", world_size=4)
    assert says in str(caught.value) and 0 in caught.value.blocked


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda: dist.barrier(device_ids=[99]), "device_ids must be a list of one device index"),
        (
            lambda: dist.device_mesh.init_device_mesh("cuda", (2, 2), mesh_dim_names=("a", "a")),
            "mesh_dim_names ('a', 'a') must be unique",
        ),
    ],
)
def test_arguments_torch_refuses_are_refused(call, says) -> None:
    def body() -> None:
        dist.init_process_group()
        call()

    with pytest.raises(RankError) as caught:
        kernbench.simulate(body, topology="multi_sip", world_size=4)
    assert isinstance(caught.value.__cause__, DistributedError)
    assert says in str(caught.value.__cause__)


# ------------------------------------------------------------------ arguments torch refuses
def _rank_error(fn, ws: int = 2) -> BaseException:
    with pytest.raises(RankError) as info:
        run(fn, ws)
    return info.value.original


def _gather_list_on_a_non_destination() -> None:
    dist.init_process_group()
    t = torch.ones(4)
    dist.gather(t, gather_list=[torch.zeros(4), torch.zeros(4)], dst=0)  # every rank


def _scatter_list_on_a_non_source() -> None:
    dist.init_process_group()
    t = torch.ones(4)
    dist.scatter(t, scatter_list=[torch.zeros(4), torch.zeros(4)], src=0)


def test_a_gather_or_scatter_list_on_another_rank_than_the_root_is_refused() -> None:
    error = _rank_error(_gather_list_on_a_non_destination)
    assert isinstance(error, DistributedError)
    assert "gather_list must NOT be specified on non-destination ranks" in str(error)
    assert "rank 1 is not the destination" in str(error)
    error = _rank_error(_scatter_list_on_a_non_source)
    assert "scatter_list must NOT be specified on non-source ranks" in str(error)


def _empty_lists_elsewhere() -> list[float]:
    dist.init_process_group()
    rank = dist.get_rank()
    t = torch.ones(2) * (rank + 1)
    gathered = [torch.zeros(2), torch.zeros(2)] if rank == 0 else []
    dist.gather(t, gather_list=gathered, dst=0)
    return [x.tolist() for x in gathered]


def test_an_empty_list_on_another_rank_is_fine_as_in_torch() -> None:
    result = run(_empty_lists_elsewhere, 2)
    assert result.returns == [[[1.0, 1.0], [2.0, 2.0]], []]


@pytest.mark.parametrize("root", ["0", 0.0, True])
def test_a_root_rank_that_is_not_an_int_is_refused(root) -> None:
    def body() -> None:
        dist.init_process_group()
        dist.broadcast(torch.ones(4), src=root)

    error = _rank_error(body)
    assert f"broadcast: the root rank must be an int (got {root!r})" in str(error)


def test_premul_sum_exists_and_says_what_to_do_instead() -> None:
    def body() -> None:
        dist.init_process_group()
        dist.all_reduce(torch.ones(4), op=dist.ReduceOp.PREMUL_SUM)

    error = _rank_error(body)
    assert "ReduceOp.PREMUL_SUM is not supported; scale the tensor first" in str(error)


def _work_results() -> tuple:
    dist.init_process_group()
    rank = dist.get_rank()
    t = torch.ones(4)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    buf = torch.zeros(2)
    if rank == 0:
        p2p = dist.isend(torch.ones(2), dst=1)
        try:
            p2p.source_rank()
        except DistributedError as exc:
            refused = str(exc)
        p2p.wait()
        return (work.result()[0] is t, len(work.result()), refused)
    p2p = dist.irecv(buf)  # from any source
    return (work.result()[0] is t, p2p.source_rank(), p2p.result()[0] is buf)


def test_work_result_and_source_rank_as_torch_has_them() -> None:
    first, second = run(_work_results, 2).returns
    assert first[:2] == (True, 1)
    assert "only a receive (irecv) has a source rank" in first[2]
    assert second == (True, 0, True)


def test_an_uneven_all_gather_names_the_tensor_and_what_to_do_instead() -> None:
    def body() -> None:
        dist.init_process_group()
        dist.all_gather([torch.zeros(4), torch.zeros(2)], torch.ones(4))

    error = _rank_error(body)
    assert "all_gather: tensor_list[1] tensor" in str(error)
    assert "(float32, 2 elements) does not match" in str(error)
    assert "pad them to one size, or call dist.broadcast(tensor_list[i], src=i)" in str(error)
