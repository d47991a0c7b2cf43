"""Every registered collective algorithm, every op it serves, against NumPy.

Each (algorithm, world size) is one simulated run on 16 cube devices of
``topologies/default.yaml`` in which every rank calls each op the algorithm
serves through ``kernbench.torch.distributed`` with ``algorithm=`` set, on
float32 and int32 data with ragged chunk sizes where the op allows them; the
test compares what the ranks hold with NumPy.  The same run checks that the
messages each rank sends and receives go only to the peers the algorithm's
neighbour table installs (and, for ops not rooted at a chosen rank, to
exactly those).  Other tests: simulated time is the same in functional and
timing-only mode, refusals of rank counts an algorithm does not handle, and
the cost models' shape.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench
from kernbench.ccl.algorithms import algorithms
from kernbench.ccl.comm import Comm
from kernbench.ccl.settings import ccl_settings
from kernbench.errors import DistributedError, RankError

TOPOLOGY = "default"
OVERRIDES = ["system.device_level=cube"]
SIZES = (2, 3, 4, 5, 7, 8, 16)
BLOCK = 3  # elements per rank block of the *_tensor ops
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
ALGORITHMS = algorithms()


def _cases() -> list[tuple[str, int]]:
    return [
        (name, p)
        for name, algorithm in sorted(ALGORITHMS.items())
        for p in SIZES
        if any(algorithm.serves(op, p) for op in algorithm.ops)
    ]


def _served(name: str, p: int) -> tuple[str, ...]:
    algorithm = ALGORITHMS[name]
    return tuple(op for op in algorithm.ops if algorithm.serves(op, p))


# -- data ------------------------------------------------------------------------------
def _sends(p: int, r: int, j: int) -> int:
    """Elements rank r sends rank j in the ragged all-to-all."""
    return (r + 2 * j) % 3 + 1


def _data(p: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed * 1000 + p)
    n = 3 * p + 1  # not a multiple of p: ragged chunks
    ranks = []
    for r in range(p):
        ranks.append(
            {
                "f": rng.standard_normal(n).astype(np.float32),
                "i": rng.integers(-50, 51, n).astype(np.int32),
                "ip": rng.choice(np.array([-1, 1, 2], dtype=np.int32), n),
                "rsf": rng.standard_normal(p * BLOCK).astype(np.float32),
                "rsi": rng.integers(-50, 51, p * BLOCK).astype(np.int32),
                "bf": rng.standard_normal(BLOCK).astype(np.float32),
                "bi": rng.integers(-50, 51, BLOCK).astype(np.int32),
                "a2a": rng.integers(-50, 51, sum(_sends(p, r, j) for j in range(p))).astype(
                    np.int32
                ),
                "a2af": rng.standard_normal(2 * p).astype(np.float32),
            }
        )
    return ranks


def _roots(p: int) -> dict[str, int]:
    return {"bc_f": p - 1, "bc_i": 1, "rd_f": 1, "rd_i": p - 1, "ga": 1, "sc": p - 1}


# -- what every rank runs --------------------------------------------------------------
def _rank(rank: int, size: int, name: str, ops: tuple[str, ...], data: list, read: bool) -> dict:
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist
    from kernbench.runtime import current_context

    dist.init_process_group()
    read = read and not current_context().timing_only
    R = dist.ReduceOp
    d = data[rank]
    roots = _roots(size)
    out: dict[str, np.ndarray | None] = {}

    def keep(key: str, tensor) -> None:
        out[key] = tensor.numpy() if read else None

    def new(values: np.ndarray):
        return torch.from_numpy(values.copy())

    def zeros(count: int, like: np.ndarray):
        return torch.zeros(count, dtype=torch.int32 if like.dtype == np.int32 else torch.float32)

    if "all_reduce" in ops:
        for key, values, op in (
            ("ar_sum_f", d["f"], R.SUM),
            ("ar_max_f", d["f"], R.MAX),
            ("ar_avg_f", d["f"], R.AVG),
            ("ar_sum_i", d["i"], R.SUM),
            ("ar_min_i", d["i"], R.MIN),
            ("ar_prod_i", d["ip"], R.PRODUCT),
            ("ar_bxor_i", d["i"], R.BXOR),
            ("ar_one_i", d["i"][:1], R.SUM),
        ):
            t = new(values)
            dist.all_reduce(t, op=op, algorithm=name)
            keep(key, t)
    if "reduce_scatter" in ops:
        for key, values, op in (
            ("rs_sum_f", d["rsf"], R.SUM),
            ("rs_max_i", d["rsi"], R.MAX),
            ("rs_avg_f", d["rsf"], R.AVG),
        ):
            t = zeros(BLOCK, values)
            dist.reduce_scatter_tensor(t, new(values), op=op, algorithm=name)
            keep(key, t)
        t = zeros(BLOCK, d["rsi"])
        parts = [new(d["rsi"][j * BLOCK : (j + 1) * BLOCK]) for j in range(size)]
        dist.reduce_scatter(t, parts, op=R.SUM, algorithm=name)
        keep("rs_list_i", t)
    if "all_gather" in ops:
        for key, values in (("ag_f", d["bf"]), ("ag_i", d["bi"])):
            t = zeros(BLOCK * size, values)
            dist.all_gather_into_tensor(t, new(values), algorithm=name)
            keep(key, t)
        parts = [zeros(BLOCK, d["bf"]) for _ in range(size)]
        dist.all_gather(parts, new(d["bf"]), algorithm=name)
        for j, part in enumerate(parts):
            keep(f"ag_list_f{j}", part)
    if "broadcast" in ops:
        for key, values in (("bc_f", d["f"]), ("bc_i", d["i"])):
            t = new(values)
            dist.broadcast(t, src=roots[key], algorithm=name)
            keep(key, t)
    if "reduce" in ops:
        for key, values, op in (("rd_f", d["f"], R.SUM), ("rd_i", d["i"], R.MAX)):
            t = new(values)
            dist.reduce(t, dst=roots[key], op=op, algorithm=name)
            keep(key, t)
    if "gather" in ops:
        parts = [zeros(BLOCK, d["bi"]) for _ in range(size)] if rank == roots["ga"] else None
        dist.gather(new(d["bi"]), parts, dst=roots["ga"], algorithm=name)
        for j, part in enumerate(parts or ()):
            keep(f"ga{j}", part)
    if "scatter" in ops:
        t = zeros(BLOCK, d["bf"])
        parts = None
        if rank == roots["sc"]:
            parts = [new(d["rsf"][j * BLOCK : (j + 1) * BLOCK]) for j in range(size)]
        dist.scatter(t, parts, src=roots["sc"], algorithm=name)
        keep("sc", t)
    if "all_to_all" in ops:
        sends = [_sends(size, rank, j) for j in range(size)]
        recvs = [_sends(size, j, rank) for j in range(size)]
        t = zeros(sum(recvs), d["a2a"])
        dist.all_to_all_single(t, new(d["a2a"]), recvs, sends, algorithm=name)
        keep("a2a", t)
        t = zeros(2 * size, d["a2af"])
        dist.all_to_all_single(t, new(d["a2af"]), algorithm=name)
        keep("a2a_even", t)
    if "barrier" in ops:
        dist.barrier(algorithm=name)
        out["barrier"] = np.array([1], dtype=np.int32)
    return out


# -- what NumPy says -------------------------------------------------------------------
def _expected(p: int, data: list, ops: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
    def stack(key: str) -> np.ndarray:
        return np.stack([d[key] for d in data])

    roots = _roots(p)
    every: dict[str, np.ndarray] = {}
    per_rank: list[dict[str, np.ndarray]] = [{} for _ in range(p)]
    if "all_reduce" in ops:
        every.update(
            {
                "ar_sum_f": stack("f").sum(0, dtype=np.float64),
                "ar_max_f": stack("f").max(0),
                "ar_avg_f": stack("f").sum(0, dtype=np.float64) / p,
                "ar_sum_i": stack("i").sum(0),
                "ar_min_i": stack("i").min(0),
                "ar_prod_i": stack("ip").prod(0),
                "ar_bxor_i": np.bitwise_xor.reduce(stack("i"), axis=0),
                "ar_one_i": stack("i").sum(0)[:1],
            }
        )
    if "reduce_scatter" in ops:
        sums_f = stack("rsf").sum(0, dtype=np.float64)
        maxes = stack("rsi").max(0)
        sums_i = stack("rsi").sum(0)
        for r in range(p):
            block = slice(r * BLOCK, (r + 1) * BLOCK)
            per_rank[r].update(
                {
                    "rs_sum_f": sums_f[block],
                    "rs_max_i": maxes[block],
                    "rs_avg_f": sums_f[block] / p,
                    "rs_list_i": sums_i[block],
                }
            )
    if "all_gather" in ops:
        every["ag_f"] = stack("bf").reshape(-1)
        every["ag_i"] = stack("bi").reshape(-1)
        every.update({f"ag_list_f{j}": data[j]["bf"] for j in range(p)})
    if "broadcast" in ops:
        every["bc_f"] = data[roots["bc_f"]]["f"]
        every["bc_i"] = data[roots["bc_i"]]["i"]
    if "reduce" in ops:
        per_rank[roots["rd_f"]]["rd_f"] = stack("f").sum(0, dtype=np.float64)
        per_rank[roots["rd_i"]]["rd_i"] = stack("i").max(0)
    if "gather" in ops:
        per_rank[roots["ga"]].update({f"ga{j}": data[j]["bi"] for j in range(p)})
    if "scatter" in ops:
        source = data[roots["sc"]]["rsf"]
        for r in range(p):
            per_rank[r]["sc"] = source[r * BLOCK : (r + 1) * BLOCK]
    if "all_to_all" in ops:
        for r in range(p):
            pieces = []
            for j in range(p):
                start = sum(_sends(p, j, x) for x in range(r))
                pieces.append(data[j]["a2a"][start : start + _sends(p, j, r)])
            per_rank[r]["a2a"] = np.concatenate(pieces)
            per_rank[r]["a2a_even"] = np.concatenate(
                [data[j]["a2af"][2 * r : 2 * r + 2] for j in range(p)]
            )
    if "barrier" in ops:
        every["barrier"] = np.array([1], dtype=np.int32)
    for r in range(p):
        per_rank[r].update(every)
    return per_rank


def _op_of(key) -> str:
    """The collective a communicator key belongs to (sub-communicators nest keys)."""
    while isinstance(key, tuple) and not isinstance(key[0], str):
        key = key[0]
    return key[0]


def _record(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """(op, pe, peer pe) for every message a rank posts or takes."""
    seen: list[tuple[str, str, str]] = []
    post_send, recv = Comm.post_send, Comm.recv

    def posting(self, peer, region, nbytes=None):
        seen.append((_op_of(self.key), self.pe, self.pes[peer]))
        return post_send(self, peer, region, nbytes)

    def receiving(self, peer):
        seen.append((_op_of(self.key), self.pe, self.pes[peer]))
        return recv(self, peer)

    monkeypatch.setattr(Comm, "post_send", posting)
    monkeypatch.setattr(Comm, "recv", receiving)
    return seen


# -- the tests -------------------------------------------------------------------------
def _verify(
    result,
    seen: list,
    name: str,
    config: str,
    p: int,
    ops: tuple[str, ...],
    data: list,
    peers: bool = True,
) -> None:
    """Values against NumPy; messages against the installed neighbour tables (``peers``)."""
    expected = _expected(p, data, ops)
    for r in range(p):
        got = result.returns[r]
        assert set(got) == set(expected[r]) | {k for k in got if k.startswith("rd_")}, r
        for key, want in expected[r].items():
            value = got[key]
            assert value.shape == want.shape, (key, r)
            message = f"{config} p={p} rank {r} {key}"
            if value.dtype.kind == "f":
                np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5, err_msg=message)
            else:
                assert value.dtype == np.int32, (key, value.dtype)
                np.testing.assert_array_equal(value, want, err_msg=message)
    if "all_reduce" in ops:  # every rank ends with the very same bits
        for key in ("ar_sum_f", "ar_avg_f"):
            for r in range(1, p):
                assert result.returns[r][key].tobytes() == result.returns[0][key].tobytes(), key

    if not peers:
        return
    # Messages go only to installed neighbours; exactly those unless the op is rooted.
    algorithm = ALGORITHMS[name]
    plans = ccl_settings(result.context).plans
    for (used_config, op, pes), table in plans.items():
        assert used_config == config
        for pe in pes:
            used = {peer for o, me, peer in seen if o == op and me == pe}
            installed = set(table[pe])
            assert used <= installed, (op, pe, sorted(used - installed))
            if algorithm.peers is not None and op not in ROOTED:
                assert used == installed, (op, pe, sorted(installed - used))
    assert {op for _, op, _ in plans} == {o for o, _, _ in seen}


@pytest.mark.parametrize(("name", "p"), _cases(), ids=[f"{n}-{p}" for n, p in _cases()])
def test_algorithm_matches_numpy(name: str, p: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ops = _served(name, p)
    data = _data(p)
    seen = _record(monkeypatch)
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGY,
        overrides=OVERRIDES,
        world_size=p,
        args=(name, ops, data, True),
        rank_args=True,
    )
    _verify(result, seen, name, name, p, ops, data)


FAST_SIZES = (3, 8)


@pytest.mark.parametrize(
    ("name", "p"),
    [(n, p) for n, p in _cases() if p in FAST_SIZES],
    ids=[f"{n}-{p}" for n, p in _cases() if p in FAST_SIZES],
)
def test_algorithm_matches_numpy_on_the_fast_backend(name: str, p: int) -> None:
    """The fast backend computes the values from the same programs (ADR 0015)."""
    ops = _served(name, p)
    data = _data(p)
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGY,
        overrides=[*OVERRIDES, "simulation.backend=fast"],
        world_size=p,
        args=(name, ops, data, True),
        rank_args=True,
    )
    _verify(result, [], name, name, p, ops, data, peers=False)


PIPELINED = ("ring", "bidirectional_ring", "binary_tree", "double_binary_tree")


@pytest.mark.parametrize("p", (5, 8))
@pytest.mark.parametrize("name", PIPELINED)
def test_pipelined_in_pieces(name: str, p: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``chunks`` > 1 (and messages landing in cube SRAM) the values stay right."""
    catalogue = [
        f"ccl.configs.piped.module={name}",
        "ccl.configs.piped.chunks=3",
        "ccl.configs.piped.buffer=sram",
    ]
    ops = _served(name, p)
    data = _data(p, seed=2)
    seen = _record(monkeypatch)
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGY,
        overrides=[*OVERRIDES, *catalogue],
        world_size=p,
        args=("piped", ops, data, True),
        rank_args=True,
    )
    _verify(result, seen, name, "piped", p, ops, data)


