"""Direct algorithms: every message goes straight to its destination.

Gather, scatter, all-to-all (sends posted to rank+1, rank+2, … so no rank is
flooded first) and a one-step all-gather for small messages.

Each is one step in the schedule: all its messages in flight together (the
root's, or every rank's, sharing their memory ports and links), the own block
copied alongside, the messages placed after.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, register
from kernbench.ccl.algorithms.schedule import Message, Phase, Schedule, Step, Work
from kernbench.ccl.comm import Comm


def gather(c: Comm, a: OpArgs) -> Generator:
    if c.rank != a.root:
        yield from c.send(a.root, a.inp)
        return
    yield from c.copy(a.blocks[a.root], a.inp)
    for offset in range(1, c.size):
        peer = (a.root + offset) % c.size
        yield from c.place(a.blocks[peer], (yield from c.recv(peer)))


def scatter(c: Comm, a: OpArgs) -> Generator:
    if c.rank == a.root:
        for offset in range(1, c.size):
            peer = (a.root + offset) % c.size
            c.post_send(peer, a.blocks[peer])
        yield from c.copy(a.out, a.blocks[a.root])
        yield from c.drain()
        return
    yield from c.place(a.out, (yield from c.recv(a.root)))


def all_to_all(c: Comm, a: OpArgs) -> Generator:
    p, r = c.size, c.rank
    for offset in range(1, p):
        c.post_send((r + offset) % p, a.sends[(r + offset) % p])
    yield from c.copy(a.recvs[r], a.sends[r])
    for offset in range(1, p):
        peer = (r - offset) % p
        yield from c.place(a.recvs[peer], (yield from c.recv(peer)))
    yield from c.drain()


def all_gather(c: Comm, a: OpArgs) -> Generator:
    """Every rank sends its block to every other rank at once: one step, p-1 messages."""
    return all_to_all(c, OpArgs(sends=(a.inp,) * c.size, recvs=a.blocks))


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    """Root 0 for gather and scatter; ``nbytes`` is p blocks (one rank's sends, all-to-all)."""
    p = len(pes)
    block = nbytes / p
    if op == "gather":
        pairs = [(r, 0) for r in range(1, p)]
        copies = [0]
    elif op == "scatter":
        pairs = [(0, r) for r in range(1, p)]
        copies = [0]
    else:  # all_to_all, all_gather
        pairs = [(r, (r + k) % p) for r in range(p) for k in range(1, p)]
        copies = list(range(p))
    step = Step(
        tuple(Message(a, b, block) for a, b in pairs),
        tuple(Work(b, "place", block) for _, b in pairs),
        tuple(Work(r, "copy", block) for r in copies),
    )
    return (Phase((step,)),)


register(
    Algorithm(
        name="direct",
        description="direct gather, scatter, all-to-all and one-step all-gather",
        programs={
            "gather": gather,
            "scatter": scatter,
            "all_to_all": all_to_all,
            "all_gather": all_gather,
        },
        costs={
            # p-1 messages leave one port one after another.
            "gather": lambda p, n, a, b, g: (p - 1) * (a + n / p * b),
            "scatter": lambda p, n, a, b, g: (p - 1) * (a + n / p * b),
            "all_to_all": lambda p, n, a, b, g: (p - 1) * (a + n / p * b),
            "all_gather": lambda p, n, a, b, g: (p - 1) * (a + n / p * b),
        },
        schedule=_schedule,
    )
)
