"""The ``kernbench`` command line.

:func:`main` runs a command and turns whatever ended it into an exit status
and at most one ``error:`` line (:mod:`kernbench.exits` says which): 2 for a
user error, 70 for an internal error, 130 for Ctrl-C, 141 for a closed
standard output; ``--traceback`` or ``KERNBENCH_TRACEBACK=1`` adds the
Python traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from kernbench import __version__
from kernbench.ccl.ops import TUNABLE_OPS
from kernbench.errors import ConfigError, shown
from kernbench.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    TRACEBACK_VARIABLE,
    StdoutClosed,
    status_of,
    traceback_asked,
)
from kernbench.units import parse_size, parse_time

__all__ = [
    "main",
    "cli",
    "EXIT_USER_ERROR",
    "EXIT_INTERNAL_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_BROKEN_PIPE",
    "TRACEBACK_VARIABLE",
]

SET_HELP = "Override a topology key, e.g. --set system.sips.count=4 (repeatable)."


class _Group(click.Group):
    """A click group that lets a broken pipe reach :func:`main` instead of exiting 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise StdoutClosed from None


class _InputPath(click.Path):
    """click.Path that refuses a NUL in the name as a usage error (click's own stat raises)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if "\x00" in str(value):
            self.fail(f"{shown(str(value))!r} contains a NUL character", param, ctx)
        return super().convert(value, param, ctx)


class _FilePath(_InputPath):
    """An input that is a file, never a bundled machine's name: an empty name (which the
    file system would take for the current directory) is a usage error too."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not str(value):
            self.fail("the path is empty; name a file", param, ctx)
        return super().convert(value, param, ctx)


INPUT_PATH = _InputPath(dir_okay=False)
FILE_PATH = _FilePath(dir_okay=False)


class _Quantity(click.ParamType):
    """A positive quantity read by ``parse`` (a time to picoseconds, a size to bytes): a
    bad one is a usage error naming the option."""

    def __init__(self, name: str, parse: Callable[[str], int]) -> None:
        self.name = name
        self.parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):  # converted already
            return value
        try:
            amount = self.parse(value)
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        if amount <= 0:
            self.fail(f"must be more than zero (got {shown(str(value))!r})", param, ctx)
        return amount


TIME = _Quantity("time", parse_time)
SIZE = _Quantity("size", parse_size)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernbench")
@click.option(
    "--traceback",
    "show_traceback",
    is_flag=True,
    help=f"On an error, print the Python traceback too (as {TRACEBACK_VARIABLE}=1 does).",
)
@click.pass_context
def cli(ctx: click.Context, show_traceback: bool) -> None:
    """KernBench: simulate AI-accelerator machines described in YAML.

    Describe a machine in a topology YAML, run bench scripts written like
    PyTorch distributed programs on it, and get values and simulated time.

    \b
    Exit status: 0 done; 1 regress found a regression; 2 a user error (one
    "error:" line; an exception in your script names its file:line); 70 an
    internal error (a KernBench bug: please report it); 130 interrupted;
    141 standard output was closed.  --traceback (before the command) or
    KERNBENCH_TRACEBACK=1 adds the Python traceback to an error.
    """
    if show_traceback and isinstance(ctx.obj, dict):
        ctx.obj["traceback"] = True


def _echo_for(*outputs: str | None) -> Callable[..., None]:
    """click.echo, or click.echo to standard error when an output goes to standard output."""
    from kernbench.bench.outputs import writes_to_stdout

    if any(writes_to_stdout(path) for path in outputs):
        return functools.partial(click.echo, err=True)
    return click.echo


@cli.group()
def topo() -> None:
    """Inspect topology files and the bundled machines.

    Wherever a topology file is expected, a bundled machine's name will do
    (--topology ring8); `kernbench topo list` lists them.
    """


@topo.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON (with each file).")
def topo_list(as_json: bool) -> None:
    """List the bundled machines: name, SIPs x cubes x PEs, devices, description.

    A name here works wherever a topology file does: --topology ring8,
    KERNBENCH_TOPOLOGY=ring8, `kernbench topo show ring8`.
    """
    from kernbench.topology.summary import bundled_machines, format_machines

    machines = bundled_machines()
    click.echo(json.dumps(machines, indent=2) if as_json else format_machines(machines))