@pytest.mark.parametrize("p", (3, 5, 7, 16))
def test_bruck_splits_wrapping_steps(p: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``pack_bytes=0`` a step's blocks that wrap go as two messages, not packed."""
    catalogue = ["ccl.configs.split.module=bruck", "ccl.configs.split.params.pack_bytes=0"]
    data = _data(p, seed=3)
    seen = _record(monkeypatch)
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGY,
        overrides=[*OVERRIDES, *catalogue],
        world_size=p,
        args=("split", ("all_gather",), data, True),
        rank_args=True,
    )
    _verify(result, seen, "bruck", "split", p, ("all_gather",), data)
    messages, distance = 0, 1
    while distance < p:
        count = min(distance, p - distance)
        messages += sum(2 if r + count > p else 1 for r in range(p))
        distance <<= 1
    assert result.context.machine.ipcq_messages == 3 * messages  # three all-gathers


def _timing_size(name: str) -> int:
    algorithm = ALGORITHMS[name]
    return 6 if all(algorithm.serves(op, 6) for op in algorithm.ops) else 8


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_same_time_functional_and_timing_only(name: str) -> None:
    p = _timing_size(name)
    ops = _served(name, p)
    data = _data(p, seed=1)
    times = []
    for timing_only in (False, True):
        result = kernbench.simulate(
            _rank,
            topology=TOPOLOGY,
            overrides=OVERRIDES,
            world_size=p,
            timing_only=timing_only,
            args=(name, ops, data, False),
            rank_args=True,
        )
        rows = [
            (row.src, row.start_ps, row.end_ps, row.tag)
            for row in result.trace
            if row.kind == "collective"
        ]
        assert len(rows) >= p * len(ops)
        times.append((result.elapsed_ps, result.per_rank_ps, rows))
    assert times[0] == times[1]


