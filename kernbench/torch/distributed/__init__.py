"""``torch.distributed`` for simulated ranks: same names, arguments and defaults.

Import it as ``import kernbench.torch.distributed as dist``.  Collectives run
as programs on the PEs that hold the ranks' tensors, over IPCQ, and cost
simulated time; ``async_op=True`` returns a :class:`Work`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernbench.ccl import launch as ccl
from kernbench.ccl.comm import Region
from kernbench.distributed.scheduler import current_rank
from kernbench.distributed.world import ProcessGroup, Work, active_world, p2p_work
from kernbench.errors import CollectiveMismatchError, DistributedError
from kernbench.kernels.ranks import DistributedState, set_rank_provider
from kernbench.runtime.tensor import DeviceTensor

__all__ = [
    "Backend",
    "GroupMember",
    "P2POp",
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "batch_isend_irecv",
    "broadcast",
    "destroy_process_group",
    "gather",
    "get_backend",
    "get_rank",
    "get_world_size",
    "init_device_mesh",
    "init_process_group",
    "irecv",
    "is_available",
    "is_initialized",
    "isend",
    "new_group",
    "recv",
    "reduce",
    "reduce_op",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "send",
]

BACKEND = "ahbm"


class ReduceOp(enum.Enum):
    """Reduction operators (``dist.ReduceOp.SUM``, …)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.name}>"


reduce_op = ReduceOp  # the old alias


class Backend(str):
    AHBM = "ahbm"


class _NonGroupMember:
    def __repr__(self) -> str:
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    WORLD: Any = None  # the default group, resolved per run
    NON_GROUP_MEMBER = _NonGroupMember()


def is_available() -> bool:
    return True


# -- tensors ---------------------------------------------------------------------------
def _device(tensor: Any, what: str) -> DeviceTensor:
    """The device tensor behind a torch-like tensor, checked to be on the caller's device."""
    inner = tensor if isinstance(tensor, DeviceTensor) else getattr(tensor, "_dt", None)
    if not isinstance(inner, DeviceTensor):
        raise DistributedError(
            f"{what}: expected a device tensor (kernbench.torch tensor), "
            f"got {type(tensor).__name__}"
        )
    _check_on_device(inner, what)
    return inner


def _check_on_device(tensor: DeviceTensor, what: str) -> None:
    """A rank may only hand collectives tensors on its own device (its set_device)."""
    ctx = tensor._ctx
    device = ctx.current_device()
    if device is None:
        return
    sip, cube, pe = ctx.device_coords(device)
    for placement in tensor.placements:
        s = placement.shard
        if s.sip != sip or cube is not None and s.cube != cube or pe is not None and s.pe != pe:
            state = current_rank()
            who = f"rank {state.rank}" if state else "this rank"
            raise DistributedError(
                f"{what}: tensor {tensor.name!r} has a shard on {placement.pe_name}, which is "
                f"not on {who}'s device {device}; create the tensor while that device is "
                "current (torch.cuda.set_device) or pass it to the rank that owns it"
            )


def _sig(t: DeviceTensor, **others: Any) -> dict[str, Any]:
    """The arguments of a one-tensor collective that must agree across ranks."""
    return {"dtype": t.dtype.name, "shape": tuple(t.shape), **others}


def _desc(t: DeviceTensor) -> str:
    return f"{t.dtype.name}{list(t.shape)}"


# -- process group lifecycle -----------------------------------------------------------
def _world_rank() -> tuple[Any, int]:
    world = active_world()
    state = current_rank()
    if state is None:
        raise DistributedError("torch.distributed calls must be made from a rank")
    return world, state.rank


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: Any = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """Join the default group.  ``rank``/``world_size`` (or $RANK/$WORLD_SIZE) must match."""
    world, me = _world_rank()
    if me in world.initialised:
        raise DistributedError(
            f"rank {me}: init_process_group() was already called; the default process group "
            "is initialised once (destroy_process_group() first to start again)"
        )
    if world_size not in (-1, None) and int(world_size) != world.world_size:
        raise DistributedError(
            f"rank {me}: init_process_group(world_size={world_size}) but this run has "
            f"{world.world_size} ranks"
        )
    if rank not in (-1, None) and int(rank) != me:
        raise DistributedError(
            f"init_process_group(rank={rank}) was called on rank {me}: each rank must pass "
            "its own rank (ranks are numbered in the order processes are started)"
        )
    world.initialised.add(me)


