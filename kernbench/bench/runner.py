"""``kernbench run``: load a bench script and run it once per rank."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import sys
import traceback
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernbench import __version__
from kernbench.bench.outputs import check_outputs, writes_to_stdout
from kernbench.bench.simulate import SimResult, simulate
from kernbench.bench.trace import chrome_trace, write_json_atomic
from kernbench.errors import ConfigError, ScriptError, SimulationLimitError, shown
from kernbench.files import SCRIPT_LIMIT, read_text, write_text
from kernbench.runtime import default_topology_path
from kernbench.topology import document_digest, load_topology_document
from kernbench.units import format_size_iec, format_time

__all__ = ["load_script", "run_script", "format_run_summary", "csv_text", "write_csv_atomic"]


def load_script(path: str | Path) -> Any:
    """Import a bench script by path (its ``__main__`` block does not run).

    The file is read with :func:`kernbench.files.read_text` (a regular UTF-8
    file of at most ``SCRIPT_LIMIT`` bytes) and compiled here, so a syntax error
    is a :class:`~kernbench.errors.ScriptError` saying file:line:col and the
    compiler's message, and anything the script raises while it is imported is
    one ``ScriptError`` naming the script and the line.  The script's directory
    is on ``sys.path`` while it is imported, so it can import modules beside it.
    """
    name = str(path)
    source = read_text(path, what="bench script", limit=SCRIPT_LIMIT)
    try:
        code = compile(source, name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno or 0
        column = f":{exc.offset}" if exc.offset else ""
        raise ScriptError(
            f"{shown(name)}:{line}{column}: syntax error: {shown(str(exc.msg))}", path=name
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        # Refused outright (a NUL byte), or too deeply nested for the compiler.
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ScriptError(
            f"{shown(name)}: cannot compile the bench script ({reason}); is an expression "
            "nested too deeply?",
            path=name,
        ) from None
    module = types.ModuleType(f"kernbench_script_{Path(name).stem}")
    module.__file__ = name
    # Registered as an import would be: dataclasses and pickling look classes up by module.
    sys.modules[module.__name__] = module
    directory = str(Path(name).parent.resolve())
    sys.path.insert(0, directory)
    try:
        exec(code, module.__dict__)
    except Exception as exc:  # noqa: BLE001 - any error of the script's own import
        sys.modules.pop(module.__name__, None)
        raise ScriptError(
            f"{shown(name)}:{_script_line(exc, name)}: importing the bench script raised "
            f"{type(exc).__name__}: {shown(str(exc))}",
            path=name,
            original=exc,
        ) from exc
    finally:
        with contextlib.suppress(ValueError):  # the script may have taken it off itself
            sys.path.remove(directory)
    return module


def _script_line(exc: BaseException, filename: str) -> int:
    """The line of ``filename`` that was running when ``exc`` was raised (its innermost frame)."""
    line = 0
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    return line


def _entry(module: Any, path: str) -> tuple[Callable[..., Any], bool]:
    if callable(getattr(module, "main", None)):
        return module.main, False
    if callable(getattr(module, "run", None)):
        return module.run, True
    raise ConfigError("the script defines neither main() nor run(rank, world_size)", source=path)


def _simulate_script(fn: Callable[..., Any], **kwargs: Any) -> SimResult:
    """simulate(), passing on a script's own sys.exit (argparse --help, a usage error)."""
    from kernbench.errors import RankError

    try:
        return simulate(fn, **kwargs)
    except RankError as exc:
        if isinstance(exc.original, SystemExit):
            raise exc.original from None
        raise


