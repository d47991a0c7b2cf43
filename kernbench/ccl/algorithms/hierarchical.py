"""Hierarchical all-reduce: reduce-scatter inside groups, all-reduce across, all-gather inside.

Ranks are grouped by where their PEs sit: ``levels: [cube, sip]`` groups ranks
first by cube, then by SIP.  With k ranks in my innermost group:

1. reduce-scatter the buffer inside the group (``algorithms[0]``): I own 1/k;
2. all-reduce my 1/k with the ranks holding the same part in the other groups,
   recursively with the remaining levels (``algorithms[1]``, …; the last
   algorithm runs across whatever is left);
3. all-gather inside the group (``algorithms[0]``).

Every level may use any algorithm that serves the op it is given.  Groups of
one level must all have the same size; a level that does not split the ranks
(one group, or groups of one) is skipped.  ``mesh2d`` is the same composition
with rows of a logical grid as the groups.

Where ranks sit: the launcher lays them over the machine's locality cycle
(:mod:`kernbench.ccl.mapping`), so every group starts at its gateway (its
first member, which all-reduces part 0 across, sits at the links to the next
level) and walks its cubes as a snake.  The rings across run in both
directions (odd parts through the groups in reverse, :func:`across_group`);
a ring level reduce-scatters into and gathers from the rank's own part in
place (no scratch copy); and the buffer goes through the first splitting
level in ``segments`` segments, one behind another, so that the links across
carry one segment while the groups reduce the next.

Parameters (:class:`HierarchicalParams`, checked when the catalogue loads):
``levels``, one or two of ``cube``/``sip``; ``algorithms``, one per level plus
one for the all-reduce across (fewer: the last is reused), each an algorithm
that does not itself compose others and serves what its place needs;
``segments`` (default: the count the cost model predicts fastest for the
size and machine, as ``chunks`` for the algorithms that pipeline).

:func:`composed_schedule` walks the same levels over the PEs without running
anything: it gives the composition's schedule (the inner groups' steps run
together, then the groups across, then the inner groups again) and refuses,
with the reason, every group the programs could not run on (unequal groups at
a level, a level algorithm that cannot run its op on the ranks it gets).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, model_validator

from kernbench.ccl.algorithms import (
    Algorithm,
    OpArgs,
    Params,
    algorithms,
    get_algorithm,
    register,
)
from kernbench.ccl.algorithms.schedule import (
    Phase,
    Schedule,
    Step,
    in_lane,
    relabel,
    then,
    together,
)
from kernbench.ccl.comm import Comm, Region, chunk_bounds
from kernbench.errors import DistributedError
from kernbench.topology import names
from kernbench.validation import KeyedValueError

__all__ = [
    "DEFAULT_SEGMENTS",
    "IN_PLACE_LEVELS",
    "ComposedParams",
    "HierarchicalParams",
    "across_group",
    "compose_all_reduce",
    "composed_peers",
    "composed_schedule",
    "grouping",
    "placement_key",
]


class ComposedParams(Params):
    """Parameters of an algorithm that runs other algorithms at its levels."""

    algorithms: list[str] | None = Field(
        None,
        min_length=1,
        description="algorithm per level, then the one across; default: ring everywhere",
    )

    def check_algorithms(self, levels: int) -> None:
        """Each named algorithm exists, composes nothing itself, and serves its place.

        With ``levels`` levels, ``algorithms[i]`` (i < levels) reduce-scatters and
        all-gathers inside level i's groups and the last one all-reduces across;
        a shorter list reuses its last entry for the places after it.
        """
        names = self.algorithms
        if names is None:
            return
        if len(names) > levels + 1:
            raise KeyedValueError(
                "algorithms",
                f"takes at most {levels + 1} algorithms (one per level and one across), "
                f"got {len(names)}",
            )
        known = algorithms()
        for index, name in enumerate(names):
            algorithm = known.get(name)
            if algorithm is None:
                raise KeyedValueError(
                    f"algorithms.{index}",
                    f"unknown algorithm {name!r}; known: {', '.join(sorted(known))}",
                )
            if issubclass(algorithm.params, ComposedParams):
                raise KeyedValueError(
                    f"algorithms.{index}",
                    f"{name} composes other algorithms itself; name one that does not "
                    "(ring, recursive_doubling, ...)",
                )
            needs = ["reduce_scatter", "all_gather"] if index < levels else []
            if index == len(names) - 1:
                needs.append("all_reduce")
            missing = [op for op in needs if op not in algorithm.programs]
            if missing:
                place = f"level {index}" if index < levels else "the all-reduce across"
                raise KeyedValueError(
                    f"algorithms.{index}",
                    f"{name} does not serve {' or '.join(missing)}, which {place} needs "
                    f"(it serves {', '.join(algorithm.ops)}); ring serves every place",
                )


# Level algorithms that reduce-scatter into the own input block and gather from it.
IN_PLACE_LEVELS = frozenset({"ring"})

# Segments when neither the configuration nor the tuner sets them (a program run
# outside the launcher).  The launcher's count comes from the cost model
# (kernbench.ccl.tuner.chosen_chunks): while one segment is all-reduced across the
# groups, the next is reduce-scattered inside them, which pays where the links
# across would idle while the groups reduce, and costs messages everywhere.
DEFAULT_SEGMENTS = 1


class HierarchicalParams(ComposedParams):
    """``levels``: how ranks are grouped, innermost first; ``algorithms``: per level."""

    levels: list[Literal["cube", "sip"]] = Field(
        ["sip"],
        min_length=1,
        max_length=2,
        description="grouping levels, innermost first: cube, sip",
    )
    segments: int | None = Field(
        None,
        strict=True,
        ge=1,
        le=64,
        description="segments of the buffer pipelined through the first level that splits"
        " (default: the count the cost model predicts fastest)",
    )

    @model_validator(mode="after")
    def _check(self) -> HierarchicalParams:
        if len(set(self.levels)) != len(self.levels):
            raise KeyedValueError("levels", "a level is listed twice; list each level once")
        self.check_algorithms(len(self.levels))
        return self


# A grouping level: (the communicator's PEs, a rank in it) -> the rank's group.
# Each level is evaluated on the communicator it splits, whose ranks are
# numbered afresh at every level.
GroupKey = Callable[[Sequence[str], int], object]


def placement_key(level: str) -> GroupKey:
    """Rank -> the SIP, or (SIP, cube), its PE sits in."""
    if level not in ("sip", "cube"):
        raise DistributedError(f"hierarchical: unknown level {level!r}; valid: cube, sip")
    of = names.sip_of if level == "sip" else names.cube_of

    def key(pes: Sequence[str], rank: int) -> object:
        return of(pes[rank])

    return key


@functools.lru_cache(maxsize=64)
def grouping(pes: tuple[str, ...], key: GroupKey) -> tuple[tuple[object, ...], dict]:
    """Every rank's group label, and the ranks of each group (shared by all ranks)."""
    labels = tuple(key(pes, r) for r in range(len(pes)))
    groups: dict[object, list[int]] = {}
    for r, label in enumerate(labels):
        groups.setdefault(label, []).append(r)
    return labels, groups


