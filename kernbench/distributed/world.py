"""The distributed runtime of one run: ranks, process groups, rendezvous, p2p.

Every collective call is a rendezvous keyed by (group, sequence number on that
group): the call is recorded, and when the last member arrives the collective
is checked (same op, shapes, dtypes, roots on every rank) and launched on the
PEs.  A rank that returns or calls something else leaves the others waiting;
the scheduler then reports every blocked rank and what it waits for.

Point-to-point send/recv runs as a program on the PEs too, which the
collective layer builds.  That layer sits above this one, so a world is handed
the function that launches a matched send/recv (a :data:`P2PLaunch`, as
``collective`` is handed its ``launch``): passed to :class:`World`, or
registered with :func:`set_p2p_launch` (``kernbench.ccl.launch`` registers its
own when it is imported).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernbench.distributed.environment import torchrun_environment
from kernbench.distributed.scheduler import Scheduler, current_rank
from kernbench.distributed.watchdog import WallClock
from kernbench.errors import (
    CollectiveMismatchError,
    DeadlockError,
    DistributedError,
    KernBenchError,
)
from kernbench.machine.api import Event

__all__ = [
    "P2PLaunch",
    "ProcessGroup",
    "RunSettings",
    "Work",
    "World",
    "active_world",
    "check_world_size",
    "describe_call",
    "p2p_launch",
    "run_settings",
    "set_p2p_launch",
]

_ACTIVE: list[World] = []

#: Launches a matched send/recv: ``(ctx, src_tensor, dst_tensor) -> launcher``, whose
#: ``finish()`` is an event that fires when the transfer is done.
P2PLaunch = Callable[[Any, Any, Any], Any]

_P2P_LAUNCH: P2PLaunch | None = None


def set_p2p_launch(launch: P2PLaunch | None) -> P2PLaunch | None:
    """Make ``launch`` the point-to-point launch of worlds built without one.

    ``None`` removes it.  Returns the one it replaces; handing that back restores it.
    """
    global _P2P_LAUNCH
    _check_p2p_launch(launch)
    previous, _P2P_LAUNCH = _P2P_LAUNCH, launch
    return previous


def p2p_launch() -> P2PLaunch | None:
    """The registered point-to-point launch, if any."""
    return _P2P_LAUNCH


def _check_p2p_launch(launch: Any) -> None:
    if launch is not None and not callable(launch):
        raise DistributedError(
            f"a point-to-point launch must be callable with (ctx, src, dst), got {launch!r}"
        )


# The key of a run's settings among its runtime context's extensions.
RUN_EXTENSION = "distributed"


@dataclass(eq=False)
class RunSettings:
    """What a runner asks of every world started on its machine, and the worlds it got.

    A script run by its ``__main__`` block starts its own worlds
    (``torch.multiprocessing``), so the runner's limits and requested world
    size reach them through the context rather than as arguments.
    """

    max_sim_ps: int | None = None
    max_wall_s: float | None = None
    # The run's own clock for max_wall_s, started by a runner before the script
    # (its module level counts too): worlds share it rather than start their own.
    wall_clock: WallClock | None = None
    world_size: int | None = None  # --world-size: a world of another size is an error
    worlds: list[World] = field(default_factory=list)  # every world run, in order


def run_settings(ctx: Any) -> RunSettings:
    """The run settings of ``ctx`` (defaults: no limits, any world size)."""
    settings = ctx.extensions.get(RUN_EXTENSION)
    if settings is None:
        settings = ctx.extensions[RUN_EXTENSION] = RunSettings()
    return settings


def current_world() -> World | None:
    """The world of the running ranks, or None outside a distributed run."""
    return _ACTIVE[-1] if _ACTIVE else None


def active_world() -> World:
    if not _ACTIVE:
        raise DistributedError(
            "no distributed run is active: run the script with `kernbench run` or "
            "kernbench.simulate(), or start ranks with kernbench.torch.multiprocessing; a "
            "script written for torchrun (its __main__ block calls init_process_group) runs "
            "once per rank with `kernbench run --nproc-per-node N SCRIPT`"
        )
    return _ACTIVE[-1]


def synchronize_rank() -> None:
    """Wait for the calling rank's async collectives (nothing outside a distributed run)."""
    if _ACTIVE and current_rank() is not None:
        _ACTIVE[-1].synchronize()