def run_script(
    script: str,
    *,
    topology: str | None = None,
    world_size: int | None = None,
    overrides: Sequence[str] = (),
    timing_only: bool = False,
    report_path: str | None = None,
    trace_path: str | None = None,
    csv_path: str | None = None,
    seed: int = 0,
    max_sim_time_ps: int | None = None,
    max_wall_s: float | None = None,
    script_args: Sequence[str] = (),
    echo: Callable[[str], None] = print,
) -> SimResult:
    """Run a bench script once per rank and write what was asked for.

    The outputs are checked before the script is even loaded (see
    :func:`kernbench.bench.outputs.check_outputs`) and written through
    :mod:`kernbench.files`.  When one of them goes to standard output, what
    the script prints goes to standard error, so that standard output carries
    that output alone.
    """
    topology_path = Path(topology) if topology else default_topology_path()
    outputs = {"report": report_path, "CSV": csv_path, "trace": trace_path}
    check_outputs(outputs, inputs=[script, topology_path])
    module = load_script(script)
    fn, rank_args = _entry(module, script)
    saved_argv = sys.argv
    sys.argv = [script, *script_args]
    to_stdout = any(writes_to_stdout(path) for path in outputs.values())
    try:
        with contextlib.redirect_stdout(sys.stderr) if to_stdout else contextlib.nullcontext():
            result = _simulate_script(
                fn,
                topology=topology_path,
                world_size=world_size,
                timing_only=timing_only,
                overrides=overrides,
                rank_args=rank_args,
                seed=seed,
                detail=bool(trace_path),
                max_sim_time_ps=max_sim_time_ps,
                max_wall_s=max_wall_s,
            )
    except SimulationLimitError as exc:
        if report_path and exc.report is not None:  # what happened before the stop is kept
            write_json_atomic(report_path, exc.report, what="partial report")
            echo(f"partial report: {report_path}")
        raise
    finally:
        sys.argv = saved_argv
    document = load_topology_document(topology_path)  # the file as written, before --set
    result.report["metadata"] = {
        "script": str(script),
        "script_sha256": hashlib.sha256(Path(script).read_bytes()).hexdigest()[:16],
        "script_args": list(script_args),
        "topology": result.report["topology"],
        "topology_file": str(topology_path),
        "topology_digest": document_digest(document),
        "overrides": list(overrides),
        "world_size": result.report["world_size"],
        "timing_only": timing_only,
        "seed": seed,
        "kernbench_version": __version__,
    }
    echo(format_run_summary(result))
    if report_path:
        write_json_atomic(report_path, result.report, what="report")
        echo(f"report: {report_path}")
    if csv_path:
        write_csv_atomic(csv_path, result.report.get("results", []), result.report["metadata"])
        echo(f"csv: {csv_path}")
    if trace_path:
        trace = chrome_trace(
            result.trace,
            detail=result.detail,
            edges=result.context.machine.graph.edges,
            metadata=result.report,
        )
        write_json_atomic(trace_path, trace, what="trace")
        echo(f"trace: {trace_path}")
    return result


def csv_text(rows: Sequence[dict], metadata: dict | None = None) -> str:
    """Rows as CSV (columns in order of first appearance; units are in the column names).

    Metadata columns (topology, digest, overrides, version, seed) are appended to
    every row so that a CSV stands on its own.
    """
    extra = {}
    if metadata:
        extra = {
            "topology": metadata.get("topology", ""),
            "topology_file": metadata.get("topology_file", ""),
            "topology_digest": metadata.get("topology_digest", ""),
            "overrides": " ".join(metadata.get("overrides", [])),
            "seed": metadata.get("seed", ""),
            "kernbench_version": metadata.get("kernbench_version", ""),
        }
    columns: list[str] = []
    for row in rows:
        for key in (*row, *extra):
            if key not in columns:
                columns.append(key)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns or list(extra), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, **extra})
    return buffer.getvalue()


def write_csv_atomic(path: str | Path, rows: Sequence[dict], metadata: dict | None = None) -> None:
    """:func:`csv_text` written with :func:`kernbench.files.write_text`."""
    write_text(path, csv_text(rows, metadata), what="CSV")


# Up to this many ranks the summary lists every rank's time; beyond, a digest.
LISTED_RANKS = 16