def across_group(groups: Mapping[object, list[int]], part: int, alternate: bool) -> list[int]:
    """The ranks that all-reduce part ``part`` across the groups, in ring order.

    With ``alternate``, the rings of odd parts run through the groups in reverse, so
    the rings across use both directions of the links between groups (each
    direction carries half of them) rather than one.
    """
    ranks = [g[part] for g in groups.values()]
    return ranks[::-1] if alternate and part % 2 and len(ranks) > 2 else ranks


def compose_all_reduce(
    c: Comm,
    a: OpArgs,
    keys: Sequence[GroupKey],
    names: Sequence[str],
    depth: int = 0,
    alternate: bool = False,
    segments: int = 1,
    in_place: bool = False,
) -> Generator:
    """All-reduce ``a.buf`` over ``c`` grouping by ``keys`` (innermost first).

    ``alternate``: rings across run in both directions (:func:`across_group`).
    ``in_place``: a level whose algorithm is in :data:`IN_PLACE_LEVELS` reduce-scatters
    into the rank's own part of the buffer and gathers from it (no scratch copy).
    ``segments``: the buffer is cut into that many segments that go through the
    first level that splits the ranks one behind another: segment s+1's
    reduce-scatter inside the groups runs while segment s is all-reduced across
    them, so the links across work while the groups reduce.
    """
    if c.size == 1:
        return
    if not keys:
        yield from get_algorithm(names[0]).programs["all_reduce"](c, a)
        return
    labels, groups = grouping(tuple(c.pes), keys[0])
    group = groups[labels[c.rank]]
    if len(group) in (1, c.size):  # this level does not split the ranks: skip it
        yield from compose_all_reduce(
            c, a, keys[1:], names[1:] or names[-1:], depth + 1, alternate, segments, in_place
        )
        return
    if len({len(g) for g in groups.values()}) != 1:
        sizes = {str(k): len(g) for k, g in groups.items()}
        raise DistributedError(f"hierarchical all_reduce needs equal groups; got sizes {sizes}")
    bounds = chunk_bounds(a.buf.count, max(1, min(segments, a.buf.count)))
    stages = []
    for index, (start, stop) in enumerate(bounds):
        comm = c if len(bounds) == 1 else c.sub(list(range(c.size)), ("segment", index))
        stages.append(
            _level(
                comm, a.buf.sub(start, stop), group, groups, keys, names, depth, alternate, in_place
            )
        )
    yield from _pipeline(c, stages)


