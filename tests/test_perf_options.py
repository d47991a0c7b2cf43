"""The perf benches' command line: every nccl-tests flag, its default and its bad values."""

from __future__ import annotations

import pytest

from kernbench.bench.perf_options import (
    NCCL_TYPES,
    BenchArgumentParser,
    add_perf_arguments,
    options_from_args,
    parse_bytes,
    sizes_from_args,
)
from kernbench.errors import ConfigError, KernBenchError

M = 2**20


def options(*argv: str, reduction: bool = True, rooted: bool = True):
    parser = add_perf_arguments(
        BenchArgumentParser(prog="x_perf"), reduction=reduction, rooted=rooted
    )
    return options_from_args(parser.parse_args(list(argv)))


def test_defaults_are_nccl_tests() -> None:
    o = options()
    assert o.sizes == (32 * M,) and (o.minbytes, o.maxbytes) == (32 * M, 32 * M)
    assert (o.stepfactor, o.stepbytes) == (1, M)
    assert (o.iters, o.warmup, o.check, o.blocking, o.average, o.run_cycles) == (20, 5, 1, 0, 1, 1)
    assert (o.types, o.redops, o.roots) == (("float",), ("sum",), (0,))
    assert o.algorithm is None and o.parallel_init == 0


@pytest.mark.parametrize(
    ("short", "long", "value", "field", "expected"),
    [
        ("-b", "--minbytes", "8", "minbytes", 8),
        ("-e", "--maxbytes", "128M", "maxbytes", 128 * M),
        ("-f", "--stepfactor", "4", "stepfactor", 4),
        ("-i", "--stepbytes", "64K", "stepbytes", 65536),
        ("-n", "--iters", "3", "iters", 3),
        ("-w", "--warmup_iters", "0", "warmup", 0),
        ("-c", "--check", "2", "check", 2),
        ("-N", "--run_cycles", "2", "run_cycles", 2),
        ("-d", "--datatype", "half", "types", ("half",)),
        ("-o", "--op", "max", "redops", ("max",)),
        ("-r", "--root", "3", "roots", (3,)),
        ("-z", "--blocking", "3", "blocking", 3),
        ("-a", "--average", "2", "average", 2),
        ("-p", "--parallel_init", "1", "parallel_init", 1),
        ("-g", "--ngpus", "1", "iters", 20),
        ("-t", "--nthreads", "1", "iters", 20),
        ("-y", "--stream_null", "1", "iters", 20),
        ("-m", "--agg_iters", "1", "iters", 20),
        ("-G", "--cudagraph", "0", "iters", 20),
        ("-C", "--report_cputime", "0", "iters", 20),
        ("-R", "--local_register", "0", "iters", 20),
        ("-T", "--timeout", "0", "iters", 20),
        ("-u", "--unalign", "0", "iters", 20),
        ("-I", "--per_iter_timing", "0", "iters", 20),
        ("-S", "--report_timestamps", "0", "iters", 20),
        ("-M", "--memory", "0", "iters", 20),
        ("-D", "--device_implementation", "0", "iters", 20),
    ],
)
def test_every_flag_short_and_long(short, long, value, field, expected) -> None:
    extra = ["-e", "1G"] if field == "minbytes" else []
    for spelling in ([short, value], [f"{long}={value}"], [long, value]):
        assert getattr(options(*spelling, *extra), field) == expected


def test_sizes() -> None:
    assert options("-b", "8", "-e", "128M", "-f", "2").sizes == tuple(8 << k for k in range(25))
    assert options("-b", "1M", "-e", "3M", "-i", "1M").sizes == (M, 2 * M, 3 * M)
    assert sizes_from_args("4KiB", "64KiB", 4) == [4096, 16384, 65536]
    assert sizes_from_args("8", "100", "2") == [8, 16, 32, 64]
    # nccl-tests' parsesize: the unit's first letter, binary; fractions and exponents
    assert parse_bytes("1M") == M and parse_bytes("2g") == 2**31 and parse_bytes("1MB") == M
    assert parse_bytes("1KiB") == parse_bytes("1KB") == 1024 and parse_bytes("1.5K") == 1536
    assert parse_bytes("1e3") == 1000 and parse_bytes(" 64 ") == 64
    with pytest.raises(KernBenchError, match="-b/--minbytes: cannot read size '4 bananas'"):
        parse_bytes("4 bananas", "-b/--minbytes")
    with pytest.raises(KernBenchError, match="cannot read size '4B'"):
        parse_bytes("4B")


