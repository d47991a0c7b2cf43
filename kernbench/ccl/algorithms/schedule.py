"""Schedules: what an algorithm moves and computes, step by step, for the cost model.

An algorithm describes one run of an op on p ranks as a :data:`Schedule`, a
tuple of :class:`Phase` s run one after another.  A phase is a list of
:class:`Step` s through which ``pieces`` pieces of the data flow as a
pipeline (with one piece the steps simply run in order).  A step is what the
ranks do at once between two waits:

* ``messages``: every message sent in the step (sender rank, receiver rank,
  bytes, channel tag).  Messages with the same sender, receiver and channel
  go one after another, as an IPCQ channel sends them; messages on different
  channels are in flight together and share the links and memory ports
  their routes cross.
* ``alongside``: local work that runs while the messages are in flight (a
  rank copying its own block while it sends it).
* ``work``: local work once the step's messages have arrived (reducing or
  placing them).  A rank's work items run one after another.

A rank may run several programs side by side (the two rings of the
bidirectional ring, the two trees of the double binary tree): each is a
``lane`` with its own pace; a message goes from its lane on the sender to the
same lane on the receiver, and a rank's lanes join at the end of each phase.
Ranks are numbers in the group, bytes are per piece.  The tuner
(:mod:`kernbench.ccl.tuner`) maps ranks to PEs, messages to routes from the
sender's memory to the receiver's buffer, and work to the memory ports it
streams through, and turns a schedule into a time.  Compositions (the
hierarchical and mesh algorithms) build their schedules from their parts'
with :func:`relabel`, :func:`together` and :func:`then`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

__all__ = [
    "Message",
    "Work",
    "Step",
    "Phase",
    "Schedule",
    "relabel",
    "together",
    "then",
    "in_lane",
    "ring_step",
    "in_buffer",
]

WorkKind = Literal["reduce", "place", "copy"]
# Which of a rank's two memories a region sits in: the one its data lives in, or
# the buffer its messages land in (the same one unless the buffer is TCM or SRAM).
Where = Literal["memory", "buffer"]


@dataclass(frozen=True, slots=True)
class Message:
    """``nbytes`` from rank ``src``'s memory to rank ``dst``'s receive buffer.

    ``signal``: a message with no data region (a barrier's), sent from the PE itself.
    ``source``: where the sent region sits on the sender (a program that keeps
    intermediate data in its buffer memory sends it from there).
    """

    src: int
    dst: int
    nbytes: float
    channel: Hashable = 0
    lane: Hashable = 0
    signal: bool = False
    source: Where = "memory"


@dataclass(frozen=True, slots=True)
class Work:
    """Local work on ``rank``'s PE over ``nbytes``.

    * ``reduce``: combine a received message (read from the buffer) with local
      data (read from memory), result to memory; one vector op per element;
    * ``place``: move a received message from the buffer to memory (free when
      the buffer is the memory);
    * ``copy``: memory to memory.

    ``local`` (the data a reduction combines with, or a copy's source) and
    ``into`` (where the result goes) say which memory those regions sit in: a
    program may keep them in its buffer memory instead (a place into the buffer
    is then free).
    """

    rank: int
    kind: WorkKind
    nbytes: float
    lane: Hashable = 0
    local: Where = "memory"
    into: Where = "memory"


@dataclass(frozen=True, slots=True)
class Step:
    """Messages in flight together, work alongside them, work after them; ``repeat`` times.

    ``drain``: a rank's work after the messages also waits until the messages it
    sent in the step have arrived (a program that drains its sends before it
    overwrites what they read).
    """

    messages: tuple[Message, ...] = ()
    work: tuple[Work, ...] = ()
    alongside: tuple[Work, ...] = ()
    repeat: int = 1
    drain: bool = False


@dataclass(frozen=True, slots=True)
class Phase:
    """Steps through which ``pieces`` pieces flow one behind another."""

    steps: tuple[Step, ...]
    pieces: int = 1


Schedule = tuple[Phase, ...]


def ring_step(
    size: int,
    nbytes: float,
    work: WorkKind | None,
    *,
    shift: int = 1,
    channel: Hashable = 0,
    signal: bool = False,
) -> Step:
    """Every rank r sends ``nbytes`` to r + ``shift`` (mod size) and then does ``work`` on it."""
    messages = tuple(
        Message(r, (r + shift) % size, nbytes, channel, signal=signal) for r in range(size)
    )
    done = tuple(Work(r, work, nbytes) for r in range(size)) if work else ()
    return Step(messages, done)


def relabel(schedule: Schedule, ranks: Sequence[int], tag: Hashable) -> Schedule:
    """``schedule`` of a sub-group run by ``ranks`` (sub-rank i is ``ranks[i]``).

    Channels are tagged with ``tag``: a sub-communicator's messages have
    channels of their own.
    """

    def step(s: Step) -> Step:
        return Step(
            tuple(
                replace(m, src=ranks[m.src], dst=ranks[m.dst], channel=(tag, m.channel))
                for m in s.messages
            ),
            tuple(replace(w, rank=ranks[w.rank]) for w in s.work),
            tuple(replace(w, rank=ranks[w.rank]) for w in s.alongside),
            s.repeat,
            s.drain,
        )

    return tuple(Phase(tuple(step(s) for s in phase.steps), phase.pieces) for phase in schedule)


def in_lane(schedule: Schedule, lane: Hashable) -> Schedule:
    """``schedule`` run as a program of its own beside others on the same ranks."""

    def step(s: Step) -> Step:
        return Step(
            tuple(replace(m, lane=(lane, m.lane)) for m in s.messages),
            tuple(replace(w, lane=(lane, w.lane)) for w in s.work),
            tuple(replace(w, lane=(lane, w.lane)) for w in s.alongside),
            s.repeat,
            s.drain,
        )

    return tuple(Phase(tuple(step(s) for s in phase.steps), phase.pieces) for phase in schedule)


def _expanded(steps: Iterable[Step]) -> list[Step]:
    return [replace(s, repeat=1) for s in steps for _ in range(s.repeat)]


def _merge(steps: Sequence[Step], repeat: int) -> Step:
    return Step(
        tuple(m for s in steps for m in s.messages),
        tuple(w for s in steps for w in s.work),
        tuple(w for s in steps for w in s.alongside),
        repeat,
        any(s.drain for s in steps),
    )


def together(schedules: Sequence[Schedule]) -> Schedule:
    """Schedules that run at the same time (on different ranks or channels), step by step.

    Phase i of the result runs phase i of each; a schedule with fewer phases
    or steps simply has nothing to do in the others.
    """
    schedules = [s for s in schedules if s]
    if len(schedules) <= 1:
        return schedules[0] if schedules else ()
    phases = []
    for i in range(max(len(s) for s in schedules)):
        parts = [s[i] for s in schedules if i < len(s)]
        pieces = max(p.pieces for p in parts)
        shapes = {tuple(step.repeat for step in p.steps) for p in parts}
        if len(shapes) == 1:  # the same shape (the usual case): merge step by step
            merged = tuple(
                _merge([p.steps[j] for p in parts], parts[0].steps[j].repeat)
                for j in range(len(parts[0].steps))
            )
        else:
            flat = [_expanded(p.steps) for p in parts]
            merged = tuple(
                _merge([f[j] for f in flat if j < len(f)], 1)
                for j in range(max(len(f) for f in flat))
            )
        phases.append(Phase(merged, pieces))
    return tuple(phases)


def then(*schedules: Schedule) -> Schedule:
    """Schedules run one after another."""
    return tuple(phase for schedule in schedules for phase in schedule)


def in_buffer(schedule: Schedule) -> Schedule:
    """``schedule`` run on regions in the ranks' buffer memory: every message leaves
    from there and every work item reads and writes there."""

    def step(s: Step) -> Step:
        return Step(
            tuple(m if m.signal else replace(m, source="buffer") for m in s.messages),
            tuple(replace(w, local="buffer", into="buffer") for w in s.work),
            tuple(replace(w, local="buffer", into="buffer") for w in s.alongside),
            s.repeat,
            s.drain,
        )

    return tuple(Phase(tuple(step(s) for s in phase.steps), phase.pieces) for phase in schedule)
