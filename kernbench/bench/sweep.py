"""``kernbench sweep``: run one bench over the product of topologies, ``--set`` values and args.

A sweep file names a bench, a list of topologies, ``--set`` keys with lists of
values and bench flags with lists of values; every combination is a *point*.
A point's id is the first 16 hex digits of the sha256 of what the point runs:
the bench and topology files by resolved path, the ``--set`` overrides and
bench arguments as the text the run receives, world size, timing-only, seed.
The driver writes each finished point to ``OUTPUT/points/<id>.json``
(atomically) the moment it arrives.  A re-run skips points whose file is a
valid ``ok`` record of that point for the same bench and topology contents
(:mod:`kernbench.bench.sweep_records`) and runs the others again.  At the end
it writes ``results.csv``, ``summary.json`` and a plot.

Every point runs in a child process of its own (:mod:`kernbench.bench.executors`),
locally or on Dask; :func:`run_point` is what the child runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import sys
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictBool, ValidationError, model_validator

from kernbench import files
from kernbench.bench.outputs import check_outputs
from kernbench.bench.runner import write_csv_atomic
from kernbench.bench.sweep_records import (
    IDENTITY_KEYS,
    move_aside,
    not_regular,
    point_record,
    remove_stale_temporaries,
    stored_record,
)
from kernbench.bench.trace import json_text
from kernbench.ccl.settings import named_tune_table
from kernbench.errors import ConfigError, KernBenchError, OutputFileError, shown
from kernbench.topology.quantities import Time
from kernbench.topology.schema import KeyedValueError
from kernbench.units import PS_PER_S
from kernbench.validation import StrictModel

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

#: What a point's child process runs (``module:function``).
POINT_TARGET = "kernbench.bench.sweep:run_point"


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


def _text(value: Any) -> str:
    """A value as the run receives it: ``--set key=<text>``, ``--flag <text>``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _arg_words(value: Any) -> tuple[str, ...] | None:
    """What a flag's value puts after the flag: true -> nothing, false -> no flag at all."""
    if value is True:
        return ()
    if value is False:
        return None
    return (_text(value),)


def _unique(values: list[Any], as_received: Callable[[Any], Any]) -> list[Any]:
    if not values:
        raise ValueError("needs at least one value")
    seen: dict[Any, Any] = {}
    for value in values:
        received = as_received(value)
        if received in seen:
            text = received if isinstance(received, str) else " ".join(received or ("(absent)",))
            same = "" if seen[received] == value else f" (as {seen[received]!r} and {value!r})"
            raise ValueError(
                f"{text!r} appears twice{same}; the run receives the same text, so it would "
                "run the same points twice"
            )
        seen[received] = value
    return values


def _values(values: list[Any]) -> list[Any]:
    return _unique(values, lambda value: json.dumps(value))


def _set_values(values: list[Any]) -> list[Any]:
    return _unique(values, _text)


def _arg_values(values: list[Any]) -> list[Any]:
    return _unique(values, _arg_words)


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
SetValues = Annotated[list[Scalar], AfterValidator(_set_values)]
ArgValues = Annotated[list[Scalar], AfterValidator(_arg_values)]


#: Points of one sweep (the product of its values): at a second a point, 28 hours.
MAX_POINTS = 100_000


