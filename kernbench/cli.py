"""The ``kernbench`` command line.

Every user error is a :class:`~kernbench.errors.KernBenchError`; the CLI prints
its message (no traceback) and exits with status 2.
"""

from __future__ import annotations

import json
import sys

import click

from kernbench import __version__
from kernbench.errors import KernBenchError

__all__ = ["main", "cli"]

SET_HELP = "Override a topology key, e.g. --set system.sips.count=4 (repeatable)."


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernbench")
def cli() -> None:
    """KernBench: simulate AI-accelerator machines described in YAML.

    Describe a machine in a topology YAML, run bench scripts written like
    PyTorch distributed programs on it, and get values and simulated time.
    """


@cli.group()
def topo() -> None:
    """Inspect topology files."""


@topo.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (SI units).")
def topo_show(path: str, overrides: tuple[str, ...], as_json: bool) -> None:
    """Print a machine: counts, memory per level, links, diameter, bisection bandwidth."""
    from kernbench.topology import build_graph, load_topology
    from kernbench.topology.summary import format_summary, summarize

    topology = load_topology(path, overrides)
    summary = summarize(topology, build_graph(topology))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(format_summary(summary))


@cli.command("run", context_settings={"ignore_unknown_options": True})
@click.argument("script", type=click.Path(dir_okay=False))
@click.option(
    "--topology",
    "-t",
    default=None,
    metavar="PATH",
    help="Machine to run on (default: the bundled topologies/default.yaml).",
)
@click.option(
    "--world-size",
    type=int,
    default=None,
    help="Number of ranks (default: one per device of the topology).",
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
    type=int,
    help="Seed of every rank's random generator (torch.rand, ...).",
)
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def run_cmd(
    script: str,
    topology: str | None,
    world_size: int | None,
    overrides: tuple[str, ...],
    timing_only: bool,
    report_path: str | None,
    trace_path: str | None,
    csv_path: str | None,
    seed: int,
    script_args: tuple[str, ...],
) -> None:
    """Run SCRIPT's main() once per rank (or run(rank, world_size) if it has no main).

    Arguments after the script's path (use -- before options) are given to the
    script in sys.argv.  Prints simulated time, per-rank time, bytes per link
    class and the busiest component.
    """
    from kernbench.bench.runner import run_script

    run_script(
        script,
        topology=topology,
        world_size=world_size,
        overrides=overrides,
        timing_only=timing_only,
        report_path=report_path,
        trace_path=trace_path,
        csv_path=csv_path,
        seed=seed,
        script_args=script_args,
        echo=click.echo,
    )


@cli.command("tune")
@click.option("--topology", "-t", required=True, metavar="PATH", help="Machine to tune for.")
@click.option(
    "--op",
    "ops",
    multiple=True,
    default=("all_reduce",),
    type=click.Choice(["all_reduce", "all_gather", "reduce_scatter", "broadcast"]),
    help="Collective to tune (repeatable; default all_reduce).",
)
@click.option("--min-size", default="4KiB", show_default=True, help="Smallest message.")
@click.option("--max-size", default="256MiB", show_default=True, help="Largest message.")
@click.option("--world-size", type=int, default=None, help="Ranks (default: all devices).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--output", "-o", required=True, metavar="TABLE.yaml", help="Where to write.")
def tune_cmd(
    topology: str,
    ops: tuple[str, ...],
    min_size: str,
    max_size: str,
    world_size: int | None,
    overrides: tuple[str, ...],
    output: str,
) -> None:
    """Measure every candidate algorithm in simulation over a size sweep (x2 steps).

    Writes a YAML table with every candidate's time per size and the winner;
    run with --set ccl.tune_table=TABLE.yaml and algorithm "auto" to use it.
    """
    from kernbench.bench.tune import tune, write_table
    from kernbench.units import format_size, format_time, parse_size

    low, high = parse_size(min_size), parse_size(max_size)
    if low <= 0 or high < low:
        raise click.BadParameter("--min-size must be positive and at most --max-size")
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size *= 2
    table = tune(
        topology,
        ops=ops,
        sizes=sizes,
        world_size=world_size,
        overrides=overrides,
        progress=lambda text: click.echo(f"measuring {text}", err=True),
    )
    write_table(table, output)
    for row in table["results"]:
        best = row["times_ps"][row["winner"]]
        click.echo(
            f"{row['op']:<15} {format_size(row['bytes']):>8}  {row['winner']:<20} "
            f"{format_time(best)}"
        )
    click.echo(f"table: {output}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning user errors into one line and exit status 2."""
    try:
        cli.main(args=argv, prog_name="kernbench", standalone_mode=False)
    except KernBenchError as exc:
        click.echo(f"error: {exc}", err=True)
        cause = getattr(exc, "original", None)
        if cause is not None and not isinstance(cause, KernBenchError):
            import traceback

            click.echo("".join(traceback.format_exception(cause)).rstrip(), err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())


def entry() -> None:
    """Console-script wrapper: exit with :func:`main`'s status."""
    sys.exit(main())
