"""Choosing an algorithm: a cost model of the machine, and tables measured in simulation.

**Predictions** (``predict``, ``auto``) come from the schedule model
(:mod:`kernbench.ccl.costmodel`): every algorithm describes its steps (the
messages in flight together, the local work alongside and after them), and
the model lays them on the machine's routes, links, memory ports, IPCQ
channels and PEs, with flows in flight together sharing the links they
cross.  A prediction is never below the bound physics sets
(:class:`Prediction`): the op's bytes on its busiest link or memory port over
that link's bandwidth, and no less than its fastest message.  To price a new
algorithm, give it a schedule; one without falls back to its closed form below.

**α, β, γ from the topology** (ADR 0008), for the closed forms of
reference/collective-costs.md.  For a configuration and the PEs it runs on,
a message of m bytes takes ``o + ΣL_i + m/B_min + min(m, P)·(Σ 1/B_i − 1/B_min)``, so

* α = o + ΣL_i (+ P·(Σ1/B_i − 1/B_min) when m ≥ P),
* β = 1/B_min (+ (Σ1/B_i − 1/B_min) when m < P),

taking the slowest of the routes between ranks the algorithm talks to.  A
reduction streams the incoming bytes from the buffer memory and the local
bytes from HBM and writes the result to HBM while the vector engine combines
them: γ = max(1 / (vector FLOP/s · itemsize), max over memory ports of
bytes through the port per byte reduced / port bandwidth).

**Which configurations can run** on a group: :func:`unfit` (the
configuration's world size, the algorithm's op and rank count, and where the
PEs sit for the algorithms that care), the one check ``auto`` and
``kernbench tune`` both use (:func:`candidates`).

**auto** picks the fitting configuration with the least predicted time; with
a tune table (``kernbench tune``) it takes the measured winner at the nearest
size when that winner fits the group.
"""

from __future__ import annotations

import math
import os
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernbench.ccl.algorithms import Algorithm, algorithms, get_algorithm
from kernbench.ccl.buffers import buffer_node, memory_node
from kernbench.ccl.catalogue import AlgorithmConfig
from kernbench.ccl.costmodel import Pricing, price
from kernbench.ccl.mapping import algorithm_order
from kernbench.ccl.settings import ccl_settings
from kernbench.ccl.tune_table import TuneTable, check_tune_table, load_tune_table
from kernbench.distributed.world import active_world
from kernbench.errors import DistributedError, RouteError
from kernbench.runtime import RuntimeContext
from kernbench.topology import topology_digest
from kernbench.units import PS_PER_S

__all__ = [
    "LinkCosts",
    "link_costs",
    "Prediction",
    "predict",
    "predict_detail",
    "unfit",
    "candidates",
    "auto_choice",
    "check_run_table",
    "message_bytes",
    "CHUNK_CHOICES",
    "CHUNK_MAX_RANKS",
    "SEGMENT_MAX_RANKS",
    "CHUNK_MAX_MESSAGES",
    "SCHEDULE_MAX_MESSAGES",
    "DENSE_FANOUT",
    "DENSE_STEP_MESSAGES",
    "LINK_COST_PAIRS",
    "PieceChoice",
    "chunk_choice",
    "chosen_chunks",
    "with_chunks",
    "with_choice",
]


@dataclass(frozen=True)
class LinkCosts:
    """α (s), β (s/byte), γ (s/byte) for one configuration on one set of PEs."""

    alpha: float
    beta: float
    gamma: float


@dataclass(frozen=True)
class Prediction:
    """A predicted time (seconds, launch to end) and the physics bound under it.

    ``bound``: launch overhead + the op's bytes on ``busiest`` (a link or memory
    port) over its bandwidth (+ the endpoint overhead when only messages use
    it), and no less than the fastest message; ``seconds`` is never below it.
    ``model``: what the schedule model gives before that floor.
    ``link_bytes``: the bytes the op puts on each link and memory port, by name.
    ``pieces``: the chunks the algorithm cuts its data into (:func:`chosen_chunks`).
    """

    seconds: float
    model: float
    bound: float
    busiest: str
    link_bytes: Mapping[str, float] = field(default_factory=dict)
    pieces: int = 1  # the chunks it was priced with (the configuration's, or chosen)


