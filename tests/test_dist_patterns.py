"""torch.distributed patterns on simulated ranks, with values checked against NumPy.

Ranks are the SIPs of ``topologies/multi_sip.yaml`` (world sizes 1-4) or the
cubes of ``topologies/default.yaml`` with ``system.device_level=cube`` (world
size 8).  Every rank function returns what it holds; the test body compares
it with the same computation done by NumPy, for float32 and int32.
"""

from __future__ import annotations

import datetime

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.multiprocessing as mp
from kernbench.errors import DistributedError, ProcessTargetError, RankError
from kernbench.runtime import RuntimeContext, current_context, use_context

MULTI_SIP = "multi_sip"
DEFAULT = "default"
CUBE = ("system.device_level=cube",)

# (topology, overrides, world size)
SIP = {ws: (MULTI_SIP, (), ws) for ws in (1, 2, 3, 4)}
CUBE4 = (DEFAULT, CUBE, 4)
CUBE8 = (DEFAULT, CUBE, 8)
CONFIGS = [pytest.param(SIP[ws], id=f"sip-ws{ws}") for ws in (1, 2, 3, 4)] + [
    pytest.param(CUBE8, id="cube-ws8")
]
P2P_CONFIGS = [p for p in CONFIGS if p.values[0][2] > 1]
DTYPES = ["float32", "int32"]
TORCH_DTYPES = {"float32": torch.float32, "int32": torch.int32}


def sim(fn, config, *args, timing_only: bool = False) -> kernbench.SimResult:
    topology, overrides, ws = config
    return kernbench.simulate(
        fn,
        topology=topology,
        world_size=ws,
        overrides=overrides,
        args=args,
        timing_only=timing_only,
    )