@topo.command("show")
@click.argument("path", type=INPUT_PATH)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (SI units).")
def topo_show(path: str, overrides: tuple[str, ...], as_json: bool) -> None:
    """Print a machine: counts, memory per level, links, diameter, bisection bandwidth.

    PATH is a topology file or a bundled machine's name (`kernbench topo list`).
    """
    from kernbench.topology import build_graph, load_topology
    from kernbench.topology.summary import format_summary, summarize

    topology = load_topology(path, overrides)
    summary = summarize(topology, build_graph(topology))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(format_summary(summary))


@cli.command("run", context_settings={"ignore_unknown_options": True})
@click.argument("script", type=FILE_PATH)
@click.option(
    "--topology",
    "-t",
    default=None,
    type=INPUT_PATH,
    metavar="PATH",
    help="Machine to run on: a topology file or a bundled machine's name, e.g. ring8 "
    "(default: $KERNBENCH_TOPOLOGY, else the bundled default).",
)
@click.option(
    "--world-size",
    type=int,
    default=None,
    help="Number of ranks (default: one per device of the topology; a script run by its "
    "__main__ block starts its own, reading it as $WORLD_SIZE).",
)
@click.option(
    "--nproc-per-node",
    "--nproc_per_node",
    "nproc_per_node",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Run the whole script once per rank on N ranks, as torchrun runs it in each "
    "process (module level and __main__ block; $RANK, $LOCAL_RANK, $WORLD_SIZE set).",
)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--timing-only", is_flag=True, help="Carry sizes, not bytes (fast, no values).")
@click.option(
    "--report",
    "report_path",
    default=None,
    metavar="OUT.json",
    help="Write the run report as JSON.",
)
@click.option(
    "--trace", "trace_path", default=None, metavar="OUT.json", help="Write a Chrome/Perfetto trace."
)
@click.option(
    "--csv",
    "csv_path",
    default=None,
    metavar="OUT.csv",
    help="Write the bench's result rows as CSV (units in the column names).",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(-(1 << 63), (1 << 64) - 1),  # torch.manual_seed's range
    help="Seed of every rank's random generator (torch.rand, ...).",
)
@click.option(
    "--max-sim-time",
    default=None,
    type=TIME,
    metavar="TIME",
    help="Stop the run cleanly when the simulated clock reaches TIME (e.g. 10ms).",
)
@click.option(
    "--max-wall-time",
    default=None,
    type=TIME,
    metavar="TIME",
    help="Stop the run cleanly after TIME of real time (e.g. 30s).",
)
@click.option(
    "--no-mirror-imports",
    "no_mirror_imports",
    is_flag=True,
    help="Leave `import torch` and `import triton` to Python.  By default they import "
    "KernBench's kernbench.torch and kernbench.triton while the script runs, so a PyTorch "
    "program runs as written.",
)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def run_cmd(
    script: str,
    topology: str | None,
    world_size: int | None,
    nproc_per_node: int | None,
    overrides: tuple[str, ...],
    timing_only: bool,
    report_path: str | None,
    trace_path: str | None,
    csv_path: str | None,
    seed: int,
    max_sim_time: int | None,
    max_wall_time: int | None,
    no_mirror_imports: bool,
    script_args: tuple[str, ...],
) -> None:
    """Run SCRIPT on the machine: main() once per rank; else its __main__ block.

    The machine is built first and SCRIPT imported on it.  A script without
    main() but with an `if __name__ == "__main__":` block runs as __main__ and
    starts its own ranks (torch.multiprocessing; --world-size is its
    $WORLD_SIZE); failing both, run(rank, world_size) runs once per rank.
    With --nproc-per-node N the whole script runs once per rank, as
    `torchrun --nproc-per-node N SCRIPT` runs it.  Arguments after the
    script's path (use -- before options) are given to the script in sys.argv.
    Prints simulated time, per-rank time, bytes per link class and the
    busiest component.  Every output path is checked before the
    run starts; '-' (or /dev/stdout) writes that output to standard output,
    and everything else then goes to standard error.
    """
    from kernbench.bench.runner import run_script

    settings = click.get_current_context().obj
    if isinstance(settings, dict):  # main() then names the script's line if it raises
        settings["script"] = script

    if nproc_per_node is not None and world_size not in (None, nproc_per_node):
        raise click.UsageError(
            f"--world-size {world_size} and --nproc-per-node {nproc_per_node} disagree; "
            "give one (with --nproc-per-node the world is N ranks on this one machine)"
        )
    run_script(
        script,
        topology=topology,
        world_size=world_size if nproc_per_node is None else nproc_per_node,
        per_rank=nproc_per_node is not None,
        overrides=overrides,
        timing_only=timing_only,
        report_path=report_path,
        trace_path=trace_path,
        csv_path=csv_path,
        seed=seed,
        max_sim_time_ps=max_sim_time,
        max_wall_s=max_wall_time / 1e12 if max_wall_time else None,
        script_args=script_args,
        echo=_echo_for(report_path, trace_path, csv_path),
        mirror_imports=not no_mirror_imports,
    )