# -- α, β, γ for the closed forms --------------------------------------------------------
def _message_time_terms(ctx: RuntimeContext, src: str, dst: str, m: int) -> tuple[float, float]:
    """(α, β) of the route src -> dst for messages of m bytes, in seconds."""
    graph = ctx.machine.graph
    edges = [graph.edges[i] for i in graph.route(src, dst)]
    overhead = ctx.topology.cube.pe_template.components.pe_ipcq.attrs.endpoint_overhead
    latency = sum(e.latency_ps for e in edges) + overhead
    inv = [PS_PER_S / e.bandwidth for e in edges]  # ps per byte
    slowest = max(inv)
    fill = sum(inv) - slowest
    packet = ctx.topology.fabric.packet_bytes
    if m >= packet:
        return (latency + packet * fill) / PS_PER_S, slowest / PS_PER_S
    return latency / PS_PER_S, (slowest + fill) / PS_PER_S


def link_costs(
    ctx: RuntimeContext,
    config: AlgorithmConfig,
    algorithm: Algorithm,
    op: str,
    pes: Sequence[str],
    message: int,
    itemsize: int = 4,
) -> LinkCosts:
    """α, β, γ for ``algorithm`` under ``config`` on ``pes`` with messages of ``message`` bytes.

    α and β are the mean over a rank's partners, for the slowest rank; β is then raised to
    what the busiest link or memory port allows when every rank sends its
    typical step at once (a rank's HBM port carries its outgoing and its
    incoming message together, for instance).  Past :data:`LINK_COST_PAIRS`
    rank-partner pairs, ranks spread over the group stand for all, and each
    loads the links only with its own messages.
    """
    size = len(pes)
    graph = ctx.machine.graph
    alpha = beta = shared = 0.0
    groups: Sequence[Sequence[int]] = [range(size)]  # ranks loading the links together
    if size * len(algorithm.neighbours(op, size, 0)) > LINK_COST_PAIRS:
        # Every pair's route would take minutes (direct sends among 4,096 ranks are
        # 16.7 M): ranks spread over the group, each with every partner and loading
        # the links alone (see LINK_COST_PAIRS).
        count = max(1, LINK_COST_PAIRS // max(1, size - 1))
        groups = [[rank] for rank in sorted({i * size // count for i in range(min(count, size))})]
    for group in groups:
        load: dict[int, int] = defaultdict(int)
        routes = []
        for rank in group:
            pe = pes[rank]
            targets = set(algorithm.step_targets(op, size, rank))
            peers = sorted(algorithm.neighbours(op, size, rank) | targets)
            # Steps go to different partners (recursive doubling: 1 hop, then 2, ...):
            # a rank's α and β are the mean over its partners; ranks step together, so
            # the slowest rank sets the pace.
            terms = []
            for peer in peers:
                target = pes[peer]
                src = memory_node(ctx.topology, pe)
                dst = buffer_node(target, memory_node(ctx.topology, target), config.buffer)
                terms.append(_message_time_terms(ctx, src, dst, message))
                route = graph.route(src, dst)
                if peer in targets:
                    for i in route:
                        load[i] += 1
                    routes.append(route)
            if terms:
                a = sum(t[0] for t in terms) / len(terms)
                b = sum(t[1] for t in terms) / len(terms)
                if a + message * b > alpha + message * beta:
                    alpha, beta = a, b
        for route in routes:
            shared = max(shared, max(load[i] / graph.edges[i].bandwidth for i in route))
    return LinkCosts(alpha, max(beta, shared), _gamma(ctx, config, pes[0], itemsize))


def _gamma(ctx: RuntimeContext, config: AlgorithmConfig, pe: str, itemsize: int) -> float:
    core = ctx.topology.cube.pe_template.components.pe_core.attrs
    compute = 1 / (core.vector_flops_per_cycle * core.clock * itemsize)
    graph = ctx.machine.graph
    local = memory_node(ctx.topology, pe)
    incoming = buffer_node(pe, local, config.buffer)
    load: dict[int, float] = defaultdict(float)
    for src, dst in ((incoming, pe), (local, pe), (pe, local)):
        for i in graph.route(src, dst):
            load[i] += 1.0
    memory = max(count / graph.edges[i].bandwidth for i, count in load.items())
    return max(compute, memory)


def message_bytes(algorithm: str, op: str, p: int, n: int) -> int:
    """The typical message of an algorithm (what β and α are evaluated at)."""
    if algorithm in ("recursive_doubling", "binomial", "binary_tree", "double_binary_tree"):
        return n if op != "all_gather" else max(1, n // p)
    return max(1, n // max(p, 1))


# -- predictions -------------------------------------------------------------------------
def _params(config: AlgorithmConfig) -> dict[str, Any]:
    """The parameters the programs see (as the launcher passes them)."""
    return {"chunks": config.chunks, **config.params}


def fixed_pieces(config: AlgorithmConfig, algorithm: Algorithm) -> int | None:
    """The piece count ``config`` sets for ``algorithm`` (``chunks``, or the parameter
    its ``pieces`` names), or None when the tuner chooses it."""
    if algorithm.pieces == "chunks":
        return config.chunks
    return config.params.get(algorithm.pieces)


def _with_pieces(config: AlgorithmConfig, algorithm: Algorithm, count: int) -> AlgorithmConfig:
    """``config`` cutting its data into ``count`` pieces (see :func:`fixed_pieces`)."""
    if algorithm.pieces == "chunks":
        return config.model_copy(update={"chunks": count})
    return config.model_copy(update={"params": {**config.params, algorithm.pieces: count}})


# The piece counts a pipelining algorithm is priced with when its configuration leaves
# ``chunks`` out; a count is taken over a smaller one only when the model predicts it
# at least _CHUNK_GAIN faster (pieces cost a message each: fewer when it is a wash).
# Sixteen pieces bring a double binary tree within 1% of n*beta on fc8 at 64 MiB;
# more gain little and make every simulated call slower to run.
CHUNK_CHOICES = (1, 2, 4, 8, 16)
_CHUNK_GAIN = 0.02
# Groups of more ranks than this run in one piece: pricing a schedule per candidate
# count would cost more than the simulation of the call.  Pieces cut by ``chunks``
# flow through the phases of one schedule, so pricing a count costs what pricing
# one piece does (a 1,024-rank ring on rack.yaml: 0.15 s for one piece, 0.25 s
# for two).
CHUNK_MAX_RANKS = 1024
# ... when its messages cross at most this many links in all (each step once): a tree
# over a ring of chips crosses hundreds a message, and pricing its sharing costs
# about that squared (a double binary tree over 1,024 chips of ring8, 1.06 M links:
# minutes a count; over 1,024 PEs of rack.yaml, 24 k: 0.5-1.5 s).  Groups of up to
# SEGMENT_MAX_RANKS ranks are tuned whatever it costs.
PRICE_MAX_HOPS = 1 << 16
# Segments (an algorithm whose ``pieces`` is not ``chunks``) are steps of their own
# on strands side by side: pricing grows with their count (a hierarchical
# all-reduce over 1,024 PEs of rack.yaml in two segments has 257 steps to price,
# 6 s), and the fast backend runs them message by message (over 256 PEs of
# rack.yaml, 23 s instead of 0.3 s, for 1% less simulated time): groups over this
# many ranks take one segment, and no call more than CHUNK_MAX_MESSAGES.
SEGMENT_MAX_RANKS = 256
# No more pieces than keep a call at this many messages or, for chunks of a call
# already past it in one piece, twice its one-piece messages: a simulation's wall
# time grows with its messages (direct sends on 32 ranks in 16 pieces are 31 744),
# and a large call is worth one doubling (a one-piece ring over rack.yaml's 1,024
# PEs runs at 85% of its HBM bound, in two pieces at 99%).
CHUNK_MAX_MESSAGES = 16384


# A schedule whose every step would hold more messages than this is not built when the
# algorithm has a closed form: the closed form prices it.
SCHEDULE_MAX_MESSAGES = 1 << 20
# Steps in which every rank sends to more than DENSE_FANOUT partners at once cost the
# model about the square of their messages (direct sends among 128 ranks, 16,256
# messages a step, take 3 s to price; among 4,096 ranks, 16.7 M, hours): they are
# built only up to DENSE_STEP_MESSAGES.
DENSE_FANOUT = 8
DENSE_STEP_MESSAGES = 1 << 13
# The closed forms' alpha and beta (link_costs) follow every rank's messages to
# every partner up to this many pairs; past it, ranks spread over the group
# with every partner each, their links loaded by their own messages only: the
# bound of a rank's port, not of core links many ranks share (exact on
# non-blocking fabrics, optimistic on oversubscribed ones).
LINK_COST_PAIRS = 1 << 16


def _too_big(algorithm: Algorithm, op: str, p: int) -> bool:
    """Whether ``algorithm``'s schedule of ``op`` on ``p`` ranks is over the budget
    (:data:`SCHEDULE_MAX_MESSAGES`, or :data:`DENSE_STEP_MESSAGES` for steps of more than
    :data:`DENSE_FANOUT` partners a rank) and a closed form can price it instead."""
    small = min(SCHEDULE_MAX_MESSAGES, DENSE_STEP_MESSAGES)
    if p * (p - 1) <= small or algorithm.costs.get(op) is None:
        return False
    fanout = len(algorithm.step_targets(op, p, 0))
    limit = DENSE_STEP_MESSAGES if fanout > DENSE_FANOUT else SCHEDULE_MAX_MESSAGES
    return p * fanout > limit


@dataclass(frozen=True)
class PieceChoice:
    """The pieces a call cuts its data into, and how that count came about.

    ``how`` is empty for an algorithm that does not pipeline.  ``capped``: the cost
    model did not weigh every count it would have (the group is over
    :data:`CHUNK_MAX_RANKS`, or :data:`SEGMENT_MAX_RANKS` for segments, its schedule
    over :data:`SCHEDULE_MAX_MESSAGES`, or more pieces would pass
    :data:`CHUNK_MAX_MESSAGES` messages, or twice the call's in one piece when that
    is past them), so a larger count set by the configuration could run faster.
    """

    count: int
    how: str
    capped: bool = False
    setting: str = "chunks"  # the configuration key that sets the count


# How a call's piece count came about (``PieceChoice.how``, in the run report).
PIECES_SET = "set by the configuration"
PIECES_TUNED = "chosen by the cost model"
PIECES_BIG = "not tuned: its schedule is too big to price"
PIECES_UNPRICED = "not tuned: the cost model has no schedule for it"
PIECES_DOWN = "not tuned: a link on its routes is down"


def chosen_chunks(
    ctx: RuntimeContext,
    op: str,
    config: AlgorithmConfig,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int = 4,
) -> int:
    """The pieces ``config`` cuts ``op`` on ``nbytes`` into on these PEs.

    The configuration's ``chunks`` when it sets them; else, for an algorithm that
    pipelines, the count of :data:`CHUNK_CHOICES` with the least predicted time
    (a piece of a rank's block no smaller than a packet, no more than
    :data:`CHUNK_MAX_MESSAGES` messages in all, or twice the call's in one piece
    when that is already past them); else one.  Deterministic:
    every rank and every call with the same arguments gets the same count.
    """
    return chunk_choice(ctx, op, config, pes, nbytes, itemsize).count


def chunk_choice(
    ctx: RuntimeContext,
    op: str,
    config: AlgorithmConfig,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int = 4,
) -> PieceChoice:
    """:func:`chosen_chunks`' count, with how it came about (for the run report)."""
    algorithm = get_algorithm(config.module)
    setting = "chunks" if algorithm.pieces == "chunks" else f"params.{algorithm.pieces}"
    fixed = fixed_pieces(config, algorithm)
    if fixed is not None:
        return PieceChoice(fixed, PIECES_SET, setting=setting)
    if not algorithm.pipelines:
        return PieceChoice(1, "")
    if algorithm.schedule is None:
        return PieceChoice(1, PIECES_UNPRICED, setting=setting)
    chunked = algorithm.pieces == "chunks"
    most_ranks = CHUNK_MAX_RANKS if chunked else SEGMENT_MAX_RANKS
    if len(pes) > most_ranks:
        return PieceChoice(
            1, f"not tuned: groups over {most_ranks} ranks run in one piece", True, setting
        )
    if _too_big(algorithm, op, len(pes)):
        return PieceChoice(1, PIECES_BIG, True, setting)
    key = (op, id(config), tuple(pes), nbytes, itemsize)
    known = _CHUNKS.get(ctx, {}).get(key) if _weakly(ctx) else None
    if known is not None and known[0] is config:
        return known[1]
    packet = ctx.topology.fabric.packet_bytes
    placed = mapped_pes(ctx, algorithm, pes)
    best, best_ps, how, capped = 1, math.inf, PIECES_TUNED, False
    most = CHUNK_MAX_MESSAGES
    pricing: Pricing | None = None  # one for every count: routes are looked up once
    for count in CHUNK_CHOICES:
        if count > 1 and nbytes / max(len(pes), 1) / count < packet:
            break
        schedule = algorithm.schedule(
            op, placed, float(nbytes), _params(_with_pieces(config, algorithm, count))
        )
        messages = sum(
            len(step.messages) * step.repeat * phase.pieces
            for phase in schedule
            for step in phase.steps
        )
        if count == 1:
            if chunked and messages > CHUNK_MAX_MESSAGES:
                most = 2 * messages  # a call past the cap in one piece may double once
        elif messages > most:
            how = f"chosen by the cost model among counts within {most} messages"
            capped = True
            break
        try:
            if pricing is None:
                pricing = Pricing(ctx, config, placed, itemsize)
            # Past SEGMENT_MAX_RANKS (chunks only), only what is quick to price.
            if count == 1 and len(pes) > SEGMENT_MAX_RANKS:
                hops = pricing.route_hops(schedule)
                if hops > PRICE_MAX_HOPS:
                    how = f"not tuned: its messages cross {hops} links, over {PRICE_MAX_HOPS}"
                    best, capped = 1, True
                    break
            priced = pricing.price(schedule)
        except RouteError:  # a link is down: one piece, and the run says what is wrong
            best, how = 1, PIECES_DOWN
            break
        model = max(priced.model_ps, priced.bound_ps)
        # Every count is priced: times need not fall then rise (a chain broadcast in
        # two pieces is slower than in one, in four much faster).
        if model < best_ps * (1 - _CHUNK_GAIN):
            best, best_ps = count, model
    choice = PieceChoice(best, how, capped, setting)
    if _weakly(ctx):
        _CHUNKS.setdefault(ctx, {})[key] = (config, choice)
    return choice


def _weakly(ctx: RuntimeContext) -> bool:
    try:
        weakref.ref(ctx)
    except TypeError:
        return False
    return True


# chosen_chunks' answers per context, with the configuration kept so its id is not reused.
_CHUNKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def with_chunks(
    ctx: RuntimeContext,
    op: str,
    config: AlgorithmConfig,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int = 4,
) -> AlgorithmConfig:
    """``config`` with its piece count fixed for this call (:func:`chosen_chunks`)."""
    return with_choice(ctx, op, config, pes, nbytes, itemsize)[0]


def with_choice(
    ctx: RuntimeContext,
    op: str,
    config: AlgorithmConfig,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int = 4,
) -> tuple[AlgorithmConfig, PieceChoice]:
    """:func:`with_chunks`, and how its piece count came about (:func:`chunk_choice`)."""
    algorithm = get_algorithm(config.module)
    choice = chunk_choice(ctx, op, config, pes, nbytes, itemsize)
    if fixed_pieces(config, algorithm) is not None:
        return config, choice
    return _with_pieces(config, algorithm, choice.count), choice


def unfit(config: AlgorithmConfig, op: str, pes: Sequence[str]) -> str | None:
    """Why ``config`` cannot run ``op`` on the group of ``pes`` (None: it can).

    The one check of whether a configuration serves a group: its world size,
    whether its algorithm serves the op on that many ranks, and whether the
    algorithm (with the configuration's parameters) fits where the PEs sit.
    """
    if config.world_size is not None and config.world_size != len(pes):
        return f"it is for {config.world_size} ranks, the group has {len(pes)}"
    key = (id(config), op, tuple(pes))
    known = _UNFIT.get(key)
    if known is not None and known[0] is config:
        _UNFIT.move_to_end(key)
        return known[1]
    try:
        reason = get_algorithm(config.module).unfit(op, pes, _params(config))
    except DistributedError as exc:
        reason = str(exc)
    _UNFIT[key] = (config, reason)
    if len(_UNFIT) > _UNFIT_KEPT:
        _UNFIT.popitem(last=False)
    return reason


# unfit's answers, most recent last: every collective call asks, and checking where a
# large group's PEs sit (a composition's levels) is not free.  The configuration is kept
# with its answer so that its id is not reused meanwhile.
_UNFIT: OrderedDict[tuple, tuple[AlgorithmConfig, str | None]] = OrderedDict()
_UNFIT_KEPT = 4096


def mapped_pes(ctx: RuntimeContext, algorithm: Algorithm, pes: Sequence[str]) -> list[str]:
    """``pes`` in the order the algorithm runs them on this machine (kernbench.ccl.mapping),
    so a prediction prices the routes the run takes."""
    order = algorithm_order(ctx.machine, algorithm.mapping, pes)
    return [pes[i] for i in order]


def predict_detail(
    ctx: RuntimeContext,
    op: str,
    config: AlgorithmConfig,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int = 4,
) -> Prediction | None:
    """The schedule model's prediction for ``op`` on ``nbytes``, or None when ``config``
    cannot run it on these PEs (or has neither a schedule nor a closed form for it)."""
    if unfit(config, op, pes):
        return None
    algorithm = get_algorithm(config.module)
    if algorithm.schedule is None or _too_big(algorithm, op, len(pes)):
        return _closed_form(ctx, config, algorithm, op, pes, nbytes, itemsize)
    chunks = chosen_chunks(ctx, op, config, pes, nbytes, itemsize)
    placed = mapped_pes(ctx, algorithm, pes)
    params = _params(_with_pieces(config, algorithm, chunks))
    schedule = algorithm.schedule(op, placed, float(nbytes), params)
    priced = price(ctx, config, placed, schedule, itemsize)
    model, bound = priced.model_ps / PS_PER_S, priced.bound_ps / PS_PER_S
    return Prediction(max(model, bound), model, bound, priced.busiest, priced.link_bytes, chunks)


def _closed_form(
    ctx: RuntimeContext,
    config: AlgorithmConfig,
    algorithm: Algorithm,
    op: str,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int,
) -> Prediction | None:
    cost = algorithm.costs.get(op)
    if cost is None:
        return None
    p = len(pes)
    overhead = max(ctx.machine.pe_spec(pe).launch_overhead_ps for pe in pes) / PS_PER_S
    m = message_bytes(config.module, op, p, nbytes)
    c = link_costs(ctx, config, algorithm, op, pes, m, itemsize)
    seconds = overhead + cost(p, nbytes, c.alpha, c.beta, c.gamma)
    return Prediction(seconds, seconds, 0.0, "")


def predict(
    ctx: RuntimeContext,
    op: str,
    name: str,
    config: AlgorithmConfig,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int = 4,
) -> float | None:
    """Predicted seconds of ``op`` on ``nbytes`` from launch to end (see :func:`predict_detail`)."""
    prediction = predict_detail(ctx, op, config, pes, nbytes, itemsize)
    return None if prediction is None else prediction.seconds


def candidates(
    ctx: RuntimeContext, op: str, pes: Sequence[str]
) -> list[tuple[str, AlgorithmConfig]]:
    """The catalogue configurations that can run ``op`` on the group of ``pes``, in order."""
    settings = ccl_settings(ctx)
    return [
        (name, config)
        for name, config in settings.catalogue.configs.items()
        if unfit(config, op, pes) is None
    ]


# auto's choices per context: (settings, {(op, pes, nbytes): name}); the settings are kept
# so a context given other settings starts afresh.
_CHOICES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def auto_choice(ctx: RuntimeContext, op: str, size: int, nbytes: int, pes: list[str]) -> str:
    """The configuration ``auto`` runs: the tune table's winner, else the cost model's."""
    settings = ccl_settings(ctx)
    try:
        cached = _CHOICES.get(ctx)
        if cached is None or cached[0] is not settings:
            cached = _CHOICES[ctx] = (settings, {})
    except TypeError:  # a context that cannot be referred to weakly: no memory of choices
        return _choose(ctx, settings, op, size, nbytes, pes)
    key = (op, tuple(pes), nbytes)
    choice = cached[1].get(key)
    if choice is None:
        choice = cached[1][key] = _choose(ctx, settings, op, size, nbytes, pes)
    return choice


def _choose(
    ctx: RuntimeContext, settings: Any, op: str, size: int, nbytes: int, pes: list[str]
) -> str:
    fitting = candidates(ctx, op, pes)
    if settings.tune_table:
        winner = _table_winner(settings.tune_table, op, size, nbytes, ctx)
        if winner is not None and any(name == winner for name, _ in fitting):
            return winner
    if len(fitting) == 1:
        return fitting[0][0]
    best: tuple[float, str] | None = None
    for name, config in fitting:
        t = predict(ctx, op, name, config, pes, nbytes)
        if t is not None and (best is None or t < best[0]):
            best = (t, name)
    if best is None:
        raise DistributedError(
            f"auto: no configuration in the catalogue can run {op} on these {size} ranks"
            f" ({', '.join(pes[:4])}{', ...' if size > 4 else ''})"
        )
    return best[1]


_TABLES: dict[str, tuple[tuple[int, ...], TuneTable]] = {}
_DIGEST: list[Any] = [None, ""]  # the last topology digested, and its digest


def check_run_table(ctx: RuntimeContext) -> None:
    """Read the run's tune table (``--set ccl.tune_table``), if it has one, before anything
    runs: a missing or malformed file is an error now.  Whether it fits the machine,
    world size and catalogue is checked where ``auto`` first reads it (a run that never
    picks by it, ``kernbench tune`` measuring a new one, may name an older table)."""
    path = ccl_settings(ctx).tune_table
    if path:
        _loaded_table(path)


def _table_winner(path: str, op: str, size: int, nbytes: int, ctx: RuntimeContext) -> str | None:
    """The tune table's winner for ``op`` on ``size`` ranks at the size nearest ``nbytes``.

    The table is validated when first read (and again when the file changes) and
    checked against this run: its machine, world size and catalogue.
    """
    try:
        world_size: int | None = active_world().world_size
    except DistributedError:  # asked outside a run: nothing to compare with
        world_size = None
    table = _checked_table(path, ctx, world_size)
    rows = [row for row in table.results if row.op == op and row.world_size == size]
    if not rows:
        return None
    target = math.log2(max(nbytes, 1))
    row = min(rows, key=lambda r: (abs(math.log2(r.bytes) - target), r.bytes))
    return row.winner


def _loaded_table(path: str) -> TuneTable:
    """The table at ``path``, read again when the file changes."""
    try:
        info = os.stat(path)
        signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    except (OSError, ValueError):
        signature = ()  # load_tune_table says what is wrong
    cached = _TABLES.get(path)
    if cached is not None and signature and cached[0] == signature:
        return cached[1]
    table = load_tune_table(path)
    _TABLES[path] = (signature, table)
    return table


def _checked_table(path: str, ctx: RuntimeContext, world_size: int | None) -> TuneTable:
    """The table at ``path``, checked against the run."""
    table = _loaded_table(path)
    topology = ctx.topology
    if _DIGEST[0] is not topology:
        _DIGEST[:] = [topology, topology_digest(topology)]
    check_tune_table(
        table,
        path,
        topology_name=topology.name,
        digest=_DIGEST[1],
        world_size=world_size,
        choices=ccl_settings(ctx).catalogue.configs,
        known=algorithms(),
    )
    return table
