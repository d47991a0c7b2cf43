"""Double binary tree (as in NCCL): two complementary binary trees, each with half the data.

Both trees are heap-ordered binary trees (:mod:`~kernbench.ccl.algorithms.binary_tree`).

* all-reduce: tree 1 puts rank v at position v (root 0); tree 2 is its mirror
  image, rank p-1-v at position v (root p-1).  Interior positions are
  v < ⌊p/2⌋, so tree 1's interior ranks are 0 … ⌊p/2⌋-1 and tree 2's are
  p-⌊p/2⌋ … p-1: no rank is interior in both trees; with even p every rank is
  interior in exactly one (with odd p the middle rank is a leaf in both).
* broadcast and reduce from ``root``: both trees must start at the root, so
  tree 1 puts rank root+v at position v and tree 2 reflects it about the
  root, rank root-v at position v (mod p).

The first half of the buffer goes through tree 1, the second through tree 2,
at the same time; tree 2 runs on a sub-communicator so its messages have
their own channels even where the two trees join the same pair of PEs.  Each
tree's data is pipelined in the configuration's ``chunks`` pieces.

Costs (p ranks, n bytes, one piece): each tree is a binary tree carrying n/2,
and the two run at once, so each op costs what the binary tree's does on n/2
bytes (:mod:`~kernbench.ccl.algorithms.binary_tree`; D = ⌈lg(p+1)⌉ - 1):

* broadcast: D·(α + nβ/2)
* reduce: reduce_time(p, n/2) + min(2, p-1)·nγ/2: the tree's critical path,
  plus the root's combining for the second tree, which waits for the first's
  (the root is interior in both)
* all-reduce: reduce_time(p, n/2) + D·(α + nβ/2)

The schedule is the binary tree's for both trees at once, each on its half.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from kernbench.ccl.algorithms import Algorithm, OpArgs, register
from kernbench.ccl.algorithms.bidirectional_ring import halves
from kernbench.ccl.algorithms.binary_tree import (
    Tree,
    levels,
    reduce_time,
    tree_all_reduce,
    tree_broadcast,
    tree_reduce,
    tree_schedule,
)
from kernbench.ccl.algorithms.schedule import Schedule
from kernbench.ccl.comm import Comm


def _all_reduce_trees(size: int, rank: int) -> tuple[Tree, Tree]:
    return Tree(list(range(size)), rank), Tree(list(range(size))[::-1], rank)


def _rooted_trees(size: int, root: int, rank: int) -> tuple[Tree, Tree]:
    return Tree.rooted(size, root, rank), Tree.rooted(size, root, rank, mirrored=True)


def _second(c: Comm) -> Comm:
    """Tree 2's communicator: the same ranks, separate channels."""
    return c.sub(list(range(c.size)), "tree2")


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    if c.size == 1:
        return
    first, second = _all_reduce_trees(c.size, c.rank)
    c2 = _second(c)
    lo, hi = halves(a.buf)
    yield from c.concurrently([tree_all_reduce(c, first, lo), tree_all_reduce(c2, second, hi)])
    yield from c.drain()
    yield from c2.drain()


def broadcast(c: Comm, a: OpArgs) -> Generator:
    if c.size == 1:
        return
    first, second = _rooted_trees(c.size, a.root, c.rank)
    c2 = _second(c)
    lo, hi = halves(a.buf)
    yield from c.concurrently([tree_broadcast(c, first, lo), tree_broadcast(c2, second, hi)])
    yield from c.drain()
    yield from c2.drain()


def reduce(c: Comm, a: OpArgs) -> Generator:
    """Non-root ranks keep partial sums in scratch, leaving their ``buf`` as it was."""
    if c.size == 1:
        return
    first, second = _rooted_trees(c.size, a.root, c.rank)
    c2 = _second(c)
    acc = a.buf if c.rank == a.root else c.scratch(a.buf)
    (acc_lo, acc_hi), (own_lo, own_hi) = halves(acc), halves(a.buf)
    yield from c.concurrently(
        [tree_reduce(c, first, acc_lo, own_lo), tree_reduce(c2, second, acc_hi, own_hi)]
    )
    yield from c.drain()
    yield from c2.drain()


def _peers(op: str, size: int, rank: int) -> set[int]:
    if op == "all_reduce":
        first, second = _all_reduce_trees(size, rank)
        return first.neighbours() | second.neighbours()
    # Broadcast and reduce are rooted anywhere: any rank may be a neighbour.
    return set(range(size)) - {rank}


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    """Root 0 for broadcast and reduce: tree 2 is then 0, p-1, p-2, ..., 1."""
    p = len(pes)
    if op == "all_reduce":
        trees = [list(range(p)), list(range(p))[::-1]]
    else:
        trees = [list(range(p)), [(-v) % p for v in range(p)]]
    return tree_schedule(trees, op, nbytes, params)


def _pattern(size: int, rank: int) -> list[int]:
    """Both trees' broadcast steps at once: to the children in each (a leaf: to its parent)."""
    targets: set[int] = set()
    for tree in _all_reduce_trees(size, rank):
        targets |= set(tree.children or ([tree.parent] if tree.parent is not None else []))
    return sorted(targets)


register(
    Algorithm(
        name="double_binary_tree",
        pipelines=True,
        mapping="tree",
        description="two complementary binary trees, each with half the data: all-reduce, "
        "broadcast, reduce",
        programs={"broadcast": broadcast, "reduce": reduce, "all_reduce": all_reduce},
        costs={
            "all_reduce": lambda p, n, a, b, g: (
                reduce_time(p, n / 2, a, b, g) + levels(p) * (a + n / 2 * b)
            ),
            "broadcast": lambda p, n, a, b, g: levels(p) * (a + n / 2 * b),
            "reduce": lambda p, n, a, b, g: (
                reduce_time(p, n / 2, a, b, g) + min(2, p - 1) * n / 2 * g
            ),
        },
        peers=_peers,
        pattern=_pattern,
        schedule=_schedule,
    )
)