def _pipeline(c: Comm, stages: Sequence[tuple[Callable, Callable]]) -> Generator:
    """Each stage's head, then its tail beside the next stages (heads one behind another)."""
    head, tail = stages[0]
    yield from head()
    if len(stages) == 1:
        yield from tail()
    else:
        yield from c.concurrently([tail(), _pipeline(c, stages[1:])])


def _level(
    c: Comm,
    buf: Region,
    group: list[int],
    groups: Mapping[object, list[int]],
    keys: Sequence[GroupKey],
    names: Sequence[str],
    depth: int,
    alternate: bool,
    in_place: bool,
) -> tuple[Callable[[], Generator], Callable[[], Generator]]:
    """One splitting level over ``buf``: (reduce-scatter inside, then across and gather)."""
    inner = c.sub(group, ("in", depth))
    k = inner.size
    parts = tuple(buf.sub(x, y) for x, y in chunk_bounds(buf.count, k))
    # The ring reduce-scatters into, and gathers from, the rank's own part in place;
    # other algorithms may read their input blocks after writing the output.
    in_place = in_place and names[0] in IN_PLACE_LEVELS
    mine_part = parts[inner.rank] if in_place else c.scratch(parts[inner.rank])
    inner_algo = get_algorithm(names[0])
    for op in ("reduce_scatter", "all_gather"):
        inner_algo.check(op, k)

    def head() -> Generator:
        yield from inner_algo.programs["reduce_scatter"](inner, OpArgs(blocks=parts, out=mine_part))

    def tail() -> Generator:
        outer = c.sub(across_group(groups, inner.rank, alternate), ("out", depth))
        yield from compose_all_reduce(
            outer,
            OpArgs(buf=mine_part),
            keys[1:],
            names[1:] or names[-1:],
            depth + 1,
            alternate,
            in_place=in_place,
        )
        yield from inner_algo.programs["all_gather"](inner, OpArgs(inp=mine_part, blocks=parts))

    return head, tail


def _level_algorithm(name: str, op: str, pes: Sequence[str], params: Mapping[str, Any]):
    algorithm = get_algorithm(name)
    if issubclass(algorithm.params, ComposedParams):
        raise DistributedError(f"{name} cannot be a level of a composition")
    reason = algorithm.unfit(op, pes, params)
    if reason:
        raise DistributedError(reason)
    return algorithm


def composed_schedule(
    pes: Sequence[str],
    keys: Sequence[GroupKey],
    names: Sequence[str],
    nbytes: float,
    params: Mapping[str, Any],
    depth: int = 0,
    alternate: bool = False,
    segments: int = 1,
    in_place: bool = False,
) -> Schedule:
    """The schedule of :func:`compose_all_reduce` over ``pes`` (ranks numbered as in ``pes``).

    Raises :class:`DistributedError` saying why where the programs would fail on these PEs.
    """
    if not names:
        raise DistributedError("a composition needs at least one algorithm (params.algorithms)")
    if len(pes) == 1:
        return ()
    if not keys:
        algorithm = _level_algorithm(names[0], "all_reduce", pes, params)
        return algorithm.schedule("all_reduce", pes, nbytes, params) if algorithm.schedule else ()
    rest = names[1:] or names[-1:]
    labels, groups = grouping(tuple(pes), keys[0])
    if len({len(g) for g in groups.values()}) != 1:
        sizes = {str(k): len(g) for k, g in groups.items()}
        raise DistributedError(f"level {depth} splits the ranks into unequal groups {sizes}")
    k = len(groups[labels[0]])
    if k in (1, len(pes)):  # this level does not split the ranks: skipped
        return composed_schedule(
            pes, keys[1:], rest, nbytes, params, depth + 1, alternate, segments, in_place
        )
    inner = []
    share = nbytes / segments
    for op in ("reduce_scatter", "all_gather"):
        parts = []
        for group in groups.values():
            members = [pes[r] for r in group]
            algorithm = _level_algorithm(names[0], op, members, params)
            if algorithm.schedule:
                steps = algorithm.schedule(op, members, share, params)
                if in_place and names[0] in IN_PLACE_LEVELS:
                    steps = _without_copies(steps)
                parts.append(relabel(steps, group, ("in", depth)))
        inner.append(together(parts))
    across = []
    for i in range(k):
        ranks = across_group(groups, i, alternate)
        members = [pes[r] for r in ranks]
        part = composed_schedule(
            members, keys[1:], rest, share / k, params, depth + 1, alternate, 1, in_place
        )
        across.append(relabel(part, ranks, ("out", depth)))
    head, tail = inner[0], then(together(across), inner[1])
    if segments == 1:
        return then(head, tail)
    everyone = list(range(len(pes)))
    stages = [
        tuple(in_lane(relabel(x, everyone, ("segment", s)), ("segment", s)) for x in (head, tail))
        for s in range(segments)
    ]
    return _pipelined_schedule(stages)


