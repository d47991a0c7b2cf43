"""nccl-tests-style collective benchmarks: time a collective over a range of sizes.

:func:`collective_perf` runs inside every rank of a ``kernbench run`` (after
``dist.init_process_group()``) and does what nccl-tests' ``TimeTest`` does:
``warmup`` untimed calls at every size from the smallest to the largest
(doubling), then for every size two timed tests, *out-of-place* then
*in-place*.  Each test makes one untimed call (which also lines the ranks up),
times ``iters`` calls by the simulated clock, and then, ``check`` times, fills
the buffers with rank-dependent values, makes one more call and counts the
elements that differ from NumPy's answer (``#wrong``; not in timing-only
mode, where tensors hold no values).  Timed calls run on zeros: the simulated
time does not depend on values, and zeros stay zeros under every reduce op.

Out-of-place and in-place, per op (torch.distributed's forms):

* all_reduce, broadcast, reduce: torch has only the in-place call; in-place
  is that call on the receive buffer.  Out-of-place runs the same call on the
  receive buffer, and before the checked call copies the input into it
  (``recv.copy_(send)``, a device copy) so the answer can be checked: NCCL's
  out-of-place call reads the send buffer in its first step and moves the
  same bytes as in place, with no copy, so the warm-up and timed calls take
  no copy either (nccl-tests' two columns agree on a real machine, and here);
* all_gather, reduce_scatter: out-of-place is ``all_gather_into_tensor`` /
  ``reduce_scatter_tensor`` on separate buffers; in-place is the list form
  whose own block is the input (``all_gather(blocks, blocks[rank])``,
  ``reduce_scatter(blocks[rank], blocks)``), so a rank holds one tensor per rank;
* all_to_all: ``all_to_all_single(recv, send)``, and ``(buf, buf)`` in place.

Every rank measures its own time; the ranks' times and ``#wrong`` counts are
combined on the host, outside simulated time, as nccl-tests combines its
threads' and processes' (``average``: 0 rank 0, 1 mean, 2 min, 3 max;
``#wrong`` summed over ranks).

Metrics follow nccl-tests (``doc/PERFORMANCE.md``): ``size_B`` is the largest
buffer of the call (the total gathered, scattered or exchanged buffer for
all_gather, reduce_scatter and all_to_all), ``count`` the elements of the
call's count argument (per rank for those three), ``algbw = size_B / time``
(GB = 10^9 B) and ``busbw = algbw x`` :func:`bus_factor`.  Sizes are rounded
down to whole elements, and for the split ops each rank's count down to whole
16-byte lines, as nccl-tests rounds them, with at least one element per rank
(nccl-tests would run zero elements).
"""

from __future__ import annotations

import argparse
import weakref
from collections.abc import Callable, Sequence
from functools import reduce as fold
from typing import Any

import numpy as np

import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.bench.perf_options import (
    NCCL_OPS,
    NCCL_TYPES,
    BenchArgumentParser,
    PerfOptions,
    add_perf_arguments,
    options_from_args,
    parse_bytes,
    sizes_from_args,
)
from kernbench.bench.perf_table import LISTED_DEVICES, format_footer, format_header, format_row
from kernbench.ccl.ops import combine, finish_average
from kernbench.distributed.world import World, active_world
from kernbench.errors import ConfigError
from kernbench.runtime.current import current_context
from kernbench.runtime.dtypes import DTYPES
from kernbench.topology import names

__all__ = [
    "BenchArgumentParser",
    "OPS",
    "REDOPS",
    "add_perf_arguments",
    "bus_factor",
    "collective_perf",
    "options_from_args",
    "parse_bytes",
    "perf_from_args",
    "sizes_from_args",
]

# op -> (bus bandwidth factor as a function of n, whether size_B is the total
# buffer split over the ranks, whether the op reduces, whether it has a root)
_OPS: dict[str, tuple[Callable[[int], float], bool, bool, bool]] = {
    "all_reduce": (lambda n: 2 * (n - 1) / n, False, True, False),
    "all_gather": (lambda n: (n - 1) / n, True, False, False),
    "reduce_scatter": (lambda n: (n - 1) / n, True, True, False),
    "all_to_all": (lambda n: (n - 1) / n, True, False, False),
    "broadcast": (lambda n: 1.0, False, False, True),
    "reduce": (lambda n: 1.0, False, True, True),
}
OPS = tuple(_OPS)

