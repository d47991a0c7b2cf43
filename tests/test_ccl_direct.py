"""The direct reduce-scatter and all-reduce: values, closed form, schedule and auto.

Values: every redop on float32, float16, bfloat16 and int32, world sizes 1-9,
counts that p does not divide (and fewer elements than ranks), with one chunk
and pipelined in pieces, compared bit for bit with NumPy reducing in the
algorithm's documented order (block j: rank j's own values, then rank j-1's,
j-2's, …), so the test also pins that order.  Timing: with one chunk on fc8
(a link per pair of ranks) the simulated time equals the closed form within
1%; the cost model's prediction is within 10% of the simulation and carries
the bytes the simulation moves; auto picks a direct configuration where one
is the fastest measured.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.algorithms import get_algorithm
from kernbench.ccl.comm import chunk_bounds
from kernbench.ccl.settings import ccl_settings
from kernbench.ccl.tuner import (
    auto_choice,
    candidates,
    link_costs,
    message_bytes,
    predict_detail,
)
from kernbench.runtime import current_context
from kernbench.runtime.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits

TOPOLOGY = "default"
OVERRIDES = ["system.device_level=cube"]
BLOCK = 3  # elements per rank block of reduce_scatter_tensor
FLOAT_OPS = ("sum", "avg", "product", "min", "max")
INT_OPS = (*FLOAT_OPS, "band", "bor", "bxor")
DTYPES = {"float32": FLOAT_OPS, "float16": FLOAT_OPS, "bfloat16": FLOAT_OPS, "int32": INT_OPS}
UFUNCS = {
    "sum": np.add,
    "avg": np.add,
    "product": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
    "band": np.bitwise_and,
    "bor": np.bitwise_or,
    "bxor": np.bitwise_xor,
}
PIPELINED = ["ccl.configs.direct_3.module=direct", "ccl.configs.direct_3.chunks=3"]


# -- data and the NumPy reference ---------------------------------------------------------
def _round(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` as the dtype holds them (bfloat16: float32 values rounded to its bits)."""
    if dtype == "bfloat16":
        return bfloat16_bits_to_float32(float32_to_bfloat16_bits(values.astype(np.float32)))
    return values.astype(dtype)


def _values(rng: np.random.Generator, dtype: str, op: str, n: int) -> np.ndarray:
    if dtype == "int32":
        if op == "product":  # stays far from overflow over nine ranks
            return rng.choice(np.array([-1, 1, 2], dtype=np.int32), n)
        return rng.integers(-50, 51, n).astype(np.int32)
    if op == "product":
        return _round(rng.uniform(0.5, 1.5, n), dtype)
    return _round(rng.standard_normal(n), dtype)


def _data(p: int, seed: int) -> list[dict[tuple[str, str, str], np.ndarray]]:
    """Per rank: all-reduce inputs of 3p+1 elements (p does not divide it for p > 1), one
    of a single element, and reduce-scatter inputs of p blocks."""
    rng = np.random.default_rng(1000 * seed + p)
    ranks: list[dict] = [{} for _ in range(p)]
    for dtype, ops in DTYPES.items():
        for op in ops:
            for kind, n in (("ar", 3 * p + 1), ("rs", BLOCK * p)):
                for r in range(p):
                    ranks[r][kind, dtype, op] = _values(rng, dtype, op, n)
        for r in range(p):
            ranks[r]["one", dtype, "sum"] = _values(rng, dtype, "sum", 1)
    return ranks


def _reduce_block(blocks: list[np.ndarray], owner: int, dtype: str, op: str) -> np.ndarray:
    """The owner's block, then rank owner-1's, owner-2's, … combined in the dtype.  A
    floating AVG scales every input by 1/p first (NCCL's PreMulSum), in its dtype; an
    integer one divides the sum, truncating."""
    p = len(blocks)
    if op == "avg" and dtype != "int32":
        held = np.float16 if dtype == "float16" else np.float32  # bfloat16 in float32
        blocks = [_round(b.astype(held) * held(1 / p), dtype) for b in blocks]
    acc = blocks[owner]
    for offset in range(1, p):
        acc = _round(UFUNCS[op](acc, blocks[(owner - offset) % p]), dtype)
    if op == "avg" and dtype == "int32":
        return np.trunc(acc / p).astype(np.int32)
    return acc


