"""Point-to-point: ``send``/``recv``, ``isend``/``irecv``, ``P2POp`` and ``batch_isend_irecv``.

A send and a receive on the same group with the same tag match in the order
they were posted; a receive without ``src`` takes the first matching send from
any rank of its group.  Each group is its own communicator, as in PyTorch: a
send on one group never matches a receive on another (or on the default
group), even between the same two ranks with the same tag.  The transfer
runs on the fabric once both sides are posted.  ``dst``/``src`` are global
ranks (members of ``group``) and ``group_dst``/``group_src`` ranks within
``group``, as in PyTorch; a rank outside ``group`` gets PyTorch's warning and the call does
nothing (``send``/``isend``/``irecv`` return ``None``, ``recv`` returns -1).
Every error names the call the user made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernbench.distributed.world import Work, World, p2p_work
from kernbench.errors import DistributedError
from kernbench.torch.distributed.arguments import (
    device_tensor,
    initialised,
    not_in_group,
    peer_rank,
    resolve_group,
)

__all__ = ["P2POp", "batch_isend_irecv", "irecv", "isend", "recv", "send"]

# The user's frame counted from the membership check's caller: _post_* (1), send (2), user (3).
_USER_FRAME = 3


def _post_send(
    what: str, tensor: Any, dst: int | None, group: Any, tag: int, group_dst: int | None
) -> tuple[World, Any] | None:
    """Post a send for ``what``; the world and its rendezvous, or None for a non-member."""
    world, me = initialised(what)
    if not_in_group(group, me, what, stacklevel=_USER_FRAME):
        return None
    peer = peer_rank(group, world, dst, group_dst, what, "dst")
    pg = resolve_group(group, world, what)
    return world, world.post_send(device_tensor(tensor, what), peer, tag, what=what, group=pg)


def _post_recv(
    what: str, tensor: Any, src: int | None, group: Any, tag: int, group_src: int | None
) -> tuple[World, Any] | None:
    """Post a receive; the world and its rendezvous (``source`` once matched), or None."""
    world, me = initialised(what)
    if not_in_group(group, me, what, stacklevel=_USER_FRAME):
        return None
    peer = (
        None
        if src is None and group_src is None
        else peer_rank(group, world, src, group_src, what, "src")
    )
    pg = resolve_group(group, world, what)
    return world, world.post_recv(device_tensor(tensor, what), peer, tag, what=what, group=pg)


def isend(
    tensor: Any,
    dst: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> Work | None:
    posted = _post_send("isend", tensor, dst, group, tag, group_dst)
    return None if posted is None else p2p_work(*posted, async_op=True, tensor=tensor)


def irecv(
    tensor: Any,
    src: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_src: int | None = None,
) -> Work | None:
    posted = _post_recv("irecv", tensor, src, group, tag, group_src)
    if posted is None:
        return None
    return p2p_work(*posted, async_op=True, tensor=tensor, receive=True)


def send(
    tensor: Any,
    dst: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> None:
    posted = _post_send("send", tensor, dst, group, tag, group_dst)
    if posted is not None:
        p2p_work(*posted).wait()


def recv(
    tensor: Any,
    src: int | None = None,
    group: Any = None,
    tag: int = 0,
    group_src: int | None = None,
) -> int:
    """Receive into ``tensor``; returns the sender's rank (-1 on a rank outside ``group``)."""
    posted = _post_recv("recv", tensor, src, group, tag, group_src)
    if posted is None:
        return -1
    world, rendezvous = posted
    p2p_work(world, rendezvous).wait()
    return rendezvous.source


@dataclass(eq=False)  # compared by identity, as torch's (it holds a tensor)
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
            raise DistributedError(f"P2POp: op must be dist.isend or dist.irecv (got {self.op!r})")


def batch_isend_irecv(p2p_op_list: list[P2POp]) -> list[Work]:
    """Post every operation; the Works of those this rank takes part in."""
    works = []
    if not isinstance(p2p_op_list, list | tuple):
        raise DistributedError(
            f"batch_isend_irecv: p2p_op_list must be a list of dist.P2POp objects "
            f"(got {type(p2p_op_list).__name__})"
        )
    for item in p2p_op_list:
        if not isinstance(item, P2POp):
            raise DistributedError(
                f"batch_isend_irecv: p2p_op_list must hold dist.P2POp objects "
                f"(got {type(item).__name__})"
            )
        if item.op is isend:
            work = isend(item.tensor, item.peer, item.group, item.tag, item.group_peer)
        else:
            work = irecv(item.tensor, item.peer, item.group, item.tag, item.group_peer)
        if work is not None:
            works.append(work)
    return works