def _without_copies(schedule: Schedule) -> Schedule:
    """``schedule`` without its local copies (a level that gathers in place makes none)."""

    def step(s: Step) -> Step:
        return replace(s, alongside=tuple(w for w in s.alongside if w.kind != "copy"))

    return tuple(Phase(tuple(step(s) for s in phase.steps), phase.pieces) for phase in schedule)


def _pipelined_schedule(stages: Sequence[tuple[Schedule, Schedule]]) -> Schedule:
    """The schedule of :func:`_pipeline`: a head, then its tail beside the rest."""
    head, tail = stages[0]
    if len(stages) == 1:
        return then(head, tail)
    return then(head, together([tail, _pipelined_schedule(stages[1:])]))


_PLACEMENT_KEYS = {level: placement_key(level) for level in ("sip", "cube")}


def _levels(params: Mapping[str, Any]) -> tuple[list[GroupKey], list[str]]:
    levels = list(params.get("levels", ["sip"]))
    names = list(params.get("algorithms", ["ring"] * (len(levels) + 1)))
    keys = [_PLACEMENT_KEYS.get(level) or placement_key(level) for level in levels]
    return keys, names


def _segments(params: Mapping[str, Any]) -> int:
    return max(1, int(params.get("segments") or DEFAULT_SEGMENTS))


def all_reduce(c: Comm, a: OpArgs) -> Generator:
    params = c.params or {}
    keys, names = _levels(params)
    yield from compose_all_reduce(
        c, a, keys, names, alternate=True, segments=_segments(params), in_place=True
    )


def composed_peers(
    pes: Sequence[str],
    keys: Sequence[GroupKey],
    names: Sequence[str],
    alternate: bool = False,
) -> list[set[int]]:
    """Every rank's peers in :func:`compose_all_reduce` over ``pes``: its level
    algorithms' neighbours inside its group and across, level by level (a few per
    rank, where "everyone" would install p - 1 entries on each of p ranks)."""
    p = len(pes)
    out: list[set[int]] = [set() for _ in range(p)]
    if p == 1:
        return out
    if not keys:
        algorithm = get_algorithm(names[0])
        return [algorithm.neighbours("all_reduce", p, r) for r in range(p)]
    labels, groups = grouping(tuple(pes), keys[0])
    rest = names[1:] or names[-1:]
    k = len(groups[labels[0]])
    if k in (1, p):
        return composed_peers(pes, keys[1:], rest, alternate)
    inner = get_algorithm(names[0])
    local = [
        inner.neighbours("reduce_scatter", k, i) | inner.neighbours("all_gather", k, i)
        for i in range(k)
    ]
    for group in groups.values():
        for i, rank in enumerate(group):
            out[rank].update(group[q] for q in local[i])
    for i in range(k):
        ranks = across_group(groups, i, alternate)
        across = composed_peers([pes[r] for r in ranks], keys[1:], rest, alternate)
        for j, rank in enumerate(ranks):
            out[rank].update(ranks[q] for q in across[j])
    return out


def _peers_on(op: str, pes: Sequence[str], params: Mapping[str, Any]) -> list[set[int]]:
    return composed_peers(pes, *_levels(params), alternate=True)


def _fits(op: str, pes: Sequence[str], params: Mapping[str, Any]) -> str | None:
    try:
        composed_schedule(pes, *_levels(params), 0, params, alternate=True)
    except DistributedError as exc:
        return str(exc)
    return None


def _schedule(op: str, pes: Sequence[str], nbytes: float, params: Mapping[str, Any]) -> Schedule:
    return composed_schedule(
        pes,
        *_levels(params),
        nbytes,
        params,
        alternate=True,
        segments=_segments(params),
        in_place=True,
    )


register(
    Algorithm(
        name="hierarchical",
        mapping="cycle",
        description="reduce-scatter within cube/SIP groups, all-reduce across, all-gather within",
        programs={"all_reduce": all_reduce},
        params=HierarchicalParams,
        fits=_fits,
        schedule=_schedule,
        pipelines=True,
        pieces="segments",
        peers_on=_peers_on,
    )
)