def data(rank: int, n: int, dtype: str, seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: small ints (exact in any order) or floats in [-1, 1)."""
    rng = np.random.default_rng(10_000 * seed + rank)
    if dtype == "int32":
        return rng.integers(-20, 21, n).astype(np.int32)
    return rng.uniform(-1.0, 1.0, n).astype(np.float32)


def check(actual: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == np.dtype(dtype), actual.dtype
    assert actual.shape == expected.shape
    if dtype == "int32":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def total(arrays: list[np.ndarray], dtype: str) -> np.ndarray:
    return np.sum(arrays, axis=0).astype(dtype)


# ---------------------------------------------------------------------------- point to point
def _blocking_p2p(dtype: str, n: int) -> dict:
    dist.init_process_group("gloo")
    rank, ws = dist.get_rank(), dist.get_world_size()
    out: dict = {}
    if rank == 0:
        for dst in range(1, ws):
            dist.send(torch.tensor(data(dst, n, dtype, seed=1)), dst=dst)
        buf = torch.zeros(n, dtype=TORCH_DTYPES[dtype])
        out["from"] = {}
        for _ in range(ws - 1):
            sender = dist.recv(buf)  # src=None: any rank, returns the sender
            out["from"][sender] = buf.numpy()
    else:
        buf = torch.zeros(n, dtype=TORCH_DTYPES[dtype])
        out["sender"] = dist.recv(buf, src=0)
        out["got"] = buf.numpy()
        dist.send(torch.tensor(data(rank, n, dtype, seed=2)), dst=0)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", P2P_CONFIGS)
def test_blocking_send_recv_and_recv_from_any_source(config, dtype) -> None:
    ws, n = config[2], 16
    res = sim(_blocking_p2p, config, dtype, n)
    for rank in range(1, ws):
        assert res.returns[rank]["sender"] == 0
        check(res.returns[rank]["got"], data(rank, n, dtype, seed=1), dtype)
    received = res.returns[0]["from"]
    assert sorted(received) == list(range(1, ws))
    for sender, values in received.items():
        check(values, data(sender, n, dtype, seed=2), dtype)


def _nonblocking_p2p(dtype: str, n: int) -> dict:
    dist.init_process_group("gloo")
    rank, ws = dist.get_rank(), dist.get_world_size()
    # the tutorial's pattern: rank 0 isends, the others irecv, everybody waits
    td = TORCH_DTYPES[dtype]
    tensor = torch.tensor(data(0, n, dtype)) if rank == 0 else torch.zeros(n, dtype=td)
    if rank == 0:
        reqs = [dist.isend(tensor=tensor, dst=dst) for dst in range(1, ws)]
    else:
        reqs = [dist.irecv(tensor=tensor, src=0)]
    waited = [req.wait() for req in reqs]
    completed = [req.is_completed() for req in reqs]
    # a ring exchange: post both sides first, then wait (blocking calls would deadlock)
    mine = torch.tensor(data(rank, n, dtype, seed=3))
    left = torch.zeros(n, dtype=TORCH_DTYPES[dtype])
    send_req = dist.isend(mine, (rank + 1) % ws)
    recv_req = dist.irecv(left, (rank - 1) % ws)
    recv_req.wait()
    send_req.wait()
    return {
        "tensor": tensor.numpy(),
        "waited": waited,
        "completed": completed,
        "left": left.numpy(),
        "ring_done": (send_req.is_completed(), recv_req.is_completed()),
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", P2P_CONFIGS)
def test_isend_irecv_wait(config, dtype) -> None:
    ws, n = config[2], 32
    res = sim(_nonblocking_p2p, config, dtype, n)
    for rank, out in enumerate(res.returns):
        check(out["tensor"], data(0, n, dtype), dtype)
        assert out["waited"] == [True] * (ws - 1 if rank == 0 else 1)
        assert all(out["completed"])
        check(out["left"], data((rank - 1) % ws, n, dtype, seed=3), dtype)
        assert out["ring_done"] == (True, True)


def _batch_ring(dtype: str, n: int) -> dict:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    mine = torch.tensor(data(rank, n, dtype))
    from_left = torch.zeros(n, dtype=TORCH_DTYPES[dtype])
    from_right = torch.zeros(n, dtype=TORCH_DTYPES[dtype])
    ops = [
        dist.P2POp(dist.isend, mine, (rank + 1) % ws),
        dist.P2POp(dist.isend, mine, (rank - 1) % ws, tag=1),
        dist.P2POp(dist.irecv, from_left, (rank - 1) % ws),
        dist.P2POp(dist.irecv, from_right, (rank + 1) % ws, tag=1),
    ]
    works = dist.batch_isend_irecv(ops)
    assert len(works) == 4 and all(isinstance(w, dist.Work) for w in works)
    for w in works:
        w.wait()
    return {"left": from_left.numpy(), "right": from_right.numpy()}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", P2P_CONFIGS)
def test_p2pop_batch_isend_irecv_ring(config, dtype) -> None:
    ws, n = config[2], 8
    res = sim(_batch_ring, config, dtype, n)
    for rank, out in enumerate(res.returns):
        check(out["left"], data((rank - 1) % ws, n, dtype), dtype)
        check(out["right"], data((rank + 1) % ws, n, dtype), dtype)


def test_p2pop_rejects_other_functions() -> None:
    with pytest.raises(DistributedError, match="isend or dist.irecv"):
        dist.P2POp(dist.send, None, 1)


# -------------------------------------------------------------------------------- groups
def _group_all_reduce(dtype: str, n: int) -> dict:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    members = list(range(0, ws, 2))
    group = dist.new_group(members)
    tensor = torch.tensor(data(rank, n, dtype))
    out = {"group_rank": dist.get_rank(group), "group_size": dist.get_world_size(group)}
    out["non_member"] = group is dist.GroupMember.NON_GROUP_MEMBER
    if not out["non_member"]:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    out["tensor"] = tensor.numpy()
    # the world group as an explicit group, too
    everyone = dist.new_group()
    whole = torch.tensor(data(rank, n, dtype, seed=4))
    dist.all_reduce(whole, group=everyone)
    out["world"] = whole.numpy()
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_all_reduce_on_new_group(config, dtype) -> None:
    ws, n = config[2], 24
    members = list(range(0, ws, 2))
    res = sim(_group_all_reduce, config, dtype, n)
    group_sum = total([data(r, n, dtype) for r in members], dtype)
    world_sum = total([data(r, n, dtype, seed=4) for r in range(ws)], dtype)
    for rank, out in enumerate(res.returns):
        if rank in members:
            assert not out["non_member"]
            assert out["group_rank"] == members.index(rank)
            assert out["group_size"] == len(members)
            check(out["tensor"], group_sum, dtype)
        else:
            assert out["non_member"]
            assert (out["group_rank"], out["group_size"]) == (-1, -1)
            check(out["tensor"], data(rank, n, dtype), dtype)  # untouched
        check(out["world"], world_sum, dtype)


def _mesh(dtype: str, shape: tuple[int, int]) -> dict:
    dist.init_process_group()
    rank = dist.get_rank()
    mesh = dist.init_device_mesh("ahbm", shape, mesh_dim_names=("dp", "tp"))
    tp = torch.tensor(data(rank, 8, dtype))
    dist.all_reduce(tp, group=mesh.get_group("tp"))
    dp = torch.tensor(data(rank, 8, dtype, seed=5))
    dist.all_reduce(dp, group=mesh.get_group(mesh_dim="dp"))
    sub = mesh["tp"]
    via_sub = torch.tensor(data(rank, 8, dtype, seed=6))
    dist.all_reduce(via_sub, group=sub.get_group())
    return {
        "tp": tp.numpy(),
        "dp": dp.numpy(),
        "via_sub": via_sub.numpy(),
        "local": (mesh.get_local_rank("dp"), mesh.get_local_rank("tp")),
        "coordinate": mesh.get_coordinate(),
        "mesh_rank": mesh.get_rank(),
        "sizes": (mesh.size(), mesh.size("dp"), mesh.size("tp")),
        "group_ranks": (
            dist.get_rank(mesh.get_group("dp")),
            dist.get_rank(mesh.get_group("tp")),
        ),
        "sub": (sub.mesh.tolist(), sub.size(), sub.get_local_rank(), sub.mesh_dim_names),
    }


MESHES = [
    pytest.param(SIP[4], (2, 2), id="sip-2x2"),
    pytest.param(CUBE4, (2, 2), id="cube-2x2"),
    pytest.param(SIP[1], (1, 1), id="sip-1x1"),
    pytest.param(SIP[2], (1, 2), id="sip-1x2"),
    pytest.param(SIP[3], (3, 1), id="sip-3x1"),
    pytest.param(CUBE8, (2, 4), id="cube-2x4"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("config", "shape"), MESHES)
def test_device_mesh_per_dimension_groups(config, shape, dtype) -> None:
    ws = config[2]
    res = sim(_mesh, config, dtype, shape)
    grid = np.arange(ws).reshape(shape)
    for rank, out in enumerate(res.returns):
        i, j = divmod(rank, shape[1])
        row, column = grid[i, :].tolist(), grid[:, j].tolist()
        check(out["tp"], total([data(r, 8, dtype) for r in row], dtype), dtype)
        check(out["dp"], total([data(r, 8, dtype, seed=5) for r in column], dtype), dtype)
        check(out["via_sub"], total([data(r, 8, dtype, seed=6) for r in row], dtype), dtype)
        assert out["local"] == (i, j)
        assert out["coordinate"] == [i, j]
        assert out["mesh_rank"] == rank
        assert out["sizes"] == (ws, shape[0], shape[1])
        assert out["group_ranks"] == (i, j)
        assert out["sub"] == (row, shape[1], j, ("tp",))


# --------------------------------------------------------------------------- ring by hand
def allreduce(send, recv) -> None:
    """The tutorial's ring all-reduce from isend/recv."""
    rank = dist.get_rank()
    size = dist.get_world_size()
    send_buff = send.clone()
    recv_buff = send.clone()
    accum = send.clone()
    left = ((rank - 1) + size) % size
    right = (rank + 1) % size
    for i in range(size - 1):
        if i % 2 == 0:
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    recv[:] = accum[:]


def _hand_ring(dtype: str, n: int) -> np.ndarray:
    dist.init_process_group("gloo")
    send = torch.tensor(data(dist.get_rank(), n, dtype))
    recv = torch.zeros(n, dtype=TORCH_DTYPES[dtype])
    allreduce(send, recv)
    return recv.numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_hand_written_ring_all_reduce(config, dtype) -> None:
    ws, n = config[2], 64
    res = sim(_hand_ring, config, dtype, n)
    expected = total([data(r, n, dtype) for r in range(ws)], dtype)
    for out in res.returns:
        check(out, expected, dtype)


# ----------------------------------------------------------------------------- collectives
def _gather_scatter_tensor(dtype: str, n: int) -> dict:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    gathered = torch.zeros(ws * n, dtype=TORCH_DTYPES[dtype])
    dist.all_gather_into_tensor(gathered, torch.tensor(data(rank, n, dtype)))
    scattered = torch.zeros(n, dtype=TORCH_DTYPES[dtype])
    dist.reduce_scatter_tensor(scattered, torch.tensor(data(rank, ws * n, dtype, seed=7)))
    return {"gathered": gathered.numpy(), "scattered": scattered.numpy()}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_all_gather_into_tensor_and_reduce_scatter_tensor(config, dtype) -> None:
    ws, n = config[2], 8
    res = sim(_gather_scatter_tensor, config, dtype, n)
    gathered = np.concatenate([data(r, n, dtype) for r in range(ws)])
    reduced = total([data(r, ws * n, dtype, seed=7) for r in range(ws)], dtype)
    for rank, out in enumerate(res.returns):
        check(out["gathered"], gathered, dtype)
        check(out["scattered"], reduced[rank * n : (rank + 1) * n], dtype)


def _splits(src: int, dst: int) -> int:
    """Rows rank ``src`` sends to rank ``dst``: uneven, and zero for some pairs."""
    return (src + 2 * dst) % 3


def _a2a_rows(src: int, ws: int, dtype: str) -> np.ndarray:
    rows = sum(_splits(src, j) for j in range(ws))
    return data(src, rows * 2, dtype, seed=8).reshape(rows, 2)


def _all_to_all_single(dtype: str) -> np.ndarray:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    inp = torch.tensor(_a2a_rows(rank, ws, dtype))
    in_splits = [_splits(rank, j) for j in range(ws)]
    out_splits = [_splits(j, rank) for j in range(ws)]
    out = torch.zeros(sum(out_splits), 2, dtype=TORCH_DTYPES[dtype])
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    return out.numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_all_to_all_single_uneven_splits(config, dtype) -> None:
    ws = config[2]
    res = sim(_all_to_all_single, config, dtype)
    for rank, out in enumerate(res.returns):
        pieces = []
        for src in range(ws):
            rows = _a2a_rows(src, ws, dtype)
            start = sum(_splits(src, j) for j in range(rank))
            pieces.append(rows[start : start + _splits(src, rank)])
        check(out, np.concatenate(pieces), dtype)


def _roots(ws: int) -> list[int]:
    return sorted({ws - 1, ws // 2})


def _broadcast_reduce(dtype: str, n: int) -> dict:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    out: dict = {"broadcast": {}, "reduce": {}}
    for root in _roots(ws):
        t = torch.tensor(data(rank, n, dtype, seed=root))
        dist.broadcast(t, src=root)
        out["broadcast"][root] = t.numpy()
        t = torch.tensor(data(rank, n, dtype, seed=100 + root))
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        out["reduce"][root] = t.numpy()
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_broadcast_and_reduce_from_non_zero_root(config, dtype) -> None:
    ws, n = config[2], 16
    res = sim(_broadcast_reduce, config, dtype, n)
    for root in _roots(ws):
        reduced = total([data(r, n, dtype, seed=100 + root) for r in range(ws)], dtype)
        for rank, out in enumerate(res.returns):
            check(out["broadcast"][root], data(root, n, dtype, seed=root), dtype)
            if rank == root:
                check(out["reduce"][root], reduced, dtype)


OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]
INT_OPS = ["BAND", "BOR", "BXOR"]


def _op_input(rank: int, op: str, dtype: str) -> np.ndarray:
    if op == "PRODUCT":  # keep the product of up to 8 ranks small and exact
        rng = np.random.default_rng(rank)
        if dtype == "int32":
            return (rng.integers(1, 4, 8) * rng.choice([-1, 1], 8)).astype(np.int32)
        return rng.uniform(0.5, 1.5, 8).astype(np.float32)
    if op in INT_OPS:
        return np.random.default_rng(rank).integers(0, 1 << 16, 8).astype(np.int32)
    return data(rank, 8, dtype, seed=9)


def _expected_op(op: str, arrays: list[np.ndarray], dtype: str) -> np.ndarray:
    stack = np.stack(arrays)
    if op == "SUM":
        return stack.sum(axis=0).astype(dtype)
    if op == "AVG":
        if dtype == "int32":  # integers truncate toward zero
            return np.trunc(stack.sum(axis=0) / len(arrays)).astype(dtype)
        return (stack.sum(axis=0) / len(arrays)).astype(dtype)
    reducers = {
        "PRODUCT": np.multiply,
        "MIN": np.minimum,
        "MAX": np.maximum,
        "BAND": np.bitwise_and,
        "BOR": np.bitwise_or,
        "BXOR": np.bitwise_xor,
    }
    return reducers[op].reduce(stack, axis=0).astype(dtype)


def _every_op(dtype: str) -> dict:
    dist.init_process_group()
    rank = dist.get_rank()
    out = {}
    for op in OPS + (INT_OPS if dtype == "int32" else []):
        t = torch.tensor(_op_input(rank, op, dtype))
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out[op] = t.numpy()
    old = torch.tensor(_op_input(rank, "MAX", dtype))
    dist.all_reduce(old, op=dist.reduce_op.MAX)  # the old alias
    out["reduce_op.MAX"] = old.numpy()
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_all_reduce_with_every_reduce_op(config, dtype) -> None:
    ws = config[2]
    res = sim(_every_op, config, dtype)
    ops = OPS + (INT_OPS if dtype == "int32" else [])
    for out in res.returns:
        assert set(out) == {*ops, "reduce_op.MAX"}
        for op in ops:
            expected = _expected_op(op, [_op_input(r, op, dtype) for r in range(ws)], dtype)
            check(out[op], expected, dtype)
        check(out["reduce_op.MAX"], out["MAX"], dtype)


def test_reduce_op_alias_is_reduce_op() -> None:
    assert dist.reduce_op is dist.ReduceOp
    assert dist.reduce_op.SUM is dist.ReduceOp.SUM
    assert {op.name for op in dist.ReduceOp} == {*OPS, *INT_OPS, "PREMUL_SUM"}  # refused when used


def _bitwise_on_float() -> None:
    dist.init_process_group()
    dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BXOR)


def test_bitwise_reduce_ops_need_integer_tensors() -> None:
    with pytest.raises(RankError, match="BXOR needs an integer tensor") as info:
        sim(_bitwise_on_float, SIP[2])
    assert isinstance(info.value.__cause__, DistributedError)


def _bool_masks(rank: int, n: int) -> np.ndarray:
    return np.random.default_rng(rank).random(n) < 0.5


def _bool_collectives(n: int) -> dict:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    out: dict = {}
    for op in ("SUM", "MAX", "MIN", "PRODUCT"):
        t = torch.from_numpy(_bool_masks(rank, n))
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out[op] = t.numpy()
    gathered = [torch.zeros(n, dtype=torch.bool) for _ in range(ws)]
    dist.all_gather(gathered, torch.from_numpy(_bool_masks(rank, n)))
    out["all_gather"] = [t.numpy() for t in gathered]
    root = torch.from_numpy(_bool_masks(rank, n))
    dist.broadcast(root, src=ws - 1)
    out["broadcast"] = root.numpy()
    return out


@pytest.mark.parametrize("config", [SIP[2], SIP[3]], ids=["sip-ws2", "sip-ws3"])
def test_collectives_on_bool_tensors_combine_as_logical_or_and_and(config) -> None:
    ws, n = config[2], 37
    masks = [_bool_masks(r, n) for r in range(ws)]
    anyone, everyone = np.logical_or.reduce(masks), np.logical_and.reduce(masks)
    for got in sim(_bool_collectives, config, n).returns:
        for op, expected in (("SUM", anyone), ("MAX", anyone), ("MIN", everyone)):
            assert got[op].dtype == np.bool_
            np.testing.assert_array_equal(got[op], expected)
        np.testing.assert_array_equal(got["PRODUCT"], everyone)
        for r in range(ws):
            np.testing.assert_array_equal(got["all_gather"][r], masks[r])
        np.testing.assert_array_equal(got["broadcast"], masks[ws - 1])


def _bool_reduce(op: str) -> None:
    dist.init_process_group()
    dist.all_reduce(torch.ones(4, dtype=torch.bool), op=getattr(dist.ReduceOp, op))


@pytest.mark.parametrize(
    ("op", "says"),
    [
        ("AVG", "Cannot use ReduceOp.AVG with boolean inputs"),
        ("BAND", "BAND needs an integer tensor .got bool.; for bool tensors MIN"),
    ],
)
def test_reduce_ops_bool_tensors_cannot_take_say_what_to_use(op, says) -> None:
    with pytest.raises(RankError, match=f"{says}.*MAX \\(or SUM\\) a logical or") as info:
        sim(_bool_reduce, SIP[2], op)
    assert isinstance(info.value.__cause__, DistributedError)


def _list_collectives(dtype: str, n: int) -> dict:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    td = TORCH_DTYPES[dtype]
    root = ws - 1
    out: dict = {}
    # all_gather into a list
    tensor_list = [torch.zeros(n, dtype=td) for _ in range(ws)]
    dist.all_gather(tensor_list, torch.tensor(data(rank, n, dtype)))
    out["all_gather"] = [t.numpy() for t in tensor_list]
    # reduce_scatter from a list: block j of every rank is reduced onto rank j
    output = torch.zeros(n, dtype=td)
    dist.reduce_scatter(
        output, [torch.tensor(data(rank, n, dtype, seed=20 + j)) for j in range(ws)]
    )
    out["reduce_scatter"] = output.numpy()
    # gather to a non-zero root
    gather_list = [torch.zeros(n, dtype=td) for _ in range(ws)] if rank == root else None
    dist.gather(torch.tensor(data(rank, n, dtype, seed=30)), gather_list, dst=root)
    out["gather"] = [t.numpy() for t in gather_list] if gather_list else None
    # scatter from a non-zero root
    scatter_list = (
        [torch.tensor(data(j, n, dtype, seed=40)) for j in range(ws)] if rank == root else None
    )
    received = torch.zeros(n, dtype=td)
    dist.scatter(received, scatter_list, src=root)
    out["scatter"] = received.numpy()
    # all_to_all with lists of different sizes per peer
    inputs = [torch.tensor(data(rank, rank + j + 1, dtype, seed=50 + j)) for j in range(ws)]
    outputs = [torch.zeros(j + rank + 1, dtype=td) for j in range(ws)]
    dist.all_to_all(outputs, inputs)
    out["all_to_all"] = [t.numpy() for t in outputs]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_list_collectives(config, dtype) -> None:
    ws, n = config[2], 8
    root = ws - 1
    res = sim(_list_collectives, config, dtype, n)
    for rank, out in enumerate(res.returns):
        assert len(out["all_gather"]) == ws
        for j, got in enumerate(out["all_gather"]):
            check(got, data(j, n, dtype), dtype)
        reduced = total([data(r, n, dtype, seed=20 + rank) for r in range(ws)], dtype)
        check(out["reduce_scatter"], reduced, dtype)
        if rank == root:
            for j, got in enumerate(out["gather"]):
                check(got, data(j, n, dtype, seed=30), dtype)
        else:
            assert out["gather"] is None
        check(out["scatter"], data(rank, n, dtype, seed=40), dtype)
        for j, got in enumerate(out["all_to_all"]):
            check(got, data(j, j + rank + 1, dtype, seed=50 + rank), dtype)


def _barrier() -> tuple[int, int]:
    dist.init_process_group()
    rank = dist.get_rank()
    t = torch.zeros(64)
    for _ in range(2 * rank + 1):  # later ranks arrive later
        t += 1
    arrive = current_context().now
    dist.barrier()
    return arrive, current_context().now


@pytest.mark.parametrize("config", CONFIGS)
def test_barrier_releases_nobody_before_the_last_rank_arrives(config) -> None:
    res = sim(_barrier, config)
    arrivals = [a for a, _ in res.returns]
    leaves = [b for _, b in res.returns]
    if config[2] > 1:
        assert arrivals == sorted(arrivals) and arrivals[0] < arrivals[-1]
    assert min(leaves) >= max(arrivals)
    assert all(b > a for a, b in res.returns)


def _async(dtype: str, n: int) -> dict:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    t = torch.tensor(data(rank, n, dtype))
    work = dist.all_reduce(t, async_op=True)
    before = work.is_completed()
    waited = work.wait()
    after = (work.is_completed(), work.is_success(), work.exception())
    b = torch.tensor(data(rank, n, dtype, seed=11))
    gathered = torch.zeros(ws * n, dtype=TORCH_DTYPES[dtype])
    works = [
        dist.broadcast(b, src=ws - 1, async_op=True),
        dist.all_gather_into_tensor(gathered, torch.tensor(data(rank, n, dtype)), async_op=True),
        dist.barrier(async_op=True),
    ]
    kinds = {type(w).__name__ for w in works} | {type(work).__name__}
    for w in works:
        assert w.wait() is True
    return {
        "sum": t.numpy(),
        "before": before,
        "waited": waited,
        "after": after,
        "kinds": kinds,
        "all_done": all(w.is_completed() for w in works),
        "broadcast": b.numpy(),
        "gathered": gathered.numpy(),
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_async_op_returns_work(config, dtype) -> None:
    ws, n = config[2], 16
    res = sim(_async, config, dtype, n)
    expected = total([data(r, n, dtype) for r in range(ws)], dtype)
    for out in res.returns:
        assert out["before"] is False  # the collective takes simulated time
        assert out["waited"] is True
        assert out["after"] == (True, True, None)
        assert out["kinds"] == {"Work"}
        assert out["all_done"]
        check(out["sum"], expected, dtype)
        check(out["broadcast"], data(ws - 1, n, dtype, seed=11), dtype)
        check(out["gathered"], np.concatenate([data(r, n, dtype) for r in range(ws)]), dtype)


# ------------------------------------------------------------------ process group lifecycle
def _lifecycle(rank: int, ws: int) -> dict:
    out: dict = {"before": dist.is_initialized()}
    try:
        dist.get_rank()
    except DistributedError as exc:
        out["get_rank_before"] = str(exc)
    dist.init_process_group("gloo", rank=rank, world_size=ws)
    out["after"] = dist.is_initialized()
    out["rank"], out["size"] = dist.get_rank(), dist.get_world_size()
    out["backend"] = dist.get_backend()
    try:
        dist.init_process_group("gloo")
    except DistributedError as exc:
        out["twice"] = str(exc)
    out["non_member"] = (
        dist.get_rank(dist.GroupMember.NON_GROUP_MEMBER),
        dist.get_world_size(dist.GroupMember.NON_GROUP_MEMBER),
    )
    dist.destroy_process_group()
    out["destroyed"] = dist.is_initialized()
    dist.init_process_group()
    out["again"] = dist.is_initialized()
    return out


@pytest.mark.parametrize("config", CONFIGS)
def test_init_rank_queries_and_second_init(config) -> None:
    topology, overrides, ws = config
    res = kernbench.simulate(
        _lifecycle, topology=topology, world_size=ws, overrides=overrides, rank_args=True
    )
    for rank, out in enumerate(res.returns):
        assert out["before"] is False
        assert "before init_process_group" in out["get_rank_before"]
        assert out["after"] is True
        assert (out["rank"], out["size"]) == (rank, ws)
        assert out["backend"] == "gloo"  # the name it was given, as PyTorch answers
        assert "already called" in out["twice"]
        assert out["non_member"] == (-1, -1)
        assert out["destroyed"] is False
        assert out["again"] is True


def test_is_initialized_outside_a_run_is_false() -> None:
    assert dist.is_available() is True
    assert dist.is_initialized() is False


# ------------------------------------------------------------------------- torch-like use
def _torch_like(dtype: str, n: int) -> dict:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    td = TORCH_DTYPES[dtype]
    a = torch.zeros(n, dtype=td)
    a += 1
    b = torch.tensor(data(rank, n, dtype))
    a[:] += b[:]
    c = torch.ones(n, dtype=td)
    c += c
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    before = current_context().now
    start.record()
    dist.all_reduce(a)
    end.record()
    after = current_context().now
    end.synchronize()
    torch.cuda.synchronize()
    return {
        "a": a.numpy(),
        "c": c.numpy(),
        "ms": start.elapsed_time(end),
        "interval_ps": (start.time_ps, end.time_ps, before, after),
        "device": (torch.cuda.current_device(), a.device.index, b.device.type, a.is_cuda),
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONFIGS)
def test_torch_like_tensors_and_events_inside_ranks(config, dtype) -> None:
    ws, n = config[2], 128
    res = sim(_torch_like, config, dtype, n)
    expected = total([data(r, n, dtype) + 1 for r in range(ws)], dtype)
    for rank, out in enumerate(res.returns):
        check(out["a"], expected, dtype)
        check(out["c"], np.full(n, 2, dtype), dtype)
        t_start, t_end, before, after = out["interval_ps"]
        assert (t_start, t_end) == (before, after)
        assert out["ms"] > 0
        assert out["ms"] == (after - before) / 1e9  # ms on the simulated clock
        assert out["device"] == (rank, rank, "ahbm", True)


# ------------------------------------------------------------------ determinism and modes
def _mixed(n: int) -> None:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    t = torch.ones(n) * float(rank + 1)
    dist.all_reduce(t)
    if rank == 0:
        buf = torch.zeros(n)
        for _ in range(ws - 1):
            dist.recv(buf)  # any source: the match order must be reproducible too
    else:
        dist.send(t, dst=0)
    out = torch.zeros(ws * n)
    dist.all_gather_into_tensor(out, t)
    work = dist.broadcast(t, src=ws - 1, async_op=True)
    t += 1
    work.wait()
    dist.barrier()


@pytest.mark.parametrize("config", [SIP[4], CUBE8], ids=["sip-ws4", "cube-ws8"])
def test_same_script_twice_gives_identical_trace_and_time(config) -> None:
    first, second = sim(_mixed, config, 256), sim(_mixed, config, 256)
    assert first.trace and first.elapsed_ps > 0
    assert first.trace == second.trace
    assert first.elapsed_ps == second.elapsed_ps
    assert first.per_rank_ps == second.per_rank_ps
    assert first.report["simulated_time_ps"] == second.report["simulated_time_ps"]


@pytest.mark.parametrize("config", [SIP[3], CUBE8], ids=["sip-ws3", "cube-ws8"])
def test_functional_and_timing_only_take_the_same_time(config) -> None:
    functional = sim(_mixed, config, 256)
    timing = sim(_mixed, config, 256, timing_only=True)
    assert timing.report["timing_only"] is True
    assert functional.elapsed_ps == timing.elapsed_ps
    assert functional.per_rank_ps == timing.per_rank_ps


# ------------------------------------------------------------- runners other than simulate
def _worker(rank: int, size: int, results: dict) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=size)
    t = torch.tensor(data(rank, 8, "int32"))
    dist.all_reduce(t)
    results[rank] = t.numpy()


def test_multiprocessing_process_and_spawn_run_ranks_together() -> None:
    with use_context(RuntimeContext(MULTI_SIP)):
        results: dict = {}
        processes = [mp.Process(target=_worker, args=(r, 3, results)) for r in range(3)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
        assert [p.exitcode for p in processes] == [0, 0, 0]
        expected = total([data(r, 8, "int32") for r in range(3)], "int32")
        assert sorted(results) == [0, 1, 2]
        for values in results.values():
            check(values, expected, "int32")
        spawned: dict = {}
        mp.spawn(_worker, args=(2, spawned), nprocs=2)
        assert sorted(spawned) == [0, 1]
        for values in spawned.values():
            check(values, total([data(r, 8, "int32") for r in range(2)], "int32"), "int32")


def _no_rank_index() -> None:
    pass


@pytest.mark.parametrize(
    ("start", "says"),
    [
        (
            lambda: mp.spawn(5, nprocs=2),
            "Process-1: the target 5 (int) is not callable; pass the function each rank runs",
        ),
        (
            lambda: mp.Process(target=3).start(),
            "Process-1: the target 3 (int) is not callable",
        ),
        (
            lambda: mp.spawn(_no_rank_index, nprocs=2),
            "Process-1: _no_rank_index() cannot be called as fn(i, *args), i the process "
            "index, with args=(0,): too many positional arguments",
        ),
        (
            lambda: mp.spawn(_worker, args=(2,), nprocs=2),
            "_worker(rank, size, results) cannot be called as fn(i, *args), "
            "i the process index, with args=(0, 2): missing a required argument: 'results'",
        ),
        (
            lambda: mp.spawn(_worker, args=5, nprocs=2),
            "mp.spawn: args must be a tuple of positional arguments, not int 5; "
            "write args=(5,) for one",
        ),
        (
            lambda: mp.Process(target=_worker, args=(0, 1, {}), kwargs=[1]),
            "Process-1: kwargs must be a dict of keyword arguments, not list",
        ),
        (
            lambda: mp.Process(target=_worker, args=(0, 1), kwargs={"result": {}}).start(),
            "with args=(0, 1), kwargs={'result': {}}: missing a required argument: 'results'",
        ),
    ],
)
def test_a_process_target_that_cannot_run_is_refused_before_any_rank(start, says) -> None:
    """What a child process would fail with at its first line, said before the run starts
    (a TypeError too, as Python's would be), and nothing is left to join."""
    with use_context(RuntimeContext(MULTI_SIP)):
        try:
            with pytest.raises(ProcessTargetError) as info:
                start()
            assert says in str(info.value)
            assert isinstance(info.value, TypeError)
        finally:
            mp.forget_unjoined()
        ran: dict = {}
        mp.spawn(_worker, args=(2, ran), nprocs=2)  # the next start is not disturbed
        assert sorted(ran) == [0, 1]


def test_simulate_defaults_to_one_rank_per_device() -> None:
    res = kernbench.simulate(
        lambda: dist.init_process_group() or dist.get_world_size(), topology=MULTI_SIP
    )
    assert res.returns == [4, 4, 4, 4]
    assert len(res.per_rank_ps) == 4 and res.report["world_size"] == 4


def test_top_level_simulate_is_exported() -> None:
    from kernbench.bench.simulate import SimResult, simulate

    assert kernbench.simulate is simulate
    assert kernbench.SimResult is SimResult


# -- a group's collectives run in call order; synchronize waits for them --------------
def _issue_order(rank: int, world: int) -> dict:
    dist.init_process_group()
    t = torch.ones(4) * (rank + 1)
    first = dist.all_reduce(t, async_op=True)
    second = dist.all_reduce(t, async_op=True)  # on the first's result, as on one stream
    first.wait()
    second.wait()
    u = torch.ones(4) * (rank + 1)
    dist.all_reduce(u, async_op=True)
    dist.broadcast(u, src=0)  # after the all-reduce: the reduced values
    v = torch.ones(4) * (rank + 1)
    pending = dist.all_reduce(v, async_op=True)
    torch.cuda.synchronize()
    synced = (v.tolist(), pending.is_completed())
    x = torch.ones(4) * (rank + 1)
    behind = dist.all_reduce(x, async_op=True)
    dist.barrier()
    return {
        "twice": t.tolist(),
        "broadcast": u.tolist(),
        "synchronized": synced,
        "barrier": (x.tolist(), behind.is_completed()),
    }


@pytest.mark.parametrize("topology", ["multi_sip", "ring8"])
def test_a_groups_collectives_run_in_the_order_they_were_called(topology) -> None:
    world = 4
    res = kernbench.simulate(_issue_order, topology=topology, world_size=world, rank_args=True)
    total = sum(range(1, world + 1))
    for r in res.returns:
        assert r["twice"] == [float(total * world)] * 4
        assert r["broadcast"] == [float(total)] * 4
        assert r["synchronized"] == ([float(total)] * 4, True)
        assert r["barrier"] == ([float(total)] * 4, True)
    # One after another: the second all-reduce starts when the first ends, the
    # broadcast when the all-reduce before it does.
    spans = [(c["launch_ps"], c["end_ps"]) for c in res.report["collectives"]]
    assert spans[1][0] >= spans[0][1] and spans[3][0] >= spans[2][1]


def _all_on_device_zero(rank: int, world: int) -> None:
    torch.cuda.set_device(0)  # every rank binds the same device
    dist.init_process_group()
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)


def test_ranks_sharing_a_device_are_refused_as_nccl_refuses_a_duplicate_gpu() -> None:
    with pytest.raises(RankError) as caught:
        kernbench.simulate(_all_on_device_zero, topology="ring8", world_size=4, rank_args=True)
    error = caught.value.__cause__
    assert isinstance(error, DistributedError)
    assert "ranks [0, 1, 2, 3] all have device 0 current" in str(error)
    assert "set_device(int(os.environ['LOCAL_RANK']))" in str(error)


def _torchrun_variables(rank: int, world: int) -> dict:
    import os

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    t = torch.ones(2, device="cuda") * (dist.get_rank() + 1)
    dist.all_reduce(t)
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
    seen = [os.environ.get(k) for k in keys]
    os.environ["RANK"] = f"mine{rank}"  # a rank's own view; the others keep theirs
    dist.barrier()
    popped = os.environ.pop("LOCAL_RANK", None)
    return {
        "env": seen,
        "value": t.tolist(),
        "local": local,
        "after": (os.environ["RANK"], popped, "LOCAL_RANK" in os.environ),
    }


def test_ranks_see_the_variables_torchrun_sets() -> None:
    import os

    before = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    res = kernbench.simulate(
        _torchrun_variables, topology="multi_sip", world_size=3, rank_args=True
    )
    for rank, r in enumerate(res.returns):
        assert r["env"] == [str(rank), str(rank), "3", "3"] and r["local"] == rank
        assert r["value"] == [6.0, 6.0]
        assert r["after"] == (f"mine{rank}", str(rank), False)
    assert {k: os.environ.get(k) for k in before} == before  # restored after the run
    assert "RANK" not in os.environ and type(os.environ).__name__ == "_Environ"


def _group_queries(rank: int, world: int) -> dict:
    dist.init_process_group("gloo")
    group = dist.new_group([1, 3])
    out: dict = {"backend": dist.get_backend()}
    if rank in (1, 3):
        out["ranks"] = dist.get_process_group_ranks(group)
        out["global"] = dist.get_global_rank(group, 1)
        out["local"] = dist.get_group_rank(group, rank)
    for name in ("all_reduce_coalesced", "reduce_scatter_tensor_coalesced"):
        try:
            getattr(dist, name)
        except AttributeError as exc:
            out[name] = str(exc)
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)
    mine, groups = dist.new_subgroups(2)
    t = torch.ones(1) * rank
    dist.all_reduce(t, group=mine)
    out["pairs"] = ([dist.get_process_group_ranks(g) for g in groups], t.item())
    odd, _ = dist.new_subgroups_by_enumeration([[1, 3], [0]])
    out["odd"] = None if odd is None else dist.get_process_group_ranks(odd)
    for call, says in (
        (lambda: dist.new_subgroups(3), r"world size \(4\) must be divisible by group_size \(3\)"),
        (lambda: dist.new_subgroups_by_enumeration([[0, 1], [1]]), "rank 1 has appeared in both"),
        (lambda: dist.monitored_barrier(timeout=5), "timeout must be a datetime.timedelta"),
    ):
        with pytest.raises(DistributedError, match=says):
            call()
    return out


