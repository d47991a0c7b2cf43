"""``kernbench sweep``: run one bench over the product of topologies, ``--set`` values and args.

A sweep file names a bench, a list of topologies, ``--set`` keys with lists of
values and bench flags with lists of values; every combination is a *point*.
A point has a stable id (the first 16 hex digits of the sha256 of its
canonical JSON) so that a re-run finds what an earlier run finished: the
driver writes each finished point to ``OUTPUT/points/<id>.json`` (atomically)
the moment it arrives, skips points whose file says ``ok`` and retries failed
ones.  At the end it writes ``results.csv``, ``summary.json`` and a plot.

Points run through :mod:`kernbench.bench.executors` (in process, a local
process pool, or Dask); :func:`run_point` is the picklable unit of work.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from kernbench.bench.runner import write_csv_atomic
from kernbench.bench.trace import write_json_atomic
from kernbench.errors import ConfigError, KernBenchError
from kernbench.topology.schema import KeyedValueError

__all__ = [
    "SweepFile",
    "SweepError",
    "SweepInterrupted",
    "SweepOutcome",
    "load_sweep",
    "expand_points",
    "point_id",
    "run_point",
    "run_sweep",
]


class SweepError(KernBenchError):
    """Some points of a sweep failed (each one's error is in its point file)."""


class SweepInterrupted(KernBenchError):
    """The sweep was interrupted; ``done`` of ``total`` points are on disk."""

    def __init__(self, done: int, total: int) -> None:
        self.done = done
        self.total = total
        super().__init__(f"interrupted: {done} of {total} points done; run again to resume")


def _scalar(value: Any) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    raise ValueError(f"expected a string, number or true/false (got {value!r})")


def _values(values: list[Any]) -> list[Any]:
    if not values:
        raise ValueError("needs at least one value")
    seen = set()
    for value in values:
        canonical = json.dumps(value)
        if canonical in seen:
            raise ValueError(f"{value!r} appears twice (it would run the same points twice)")
        seen.add(canonical)
    return values


def _set_keys(values: dict[str, Any]) -> dict[str, Any]:
    for key in values:
        if not key or any(not part for part in key.split(".")) or "=" in key:
            raise KeyedValueError(
                key, f"{key!r} is not a --set key like ccl.all_reduce or system.sips.count"
            )
    return values


def _flags(values: dict[str, Any]) -> dict[str, Any]:
    for flag in values:
        if not flag.startswith("-") or flag.strip("-") == "":
            raise KeyedValueError(
                flag, f"{flag!r} is not a flag; bench flags start with '-' (like -b, --algorithm)"
            )
    return values


Scalar = Annotated[Any, AfterValidator(_scalar)]
Values = Annotated[list[Scalar], AfterValidator(_values)]


class SweepFile(BaseModel):
    """A sweep: ``bench`` and ``topologies`` are paths relative to the sweep file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bench: str = Field(description="Bench script to run at every point.")
    topologies: Annotated[list[str], AfterValidator(_values)] = Field(
        description="Topology files; every point runs on one."
    )
    set: Annotated[dict[str, Values], AfterValidator(_set_keys)] = Field(
        default_factory=dict, description="--set key -> values; the product is taken."
    )
    args: Annotated[dict[str, Values], AfterValidator(_flags)] = Field(
        default_factory=dict,
        description="Bench flag -> values; the product is taken (true: the flag alone, "
        "false: left out).",
    )
    world_size: int | None = Field(default=None, gt=0, description="Ranks (default: all devices).")
    timing_only: bool = Field(default=True, description="Carry sizes, not bytes.")
    seed: int = Field(default=0, description="Seed of every rank's random generator.")
    output: str | None = Field(default=None, description="Output directory (default out/<stem>).")
    trace: bool = Field(default=False, description="Write a Chrome trace per point.")


def load_sweep(path: str | Path) -> SweepFile:
    """Read and validate a sweep file; errors name the key path."""
    from kernbench.validation import format_validation_error
    from kernbench.yamlfile import load_yaml_mapping

    path = Path(path)
    document = load_yaml_mapping(path, what="sweep file")
    try:
        sweep = SweepFile.model_validate(document)
    except ValidationError as exc:
        raise format_validation_error(exc, str(path), SweepFile) from None
    base = path.resolve().parent
    if not (base / sweep.bench).is_file():
        raise ConfigError(
            f"bench script {sweep.bench!r} not found", key_path="bench", source=str(path)
        )
    for index, topology in enumerate(sweep.topologies):
        if not (base / topology).is_file():
            raise ConfigError(
                f"topology file {topology!r} not found (paths are relative to the sweep file)",
                key_path=f"topologies.{index}",
                source=str(path),
            )
    return sweep


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def point_id(point: dict[str, Any]) -> str:
    """First 16 hex digits of the sha256 of the point's canonical JSON."""
    canonical = json.dumps(point, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def expand_points(
    sweep: SweepFile, sweep_path: str | Path, output: str | Path, *, trace: bool
) -> list[dict[str, Any]]:
    """Every point of the sweep as a plain dict (what :func:`run_point` takes), in a stable order.

    The id covers what defines a point (bench and topology as written, set
    values, args, world size, timing-only, seed), not where it runs or writes.
    """
    base = Path(sweep_path).resolve().parent
    output = Path(output).resolve()
    set_keys, arg_flags = list(sweep.set), list(sweep.args)
    points = []
    for topology in sweep.topologies:
        for set_values in itertools.product(*sweep.set.values()):
            for arg_values in itertools.product(*sweep.args.values()):
                defining = {
                    "bench": sweep.bench,
                    "topology": topology,
                    "set": dict(zip(set_keys, set_values, strict=True)),
                    "args": dict(zip(arg_flags, arg_values, strict=True)),
                    "world_size": sweep.world_size,
                    "timing_only": sweep.timing_only,
                    "seed": sweep.seed,
                }
                pid = point_id(defining)
                script_args: list[str] = []
                for flag, value in defining["args"].items():
                    if value is True:
                        script_args.append(flag)
                    elif value is not False:
                        script_args += [flag, _text(value)]
                overrides = [f"{key}={_text(v)}" for key, v in defining["set"].items()]
                label = " ".join([Path(topology).stem, *overrides, *script_args])
                points.append(
                    {
                        **defining,
                        "id": pid,
                        "label": label,
                        "bench_path": str((base / sweep.bench).resolve()),
                        "topology_path": str((base / topology).resolve()),
                        "overrides": overrides,
                        "script_args": script_args,
                        "trace_path": str(output / "traces" / f"{pid}.json") if trace else None,
                    }
                )
    return points


# run_script swaps sys.argv and the current context, which are per process: threads
# of one Dask worker process take turns.
_RUN_LOCK = threading.Lock()


def run_point(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one point; the point's own errors are recorded, not raised.

    What the bench prints (stdout and stderr, the last 10,000 characters) is
    kept under ``"output"``: an ``argparse`` complaint is there, for instance.
    """
    from kernbench.bench.runner import run_script

    start = time.perf_counter()
    output = io.StringIO()
    with _RUN_LOCK:
        try:
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                result = run_script(
                    spec["bench_path"],
                    topology=spec["topology_path"],
                    world_size=spec["world_size"],
                    overrides=spec["overrides"],
                    timing_only=spec["timing_only"],
                    trace_path=spec["trace_path"],
                    seed=spec["seed"],
                    script_args=spec["script_args"],
                    echo=lambda _text: None,
                )
        except Exception as exc:
            if isinstance(getattr(exc, "original", None), KeyboardInterrupt):
                # Ctrl-C while a rank ran (-j 1): the ranks' scheduler wrapped it.
                raise KeyboardInterrupt from exc
            failed = {
                "point": spec,
                "status": "failed",
                "error": f"{type(exc).__name__}: {exc}",
                "wall_s": time.perf_counter() - start,
                "output": output.getvalue()[-10_000:],
            }
            if not isinstance(exc, KernBenchError):
                failed["traceback"] = traceback.format_exc()
            return failed
    return {
        "point": spec,
        "status": "ok",
        "report": result.report,
        "wall_s": time.perf_counter() - start,
        "output": output.getvalue()[-10_000:],
    }


@dataclass
class SweepOutcome:
    """What a sweep run did and where it wrote it."""

    output: Path
    points: int
    ok: int
    skipped: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def _read_point(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _topology_names(topologies: list[str]) -> dict[str, str]:
    """File stems when they tell the topologies apart (they read better), else paths as written."""
    stems = {topology: Path(topology).stem for topology in topologies}
    unique = len(set(stems.values())) == len(set(topologies))
    return stems if unique else {topology: topology for topology in topologies}


def _is_ok(path: Path) -> bool:
    record = _read_point(path)
    return bool(record) and record.get("status") == "ok"


def _results(
    point: dict[str, Any],
    record: dict[str, Any],
    topology: str,
    set_keys: list[str],
    flags: list[str],
) -> list[dict[str, Any]]:
    columns: dict[str, Any] = {"topology": topology}
    columns.update({key: point["set"][key] for key in set_keys})
    columns.update({flag: point["args"][flag] for flag in flags})
    columns["point_id"] = point["id"]
    report = record["report"]
    rows = report.get("results") or [{"simulated_time_ps": report["simulated_time_ps"]}]
    # A bench column named like a point column keeps its value under "result.<name>".
    return [
        {**columns, **{(f"result.{k}" if k in columns else k): v for k, v in row.items()}}
        for row in rows
    ]


def _group_by(rows: list[dict[str, Any]], columns: list[str], x: str) -> list[str]:
    """Point columns that vary and give every value the same x values (so are curves, not x)."""
    groups = []
    for column in columns:
        xs_by_value: dict[str, set] = {}
        for row in rows:
            xs_by_value.setdefault(json.dumps(row.get(column)), set()).add(row.get(x))
        if len(xs_by_value) > 1 and len({frozenset(v) for v in xs_by_value.values()}) == 1:
            groups.append(column)
    return groups


def _plot(
    rows: list[dict[str, Any]], out_png: Path, columns: list[str], echo: Callable[[str], None]
) -> None:
    x, y = "size_B", "busbw_GBps"
    rows = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    if not rows:
        return
    try:
        from kernbench.bench.plot import plot_results
    except ImportError:
        return
    try:
        plot_results(rows, str(out_png), x=x, y=y, group_by=_group_by(rows, columns, x) or None)
    except Exception as exc:  # a plot is a convenience; the numbers are already on disk
        echo(f"warning: no plot ({type(exc).__name__}: {exc})")
        return
    echo(f"plot: {out_png}")


def _progress(total: int, initial: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        unit="pt",
        desc="sweep",
        file=sys.stderr,
        disable=not enabled,
        dynamic_ncols=True,
    )


def run_sweep(
    sweep_path: str | Path,
    *,
    jobs: int = 1,
    executor: str | None = None,
    scheduler: str | None = None,
    output: str | Path | None = None,
    trace: bool | None = None,
    timing_only: bool | None = None,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> SweepOutcome:
    """Run every point not already done, then write results.csv, summary.json and a plot.

    ``executor`` is "local" (a process pool; ``jobs == 1`` runs in this process) or
    "dask" (the default when a ``scheduler`` address is given).  ``output``,
    ``trace`` and ``timing_only`` override the sweep file when not None.
    Raises :class:`SweepInterrupted` on Ctrl-C (after stopping the workers).
    """
    from kernbench.bench import executors

    executor = executor or ("dask" if scheduler else "local")
    if jobs < 1:
        raise ConfigError(f"-j/--jobs must be at least 1 (got {jobs})")
    if executor not in executors.EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}; valid: {', '.join(executors.EXECUTORS)}")
    if scheduler and executor != "dask":
        raise ConfigError(f"--scheduler is for --executor dask (got --executor {executor})")
    sweep_path = Path(sweep_path)
    sweep = load_sweep(sweep_path)
    if timing_only is not None:
        sweep = sweep.model_copy(update={"timing_only": timing_only})
    trace = sweep.trace if trace is None else trace
    if output is None:
        output = (
            sweep_path.resolve().parent / sweep.output
            if sweep.output
            else Path("out") / sweep_path.stem
        )
    output = Path(output)
    points_dir = output / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    points = expand_points(sweep, sweep_path, output, trace=trace)

    done = {p["id"] for p in points if _is_ok(points_dir / f"{p['id']}.json")}
    pending = [p for p in points if p["id"] not in done]
    skipped = len(done)
    echo(
        f"sweep: {len(points)} points, {skipped} already done (skipped), "
        f"{len(pending)} to run; output {output}"
    )

    if not pending:
        results: Iterator[dict] = executors.run_in_process(run_point, [])
    elif executor == "dask":
        keys = [f"point-{p['id']}-{uuid.uuid4().hex[:8]}" for p in pending]
        results = executors.run_dask(run_point, pending, jobs, scheduler, keys=keys)
    elif jobs == 1 or len(pending) <= 1:
        results = executors.run_in_process(run_point, pending)
    else:
        results = executors.run_local_pool(run_point, pending, min(jobs, len(pending)))

    failures = 0
    bar = _progress(len(points), len(done), progress)
    bar.set_postfix(failed=failures)
    try:
        with contextlib.closing(results):
            for record in results:
                pid = record["point"]["id"]
                write_json_atomic(points_dir / f"{pid}.json", record)
                if record["status"] != "ok":
                    failures += 1
                    bar.set_postfix(failed=failures)
                bar.update(1)
    except KeyboardInterrupt:
        bar.close()
        on_disk = sum(_is_ok(points_dir / f"{p['id']}.json") for p in points)
        raise SweepInterrupted(on_disk, len(points)) from None
    bar.close()
    return _finish(sweep, sweep_path, points, output, skipped, echo)


def _finish(
    sweep: SweepFile,
    sweep_path: Path,
    points: list[dict[str, Any]],
    output: Path,
    skipped: int,
    echo: Callable[[str], None],
) -> SweepOutcome:
    """Gather every point file of this sweep into results.csv, summary.json and a plot."""
    set_keys, flags = list(sweep.set), list(sweep.args)
    names = _topology_names(sweep.topologies)
    rows: list[dict[str, Any]] = []
    failed = []
    ok = 0
    for point in points:
        record = _read_point(output / "points" / f"{point['id']}.json")
        if record and record.get("status") == "ok":
            ok += 1
            rows += _results(point, record, names[point["topology"]], set_keys, flags)
        else:
            error = record.get("error", "not run") if record else "not run"
            failed.append({"id": point["id"], "label": point["label"], "error": error})
    write_csv_atomic(output / "results.csv", rows)
    summary = {
        "sweep": str(sweep_path),
        "points": len(points),
        "ok": ok,
        "failed": failed,
        "rows": rows,
    }
    write_json_atomic(output / "summary.json", summary)
    echo(f"results: {output / 'results.csv'} ({len(rows)} rows)")
    echo(f"summary: {output / 'summary.json'}")
    _plot(rows, output / "busbw.png", ["topology", *set_keys, *flags], echo)
    for failure in failed:
        echo(f"failed: {failure['label']} ({failure['id']}): {failure['error']}")
    return SweepOutcome(output, len(points), ok, skipped, failed, rows)
