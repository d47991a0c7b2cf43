"""nccl-tests-style collective benchmarks: time a collective over a range of sizes.

:func:`collective_perf` runs inside every rank of a ``kernbench run`` (after
``dist.init_process_group()``).  For each size it creates zero-filled buffers,
makes ``warmup`` calls, waits on a barrier and times ``iters`` back-to-back
calls by the simulated clock (their average is the row's time).  Like
nccl-tests, it then fills the buffers with rank-dependent values, makes one
more call and checks every rank's values against NumPy (not in timing-only
mode, where tensors hold no values); the check and its fill are outside the
timed region, and the ranks agree on the verdict with a MIN all-reduce.  The
timed calls run on zeros because an in-place reduction repeated on its own
output can overflow; zeros stay zeros under every reduce op, and the
simulated time does not depend on values.  Rank 0 returns one row per size.

Metrics follow nccl-tests' definitions (its ``doc/PERFORMANCE.md``):

* ``size_B`` is the user buffer in bytes: the buffer reduced or broadcast for
  all_reduce, reduce and broadcast; the *total* (gathered, scattered or
  exchanged) buffer for all_gather, reduce_scatter and all_to_all.
  ``count`` is ``size_B`` in elements;
* ``algbw_GBps`` = ``size_B`` / time, with GB = 10^9 bytes;
* ``busbw_GBps`` = algbw x :func:`bus_factor`: 2(n-1)/n for all_reduce,
  (n-1)/n for all_gather, reduce_scatter and all_to_all, 1 for broadcast and
  reduce.  With one rank nothing crosses a link, so busbw is 0.

Sizes are rounded down to a whole number of elements, and for the ops that
split the buffer over the ranks to a multiple of the world size (at least one
element per rank).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from functools import reduce as fold
from typing import Any, NoReturn

import numpy as np

import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.ops import combine, finish_average
from kernbench.distributed.world import active_world
from kernbench.errors import ConfigError
from kernbench.runtime.current import current_context
from kernbench.runtime.dtypes import DTYPES
from kernbench.units import parse_size

__all__ = [
    "BenchArgumentParser",
    "OPS",
    "REDOPS",
    "add_perf_arguments",
    "bus_factor",
    "collective_perf",
    "format_table",
    "parse_bytes",
    "perf_from_args",
    "sizes_from_args",
]

# op -> (bus bandwidth factor as a function of n, whether size_B is the total
# buffer split over the ranks, whether the op reduces)
_OPS: dict[str, tuple[Callable[[int], float], bool, bool]] = {
    "all_reduce": (lambda n: 2 * (n - 1) / n, False, True),
    "all_gather": (lambda n: (n - 1) / n, True, False),
    "reduce_scatter": (lambda n: (n - 1) / n, True, True),
    "all_to_all": (lambda n: (n - 1) / n, True, False),
    "broadcast": (lambda n: 1.0, False, False),
    "reduce": (lambda n: 1.0, False, True),
}
OPS = tuple(_OPS)

# nccl-tests' names (and torch's) -> the runtime's reduce op
REDOPS = {
    "sum": "sum",
    "prod": "product",
    "product": "product",
    "min": "min",
    "max": "max",
    "avg": "avg",
}

# Relative error per reduction step of each floating dtype (its machine epsilon).
_EPSILON = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}

# nccl-tests' size suffixes: K, M, G are binary (KiB, MiB, GiB).
_NCCL_SIZE = re.compile(r"^\s*([0-9]+)\s*([kKmMgG])\s*$")
_NCCL_FACTOR = {"k": 2**10, "m": 2**20, "g": 2**30}


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' busbw / algbw ratio for ``op`` on ``world_size`` ranks (0 for one rank)."""
    _check_op(op)
    if world_size < 1:
        raise ConfigError(f"world_size must be at least 1, got {world_size}")
    if world_size == 1:
        return 0.0
    return _OPS[op][0](world_size)