# Reduce op names (nccl-tests', torch's, the runtime's) -> the runtime's.
REDOPS = {
    **{name: op for name, op in NCCL_OPS.items() if op is not None},
    "product": "product",
}

# Relative error per reduction step of each floating dtype (its machine epsilon).
_EPSILON = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
_NCCL_NAME = {dtype: name for name, dtype in NCCL_TYPES.items() if dtype is not None}

# The answer of the call being checked, shared by the ranks (all hold the same values).
_EXPECTED: dict[tuple, np.ndarray] = {}

# Per run (World): what every rank measured, for rank 0 to combine.
_MEASURED: weakref.WeakKeyDictionary[World, dict[Any, dict[int, Any]]] = weakref.WeakKeyDictionary()


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' busbw / algbw ratio for ``op`` on ``world_size`` ranks (1 for the rooted
    ops at any count, as nccl-tests has it; the others' (n-1) factors give 0 for one rank)."""
    _check_op(op)
    if world_size < 1:
        raise ConfigError(f"world_size must be at least 1, got {world_size}")
    return _OPS[op][0](world_size)


def _check_op(op: str) -> None:
    if op not in _OPS:
        raise ConfigError(f"unknown collective {op!r}; valid: {', '.join(OPS)}")


def _fill(count: int, rank: int, redop: str, start: int = 0) -> np.ndarray:
    """Rank ``rank``'s values ``start:start+count``: small integers, exact in every dtype."""
    i = np.arange(start, start + count, dtype=np.int64)
    if redop == "product":
        # Factors of 1 and 2 only, so products stay small: 2 on about a third of the ranks.
        return 1 + ((i + rank) % 3 == 0).astype(np.int64)
    return i % 7 + rank