def _refusals() -> list[tuple[str, str, int]]:
    cases = []
    for name, algorithm in sorted(ALGORITHMS.items()):
        for op in algorithm.ops:
            refused = [p for p in SIZES if not algorithm.serves(op, p)]
            if refused:
                cases.append((name, op, refused[0]))
    return cases


@pytest.mark.parametrize(
    ("name", "op", "p"), _refusals(), ids=[f"{n}-{o}-{p}" for n, o, p in _refusals()]
)
def test_unsupported_size_is_refused(name: str, op: str, p: int) -> None:
    reason = ALGORITHMS[name].requires(op, p)
    assert reason
    with pytest.raises(RankError) as info:  # the rank's own error is kept as ``original``
        kernbench.simulate(
            _rank,
            topology=TOPOLOGY,
            overrides=OVERRIDES,
            world_size=p,
            args=(name, (op,), _data(p), False),
            rank_args=True,
        )
    error = info.value.original
    assert isinstance(error, DistributedError)
    assert f"algorithm {name!r} cannot run {op} on {p} ranks: {reason}" in str(error)


def test_power_of_two_requirements() -> None:
    """The algorithms that need a power-of-two rank count say so for 6 ranks, not for 8."""
    need = {("recursive_doubling", "all_gather"), ("rabenseifner", "reduce_scatter")}
    for name, op in need:
        algorithm = ALGORITHMS[name]
        assert "power-of-two" in algorithm.requires(op, 6)
        assert algorithm.serves(op, 8)
    for name in ("bidirectional_ring", "binary_tree", "double_binary_tree", "bruck"):
        algorithm = ALGORITHMS[name]
        assert all(algorithm.serves(op, p) for op in algorithm.ops for p in SIZES)
    assert ALGORITHMS["recursive_doubling"].serves("all_reduce", 6)
    assert ALGORITHMS["rabenseifner"].serves("all_reduce", 6)