def describe_call(what: str, signature: Any) -> str:
    """``all_reduce(dtype='float32', shape=(8,), ...)`` for a signature of named arguments."""
    if isinstance(signature, Mapping):
        return f"{what}(" + ", ".join(f"{k}={v!r}" for k, v in signature.items()) + ")"
    return f"{what} {signature}"


def _by_value(values: dict[int, Any]) -> str:
    """``'ring' on ranks [0, 2], 'tree' on ranks [1, 3]`` (groups in order of their first rank)."""
    groups: dict[str, list[int]] = {}
    for rank in sorted(values):
        groups.setdefault(repr(values[rank]), []).append(rank)
    return ", ".join(f"{value} on ranks {ranks}" for value, ranks in groups.items())


class _NotPassed:
    def __repr__(self) -> str:
        return "(not passed)"


_NOT_PASSED = _NotPassed()


def _differences(calls: dict[int, tuple[str, Any]]) -> list[str]:
    """What differs between the ranks' calls of one collective, argument by argument."""
    whats = {rank: what for rank, (what, _) in calls.items()}
    if len(set(whats.values())) > 1:
        return [f"the collective differs: {_by_value(whats)}"]
    signatures = {rank: sig for rank, (_, sig) in calls.items()}
    if not all(isinstance(sig, Mapping) for sig in signatures.values()):
        return [] if len({repr(s) for s in signatures.values()}) == 1 else ["arguments differ"]
    keys = list(dict.fromkeys(key for sig in signatures.values() for key in sig))
    lines = []
    for key in keys:
        values = {rank: sig.get(key, _NOT_PASSED) for rank, sig in signatures.items()}
        if len({repr(v) for v in values.values()}) > 1:
            # A value may say what agreeing on it means (its ``agreement``).
            hints = {getattr(v, "agreement", "") for v in values.values()} - {""}
            hint = f"; {min(hints)}" if hints else ""
            lines.append(f"{key} differs: {_by_value(values)}{hint}")
    return lines


