"""Rank placement from the machine graph: the order in which an algorithm meets its ranks.

A collective algorithm is written over ranks 0..p-1 (a ring sends to r+1, a
heap-ordered tree's children are 2v+1 and 2v+2).  Which PE plays which of
those parts decides which links its messages cross.  Following the user's
rank numbering, a ring over a 4x4 cube mesh jumps back across the mesh at the
end of every row, and a ring at PE level on a rack leaves and re-enters SIPs
many times.  This module picks, for a group of PEs, an *algorithm order*
``order`` (algorithm rank i is played by the group's rank ``order[i]``) that
crosses the slowest link classes as few times as the pattern allows:

* the **locality cycle** (:func:`ring_order`): ranks grouped by SIP (SIPs in
  index order, so each SIP is one contiguous stretch: a ring enters and leaves
  every SIP once per direction); inside a SIP, cubes in the order of a
  Hamiltonian cycle of the cube mesh (a boustrophedon through the rows with
  the first column kept for the way back) that starts at the SIP's gateway
  (the cube whose router carries its inter-SIP links, read off a route) and
  so ends next to it; inside a cube, PEs in index order (they all meet at the
  cube's router).
* a **tree order** (:func:`tree_order`): the locality cycle rotated to start at
  the root and laid over the heap in pre-order, so every subtree is one
  stretch of the cycle: a child sits next to its parent (the first child) or
  inside the parent's stretch, and SIP boundaries are crossed only near the root.
* a **rooted order** (:func:`rooted_order`): the locality cycle rotated to start
  at the root (binomial trees, whose subtrees are stretches of the order
  relative to the root).

Hierarchical compositions group ranks by SIP and cube in the order they come:
over the locality cycle every group starts at its gateway, so the first
member of each group (the leader of the level above) sits at the links of the
next level, and a level that does not split the group is skipped.

The user's numbering is kept: the launcher (:mod:`kernbench.ccl.launch`)
hands algorithm rank i the buffers of user rank ``order[i]`` and maps roots
and block indices, so values land where the user expects them.  A group that
spans one level only (all in one cube, or one PE per SIP) keeps its order
unchanged: every order is as good there, and the machines the cost-model
tests use (ring8, fc8) run as they always did.  Orders are deterministic:
they depend only on the PEs and the machine, never on dict or set order.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from kernbench.topology import names

if TYPE_CHECKING:
    from kernbench.machine.api import Machine

__all__ = [
    "MappingKind",
    "mesh_cycle",
    "gateway_cube",
    "ring_order",
    "tree_order",
    "rooted_order",
    "algorithm_order",
    "is_identity",
    "describe_order",
]

# How an algorithm wants its ranks laid over the machine (``Algorithm.mapping``):
# ``cycle`` (rings and compositions of rings), ``tree`` (heap-ordered binary
# trees), ``rooted`` (binomial trees).
MappingKind = Literal["cycle", "tree", "rooted"]


@functools.lru_cache(maxsize=64)
def mesh_cycle(w: int, h: int) -> tuple[int, ...]:
    """Every cube of a ``w`` x ``h`` mesh (cube = y·w + x) once, neighbours next to each other.

    Row 0 left to right, then the rows snake through columns 1..w-1 and the
    way back runs up column 0: a Hamiltonian cycle whenever h is even (the
    transposed construction is used when only w is even).  On an odd x odd
    mesh, which has none, the closing step is the only long one; a single row
    or column is visited end to end.
    """
    if w == 1 or h == 1:
        return tuple(range(w * h))
    if h % 2 and not w % 2:  # snake down the columns instead
        return tuple(y * w + x for x, y in _return_column_cycle(h, w))
    return tuple(y * w + x for y, x in _return_column_cycle(w, h))


def _return_column_cycle(w: int, h: int) -> list[tuple[int, int]]:
    """(y, x) pairs: row 0 left to right, rows 1..h-1 snaking over x >= 1, column 0 back up."""
    cells = [(0, x) for x in range(w)]
    for y in range(1, h):
        xs = range(w - 1, 0, -1) if y % 2 else range(1, w)
        cells.extend((y, x) for x in xs)
    cells.extend((y, 0) for y in range(h - 1, 0, -1))
    return cells


def gateway_cube(machine: Machine, sip: int) -> int:
    """The cube of SIP ``sip`` whose router its traffic to other SIPs leaves from.

    Read off the route to another SIP (the source of the first link that
    leaves the SIP); a machine of one SIP has none, and its attach cube (where
    the host link lands) is returned.
    """
    topology = machine.topology
    if topology.num_sips < 2:
        return topology.system.interconnect.attach_cube
    other = (sip + 1) % topology.num_sips
    route = machine.route_cost(names.pe(sip, 0, 0), names.pe(other, 0, 0))
    for index in route.edges:
        edge = machine.graph.edges[index]
        if names.parse(edge.dst).sip != sip:
            return names.parse(edge.src).cube
    return topology.system.interconnect.attach_cube  # pragma: no cover - a route leaves


def _spans_one_level(places: Sequence[tuple[int, int, int]]) -> bool:
    """All ranks in one cube, or every rank in a SIP of its own."""
    cubes = {(s, c) for s, c, _ in places}
    sips = {s for s, _, _ in places}
    return len(cubes) == 1 or len(sips) == len(places)


def _cube_ranks(machine: Machine, sip: int) -> dict[int, int]:
    """Cube -> its position on the SIP's mesh cycle, counted from the gateway."""
    mesh = machine.topology.sip.cube_mesh
    cycle = mesh_cycle(mesh.w, mesh.h)
    start = cycle.index(gateway_cube(machine, sip))
    return {cube: (i - start) % len(cycle) for i, cube in enumerate(cycle)}