class SweepFile(StrictModel):
    """A sweep: ``bench`` and ``topologies`` are paths relative to the sweep file."""

    bench: str = Field(description="Bench script to run at every point.")
    topologies: Annotated[list[str], AfterValidator(_values)] = Field(
        description="Topology files; every point runs on one."
    )
    set: Annotated[dict[str, SetValues], AfterValidator(_set_keys)] = Field(
        default_factory=dict, description="--set key -> values; the product is taken."
    )
    args: Annotated[dict[str, ArgValues], AfterValidator(_flags)] = Field(
        default_factory=dict,
        description="Bench flag -> values; the product is taken (true: the flag alone, "
        "false: left out).",
    )
    # Strict: YAML's true is not a count (pydantic would take it as 1).
    world_size: int | None = Field(
        default=None, strict=True, gt=0, description="Ranks (default: all devices)."
    )
    timing_only: StrictBool = Field(default=True, description="Carry sizes, not bytes.")
    seed: int = Field(
        default=0,
        strict=True,
        ge=-(1 << 63),
        le=(1 << 64) - 1,  # torch.manual_seed's range
        description="Seed of every rank's random generator.",
    )
    output: str | None = Field(
        default=None, min_length=1, description="Output directory (default out/<stem>)."
    )
    trace: StrictBool = Field(default=False, description="Write a Chrome trace per point.")
    max_wall_time: Time | None = Field(
        default=None,
        gt=0,
        description="Stop a point that runs longer than this ('10min'); it is recorded failed.",
    )

    @model_validator(mode="after")
    def _points_fit(self) -> SweepFile:
        """The product is counted before it is built: a sweep of 10^10 points is an error,
        not gigabytes of memory before the first point runs."""
        sizes = [("topologies", len(self.topologies))]
        sizes += [(f"set.{key}", len(values)) for key, values in self.set.items()]
        sizes += [(f"args.{flag}", len(values)) for flag, values in self.args.items()]
        count = math.prod(n for _, n in sizes)
        if count > MAX_POINTS:
            largest = max(sizes, key=lambda item: item[1])[0]
            shape = " x ".join(f"{n} {name}" for name, n in sizes)
            raise KeyedValueError(
                largest,
                f"the sweep has {count} points ({shape}); at most {MAX_POINTS}: split it into "
                "several sweeps or take fewer values",
            )
        return self


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
    problem = files.regular_file_problem(base / sweep.bench)
    if problem:
        raise ConfigError(
            f"bench script {shown(sweep.bench)!r} {problem}", key_path="bench", source=str(path)
        )
    seen: dict[tuple[int, int], int] = {}
    for index, topology in enumerate(sweep.topologies):
        problem = files.regular_file_problem(base / topology)
        if problem:
            raise ConfigError(
                f"topology file {shown(topology)!r} {problem} (paths are relative to the sweep "
                "file)",
                key_path=f"topologies.{index}",
                source=str(path),
            )
        info = (base / topology).stat()
        first = seen.setdefault((info.st_dev, info.st_ino), index)
        if first != index:
            raise ConfigError(
                f"{topology!r} is the same file as topologies.{first} "
                f"({sweep.topologies[first]!r}); it would run the same points twice",
                key_path=f"topologies.{index}",
                source=str(path),
            )
    return sweep


def point_id(identity: dict[str, Any]) -> str:
    """First 16 hex digits of the sha256 of a point's identity as canonical JSON."""
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _file_sha256(path: Path) -> str:
    data = files.read_bytes(path, what="bench script", limit=files.SCRIPT_LIMIT)
    return hashlib.sha256(data).hexdigest()


def _topology_digest(path: Path) -> str | None:
    """The digest ``kernbench run`` reports (``extends:`` resolved), else of the bytes."""
    from kernbench.topology import document_digest, load_topology_document

    try:
        return document_digest(load_topology_document(path))
    except KernBenchError:
        pass  # the point reports the error when it runs
    try:
        data = files.read_bytes(path, what="topology file", limit=files.CONFIG_LIMIT)
    except KernBenchError:
        return None
    return "bytes:" + hashlib.sha256(data).hexdigest()[:16]


def _tune_table_digest(overrides: list[str]) -> str | None:
    """The content hash of the tune table a point's ``--set ccl.tune_table=PATH`` names, or
    None: no table, or one the point will report it cannot read.  A relative path is
    the run's, relative to the working directory."""
    path = named_tune_table(overrides)
    if path is None:
        return None
    try:
        data = files.read_bytes(path, what="tune table", limit=files.CONFIG_LIMIT)
    except KernBenchError:
        return None
    return hashlib.sha256(data).hexdigest()[:16]


