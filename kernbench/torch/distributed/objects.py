"""Collectives of picklable Python objects: ``all_gather_object``,
``broadcast_object_list``, ``gather_object``, ``scatter_object_list``,
``send_object_list`` and ``recv_object_list``, with PyTorch's arguments.

As PyTorch does it: each object is pickled on its rank, copied to the rank's
device as a ``uint8`` tensor, the sizes and then the bytes (padded to the
largest object where the collective needs equal blocks) move with the tensor
collectives PyTorch uses, and the receivers read them back and unpickle them.
The simulated time is that of exactly those copies and collectives.  Sizes
travel as PyTorch's int64, two int32 words each (tensors here hold at most 32
bits): the same bytes.

In timing-only mode tensors carry sizes, not bytes: a receiver then takes the
pickled bytes host-side (every rank runs in this process) once the same
copies and collectives are done, so a program gets the same objects and the
same simulated time in both modes.
"""

from __future__ import annotations

import pickle
import weakref
from collections import defaultdict
from typing import Any

import numpy as np

import kernbench.torch as torch
from kernbench.distributed.world import ProcessGroup, World
from kernbench.errors import DistributedError, KernBenchError
from kernbench.torch.distributed.arguments import (
    ObjectCount,
    initialised,
    not_in_group,
    on_behalf_of,
    peer_rank,
    resolve_group,
    root_group_rank,
)
from kernbench.torch.distributed.collectives import (
    all_gather_into_tensor,
    broadcast,
    gather,
    scatter,
)
from kernbench.torch.distributed.p2p import recv, send

__all__ = [
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "recv_object_list",
    "scatter_object_list",
    "send_object_list",
]

# The user's frame counted from not_in_group's caller: the object collective (1), user (2).
_USER_FRAME = 2
# int32 words per size: PyTorch sends sizes as int64.
_WORDS = 2


class _Exchange:
    """The pickled bytes of one world's object calls, for timing-only receivers.

    A group's object collectives are numbered per rank in the order the rank
    calls them (every member calls them in the same order, as the tensor
    collectives beneath require), point-to-point ones per (sender, receiver)
    pair; a call's bytes are dropped once every receiver has taken them.
    """

    def __init__(self) -> None:
        self._next: dict[tuple, int] = defaultdict(int)
        self._posted: dict[tuple, dict[int, list[bytes]]] = {}
        self._waiting: dict[tuple, int] = {}

    def key(self, call: tuple, caller: Any) -> tuple:
        """The next key of ``call`` (a group's calls, or one pair's) as ``caller`` counts."""
        number = self._next[(*call, caller)]
        self._next[(*call, caller)] = number + 1
        return (*call, number)

    def post(self, key: tuple, sender: int, data: list[bytes], receivers: int) -> None:
        self._posted.setdefault(key, {})[sender] = data
        self._waiting.setdefault(key, receivers)

    def take(self, key: tuple, sender: int, what: str) -> list[bytes]:
        found = self._posted.get(key, {}).get(sender)
        if found is None:
            raise DistributedError(
                f"{what}: the message received was not sent by the matching object call "
                f"(send_object_list and recv_object_list must pair up, in order)"
            )
        return found

    def done(self, key: tuple) -> None:
        if key not in self._waiting:  # never posted: the call failed before its root's post
            return
        self._waiting[key] -= 1
        if not self._waiting[key]:
            del self._waiting[key], self._posted[key]


_EXCHANGES: weakref.WeakKeyDictionary[World, _Exchange] = weakref.WeakKeyDictionary()


def _exchange(world: World) -> _Exchange:
    found = _EXCHANGES.get(world)
    if found is None:
        found = _EXCHANGES[world] = _Exchange()
    return found


def _timing_only(world: World) -> bool:
    return bool(world.ctx.timing_only)


def _pickled(obj: Any, what: str, rank: int) -> bytes:
    try:
        return pickle.dumps(obj)
    except Exception as exc:  # noqa: BLE001 - any pickling failure is the user's object
        raise DistributedError(
            f"{what}: rank {rank} cannot pickle its object ({type(exc).__name__}: {exc}); "
            "object collectives move picklable objects"
        ) from None


def _unpickled(data: bytes, what: str, rank: int) -> Any:
    try:
        return pickle.loads(data)
    except KernBenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - an object whose unpickling fails
        raise DistributedError(
            f"{what}: rank {rank} cannot unpickle an object it received "
            f"({type(exc).__name__}: {exc})"
        ) from None


