"""One sound algorithm per collective: ring, binomial tree, direct, dissemination.

Each function is one rank's program (a generator run as a SimPy process on the
rank's PE) over a :class:`~kernbench.ccl.comm.Comm`.  Buffers are regions of
the rank's shard of each tensor.  Costs follow from the primitives (see
``reference/collective-costs.md`` for the closed forms they realise).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from kernbench.ccl.comm import Comm, Region, chunk_bounds

__all__ = [
    "ring_all_reduce",
    "ring_reduce_scatter",
    "ring_all_gather",
    "tree_broadcast",
    "tree_reduce",
    "direct_gather",
    "direct_scatter",
    "direct_all_to_all",
    "dissemination_barrier",
]


def _ring_reduce_scatter_steps(c: Comm, chunks: Sequence[Region]) -> Generator:
    """p-1 steps; afterwards this rank's chunk ``rank`` holds the reduction of all ranks."""
    p, r = c.size, c.rank
    right, left = (r + 1) % p, (r - 1) % p
    for step in range(p - 1):
        c.post_send(right, chunks[(r - step - 1) % p])
        incoming = yield from c.recv(left)
        yield from c.reduce(chunks[(r - step - 2) % p], incoming)
    yield from c.drain()


def _ring_all_gather_steps(c: Comm, chunks: Sequence[Region]) -> Generator:
    """p-1 steps; starting from chunk ``rank`` being complete, every chunk becomes so."""
    p, r = c.size, c.rank
    right, left = (r + 1) % p, (r - 1) % p
    for step in range(p - 1):
        c.post_send(right, chunks[(r - step) % p])
        incoming = yield from c.recv(left)
        c.place(chunks[(r - step - 1) % p], incoming)
    yield from c.drain()


def ring_all_reduce(c: Comm, buf: Region) -> Generator:
    """Ring reduce-scatter then ring all-gather: 2(p-1) steps of n/p bytes."""
    if c.size == 1:
        return
    chunks = [buf.sub(a, b) for a, b in chunk_bounds(buf.count, c.size)]
    yield from _ring_reduce_scatter_steps(c, chunks)
    yield from _ring_all_gather_steps(c, chunks)


def ring_reduce_scatter(
    c: Comm, blocks: Sequence[Region], out: Region, scratch: Sequence[Region]
) -> Generator:
    """``out`` = the reduction over ranks of their ``blocks[rank]``.

    The ring works on ``scratch`` (a copy of the blocks) so that the input is
    left as it was.
    """
    for block, copy in zip(blocks, scratch, strict=True):
        yield from c.copy(copy, block)
    if c.size > 1:
        yield from _ring_reduce_scatter_steps(c, scratch)
    yield from c.copy(out, scratch[c.rank])


def ring_all_gather(c: Comm, inp: Region, blocks: Sequence[Region]) -> Generator:
    """``blocks[i]`` = rank i's ``inp`` on every rank."""
    yield from c.copy(blocks[c.rank], inp)
    if c.size > 1:
        yield from _ring_all_gather_steps(c, blocks)


def tree_broadcast(c: Comm, buf: Region, root: int) -> Generator:
    """Binomial tree from ``root``: ceil(lg p) rounds."""
    p = c.size
    v = (c.rank - root) % p
    mask = 1
    while mask < p:
        if v & mask:
            incoming = yield from c.recv((v - mask + root) % p)
            c.place(buf, incoming)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if v + mask < p:
            c.post_send((v + mask + root) % p, buf)
        mask >>= 1
    yield from c.drain()


def tree_reduce(c: Comm, buf: Region, scratch: Region, root: int) -> Generator:
    """Binomial tree to ``root``; non-root ranks accumulate in ``scratch``, not ``buf``."""
    p = c.size
    v = (c.rank - root) % p
    acc = buf if v == 0 else scratch
    if acc is not buf:
        yield from c.copy(acc, buf)
    mask = 1
    while mask < p:
        if v & mask:
            yield from c.send((v - mask + root) % p, acc)
            break
        if v + mask < p:
            incoming = yield from c.recv((v + mask + root) % p)
            yield from c.reduce(acc, incoming)
        mask <<= 1
    yield from c.drain()


def direct_gather(c: Comm, inp: Region, blocks: Sequence[Region] | None, root: int) -> Generator:
    """Every rank sends ``inp`` to ``root``, which places rank i's in ``blocks[i]``."""
    if c.rank != root:
        yield from c.send(root, inp)
        return
    yield from c.copy(blocks[root], inp)
    for peer in range(c.size):
        if peer != root:
            c.place(blocks[peer], (yield from c.recv(peer)))


def direct_scatter(c: Comm, blocks: Sequence[Region] | None, out: Region, root: int) -> Generator:
    """``root`` sends ``blocks[i]`` to rank i, which places it in ``out``."""
    if c.rank == root:
        for offset in range(1, c.size):
            c.post_send((root + offset) % c.size, blocks[(root + offset) % c.size])
        yield from c.copy(out, blocks[root])
        yield from c.drain()
        return
    c.place(out, (yield from c.recv(root)))


def direct_all_to_all(c: Comm, sends: Sequence[Region], recvs: Sequence[Region]) -> Generator:
    """Rank r sends ``sends[j]`` to rank j and receives rank j's piece into ``recvs[j]``.

    Sends are posted in the order r+1, r+2, ... so that no rank is flooded first.
    """
    p, r = c.size, c.rank
    for offset in range(1, p):
        c.post_send((r + offset) % p, sends[(r + offset) % p])
    yield from c.copy(recvs[r], sends[r])
    for offset in range(1, p):
        peer = (r - offset) % p
        c.place(recvs[peer], (yield from c.recv(peer)))
    yield from c.drain()


def dissemination_barrier(c: Comm) -> Generator:
    """ceil(lg p) rounds of empty messages to rank + 2^k."""
    p, r = c.size, c.rank
    distance = 1
    while distance < p:
        c.post_send((r + distance) % p, None, 0)
        yield from c.recv((r - distance) % p)
        distance <<= 1
    yield from c.drain()
