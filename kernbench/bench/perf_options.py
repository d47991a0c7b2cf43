"""nccl-tests' command line for the ``benches/*_perf.py`` scripts.

:func:`add_perf_arguments` declares every flag nccl-tests' ``common.cu``
accepts, with its short and long spelling and its default (nccl-tests 2.19:
``-b 32M -e 32M -i 1M -f 1 -n 20 -m 1 -c 1 -o sum -d float -r 0 -z 0 -a 1``;
``-w`` is 5 here, the value nccl-tests used before 2.17 cut it to 1).
:func:`options_from_args` checks the parsed values and turns them into
:class:`PerfOptions`.  A flag that only makes sense on a real machine takes
its default value only, and any other value is a :class:`ConfigError` that
names the flag and says what to use instead:

* ``-t/--nthreads`` and ``-g/--ngpus``: every rank of ``kernbench run`` drives
  exactly one device (the topology's ``system.device_level`` says what a
  device is; ``--world-size`` how many ranks), so both take only 1;
* ``-m/--agg_iters``, ``-G/--cudagraph``, ``-C/--report_cputime``,
  ``-R/--local_register``, ``-D/--device_implementation``, ``-u/--unalign``,
  ``-I/--per_iter_timing``, ``-S/--report_timestamps``, ``-M/--memory``:
  nothing to aggregate, capture, register or misalign in the simulator;
* ``-T/--timeout``: ``kernbench run --max-wall-time``; ``-J/--output_file`` and
  ``-F``: ``kernbench run --report`` / ``--csv``.

``-p/--parallel_init`` and ``-y/--stream_null`` take 0 or 1 and change
nothing (communicators cost no simulated time to create; every rank has one
stream).  Type names are nccl-tests' (``float``, ``half``, ``bfloat16``,
``int8`` ...; kernbench's ``float32``, ``float16`` are accepted as aliases);
``-d all`` and ``-o all`` run every type and op the simulator carries.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import NoReturn

from kernbench.errors import ConfigError

__all__ = [
    "AVERAGE_MODES",
    "BLOCKING_MODES",
    "NCCL_OPS",
    "NCCL_TYPES",
    "BenchArgumentParser",
    "PerfOptions",
    "add_perf_arguments",
    "options_from_args",
    "parse_bytes",
    "sizes_from_args",
]

# nccl-tests' type names -> the simulator's dtype (None: a type it cannot carry).
NCCL_TYPES: dict[str, str | None] = {
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "bfloat16": "bfloat16",
    "f8e4m3": None,
    "f8e5m2": None,
}
# kernbench's (and torch's) spellings of the same types.
_TYPE_ALIASES = {"float32": "float", "float16": "half", "float64": "double"}

# nccl-tests' reduce op names, in its order -> the runtime's (None: not simulated).
NCCL_OPS: dict[str, str | None] = {
    "sum": "sum",
    "prod": "product",
    "max": "max",
    "min": "min",
    "avg": "avg",
    "mulsum": None,
}

#: -a: how the ranks' times make the reported time.
AVERAGE_MODES = {0: "rank 0's time", 1: "the mean over ranks", 2: "the minimum", 3: "the maximum"}
#: -z: what happens after each timed call.
BLOCKING_MODES = {
    0: "back to back",
    1: "a barrier after each call, timed",
    2: "wait after each call (the same as 0 here)",
    3: "a barrier after each call, not timed",
}

# Flags that exist for a real machine: (short, long, the one value allowed, what to do instead).
_FIXED = (
    ("-t", "--nthreads", 1, "every rank drives one device; choose ranks with --world-size"),
    (
        "-g",
        "--ngpus",
        1,
        "every rank drives one device; choose devices with --set "
        "system.device_level=sip|cube|pe and ranks with --world-size",
    ),  # fmt: skip
    ("-m", "--agg_iters", 1, "the simulator does not aggregate calls; use -n"),
    ("-G", "--cudagraph", 0, "the simulator has no graph capture"),
    ("-C", "--report_cputime", 0, "the simulated host has no CPU time apart from the call"),
    ("-R", "--local_register", 0, "buffers need no registration in the simulator"),
    ("-D", "--device_implementation", 0, "collectives are the catalogue's; use --algorithm"),
    ("-u", "--unalign", 0, "the simulator does not model misaligned buffers"),
    ("-I", "--per_iter_timing", 0, "every call of a size takes the same simulated time"),
    ("-S", "--report_timestamps", 0, "simulated runs have no wall-clock timestamps"),
    ("-M", "--memory", 0, "see the run report for memory"),
    ("-T", "--timeout", 0, "use kernbench run --max-wall-time"),
    ("-x", "--cta_policy", 0, "the simulator has no CTAs; collectives are the catalogue's"),
    ("-V", "--device_cta_count", 16, "the simulator has no CTAs; collectives are the catalogue's"),
    ("-K", "--per_iter_skip", 0, "every call of a size takes the same simulated time"),
)
# (flags, destination, what to use instead); -F is nccl-tests' older CSV output.
_FILES = (
    (("-J", "--output_file"), "output_file", "use kernbench run --report FILE (JSON)"),
    (("-F",), "csv_file", "use kernbench run --csv FILE"),
)

# nccl-tests' sizes (parsesize): a number, then a unit of which only the first letter
# counts: K, M, G are binary (1KB = 1K = 1KiB = 1024 B), fractions and exponents allowed.
_NCCL_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]\w*)?\s*$")
_NCCL_FACTOR = {"k": 2**10, "m": 2**20, "g": 2**30}


def parse_bytes(value: str | int, flag: str = "size") -> int:
    """A size in bytes as nccl-tests reads it: ``8``, ``4K``, ``1.5M``, ``1e3``, ``1GB``.

    Only the unit's first letter counts, and K, M, G are binary (``1MB`` is
    1,048,576 B, as in nccl-tests); the bytes are the whole part.  ``flag``
    names the option in errors.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _NCCL_SIZE.match(str(value))
    unit = (match.group(2) or "")[:1].lower() if match else ""
    if match is None or (unit and unit not in _NCCL_FACTOR):
        raise ConfigError(
            f"{flag}: cannot read size {str(value)!r}; give bytes with an optional K, M or G "
            "(binary, as nccl-tests: 4K, 1.5M, 1G, 1e6)"
        )
    number = float(match.group(1)) * _NCCL_FACTOR.get(unit, 1)
    if not number < 2**63:
        raise ConfigError(f"{flag}: size {str(value)!r} is too large")
    return int(number)


