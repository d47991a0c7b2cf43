"""Run collective programs against a recording communicator: operations, not messages.

:class:`RecordingComm` is a :class:`~kernbench.ccl.comm.Comm` whose primitives
append :mod:`kernbench.machine.programs` operations to the rank's current strand
instead of asking the machine for them.  The same algorithm code runs: it is
recorded, not rewritten (ADR 0015).

Two ways to run:

* **timing** (``with_values=False``): a receive returns nothing at once, so each
  rank's program runs straight through on its own; ranks can be recorded one
  by one (and only a few of them, when the program is rotation-symmetric).
* **values** (``with_values=True``): messages carry copies of their regions, a
  receive waits for its message, and a small round-robin scheduler interleaves
  the ranks' programs (and their concurrent bodies) until every one is done; the
  tensors end with the collective's values, computed in program order.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

from kernbench.ccl.comm import Comm, Region
from kernbench.errors import DistributedError
from kernbench.machine.programs import (
    Op,
    RankShift,
    RecordedLane,
    RecordedRank,
    relative,
    shifted,
)
from kernbench.topology import names

__all__ = [
    "RecordingComm",
    "record_ranks",
    "record_lane",
    "run_for_values",
    "RecordCache",
    "record_cache",
    "SYMMETRY_FROM",
]

# What a recording generator yields when it must wait (a receive, concurrent bodies).
_BLOCKED = object()

# The kinds of operation, read off the enum once: a member read through its class
# costs an enum lookup, and every operation a program records names its kind.
_POST, _SEND, _RECV, _STREAM = Op.POST, Op.SEND, Op.RECV, Op.STREAM
_DRAIN, _SPAWN, _JOIN = Op.DRAIN, Op.SPAWN, Op.JOIN


class _Spawn:
    """Yielded by ``concurrently``: run these bodies side by side, resume when all are done."""

    __slots__ = ("bodies", "strands")

    def __init__(self, bodies: list[Generator], strands: list[int]) -> None:
        self.bodies = bodies
        self.strands = strands


class _Rank:
    """One rank's recording: its strands, the operations of the strand now running
    (``ops``, where its communicators append), and how many communicators it has.

    ``streams`` holds one of each distinct stream operation recorded: a program
    repeats them (a ring's every step reduces alike), and one recorded as the one
    seen before leaves no new tuples behind for the collector to walk.
    """

    __slots__ = ("record", "ops", "streams", "comms")

    def __init__(self) -> None:
        self.record = RecordedRank()
        self.ops = self.record.strands[0]
        self.streams: dict[tuple, tuple] = {}
        self.comms = 0

    def run(self, strand: int) -> None:
        """Make ``strand`` the one now running."""
        self.ops = self.record.strands[strand]


class _Mailboxes:
    """Payloads in flight, per (sender, receiver, channel), in order (values mode only)."""

    def __init__(self) -> None:
        self.boxes: dict[tuple[int, int, tuple], deque] = {}
        self.moves = 0  # payloads put or taken so far: how the scheduler sees progress

    def put(self, key: tuple[int, int, tuple], payload: Any) -> None:
        self.boxes.setdefault(key, deque()).append(payload)
        self.moves += 1

    def take(self, key: tuple[int, int, tuple]) -> tuple[bool, Any]:
        box = self.boxes.get(key)
        if not box:
            return False, None
        self.moves += 1
        return True, box.popleft()


class RecordingComm(Comm):
    """A communicator that records what its rank's program asks for.

    ``ranks[i]`` is the global rank (in the lane) of this communicator's rank
    ``i``; recorded peers are global ranks, recorded channels the tag path below
    the collective's communicator.
    """

    def __init__(
        self,
        rank_state: _Rank,
        rank: int,
        pes: list[str],
        nodes: list[str],
        ranks: list[int],
        *,
        op: str,
        path: tuple,
        depth: int | None,
        params: Any,
        mail: _Mailboxes | None,
    ) -> None:
        # Without a machine: nothing here is timed.
        super().__init__(None, rank, pes, nodes, op=op, key=path, depth=depth, params=params)
        self._state = rank_state
        self._global = ranks
        self._mail = mail
        self.values = mail is not None  # timing mode: traffic only, the buffers untouched
        self._comm_id = rank_state.comms
        rank_state.comms += 1

    def sub(self, ranks: list[int], tag: Any) -> RecordingComm:
        return RecordingComm(
            self._state,
            ranks.index(self.rank),
            [self.pes[r] for r in ranks],
            [self.nodes[r] for r in ranks],
            [self._global[r] for r in ranks],
            op=self.op,
            path=(*self.key, tag),
            depth=self.depth,
            params=self.params,
            mail=self._mail,
        )

    # -- communication -------------------------------------------------------------
    def _message(self, kind: Op, peer: int, region: Region | None, nbytes: int | None) -> None:
        if region is None:
            size, source = nbytes or 0, self.pe
        else:
            size, source = region.nbytes, region.buffer.memory_node
        them = self._global[peer]
        self._state.ops.append(
            (kind, them, self.key, size, source, self.nodes[peer], self._comm_id)
        )
        if self._mail is not None:
            payload = region.read() if region is not None else None
            self._mail.put((self._global[self.rank], them, self.key), payload)

    def post_send(self, peer: int, region: Region | None, nbytes: int | None = None) -> None:
        self._message(_POST, peer, region, nbytes)

    def send(self, peer: int, region: Region | None, nbytes: int | None = None) -> Generator:
        self._message(_SEND, peer, region, nbytes)
        return
        yield  # a generator, as Comm.send is

    def recv(self, peer: int) -> Generator:
        them = self._global[peer]
        self._state.ops.append((_RECV, them, self.key))
        if self._mail is None:
            return None
        key = (them, self._global[self.rank], self.key)
        while True:
            found, payload = self._mail.take(key)
            if found:
                return payload
            yield _BLOCKED

    def drain(self) -> Generator:
        self._state.ops.append((_DRAIN, self._comm_id))
        return
        yield

    def concurrently(self, bodies: Iterable[Generator]) -> Generator:
        bodies = list(bodies)
        if not bodies:
            return
        strands = self._state.record.strands
        ids = list(range(len(strands), len(strands) + len(bodies)))
        strands.extend([] for _ in bodies)
        self._state.ops.append((_SPAWN, tuple(ids)))
        yield _Spawn(bodies, ids)
        self._state.ops.append((_JOIN, tuple(ids)))

    def _stream(self, loads: Sequence, stores: Sequence, flops: int) -> tuple[()]:
        # Recorded even when empty (a rank whose block has no elements): every
        # rank then runs the same sequence of operations; an empty one costs nothing.
        # Nothing to wait for: an empty iterable, for the caller's ``yield from``.
        op = (_STREAM, tuple(loads), tuple(stores), flops)
        self._state.ops.append(self._state.streams.setdefault(op, op))
        return ()


class _Task:
    __slots__ = ("body", "rank", "strand", "parent", "waiting")

    def __init__(self, body: Generator, rank: _Rank, strand: int, parent: _Task | None) -> None:
        self.body = body
        self.rank = rank
        self.strand = strand
        self.parent = parent
        self.waiting = 0  # children still running


def _run(tasks: list[_Task], mail: _Mailboxes | None = None) -> None:
    """Round-robin the tasks until all are done; raise if a round moves none (a deadlock).

    A task runs until it blocks on a receive, so a round made progress if a
    task finished or spawned, or a payload was put or taken.
    """
    ready = deque(tasks)
    while ready:
        progressed = False
        moves = mail.moves if mail is not None else 0
        for _ in range(len(ready)):
            task = ready.popleft()
            task.rank.run(task.strand)
            try:
                yielded = task.body.send(None)
            except StopIteration:
                progressed = True
                parent = task.parent
                if parent is not None:
                    parent.waiting -= 1
                    if not parent.waiting:
                        ready.append(parent)
                continue
            if yielded is _BLOCKED:
                ready.append(task)  # its message may come later in this round or the next
                continue
            progressed = True
            if isinstance(yielded, _Spawn):
                task.waiting = len(yielded.bodies)
                ready.extend(
                    _Task(body, task.rank, strand, task)
                    for body, strand in zip(yielded.bodies, yielded.strands, strict=True)
                )
            else:
                ready.append(task)
        if mail is not None and mail.moves != moves:
            progressed = True
        if ready and not progressed:
            raise DistributedError(
                "a collective's programs cannot finish: every program waits for a message "
                f"that is never sent ({len(ready)} programs blocked)"
            )


Program = Callable[[Comm], Generator]


def _comms(
    pes: list[str],
    nodes: list[str],
    ranks: Sequence[int],
    *,
    op: str,
    depth: int | None,
    params: Any,
    mail: _Mailboxes | None,
) -> list[tuple[_Rank, RecordingComm]]:
    everyone = list(range(len(pes)))
    made = []
    for rank in ranks:
        state = _Rank()
        comm = RecordingComm(
            state,
            rank,
            pes,
            nodes,
            everyone,
            op=op,
            path=(),
            depth=depth,
            params=params,
            mail=mail,
        )
        made.append((state, comm))
    return made


def record_ranks(
    programs: Sequence[Program],
    pes: list[str],
    nodes: list[str],
    ranks: Sequence[int],
    *,
    op: str,
    depth: int | None,
    params: Any,
) -> list[RecordedRank]:
    """The operations of ``ranks`` of one lane (timing mode: each rank on its own)."""
    records = []
    for state, comm in _comms(pes, nodes, ranks, op=op, depth=depth, params=params, mail=None):
        _run([_Task(programs[comm.rank](comm), state, 0, None)])
        records.append(state.record)
    return records


def run_for_values(
    programs: Sequence[Program],
    pes: list[str],
    nodes: list[str],
    *,
    op: str,
    depth: int | None,
    params: Any,
) -> list[RecordedRank]:
    """Run every rank of one lane with real payloads (values mode); their operations too."""
    mail = _Mailboxes()
    made = _comms(
        pes,
        nodes,
        range(len(pes)),
        op=op,
        depth=depth,
        params=params,
        mail=mail,
    )
    _run([_Task(programs[comm.rank](comm), state, 0, None) for state, comm in made], mail)
    return [state.record for state, _ in made]


# Below this many ranks every rank is recorded; above it, a lane whose programs
# repeat with a period is recorded one period long (ADR 0015).
SYMMETRY_FROM = 64
# Ranks outside the recorded period checked against the shifted period.
SAMPLES = 16
# A lane without a period is recorded rank by rank only up to this many
# operations in all (a ragged ring of 4,096 ranks would need 67 M).
RECORD_BUDGET = 4_000_000


# A ragged lane (blocks cut unevenly, e.g. fewer elements than ranks) repeats
# its structure but not its sizes: rank r's block may be one element longer
# than rank r - period's.  It is still recorded one period long when every
# sampled size is within this many bytes (or this fraction) of the period's,
# priced at the largest size seen (ADR 0015: the error is at most one
# element's transfer per step).
NEAR_BYTES = 64
NEAR_FRACTION = 0.01


def _near(a: int, b: int) -> bool:
    return abs(a - b) <= max(NEAR_BYTES, NEAR_FRACTION * max(a, b))


def _widen(base: list[list[tuple]], other: list[list[tuple]]) -> list[list[tuple]] | None:
    """``base`` with every size raised to ``other``'s where the two differ only in sizes,
    and only by a little (:func:`_near`); ``None`` where they differ otherwise."""
    if len(base) != len(other):
        return None
    out = []
    for strand_a, strand_b in zip(base, other, strict=True):
        if len(strand_a) != len(strand_b):
            return None
        ops = []
        for a, b in zip(strand_a, strand_b, strict=True):
            if a == b:
                ops.append(a)
                continue
            kind = a[0]
            if kind != b[0]:
                return None
            if kind == Op.POST or kind == Op.SEND:
                if a[:3] != b[:3] or a[4:] != b[4:] or not _near(a[3], b[3]):
                    return None
                ops.append((*a[:3], max(a[3], b[3]), *a[4:]))
            elif kind == Op.STREAM:
                moved = []
                for side_a, side_b in ((a[1], b[1]), (a[2], b[2])):
                    if len(side_a) != len(side_b):
                        return None
                    side = []
                    for (node_a, n_a), (node_b, n_b) in zip(side_a, side_b, strict=True):
                        if node_a != node_b or not _near(n_a, n_b):
                            return None
                        side.append((node_a, max(n_a, n_b)))
                    moved.append(tuple(side))
                if not _near(a[3], b[3]):
                    return None
                ops.append((kind, moved[0], moved[1], max(a[3], b[3])))
            else:
                return None
        out.append(ops)
    return out


def _samples(p: int, period: int, group: int) -> list[int]:
    """Deterministic ranks spread over the lane, outside ``0 .. period-1`` (with the
    ranks at the edges of the first groups when ranks are shifted within groups)."""
    picked = {period, period + 1, p - 1, p - period, p // 2, p // 3, (2 * p) // 3}
    picked.update((k * 7919 + 1) % p for k in range(1, SAMPLES))
    if group < p:
        picked.update((group - 1, group, group + period, 2 * group - 1, group - period))
    return sorted(r for r in picked if period <= r < p)


def _groups(pes: Sequence[str]) -> list[int]:
    """Sizes of the runs of consecutive ranks on one SIP, and on one cube, where every
    run of the lane has that size: the groups a composition's inner levels work in."""
    sizes = []
    for part in (names.cube_of, names.sip_of):
        try:
            owners = [part(pe) for pe in pes]
        except ValueError:
            return []
        runs = [1]
        for a, b in zip(owners, owners[1:], strict=False):
            if a == b:
                runs[-1] += 1
            else:
                runs.append(1)
        if len(set(runs)) == 1 and 1 < runs[0] < len(pes):
            sizes.append(runs[0])
    return sorted(set(sizes))


def record_lane(
    programs: Sequence[Program],
    pes: list[str],
    nodes: list[str],
    memory: list[str],
    *,
    op: str,
    depth: int | None,
    params: Any,
) -> RecordedLane | None:
    """One lane's operations (timing mode), as few ranks as its symmetry allows.

    A lane of at least :data:`SYMMETRY_FROM` ranks whose programs repeat with a
    period P (rank ``q*P + i`` runs rank ``i``'s program shifted by ``q*P``) is
    recorded for ranks ``0 .. P-1`` only; P is the smallest divisor of p, up to
    p/2, for which every sampled rank's recording equals the shifted one.  For
    each P the plain rotation is tried first, then a rotation by groups and
    within them (:class:`~kernbench.machine.programs.RankShift`), the groups
    being the lane's runs of ranks on one cube or one SIP: a composition's
    rings inside every SIP and across them repeat every two ranks that way,
    not every SIP.  Any other lane is recorded rank by rank, unless that would
    take more than :data:`RECORD_BUDGET` operations (``None``: run it message
    by message).
    """
    p = len(pes)
    kwargs = {"op": op, "depth": depth, "params": params}
    if p < SYMMETRY_FROM:
        every = record_ranks(programs, pes, nodes, range(p), **kwargs)
        return RecordedLane(pes, nodes, depth, every)
    roles = (pes, nodes, memory)
    where: dict[str, tuple[int, int]] = {}
    for role, names_ in enumerate(roles):
        for rank, name in enumerate(names_):
            where.setdefault(name, (role, rank))
    recorded: dict[int, RecordedRank] = {}

    def record(rank: int) -> RecordedRank:
        found = recorded.get(rank)
        if found is None:
            found = recorded[rank] = record_ranks(programs, pes, nodes, [rank], **kwargs)[0]
        return found

    groups = _groups(pes)
    rel: list[list[list[tuple]]] = []
    for period in (d for d in range(1, p // 2 + 1) if p % d == 0):
        for rank in range(len(rel), period):
            made = relative(record(rank).strands, where, roles, rank)
            if made is None:
                break
            rel.append(made)
        if len(rel) < period:
            break  # a node outside the lane's roles: record every rank
        for group in (p, *(g for g in groups if g > period and g % period == 0)):
            widened = _check_period(record, rel, where, roles, p, period, group)
            if widened is not None:
                ranks = [RecordedRank(strands) for strands in widened]
                return RecordedLane(
                    pes,
                    nodes,
                    depth,
                    ranks,
                    period=period,
                    roles=roles,
                    group=group if group < p else None,
                )
    first = record(0)
    if p * sum(map(len, first.strands)) > RECORD_BUDGET:
        return None
    # Every rank, reusing those the period search recorded.
    missing = [r for r in range(p) if r not in recorded]
    made = record_ranks(programs, pes, nodes, missing, **kwargs)
    recorded.update(zip(missing, made, strict=True))
    return RecordedLane(pes, nodes, depth, [recorded[r] for r in range(p)])


class _Base:
    """A base rank's relative programs, made concrete for sample after sample.

    Its distinct operations (a ring repeats them every step) are numbered once;
    each sample's shift rewrites those and rebuilds the strands by number, so no
    operation is hashed again: ``shifted(strands, move, roles)``, cheaper.
    """

    def __init__(self, strands: list[list[tuple]]) -> None:
        number: dict[tuple, int] = {}
        self.numbers = [[number.setdefault(op, len(number)) for op in strand] for strand in strands]
        self.distinct = list(number)

    def shifted(self, move: RankShift, roles: tuple[list[str], ...]) -> list[list[tuple]]:
        made = shifted([self.distinct], move, roles)[0]
        return [list(map(made.__getitem__, strand)) for strand in self.numbers]


def _check_period(
    record: Callable[[int], RecordedRank],
    rel: list[list[list[tuple]]],
    where: dict[str, tuple[int, int]],
    roles: tuple[list[str], ...],
    p: int,
    period: int,
    group: int,
) -> list[list[list[tuple]]] | None:
    """The period's relative programs (sizes widened to the samples' where they differ a
    little) if every sampled rank runs its base rank's shifted; else ``None``.

    One sample at a time, recorded once for all the candidates: a wrong period is
    usually told by its first sample.
    """
    widened: list[list[list[tuple]]] = list(rel[:period])
    bases: dict[int, _Base] = {}
    for r in _samples(p, period, group):
        move = RankShift.of_row(p, group, period, r)
        base = r % period
        check = record(r)
        # First against what the sample runs if the lane repeats: the base rank's
        # programs made concrete.  Cheaper than the sample's relative form, and a
        # sample equal to them passes below as well (its relative form is the base's,
        # or names a node it shares with other ranks otherwise).  Not once the base
        # was widened: a ragged lane's samples rarely run the base's sizes.
        expected = None
        if widened[base] is rel[base]:
            if base not in bases:
                bases[base] = _Base(rel[base])
            expected = bases[base].shifted(move, roles)
            if check.strands == expected:
                continue
        # Compare in relative form: the sample moved back onto its base rank.
        back = relative(check.strands, where, roles, r, move.inverse())
        if back is not None and (back == rel[base] or back == widened[base]):
            continue
        # Sizes a little apart (a ragged lane) widen the base; else the sample may
        # still run the same operations, with shared nodes named otherwise.
        near = None if back is None else _widen(widened[base], back)
        if near is not None:
            widened[base] = near
            continue
        if expected is None:
            expected = shifted(rel[base], move, roles)
        if check.strands != expected:
            return None
    return widened


class RecordCache:
    """The last few lanes recorded on one machine, by what their recording depends on.

    A benchmark calls the same collective on the same tensors again and again
    (nccl-tests' warm-up and timed iterations): the programs are the same, so
    their recording is too.  The key (built by the launcher) names the
    algorithm, op, parameters, ranks, nodes and every region each program
    touches; a program without such a signature is never cached.  ``None``
    lanes (over the recording budget) are remembered too.
    """

    SIZE = 16

    def __init__(self) -> None:
        self._lanes: OrderedDict[tuple, RecordedLane | None] = OrderedDict()
        self.hits = 0

    def get(self, key: tuple | None) -> tuple[bool, RecordedLane | None]:
        """``(found, lane)``: a lane recorded before under ``key`` (possibly ``None``)."""
        if key is None or key not in self._lanes:
            return False, None
        self.hits += 1
        self._lanes.move_to_end(key)
        return True, self._lanes[key]

    def put(self, key: tuple | None, lane: RecordedLane | None) -> None:
        if key is None:
            return
        self._lanes[key] = lane
        self._lanes.move_to_end(key)
        while len(self._lanes) > self.SIZE:
            self._lanes.popitem(last=False)


_CACHES: weakref.WeakKeyDictionary[Any, RecordCache] = weakref.WeakKeyDictionary()


def record_cache(machine: Any) -> RecordCache:
    """The :class:`RecordCache` of ``machine`` (one per machine, gone with it)."""
    cache = _CACHES.get(machine)
    if cache is None:
        cache = _CACHES[machine] = RecordCache()
    return cache