def _per_rank_line(times: Sequence[int]) -> str:
    if len(times) <= LISTED_RANKS:
        return "per-rank time: " + ", ".join(format_time(t) for t in times)
    ordered = sorted(range(len(times)), key=lambda r: (times[r], r))
    fastest, slowest = ordered[0], ordered[-1]
    median = times[ordered[len(ordered) // 2]]
    return (
        f"per-rank time: min {format_time(times[fastest])} (rank {fastest}), median "
        f"{format_time(median)}, max {format_time(times[slowest])} (rank {slowest}) "
        f"over {len(times)} ranks (every rank's time: --report)"
    )


def _share(part: int | float, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "0.0%"


def _busy_line(what: str, component: dict, elapsed_ps: int) -> str:
    return (
        f"{what}: {component['name']} busy {format_time(component['busy_ps'])} "
        f"({_share(component['busy_ps'], elapsed_ps)} of the run)"
    )


def _collective_lines(report: dict, elapsed_ps: int) -> list[str]:
    """The headline: the collectives' own time, what they were, and the busiest fabric link."""
    calls = report.get("collectives") or []
    if not calls:
        return []
    by_op: dict[str, int] = {}
    for call in calls:
        by_op[call["op"]] = by_op.get(call["op"], 0) + 1
    in_flight = report.get("collective_time_ps", 0)
    lines = [
        f"collectives: {format_time(in_flight)} in flight ({_share(in_flight, elapsed_ps)} of "
        f"the run) over {len(calls)} calls: "
        + ", ".join(f"{op} {count}" for op, count in by_op.items())
    ]
    fabric = report.get("busiest_fabric_component")
    if fabric:
        lines.append("  " + _busy_line("busiest link outside the host links", fabric, elapsed_ps))
    return lines


def _host_lines(report: dict, elapsed_ps: int) -> list[str]:
    """Everything else: host fills and reads, value checks, kernels, and the host links."""
    calls = report.get("collectives") or []
    if not calls:
        return []
    outside = max(0, elapsed_ps - report.get("collective_time_ps", 0))
    lines = [
        f"outside collectives: {format_time(outside)} ({_share(outside, elapsed_ps)} of the "
        "run: host fills and reads, value checks, kernels)"
    ]
    host = report.get("busiest_host_link")
    if host:
        lines.append(
            "  "
            + _busy_line("busiest host link", host, elapsed_ps)
            + f", {format_size_iec(host['bytes'])} moved"
        )
    return lines


def format_run_summary(result: SimResult) -> str:
    """What ``kernbench run`` prints after the script: the collectives' time first.

    The first lines are the collectives' own time (from each call's launch to
    its end, overlaps counted once: :func:`kernbench.bench.simulate.collective_time_ps`)
    and the busiest link outside the host links; then the rest of the run
    (host fills and reads, checks, kernels) and the host links apart; then the
    simulated time, per-rank times, bytes per link class and the busiest
    component of the whole run.  Sizes are IEC with 4 significant digits.
    """
    report = result.report
    elapsed = result.elapsed_ps
    lines = _collective_lines(report, elapsed)
    lines.append(
        f"simulated time: {format_time(elapsed)} ({elapsed} ps) on "
        f"{report['topology']}, {report['world_size']} ranks"
        + (" (timing-only)" if report["timing_only"] else "")
    )
    lines.append(_per_rank_line(result.per_rank_ps))
    lines += _host_lines(report, elapsed)
    if report["bytes_by_link_class"]:
        lines.append(
            "bytes moved per link class: "
            + ", ".join(
                f"{name} {format_size_iec(nbytes)}"
                for name, nbytes in report["bytes_by_link_class"].items()
            )
        )
    busiest = report.get("busiest_component")
    if busiest:
        lines.append(_busy_line("busiest component of the whole run", busiest, elapsed))
    return "\n".join(lines)