def _all_reduced(inputs: list[np.ndarray], dtype: str, op: str) -> np.ndarray:
    p, n = len(inputs), len(inputs[0])
    parts = [
        _reduce_block([x[a:b] for x in inputs], j, dtype, op)
        for j, (a, b) in enumerate(chunk_bounds(n, p))
    ]
    return np.concatenate(parts)


def _expected(data: list[dict]) -> list[dict]:
    p = len(data)
    out: list[dict] = [{} for _ in range(p)]
    for key in data[0]:
        kind, dtype, op = key
        inputs = [d[key] for d in data]
        if kind == "rs":
            for r in range(p):
                blocks = [x[r * BLOCK : (r + 1) * BLOCK] for x in inputs]
                out[r][key] = _reduce_block(blocks, r, dtype, op)
        else:
            result = _all_reduced(inputs, dtype, op)
            for r in range(p):
                out[r][key] = result
    return out


# -- what every rank runs -------------------------------------------------------------------
def _rank(rank: int, size: int, config: str, data: list, read: bool) -> dict:
    dist.init_process_group()
    read = read and not current_context().timing_only
    got = {}
    for key, values in data[rank].items():
        kind, dtype, op = key
        redop = dist.ReduceOp[op.upper()]
        source = torch.tensor(values, dtype=getattr(torch, dtype))
        if kind == "rs":
            result = torch.zeros(BLOCK, dtype=getattr(torch, dtype))
            dist.reduce_scatter_tensor(result, source, op=redop, algorithm=config)
        else:
            result = source
            dist.all_reduce(result, op=redop, algorithm=config)
        got[key] = result.numpy() if read else None
    return got


def _simulate(
    p: int,
    config: str,
    overrides: list[str],
    seed: int,
    timing_only: bool = False,
    read: bool = True,
):
    """One run of every (kind, dtype, redop) case; ``read``: the ranks return their results
    (reading costs time, so runs compared for timing read nothing)."""
    data = _data(p, seed)
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGY,
        overrides=[*OVERRIDES, *overrides],
        world_size=p,
        timing_only=timing_only,
        args=(config, data, read),
        rank_args=True,
    )
    return result, data


def _check_values(result, data: list) -> None:
    expected = _expected(data)
    for r, want in enumerate(expected):
        for key, value in want.items():
            got = result.returns[r][key]
            assert got.dtype == value.dtype and got.shape == value.shape, (r, key)
            assert got.tobytes() == value.tobytes(), (r, key, got, value)


# -- values ------------------------------------------------------------------------------
@pytest.mark.parametrize("p", range(1, 10))
def test_values_match_numpy_bit_for_bit(p: int) -> None:
    result, data = _simulate(p, "direct", [], seed=0)
    _check_values(result, data)


@pytest.mark.parametrize("p", (2, 5, 8, 9))
def test_pipelined_values_match_numpy_bit_for_bit(p: int) -> None:
    """Three pieces per block; 3p+1 elements cut into blocks of 3 and 4 elements."""
    result, data = _simulate(p, "direct_3", PIPELINED, seed=1)
    _check_values(result, data)


@pytest.mark.parametrize(
    ("p", "config", "overrides"), [(5, "direct", []), (8, "direct_3", PIPELINED)]
)
def test_same_time_functional_and_timing_only(p: int, config: str, overrides: list[str]) -> None:
    runs = [_simulate(p, config, overrides, 2, mode, read=False)[0] for mode in (False, True)]
    records = [
        [(c["op"], c["start_ps"], c["end_ps"]) for c in run.report["collectives"]] for run in runs
    ]
    assert records[0] == records[1]
    assert runs[0].elapsed_ps == runs[1].elapsed_ps


def _composed(rank: int, size: int, data: list) -> dict:
    dist.init_process_group()
    got = {}
    for key, values in data[rank].items():
        t = torch.tensor(values)
        dist.all_reduce(t, op=dist.ReduceOp[key.upper()], algorithm="cubes")
        got[key] = t.numpy()
    return got