def parse_bytes(value: str | int) -> int:
    """A size in bytes: an int, ``"8"``, ``"4KiB"``, ``"1MB"``, or nccl-tests' ``"4K"``, ``"1G"``.

    Units follow :func:`kernbench.units.parse_size` (KB = 10^3 B, KiB = 2^10 B);
    the bare suffixes K, M and G mean KiB, MiB and GiB, as in nccl-tests.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        match = _NCCL_SIZE.match(text)
        if match:
            return int(match.group(1)) * _NCCL_FACTOR[match.group(2).lower()]
    return parse_size(value)


def sizes_from_args(
    minbytes: str | int, maxbytes: str | int, stepfactor: int | str = 2
) -> list[int]:
    """``minbytes``, ``minbytes·f``, ``minbytes·f²`` … up to ``maxbytes`` (nccl-tests' -b -e -f)."""
    low, high = parse_bytes(minbytes), parse_bytes(maxbytes)
    try:
        factor = int(stepfactor)
    except ValueError:
        raise ConfigError(f"stepfactor must be an integer >= 2, got {stepfactor!r}") from None
    if low <= 0:
        raise ConfigError(f"minbytes must be positive, got {minbytes!r}")
    if high < low:
        raise ConfigError(f"maxbytes ({maxbytes!r}) must be at least minbytes ({minbytes!r})")
    if factor < 2:
        raise ConfigError(f"stepfactor must be an integer >= 2, got {stepfactor!r}")
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= factor
    return sizes


def _check_op(op: str) -> None:
    if op not in _OPS:
        raise ConfigError(f"unknown collective {op!r}; valid: {', '.join(OPS)}")


def _fill(count: int, rank: int, redop: str) -> np.ndarray:
    """Rank ``rank``'s values: small integers, exact in every dtype (int64 here)."""
    i = np.arange(count, dtype=np.int64)
    if redop == "product":
        # Factors of 1 and 2 only, so products stay small: 2 on about a third of the ranks.
        return 1 + ((i + rank) % 3 == 0).astype(np.int64)
    return i % 7 + rank


def _as_input(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values in a NumPy dtype ``torch.tensor(..., dtype=dtype)`` takes without surprise."""
    spec = DTYPES[dtype]
    return values.astype(np.float32 if dtype == "bfloat16" else spec.storage)


def _reduced(arrays: list[np.ndarray], redop: str, dtype: str, n: int) -> np.ndarray:
    """The reduction of ``arrays`` as the runtime defines it (integers wrap, AVG truncates)."""
    spec = DTYPES[dtype]
    work = [a.astype(np.float64 if spec.is_floating_point else spec.storage) for a in arrays]
    total = fold(lambda a, b: combine(redop, a, b), work)
    return finish_average(total, n) if redop == "avg" else total


def _matches(got: np.ndarray, expected: np.ndarray, dtype: str, n: int) -> bool:
    if not DTYPES[dtype].is_floating_point:
        return bool(np.array_equal(got.astype(np.int64), expected.astype(np.int64)))
    rtol = max(1, n) * _EPSILON.get(dtype, 2.0**-23)
    return bool(np.allclose(got.astype(np.float64), expected, rtol=rtol, atol=0.0))


class _Case:
    """The buffers, the call and the expected values of one op at one size on one rank."""

    def __init__(
        self, op: str, count: int, dtype: str, redop: str, algorithm: str | None, root: int
    ) -> None:
        self.op, self.count, self.dtype, self.redop = op, count, dtype, redop
        self.algorithm, self.root = algorithm, root
        self.rank, self.n = dist.get_rank(), dist.get_world_size()
        self.block = count // self.n
        tdtype = getattr(torch, dtype)
        in_count = self.block if op == "all_gather" else count
        out_count = self.block if op == "reduce_scatter" else count
        # Zeros: timed calls reduce their own output again (in place), and zeros stay
        # zeros under every reduce op, where other values could overflow.
        self.input = torch.zeros(in_count, dtype=tdtype)
        in_place = op in ("all_reduce", "broadcast", "reduce")
        self.output = self.input if in_place else torch.zeros(out_count, dtype=tdtype)

    def fill(self) -> None:
        values = _fill(self.input.numel(), self.rank, self.redop)
        self.input.copy_(_as_input(values, self.dtype))

    def call(self) -> None:
        algo = self.algorithm
        redop = getattr(dist.ReduceOp, self.redop.upper()) if _OPS[self.op][2] else None
        if self.op == "all_reduce":
            dist.all_reduce(self.input, op=redop, algorithm=algo)
        elif self.op == "reduce":
            dist.reduce(self.input, dst=self.root, op=redop, algorithm=algo)
        elif self.op == "broadcast":
            dist.broadcast(self.input, src=self.root, algorithm=algo)
        elif self.op == "all_gather":
            dist.all_gather_into_tensor(self.output, self.input, algorithm=algo)
        elif self.op == "reduce_scatter":
            dist.reduce_scatter_tensor(self.output, self.input, op=redop, algorithm=algo)
        else:
            dist.all_to_all_single(self.output, self.input, algorithm=algo)

    def expected(self) -> np.ndarray | None:
        """What this rank's output holds after one call on fresh values (None: not checked)."""
        n, me, b = self.n, self.rank, self.block
        if self.op == "all_gather":
            return np.concatenate([_fill(b, r, self.redop) for r in range(n)])
        if self.op == "broadcast":
            return _fill(self.count, self.root, self.redop)
        if self.op == "all_to_all":
            return np.concatenate(
                [_fill(self.count, r, self.redop)[me * b : (me + 1) * b] for r in range(n)]
            )
        if self.op == "reduce" and me != self.root:
            return None
        arrays = [_fill(self.count, r, self.redop) for r in range(n)]
        total = _reduced(arrays, self.redop, self.dtype, n)
        return total[me * b : (me + 1) * b] if self.op == "reduce_scatter" else total

    def check(self) -> bool:
        expected = self.expected()
        if expected is None:
            return True
        if not DTYPES[self.dtype].is_floating_point:
            expected = expected.astype(DTYPES[self.dtype].storage)
        return _matches(self.output.numpy(), expected, self.dtype, self.n)

    def free(self) -> None:
        self.input.free()
        if self.output is not self.input:
            self.output.free()


def _count_for(op: str, size: int, itemsize: int, n: int) -> int:
    count = size // itemsize
    if _OPS[op][1]:
        count = max(n, count - count % n)
    return max(1, count)


def collective_perf(
    op: str,
    sizes_bytes: Sequence[int],
    *,
    algorithm: str | None = None,
    dtype: str = "float32",
    redop: str = "sum",
    iters: int = 1,
    warmup: int = 1,
    check: bool = True,
    root: int = 0,
) -> list[dict[str, Any]] | None:
    """Time ``op`` at every size on this rank; rank 0 returns the rows, others None.

    ``algorithm`` is a configuration of ``ccl/ccl.yaml``, an algorithm name or
    ``"auto"`` (None: the catalogue's default for ``op``).  ``redop`` is one of
    :data:`REDOPS` (ignored by ops that do not reduce); ``root`` is the source of
    broadcast and the destination of reduce.  Call it on every rank, after
    ``dist.init_process_group()``.
    """
    _check_op(op)
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
    reduces = _OPS[op][2]
    runtime_redop = REDOPS[redop]
    itemsize = DTYPES[dtype].itemsize
    values = not ctx.timing_only
    rows = []
    for size in sizes_bytes:
        count = _count_for(op, int(size), itemsize, n)
        case = _Case(op, count, dtype, runtime_redop, algorithm, root)
        for _ in range(warmup):
            case.call()
        dist.barrier()
        start = ctx.now
        for _ in range(iters):
            case.call()
        elapsed_ps = (ctx.now - start) / iters
        used = active_world().collectives[-1].config_name
        checked: bool | str = "n/a"
        if check and values:
            case.fill()
            case.call()
            ok = torch.tensor([1 if case.check() else 0], dtype=torch.int32)
            dist.all_reduce(ok, op=dist.ReduceOp.MIN)  # every rank's verdict
            checked = bool(ok.item())
            ok.free()
        case.free()
        nbytes = count * itemsize
        algbw = nbytes / (elapsed_ps * 1e-12) / 1e9 if elapsed_ps else 0.0
        rows.append(
            {
                "op": op,
                "size_B": nbytes,
                "count": count,
                "type": dtype,
                "redop": redop if reduces else "none",
                "algorithm": used,
                "time_us": elapsed_ps / 1e6,
                "algbw_GBps": algbw,
                "busbw_GBps": algbw * bus_factor(op, n),
                "checked": checked,
                "world_size": n,
            }
        )
    return rows if rank == 0 else None


_COLUMNS = (
    ("size", "size_B", 12, "d"),
    ("count", "count", 12, "d"),
    ("type", "type", 9, "s"),
    ("redop", "redop", 6, "s"),
    ("algorithm", "algorithm", 18, "s"),
    ("time(us)", "time_us", 11, ".2f"),
    ("algbw(GB/s)", "algbw_GBps", 12, ".2f"),
    ("busbw(GB/s)", "busbw_GBps", 12, ".2f"),
    ("checked", "checked", 8, "s"),
)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as nccl-tests prints them, with the average bus bandwidth at the end."""
    header = " ".join(f"{title:>{width}}" for title, _, width, _ in _COLUMNS)
    lines = ["#" + header[1:]]
    for row in rows:
        cells = []
        for _, key, width, spec in _COLUMNS:
            value = row[key]
            cells.append(f"{str(value) if spec == 's' else format(value, spec):>{width}}")
        lines.append(" ".join(cells))
    if rows:
        average = sum(r["busbw_GBps"] for r in rows) / len(rows)
        lines.append(f"# Avg bus bandwidth    : {average:.2f} GB/s")
    return "\n".join(lines)


class BenchArgumentParser(argparse.ArgumentParser):
    r"""An ``ArgumentParser`` whose errors are :class:`ConfigError`\ s.

    A script's ``main()`` runs inside the ranks of ``kernbench run``, where
    argparse's ``sys.exit`` would surface as a rank failure with a traceback;
    a ``ConfigError`` is printed by the CLI as one message.
    """

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{self.prog}: {message}\n{self.format_usage().rstrip()}")


def add_perf_arguments(
    parser: argparse.ArgumentParser,
    *,
    reduction: bool,
    rooted: bool = False,
    minbytes: str = "4KiB",
    maxbytes: str = "16MiB",
) -> argparse.ArgumentParser:
    """nccl-tests' flags: ``-b -e -f`` (sizes), ``-o`` (redop), ``-d`` (type), ``-n -w -c``.

    ``reduction`` adds ``-o/--op``; ``rooted`` adds ``-r/--root``.  Sizes take
    ``parse_bytes`` forms (``8``, ``4KiB``, ``1MB``, ``64M``).
    """
    parser.add_argument("-b", "--minbytes", default=minbytes, help=f"smallest size ({minbytes})")
    parser.add_argument("-e", "--maxbytes", default=maxbytes, help=f"largest size ({maxbytes})")
    parser.add_argument("-f", "--stepfactor", default="2", help="size multiplier (2)")
    if reduction:
        parser.add_argument("-o", "--op", default="sum", choices=sorted(REDOPS), help="(sum)")
    if rooted:
        parser.add_argument("-r", "--root", type=int, default=0, help="root rank (0)")
    parser.add_argument("-d", "--datatype", default="float32", choices=list(DTYPES))
    parser.add_argument("-n", "--iters", type=int, default=1, help="timed calls per size (1)")
    parser.add_argument("-w", "--warmup_iters", type=int, default=1, help="untimed calls (1)")
    parser.add_argument("-c", "--check", type=int, default=1, help="check values: 1 or 0 (1)")
    parser.add_argument(
        "--algorithm",
        default=None,
        help="configuration of ccl/ccl.yaml, algorithm name or 'auto' (default: the catalogue's)",
    )
    return parser


def perf_from_args(op: str, args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """Run :func:`collective_perf` with parsed :func:`add_perf_arguments` flags.

    Rank 0 prints a caption and :func:`format_table` and returns the rows.
    """
    rows = collective_perf(
        op,
        sizes_from_args(args.minbytes, args.maxbytes, args.stepfactor),
        algorithm=args.algorithm,
        dtype=args.datatype,
        redop=getattr(args, "op", "sum"),
        iters=args.iters,
        warmup=args.warmup_iters,
        check=bool(args.check),
        root=getattr(args, "root", 0),
    )
    if rows is None:
        return None
    ctx = current_context()
    mode = "timing-only (values not checked)" if ctx.timing_only else "functional"
    print(
        f"# {op} on {ctx.topology.name}, {dist.get_world_size()} ranks, {mode}; "
        f"iters {args.iters}, warmup {args.warmup_iters}; GB = 10^9 B"
    )
    print(format_table(rows))
    return rows
