"""Point-to-point: ``send``/``recv``, ``isend``/``irecv``, ``P2POp`` and ``batch_isend_irecv``.

A send and a receive with the same tag match in the order they were posted;
a receive without ``src`` takes the first matching send from any rank.  The
transfer runs on the fabric once both sides are posted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernbench.distributed.world import Work, World, p2p_work
from kernbench.errors import DistributedError
from kernbench.torch.distributed.arguments import device_tensor, initialised, peer_rank

__all__ = ["P2POp", "batch_isend_irecv", "irecv", "isend", "recv", "send"]


def isend(
    tensor: Any,
    dst: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> Work:
    world, _ = initialised("isend")
    peer = peer_rank(group, world, dst, group_dst, "isend")
    return p2p_work(world, world.post_send(device_tensor(tensor, "isend"), peer, tag))


def _post_recv(
    tensor: Any, src: int | None, group: Any, tag: int, group_src: int | None
) -> tuple[World, Any]:
    """Post a receive; the world and the receive's rendezvous (its ``source`` once matched)."""
    world, _ = initialised("irecv")
    peer = (
        None
        if src is None and group_src is None
        else peer_rank(group, world, src, group_src, "irecv")
    )
    return world, world.post_recv(device_tensor(tensor, "irecv"), peer, tag)


def irecv(
    tensor: Any,
    src: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_src: int | None = None,
) -> Work:
    return p2p_work(*_post_recv(tensor, src, group, tag, group_src))


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
    world, rendezvous = _post_recv(tensor, src, group, tag, group_src)
    p2p_work(world, rendezvous).wait()
    return rendezvous.source


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