def test_types_map_to_what_the_simulator_carries() -> None:
    carried = (
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
        "bfloat16",
    )  # fmt: skip
    assert tuple(t for t, d in NCCL_TYPES.items() if d) == carried  # nccl-tests' order
    assert options("-d", "all").types == carried
    assert options("-d", "float32").types == ("float",)  # kernbench's spelling
    assert options("-d", "float16").types == ("half",)
    assert options("-d", "float64").types == ("double",)
    for name in ("f8e4m3", "f8e5m2"):
        with pytest.raises(ConfigError, match=r"-d/--datatype \w+: the simulator cannot carry"):
            options("-d", name)
    with pytest.raises(ConfigError, match=r"-d/--datatype: unknown type 'fp8'; valid: int8, "):
        options("-d", "fp8")


def test_ops_and_roots() -> None:
    assert options("-o", "all").redops == ("sum", "prod", "max", "min", "avg")
    assert options("-r", "all").roots == (None,)
    with pytest.raises(ConfigError, match="-o/--op mulsum: the simulator has no pre-multiplied"):
        options("-o", "mulsum")
    with pytest.raises(ConfigError, match=r"-o/--op: unknown op 'bogus'; valid: sum, prod"):
        options("-o", "bogus")
    with pytest.raises(ConfigError, match=r"-r/--root takes a rank, -1 or 'all', got 'x'"):
        options("-r", "x")
    assert options("-r", "-1").roots == (None,)  # every root, as nccl-tests
    with pytest.raises(ConfigError, match=r"-r/--root must be a rank"):
        options("-r", "-2")
    # Every nccl-tests binary takes -o and -r (one flag set for all); the ops without a
    # reduction or a root ignore them.
    options("-o", "sum", reduction=False)
    options("-r", "1", rooted=False)
    for fixed in (("-x", "0"), ("-V", "16"), ("-K", "0")):
        options(*fixed)
    with pytest.raises(ConfigError, match=r"-V/--device_cta_count 8: only 16 is supported"):
        options("-V", "8")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-g", "2"], r"-g/--ngpus 2: only 1 is supported \(every rank drives one device"),
        (["-t", "4"], r"-t/--nthreads 4: only 1 is supported"),
        (["-m", "2"], r"-m/--agg_iters 2: only 1 is supported"),
        (["-G", "1"], r"-G/--cudagraph 1: only 0"),
        (["-C", "1"], r"-C/--report_cputime 1: only 0"),
        (["-T", "5"], r"-T/--timeout 5: only 0 is supported \(use kernbench run --max-wall-time\)"),
        (["-J", "out.json"], r"-J/--output_file: use kernbench run --report"),
        (["-F", "out.csv"], r"-F: use kernbench run --csv"),
        (["-a", "4"], r"-a/--average must be one of 0, 1, 2, 3, got 4"),
        (["-z", "4"], r"-z/--blocking must be one of 0, 1, 2, 3, got 4"),
        (["-p", "2"], r"-p/--parallel_init must be one of 0, 1, got 2"),
        (["-y", "2"], r"-y/--stream_null must be one of 0, 1, got 2"),
        (["-n", "0"], r"-n/--iters must be at least 1, got 0"),
        (["-w", "-1"], r"-w/--warmup_iters must be 0 or more, got -1"),
        (["-c", "-1"], r"-c/--check must be 0 \(no check\) or more, got -1"),
        (["-N", "0"], r"-N/--run_cycles must be at least 1"),
        (["-n", "many"], r"argument -n/--iters: -n/--iters takes an integer, got 'many'"),
        (["-b", "1M", "-e", "4K"], r"-e/--maxbytes \('4K'\) must be at least minbytes"),
        (["-b", "0"], r"-b/--minbytes must be positive"),
        (["-f", "0"], r"-f/--stepfactor must be 1 \(use -i\) or more"),
        (["-i", "0"], r"-i/--stepbytes must be positive when -f is 1"),
        (["-b", "lots"], r"size 'lots'"),
    ],
)
def test_bad_values_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        options(*argv)


def test_a_flag_argparse_refuses_is_one_line_that_points_at_help() -> None:
    with pytest.raises(ConfigError) as error:
        options("-f", "1.5")
    assert str(error.value) == (
        "x_perf: argument -f/--stepfactor: -f/--stepfactor takes an integer, got '1.5' "
        "(the flags: kernbench run x_perf -- --help)"
    )