def expand_points(
    sweep: SweepFile, sweep_path: str | Path, output: str | Path, *, trace: bool
) -> list[dict[str, Any]]:
    """Every point of the sweep as a plain dict (what :func:`run_point` takes), in a stable order.

    The id covers :data:`~kernbench.bench.sweep_records.IDENTITY_KEYS`: what the
    run receives, not how the sweep file spells it nor where the output goes.
    ``bench_sha256``, ``topology_digest`` and ``tune_table_sha256`` record the
    files' contents, which decide whether a stored result is still valid.
    """
    base = Path(sweep_path).resolve().parent
    output = Path(output).resolve()
    bench_path = (base / sweep.bench).resolve()
    bench_sha256 = _file_sha256(bench_path)
    set_keys, arg_flags = list(sweep.set), list(sweep.args)
    points = []
    for topology in sweep.topologies:
        topology_path = (base / topology).resolve()
        topology_digest = _topology_digest(topology_path)
        for set_values in itertools.product(*sweep.set.values()):
            for arg_values in itertools.product(*sweep.args.values()):
                set_ = dict(zip(set_keys, set_values, strict=True))
                args = dict(zip(arg_flags, arg_values, strict=True))
                script_args: list[str] = []
                for flag, value in args.items():
                    words = _arg_words(value)
                    if words is not None:
                        script_args += [flag, *words]
                overrides = [f"{key}={_text(v)}" for key, v in set_.items()]
                point = {
                    "bench_path": str(bench_path),
                    "topology_path": str(topology_path),
                    "overrides": overrides,
                    "script_args": script_args,
                    "world_size": sweep.world_size,
                    "timing_only": sweep.timing_only,
                    "seed": sweep.seed,
                }
                pid = point_id({key: point[key] for key in IDENTITY_KEYS})
                points.append(
                    {
                        "id": pid,
                        "label": " ".join([Path(topology).stem, *overrides, *script_args]),
                        "bench": sweep.bench,
                        "topology": topology,
                        "set": set_,
                        "args": args,
                        **point,
                        "bench_sha256": bench_sha256,
                        "topology_digest": topology_digest,
                        "tune_table_sha256": _tune_table_digest(overrides),
                        "trace_path": str(output / "traces" / f"{pid}.json") if trace else None,
                        "max_wall_s": None
                        if sweep.max_wall_time is None
                        else sweep.max_wall_time / PS_PER_S,
                    }
                )
    return points