@cli.command("tune")
@click.option(
    "--topology", "-t", required=True, type=INPUT_PATH, metavar="PATH", help="Machine to tune for."
)
@click.option(
    "--op",
    "ops",
    multiple=True,
    default=("all_reduce",),
    type=click.Choice(TUNABLE_OPS),
    help="Collective to tune (repeatable; default all_reduce).",
)
@click.option("--min-size", default="4KiB", type=SIZE, show_default=True, help="Smallest message.")
@click.option("--max-size", default="256MiB", type=SIZE, show_default=True, help="Largest message.")
@click.option("--world-size", type=int, default=None, help="Ranks (default: all devices).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option(
    "--output",
    "-o",
    required=True,
    metavar="TABLE.yaml",
    help="Where to write (checked before tuning starts; '-' for standard output).",
)
def tune_cmd(
    topology: str,
    ops: tuple[str, ...],
    min_size: int,
    max_size: int,
    world_size: int | None,
    overrides: tuple[str, ...],
    output: str,
) -> None:
    """Measure every candidate algorithm in simulation over a size sweep (x2 steps).

    Writes a YAML table with every candidate's time per size and the winner;
    run with --set ccl.tune_table=TABLE.yaml and algorithm "auto" to use it.
    """
    from kernbench.bench.outputs import check_outputs
    from kernbench.bench.tune import tune, write_table
    from kernbench.topology import load_topology_sources
    from kernbench.units import format_size, format_time

    low, high = min_size, max_size
    if high < low:
        raise click.BadParameter("--min-size must be at most --max-size")
    check_outputs({"tune table": output}, inputs=load_topology_sources(topology)[1])
    echo = _echo_for(output)
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size *= 2
    table = tune(
        topology,
        ops=tuple(dict.fromkeys(ops)),  # an op given twice is measured once
        sizes=sizes,
        world_size=world_size,
        overrides=overrides,
        progress=lambda text: click.echo(f"measuring {text}", err=True),
    )
    write_table(table, output)
    for row in table["results"]:
        best = row["times_ps"][row["winner"]]
        echo(
            f"{row['op']:<15} {format_size(row['bytes']):>8}  {row['winner']:<20} "
            f"{format_time(best)}"
        )
    echo(f"table: {output}")


