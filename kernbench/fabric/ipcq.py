"""IPCQ: bounded, credit-based queues between PEs.

A channel joins one sending PE to one receiving PE.  It has ``depth`` slots:
a sender takes a credit before it sends (back-pressure: a full queue makes the
sender wait, it never drops), then the channel transmits its messages one at a
time, in order: each pays the endpoint overhead (the per-message α) and
crosses the fabric from the source memory to the receiver's buffer memory.
The receiver takes messages in order; the credit travels back to the sender
over the route's latency.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import simpy

if TYPE_CHECKING:
    from kernbench.fabric.engine import Fabric

__all__ = ["Ipcq", "IpcqMessage"]


@dataclass(frozen=True, slots=True)
class IpcqMessage:
    src: str
    dst: str
    nbytes: int
    seq: int
    payload: Any = field(default=None, compare=False, repr=False)


def _root(key: Any) -> Any:
    """The collective a channel key belongs to: keys nest as ((root, lane), sub-tag, ...)."""
    root = key
    while isinstance(root, tuple) and root and isinstance(root[0], tuple):
        root = root[0]
    return root


class _Channel:
    __slots__ = ("credits", "inbox", "sent", "credit_return_ps", "transmitter")

    def __init__(self, env: simpy.Environment, depth: int, credit_return_ps: int) -> None:
        self.credits = simpy.Container(env, capacity=depth, init=depth)
        self.inbox = simpy.Store(env)
        self.transmitter = simpy.Resource(env, capacity=1)
        self.sent = 0
        self.credit_return_ps = credit_return_ps


class Ipcq:
    """Every PE's inter-PE queues (created lazily, one channel per PE pair)."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.env = fabric.env
        attrs = fabric.topology.cube.pe_template.components.pe_ipcq.attrs
        self.default_depth = attrs.depth
        self.endpoint_overhead_ps = attrs.endpoint_overhead
        self._channels: dict[tuple[str, str, Any], _Channel] = {}
        self._by_key: dict[Any, list[tuple[str, str, Any]]] = {}
        self.messages = 0

    def channel(self, src_pe: str, dst_pe: str, key: Any = None, depth: int | None = None):
        ident = (src_pe, dst_pe, key)
        channel = self._channels.get(ident)
        if channel is None:
            route = self.fabric.graph.route(dst_pe, src_pe) if src_pe != dst_pe else ()
            latency = self.fabric.network.route_cost(route).latency_ps
            channel = _Channel(self.env, depth or self.default_depth, latency)
            self._channels[ident] = channel
            self._by_key.setdefault(_root(key), []).append(ident)
        return channel

    def close(self, root: Any) -> None:
        """Forget the channels of one finished collective (keys whose first item is ``root``)."""
        for ident in self._by_key.pop(root, ()):
            self._channels.pop(ident, None)

    def send(
        self,
        src_pe: str,
        dst_pe: str,
        nbytes: int,
        payload: Any = None,
        *,
        src_node: str | None = None,
        dst_node: str | None = None,
        key: Any = None,
        payload_fn: Any = None,
        depth: int | None = None,
    ) -> Generator:
        """Process body: take a credit, pay α, move the bytes, enqueue the message.

        ``payload_fn`` (if given) is called once the credit is held, so the data
        sent is the data as it is when the send actually starts.
        """
        channel = self.channel(src_pe, dst_pe, key, depth)
        yield channel.credits.get(1)
        if payload_fn is not None:
            payload = payload_fn()
        with channel.transmitter.request() as turn:
            yield turn
            start = self.env.now
            yield self.env.timeout(self.endpoint_overhead_ps)
            yield self.fabric.transfer(src_node or src_pe, dst_node or dst_pe, nbytes)
            self.messages += 1
            channel.sent += 1
            if self.fabric.detail:
                self.fabric.record("ipcq", src_pe, f"{src_pe}.ipcq", start, nbytes, f"to {dst_pe}")
            channel.inbox.put(IpcqMessage(src_pe, dst_pe, nbytes, channel.sent, payload))

    def recv(
        self, src_pe: str, dst_pe: str, key: Any = None, depth: int | None = None
    ) -> Generator:
        """Process body: the next message on the channel (waits until there is one)."""
        channel = self.channel(src_pe, dst_pe, key, depth)
        message = yield channel.inbox.get()
        if channel.credit_return_ps:
            timer = self.env.timeout(channel.credit_return_ps)
            timer.callbacks.append(lambda _ev: channel.credits.put(1))
        else:
            channel.credits.put(1)
        return message