def _as_input(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values in a NumPy dtype ``torch.tensor(..., dtype=dtype)`` takes without surprise."""
    return values.astype(np.float32 if dtype == "bfloat16" else DTYPES[dtype].storage)


def _reduced(arrays: list[np.ndarray], redop: str, dtype: str, n: int) -> np.ndarray:
    """The reduction of ``arrays`` as the runtime defines it (integers wrap, AVG truncates)."""
    spec = DTYPES[dtype]
    work = [a.astype(np.float64 if spec.is_floating_point else spec.storage) for a in arrays]
    total = fold(lambda a, b: combine(redop, a, b), work)
    return finish_average(total, n) if redop == "avg" else total


def count_wrong(got: np.ndarray, expected: np.ndarray, dtype: str, n: int) -> int:
    """Elements of ``got`` that differ from ``expected`` (floats: beyond n rounding steps)."""
    if not DTYPES[dtype].is_floating_point:
        want = expected.astype(DTYPES[dtype].storage).astype(np.int64)
        return int(np.count_nonzero(got.astype(np.int64) != want))
    rtol = max(1, n) * _EPSILON.get(dtype, 2.0**-23)
    close = np.isclose(got.astype(np.float64), expected, rtol=rtol, atol=0.0)
    return int(close.size - np.count_nonzero(close))


class _Case:
    """The buffers, the calls and the expected values of one op at one size on one rank."""

    def __init__(self, op: str, count: int, dtype: str, redop: str, algorithm: str | None,
                 root: int) -> None:  # fmt: skip
        self.op, self.count, self.dtype, self.redop = op, count, dtype, redop
        self.algorithm, self.root = algorithm, root
        self.rank, self.n = dist.get_rank(), dist.get_world_size()
        self.split = _OPS[op][1]
        self.total = count * self.n if self.split else count
        tdtype = getattr(torch, dtype)
        in_count = count if op == "all_gather" else self.total
        out_count = count if op == "reduce_scatter" else self.total
        self.send = torch.zeros(in_count, dtype=tdtype)
        self.recv = torch.zeros(out_count, dtype=tdtype)
        # The in-place list forms: one tensor per rank, this rank's block its own.
        self.blocks = (
            [torch.zeros(count, dtype=tdtype) for _ in range(self.n)]
            if op in ("all_gather", "reduce_scatter")
            else []
        )

    def call(self, in_place: bool, checked: bool = False) -> None:
        """One call of the op; ``checked``: the call whose answer is checked (out of
        place, the input is copied in first: see the module's text)."""
        algo = self.algorithm
        redop = getattr(dist.ReduceOp, self.redop.upper()) if _OPS[self.op][2] else None
        op, send, recv, blocks = self.op, self.send, self.recv, self.blocks
        if op in ("all_reduce", "broadcast", "reduce") and not in_place and checked:
            recv.copy_(send)  # torch's form of these ops is in place only
        if op == "all_reduce":
            dist.all_reduce(recv, op=redop, algorithm=algo)
        elif op == "reduce":
            dist.reduce(recv, dst=self.root, op=redop, algorithm=algo)
        elif op == "broadcast":
            dist.broadcast(recv, src=self.root, algorithm=algo)
        elif op == "all_gather" and in_place:
            dist.all_gather(blocks, blocks[self.rank], algorithm=algo)
        elif op == "all_gather":
            dist.all_gather_into_tensor(recv, send, algorithm=algo)
        elif op == "reduce_scatter" and in_place:
            dist.reduce_scatter(blocks[self.rank], blocks, op=redop, algorithm=algo)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(recv, send, op=redop, algorithm=algo)
        elif in_place:
            dist.all_to_all_single(recv, recv, algorithm=algo)
        else:
            dist.all_to_all_single(recv, send, algorithm=algo)

    def _set(self, tensor: Any, values: np.ndarray) -> None:
        tensor.copy_(_as_input(values, self.dtype))

    def fill(self, in_place: bool) -> None:
        """This rank's input values where the call reads them (the output zeroed first)."""
        mine = _fill(self.count if self.op == "all_gather" else self.total, self.rank, self.redop)
        if self.blocks and in_place:
            if self.op == "all_gather":
                self._set(self.blocks[self.rank], mine)
            else:
                for j, block in enumerate(self.blocks):
                    self._set(block, mine[j * self.count : (j + 1) * self.count])
            return
        if in_place:
            self._set(self.recv, mine)
            return
        self._set(self.recv, np.zeros(self.recv.numel(), dtype=np.int64))
        self._set(self.send, mine)

    def output(self, in_place: bool) -> np.ndarray:
        if self.op == "all_gather" and in_place:
            return np.concatenate([b.numpy() for b in self.blocks])
        if self.op == "reduce_scatter" and in_place:
            return self.blocks[self.rank].numpy()
        return self.recv.numpy()

    def expected(self) -> np.ndarray | None:
        """What this rank's output holds after one call on fresh values (None: not checked)."""
        n, me, b = self.n, self.rank, self.count
        if self.op == "broadcast":
            return _fill(self.count, self.root, self.redop)
        if self.op == "all_to_all":
            return np.concatenate([_fill(b, r, self.redop, me * b) for r in range(n)])
        if self.op == "reduce" and me != self.root:
            return None
        total = self._shared_expected()
        return total[me * b : (me + 1) * b] if self.op == "reduce_scatter" else total

    def _shared_expected(self) -> np.ndarray:
        """The answer every rank checks against (or a slice of), computed once per call."""
        key = (self.op, self.total, self.count, self.dtype, self.redop, self.n)
        if key not in _EXPECTED:
            _EXPECTED.clear()  # one at a time: the previous size is done with
            n, b = self.n, self.count
            if self.op == "all_gather":
                _EXPECTED[key] = np.concatenate([_fill(b, r, self.redop) for r in range(n)])
            else:
                arrays = [_fill(self.total, r, self.redop) for r in range(n)]
                _EXPECTED[key] = _reduced(arrays, self.redop, self.dtype, n)
        return _EXPECTED[key]

    def wrong(self, in_place: bool) -> int:
        expected = self.expected()
        if expected is None:
            return 0
        return count_wrong(self.output(in_place), expected, self.dtype, self.n)

    def free(self) -> None:
        for tensor in (self.send, self.recv, *self.blocks):
            tensor.free()


def _count_for(op: str, size: int, itemsize: int, n: int) -> int:
    """The call's count argument (per rank for the split ops), as nccl-tests' setupArgs:
    a split op's count per rank is rounded down to whole 16-byte lines."""
    count = size // itemsize
    if _OPS[op][1]:
        count = (count // n) & ~(max(1, 16 // itemsize) - 1)
    return max(1, count)


def _timed(case: _Case, in_place: bool, iters: int, blocking: int) -> tuple[int, str]:
    """This rank's simulated time for ``iters`` calls, and the configuration that ran."""
    ctx = current_context()
    world = active_world()
    case.call(in_place)  # untimed: nccl-tests' first call; it lines the ranks up
    start = ctx.now
    excluded = 0
    used = ""
    for _ in range(iters):
        case.call(in_place)
        used = used or world.collectives[-1].config_name
        if blocking in (1, 3):
            before = ctx.now
            dist.barrier()
            if blocking == 3:  # nccl-tests -z 3: the time excludes the barrier
                excluded += ctx.now - before
    return ctx.now - start - excluded, used


def _combined(times: Sequence[int], average: int) -> float:
    if average == 0:
        return float(times[0])
    if average == 2:
        return float(min(times))
    if average == 3:
        return float(max(times))
    return sum(times) / len(times)


def collective_perf(
    op: str,
    sizes_bytes: Sequence[int],
    *,
    algorithm: str | None = None,
    dtype: str = "float32",
    redop: str = "sum",
    iters: int = 20,
    warmup: int = 5,
    check: int | bool = 1,
    root: int = 0,
    blocking: int = 0,
    average: int = 1,
    run_cycles: int = 1,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]] | None:
    """Time ``op`` at every size on this rank; rank 0 returns the rows, others None.

    ``algorithm`` is a configuration of ``ccl/ccl.yaml``, an algorithm name or
    ``"auto"`` (None: the catalogue's default for ``op``).  ``dtype`` is a
    kernbench dtype or an nccl-tests type name; ``redop`` one of
    :data:`REDOPS` (ignored by ops that do not reduce); ``root`` is the source
    of broadcast and the destination of reduce.  ``check`` is how many checked
    calls each test makes (0 or False: none).  Rank 0 passes each row to
    ``on_row`` as soon as every rank has measured it.  Call it on every rank,
    after ``dist.init_process_group()``.
    """
    _check_op(op)
    dtype = NCCL_TYPES.get(dtype) or dtype
    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
    if redop not in REDOPS:
        raise ConfigError(f"unknown reduce op {redop!r}; valid: {', '.join(REDOPS)}")
    if iters < 1 or warmup < 0:
        raise ConfigError(f"iters must be >= 1 and warmup >= 0 (got {iters} and {warmup})")
    ctx = current_context()
    n, rank = dist.get_world_size(), dist.get_rank()
    if not 0 <= root < n:
        raise ConfigError(f"root {root} is not a rank of this run (0..{n - 1})")
    _, _, reduces, rooted = _OPS[op]
    runtime_redop = REDOPS[redop]
    itemsize = DTYPES[dtype].itemsize
    checks = int(check) if not ctx.timing_only else 0
    measured = _MEASURED.setdefault(active_world(), {})
    # Every rank calls collective_perf in the same order: its count names this call.
    seq = measured[("calls", rank)] = measured.get(("calls", rank), 0) + 1
    run_key = (op, dtype, redop, root, seq)

    def case_at(size: int) -> _Case:
        return _Case(op, _count_for(op, size, itemsize, n), dtype, runtime_redop, algorithm, root)

    def row_of(cycle: int, size: int, count: int, total: int, used: str) -> dict[str, Any]:
        row: dict[str, Any] = {
            "op": op,
            "size_B": total * itemsize,
            "count": count,
            "type": _NCCL_NAME.get(dtype, dtype),
            "redop": redop if reduces else "none",
            "root": root if rooted else -1,
            "algorithm": used,
        }
        if run_cycles > 1:
            row["cycle"] = cycle
        wrongs = []
        for in_place, prefix in ((False, ""), (True, "in_place_")):
            per_rank = measured.pop((run_key, cycle, size, in_place))
            times = [per_rank[r][0] for r in range(n)]
            elapsed_ps = _combined(times, average) / iters
            algbw = total * itemsize / (elapsed_ps * 1e-12) / 1e9 if elapsed_ps else 0.0
            sums = [sum(per_rank[r][1][c] for r in range(n)) for c in range(checks)]
            wrong: int | str = next((s for s in sums if s), 0) if checks else "n/a"
            wrongs.append(wrong)
            row[prefix + "time_us"] = elapsed_ps / 1e6
            row[prefix + "algbw_GBps"] = algbw
            row[prefix + "busbw_GBps"] = algbw * bus_factor(op, n)
            row[prefix + "wrong"] = wrong
        row["checked"] = "n/a" if not checks else all(w == 0 for w in wrongs)
        row["world_size"] = n
        return row

    rows: list[dict[str, Any]] = []
    pending: list[tuple[int, int, int, int, str]] = []  # rank 0: sizes not yet combined

    def combine_ready() -> None:
        """Rank 0: rows whose every rank has recorded both tests, in order, as nccl-tests
        prints a line as soon as its size is done."""
        while pending and all(
            len(measured.get((run_key, pending[0][0], pending[0][1], in_place), ())) == n
            for in_place in (False, True)
        ):
            rows.append(row_of(*pending.pop(0)))
            if on_row is not None:
                on_row(rows[-1])

    size = min(sizes_bytes) if sizes_bytes else 0
    while warmup and sizes_bytes and size <= max(sizes_bytes):
        case = case_at(size)
        for _ in range(warmup):
            case.call(in_place=False)
        case.free()
        size *= 2
    for cycle in range(run_cycles):
        for size in sizes_bytes:
            case = case_at(int(size))
            for in_place in (False, True):
                elapsed, used = _timed(case, in_place, iters, blocking)
                if rank == 0:
                    combine_ready()  # its first call lined up every rank after its last record
                wrong = []
                for _ in range(checks):
                    case.fill(in_place)
                    case.call(in_place, checked=True)
                    wrong.append(case.wrong(in_place))
                measured.setdefault((run_key, cycle, size, in_place), {})[rank] = (elapsed, wrong)
                if rank == 0 and not in_place:
                    pending.append((cycle, size, case.count, case.total, used))
            case.free()
    dist.barrier()  # every rank has recorded what it measured
    if rank != 0:
        return None
    combine_ready()
    return rows


def _device_lines(n: int) -> list[str]:
    """nccl-tests' ``#  Rank r Group 0 Pid p on host device d [bus] name``, one per rank.

    The host is the topology, the bus id the device's component name; the pid
    is 0, as every rank lives in the one simulating process (and output must
    not change from run to run).
    """
    ctx = current_context()
    level = ctx.topology.system.device_level
    lines = []
    for rank in range(min(n, LISTED_DEVICES)):
        sip, cube, pe = ctx.device_coords(rank)
        if level == "sip":
            component = names.sip(sip)
        elif level == "cube":
            component = names.cube(sip, cube or 0)
        else:
            component = names.pe(sip, cube or 0, pe or 0)
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {0:6d} on {ctx.topology.name:>10} device "
            f"{rank:2d} [{component}] KernBench {level}"
        )
    return lines


def perf_from_args(op: str, args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """Run :func:`collective_perf` for every type, op and root the flags ask for.

    Rank 0 prints nccl-tests' header, table and footer and returns the rows.
    """
    options: PerfOptions = options_from_args(args)
    n, rank = dist.get_world_size(), dist.get_rank()
    program = f"{op.replace('_', '')}_perf"
    ctx = current_context()
    if rank == 0:
        print(
            format_header(
                program,
                minbytes=options.minbytes,
                maxbytes=options.maxbytes,
                stepfactor=options.stepfactor,
                stepbytes=options.stepbytes,
                warmup=options.warmup,
                iters=options.iters,
                check=0 if ctx.timing_only else options.check,
                blocking=options.blocking,
                parallel_init=options.parallel_init,
                devices=_device_lines(n),
                ranks=n,
            )
        )
    rooted, reduces = _OPS[op][3], _OPS[op][2]
    roots = [r for r in options.roots if r is not None] or list(range(n))
    rows: list[dict[str, Any]] = []
    for nccl_type in options.types:
        for redop in options.redops if reduces else ("sum",):
            for root in roots if rooted else [0]:
                part = collective_perf(
                    op,
                    options.sizes,
                    algorithm=options.algorithm,
                    dtype=NCCL_TYPES[nccl_type] or nccl_type,
                    redop=redop,
                    iters=options.iters,
                    warmup=options.warmup,
                    check=options.check,
                    root=root,
                    blocking=options.blocking,
                    average=options.average,
                    run_cycles=options.run_cycles,
                    on_row=lambda row: print(format_row(row), flush=True),
                )
                rows += part or []
    if rank != 0:
        return None
    mode = "timing-only: values not checked" if ctx.timing_only else "functional"
    print(format_footer(program, rows))
    used = list(dict.fromkeys(row["algorithm"] for row in rows))
    print(f"# KernBench: {ctx.topology.name}, {n} ranks, {mode}; algorithm: {', '.join(used)}")
    return rows