def run_point(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one point in this process (a sweep's child); the point's own errors are recorded.

    Returns ``{"status": "ok", "report": ...}`` or ``{"status": "failed",
    "error": ...}`` (plus ``"traceback"`` when the error is a bug rather than a
    KernBench error).  What the bench prints goes to this process's stdout and
    stderr, whose tails the driver keeps.  A bench that exits (``sys.exit``,
    argparse) or dies ends the process; the driver records that.
    """
    from kernbench.bench.runner import run_script

    try:
        result = run_script(
            spec["bench_path"],
            topology=spec["topology_path"],
            world_size=spec["world_size"],
            overrides=spec["overrides"],
            timing_only=spec["timing_only"],
            trace_path=spec["trace_path"],
            seed=spec["seed"],
            script_args=spec["script_args"],
            max_wall_s=spec.get("max_wall_s"),
            echo=lambda _text: None,
            rows_kept=True,
        )
    except Exception as exc:
        failed = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        if not isinstance(exc, KernBenchError):
            failed["traceback"] = traceback.format_exc()
        return failed
    return {"status": "ok", "report": result.report}


@dataclass
class SweepOutcome:
    """What a sweep run did and where it wrote it."""

    output: Path
    points: int
    ok: int
    skipped: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)


def _topology_names(topologies: list[str]) -> dict[str, str]:
    """File stems when they tell the topologies apart (they read better), else paths as written."""
    stems = {topology: Path(topology).stem for topology in topologies}
    unique = len(set(stems.values())) == len(set(topologies))
    return stems if unique else {topology: topology for topology in topologies}


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


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _check_output_directory(output: Path) -> None:
    """OUTPUT is a directory, a symlink to one, or nothing yet (it is made)."""
    try:
        is_directory = output.is_dir()
    except OSError:  # a loop of links, a name too long: mkdir below says what
        return
    problem = None
    if output.is_symlink() and not output.exists():
        problem = "is a symbolic link to nothing"
    elif output.exists() and not is_directory:
        problem = "is not a directory"
    if problem:
        raise OutputFileError(
            f"the sweep output {problem}; --output (or output: in the sweep file) names "
            "a directory, made if missing",
            path=str(output),
        )


def _input_files(sweep: SweepFile, sweep_path: Path) -> list[str]:
    """The files a sweep reads: itself, its bench, its tune tables, its topologies and what
    they extend."""
    from kernbench.topology import load_topology_sources

    base = sweep_path.resolve().parent
    inputs = [str(sweep_path), str(base / sweep.bench)]
    tables = sweep.set.get("ccl.tune_table", [])
    inputs += [str(table) for table in tables if isinstance(table, str) and table]
    for topology in sweep.topologies:
        try:
            inputs += load_topology_sources(base / topology)[1]
        except KernBenchError:  # its points report what is wrong with it
            inputs.append(str(base / topology))
    return inputs


def _prepare_output(output: Path, inputs: list[str]) -> Path:
    """Make OUTPUT/points and refuse, before anything runs, outputs that cannot be written
    or that would replace one of the sweep's ``inputs``."""
    _check_output_directory(output)
    names = ("summary.json", "results.csv", "busbw.png")
    check_outputs({name: output / name for name in names}, inputs=inputs)
    points_dir = output / "points"
    files.check_output_target(points_dir / "x.json", what="point file")
    try:
        points_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFileError(
            f"cannot make the points directory: {exc.strerror}", path=str(points_dir)
        ) from None
    if not points_dir.is_dir():
        raise OutputFileError("is not a directory", path=str(points_dir))
    return points_dir


def _stored_points(
    points: list[dict[str, Any]], points_dir: Path, warn: Callable[[str], None]
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The valid, current ok records on disk by point id, the points to run, and the
    ok records of those run again only for a trace (kept if that run fails).

    A stale record gets a note, an unusable file a warning; what is not a
    regular file is moved aside so that the new record can be written.
    """
    records: dict[str, dict[str, Any]] = {}
    for_trace: dict[str, dict[str, Any]] = {}
    pending = []
    for point in points:
        path = points_dir / f"{point['id']}.json"
        stored = stored_record(path, point)
        done = stored.record is not None and stored.record["status"] == "ok" and not stored.stale
        trace = point["trace_path"]
        if done and (trace is None or Path(trace).is_file()):
            records[point["id"]] = stored.record
            continue
        pending.append(point)
        # What is not a regular file (a symlink to this point's record too) cannot be
        # replaced by the new record: moved aside before the point runs, not found after.
        aside = f"; moved aside to {move_aside(path)}" if not_regular(path) else ""
        if done:  # --trace asked for a trace this point has not got
            for_trace[point["id"]] = stored.record
            warn(f"note: {point['label']} ({point['id']}): no trace yet; running it again{aside}")
            continue
        if stored.stale:
            note = f"note: {point['label']} ({point['id']}): {stored.stale}{aside}"
            warn(f"{note}; running it again")
        elif stored.problem or aside:
            problem = stored.problem or f"{path}: is not a regular file"
            warn(f"warning: {problem}{aside}; running the point again")
    return records, pending, for_trace


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
    warn: Callable[[str], None] = _stderr,
) -> SweepOutcome:
    """Run every point not already done, then write results.csv, summary.json and a plot.

    ``executor`` is "local" (``jobs`` child processes at a time) or "dask" (the
    default when a ``scheduler`` address is given).  ``output``, ``trace`` and
    ``timing_only`` override the sweep file when not None.  ``warn`` gets the
    warnings and notes about stored point files.  Raises
    :class:`SweepInterrupted` on Ctrl-C (after stopping the points that ran).
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
    if output is not None and not str(output):
        raise OutputFileError(
            "--output is empty; name the sweep's output directory (made if missing)", path=""
        )
    if output is None:
        output = (
            sweep_path.resolve().parent / sweep.output
            if sweep.output
            else Path("out") / sweep_path.stem
        )
    output = Path(output)
    points = expand_points(sweep, sweep_path, output, trace=trace)
    points_dir = _prepare_output(output, _input_files(sweep, sweep_path))
    for point in points:  # a trace that could not be written would fail a point late
        if point["trace_path"] is not None:
            files.check_output_target(point["trace_path"], what="trace")
    # Two sweeps writing one output would run the same points twice, and race on them.
    with files.exclusive_lock(output / ".lock", what=f"sweep output {output}"):
        return _run_points(
            sweep, sweep_path, points, points_dir, output, jobs, executor, scheduler, progress,
            echo, warn,
        )  # fmt: skip


def _run_points(
    sweep: SweepFile,
    sweep_path: Path,
    points: list[dict[str, Any]],
    points_dir: Path,
    output: Path,
    jobs: int,
    executor: str,
    scheduler: str | None,
    progress: bool,
    echo: Callable[[str], None],
    warn: Callable[[str], None],
) -> SweepOutcome:
    from kernbench.bench import executors

    remove_stale_temporaries(points_dir)
    remove_stale_temporaries(output / "traces")

    records, pending, for_trace = _stored_points(points, points_dir, warn)
    skipped = len(records)
    echo(
        f"sweep: {len(points)} points, {skipped} already done (skipped), "
        f"{len(pending)} to run; output {output}"
    )

    if executor == "dask" and pending:
        keys = [f"point-{p['id']}-{uuid.uuid4().hex[:8]}" for p in pending]
        workers = jobs if scheduler else min(jobs, len(pending))  # a local cluster's size
        results = executors.run_dask(POINT_TARGET, pending, workers, scheduler, keys=keys)
    else:
        results = executors.run_local(POINT_TARGET, pending, min(jobs, max(len(pending), 1)))

    failures = 0
    bar = _progress(len(points), skipped, progress)
    bar.set_postfix(failed=failures)
    try:
        with contextlib.closing(results):
            for point, outcome in results:
                record = point_record(point, outcome)
                path = points_dir / f"{point['id']}.json"
                kept = for_trace.get(point["id"])
                if kept is not None and record["status"] != "ok":
                    # run again only for its trace: its result stays, the failure is told
                    warn(
                        f"warning: {point['label']} ({point['id']}): its trace could not be "
                        f"made ({record.get('error', 'failed')}); its result is kept"
                    )
                    records[point["id"]] = kept
                    if not os.path.lexists(path):  # a link moved aside: the record goes back
                        files.write_text(path, json_text(kept), what="point file")
                    bar.update(1)
                    continue
                files.write_text(path, json_text(record), what="point file")
                records[point["id"]] = record
                if record["status"] != "ok":
                    failures += 1
                    bar.set_postfix(failed=failures)
                bar.update(1)
        bar.close()
        return _finish(sweep, sweep_path, points, records, output, skipped, echo)
    except KeyboardInterrupt:
        bar.close()
        done = sum(record["status"] == "ok" for record in records.values())
        raise SweepInterrupted(done, len(points)) from None
    finally:  # the bar's line ends before any error is printed after it
        bar.close()


def _finish(
    sweep: SweepFile,
    sweep_path: Path,
    points: list[dict[str, Any]],
    records: dict[str, dict[str, Any]],
    output: Path,
    skipped: int,
    echo: Callable[[str], None],
) -> SweepOutcome:
    """Gather this sweep's point records into results.csv, summary.json and a plot."""
    set_keys, flags = list(sweep.set), list(sweep.args)
    names = _topology_names(sweep.topologies)
    rows: list[dict[str, Any]] = []
    failed = []
    ok = 0
    for point in points:
        record = records.get(point["id"])
        if record is not None and record["status"] == "ok":
            ok += 1
            rows += _results(point, record, names[point["topology"]], set_keys, flags)
            continue
        failure = {"id": point["id"], "label": point["label"], "error": "not run"}
        if record is not None:
            failure.update(
                error=record["error"],
                exit_status=record.get("exit_status"),
                signal=record.get("signal"),
            )
        failed.append(failure)
    write_csv_atomic(output / "results.csv", rows)
    summary = {
        "sweep": str(sweep_path),
        "points": len(points),
        "ok": ok,
        "failed": failed,
        "rows": rows,
    }
    files.write_text(output / "summary.json", json_text(summary), what="sweep summary")
    echo(f"results: {output / 'results.csv'} ({len(rows)} rows)")
    echo(f"summary: {output / 'summary.json'}")
    _plot(rows, output / "busbw.png", ["topology", *set_keys, *flags], echo)
    for failure in failed:
        echo(f"failed: {failure['label']} ({failure['id']}): {shown(failure['error'], 1000)}")
    echo(f"points: {ok} ok, {len(failed)} failed, of {len(points)} ({skipped} done before)")
    return SweepOutcome(output, len(points), ok, skipped, failed, rows)