def test_group_rank_queries_and_the_backend_name_as_given() -> None:
    res = kernbench.simulate(_group_queries, topology="multi_sip", world_size=4, rank_args=True)
    for rank, out in enumerate(res.returns):
        assert out["backend"] == "gloo"
        if rank in (1, 3):
            assert (out["ranks"], out["global"], out["local"]) == ([1, 3], 3, rank // 2)
        assert (
            "dist.all_reduce_coalesced is not in KernBench; all_reduce per tensor"
            in (out["all_reduce_coalesced"])
        )
        pair = [rank - rank % 2, rank - rank % 2 + 1]
        assert out["pairs"] == ([[0, 1], [2, 3]], float(sum(pair)))
        assert out["odd"] == {0: [0], 1: [1, 3], 2: None, 3: [1, 3]}[rank]


def _mesh_first(rank: int, world: int) -> list:
    mesh = dist.device_mesh.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    t = torch.ones(2) * (rank + 1)
    dist.all_reduce(t, group=mesh["tp"])
    return t.tolist()


def test_init_device_mesh_joins_the_default_group_as_torch_does() -> None:
    res = kernbench.simulate(_mesh_first, topology="multi_sip", world_size=4, rank_args=True)
    assert res.returns == [[3.0, 3.0], [3.0, 3.0], [7.0, 7.0], [7.0, 7.0]]


def _synchronized(rank: int, world: int) -> tuple:
    dist.init_process_group()
    t = torch.ones(2) * rank
    work = dist.all_reduce(t, async_op=True)
    work.synchronize()
    return work.is_completed(), t.tolist()


def test_work_synchronize_waits_for_the_collective() -> None:
    # Work.synchronize raised AttributeError
    res = kernbench.simulate(_synchronized, topology="multi_sip", world_size=3, rank_args=True)
    assert res.returns == [(True, [3.0, 3.0])] * 3


def _mesh_shape(rank: int, world: int) -> tuple:
    mesh = dist.device_mesh.init_device_mesh("cuda", (1, world), mesh_dim_names=("dp", "tp"))
    groups = mesh.get_all_groups()
    ranks = [dist.get_process_group_ranks(g) for g in groups]
    return mesh.shape, mesh["tp"].shape, ranks, groups[1] is mesh.get_group("tp")


def test_device_mesh_shape_and_all_groups_as_torch() -> None:
    # mesh.shape raised AttributeError
    res = kernbench.simulate(_mesh_shape, topology="multi_sip", world_size=3, rank_args=True)
    assert res.returns == [((1, 3), (3,), [[r], [0, 1, 2]], True) for r in range(3)]


def _p2p_then_synchronize(rank: int, world: int) -> tuple:
    dist.init_process_group()
    t = torch.ones(4) * rank
    work = None
    if rank == 0:
        work = dist.isend(t, dst=1)
    elif rank == 1:
        work = dist.irecv(t, src=0)
    ops = [dist.P2POp(dist.isend, t, (rank + 1) % world)] * 2
    assert ops[0] == ops[1] and ops[0] != dist.P2POp(dist.isend, t, 0)  # by identity
    torch.cuda.synchronize()
    return t.tolist(), None if work is None else work.is_completed()


def test_synchronize_waits_for_isend_and_irecv_too() -> None:
    res = kernbench.simulate(
        _p2p_then_synchronize, topology="multi_sip", world_size=3, rank_args=True
    )
    assert res.returns[1] == ([0.0] * 4, True) and res.returns[0] == ([0.0] * 4, True)
    assert res.returns[2] == ([2.0] * 4, None)


def _never_waited(rank: int, world: int) -> None:
    dist.init_process_group()
    dist.all_reduce(torch.ones(1 << 14), async_op=True)  # no wait(): the device still runs it


def test_an_async_collective_never_waited_for_still_runs_before_the_run_ends() -> None:
    res = kernbench.simulate(_never_waited, topology="ring8", world_size=8, rank_args=True)
    (call,) = res.report["collectives"]
    assert call["end_ps"] is not None and call["end_ps"] > call["launch_ps"]
    assert res.elapsed_ps == call["end_ps"] > max(res.per_rank_ps)


def _on_group_world() -> tuple:
    dist.init_process_group()
    t = torch.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t, group=dist.group.WORLD)
    world = dist.group.WORLD
    return t[0].item(), world.size(), world.rank(), world is dist.GroupMember.WORLD


