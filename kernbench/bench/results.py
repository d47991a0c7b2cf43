"""Reading results files: run reports, sweep summaries and CSV files of result rows.

:func:`load_rows` gives the rows of any of them (what ``regress`` compares and
``plot`` draws); :func:`load_report` a whole run report (``plot --breakdown``).
Every file is read with :func:`kernbench.files.read_text` (a regular UTF-8
file of at most :data:`~kernbench.files.RESULTS_LIMIT` bytes), and whatever
is not a well-formed results file is a one-line
:class:`~kernbench.errors.ConfigError` naming it: a row that is not an object,
a JSON object with a key twice, a CSV header with a column twice or a row
longer than its header, nesting deeper than :data:`MAX_DEPTH`, an integer of
more digits than Python converts.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

from kernbench.errors import ConfigError, shown
from kernbench.files import RESULTS_LIMIT, read_text

__all__ = ["MAX_DEPTH", "is_report", "kind_of", "load_report", "load_rows", "read_document"]

#: How deep rows and metadata may nest (lists in lists...); reports nest about four deep.
MAX_DEPTH = 64


def _no_duplicate_names(path: Path) -> Any:
    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        document = dict(pairs)
        if len(document) != len(pairs):
            counts = Counter(name for name, _ in pairs)
            twice = next(name for name, n in counts.items() if n > 1)
            raise ConfigError(
                f"a JSON object has the key {shown(twice, 60)!r} twice; which one is meant?",
                source=str(path),
            )
        return document

    return pairs_hook


def _check_depth(value: Any, path: Path, where: str) -> None:
    """Refuse values nested deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(
                f"{where} is nested more than {MAX_DEPTH} levels deep", source=str(path)
            )
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


def read_document(path: str | Path) -> Any:
    """The JSON document in ``path``; ``None`` when the file is not JSON at all."""
    path = Path(path)
    text = read_text(path, what="results file", limit=RESULTS_LIMIT)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_names(path))
    except json.JSONDecodeError:
        return None
    except RecursionError:
        raise ConfigError("the JSON is nested too deeply to read", source=str(path)) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ConfigError(f"not valid JSON: {shown(str(exc))}", source=str(path)) from None


def is_report(document: Any) -> bool:
    return isinstance(document, dict) and "simulated_time_ps" in document and "topology" in document


def _is_summary(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("rows"), list)


def load_report(path: str | Path) -> dict[str, Any]:
    """A run report written by ``kernbench run --report``; anything else is an error."""
    path = Path(path)
    document = read_document(path)
    if not is_report(document):
        raise ConfigError(
            "not a run report (a JSON object with 'topology' and 'simulated_time_ps', "
            "as written by kernbench run --report)",
            source=str(path),
        )
    _check_depth(document, path, "the report")
    return document


def _cell(text: str) -> Any:
    """A CSV cell as the value JSON would have held: bool, int, float or text."""
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _csv_rows(path: Path) -> list[dict[str, Any]]:
    text = read_text(path, what="results file", limit=RESULTS_LIMIT)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, None)
        if not header or not any(header):
            raise ConfigError("CSV file has no header row", source=str(path))
        counts = Counter(name for name in header if name)
        twice = next((name for name, n in counts.items() if n > 1), None)
        if twice is not None:
            raise ConfigError(
                f"CSV header has the column {shown(twice, 60)!r} twice; which one is meant?",
                source=str(path),
            )
        rows = []
        for number, cells in enumerate(reader, 1):
            if len(cells) > len(header):  # a stray comma shifts every value after it
                raise ConfigError(
                    f"CSV row {number} has {len(cells)} cells but the header has "
                    f"{len(header)} columns",
                    source=str(path),
                )
            rows.append(
                {
                    name: _cell(value)
                    for name, value in zip(header, cells, strict=False)
                    if name and value != ""
                }
            )
        return rows
    except csv.Error as exc:
        raise ConfigError(f"not a readable CSV file: {exc}", source=str(path)) from None


def _run_row(report: dict[str, Any]) -> dict[str, Any]:
    row = {
        "row": "run",
        "topology": report["topology"],
        "world_size": report.get("world_size"),
        "timing_only": report.get("timing_only"),
        "simulated_time_ps": report["simulated_time_ps"],
    }
    # A partial report (--max-sim-time, --max-wall-time) timed a run that did not finish:
    # its time is where it stopped, not how long the run takes.
    if report.get("stopped"):
        row["error"] = report["stopped"]
    return row


def kind_of(value: Any) -> str:
    """What a value is, for messages: ``a list``, ``text 'abc'``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"text {shown(value, 40)!r}"
    return shown(repr(value), 40)


def _rows_of(entries: Any, path: Path, where: str) -> list[dict[str, Any]]:
    if not isinstance(entries, list):
        raise ConfigError(f"{where} is {kind_of(entries)}, not a list of rows", source=str(path))
    for number, row in enumerate(entries, 1):
        if not isinstance(row, dict):
            raise ConfigError(
                f"{where} row {number} is {kind_of(row)}, not an object of columns",
                source=str(path),
            )
    _check_depth(entries, path, where)
    return entries


def load_rows(path: str | Path, *, include_run: bool = False) -> list[dict[str, Any]]:
    """The result rows of a run report, a sweep summary or a CSV file.

    A report's rows get its topology as a ``topology`` column (unless a row has
    its own).  With ``include_run``, a report also gives one ``row="run"`` row
    holding the whole run's ``simulated_time_ps``, so that a report without
    result rows can still be compared; a partial report's (a run stopped by
    ``--max-sim-time`` or ``--max-wall-time``) has an ``error`` saying so.  A
    file that is none of these, that holds no rows, a row that is not an
    object, a JSON object with a key twice or a CSV header with a column twice
    is a :class:`~kernbench.errors.ConfigError` naming it.  Files are read with
    :func:`kernbench.files.read_text` (regular UTF-8 files up to
    :data:`~kernbench.files.RESULTS_LIMIT`).
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        rows = _csv_rows(path)
    else:
        document = read_document(path)
        if is_report(document):
            results = document.get("results")
            entries = _rows_of([] if results is None else results, path, "results")
            rows = [{"topology": document["topology"], **row} for row in entries]
            if include_run:
                rows.append(_run_row(document))
        elif _is_summary(document):
            rows = _rows_of(document["rows"], path, "rows")
        else:
            what = "JSON, but neither" if document is not None else "neither"
            raise ConfigError(
                f"{what} a run report (kernbench run --report), a sweep summary "
                "(summary.json with 'rows') nor a .csv file of result rows",
                source=str(path),
            )
    if not rows:
        raise ConfigError(
            "holds no result rows (a report has them only when the bench's main() "
            "returns a list of dicts)",
            source=str(path),
        )
    return rows