@cli.command("plot")
@click.argument("inputs", nargs=-1, required=True, type=FILE_PATH)
@click.option(
    "--output",
    "-o",
    required=True,
    metavar="OUT.png",
    help="Where to write the chart; its extension picks the format (.png, .svg, .pdf, .eps, "
    ".ps, .jpg, .tiff, .webp; PNG without one, as for '-', standard output).",
)
@click.option("--x", "x", default="size_B", show_default=True, help="Column on the x axis.")
@click.option("--y", "y", default="busbw_GBps", show_default=True, help="Column on the y axis.")
@click.option(
    "--group-by",
    "group_by",
    multiple=True,
    metavar="COL",
    help="One line per value of COL (repeatable; default: op, topology, algorithm, "
    "ccl.all_reduce where they vary, then columns such as type or redop where rows of "
    "one line would share an x).",
)
@click.option("--title", default="", help="Chart title.")
@click.option(
    "--breakdown",
    is_flag=True,
    help="Plot bytes per link class and the busiest component of each run report instead.",
)
@click.option(
    "--max-groups",
    type=click.IntRange(min=1),
    default=None,
    help="Draw at most this many groups (lines; reports with --breakdown); default 20. "
    "The legend counts the groups left out.  At most 1000.",
)
def plot_cmd(
    inputs: tuple[str, ...],
    output: str,
    x: str,
    y: str,
    group_by: tuple[str, ...],
    title: str,
    breakdown: bool,
    max_groups: int | None,
) -> None:
    """Plot results from run reports, sweep summaries (summary.json) or CSV files.

    Rows of every input are drawn together, one line per group; with several
    inputs that the groups do not tell apart, a "file" column tells them apart.
    """
    from kernbench.bench.outputs import check_outputs
    from kernbench.bench.plot import (
        DEFAULT_GROUP_BY,
        MAX_GROUPS,
        MAX_GROUPS_LIMIT,
        plot_breakdown,
        plot_format,
        plot_results,
        separate_curves,
    )
    from kernbench.bench.regress import load_report, load_rows

    if max_groups is not None and max_groups > MAX_GROUPS_LIMIT:
        raise click.BadParameter(
            f"{max_groups} is more lines than a chart can show; at most {MAX_GROUPS_LIMIT}",
            param_hint="'--max-groups'",
        )
    check_outputs({"plot": output}, inputs=inputs)
    plot_format(output)
    echo = _echo_for(output)
    limit = max_groups or MAX_GROUPS
    if breakdown:
        reports = {path: load_report(path) for path in inputs}
        plot_breakdown(reports, output, max_groups=limit)
        if len(reports) > limit:
            echo(f"plot: drew {limit} of {len(reports)} reports (--max-groups draws more)")
    else:
        rows = []
        for path in inputs:
            rows.extend({**row, "file": path} for row in load_rows(path))
        columns = list(group_by)
        if not columns:
            columns = [c for c in DEFAULT_GROUP_BY if len({str(r.get(c)) for r in rows}) > 1]
            files_per_group: dict[tuple, set[str]] = {}
            for row in rows:
                group = tuple(str(row.get(c)) for c in columns)  # values may be lists
                files_per_group.setdefault(group, set()).add(row["file"])
            if any(len(files) > 1 for files in files_per_group.values()):
                columns.append("file")
            columns = separate_curves(rows, x, columns)
        summary = plot_results(
            rows, output, x=x, y=y, group_by=columns, title=title, max_groups=limit
        )
        if summary.left_out:
            echo(f"plot: drew {summary.drawn} of {summary.groups} groups (--max-groups draws more)")
    echo(f"plot: {output}")


@cli.command("regress")
@click.argument("baseline", type=FILE_PATH)
@click.argument("current", type=FILE_PATH)
@click.option(
    "--tolerance",
    default="2%",
    show_default=True,
    help="Relative slowdown allowed before a point is a regression: '2%' or 0.02.",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="COL",
    help="Match rows on COL (repeatable; default: every non-metric column on both sides).",
)
@click.option(
    "--fail-on-change",
    is_flag=True,
    help="Exit 1 on improvements and new points too, not only on regressions.",
)
def regress_cmd(
    baseline: str, current: str, tolerance: str, keys: tuple[str, ...], fail_on_change: bool
) -> None:
    """Compare CURRENT results against BASELINE point by point.

    Both are run reports, sweep summaries or CSV files.  A point slower by more
    than the tolerance, with values no longer checked, different or wrong in more
    elements (#wrong), or missing from CURRENT is a regression: the exit status
    is then 1 (0 otherwise).  Faster points are reported as improvements.  Rows
    that cannot be compared (a time in one file only, NaN, negative or not a
    number), two rows with one key, an unknown --key and unreadable files are
    errors: exit status 2.
    """
    from kernbench.bench.regress import (
        compare,
        format_comparison,
        load_rows,
        parse_tolerance,
        provenance_notes,
    )

    before, after = load_rows(baseline, include_run=True), load_rows(current, include_run=True)
    # A report's whole-run row compares only with another report's: against a CSV of
    # the same run (which has no such row) it would be a point "missing in current".
    ran = [any(row.get("row") == "run" for row in rows) for rows in (before, after)]
    if ran[0] != ran[1]:
        before, after = (
            [row for row in rows if row.get("row") != "run"] for rows in (before, after)
        )
    comparison = compare(
        before,
        after,
        tolerance=parse_tolerance(tolerance),
        keys=keys or None,
        names=(baseline, current),
    )
    click.echo(format_comparison(comparison))
    for note in provenance_notes(baseline, current):
        click.echo(f"note: {note}")
    if comparison.incomparable:
        from kernbench.errors import ConfigError

        reasons = [reason for point in comparison.incomparable for reason in point.reasons]
        more = f" (and {len(reasons) - 1} more in the table)" if len(reasons) > 1 else ""
        raise ConfigError(
            f"{len(comparison.incomparable)} of {len(comparison.points)} points cannot be "
            f"compared: {reasons[0]}{more}"
        )
    if comparison.has_regression or (fail_on_change and comparison.has_change):
        # main() ignores a command's return value, so the status leaves as SystemExit.
        raise SystemExit(1)