def test_composition_levels_reduce_scatter_ragged_blocks() -> None:
    """Direct at both places of a composition over two cubes of 8 PEs: the cube level
    reduce-scatters and all-gathers 33 elements in blocks of 5 and 4, in pieces."""
    p = 16
    rng = np.random.default_rng(7)
    data = [
        {
            "sum": rng.integers(-50, 51, 2 * p + 1).astype(np.int32),
            "bxor": rng.integers(-50, 51, 2 * p + 1).astype(np.int32),
        }
        for _ in range(p)
    ]
    catalogue = [
        "ccl.configs.cubes.module=hierarchical",
        "ccl.configs.cubes.chunks=2",
        "ccl.configs.cubes.params.levels=[cube]",
        "ccl.configs.cubes.params.algorithms=[direct, direct]",
    ]
    result = kernbench.simulate(
        _composed,
        topology=TOPOLOGY,
        overrides=["system.device_level=pe", *catalogue],
        world_size=p,
        args=(data,),
        rank_args=True,
    )
    stacked = {key: np.stack([d[key] for d in data]) for key in data[0]}
    want = {"sum": stacked["sum"].sum(0), "bxor": np.bitwise_xor.reduce(stacked["bxor"], axis=0)}
    for r in range(p):
        for key, value in want.items():
            np.testing.assert_array_equal(result.returns[r][key], value, err_msg=f"{r} {key}")


# -- timing on fc8 -------------------------------------------------------------------------
SIZES = (4 << 10, 1 << 20, 64 << 20)
SIZE_IDS = ("4KiB", "1MiB", "64MiB")
PES8 = [f"sip{r}.cube0.pe0" for r in range(8)]


