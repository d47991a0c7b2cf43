"""IPCQ channels: credits, one message on the wire at a time, in-order delivery."""

from __future__ import annotations

import simpy

from kernbench.fabric import Fabric
from kernbench.topology import load_topology

A, B = "sip0.cube0.pe0", "sip0.cube0.pe1"


def _fabric() -> tuple[Fabric, int, int, int]:
    fabric = Fabric(load_topology("tiny"))
    ipcq = fabric.ipcq
    network, graph = fabric.links, fabric.graph
    there = network.route_cost(graph.route(A, B)).latency_ps
    back = network.route_cost(graph.route(B, A)).latency_ps
    return fabric, ipcq.endpoint_overhead_ps, there, back


def _run(fabric: Fabric, sends: list[int], recv_at: list[int], depth: int):
    """Post empty messages at ``sends``; take one at each of ``recv_at``.

    Returns the instants each message reached the receiver's queue and the
    (instant, seq) of each message taken.
    """
    env: simpy.Environment = fabric.env
    ipcq = fabric.ipcq
    arrived: list[int] = []
    taken: list[tuple[int, int]] = []

    def sender():
        for at in sends:
            yield env.timeout(max(0, at - env.now))
            ipcq.post(A, B, 0, depth=depth, on_sent=lambda: arrived.append(env.now))

    def receiver():
        for at in recv_at:
            yield env.timeout(max(0, at - env.now))
            message = yield from ipcq.recv(A, B, depth=depth)
            taken.append((env.now, message.seq))

    env.process(sender())
    env.process(receiver())
    env.run()
    return arrived, taken


def test_messages_leave_one_at_a_time_and_their_latencies_overlap() -> None:
    fabric, alpha, there, _ = _fabric()
    # An empty message pays the overhead, leaves, and arrives the route's latency
    # later; the next one pays its overhead meanwhile (a DMA engine keeps several
    # transfers in flight), so the k-th arrives at k·alpha + latency, in order.
    arrived, taken = _run(fabric, [0, 0, 0], [0, 0, 0], depth=8)
    assert arrived == [alpha + there, 2 * alpha + there, 3 * alpha + there]
    assert taken == [(alpha + there, 1), (2 * alpha + there, 2), (3 * alpha + there, 3)]


def test_a_full_queue_holds_the_sender_until_a_credit_travels_back() -> None:
    fabric, alpha, there, back = _fabric()
    hop = alpha + there
    late = 10**7  # the receiver takes its first message long after the queue filled up
    arrived, taken = _run(fabric, [0, 0, 0, 0], [late, late, late, late], depth=2)
    credit = late + back  # both credits of the first two messages are back then
    assert arrived == [hop, alpha + hop, credit + hop, credit + alpha + hop]
    assert [seq for _, seq in taken] == [1, 2, 3, 4]
    assert [t for t, _ in taken] == [late, late, credit + hop, credit + alpha + hop]


def test_a_credit_back_before_the_next_send_costs_no_wait() -> None:
    fabric, alpha, there, back = _fabric()
    hop = alpha + there
    # depth 1: the second message may leave only once the first one's credit is back.
    later = hop + back + 5_000
    arrived, _ = _run(fabric, [0, later], [0, 0], depth=1)
    assert arrived == [hop, later + hop]
    fabric, *_ = _fabric()
    early = hop + back - 5_000  # posted while the credit is still on its way
    arrived, _ = _run(fabric, [0, early], [0, 0], depth=1)
    assert arrived == [hop, hop + back + hop]