def is_initialized() -> bool:
    try:
        world, me = _world_rank()
    except DistributedError:
        return False
    return me in world.initialised


def _initialised(what: str) -> tuple[Any, int]:
    world, me = _world_rank()
    if me not in world.initialised:
        raise DistributedError(
            f"rank {me} called {what} before init_process_group(); call "
            "dist.init_process_group() first"
        )
    return world, me


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    world, me = _world_rank()
    if group is None or group is world.world_group:
        world.initialised.discard(me)


def _group(group: Any, world: Any) -> ProcessGroup:
    if group is None or group is GroupMember.WORLD:
        return world.world_group
    if group is GroupMember.NON_GROUP_MEMBER:
        raise DistributedError("this rank is not a member of the group it passed")
    if isinstance(group, ProcessGroup):
        return group
    if hasattr(group, "_pg"):  # a one-dimensional DeviceMesh
        return group._pg
    raise DistributedError(f"group must be a ProcessGroup, got {type(group).__name__}")


def get_rank(group: Any = None) -> int:
    world, me = _initialised("get_rank()")
    return _group(group, world).group_rank(me) if group is not GroupMember.NON_GROUP_MEMBER else -1


def get_world_size(group: Any = None) -> int:
    world, me = _initialised("get_world_size()")
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    pg = _group(group, world)
    return pg.size() if pg.group_rank(me) >= 0 else -1


def get_backend(group: Any = None) -> str:
    _initialised("get_backend()")
    return BACKEND


def new_group(
    ranks: Sequence[int] | None = None,
    timeout: Any = None,
    backend: str | None = None,
    pg_options: Any = None,
    use_local_synchronization: bool = False,
    group_desc: str | None = None,
    device_id: Any = None,
) -> Any:
    """Every rank calls it in the same order; non-members get ``GroupMember.NON_GROUP_MEMBER``."""
    world, me = _initialised("new_group()")
    group = world.new_group(ranks)
    return group if group.group_rank(me) >= 0 else GroupMember.NON_GROUP_MEMBER


# -- collectives -----------------------------------------------------------------------
def _op(op: Any) -> str:
    if isinstance(op, ReduceOp):
        return op.value
    raise DistributedError(f"op must be a dist.ReduceOp (got {op!r})")


def _root(group: ProcessGroup, rank: int | None, group_rank: int | None, what: str) -> int:
    if group_rank is not None:
        if not 0 <= group_rank < group.size():
            raise DistributedError(f"{what}: group rank {group_rank} is not in {group!r}")
        return group_rank
    if rank is None:
        raise DistributedError(f"{what}: give the root rank")
    root = group.group_rank(int(rank))
    if root < 0:
        raise DistributedError(f"{what}: root rank {rank} is not a member of {group!r}")
    return root


