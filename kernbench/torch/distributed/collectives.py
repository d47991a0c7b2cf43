"""The collectives of ``torch.distributed``: same names, arguments and defaults as PyTorch.

Every rank of the group calls the collective; the call joins the group's
rendezvous with the arguments that must agree across ranks, and the last rank
to arrive launches the collective as programs on the PEs that hold the
tensors (:mod:`kernbench.ccl.launch`).  ``algorithm=`` (KernBench only) names
a catalogue configuration instead of the default choice.  ``all_to_all`` and
``all_to_all_single`` are in :mod:`kernbench.torch.distributed.all_to_all`.
"""

from __future__ import annotations

import datetime
from typing import Any

from kernbench.ccl import launch as ccl
from kernbench.distributed.world import Work
from kernbench.errors import DistributedError
from kernbench.torch.distributed.arguments import (
    check_count,
    check_same,
    check_sized,
    collective_call,
    describe,
    reduce_op_name,
    signature,
)
from kernbench.torch.distributed.constants import ReduceOp

__all__ = [
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "monitored_barrier",
    "broadcast",
    "gather",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
]


def all_reduce(
    tensor: Any,
    op: ReduceOp = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("all_reduce", group)
    if call is None:
        return None
    t, red = call.tensor(tensor), reduce_op_name(op, call.what)
    return call.submit(
        signature(t, op=red, algorithm=algorithm),
        t,
        lambda ts: ccl.elementwise(call.ctx, "all_reduce", ts, redop=red, algorithm=algorithm),
        async_op,
        [tensor],
    )


def broadcast(
    tensor: Any,
    src: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_src: int | None = None,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("broadcast", group)
    if call is None:
        return None
    t = call.tensor(tensor)
    root = call.root(src, group_src)
    return call.submit(
        signature(t, src=call.group.ranks[root], algorithm=algorithm),
        t,
        lambda ts: ccl.elementwise(call.ctx, "broadcast", ts, root=root, algorithm=algorithm),
        async_op,
        [tensor],
    )


def reduce(
    tensor: Any,
    dst: int | None = None,
    op: ReduceOp = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
    group_dst: int | None = None,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("reduce", group)
    if call is None:
        return None
    t, red = call.tensor(tensor), reduce_op_name(op, call.what)
    root = call.root(dst, group_dst)
    return call.submit(
        signature(t, dst=call.group.ranks[root], op=red, algorithm=algorithm),
        t,
        lambda ts: ccl.elementwise(
            call.ctx, "reduce", ts, redop=red, root=root, algorithm=algorithm
        ),
        async_op,
        [tensor],
    )


def all_gather(
    tensor_list: list[Any],
    tensor: Any,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("all_gather", group)
    if call is None:
        return None
    t = call.tensor(tensor)
    outs = call.tensors(tensor_list)
    check_count(outs, call.group, call.what, "tensor_list")
    for i, out in enumerate(outs):
        check_same(out, t, call.what, "tensor_list", i)
    return call.submit(
        signature(t, algorithm=algorithm),
        (outs, t),
        lambda ps: ccl.all_gather(call.ctx, [p[0] for p in ps], [p[1] for p in ps], algorithm),
        async_op,
        list(tensor_list),
    )


def all_gather_into_tensor(
    output_tensor: Any,
    input_tensor: Any,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("all_gather_into_tensor", group)
    if call is None:
        return None
    out, t = call.tensor(output_tensor), call.tensor(input_tensor)
    check_sized(out, t.numel * call.group.size(), t, call.what, "output_tensor")
    return call.submit(
        {"input": describe(t), "output": describe(out), "algorithm": algorithm},
        (out, t),
        lambda ps: ccl.all_gather(call.ctx, [p[0] for p in ps], [p[1] for p in ps], algorithm),
        async_op,
        [output_tensor],
    )


def reduce_scatter(
    output: Any,
    input_list: list[Any],
    op: ReduceOp = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("reduce_scatter", group)
    if call is None:
        return None
    out, red = call.tensor(output), reduce_op_name(op, call.what)
    ins = call.tensors(input_list)
    check_count(ins, call.group, call.what, "input_list")
    for x in ins:
        check_same(x, out, call.what)
    return call.submit(
        signature(out, op=red, algorithm=algorithm),
        (out, ins),
        lambda ps: ccl.reduce_scatter(
            call.ctx, [p[0] for p in ps], [p[1] for p in ps], red, algorithm
        ),
        async_op,
        [output],
    )


def reduce_scatter_tensor(
    output: Any,
    input: Any,
    op: ReduceOp = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("reduce_scatter_tensor", group)
    if call is None:
        return None
    red = reduce_op_name(op, call.what)
    out, t = call.tensor(output), call.tensor(input)
    check_sized(t, out.numel * call.group.size(), out, call.what, "input")
    return call.submit(
        {"output": describe(out), "input": describe(t), "op": red, "algorithm": algorithm},
        (out, t),
        lambda ps: ccl.reduce_scatter(
            call.ctx, [p[0] for p in ps], [p[1] for p in ps], red, algorithm
        ),
        async_op,
        [output],
    )


def _rooted_list(
    what: str,
    tensor: Any,
    tensors: list[Any] | None,
    rank: int | None,
    group_rank: int | None,
    group: Any,
    async_op: bool,
    algorithm: str | None,
    arg: str,
) -> Work | None:
    """gather and scatter: the root passes one tensor per group member in ``arg``."""
    call = collective_call(what, group)
    if call is None:
        return None
    t = call.tensor(tensor)
    root = call.root(rank, group_rank)
    blocks = None
    if call.group.group_rank(call.rank) == root:
        if tensors is None:
            raise DistributedError(f"{what}: the root rank {call.rank} must pass {arg}")
        blocks = call.tensors(tensors)
        check_count(blocks, call.group, what, arg)
        for b in blocks:
            check_same(b, t, what)
    elif tensors:  # as torch: a list (even [t]) on another rank is a mistake, [] and None not
        side = "destination" if what == "gather" else "source"
        raise DistributedError(
            f"{what}: argument {arg} must NOT be specified on non-{side} ranks (as in torch); "
            f"rank {call.rank} is not the {side}: pass {arg}=None"
        )
    launch = getattr(ccl, what)
    root_arg = "dst" if what == "gather" else "src"
    return call.submit(
        signature(t, **{root_arg: call.group.ranks[root]}, algorithm=algorithm),
        (t, blocks),
        lambda ps: launch(call.ctx, [p[0] for p in ps], ps[root][1], root, algorithm),
        async_op,
        [tensor] if what == "scatter" else list(tensors or []),
    )


def gather(
    tensor: Any,
    gather_list: list[Any] | None = None,
    dst: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_dst: int | None = None,
    *,
    algorithm: str | None = None,
) -> Work | None:
    return _rooted_list(
        "gather", tensor, gather_list, dst, group_dst, group, async_op, algorithm, "gather_list"
    )


def scatter(
    tensor: Any,
    scatter_list: list[Any] | None = None,
    src: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_src: int | None = None,
    *,
    algorithm: str | None = None,
) -> Work | None:
    return _rooted_list(
        "scatter", tensor, scatter_list, src, group_src, group, async_op, algorithm, "scatter_list"
    )


def monitored_barrier(group: Any = None, timeout: Any = None, wait_all_ranks: bool = False) -> None:
    """torch's barrier that names the ranks that fail to arrive: here the barrier itself (a
    rank that never arrives is named by the simulator's deadlock check, whatever the
    ``timeout``).  Blocking, as torch's; ``timeout`` is a ``datetime.timedelta`` or None."""
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise DistributedError(
            f"monitored_barrier: timeout must be a datetime.timedelta or None, got {timeout!r}"
        )
    if not isinstance(wait_all_ranks, bool):
        raise DistributedError(
            f"monitored_barrier: wait_all_ranks must be True or False, got {wait_all_ranks!r}"
        )
    barrier(group)


def barrier(
    group: Any = None,
    async_op: bool = False,
    device_ids: Any = None,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("barrier", group)
    if call is None:
        return None
    if device_ids is not None:
        devices = call.ctx.num_devices
        ids = list(device_ids) if isinstance(device_ids, list | tuple) else [device_ids]
        if len(ids) != 1 or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < devices for i in ids
        ):
            raise DistributedError(
                f"barrier: device_ids must be a list of one device index in 0..{devices - 1} "
                f"(got {device_ids!r})"
            )
    return call.submit(
        {"algorithm": algorithm},
        call.ctx.device_pe(call.rank),
        lambda pes: ccl.barrier(call.ctx, pes, algorithm),
        async_op,
    )