@cli.command("sweep")
@click.argument("sweep_file", type=FILE_PATH)
@click.option("-j", "--jobs", default=1, show_default=True, type=int, help="Points run at once.")
@click.option(
    "--executor",
    default=None,
    type=click.Choice(["local", "dask"]),
    help="local: a process per point on this machine (the default); dask: a Dask cluster "
    "(the default with --scheduler).",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="tcp://HOST:PORT",
    help="Dask scheduler to send points to (without it, --executor dask starts a local "
    "cluster of -j workers).",
)
@click.option(
    "--output",
    "-o",
    default=None,
    metavar="DIR",
    help="Output directory (default: the file's output:, else out/<sweep file stem>).",
)
@click.option(
    "--trace/--no-trace", default=None, help="Write a Chrome trace per point (default: the file's)."
)
@click.option(
    "--timing-only/--no-timing-only",
    default=None,
    help="Carry sizes, not bytes (default: the file's timing_only, true unless set).",
)
def sweep_cmd(
    sweep_file: str,
    jobs: int,
    executor: str | None,
    scheduler: str | None,
    output: str | None,
    trace: bool | None,
    timing_only: bool | None,
) -> None:
    """Run a bench over every combination of topologies, --set values and bench args.

    Finished points are kept in OUTPUT/points/; running again skips the ones
    that succeeded and retries the others.  Writes OUTPUT/results.csv,
    OUTPUT/summary.json and OUTPUT/busbw.png.  Exits with status 2 if a point
    failed, 130 when interrupted.
    """
    from kernbench.bench.sweep import SweepError, SweepInterrupted, run_sweep

    try:
        outcome = run_sweep(
            sweep_file,
            jobs=jobs,
            executor=executor,
            scheduler=scheduler,
            output=output,
            trace=trace,
            timing_only=timing_only,
            echo=click.echo,
            warn=lambda text: click.echo(text, err=True),
        )
    except SweepInterrupted as exc:
        click.echo(str(exc), err=True)
        raise click.exceptions.Abort() from None
    if outcome.failed:
        raise SweepError(
            f"{len(outcome.failed)} of {outcome.points} points failed "
            f"(errors in {outcome.output / 'summary.json'}); run again to retry them"
        )


def _print_arguments_as_given() -> None:
    """Let standard output take back the bytes of arguments that are not UTF-8.

    Python keeps such bytes of a path or value as lone surrogates; a strict
    standard output could not print ``report: <path>`` with them.  Written with
    ``surrogateescape`` they are the bytes the user typed again.
    """
    stream = sys.stdout
    if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
        stream.reconfigure(errors="surrogateescape")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; the exit status and what an error prints are in the module doc."""
    _print_arguments_as_given()
    settings: dict[str, Any] = {"traceback": traceback_asked()}
    try:
        status = cli.main(args=argv, prog_name="kernbench", standalone_mode=False, obj=settings)
    except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: BLE001 - see exits
        return status_of(exc, show_traceback=settings["traceback"], script=settings.get("script"))
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())


def entry() -> None:
    """Console-script wrapper: exit with :func:`main`'s status."""
    sys.exit(main())