def sizes_from_args(
    minbytes: str | int, maxbytes: str | int, stepfactor: int | str = 1, stepbytes: str | int = "1M"
) -> list[int]:
    """nccl-tests' sizes: ``min``, ``min·f``, ``min·f²`` ... (``f`` > 1), else ``min + k·i``."""
    low = parse_bytes(minbytes, "-b/--minbytes")
    high = parse_bytes(maxbytes, "-e/--maxbytes")
    step = parse_bytes(stepbytes, "-i/--stepbytes")
    try:
        factor = int(stepfactor)
    except ValueError:
        raise ConfigError(f"-f/--stepfactor must be an integer, got {stepfactor!r}") from None
    if low <= 0:
        raise ConfigError(f"-b/--minbytes must be positive, got {minbytes!r}")
    if high < low:
        raise ConfigError(f"-e/--maxbytes ({maxbytes!r}) must be at least minbytes ({minbytes!r})")
    if factor < 1:
        raise ConfigError(f"-f/--stepfactor must be 1 (use -i) or more, got {stepfactor!r}")
    if factor == 1 and step <= 0:
        raise ConfigError(f"-i/--stepbytes must be positive when -f is 1, got {stepbytes!r}")
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size = size * factor if factor > 1 else size + step
    return sizes


class BenchArgumentParser(argparse.ArgumentParser):
    r"""An ``ArgumentParser`` whose errors are :class:`ConfigError`\ s.

    A script's ``main()`` runs inside the ranks of ``kernbench run``, where
    argparse's ``sys.exit`` would surface as a rank failure with a traceback;
    a ``ConfigError`` is printed by the CLI as one line, so it points at
    ``--help`` instead of carrying argparse's usage lines.
    """

    def error(self, message: str) -> NoReturn:
        raise ConfigError(
            f"{self.prog}: {message} (the flags: kernbench run {self.prog} -- --help)"
        )