def all_reduce(
    tensor: Any,
    op: ReduceOp = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    world, _ = _initialised("all_reduce")
    pg, t, red = _group(group, world), _device(tensor, "all_reduce"), _op(op)
    return world.collective(
        pg,
        "all_reduce",
        _sig(t, op=red, algorithm=algorithm),
        t,
        lambda ts: ccl.elementwise(world.ctx, "all_reduce", ts, redop=red, algorithm=algorithm),
        async_op,
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
    world, _ = _initialised("broadcast")
    pg, t = _group(group, world), _device(tensor, "broadcast")
    root = _root(pg, src, group_src, "broadcast")
    return world.collective(
        pg,
        "broadcast",
        _sig(t, src=pg.ranks[root], algorithm=algorithm),
        t,
        lambda ts: ccl.elementwise(world.ctx, "broadcast", ts, root=root, algorithm=algorithm),
        async_op,
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
    world, _ = _initialised("reduce")
    pg, t, red = _group(group, world), _device(tensor, "reduce"), _op(op)
    root = _root(pg, dst, group_dst, "reduce")
    return world.collective(
        pg,
        "reduce",
        _sig(t, dst=pg.ranks[root], op=red, algorithm=algorithm),
        t,
        lambda ts: ccl.elementwise(
            world.ctx, "reduce", ts, redop=red, root=root, algorithm=algorithm
        ),
        async_op,
    )


def all_gather(
    tensor_list: list[Any],
    tensor: Any,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    world, _ = _initialised("all_gather")
    pg, t = _group(group, world), _device(tensor, "all_gather")
    outs = [_device(x, "all_gather") for x in tensor_list]
    _check_count(outs, pg, "all_gather", "tensor_list")
    for out in outs:
        _same(out, t, "all_gather")
    return world.collective(
        pg,
        "all_gather",
        _sig(t, algorithm=algorithm),
        (outs, t),
        lambda ps: ccl.all_gather(world.ctx, [p[0] for p in ps], [p[1] for p in ps], algorithm),
        async_op,
    )


def all_gather_into_tensor(
    output_tensor: Any,
    input_tensor: Any,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    world, _ = _initialised("all_gather_into_tensor")
    pg = _group(group, world)
    out, t = _device(output_tensor, "all_gather_into_tensor"), _device(input_tensor, "")
    _sized(out, t.numel * pg.size(), t, "all_gather_into_tensor", "output_tensor")
    return world.collective(
        pg,
        "all_gather_into_tensor",
        {"input": _desc(t), "output": _desc(out), "algorithm": algorithm},
        (out, t),
        lambda ps: ccl.all_gather(world.ctx, [p[0] for p in ps], [p[1] for p in ps], algorithm),
        async_op,
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
    world, _ = _initialised("reduce_scatter")
    pg, out, red = _group(group, world), _device(output, "reduce_scatter"), _op(op)
    ins = [_device(x, "reduce_scatter") for x in input_list]
    _check_count(ins, pg, "reduce_scatter", "input_list")
    for x in ins:
        _same(x, out, "reduce_scatter")
    return world.collective(
        pg,
        "reduce_scatter",
        _sig(out, op=red, algorithm=algorithm),
        (out, ins),
        lambda ps: ccl.reduce_scatter(
            world.ctx, [p[0] for p in ps], [p[1] for p in ps], red, algorithm
        ),
        async_op,
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
    world, _ = _initialised("reduce_scatter_tensor")
    pg, red = _group(group, world), _op(op)
    out, t = _device(output, "reduce_scatter_tensor"), _device(input, "reduce_scatter_tensor")
    _sized(t, out.numel * pg.size(), out, "reduce_scatter_tensor", "input")
    return world.collective(
        pg,
        "reduce_scatter_tensor",
        {"output": _desc(out), "input": _desc(t), "op": red, "algorithm": algorithm},
        (out, t),
        lambda ps: ccl.reduce_scatter(
            world.ctx, [p[0] for p in ps], [p[1] for p in ps], red, algorithm
        ),
        async_op,
    )


def _rooted_list(
    op: str,
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
    world, me = _initialised(op)
    pg, t = _group(group, world), _device(tensor, op)
    root = _root(pg, rank, group_rank, op)
    blocks = None
    if pg.group_rank(me) == root:
        if tensors is None:
            raise DistributedError(f"{op}: the root rank {me} must pass {arg}")
        blocks = [_device(x, op) for x in tensors]
        _check_count(blocks, pg, op, arg)
        for b in blocks:
            _same(b, t, op)
    launch = getattr(ccl, op)
    return world.collective(
        pg,
        op,
        _sig(t, **{"dst" if op == "gather" else "src": pg.ranks[root]}, algorithm=algorithm),
        (t, blocks),
        lambda ps: launch(world.ctx, [p[0] for p in ps], ps[root][1], root, algorithm),
        async_op,
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


def _split_regions(
    t: DeviceTensor, splits: Sequence[int] | None, parts: int, what: str, arg: str
) -> list[Region]:
    lane = ccl.single_lane(t, what)
    rows = t.shape[0] if t.shape else 1
    row = t.numel // rows if rows else 0
    if splits is None:
        if rows % parts:
            raise DistributedError(
                f"{what}: dimension 0 of {t.name!r} ({rows}) does not split evenly over "
                f"{parts} ranks; pass {arg}"
            )
        splits = [rows // parts] * parts
    splits = [int(s) for s in splits]
    if len(splits) != parts or sum(splits) != rows or min(splits) < 0:
        raise DistributedError(
            f"{what}: {arg}={splits} must have {parts} non-negative entries summing to "
            f"dimension 0 of {t.name!r} ({rows})"
        )
    regions, start = [], 0
    for s in splits:
        regions.append(lane.region(start * row, (start + s) * row))
        start += s
    return regions


def all_to_all_single(
    output: Any,
    input: Any,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    world, _ = _initialised("all_to_all_single")
    pg = _group(group, world)
    out, t = _device(output, "all_to_all_single"), _device(input, "all_to_all_single")
    if out.dtype != t.dtype:
        raise DistributedError("all_to_all_single: output and input must have the same dtype")
    sends = _split_regions(
        t, input_split_sizes, pg.size(), "all_to_all_single", "input_split_sizes"
    )
    recvs = _split_regions(
        out, output_split_sizes, pg.size(), "all_to_all_single", "output_split_sizes"
    )
    return world.collective(
        pg,
        "all_to_all_single",
        {"dtype": t.dtype.name, "algorithm": algorithm},
        (sends, recvs),
        lambda ps: _all_to_all(world, pg, ps, algorithm),
        async_op,
    )


def all_to_all(
    output_tensor_list: list[Any],
    input_tensor_list: list[Any],
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    world, _ = _initialised("all_to_all")
    pg = _group(group, world)
    outs = [_device(x, "all_to_all") for x in output_tensor_list]
    ins = [_device(x, "all_to_all") for x in input_tensor_list]
    _check_count(outs, pg, "all_to_all", "output_tensor_list")
    _check_count(ins, pg, "all_to_all", "input_tensor_list")
    dtypes = {x.dtype.name for x in outs + ins}
    if len(dtypes) > 1:
        raise DistributedError(
            f"all_to_all: every tensor of output_tensor_list and input_tensor_list must have "
            f"the same dtype; got {sorted(dtypes)}"
        )
    sends = [ccl.single_lane(x, "all_to_all").region() for x in ins]
    recvs = [ccl.single_lane(x, "all_to_all").region() for x in outs]
    return world.collective(
        pg,
        "all_to_all",
        {"dtype": ins[0].dtype.name, "algorithm": algorithm},
        (sends, recvs),
        lambda ps: _all_to_all(world, pg, ps, algorithm),
        async_op,
    )


def _all_to_all(
    world: Any,
    pg: ProcessGroup,
    payloads: list[tuple[list[Region], list[Region]]],
    algorithm: str | None = None,
) -> Any:
    p = len(payloads)
    for r in range(p):
        for j in range(p):
            sent, expected = payloads[r][0][j].count, payloads[j][1][r].count
            if sent != expected:
                src, dst = pg.ranks[r], pg.ranks[j]
                raise CollectiveMismatchError(
                    f"all_to_all: rank {src} sends {sent} elements to rank {dst}, which "
                    f"expects {expected} from it",
                    {
                        src: f"all_to_all sending {sent} elements to rank {dst}",
                        dst: f"all_to_all expecting {expected} elements from rank {src}",
                    },
                )
    return ccl.all_to_all(world.ctx, [s for s, _ in payloads], [r for _, r in payloads], algorithm)


def barrier(
    group: Any = None,
    async_op: bool = False,
    device_ids: Any = None,
    *,
    algorithm: str | None = None,
) -> Work | None:
    world, me = _initialised("barrier")
    pg = _group(group, world)
    return world.collective(
        pg,
        "barrier",
        {"algorithm": algorithm},
        _device_pe(world, me),
        lambda pes: ccl.barrier(world.ctx, pes, algorithm),
        async_op,
    )


def _compile_ranks() -> DistributedState:
    """The process group as compile_and_load sees it (the kernel layer asks, never imports)."""
    if not is_initialized():
        return DistributedState(False)
    return DistributedState(True, get_rank(), get_world_size(), barrier)


set_rank_provider(_compile_ranks)


def _device_pe(world: Any, rank: int) -> str:
    return world.ctx.device_pe(rank)


def _check_count(items: list, pg: ProcessGroup, what: str, arg: str) -> None:
    if len(items) != pg.size():
        raise DistributedError(
            f"{what}: {arg} has {len(items)} tensors; the group has {pg.size()} ranks"
        )


def _same(a: DeviceTensor, b: DeviceTensor, what: str) -> None:
    if (a.dtype, a.numel) != (b.dtype, b.numel):
        raise DistributedError(
            f"{what}: tensor {a.name!r} ({a.dtype.name}, {a.numel} elements) does not match "
            f"{b.name!r} ({b.dtype.name}, {b.numel} elements)"
        )


def _sized(t: DeviceTensor, numel: int, like: DeviceTensor, what: str, arg: str) -> None:
    if t.numel != numel or t.dtype != like.dtype:
        raise DistributedError(
            f"{what}: {arg} {t.name!r} has {t.numel} {t.dtype.name} elements; it needs "
            f"{numel} {like.dtype.name} elements (group size x the other tensor)"
        )


# -- point to point ----------------------------------------------------------------------
def _peer(group: Any, world: Any, rank: int | None, group_rank: int | None, what: str) -> int:
    pg = _group(group, world)
    if group_rank is not None:
        return pg.ranks[group_rank]
    if rank is None:
        raise DistributedError(f"{what}: give the peer rank")
    return int(rank)


def isend(
    tensor: Any,
    dst: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> Work:
    world, _ = _initialised("isend")
    peer = _peer(group, world, dst, group_dst, "isend")
    return p2p_work(world, world.post_send(_device(tensor, "isend"), peer, tag))


def irecv(
    tensor: Any,
    src: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_src: int | None = None,
) -> Work:
    world, _ = _initialised("irecv")
    peer = (
        None if src is None and group_src is None else _peer(group, world, src, group_src, "irecv")
    )
    return p2p_work(world, world.post_recv(_device(tensor, "irecv"), peer, tag))


def send(
    tensor: Any,
    dst: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> None:
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(
    tensor: Any,
    src: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_src: int | None = None,
) -> int:
    """Receive into ``tensor``; returns the sender's rank."""
    work = irecv(tensor, src, group, tag, group_src)
    work.wait()
    return work._rv.source


@dataclass
class P2POp:
    """One point-to-point operation for :func:`batch_isend_irecv`."""

    op: Any
    tensor: Any
    peer: int | None = None
    group: Any = None
    tag: int = 0
    group_peer: int | None = None

    def __post_init__(self) -> None:
        if self.op not in (isend, irecv):
            raise DistributedError("P2POp.op must be dist.isend or dist.irecv")


def batch_isend_irecv(p2p_op_list: list[P2POp]) -> list[Work]:
    works = []
    for item in p2p_op_list:
        if item.op is isend:
            works.append(isend(item.tensor, item.peer, item.group, item.tag, item.group_peer))
        else:
            works.append(irecv(item.tensor, item.peer, item.group, item.tag, item.group_peer))
    return works


from kernbench.torch.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: E402,F401

__all__ += ["DeviceMesh"]
_ = np  # numpy is used by device_mesh through this package