def test_dist_group_world_is_the_default_group_as_in_torch() -> None:
    assert dist.group.WORLD is None  # outside a run, as before init_process_group in torch
    returns = sim(_on_group_world, ("ring8", (), 4)).returns
    assert returns == [(10.0, 4, rank, True) for rank in range(4)]


def _fp16_average(kind: str) -> tuple:
    dist.init_process_group()
    rank = dist.get_rank()
    avg = dist.ReduceOp.AVG
    if kind == "all_reduce":
        g = torch.full((8,), 20000.0, dtype=torch.float16)
        dist.all_reduce(g, op=avg)
        return tuple(g.tolist())
    if kind == "reduce_scatter":
        inp = torch.full((16,), 20000.0, dtype=torch.float16)
        out = torch.zeros(4, dtype=torch.float16)
        dist.reduce_scatter_tensor(out, inp, op=avg)
        return tuple(out.tolist()), tuple(inp.tolist())  # the input is left as it was
    g = torch.full((8,), 20000.0 + 16 * rank, dtype=torch.float16)  # exact in float16
    dist.reduce(g, dst=1, op=avg)
    return tuple(g.tolist())


@pytest.mark.parametrize("backend", ["detailed", "fast"])
@pytest.mark.parametrize("kind", ["all_reduce", "reduce_scatter", "reduce"])
def test_a_float16_average_whose_sum_overflows_is_finite_as_ncclavg_gives_it(kind, backend):
    """NCCL's ncclAvg on floats multiplies every input by 1/p before summing (PreMulSum):
    four ranks of 20000 in float16 average to 20000, though their sum (80000) passes
    float16's 65504.  The simulated time is that of sum-then-divide (one more pass)."""
    returns = sim(_fp16_average, ("ring8", (f"simulation.backend={backend}",), 4), kind).returns
    if kind == "all_reduce":
        assert returns == [(20000.0,) * 8] * 4
    elif kind == "reduce_scatter":
        assert returns == [((20000.0,) * 4, (20000.0,) * 16)] * 4
    else:  # the root gets the average (20024, to float16's 16), the others keep their inputs
        assert all(abs(v - 20024.0) <= 16 for v in returns[1])
        assert [returns[r] for r in (0, 2, 3)] == [(20000.0 + 16 * r,) * 8 for r in (0, 2, 3)]