def _calls(op: str, config: str, sizes: tuple[int, ...]) -> None:
    """Two calls per size (the second one is measured: the IPCQ plan is installed)."""
    dist.init_process_group()
    p = dist.get_world_size()
    for nbytes in sizes:
        whole, part = torch.empty(nbytes // 4), torch.empty(nbytes // 4 // p)
        for _ in range(2):
            if op == "all_reduce":
                dist.all_reduce(whole, algorithm=config)
            else:
                dist.reduce_scatter_tensor(part, whole, algorithm=config)


def _calls_n(op: str, config: str, nbytes: int, calls: int) -> None:
    dist.init_process_group()
    p = dist.get_world_size()
    whole, part = torch.empty(nbytes // 4), torch.empty(nbytes // 4 // p)
    for _ in range(calls):
        if op == "all_reduce":
            dist.all_reduce(whole, algorithm=config)
        else:
            dist.reduce_scatter_tensor(part, whole, algorithm=config)


def _measure(
    op: str, config: str, sizes: tuple[int, ...], machine: str = "fc8", overrides: tuple = ()
):
    """The run, and per size the second call's report record."""
    run = kernbench.simulate(
        _calls,
        topology=machine,
        timing_only=True,
        overrides=list(overrides),
        args=(op, config, tuple(sizes)),
    )
    return run, dict(zip(sizes, run.report["collectives"][1::2], strict=True))


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter"])
def test_one_chunk_on_fc8_matches_the_closed_form_within_1_percent(op: str) -> None:
    run, records = _measure(op, "direct", SIZES, overrides=("ccl.configs.direct.chunks=1",))
    ctx = run.context
    config = ccl_settings(ctx).resolve("direct")[1]
    algorithm = get_algorithm("direct")
    for nbytes, record in records.items():
        simulated = (record["end_ps"] - record["start_ps"]) / 1e12
        m = message_bytes("direct", op, 8, nbytes)
        c = link_costs(ctx, config, algorithm, op, PES8, m)
        closed = algorithm.costs[op](8, nbytes, c.alpha, c.beta, c.gamma)
        assert abs(simulated - closed) / closed < 0.01, (op, nbytes, simulated, closed)


def test_closed_forms() -> None:
    """All-reduce 2α + 2n/p·β + n(p-1)/p·γ, reduce-scatter α + n/p·β + n(p-1)/p·γ."""
    costs = get_algorithm("direct").costs
    a, b, g, n = 1e-6, 1e-9, 1e-10, 1e6
    for p in range(2, 10):
        f = (p - 1) / p
        assert costs["all_reduce"](p, n, a, b, g) == pytest.approx(
            2 * a + 2 * n / p * b + n * f * g
        )
        assert costs["reduce_scatter"](p, n, a, b, g) == pytest.approx(a + n / p * b + n * f * g)


# Where the model is further off, and why: the all-reduce in pieces at 1 MiB reduces
# each piece through the HBM port the next pieces land in, and the simulation's
# reductions fall behind the arrivals (ADR 0018); predicted 13-14% fast, held to 20%.
OUTSIDE_10_PERCENT = {("all_reduce", 1 << 20)}


@pytest.mark.parametrize("config", ["direct", "direct_pipelined"])
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter"])
def test_prediction_on_fc8_within_10_percent(op: str, config: str) -> None:
    run, records = _measure(op, config, SIZES)
    ctx = run.context
    resolved = ccl_settings(ctx).resolve(config)[1]
    for nbytes, record in records.items():
        simulated = (record["end_ps"] - record["launch_ps"]) / 1e12
        predicted = predict_detail(ctx, op, resolved, PES8, nbytes)
        assert predicted is not None
        bound = 0.20 if (op, nbytes) in OUTSIDE_10_PERCENT else 0.10
        error = abs(predicted.seconds - simulated) / simulated
        assert error < bound, (nbytes, predicted, simulated)
        assert predicted.bound <= simulated


@pytest.mark.parametrize("config", ["direct", "direct_pipelined"])
@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter"])
def test_schedule_carries_the_bytes_the_simulation_moves(op: str, config: str) -> None:
    nbytes = 1 << 20
    once, twice = (
        kernbench.simulate(
            _calls_n, topology="fc8", timing_only=True, args=(op, config, nbytes, calls)
        )
        for calls in (1, 2)
    )
    edges = once.context.machine.graph.edges
    simulated = {
        edges[e].name: twice.link_bytes[e] - once.link_bytes[e]
        for e in range(len(edges))
        if twice.link_bytes[e] != once.link_bytes[e]
    }
    resolved = ccl_settings(once.context).resolve(config)[1]
    predicted = predict_detail(once.context, op, resolved, PES8, nbytes)
    assert {k: round(v) for k, v in predicted.link_bytes.items() if v} == simulated


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter"])
def test_auto_on_fc8_picks_direct_where_it_is_fastest(op: str) -> None:
    sizes = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
    run, _ = _measure(op, "direct", sizes[:1])
    ctx = run.context
    names = [name for name, _ in candidates(ctx, op, PES8)]
    assert {"direct", "direct_pipelined"} <= set(names)
    times = {}
    for name in names:
        _, records = _measure(op, name, sizes)
        times[name] = {s: r["end_ps"] - r["launch_ps"] for s, r in records.items()}
    settings = ccl_settings(ctx)
    for nbytes in sizes:
        best = min(names, key=lambda name: times[name][nbytes])
        # On a machine with a link per pair, direct sends beat every other algorithm.
        assert settings.resolve(best)[1].module == "direct", (nbytes, best)
        pick = auto_choice(ctx, op, 8, nbytes, PES8)
        assert settings.resolve(pick)[1].module == "direct", (nbytes, pick)
        if (op, nbytes) in DIRECT_PIECES_MISSED:
            assert times[pick][nbytes] <= 1.10 * times[best][nbytes], (nbytes, pick, best)
        else:
            assert times[pick][nbytes] == times[best][nbytes], (nbytes, pick, best)


# Where auto takes direct sends in the wrong piece count (held to 10%): the model prices
# `direct` in 16 pieces 9% under the simulation at 16-64 MiB, so it takes 16 over the 8 of
# `direct_pipelined`, which the simulation runs 5-6% faster (since ADR 0019).  16 pieces
# per peer are more than the IPCQ depth (8): a sender waits for credits that its receiver
# returns only as it takes the pieces, peer by peer (with `queue_depth: 32` the 16 pieces
# run 105.62 us at 16 MiB, the fastest); the model's credit bound counts round trips, not
# the receiver's turn.
DIRECT_PIECES_MISSED = {("all_reduce", 16 << 20), ("all_reduce", 64 << 20)}
