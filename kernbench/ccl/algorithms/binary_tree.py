"""Binary trees: broadcast, reduce, and all-reduce as reduce + broadcast, for any p.

The tree is a heap laid over the ranks relative to the root: the rank at
position v has children at positions 2v+1 and 2v+2 (when < p) and its parent
at (v-1)//2; position v is rank (root + v) mod p.  Data is cut into
``chunks`` pieces (catalogue parameter, default 1) that flow through the tree
one after another, so with several pieces the levels work at once.  In the
all-reduce the broadcast of a piece starts as soon as the root has reduced
it.

Costs (p ranks, n bytes, one piece): D = ⌈lg(p+1)⌉ - 1 is the number of
levels below the root (the heap's height, ⌊lg p⌋).  A rank sends to its two
children at once (contention for shared links belongs in β):

* broadcast: D·(α + nβ)
* reduce: the tree's critical path, :func:`reduce_time`: a rank combines its
  children's messages in order, nγ each, and sends α + nβ on; for a complete
  tree (p = 2^(D+1) - 1) that is D·(α + nβ + 2nγ), for p = 2^D it is
  D·(α + nβ) + (2D - 1)·nγ
* all-reduce (reduce, then broadcast): reduce + D·(α + nβ)

Schedule (for the cost model): the reduce goes up level by level from the
deepest, each parent combining its children's messages one after the other;
the broadcast comes down level by level; the ``chunks`` pieces flow through
these steps as a pipeline.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Mapping, Sequence
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, lg, register
from kernbench.ccl.algorithms.schedule import Message, Phase, Schedule, Step, Work
from kernbench.ccl.comm import Comm, Region, chunk_bounds

__all__ = [
    "Tree",
    "pieces",
    "tree_broadcast",
    "tree_reduce",
    "tree_all_reduce",
    "levels",
    "reduce_time",
    "tree_steps",
    "tree_schedule",
]


def levels(p: int) -> int:
    """Levels below the root of a heap-ordered binary tree of p ranks: ⌈lg(p+1)⌉ - 1."""
    return max(0, lg(p + 1) - 1)


def reduce_time(p: int, n: float, a: float, b: float, g: float) -> float:
    """When the root of a heap-ordered tree of p ranks has the reduction of n bytes.

    A rank's message leaves once it has combined its children's messages, taken
    in order (children 2v+1 then 2v+2), each arriving α + nβ after its sender was
    done and costing nγ to combine.
    """
    done = [0.0] * p
    for v in range(p - 1, -1, -1):
        t = 0.0
        for child in (2 * v + 1, 2 * v + 2):
            if child < p:
                t = max(t, done[child] + a + n * b) + n * g
        done[v] = t
    return done[0] if p else 0.0


class Tree:
    """A heap-ordered binary tree: ``ranks[v]`` is the communicator rank at position v."""

    def __init__(self, ranks: Sequence[int], rank: int) -> None:
        self.ranks = list(ranks)
        p = len(self.ranks)
        v = self.ranks.index(rank)
        self.parent = self.ranks[(v - 1) // 2] if v else None
        self.children = [self.ranks[x] for x in (2 * v + 1, 2 * v + 2) if x < p]

    @classmethod
    def rooted(cls, size: int, root: int, rank: int, mirrored: bool = False) -> Tree:
        """Position v is rank root + v (or root - v when ``mirrored``), modulo ``size``."""
        sign = -1 if mirrored else 1
        return cls([(root + sign * v) % size for v in range(size)], rank)

    def neighbours(self) -> set[int]:
        return set(self.children) | ({self.parent} if self.parent is not None else set())


def pieces(c: Comm, region: Region) -> list[Region]:
    """``region`` cut into the configuration's ``chunks`` pieces (at most one per element)."""
    parts = max(1, int((c.params or {}).get("chunks") or 1))
    parts = min(parts, max(1, region.count))
    return [region.sub(a, b) for a, b in chunk_bounds(region.count, parts)]


def tree_broadcast(c: Comm, tree: Tree, buf: Region) -> Generator:
    """The root's ``buf`` to every rank's ``buf``, piece by piece (posted sends: drain after)."""
    if not buf.count:
        return
    for piece in pieces(c, buf):
        if tree.parent is not None:
            yield from c.place(piece, (yield from c.recv(tree.parent)))
        for child in tree.children:
            c.post_send(child, piece)


def tree_reduce(c: Comm, tree: Tree, acc: Region, own: Region | None = None) -> Generator:
    """Reduce every rank's ``own`` (default ``acc``) into the root's ``acc``, piece by piece.

    A rank's partial sums go to ``acc``: the first child's message is combined with
    ``own`` straight into ``acc`` (so ``own`` is only read), and a leaf sends ``own``
    as it is.  Sends are posted: drain after.
    """
    if not acc.count:
        return
    own = acc if own is None else own
    for piece, source in zip(pieces(c, acc), pieces(c, own), strict=True):
        for child in tree.children:
            yield from c.reduce_into(piece, source, (yield from c.recv(child)))
            source = piece
        if tree.parent is not None:
            c.post_send(tree.parent, source)