@dataclass(frozen=True)
class PerfOptions:
    """The checked flags of one perf bench run."""

    sizes: tuple[int, ...]
    minbytes: int
    maxbytes: int
    stepfactor: int
    stepbytes: int
    types: tuple[str, ...]  # nccl-tests names
    redops: tuple[str, ...]  # nccl-tests names
    roots: tuple[int | None, ...]  # None: every rank (resolved against the world size)
    iters: int = 20
    warmup: int = 5
    check: int = 1
    blocking: int = 0
    average: int = 1
    run_cycles: int = 1
    parallel_init: int = 0
    algorithm: str | None = None


def _int(flag: str) -> type:
    def convert(text: str) -> int:
        try:
            return int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} takes an integer, got {text!r}") from None

    convert.__name__ = "integer"
    return convert  # type: ignore[return-value]


def add_perf_arguments(
    parser: argparse.ArgumentParser,
    *,
    reduction: bool,
    rooted: bool = False,
    minbytes: str = "32M",
    maxbytes: str = "32M",
    stepfactor: int = 1,
) -> argparse.ArgumentParser:
    """Every nccl-tests flag, short and long; ``-o`` only for reductions, ``-r`` only rooted.

    ``minbytes``, ``maxbytes`` and ``stepfactor`` are the defaults of ``-b -e -f``
    (nccl-tests': one size, 32M).
    """
    add = parser.add_argument
    add("-b", "--minbytes", default=minbytes, help=f"smallest size ({minbytes})")
    add("-e", "--maxbytes", default=maxbytes, help=f"largest size ({maxbytes})")
    add("-i", "--stepbytes", default="1M", help="size increment when -f is 1 (1M)")
    add("-f", "--stepfactor", type=_int("-f/--stepfactor"), default=stepfactor,
        help=f"size multiplier; 1: add -i ({stepfactor})")  # fmt: skip
    add("-n", "--iters", type=_int("-n/--iters"), default=20, help="timed calls (20)")
    add("-w", "--warmup_iters", type=_int("-w/--warmup_iters"), default=5, help="untimed (5)")
    add("-N", "--run_cycles", type=_int("-N/--run_cycles"), default=1, help="repeat the sizes (1)")
    add("-c", "--check", type=_int("-c/--check"), default=1, help="check iterations (1; 0: none)")
    add("-d", "--datatype", default="float", help="nccl-tests type name or 'all' (float)")
    # Every nccl-tests binary takes -o and -r; those without a reduction or a root
    # ignore them, as nccl-tests does.
    ops_help = "sum, prod, max, min, avg or all (sum)" if reduction else argparse.SUPPRESS
    add("-o", "--op", default="sum", help=ops_help)
    add(
        "-r",
        "--root",
        default="0",
        help="root rank, -1 or 'all' (0)" if rooted else argparse.SUPPRESS,
    )
    add("-z", "--blocking", type=_int("-z/--blocking"), default=0, help="0-3 (0)")
    add("-a", "--average", type=_int("-a/--average"), default=1,
        help="0 rank 0, 1 mean, 2 min, 3 max of the ranks' times (1)")  # fmt: skip
    add("-p", "--parallel_init", type=_int("-p/--parallel_init"), default=0, help="0 or 1")
    add("-y", "--stream_null", type=_int("-y/--stream_null"), default=0, help="0 or 1")
    for short, long, value, _ in _FIXED:
        add(short, long, type=_int(f"{short}/{long}"), default=value, help=f"only {value} here")
    for flags, dest, _ in _FILES:
        add(*flags, dest=dest, default=None, help=argparse.SUPPRESS)
    add(
        "--algorithm",
        default=None,
        help="configuration of ccl/ccl.yaml, algorithm name or 'auto' (the catalogue's)",
    )
    return parser


