"""The phases of a mixed op and how many pieces the fused form pipelines them in.

An op is one or two *phases*, each a collective over the TP or the DP groups
(:data:`PHASES`).  The fused form cuts the data into k pieces and runs them
as a two-stage software pipeline: stage s runs phase 1 of piece s beside
phase 2 of piece s-1.  With pieces of m = n/k bytes it is priced as

    launch + T1(m) + T2(m) + (k - 1) * S(m),   S(m) = T1(m) + T2(m) - H(m)

where Ti is phase i's time after the launch overhead (the slowest of its
groups) and H, what running the phases side by side hides, is the link time
the two would spend apart on links the other leaves free: the busiest link's
time for each phase alone, added, less the busiest link's time for both
together (all groups' bytes), and never more than the shorter phase.  Phases
whose busiest links are shared hide nothing; phases on disjoint links hide
the shorter one's link time.  One piece (k = 1) is the two-step schedule.

:func:`plan_pieces` prices every candidate k with the collective cost model
(:func:`kernbench.ccl.tuner.predict_detail`: each phase's configuration on
each group's PEs, its time and the bytes it puts on every link) and keeps
the fastest; it pipelines only when that is predicted at least
:data:`MIN_GAIN` faster than one piece, so a layout whose phases share their
links, or whose shorter phase is too short to pay for the extra per-piece
latency, runs the two-step schedule.

Memory ports are left out of H: the cost model finds each phase bound by
its HBM port where the fabric does not (it predicted 680 us for a multi_sip
two-step the fabric ran in 897 us, and the fabric overlapped the phases), so
counting them would forbid every overlap.  The model's absolute times are
off by up to ~1.5x on these machines; only its ranking of k is used, and the
margin keeps a wrong ranking from making the fused form slower than two-step.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernbench.ccl.launch import choose
from kernbench.ccl.tuner import predict_detail
from kernbench.topology import names
from kernbench.torch.distributed.mixed.layout import MixedLayout
from kernbench.units import PS_PER_S

__all__ = ["MIN_GAIN", "PHASES", "Phase", "PiecePlan", "phase_nbytes", "plan_pieces"]

# Pipelining must be predicted this much faster than one piece (the two-step
# schedule) to be used: below it the prediction's error could make it slower.
MIN_GAIN = 0.05
# The piece counts weighed (capped by the elements there are to cut).
CANDIDATES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


@dataclass(frozen=True)
class Phase:
    """One collective of a mixed op: ``op`` over the ``group`` ("tp" or "dp") groups."""

    op: str
    group: str


PHASES: dict[str, tuple[Phase, ...]] = {
    "all_reduce": (Phase("all_reduce", "tp"),),
    "all_gather": (Phase("all_gather", "tp"),),
    "reduce_scatter": (Phase("reduce_scatter", "tp"),),
    "all_reduce_all_gather": (Phase("all_reduce", "tp"), Phase("all_gather", "dp")),
    "reduce_scatter_all_reduce": (Phase("reduce_scatter", "dp"), Phase("all_reduce", "tp")),
}


def phase_nbytes(op: str, index: int, layout: MixedLayout, x_nbytes: int) -> int:
    """The size a phase's collective is chosen and priced by, as ``torch.distributed``
    gives it for the same call in the two-step mode (a gather's or scatter's full size)."""
    phase = PHASES[op][index]
    group_size = layout.tp_size if phase.group == "tp" else layout.dp_size
    if op == "reduce_scatter_all_reduce" and index == 1:
        return x_nbytes // layout.dp_size  # the all-reduce of one reduce-scattered block
    if phase.op == "all_gather":
        return x_nbytes * group_size
    return x_nbytes


def groups_of(layout: MixedLayout, group: str) -> list[tuple[int, ...]]:
    return layout.tp_groups() if group == "tp" else layout.dp_groups()


@dataclass(frozen=True)
class PiecePlan:
    """How many pieces a fused op runs in, and the predicted times (ps) it was chosen by."""

    pieces: int
    predicted_ps: dict[int, float]  # pieces -> predicted time of the fused op
    two_step_ps: float  # predicted time of one piece (0 when one piece was not weighed)


# Plans per run context: the same op on the same ranks and size plans the same.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def plan_pieces(
    ctx: Any,
    op: str,
    layout: MixedLayout,
    pes: Sequence[str],
    x_nbytes: int,
    itemsize: int,
    max_pieces: int,
    min_pieces: int = 1,
) -> PiecePlan:
    """The piece count of a fused ``op`` on ``x_nbytes`` per rank (``pes[w]``: world rank w's).

    Candidates lie in ``[min_pieces, max_pieces]``; one piece is always weighed
    unless ``min_pieces`` forbids it.  A single-phase op has nothing to overlap:
    one piece (or ``min_pieces``).
    """
    max_pieces = max(1, max_pieces)
    min_pieces = max(1, min(min_pieces, max_pieces))
    phases = PHASES[op]
    if len(phases) == 1:
        return PiecePlan(min_pieces, {}, 0.0)
    key = (op, layout, tuple(pes), x_nbytes, itemsize, max_pieces, min_pieces)
    cache = _PLANS.setdefault(ctx, {})
    if key in cache:
        return cache[key]
    # Links only: memory ports are left out of what overlapping hides (module docstring).
    bandwidth = {
        e.name: e.bandwidth for e in ctx.machine.graph.edges if e.name != names.port(e.dst)
    }
    counts = sorted({min_pieces, *(k for k in CANDIDATES if min_pieces <= k <= max_pieces)})
    full = [phase_nbytes(op, i, layout, x_nbytes) for i in range(len(phases))]
    configs = [
        {
            g: choose(ctx, phase.op, None, len(g), full[i], [pes[w] for w in g])[1]
            for g in groups_of(layout, phase.group)
        }
        for i, phase in enumerate(phases)
    ]
    launch = float(max(ctx.machine.pe_spec(pe).launch_overhead_ps for pe in pes))
    predicted: dict[int, float] = {}
    two_step = 0.0
    for k in counts:
        times, loads = [], []
        for i, phase in enumerate(phases):
            slowest, load = 0.0, {}
            for g, config in configs[i].items():
                group_pes = [pes[w] for w in g]
                found = predict_detail(ctx, phase.op, config, group_pes, -(-full[i] // k), itemsize)
                if found is None:  # nothing to price it by: do not pipeline
                    return _keep(cache, key, PiecePlan(min_pieces, {}, 0.0))
                slowest = max(slowest, found.seconds * PS_PER_S)
                for name, nbytes in found.link_bytes.items():
                    load[name] = load.get(name, 0.0) + nbytes
            times.append(slowest - launch)
            loads.append(load)
        alone = [_busiest_ps(load, {}, bandwidth) for load in loads]
        together = _busiest_ps(loads[0], loads[1], bandwidth)
        # What running the phases side by side can hide: the link time they would
        # spend apart on links the other phase leaves free (none when they share their
        # busiest links), never more than the shorter phase.
        hidden = min(times[0], times[1], max(0.0, alone[0] + alone[1] - together))
        stage = times[0] + times[1] - hidden
        predicted[k] = launch + times[0] + times[1] + (k - 1) * stage
        if k == 1:
            two_step = predicted[k]
    best = min(counts, key=lambda k: (predicted[k], k))
    if 1 in predicted and predicted[best] > (1 - MIN_GAIN) * predicted[1]:
        best = 1
    return _keep(cache, key, PiecePlan(best, predicted, two_step))


def _busiest_ps(load: dict[str, float], more: dict[str, float], bandwidth: dict[str, int]) -> float:
    """The time the busiest link needs for the bytes of ``load`` and ``more`` together."""
    return max(
        (
            (load.get(name, 0.0) + more.get(name, 0.0)) * PS_PER_S / bandwidth[name]
            for name in set(load) | set(more)
            if name in bandwidth
        ),
        default=0.0,
    )


def _keep(cache: dict, key: tuple, plan: PiecePlan) -> PiecePlan:
    cache[key] = plan
    return plan