@dataclass(eq=False)
class ProcessGroup:
    """A set of global ranks; group rank i is ``ranks[i]``."""

    gid: int
    ranks: tuple[int, ...]
    name: str = ""
    # global rank -> group rank: every rank of a 16,384-rank group asks once per call
    _index: dict[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index = {}
        for i, rank in enumerate(self.ranks):
            self._index.setdefault(rank, i)

    def group_rank(self, rank: int) -> int:
        return self._index.get(rank, -1)

    def size(self) -> int:
        return len(self.ranks)

    def rank(self) -> int:
        state = current_rank()
        return self.group_rank(state.rank) if state else -1

    def __repr__(self) -> str:
        return f"ProcessGroup({self.name or self.gid}, ranks={list(self.ranks)})"


@dataclass(eq=False)
class _Rendezvous:
    group: ProcessGroup
    seq: int
    arrived: dict[int, tuple[str, Any, Any]] = field(default_factory=dict)
    devices: dict[int, int | None] = field(default_factory=dict)  # each rank's current device
    launched: Event | None = None
    done: Event | None = None
    error: BaseException | None = None
    what: str = ""  # point to point: what the waiting rank is doing
    source: int | None = None  # point to point: the sender, once matched

    def drop_payloads(self) -> None:
        """Forget the ranks' tensors once the operation is over (a Work may live on)."""
        self.arrived = {r: (what, sig, None) for r, (what, sig, _) in self.arrived.items()}

    def finished(self) -> None:
        self.drop_payloads()
        self.done.succeed()

    def describe(self) -> str:
        missing = [r for r in self.group.ranks if r not in self.arrived]
        if not missing:
            return "every rank called it, but the calls do not match"
        return f"ranks {missing} have not called it"


def _rank_list(ranks: Any, most: int) -> tuple[int, ...]:
    """At most ``most`` ranks of ``new_group(ranks)``: an iterable of ints."""
    wrong = isinstance(ranks, str | bytes) or not hasattr(ranks, "__iter__")
    chosen: list[int] = []
    if not wrong:
        for r in itertools.islice(ranks, most):
            if isinstance(r, bool) or not hasattr(r, "__index__"):
                wrong = True
                break
            chosen.append(r.__index__())
    if wrong:
        raise DistributedError(
            f"new_group: ranks must be a list of ints (global ranks), got {ranks!r}"
        )
    return tuple(chosen)


#: Polls of one unfinished Work by a rank that has not waited since the first of them.
#: Ranks take turns only when one waits, so a rank spinning on ``is_completed()`` would
#: hold back the clock and every other rank forever; past this many polls it waits for
#: the work instead, which is when such a loop would end (a few checks are not a spin).
SPIN_POLLS = 1000


class Work:
    """The handle of an async operation (``async_op=True``), as in torch.distributed."""

    def __init__(
        self,
        world: World,
        rendezvous: _Rendezvous,
        what: str,
        result: Any = None,
        *,
        receive: bool = False,
    ) -> None:
        self._world = world
        self._rv = rendezvous
        self._what = what
        # Weakly: a Work kept by the script must not keep its tensors' memory allocated
        # (that would move later allocations, and with them simulated times).
        self._result = [weakref.ref(t) for t in (result or ())]
        self._receive = receive
        self._polls = 0  # unanswered is_completed() calls since the rank last waited
        self._polled_at = -1  # the rank's count of waits at the last of them

    def wait(self, timeout: Any = None) -> bool:
        world, rv = self._world, self._rv
        if rv.seq < 0:
            world.scheduler.wait_until(rv.launched, self._what)
        else:
            world.scheduler.wait_until(rv.launched, lambda: f"{self._what} ({rv.describe()})")
        if rv.error is not None:
            raise rv.error
        world.scheduler.wait_until(rv.done, f"{self._what} to finish")
        return True

    def synchronize(self) -> None:
        """As torch's: the work done before what follows (here that is :meth:`wait`)."""
        self.wait()

    def is_completed(self) -> bool:
        """Whether the operation has finished; polled :data:`SPIN_POLLS` times with no
        wait in between, it waits for it (the loop could not end otherwise)."""
        if self._finished():
            return True
        state = current_rank()
        if state is None:
            return False
        self._polls = self._polls + 1 if state.waits == self._polled_at else 1
        self._polled_at = state.waits
        if self._polls < SPIN_POLLS:
            return False
        self.wait()
        return True

    def _finished(self) -> bool:
        return self._rv.done is not None and self._rv.done.processed

    def is_success(self) -> bool:
        return self.is_completed() and self._rv.error is None

    def exception(self) -> BaseException | None:
        return self._rv.error

    def result(self) -> list[Any]:
        """The operation's output tensors, as torch's Work.result() (``[]`` for a barrier);
        those the script no longer holds are gone."""
        return [t for t in (ref() for ref in self._result) if t is not None]

    def source_rank(self) -> int:
        """The rank a receive took its message from (once it has), as torch's."""
        if not self._receive:
            raise DistributedError(
                f"Work.source_rank ({self._what}): only a receive (irecv) has a source rank"
            )
        self.wait()
        return self._rv.source

    def get_future(self) -> Any:
        raise DistributedError(
            f"Work.get_future ({self._what}): futures are not modelled; call wait() (or "
            "torch.cuda.synchronize()) and read the tensors"
        )

    def __repr__(self) -> str:
        state = "completed" if self._finished() else "pending"
        return f"<Work {self._what} {state}>"


def check_world_size(world_size: Any, ctx: Any, what: str = "world size") -> int:
    """``world_size`` as an int, if it is a whole number of ranks that fits the machine."""
    if isinstance(world_size, bool) or not isinstance(world_size, int | np.integer):
        raise DistributedError(f"{what} must be a whole number of ranks, got {world_size!r}")
    world_size = int(world_size)
    if world_size < 1:
        raise DistributedError(f"{what} must be at least 1 (got {world_size})")
    if world_size > ctx.num_devices:
        level = ctx.topology.system.device_level
        raise DistributedError(
            f"{what} {world_size} does not fit: the topology has {ctx.num_devices} "
            f"devices at level {level!r} (set system.device_level to 'cube' or 'pe' for "
            f"more devices, or use at most {ctx.num_devices} ranks)"
        )
    return world_size


class World:
    """Ranks, groups and pending collectives of one run.

    ``p2p_launch`` launches matched sends and receives; without it, the one
    registered with :func:`set_p2p_launch` (when the transfer is matched) does.
    """

    def __init__(
        self,
        ctx: Any,
        world_size: int,
        *,
        p2p_launch: P2PLaunch | None = None,
        what: str = "world size",
    ) -> None:
        """``what`` names ``world_size`` in errors (``nprocs``, ...)."""
        world_size = check_world_size(world_size, ctx, what)
        settings = run_settings(ctx)
        if any(world.failed for world in settings.worlds):
            raise DistributedError(
                "an earlier run of ranks on this machine stopped with an error and left its "
                "messages and cleanup in flight; run these ranks on a new machine "
                "(kernbench.simulate, or a new RuntimeContext, makes one)"
            )
        if settings.world_size is not None and world_size != settings.world_size:
            raise DistributedError(
                f"{what} {world_size} differs from the run's --world-size "
                f"{settings.world_size}; start {settings.world_size} ranks (kernbench run sets "
                "$WORLD_SIZE for the script to read) or drop --world-size"
            )
        _check_p2p_launch(p2p_launch)
        self._p2p_launch = p2p_launch
        self.ctx = ctx
        self.world_size = world_size
        self.scheduler = Scheduler(ctx.machine.clock, world_size)
        self.scheduler.max_sim_ps = settings.max_sim_ps
        self.scheduler.max_wall_s = settings.max_wall_s
        self.scheduler.wall_clock = settings.wall_clock
        # The simulated time each rank's function returned at, and what it returned.
        self.finished_ps = [0] * world_size
        self.returns: list[Any] = []
        self.world_group = ProcessGroup(0, tuple(range(world_size)), "WORLD")
        self.groups: list[ProcessGroup] = [self.world_group]
        self._group_calls: dict[int, int] = {}
        self._seq: dict[tuple[int, int], int] = {}
        self._rendezvous: dict[tuple[int, int], _Rendezvous] = {}
        # Pending sends by (group id, src, dst, tag) and receives by (group id, dst, tag):
        # a message matches only on the group it was posted on.
        self._p2p_sends: dict[tuple[int, int, int, int], list[tuple[Any, _Rendezvous]]] = {}
        self._p2p_recvs: dict[tuple[int, int, int], list[tuple[Any, int | None, _Rendezvous]]] = {}
        self.initialised: set[int] = set()
        self.collectives: list[Any] = []
        self._mismatched: list[_Rendezvous] = []
        # Per group: when its last launched collective finishes.  A group's
        # collectives run in the order they were called, one after another, as on
        # a communicator's stream; a later one launches when the one before ends.
        self._group_tail: dict[int, Event] = {}
        # Per rank: its async collectives not yet waited for (synchronize waits for them).
        self._pending: dict[int, list[Work]] = {}
        self._prune_at: dict[int, int] = {}
        # The run stopped with an error: its machine is left mid-flight (see __init__).
        self.failed = False

    # -- running ranks ---------------------------------------------------------------
    def run(self, fn: Callable[[int], Any]) -> list[Any]:
        machine = self.ctx.machine
        previous = machine.set_waiter(
            lambda h: self.scheduler.wait_until(
                h.event, f"request {h.request_id} ({h.msg.kind} {h.msg.src} -> {h.msg.dst})"
            )
        )
        _ACTIVE.append(self)
        run_settings(self.ctx).worlds.append(self)

        def body(rank: int) -> Any:
            self.ctx.set_device(rank)
            value = fn(rank)
            self.finished_ps[rank] = self.ctx.now
            return value

        self.failed = True  # until the ranks and what they queued have finished
        try:
            with torchrun_environment(self.world_size):
                self.returns = self.scheduler.run(body)
            self._check_unmatched()
            self._finish_pending()
            self.failed = False
            return self.returns
        except DeadlockError as exc:
            if not self._mismatched or isinstance(exc, CollectiveMismatchError):
                raise
            lines = []
            for rv in self._mismatched:
                lines.append(f"collective #{rv.seq} on {rv.group!r} does not match across ranks:")
                calls = {r: (w, sig) for r, (w, sig, _) in sorted(rv.arrived.items())}
                lines += [f"  {line}" for line in _differences(calls)]
                lines += [f"  rank {r} called {describe_call(*call)}" for r, call in calls.items()]
                missing = [r for r in rv.group.ranks if r not in rv.arrived]
                if missing:
                    lines.append(f"  ranks {missing} have not called it")
            lines.append("blocked ranks:")
            lines += [f"  rank {r}: {what}" for r, what in exc.blocked.items()]
            raise CollectiveMismatchError("\n  ".join(lines), exc.blocked) from None
        finally:
            _ACTIVE.remove(self)
            machine.set_waiter(previous)

    def _finish_pending(self) -> None:
        """Every rank returned with async operations it never waited for: the machine still
        carries them out (a GPU runs what was queued), so the run ends when they do."""
        for works in self._pending.values():
            for work in works:
                work.wait()  # at once when it has finished
        self._pending.clear()

    def _check_unmatched(self) -> None:
        """Every rank returned: an async collective or p2p call no other rank matched
        would have waited forever on a GPU, so it is an error, not a silent drop."""
        lines, blocked = [], {}
        for rv in self._rendezvous.values():
            callers = sorted(rv.arrived)
            missing = [r for r in rv.group.ranks if r not in rv.arrived]
            what = describe_call(*rv.arrived[callers[0]][:2])
            lines.append(
                f"{what} #{rv.seq} on {rv.group.name} was called by ranks {callers} only; "
                f"ranks {missing} returned without calling it"
            )
            blocked.update(dict.fromkeys(callers, what))
        for (_gid, src, dst, _tag), pending in self._p2p_sends.items():
            for _, rv in pending:
                lines.append(f"rank {src}'s {rv.what} was never received by rank {dst}")
                blocked[src] = rv.what
        for (_gid, dst, _tag), pending in self._p2p_recvs.items():
            for _, _, rv in pending:
                lines.append(f"rank {dst}'s {rv.what} was never matched by a send")
                blocked[dst] = rv.what
        if lines:
            raise CollectiveMismatchError(
                "the run ended with operations no other rank matched (async_op=True, isend "
                "and irecv still need their peers):\n  " + "\n  ".join(lines),
                blocked,
            )

    @property
    def rank(self) -> int:
        state = current_rank()
        if state is None:
            raise DistributedError("this call must be made from a rank")
        return state.rank

    # -- groups ----------------------------------------------------------------------
    def new_group(self, ranks: Any) -> ProcessGroup:
        """The caller's next ``new_group`` call; every rank gets the same group object."""
        me = self.rank
        if ranks is None:
            chosen = tuple(range(self.world_size))
        else:
            # Read no more than one rank past the world's size: a longer list is wrong anyway.
            chosen = _rank_list(ranks, self.world_size + 1)
            if len(chosen) > self.world_size:
                raise DistributedError(
                    f"new_group: ranks must be distinct and in 0..{self.world_size - 1}, so at "
                    f"most {self.world_size} of them; got more (starting {list(chosen)})"
                )
        if len(set(chosen)) != len(chosen) or any(not 0 <= r < self.world_size for r in chosen):
            raise DistributedError(
                f"new_group(ranks={list(chosen)}): ranks must be distinct and in "
                f"0..{self.world_size - 1}"
            )
        index = self._group_calls.get(me, 0)
        self._group_calls[me] = index + 1
        if index + 1 < len(self.groups):
            group = self.groups[index + 1]
            if group.ranks != tuple(sorted(chosen)):
                raise DistributedError(
                    f"rank {me}: new_group call #{index} asks for ranks {sorted(chosen)} but "
                    f"another rank's call #{index} made {list(group.ranks)}; every rank must "
                    "create the same groups in the same order"
                )
            return group
        group = ProcessGroup(len(self.groups), tuple(sorted(chosen)), f"group{len(self.groups)}")
        self.groups.append(group)
        return group

    # -- collectives -------------------------------------------------------------------
    def collective(
        self,
        group: ProcessGroup,
        what: str,
        signature: Any,
        payload: Any,
        launch: Callable[[list[Any]], Any],
        async_op: bool,
        result: Any = None,
    ) -> Work | None:
        """Record this rank's call; the last member to arrive launches ``launch``.

        ``signature`` must be equal on every rank: the arguments that must agree
        across ranks (op, shapes, dtypes, root, algorithm), best as a mapping of
        argument name to value, so that a mismatch names the argument that
        differs (and, when a value has an ``agreement`` attribute, what agreeing on
        it means).  ``launch`` gets the payloads in group-rank order and returns a
        :class:`~kernbench.ccl.launch.CollectiveLauncher`.
        """
        me = self.rank
        grank = group.group_rank(me)
        if grank < 0:
            raise DistributedError(f"rank {me} is not a member of {group!r}; it cannot call {what}")
        seq = self._seq.get((group.gid, me), 0)
        self._seq[(group.gid, me)] = seq + 1
        rv = self._rendezvous.get((group.gid, seq))
        env = self.ctx.machine.clock
        if rv is None:
            rv = _Rendezvous(group, seq, launched=env.event(), done=env.event())
            self._rendezvous[(group.gid, seq)] = rv
        rv.arrived[me] = (what, signature, payload)
        rv.devices[me] = self.ctx.current_device()
        first_what, first_sig = next(iter(rv.arrived.values()))[:2]
        if (what, signature) != (first_what, first_sig):
            # Let every other rank run on until it blocks too, so that the error can
            # name every rank involved; this one waits for a launch that never comes.
            if rv not in self._mismatched:
                self._mismatched.append(rv)
            self.scheduler.wait_until(
                env.event(),
                f"{describe_call(what, signature)} #{seq} on {group.name}, which does not match "
                "the others' call",
            )
        if len(rv.arrived) == group.size() and rv not in self._mismatched:
            del self._rendezvous[(group.gid, seq)]
            self._launch(rv, launch, [rv.arrived[r][2] for r in group.ranks])
        work = Work(self, rv, f"{describe_call(what, signature)} #{seq} on {group.name}", result)
        if _async_flag(async_op, what):
            return self.track(work)
        work.wait()
        return None

    def track(self, work: Work) -> Work:
        """Remember an async operation of the calling rank until synchronize() waits for
        it (finished ones are dropped whenever the list has doubled: linear in all)."""
        me = self.rank
        pending = self._pending.setdefault(me, [])
        pending.append(work)
        if len(pending) >= self._prune_at.get(me, 64):
            pending[:] = [w for w in pending if not w._finished()]  # noqa: SLF001
            self._prune_at[me] = max(64, 2 * len(pending))
        return work

    def synchronize(self) -> None:
        """Wait until every async collective and point-to-point operation the calling
        rank started has finished (``torch.cuda.synchronize``: every stream of the
        device, NCCL's included)."""
        pending = self._pending.pop(self.rank, [])
        for work in pending:
            work.wait()

    def _launch(
        self, rv: _Rendezvous, launch: Callable[[list[Any]], Any], payloads: list[Any]
    ) -> None:
        try:
            _check_devices(rv)
            launcher = launch(payloads)
        except KernBenchError as exc:
            rv.error = exc
            rv.drop_payloads()
            rv.launched.succeed()
            raise
        self.collectives.append(launcher)
        gid = rv.group.gid
        before = self._group_tail.get(gid)
        self._group_tail[gid] = rv.done

        def start(_event: Any = None) -> None:
            finished = launcher.finish()
            finished.callbacks.append(lambda _ev: rv.finished())

        if before is None or before.processed:
            start()
        else:  # the group's previous collective is still running
            before.callbacks.append(start)
        rv.launched.succeed()

    # -- point to point ----------------------------------------------------------------
    def _p2p(self, what: str) -> P2PLaunch:
        launch = self._p2p_launch or _P2P_LAUNCH
        if launch is None:
            raise DistributedError(
                f"{what}: nothing launches point-to-point transfers: import kernbench.ccl.launch "
                "(kernbench.torch.distributed does) or build the World with p2p_launch="
            )
        return launch

    def post_send(
        self,
        tensor: Any,
        dst: int,
        tag: int,
        what: str = "send",
        group: ProcessGroup | None = None,
    ) -> _Rendezvous:
        """Post a send of ``tensor`` to global rank ``dst`` on ``group`` (the world's by
        default); ``what`` is the user's call, for errors.  Only a receive posted on the
        same group with the same tag matches it, as on torch's per-group communicators."""
        me = self.rank
        group = group or self.world_group
        self._p2p(what)
        self._check_peer(dst, what, "send to", group)
        rv = self._p2p_rendezvous(f"{what} to rank {dst} (tag {tag}) on {group.name}", group)
        waiting = self._p2p_recvs.get((group.gid, dst, tag), [])
        for i, (recv_tensor, src, recv_rv) in enumerate(waiting):
            if src is None or src == me:
                del waiting[i]
                self._match(tensor, me, recv_tensor, dst, rv, recv_rv)
                return rv
        self._p2p_sends.setdefault((group.gid, me, dst, tag), []).append((tensor, rv))
        return rv

    def post_recv(
        self,
        tensor: Any,
        src: int | None,
        tag: int,
        what: str = "recv",
        group: ProcessGroup | None = None,
    ) -> _Rendezvous:
        """Post a receive into ``tensor`` from global rank ``src`` (any member of ``group``
        if None) on ``group`` (the world's by default)."""
        me = self.rank
        group = group or self.world_group
        self._p2p(what)
        if src is not None:
            self._check_peer(src, what, "receive from", group)
        where = "any rank" if src is None else f"rank {src}"
        rv = self._p2p_rendezvous(f"{what} from {where} (tag {tag}) on {group.name}", group)
        sources = group.ranks if src is None else (src,)
        for s in sources:
            pending = self._p2p_sends.get((group.gid, s, me, tag))
            if pending:
                send_tensor, send_rv = pending.pop(0)
                self._match(send_tensor, s, tensor, me, send_rv, rv)
                return rv
        self._p2p_recvs.setdefault((group.gid, me, tag), []).append((tensor, src, rv))
        return rv

    def _p2p_rendezvous(self, what: str, group: ProcessGroup) -> _Rendezvous:
        env = self.ctx.machine.clock
        rv = _Rendezvous(group, -1, launched=env.event(), done=env.event())
        rv.what = what
        return rv

    def _check_peer(self, peer: int, what: str, verb: str, group: ProcessGroup) -> None:
        if not isinstance(peer, int) or not 0 <= peer < self.world_size:
            raise DistributedError(f"{what}: peer rank {peer!r} is not in 0..{self.world_size - 1}")
        if peer == self.rank:
            raise DistributedError(f"{what}: rank {peer} cannot {verb} itself")
        if group.group_rank(peer) < 0:  # torch: "Global rank N is not part of group G"
            raise DistributedError(
                f"{what}: global rank {peer} is not part of {group!r}; a peer must be a member "
                "of the group the call is made on"
            )
        if group.group_rank(self.rank) < 0:
            raise DistributedError(
                f"{what}: rank {self.rank} is not a member of {group!r}; it cannot {verb} "
                "a rank on it"
            )

    def _match(
        self,
        src_tensor: Any,
        src: int,
        dst_tensor: Any,
        dst: int,
        send_rv: _Rendezvous,
        recv_rv: _Rendezvous,
    ) -> None:
        if (src_tensor.shape, src_tensor.dtype) != (dst_tensor.shape, dst_tensor.dtype):
            error = CollectiveMismatchError(
                f"send from rank {src} ({src_tensor.dtype.name}{list(src_tensor.shape)}) does "
                f"not match recv on rank {dst} ({dst_tensor.dtype.name}{list(dst_tensor.shape)})",
                {src: "send", dst: "recv"},
            )
            for rv in (send_rv, recv_rv):
                rv.error = error
                rv.launched.succeed()
            return
        launcher = self._p2p("send/recv")(self.ctx, src_tensor, dst_tensor)
        self.collectives.append(launcher)
        finished = launcher.finish()
        for rv in (send_rv, recv_rv):
            rv.source = src
            finished.callbacks.append(lambda _ev, rv=rv: rv.done.succeed())
            rv.launched.succeed()


def _check_devices(rv: _Rendezvous) -> None:
    """Every rank of a collective on a device of its own (NCCL refuses a duplicate GPU)."""
    devices = [d for d in rv.devices.values() if d is not None]
    if len(set(devices)) < len(devices):
        device = next(d for d in devices if devices.count(d) > 1)
        ranks = sorted(r for r, d in rv.devices.items() if d == device)
        what = rv.arrived[ranks[0]][0]
        raise DistributedError(
            f"{what}: ranks {ranks} all have device {device} current (torch.cuda.set_device); "
            "each rank of a collective needs a device of its own, as NCCL does: call "
            "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) or set_device(rank), or "
            "leave the device as the run sets it (device = rank)"
        )


def p2p_work(
    world: World,
    rv: _Rendezvous,
    *,
    async_op: bool = False,
    tensor: Any = None,
    receive: bool = False,
) -> Work:
    """The Work of a posted send or receive; synchronize() waits for an async one."""
    work = Work(world, rv, rv.what, None if tensor is None else [tensor], receive=receive)
    return world.track(work) if _async_flag(async_op, rv.what) else work


def _async_flag(async_op: Any, what: str) -> bool:
    """``async_op=``: True or False (an int will do, as for torch's Python functions)."""
    if not isinstance(async_op, bool | int | np.bool_):
        raise DistributedError(f"{what}: async_op must be True or False, got {async_op!r}")
    return bool(async_op)