def _types(name: str) -> tuple[str, ...]:
    if name == "all":
        return tuple(t for t, dtype in NCCL_TYPES.items() if dtype is not None)
    name = _TYPE_ALIASES.get(name, name)
    valid = [t for t, dtype in NCCL_TYPES.items() if dtype is not None]
    if name not in NCCL_TYPES:
        raise ConfigError(
            f"-d/--datatype: unknown type {name!r}; valid: {', '.join(valid)}, all "
            "(or float32, float16)"
        )
    if NCCL_TYPES[name] is None:
        raise ConfigError(
            f"-d/--datatype {name}: the simulator cannot carry {name} values; "
            f"valid: {', '.join(valid)}, all"
        )
    return (name,)


def _redops(name: str) -> tuple[str, ...]:
    valid = [o for o, op in NCCL_OPS.items() if op is not None]
    if name == "all":
        return tuple(valid)
    if name not in NCCL_OPS:
        raise ConfigError(f"-o/--op: unknown op {name!r}; valid: {', '.join(valid)}, all")
    if NCCL_OPS[name] is None:
        raise ConfigError(
            f"-o/--op {name}: the simulator has no pre-multiplied sum; "
            f"valid: {', '.join(valid)}, all"
        )
    return (name,)


def _roots(text: str) -> tuple[int | None, ...]:
    if text == "all":
        return (None,)
    try:
        root = int(text, 0)
    except ValueError:
        raise ConfigError(f"-r/--root takes a rank, -1 or 'all', got {text!r}") from None
    if root == -1:
        return (None,)  # every root, as nccl-tests' -r -1
    if root < 0:
        raise ConfigError(f"-r/--root must be a rank (0 or more), -1 or 'all', got {root}")
    return (root,)


def _choice(flag: str, value: int, valid: dict[int, str] | range) -> int:
    if value not in valid:
        shown = ", ".join(str(v) for v in valid)
        raise ConfigError(f"{flag} must be one of {shown}, got {value}")
    return value


def options_from_args(args: argparse.Namespace) -> PerfOptions:
    """Check :func:`add_perf_arguments`' flags; a bad one is named with the valid values."""
    for short, long, value, instead in _FIXED:
        given = getattr(args, long[2:])
        if given != value:
            raise ConfigError(f"{short}/{long} {given}: only {value} is supported ({instead})")
    for flags, dest, instead in _FILES:
        if getattr(args, dest) is not None:
            raise ConfigError(f"{'/'.join(flags)}: {instead}")
    if args.iters < 1:
        raise ConfigError(f"-n/--iters must be at least 1, got {args.iters}")
    if args.warmup_iters < 0:
        raise ConfigError(f"-w/--warmup_iters must be 0 or more, got {args.warmup_iters}")
    if args.check < 0:
        raise ConfigError(f"-c/--check must be 0 (no check) or more, got {args.check}")
    if args.run_cycles < 1:
        raise ConfigError(
            f"-N/--run_cycles must be at least 1 (0, run forever, is not supported), "
            f"got {args.run_cycles}"
        )
    step = parse_bytes(args.stepbytes, "-i/--stepbytes")
    _choice("-y/--stream_null", args.stream_null, range(2))
    return PerfOptions(
        sizes=tuple(sizes_from_args(args.minbytes, args.maxbytes, args.stepfactor, step)),
        minbytes=parse_bytes(args.minbytes, "-b/--minbytes"),
        maxbytes=parse_bytes(args.maxbytes, "-e/--maxbytes"),
        stepfactor=args.stepfactor,
        stepbytes=step,
        types=_types(args.datatype),
        redops=_redops(getattr(args, "op", "sum")),
        roots=_roots(str(getattr(args, "root", "0"))),
        iters=args.iters,
        warmup=args.warmup_iters,
        check=args.check,
        blocking=_choice("-z/--blocking", args.blocking, BLOCKING_MODES),
        average=_choice("-a/--average", args.average, AVERAGE_MODES),
        run_cycles=args.run_cycles,
        parallel_init=_choice("-p/--parallel_init", args.parallel_init, range(2)),
        algorithm=args.algorithm,
    )
