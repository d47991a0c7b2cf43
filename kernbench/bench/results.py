"""Reading results files: run reports, sweep summaries and CSV files of result rows.

:func:`load_rows` gives the rows of any of them (what ``regress`` compares and
``plot`` draws); :func:`load_report` a whole run report (``plot --breakdown``).
Every file is read with :func:`kernbench.files.read_text` (a regular UTF-8
file of at most :data:`~kernbench.files.RESULTS_LIMIT` bytes), and whatever
is not a well-formed results file is a one-line
:class:`~kernbench.errors.ConfigError` naming it: a row that is not an object,
a JSON object with a key twice, a CSV header with a column twice, a CSV row
longer or shorter than its header or a quote never closed (each naming the
line), nesting deeper than :data:`MAX_DEPTH`, an integer of more digits than
Python converts.

A CSV cell is a number only when written as JSON writes one (``1_000`` and
``+5`` stay text); NaN and the infinities only in the spellings of
:data:`NON_FINITE_CELLS`, which KernBench writes; another spelling is an error
naming the line and column (ADR 0009).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from kernbench.errors import ConfigError, shown
from kernbench.files import RESULTS_LIMIT, read_text

__all__ = [
    "MAX_DEPTH",
    "NON_FINITE_CELLS",
    "is_report",
    "kind_of",
    "load_report",
    "load_rows",
    "read_document",
]

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


# A number as JSON writes one (and Python's csv module writes int and float):
# no "1_000", " 12", "+3", "007" or "١٢", which int() and float() would take.
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
#: The spellings of NaN and the infinities KernBench writes: reports and sweeps
#: (``"NaN"``, see :func:`kernbench.bench.trace.json_text`) and Python's csv module
#: (``kernbench run --csv``).  Any other spelling float() takes is an error.
NON_FINITE_CELLS = {
    "NaN": math.nan,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
}


def _cell(text: str, where: str, path: Path) -> Any:
    """A CSV cell as the value JSON would have held: bool, int, float or text.

    ``where`` (line and column) is for the error a cell that cannot be read gives.
    """
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    if text in NON_FINITE_CELLS:
        return NON_FINITE_CELLS[text]
    if _INTEGER.fullmatch(text):
        try:
            return int(text)
        except ValueError:  # more digits than Python converts
            raise ConfigError(
                f"{where}: an integer of {len(text)} digits, more than can be read",
                source=str(path),
            ) from None
    if _NUMBER.fullmatch(text):
        number = float(text)
        if not math.isfinite(number):
            raise ConfigError(
                f"{where}: {shown(text, 40)!r} is too large for a number", source=str(path)
            )
        return number
    try:
        odd = not math.isfinite(float(text))
    except ValueError:
        odd = False
    if odd:  # 'NAN', 'Inf', '+inf', 'infinity': not a spelling KernBench writes
        raise ConfigError(
            f"{where}: {shown(text, 40)!r} is not a number KernBench reads; NaN and the "
            "infinities are written NaN, Infinity and -Infinity (or nan, inf and -inf)",
            source=str(path),
        )
    return text


def _csv_rows(path: Path) -> list[dict[str, Any]]:
    text = read_text(path, what="results file", limit=RESULTS_LIMIT)
    # strict: a quote that is never closed, or text after a closing quote, is an error
    # (the lax reader would take the rest of the file into one cell).
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 0  # where the record being read starts, less one
    # A cell may be as long as the file (a result's list of samples, as a run's --csv
    # writes it), not only the csv module's default 128KiB; the file's size is bounded.
    field_limit = csv.field_size_limit(max(csv.field_size_limit(), RESULTS_LIMIT))
    try:
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
        line = reader.line_num
        for cells in reader:
            start, line = line + 1, reader.line_num
            if not cells:  # a blank line
                continue
            if len(cells) != len(header):  # a stray or missing comma shifts every value
                raise ConfigError(
                    f"line {start}: CSV row {len(rows) + 1} has {len(cells)} "
                    f"cell{'s' if len(cells) != 1 else ''} but the header has "
                    f"{len(header)} columns",
                    source=str(path),
                )
            at = f"line {start} (row {len(rows) + 1})"
            rows.append(
                {
                    name: _cell(value, f"{at}, column {shown(name, 60)!r}", path)
                    for name, value in zip(header, cells, strict=True)
                    if name and value != ""
                }
            )
        return rows
    except csv.Error as exc:
        problem = (
            "a quoted cell is never closed (the file ends inside it)"
            if "unexpected end of data" in str(exc)
            else f"not readable as CSV ({exc})"
        )
        raise ConfigError(f"line {line + 1}: {problem}", source=str(path)) from None
    finally:
        csv.field_size_limit(field_limit)


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
