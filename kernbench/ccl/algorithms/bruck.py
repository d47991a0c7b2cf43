"""Bruck all-gather for any p: ⌈lg p⌉ steps.

After step k rank r holds blocks r, r+1, …, r+2^(k+1)-1 (mod p).  In step k it
sends the first min(2^k, p - 2^k) of the blocks it holds (r, r+1, …) to rank
r - 2^k and receives as many from rank r + 2^k: blocks r+2^k, r+2^k+1, ….
Received blocks go straight to their final places in the output, so the final
local rotation of the textbook algorithm is not needed; the blocks a rank
sends are among those it already held, never those it is receiving.

A step's blocks wrap past block p-1 for some ranks, so they are not back to
back in memory.  Below ``pack_bytes`` (catalogue parameter, default 16 KiB) a
step's blocks are packed into one message (a local copy); from it on the two
runs either side of the wrap go as two messages (one more message latency, no
copy), which is faster for large blocks.  Blocks in separate tensors
(``all_gather`` into a list) are packed.

Cost (p ranks, n bytes gathered per rank): ⌈lg p⌉α + n(p-1)/p·β (the
reference model), plus α for every step that sends its wrapping blocks as two
messages (steps after the first whose message reaches ``pack_bytes``; the
cost model assumes the default); a packed step's local copy is left out.
The schedule has it, and the step's messages as the program sends them.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from pydantic import Field

from kernbench.ccl.algorithms import Algorithm, OpArgs, Params, lg, register
from kernbench.ccl.algorithms.recursive_doubling import place_blocks, post_blocks
from kernbench.ccl.algorithms.schedule import Message, Phase, Schedule, Step, Work
from kernbench.ccl.comm import Comm
from kernbench.units import MAX_QUANTITY

PACK_BYTES = 16 * 1024


class BruckParams(Params):
    """``pack_bytes``: see the module docstring."""

    pack_bytes: int = Field(
        PACK_BYTES,
        strict=True,
        ge=0,
        le=MAX_QUANTITY,
        description="bytes below which a step's blocks are packed into one message",
    )


def _runs(first: int, count: int, p: int, split: bool) -> list[list[int]]:
    """Block indices first, first+1, … (count of them, mod p) as one message, or as
    runs that do not wrap past block p-1 when ``split``."""
    end = first + count
    if end <= p:
        return [list(range(first, end))]
    if not split:
        return [[i % p for i in range(first, end)]]
    return [list(range(first, p)), list(range(0, end - p))]


def all_gather(c: Comm, a: OpArgs) -> Generator:
    p, r = c.size, c.rank
    limit = int((c.params or {}).get("pack_bytes", PACK_BYTES))
    if p > 1:  # the own block leaves straight from the input while it is copied
        c.post_send((r - 1) % p, a.inp)
    yield from c.copy(a.blocks[r], a.inp)
    distance = 1
    while distance < p:
        count = min(distance, p - distance)
        # Both ends decide from the same blocks' sizes, so they agree on the messages.
        split = sum(a.blocks[(r + i) % p].nbytes for i in range(count)) >= limit
        for run in _runs(r, count, p, split) if distance > 1 else ():
            yield from post_blocks(c, (r - distance) % p, [a.blocks[i] for i in run])
        split = sum(a.blocks[(r + distance + i) % p].nbytes for i in range(count)) >= limit
        for run in _runs((r + distance) % p, count, p, split):
            incoming = yield from c.recv((r + distance) % p)
            yield from place_blocks(c, [a.blocks[i] for i in run], incoming)
        distance <<= 1
    yield from c.drain()


def _cost(p: int, n: float, a: float, b: float, g: float) -> float:
    """⌈lg p⌉α + n(p-1)/p·β, plus α for each step whose wrapping blocks go as two messages."""
    split, distance = 0, 2
    while distance < p:
        count = min(distance, p - distance)
        split += count * n / p >= PACK_BYTES
        distance <<= 1
    return (lg(p) + split) * a + n * (p - 1) / p * b


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    """Step d: rank r sends its first min(d, p-d) blocks to r-d (the own block at d=1 leaves
    while it is copied); blocks that wrap past p-1 go packed (a copy first) or as two
    messages, as the program decides."""
    p = len(pes)
    limit = int(params.get("pack_bytes", PACK_BYTES))
    block = nbytes / p
    steps = []
    distance = 1
    while distance < p:
        count = min(distance, p - distance)
        split = count * block >= limit
        packs, messages = [], []
        for r in range(p):
            runs = _runs(r, count, p, split) if distance > 1 else [[r]]
            if distance > 1 and not split and r + count > p:
                packs.append(Work(r, "copy", count * block))
            messages += [Message(r, (r - distance) % p, len(run) * block) for run in runs]
        if packs:
            steps.append(Step(work=tuple(packs)))
        copies = tuple(Work(r, "copy", block) for r in range(p)) if distance == 1 else ()
        steps.append(
            Step(
                tuple(messages),
                tuple(Work(m.dst, "place", m.nbytes) for m in messages),
                copies,
            )
        )
        distance <<= 1
    return (Phase(tuple(steps)),)


def _peers(op: str, size: int, rank: int) -> set[int]:
    peers, distance = set(), 1
    while distance < size:
        peers |= {(rank + distance) % size, (rank - distance) % size}
        distance <<= 1
    return peers - {rank}


def _pattern(size: int, rank: int) -> list[int]:
    """One target per step; the last step (the most blocks) is shown."""
    if size < 2:
        return []
    return [(rank - (1 << ((size - 1).bit_length() - 1))) % size]


register(
    Algorithm(
        name="bruck",
        description="Bruck all-gather: ceil(lg p) steps for any p",
        programs={"all_gather": all_gather},
        params=BruckParams,
        costs={"all_gather": _cost},
        peers=_peers,
        pattern=_pattern,
        schedule=_schedule,
    )
)