def _device_bytes(data: bytes, size: int | None = None) -> torch.Tensor:
    """``data`` (zero-padded to ``size``) copied to the calling rank's device."""
    size = len(data) if size is None else size
    host = np.zeros(size, dtype=np.uint8)
    host[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return torch.tensor(host, dtype=torch.uint8)


def _device_sizes(sizes: list[int]) -> torch.Tensor:
    """``sizes`` as PyTorch's int64 words (low, high) copied to the rank's device."""
    words = np.zeros((len(sizes), _WORDS), dtype=np.int32)
    for i, size in enumerate(sizes):
        if size >= 1 << 31:
            raise DistributedError(
                f"an object of {size} bytes pickled; objects up to 2 GiB move here"
            )
        words[i, 0] = size
    return torch.tensor(words.reshape(-1), dtype=torch.int32)


def _read(tensor: torch.Tensor, world: World) -> np.ndarray | None:
    """The tensor's values read back to the host (None in timing-only mode: the
    read costs the same time)."""
    return world.ctx.read_back(tensor.device_tensor)


def _read_sizes(tensor: torch.Tensor, world: World) -> list[int] | None:
    words = _read(tensor, world)
    return None if words is None else [int(v) for v in words.reshape(-1, _WORDS)[:, 0]]


def _empty(count: int, dtype: Any) -> torch.Tensor:
    return torch.empty(max(count, 0), dtype=dtype)


def _free(*tensors: torch.Tensor | None) -> None:
    for tensor in tensors:
        if tensor is not None:
            tensor.free()


def _check_sized(value: Any, what: str, arg: str, group: ProcessGroup, rank: int) -> list[Any]:
    """``value`` is an output list of one entry per rank of ``group`` (torch: "correctly
    sized as the size of the group")."""
    n = group.size()
    if not isinstance(value, list) or len(value) != n:
        got = f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__
        raise DistributedError(
            f"{what}: {arg} on rank {rank} must be a list of {n} entries, one per rank of "
            f"the group (got {got}); make it [None] * dist.get_world_size(group)"
        )
    return value


def _check_list(value: Any, what: str, arg: str, at_least: int, rank: int) -> list[Any]:
    if not isinstance(value, list) or len(value) < at_least:
        got = f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__
        raise DistributedError(
            f"{what}: {arg} on rank {rank} must be a list of at least {at_least} entries "
            f"(got {got})"
        )
    return value


def _member(group: Any, what: str) -> tuple[World, int, ProcessGroup] | None:
    world, me = initialised(what)
    if not_in_group(group, me, what, stacklevel=_USER_FRAME + 1):
        return None
    return world, me, resolve_group(group, world, what)


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """Every rank's ``obj`` into ``object_list`` (one entry per rank of the group)."""
    what = "all_gather_object"
    member = _member(group, what)
    if member is None:
        return
    world, me, pg = member
    n = pg.size()
    _check_sized(object_list, what, "object_list", pg, me)
    data = _pickled(obj, what, me)
    exchange = _exchange(world)
    key = exchange.key((what, pg.ranks), me)
    if _timing_only(world):
        exchange.post(key, pg.group_rank(me), [data], n)
    local, sizes_all = _device_sizes([len(data)]), _empty(n * _WORDS, torch.int32)
    padded = gathered = None
    with on_behalf_of(what, {}):
        try:
            all_gather_into_tensor(sizes_all, local, group=group)
            sizes = _read_sizes(sizes_all, world)
            if sizes is None:
                sizes = [len(exchange.take(key, r, what)[0]) for r in range(n)]
            largest = max(sizes)
            padded, gathered = _device_bytes(data, largest), _empty(n * largest, torch.uint8)
            all_gather_into_tensor(gathered, padded, group=group)
            raw = _read(gathered, world)
            for r in range(n):
                if raw is None:
                    blob = exchange.take(key, r, what)[0]
                else:
                    blob = raw[r * largest : r * largest + sizes[r]].tobytes()
                object_list[r] = _unpickled(blob, what, me)
        finally:
            _free(local, sizes_all, padded, gathered)
            if _timing_only(world):
                exchange.done(key)


def broadcast_object_list(
    object_list: list[Any],
    src: int | None = None,
    group: Any = None,
    device: Any = None,
    group_src: int | None = None,
) -> None:
    """The root's ``object_list`` entries into every rank's (same length) list."""
    what = "broadcast_object_list"
    member = _member(group, what)
    if member is None:
        return
    world, me, pg = member
    root = root_group_rank(pg, src, group_src, what)
    _check_list(object_list, what, "object_list", 0, me)
    mine = pg.group_rank(me) == root
    exchange = _exchange(world)
    key = exchange.key((what, pg.ranks), me)
    datas = [_pickled(o, what, me) for o in object_list] if mine else []
    if mine and _timing_only(world):
        exchange.post(key, root, datas, pg.size())
    sizes_t = _device_sizes([len(d) for d in datas]) if mine else None
    if sizes_t is None:
        sizes_t = _empty(len(object_list) * _WORDS, torch.int32)
    blob_t = None
    with on_behalf_of(what, {"object_list": ObjectCount(len(object_list)), "src": pg.ranks[root]}):
        try:
            broadcast(sizes_t, group=group, group_src=root)
            if mine:
                blob_t = _device_bytes(b"".join(datas))
                broadcast(blob_t, group=group, group_src=root)
                return
            sizes = _read_sizes(sizes_t, world)
            if sizes is None:
                sizes = [len(d) for d in exchange.take(key, root, what)]
            blob_t = _empty(sum(sizes), torch.uint8)
            broadcast(blob_t, group=group, group_src=root)
            raw = _read(blob_t, world)
            taken = exchange.take(key, root, what) if raw is None else None
            offset = 0
            for i, size in enumerate(sizes):
                blob = taken[i] if taken is not None else raw[offset : offset + size].tobytes()
                offset += size
                object_list[i] = _unpickled(blob, what, me)
        finally:
            _free(sizes_t, blob_t)
            if _timing_only(world):
                exchange.done(key)


def gather_object(
    obj: Any,
    object_gather_list: list[Any] | None = None,
    dst: int | None = None,
    group: Any = None,
    group_dst: int | None = None,
) -> None:
    """Every rank's ``obj`` into the destination's ``object_gather_list``."""
    what = "gather_object"
    member = _member(group, what)
    if member is None:
        return
    world, me, pg = member
    root = root_group_rank(pg, dst, group_dst, what)
    n, mine = pg.size(), pg.group_rank(me) == root
    if mine:
        if not object_gather_list:
            raise DistributedError(
                f"{what}: the destination rank {me} must pass object_gather_list (a list of "
                f"{n} entries)"
            )
        _check_sized(object_gather_list, what, "object_gather_list", pg, me)
    elif object_gather_list:
        raise DistributedError(
            f"{what}: argument object_gather_list must NOT be specified on non-destination "
            f"ranks (as in torch); rank {me} is not the destination: pass None"
        )
    data = _pickled(obj, what, me)
    exchange = _exchange(world)
    key = exchange.key((what, pg.ranks), me)
    if _timing_only(world):
        exchange.post(key, pg.group_rank(me), [data], n)
    local, sizes_all = _device_sizes([len(data)]), _empty(n * _WORDS, torch.int32)
    padded, blocks = None, []
    with on_behalf_of(what, {"dst": pg.ranks[root]}):
        try:
            all_gather_into_tensor(sizes_all, local, group=group)
            sizes = _read_sizes(sizes_all, world)
            if sizes is None:
                sizes = [len(exchange.take(key, r, what)[0]) for r in range(n)]
            largest = max(sizes)
            padded = _device_bytes(data, largest)
            blocks = [_empty(largest, torch.uint8) for _ in range(n)] if mine else []
            gather(padded, blocks or None, group=group, group_dst=root)
            for r, block in enumerate(blocks):
                raw = _read(block, world)
                blob = exchange.take(key, r, what)[0] if raw is None else raw[: sizes[r]].tobytes()
                object_gather_list[r] = _unpickled(blob, what, me)
        finally:
            _free(local, sizes_all, padded, *blocks)
            if _timing_only(world):
                exchange.done(key)


def scatter_object_list(
    scatter_object_output_list: list[Any],
    scatter_object_input_list: list[Any] | None = None,
    src: int | None = None,
    group: Any = None,
    group_src: int | None = None,
) -> None:
    """Entry i of the source's ``scatter_object_input_list`` into rank i's
    ``scatter_object_output_list[0]``."""
    what = "scatter_object_list"
    member = _member(group, what)
    if member is None:
        return
    world, me, pg = member
    root = root_group_rank(pg, src, group_src, what)
    _check_list(scatter_object_output_list, what, "scatter_object_output_list", 1, me)
    n, mine = pg.size(), pg.group_rank(me) == root
    datas: list[bytes] = []
    if mine:
        if scatter_object_input_list is None:
            raise DistributedError(
                f"{what}: the source rank {me} must pass scatter_object_input_list (a list "
                f"of {n} objects)"
            )
        if not isinstance(scatter_object_input_list, list | tuple) or (
            len(scatter_object_input_list) != n
        ):
            raise DistributedError(
                f"{what}: scatter_object_input_list on the source rank {me} must hold one "
                f"object per rank of the group ({n})"
            )
        datas = [_pickled(o, what, me) for o in scatter_object_input_list]
    exchange = _exchange(world)
    key = exchange.key((what, pg.ranks), me)
    if mine and _timing_only(world):
        exchange.post(key, root, datas, n)
    largest_t = _device_sizes([max(map(len, datas))]) if mine else _empty(_WORDS, torch.int32)
    out = size_t = None
    blocks: list[torch.Tensor] = []
    sizes: list[torch.Tensor] = []
    with on_behalf_of(what, {"src": pg.ranks[root]}):
        try:
            broadcast(largest_t, group=group, group_src=root)
            largest = _read_sizes(largest_t, world)
            if largest is None:
                largest = [max(map(len, exchange.take(key, root, what)))]
            out = _empty(largest[0], torch.uint8)
            if mine:
                blocks = [_device_bytes(d, largest[0]) for d in datas]
            scatter(out, blocks or None, group=group, group_src=root)
            size_t = _empty(_WORDS, torch.int32)
            if mine:
                sizes = [_device_sizes([len(d)]) for d in datas]
            scatter(size_t, sizes or None, group=group, group_src=root)
            size = _read_sizes(size_t, world)
            raw = _read(out, world)
            if raw is None:
                blob = exchange.take(key, root, what)[pg.group_rank(me)]
            else:
                blob = raw[: size[0]].tobytes()
            scatter_object_output_list[0] = _unpickled(blob, what, me)
        finally:
            _free(largest_t, out, size_t, *blocks, *sizes)
            if _timing_only(world):
                exchange.done(key)


def send_object_list(
    object_list: list[Any],
    dst: int | None = None,
    group: Any = None,
    device: Any = None,
    group_dst: int | None = None,
) -> None:
    """Send ``object_list``'s objects to ``dst`` (its ``recv_object_list`` takes them)."""
    what = "send_object_list"
    member = _member(group, what)
    if member is None:
        return
    world, me, pg = member
    peer = peer_rank(group, world, dst, group_dst, what, "dst")
    if peer == me:
        raise DistributedError(f"{what}: rank {me} cannot send to itself (dst={peer})")
    _check_list(object_list, what, "object_list", 0, me)
    datas = [_pickled(o, what, me) for o in object_list]
    if _timing_only(world):
        exchange = _exchange(world)
        exchange.post(exchange.key(("p2p", pg.gid, me, peer), "sender"), me, datas, 1)
    sizes_t, blob_t = _device_sizes([len(d) for d in datas]), None
    try:
        send(sizes_t, dst=peer, group=pg)
        blob_t = _device_bytes(b"".join(datas))
        send(blob_t, dst=peer, group=pg)
    finally:
        _free(sizes_t, blob_t)


def recv_object_list(
    object_list: list[Any],
    src: int | None = None,
    group: Any = None,
    device: Any = None,
    group_src: int | None = None,
) -> int:
    """Receive a ``send_object_list``'s objects into ``object_list`` (same length);
    returns the sender's rank (-1 on a rank outside ``group``)."""
    what = "recv_object_list"
    member = _member(group, what)
    if member is None:
        return -1
    world, me, pg = member
    peer = None
    if src is not None or group_src is not None:
        peer = peer_rank(group, world, src, group_src, what, "src")
        if peer == me:
            raise DistributedError(f"{what}: rank {me} cannot receive from itself (src={peer})")
    _check_list(object_list, what, "object_list", 0, me)
    sizes_t, blob_t = _empty(len(object_list) * _WORDS, torch.int32), None
    try:
        sender = recv(sizes_t, src=peer, group=pg)
        taken = None
        if _timing_only(world):
            exchange = _exchange(world)
            key = exchange.key(("p2p", pg.gid, sender, me), "receiver")
            taken = exchange.take(key, sender, what)
            exchange.done(key)
        sizes = _read_sizes(sizes_t, world)
        if sizes is None:
            sizes = [len(d) for d in taken]
        blob_t = _empty(sum(sizes), torch.uint8)
        recv(blob_t, src=sender, group=pg)
        raw = _read(blob_t, world)
        offset = 0
        for i, size in enumerate(sizes):
            blob = taken[i] if raw is None else raw[offset : offset + size].tobytes()
            offset += size
            object_list[i] = _unpickled(blob, what, me)
        return sender
    finally:
        _free(sizes_t, blob_t)