def _one_send() -> None:
    dist.init_process_group()
    t = torch.ones(100)
    if dist.get_rank() == 0:
        dist.send(t, dst=1)
    else:
        dist.recv(t, src=0)


def test_a_transfer_reports_the_bytes_it_moved() -> None:
    res = kernbench.simulate(_one_send, topology="multi_sip", world_size=2)
    assert [(c["op"], c["bytes"]) for c in res.report["collectives"]] == [("send_recv", 400)]


def _availability() -> list:
    dist.init_process_group(backend=dist.Backend.NCCL)
    return [
        dist.is_nccl_available(),
        dist.is_gloo_available(),
        dist.is_backend_available("NCCL"),
        dist.is_backend_available("tpu"),
        dist.is_torchelastic_launched(),
        dist.get_backend(),
        dist.Backend("GLOO"),
    ]


def test_backend_names_and_availability_as_torch_spells_them() -> None:
    res = kernbench.simulate(_availability, topology="multi_sip", world_size=2)
    assert res.returns == [[True, True, True, False, False, "nccl", "gloo"]] * 2


def _p2p_per_group(n: int) -> dict:
    dist.init_process_group()
    rank = dist.get_rank()
    a, b = dist.new_group([0, 1]), dist.new_group([0, 1])
    if rank == 0:
        works = [
            dist.isend(torch.tensor(data(0, n, "float32", seed=1)), dst=1, group=a),
            dist.isend(torch.tensor(data(0, n, "float32", seed=2)), dst=1, group=b),
            dist.isend(torch.tensor(data(0, n, "float32", seed=3)), dst=1),
        ]
        works += dist.batch_isend_irecv(
            [
                dist.P2POp(dist.isend, torch.tensor(data(0, n, "float32", seed=4)), 1, group=a),
                dist.P2POp(dist.isend, torch.tensor(data(0, n, "float32", seed=5)), 1, group=b),
            ]
        )
        for work in works:
            work.wait()
        return {}
    if rank == 1:
        # Posted in the reverse order: only per-group matching pairs each with its own send.
        bufs = {name: torch.zeros(n) for name in ("world", "b", "a", "batch_b", "batch_a")}
        sources = [dist.recv(bufs["world"], src=0)]
        sources.append(dist.recv(bufs["b"], src=0, group=b))
        sources.append(dist.recv(bufs["a"], group=a))  # any member of a
        works = dist.batch_isend_irecv(
            [
                dist.P2POp(dist.irecv, bufs["batch_b"], group=b, group_peer=0),
                dist.P2POp(dist.irecv, bufs["batch_a"], 0, group=a),
            ]
        )
        for work in works:
            work.wait()
        sources += [work.source_rank() for work in works]
        return {"sources": sources, **{name: t.numpy() for name, t in bufs.items()}}
    return {}