NEW = (
    "bidirectional_ring",
    "binary_tree",
    "double_binary_tree",
    "recursive_doubling",
    "rabenseifner",
    "bruck",
)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_costs_grow_with_size(name: str) -> None:
    """Costs are positive and grow with the bytes moved; the new algorithms cost every op."""
    algorithm = ALGORITHMS[name]
    if name in NEW:
        assert set(algorithm.costs) == set(algorithm.ops)
    for op, cost in algorithm.costs.items():
        for p in SIZES:
            if not algorithm.serves(op, p):
                continue
            small, large = cost(p, 1e3, 1e-6, 1e-9, 1e-10), cost(p, 1e6, 1e-6, 1e-9, 1e-10)
            assert math.isfinite(small) and small > 0, (op, p)
            assert large >= small, (op, p)


def test_reference_costs() -> None:
    """The closed forms of reference/collective-costs.md, where they apply."""
    a, b, g, n = 1e-6, 1e-9, 1e-10, 1e6
    cost = {name: ALGORITHMS[name].costs for name in NEW}
    for p in (2, 4, 8, 16):
        s = math.log2(p)
        f = (p - 1) / p
        assert cost["recursive_doubling"]["all_reduce"](p, n, a, b, g) == pytest.approx(
            s * a + n * s * b + n * s * g
        )
        assert cost["recursive_doubling"]["all_gather"](p, n, a, b, g) == pytest.approx(
            s * a + n * f * b
        )
        assert cost["rabenseifner"]["all_reduce"](p, n, a, b, g) == pytest.approx(
            2 * s * a + 2 * n * f * b + n * f * g
        )
        assert cost["rabenseifner"]["reduce_scatter"](p, n, a, b, g) == pytest.approx(
            s * a + n * f * (b + g)
        )
    for p in SIZES:
        f = (p - 1) / p
        small = 1e3  # every step's message is packed
        assert cost["bruck"]["all_gather"](p, small, a, b, g) == pytest.approx(
            math.ceil(math.log2(p)) * a + small * f * b
        )
        # Large steps that wrap go as two messages: one α more for each after the first.
        split = sum(
            1 for k in range(1, math.ceil(math.log2(p))) if min(2**k, p - 2**k) * n / p >= 16 * 1024
        )
        assert cost["bruck"]["all_gather"](p, n, a, b, g) == pytest.approx(
            (math.ceil(math.log2(p)) + split) * a + n * f * b
        )
        assert cost["bidirectional_ring"]["all_reduce"](p, n, a, b, g) == pytest.approx(
            2 * (p - 1) * a + n * f * b + n * f * g
        )
        levels = math.floor(math.log2(p))
        assert cost["binary_tree"]["broadcast"](p, n, a, b, g) == pytest.approx(
            levels * (a + n * b)
        )
    # Folding a non-power-of-two group costs two more steps.
    assert cost["recursive_doubling"]["all_reduce"](6, n, a, b, g) == pytest.approx(
        4 * a + 4 * n * b + 3 * n * g
    )


@pytest.mark.parametrize("name", NEW)
def test_step_targets_are_neighbours(name: str) -> None:
    """What the tuner counts as one step's flows are installed neighbours."""
    algorithm = ALGORITHMS[name]
    for op in algorithm.ops:
        for p in (*SIZES, 6, 12):
            if algorithm.serves(op, p):
                for rank in range(p):
                    targets = set(algorithm.step_targets(op, p, rank))
                    assert targets and targets <= algorithm.neighbours(op, p, rank), (op, p)


# -- known framework problems ------------------------------------------------------------
def test_sub_communicator_channels_are_closed() -> None:
    result = kernbench.simulate(
        _rank,
        topology=TOPOLOGY,
        overrides=OVERRIDES,
        world_size=4,
        args=("bidirectional_ring", ("all_reduce",), _data(4), False),
        rank_args=True,
        timing_only=True,
    )
    assert result.context.machine.ipcq.open_channels == 0