def tree_all_reduce(c: Comm, tree: Tree, buf: Region) -> Generator:
    """Reduce up and broadcast down at once (the root sends a piece on once reduced)."""
    if not buf.count:
        return
    if tree.parent is None:
        for piece in pieces(c, buf):
            for child in tree.children:
                yield from c.reduce(piece, (yield from c.recv(child)))
            for child in tree.children:
                c.post_send(child, piece)
        return
    # A piece comes down only after the root has this rank's contribution to it, so
    # placing it cannot overtake the send up.
    yield from c.concurrently([tree_reduce(c, tree, buf), tree_broadcast(c, tree, buf)])


def broadcast(c: Comm, a: OpArgs) -> Generator:
    yield from tree_broadcast(c, Tree.rooted(c.size, a.root, c.rank), a.buf)
    yield from c.drain()


def reduce(c: Comm, a: OpArgs) -> Generator:
    """Non-root ranks keep partial sums in scratch, leaving their ``buf`` as it was."""
    acc = a.buf if c.rank == a.root else c.scratch(a.buf)
    yield from tree_reduce(c, Tree.rooted(c.size, a.root, c.rank), acc, a.buf)
    yield from c.drain()


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    yield from tree_all_reduce(c, Tree.rooted(c.size, 0, c.rank), a.buf)
    yield from c.drain()


def tree_steps(
    ranks: Sequence[int], op: str, nbytes: float, channel: Hashable = 0
) -> tuple[Step, ...]:
    """One piece through the heap-ordered tree over ``ranks`` (position v is ``ranks[v]``),
    on its own channels and lane ``channel``.

    ``reduce``: level by level from the deepest, each parent reducing its
    children's messages; ``broadcast``: level by level down, each child placing
    its parent's; ``all_reduce``: both.
    """
    depth = levels(len(ranks))
    by_level = [range(2**d - 1, min(2 ** (d + 1) - 1, len(ranks))) for d in range(depth + 1)]
    up = tuple(
        Step(
            tuple(
                Message(ranks[v], ranks[(v - 1) // 2], nbytes, channel, channel)
                for v in by_level[d]
            ),
            tuple(Work(ranks[(v - 1) // 2], "reduce", nbytes, channel) for v in by_level[d]),
        )
        for d in range(depth, 0, -1)
    )
    down = tuple(
        Step(
            tuple(
                Message(ranks[(v - 1) // 2], ranks[v], nbytes, channel, channel)
                for v in by_level[d]
            ),
            tuple(Work(ranks[v], "place", nbytes, channel) for v in by_level[d]),
        )
        for d in range(1, depth + 1)
    )
    return {"reduce": up, "broadcast": down}.get(op, up + down)


def tree_schedule(
    trees: Sequence[Sequence[int]], op: str, nbytes: float, params: Mapping[str, Any]
) -> Schedule:
    """Trees (each a rank order) run together, each on its share of ``nbytes`` and its own
    channels and program on every rank, pieces of ``chunks`` in a pipeline."""
    pieces = max(1, int(params.get("chunks") or 1))
    share = nbytes / len(trees) / pieces
    parts = [tree_steps(ranks, op, share, i) for i, ranks in enumerate(trees)]
    steps = tuple(
        Step(
            tuple(m for part in parts for m in part[j].messages),
            tuple(w for part in parts for w in part[j].work),
        )
        for j in range(len(parts[0]))
    )
    return (Phase(steps, pieces),) if steps else ()


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    return tree_schedule([list(range(len(pes)))], op, nbytes, params)


def _peers(op: str, size: int, rank: int) -> set[int]:
    if op == "all_reduce":
        return Tree.rooted(size, 0, rank).neighbours()
    # Broadcast and reduce are rooted anywhere: any rank may be a neighbour.
    return set(range(size)) - {rank}


def _pattern(size: int, rank: int) -> list[int]:
    """A broadcast step: to both children at once (a reduce step sends only to the parent)."""
    tree = Tree.rooted(size, 0, rank)
    return tree.children or ([tree.parent] if tree.parent is not None else [])


register(
    Algorithm(
        name="binary_tree",
        pipelines=True,
        mapping="tree",
        description="binary-tree broadcast and reduce (pipelined in pieces); all-reduce = both",
        programs={"broadcast": broadcast, "reduce": reduce, "all_reduce": all_reduce},
        costs={
            "broadcast": lambda p, n, a, b, g: levels(p) * (a + n * b),
            "reduce": reduce_time,
            "all_reduce": lambda p, n, a, b, g: (
                reduce_time(p, n, a, b, g) + levels(p) * (a + n * b)
            ),
        },
        peers=_peers,
        pattern=_pattern,
        schedule=_schedule,
    )
)
