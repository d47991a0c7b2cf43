"""Choosing an algorithm: a cost model from the topology, and tables measured in simulation.

**α, β, γ from the topology** (ADR 0008).  For a configuration and the PEs it
runs on, every message an algorithm sends goes from the sender's memory to the
receiver's buffer memory over a route with hop latencies L_i and bandwidths
B_i, and pays the IPCQ endpoint overhead o.  A message of m bytes takes
``o + ΣL_i + m/B_min + min(m, P)·(Σ 1/B_i − 1/B_min)`` (P: packet size), so

* α = o + ΣL_i (+ P·(Σ1/B_i − 1/B_min) when m ≥ P),
* β = 1/B_min (+ (Σ1/B_i − 1/B_min) when m < P),

taking the slowest of the routes between ranks the algorithm talks to.  A
reduction streams the incoming bytes from the buffer memory and the local
bytes from HBM and writes the result to HBM while the vector engine combines
them: γ = max(1 / (vector FLOP/s · itemsize), max over memory ports of
bytes through the port per byte reduced / port bandwidth).

**auto** picks the configuration with the least predicted time; with a tune
table (``kernbench tune``) it takes the measured winner at the nearest size.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernbench.ccl.algorithms import Algorithm, algorithms, get_algorithm
from kernbench.ccl.catalogue import AlgorithmConfig
from kernbench.ccl.settings import ccl_settings
from kernbench.ccl.tune_table import TuneTable, check_tune_table, load_tune_table
from kernbench.distributed.world import active_world
from kernbench.errors import DistributedError
from kernbench.topology import topology_digest
from kernbench.units import PS_PER_S

__all__ = ["LinkCosts", "link_costs", "predict", "candidates", "auto_choice", "message_bytes"]


@dataclass(frozen=True)
class LinkCosts:
    """α (s), β (s/byte), γ (s/byte) for one configuration on one set of PEs."""

    alpha: float
    beta: float
    gamma: float


def _memory_node(ctx: Any, pe: str) -> str:
    """The HBM slice of a PE's own partition (where its tensors live)."""
    sip, cube, p = pe.split(".")
    slices = ctx.topology.cube.memory_map.hbm_slices_per_cube
    per_pe = max(1, ctx.topology.pes_per_cube // slices)
    return f"{sip}.{cube}.hbm{int(p[2:]) // per_pe}"


def _message_time_terms(ctx: Any, src: str, dst: str, m: int) -> tuple[float, float]:
    """(α, β) of the route src -> dst for messages of m bytes, in seconds."""
    graph, network = ctx.fabric.graph, ctx.fabric.network
    edges = [graph.edges[i] for i in graph.route(src, dst)]
    overhead = ctx.topology.cube.pe_template.components.pe_ipcq.attrs.endpoint_overhead
    latency = sum(e.latency_ps for e in edges) + overhead
    inv = [PS_PER_S / e.bandwidth for e in edges]  # ps per byte
    slowest = max(inv)
    fill = sum(inv) - slowest
    packet = network.packet_bytes
    if m >= packet:
        return (latency + packet * fill) / PS_PER_S, slowest / PS_PER_S
    return latency / PS_PER_S, (slowest + fill) / PS_PER_S


def link_costs(
    ctx: Any,
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
    incoming message together, for instance).
    """
    from kernbench.ccl.launch import buffer_node

    size = len(pes)
    graph = ctx.fabric.graph
    alpha = beta = 0.0
    load: dict[int, int] = defaultdict(int)
    routes = []
    for rank, pe in enumerate(pes):
        targets = algorithm.step_targets(op, size, rank)
        peers = sorted(algorithm.neighbours(op, size, rank) | set(targets))
        # Steps go to different partners (recursive doubling: 1 hop, then 2, ...): a
        # rank's α and β are the mean over its partners; ranks step together, so the
        # slowest rank sets the pace.
        terms = []
        for peer in peers:
            target = pes[peer]
            src = _memory_node(ctx, pe)
            dst = buffer_node(target, _memory_node(ctx, target), config.buffer)
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
    shared = max(
        (max(load[i] / graph.edges[i].bandwidth for i in route) for route in routes),
        default=0.0,
    )
    return LinkCosts(alpha, max(beta, shared), _gamma(ctx, config, pes[0], itemsize))


def _ring_port_bound(ctx: Any, config: AlgorithmConfig, pe: str, p: int, nbytes: int) -> float:
    """Seconds a rank's busiest memory port needs for a ring all-reduce's traffic."""
    from kernbench.ccl.launch import buffer_node

    hbm = _memory_node(ctx, pe)
    buffer = buffer_node(pe, hbm, config.buffer)
    per_byte: dict[str, float] = defaultdict(float)
    # reduce-scatter: send (read HBM), receive (write buffer), reduce (read buffer and
    # HBM, write HBM); all-gather: send, receive, and a copy out when the buffer is not HBM.
    for node, count in ((hbm, 1), (buffer, 1), (buffer, 1), (hbm, 2), (hbm, 1), (buffer, 1)):
        per_byte[node] += count
    if buffer != hbm:
        per_byte[buffer] += 1
        per_byte[hbm] += 1
    share = nbytes * (p - 1) / p
    graph = ctx.fabric.graph
    worst = 0.0
    for node, count in per_byte.items():
        port = graph.edges[graph.route(pe, node)[-1]]
        worst = max(worst, share * count / port.bandwidth)
    return worst


def _gamma(ctx: Any, config: AlgorithmConfig, pe: str, itemsize: int) -> float:
    from kernbench.ccl.launch import buffer_node

    core = ctx.topology.cube.pe_template.components.pe_core.attrs
    compute = 1 / (core.vector_flops_per_cycle * core.clock * itemsize)
    graph = ctx.fabric.graph
    local = _memory_node(ctx, pe)
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


def predict(
    ctx: Any,
    op: str,
    name: str,
    config: AlgorithmConfig,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int = 4,
) -> float | None:
    """Predicted seconds of ``op`` on ``nbytes`` (as in the closed forms), or None."""
    algorithm = get_algorithm(config.module)
    p = len(pes)
    if not algorithm.serves(op, p):
        return None
    overhead = ctx.topology.cube.pe_template.components.pe_core.attrs.launch_overhead / PS_PER_S
    if config.module == "hierarchical":
        return _predict_hierarchical(ctx, op, config, pes, nbytes, itemsize, overhead)
    cost = algorithm.costs.get(op)
    if cost is None:
        return None
    m = message_bytes(config.module, op, p, nbytes)
    pieces = config.chunks if config.module == "ring" else 1
    c = link_costs(ctx, config, algorithm, op, pes, max(1, m // pieces), itemsize)
    if pieces > 1 and op == "all_reduce":
        # 2(p-1) pipeline stages of one piece each, C pieces through them; only the
        # last piece's reductions are not hidden behind later transfers.  Overlapped,
        # the traffic through a rank's memory ports bounds it from below.
        piece = m / pieces
        stages = 2 * (p - 1) + pieces - 1
        pipeline = stages * (c.alpha + piece * c.beta) + (p - 1) * piece * c.gamma
        return overhead + max(pipeline, _ring_port_bound(ctx, config, pes[0], p, nbytes))
    return overhead + cost(p, nbytes, c.alpha, c.beta, c.gamma)


def _predict_hierarchical(
    ctx: Any,
    op: str,
    config: AlgorithmConfig,
    pes: Sequence[str],
    nbytes: int,
    itemsize: int,
    overhead: float,
) -> float | None:
    if op != "all_reduce":
        return None
    levels = list(config.params.get("levels", ["sip"]))
    names = list(config.params.get("algorithms", ["ring"] * (len(levels) + 1)))
    total, group, n = 0.0, list(pes), float(nbytes)
    for depth, level in enumerate(levels):

        def key(pe: str, level: str = level) -> str:
            return pe.split(".")[0] if level == "sip" else pe.rsplit(".", 1)[0]

        inner = [pe for pe in group if key(pe) == key(group[0])]
        if len(inner) in (1, len(group)):
            continue
        name = names[min(depth, len(names) - 1)]
        algo = get_algorithm(name)
        k = len(inner)
        sub = AlgorithmConfig(module=name, buffer=config.buffer)
        for step in ("reduce_scatter", "all_gather"):
            c = link_costs(ctx, sub, algo, step, inner, int(n / k), itemsize)
            total += algo.costs[step](k, n, c.alpha, c.beta, c.gamma)
        n /= k
        group = [pe for pe in group if pe in {p for p in group[::k]}] or group[::k]
    name = names[-1]
    algo = get_algorithm(name)
    if len(group) > 1:
        sub = AlgorithmConfig(module=name, buffer=config.buffer)
        m = message_bytes(name, "all_reduce", len(group), int(n))
        c = link_costs(ctx, sub, algo, "all_reduce", group, m, itemsize)
        total += algo.costs["all_reduce"](len(group), n, c.alpha, c.beta, c.gamma)
    return overhead + total


def candidates(ctx: Any, op: str, size: int) -> list[tuple[str, AlgorithmConfig]]:
    """Catalogue configurations that can run ``op`` on ``size`` ranks (one per module+buffer)."""
    settings = ccl_settings(ctx)
    found = []
    for name, config in settings.catalogue.configs.items():
        if config.world_size not in (None, size):
            continue
        if get_algorithm(config.module).serves(op, size):
            found.append((name, config))
    return found


def auto_choice(ctx: Any, op: str, size: int, nbytes: int, pes: list[str]) -> str:
    """The configuration ``auto`` runs: the tune table's winner, else the cost model's."""
    settings = ccl_settings(ctx)
    if settings.tune_table:
        winner = _table_winner(settings.tune_table, op, size, nbytes, ctx)
        if winner is not None:
            return winner
    best: tuple[float, str] | None = None
    for name, config in candidates(ctx, op, size):
        t = predict(ctx, op, name, config, pes, nbytes)
        if t is not None and (best is None or t < best[0]):
            best = (t, name)
    if best is None:
        raise DistributedError(
            f"auto: no configuration in the catalogue can run {op} on {size} ranks"
        )
    return best[1]


_TABLES: dict[str, tuple[tuple[int, ...], TuneTable]] = {}
_DIGEST: list[Any] = [None, ""]  # the last topology digested, and its digest


def _table_winner(path: str, op: str, size: int, nbytes: int, ctx: Any) -> str | None:
    """The tune table's winner for ``op`` on ``size`` ranks at the size nearest ``nbytes``.

    The table is validated when first read (and again when the file changes) and
    checked against this run: its machine, world size and catalogue.
    """
    try:
        info = os.stat(path)
        signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    except (OSError, ValueError):
        signature = ()  # load_tune_table says what is wrong
    cached = _TABLES.get(path)
    if cached is not None and signature and cached[0] == signature:
        table = cached[1]
    else:
        table = load_tune_table(path)
        _TABLES[path] = (signature, table)
    topology = ctx.topology
    if _DIGEST[0] is not topology:
        _DIGEST[:] = [topology, topology_digest(topology)]
    try:
        world_size: int | None = active_world().world_size
    except DistributedError:  # asked outside a run: nothing to compare with
        world_size = None
    check_tune_table(
        table,
        path,
        topology_name=topology.name,
        digest=_DIGEST[1],
        world_size=world_size,
        choices=ccl_settings(ctx).catalogue.configs,
        known=algorithms(),
    )
    rows = [row for row in table.results if row.op == op and row.world_size == size]
    if not rows:
        return None
    target = math.log2(max(nbytes, 1))
    row = min(rows, key=lambda r: (abs(math.log2(r.bytes) - target), r.bytes))
    return row.winner