@pytest.mark.parametrize("ws", [2, 3])
def test_p2p_matches_per_group_between_the_same_ranks_and_tag(ws) -> None:
    n = 8
    res = sim(_p2p_per_group, SIP[ws], n)
    out = res.returns[1]
    assert out["sources"] == [0, 0, 0, 0, 0]
    expected = {"a": 1, "b": 2, "world": 3, "batch_a": 4, "batch_b": 5}
    for name, seed in expected.items():
        check(out[name], data(0, n, "float32", seed=seed), "float32")


def _recv_from_any_member_of_a_group(n: int) -> dict:
    dist.init_process_group()
    rank = dist.get_rank()
    pair = dist.new_group([0, 2])
    if rank == 1:  # on the default group: a receive on ``pair`` must not take it
        dist.send(torch.tensor(data(1, n, "int32")), dst=0)
    elif rank == 2:
        dist.send(torch.tensor(data(2, n, "int32")), group=pair, group_dst=0)
    else:
        on_pair, on_world = torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32)
        sources = [dist.recv(on_pair, group=pair), dist.recv(on_world)]
        return {"sources": sources, "pair": on_pair.numpy(), "world": on_world.numpy()}
    return {}


def test_recv_from_any_source_on_a_group_takes_only_that_groups_sends() -> None:
    res = sim(_recv_from_any_member_of_a_group, SIP[3], 8)
    out = res.returns[0]
    assert out["sources"] == [2, 1]
    check(out["pair"], data(2, 8, "int32"), "int32")
    check(out["world"], data(1, 8, "int32"), "int32")