def ring_order(machine: Machine, pes: Sequence[str]) -> tuple[int, ...]:
    """The locality cycle over ``pes``: ``order[i]`` is the group rank at ring position i.

    SIPs in index order, inside each the cubes along the mesh cycle from the
    gateway, inside each cube the PEs in index order; ties (two ranks on one
    PE) keep the group's order.  The identity when the group spans one level.
    """
    places = [names.pe_coordinates(pe) for pe in pes]
    if _spans_one_level(places):
        return tuple(range(len(pes)))
    cube_ranks = {s: _cube_ranks(machine, s) for s in sorted({s for s, _, _ in places})}

    def key(rank: int) -> tuple[int, int, int, int]:
        s, c, p = places[rank]
        return s, cube_ranks[s][c], p, rank

    return tuple(sorted(range(len(pes)), key=key))


def rooted_order(machine: Machine, pes: Sequence[str], root: int = 0) -> tuple[int, ...]:
    """The locality cycle rotated to start at group rank ``root``."""
    cycle = ring_order(machine, pes)
    start = cycle.index(root)
    return cycle[start:] + cycle[:start]


def tree_order(machine: Machine, pes: Sequence[str], root: int = 0) -> tuple[int, ...]:
    """Heap position v -> group rank: the rooted cycle laid over the heap in pre-order.

    Every subtree of the heap (children 2v+1, 2v+2) is a stretch of the cycle,
    so children sit near their parents.
    """
    cycle = rooted_order(machine, pes, root)
    order = [0] * len(cycle)
    for index, position in enumerate(_preorder(len(cycle))):
        order[position] = cycle[index]
    return tuple(order)


@functools.lru_cache(maxsize=64)
def _preorder(size: int) -> tuple[int, ...]:
    """Heap positions 0..size-1 in pre-order (a node, its first subtree, its second)."""
    visited, stack = [], [0] if size else []
    while stack:
        v = stack.pop()
        visited.append(v)
        stack.extend(child for child in (2 * v + 2, 2 * v + 1) if child < size)
    return tuple(visited)


def algorithm_order(
    machine: Machine, kind: MappingKind | None, pes: Sequence[str], root: int = 0
) -> tuple[int, ...]:
    """The order an algorithm of mapping ``kind`` runs its ranks in (identity for ``None``).

    For ``tree`` and ``rooted`` the root comes first (it is algorithm rank 0).  A
    group that spans one level keeps its order whatever the kind.
    """
    if kind is None or _spans_one_level([names.pe_coordinates(pe) for pe in pes]):
        return tuple(range(len(pes)))
    if kind == "cycle":
        return ring_order(machine, pes)
    if kind == "tree":
        return tree_order(machine, pes, root)
    return rooted_order(machine, pes, root)


def is_identity(order: Sequence[int]) -> bool:
    return all(rank == i for i, rank in enumerate(order))


def describe_order(order: Sequence[int], limit: int = 12) -> str:
    """``order`` compactly: runs of consecutive ranks as ``a-b``; past ``limit`` runs, elided."""
    runs: list[list[int]] = []
    for rank in order:
        if (
            runs
            and abs(rank - runs[-1][-1]) == 1
            and (len(runs[-1]) == 1 or rank - runs[-1][-1] == runs[-1][-1] - runs[-1][-2])
        ):
            runs[-1].append(rank)
        else:
            runs.append([rank])
    parts = [f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)) for run in runs]
    if len(parts) > limit:
        hidden = len(parts) - limit
        parts = [*parts[: limit - 2], f"... ({hidden} runs)", *parts[-2:]]
    return ",".join(parts)
