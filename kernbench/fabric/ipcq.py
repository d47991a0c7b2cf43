"""IPCQ: bounded, credit-based queues between PEs.

A channel joins one sending PE to one receiving PE.  It has ``depth`` slots:
a sender takes a credit before it sends (back-pressure: a full queue makes the
sender wait, it never drops), then the channel transmits its messages one at a
time, in order: each pays the endpoint overhead (the per-message α) and
crosses the fabric from the source memory to the receiver's buffer memory.
The transmitter is free for the next message once the last byte has left
(α and the bytes are serial); the route's latency overlaps the next message,
as a DMA engine keeps several transfers in flight, and messages still arrive
in the order they were sent.
The receiver takes messages in order; the credit travels back to the sender
over the route's latency (counted when the sender next needs one, so only a
sender actually blocked on credits costs a timer).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import simpy

from kernbench.fabric.flows import Timer
from kernbench.machine import IpcqInstall
from kernbench.machine.observe import Observers, QueueDepth
from kernbench.topology.graph import MachineGraph
from kernbench.topology.schema import IpcqAttrs

if TYPE_CHECKING:
    from kernbench.fabric.flows import FlowNetwork

__all__ = ["Ipcq", "IpcqMessage"]

Transferring = Callable[[str, str, int], simpy.Event]


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


@dataclass(slots=True, eq=False)
class _Send:
    """A message on its way: waiting for a credit, for the transmitter, or in flight."""

    nbytes: int
    payload: Any
    payload_fn: Callable[[], Any] | None
    route: tuple[int, ...]
    on_sent: Callable[[], None] | None
    channel: _Channel | None = None  # set when the transmitter takes it
    start: int = 0  # when the transmitter took it


class _Channel:
    """One queue's state.  Credits, the transmitter and the inbox are plain FIFOs
    driven by callbacks: a message costs its timers and its flow, no process."""

    __slots__ = (
        "src",
        "dst",
        "credits",
        "returning",
        "credit_timer",
        "waiting_credit",
        "waiting_transmitter",
        "busy",
        "inbox",
        "receivers",
        "sent",
        "credit_return_ps",
        "arriving",
    )

    def __init__(self, src: str, dst: str, depth: int, credit_return_ps: int) -> None:
        self.src = src
        self.dst = dst
        self.credits = depth
        # Credits on their way back: the times they reach the sender.  A credit
        # is counted when a sender next looks, so a queue that never runs out
        # of credits costs no event per returned credit.
        self.returning: deque[int] = deque()
        self.credit_timer = False
        self.waiting_credit: deque[_Send] = deque()
        self.waiting_transmitter: deque[_Send] = deque()
        self.busy = False
        self.inbox: deque[IpcqMessage] = deque()
        self.receivers: deque[simpy.Event] = deque()
        self.sent = 0
        self.credit_return_ps = credit_return_ps
        self.arriving = 0  # when the last message sent reaches the receiver


class Ipcq:
    """Every PE's inter-PE queues (created lazily, one channel per PE pair and key).

    Also serves :class:`IpcqInstall`: the host sends a neighbour table to a
    cube's M_CPU, which takes its command latency and installs the entries on
    the target PEs at ``install_latency_per_entry`` apiece.
    """

    def __init__(
        self,
        env: simpy.Environment,
        graph: MachineGraph,
        links: FlowNetwork,
        transfer: Transferring,
        attrs: IpcqAttrs,
        command_latency_ps: int,
        observers: Observers,
    ) -> None:
        self.env = env
        self.graph = graph
        self.links = links
        self.transfer = transfer
        self.attrs = attrs
        self.command_latency_ps = command_latency_ps
        self.observers = observers
        self.default_depth = attrs.depth
        self.endpoint_overhead_ps = attrs.endpoint_overhead
        self._channels: dict[tuple[str, str, Any], _Channel] = {}
        self._by_key: dict[Any, list[tuple[str, str, Any]]] = {}
        self.messages = 0

    def serve_install(self, msg: IpcqInstall) -> Generator:
        yield self.transfer(msg.src, msg.dst, msg.nbytes)
        yield self.env.timeout(self.command_latency_ps)
        yield self.env.all_of([self.transfer(msg.dst, pe, msg.nbytes) for pe in msg.targets])
        yield self.env.timeout(self.attrs.install_latency_per_entry * len(msg.entries))

    @property
    def open_channels(self) -> int:
        """Channels of collectives still running (finished ones are forgotten)."""
        return len(self._channels)

    def channel(self, src_pe: str, dst_pe: str, key: Any = None, depth: int | None = None):
        ident = (src_pe, dst_pe, key)
        channel = self._channels.get(ident)
        if channel is None:
            route = self.graph.route(dst_pe, src_pe) if src_pe != dst_pe else ()
            latency = self.links.route_cost(route).latency_ps
            channel = _Channel(src_pe, dst_pe, depth or self.default_depth, latency)
            self._channels[ident] = channel
            self._by_key.setdefault(_root(key), []).append(ident)
        return channel

    def close(self, root: Any) -> None:
        """Forget the channels of one finished collective (keys whose first item is ``root``)."""
        for ident in self._by_key.pop(root, ()):
            self._channels.pop(ident, None)

    # -- sending -------------------------------------------------------------------
    def post(
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
        on_sent: Callable[[], None] | None = None,
    ) -> None:
        """Queue a message: take a credit, pay α, move the bytes, enqueue it at the receiver.

        ``payload_fn`` (if given) is called once the credit is held, so the data
        sent is the data as it is when the send actually starts.  ``on_sent`` is
        called when the message is in the receiver's queue.
        """
        channel = self.channel(src_pe, dst_pe, key, depth)
        route = self.graph.route(src_node or src_pe, dst_node or dst_pe)
        send = _Send(nbytes, payload, payload_fn, route, on_sent)
        if channel.returning:
            self._count_returned(channel)
        if channel.credits and not channel.waiting_credit:
            channel.credits -= 1
            self._credited(channel, send)
        else:
            channel.waiting_credit.append(send)
            self._await_credit(channel)

    def _credited(self, channel: _Channel, send: _Send) -> None:
        if send.payload_fn is not None:
            send.payload = send.payload_fn()
            send.payload_fn = None
        channel.waiting_transmitter.append(send)
        if not channel.busy:
            self._transmit(channel)

    def _transmit(self, channel: _Channel) -> None:
        send = channel.waiting_transmitter.popleft()
        channel.busy = True
        send.channel = channel
        send.start = self.env.now
        if self.endpoint_overhead_ps:
            Timer(self.env, self.endpoint_overhead_ps, lambda _ev: self._cross(send))
        else:
            self._cross(send)

    def _cross(self, send: _Send) -> None:
        # Bandwidth only here: the route's latency and packet fill are paid
        # after the last byte has left, beside the channel's next message.
        self.links.start(send.route, send.nbytes, lambda: self._left(send), stream=True)

    def _left(self, send: _Send) -> None:
        """The last byte has left: free the transmitter; the message arrives a route tail later."""
        channel = send.channel
        now = self.env.now
        tail = self.links.route_cost(send.route).tail_ps(send.nbytes, self.links.packet_bytes)
        arrives = now + tail
        channel.arriving = arrives = max(arrives, channel.arriving)  # in order
        channel.busy = False
        if channel.waiting_transmitter:
            self._transmit(channel)
        if arrives > now:
            Timer(self.env, arrives - now, lambda _ev: self._arrived(send))
        else:
            self._arrived(send)

    def _arrived(self, send: _Send) -> None:
        channel, start = send.channel, send.start
        self.messages += 1
        channel.sent += 1
        message = IpcqMessage(channel.src, channel.dst, send.nbytes, channel.sent, send.payload)
        if channel.receivers:
            channel.receivers.popleft().succeed(message)
        else:
            channel.inbox.append(message)
        if self.observers.queue:
            record = QueueDepth(
                channel.src, channel.dst, start, self.env.now, send.nbytes, len(channel.inbox)
            )
            for hook in self.observers.queue:
                hook(record)
        if send.on_sent is not None:
            send.on_sent()

    # -- receiving -----------------------------------------------------------------
    def recv(
        self, src_pe: str, dst_pe: str, key: Any = None, depth: int | None = None
    ) -> Generator:
        """Process body: the next message on the channel (waits until there is one)."""
        channel = self.channel(src_pe, dst_pe, key, depth)
        if channel.inbox:
            message = channel.inbox.popleft()
        else:
            arrival = self.env.event()
            channel.receivers.append(arrival)
            message = yield arrival
        channel.returning.append(self.env.now + channel.credit_return_ps)
        if channel.waiting_credit:  # a sender is blocked on this credit: wake it on time
            if channel.credit_return_ps:
                self._await_credit(channel)
            else:
                self._credits_back(channel)
        return message

    def _count_returned(self, channel: _Channel) -> None:
        now, returning = self.env.now, channel.returning
        while returning and returning[0] <= now:
            returning.popleft()
            channel.credits += 1

    def _await_credit(self, channel: _Channel) -> None:
        """Wake the blocked senders when the next credit on its way back arrives."""
        if channel.credit_timer or not channel.returning:
            return
        channel.credit_timer = True
        Timer(
            self.env,
            channel.returning[0] - self.env.now,
            lambda _ev: self._credit_timer_fired(channel),
        )

    def _credit_timer_fired(self, channel: _Channel) -> None:
        channel.credit_timer = False
        self._credits_back(channel)

    def _credits_back(self, channel: _Channel) -> None:
        """Give the credits back by now to the senders waiting, in order."""
        self._count_returned(channel)
        while channel.credits and channel.waiting_credit:
            channel.credits -= 1
            self._credited(channel, channel.waiting_credit.popleft())
        if channel.waiting_credit:
            self._await_credit(channel)
