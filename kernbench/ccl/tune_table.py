"""Tune tables: what ``kernbench tune`` writes and ``auto`` reads, validated like a topology.

A table says what it was measured on and what won::

    topology: ring8                 # the machine's name ...
    topology_digest: 3f2a...        # ... and kernbench.topology.topology_digest of it
    world_size: 8                   # ranks of the runs that measured it
    overrides: [...]                # the --set values of those runs
    configs:                        # each measured configuration's settings
      ring: {module: ring, buffer: hbm, chunks: null, queue_depth: null, params: {}, ...}
    results:                        # one row per op and message size
      - {op: all_reduce, world_size: 8, bytes: 4096, winner: recursive_doubling,
         times_ps: {ring: 20431, recursive_doubling: 10212}, predicted_ps: {...}}

:func:`load_tune_table` reads one (through :mod:`kernbench.yamlfile`: a
regular file, bounded, strict) into a frozen :class:`TuneTable`; unknown keys
and bad values are errors naming the key path.  :func:`check_tune_table`
refuses a table measured on another machine (name or digest) or another world
size, or whose winners the run's catalogue does not know or defines otherwise
than the table measured them (``configs``): its winners would mean nothing
there.  A table without ``configs`` (written before tables recorded them)
is not checked for the last.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, model_validator

from kernbench.ccl.catalogue import AlgorithmConfig, OpName
from kernbench.errors import ConfigError, shown
from kernbench.topology.limits import MAX_PES
from kernbench.units import MAX_QUANTITY
from kernbench.validation import KeyedValueError, StrictModel, format_validation_error, shown_value
from kernbench.yamlfile import load_yaml

__all__ = ["TuneRow", "TuneTable", "config_settings", "load_tune_table", "check_tune_table"]

_DIGEST = re.compile(r"[0-9a-f]{16}")
_RERUN = "run `kernbench tune` for this machine and world size"

Picoseconds = Annotated[int, Field(strict=True, ge=0, le=MAX_QUANTITY)]
WorldSize = Annotated[int, Field(strict=True, gt=0, le=MAX_PES)]


def _digest(value: str) -> str:
    if not _DIGEST.fullmatch(value):
        raise ValueError(
            f"must be 16 hexadecimal digits, as `kernbench tune` writes it (got "
            f"{shown_value(value)})"
        )
    return value


class TuneRow(StrictModel):
    """Every candidate's measured time for one op and message size, and the fastest."""

    op: OpName = Field(description="the collective measured")
    world_size: WorldSize = Field(description="ranks it was measured on")
    bytes: int = Field(strict=True, gt=0, le=MAX_QUANTITY, description="message size")
    winner: str = Field(description="the candidate auto runs at this size")
    times_ps: dict[str, Picoseconds] = Field(
        min_length=1, description="measured time per candidate configuration"
    )
    predicted_ps: dict[str, Picoseconds] = Field(
        default_factory=dict, description="the cost model's time per candidate"
    )

    @model_validator(mode="after")
    def _winner_was_measured(self) -> TuneRow:
        if self.winner not in self.times_ps:
            raise KeyedValueError(
                "winner",
                f"{shown_value(self.winner)} is not one of the measured candidates "
                f"({shown(', '.join(self.times_ps), 200)})",
            )
        return self


class TuneTable(StrictModel):
    """A whole table: what it was measured on, and its rows."""

    topology: str = Field(description="name of the machine it was measured on")
    topology_digest: Annotated[str, AfterValidator(_digest)] = Field(
        description="kernbench.topology.topology_digest of that machine"
    )
    world_size: WorldSize = Field(description="ranks of the runs that measured it")
    overrides: list[str] = Field(default_factory=list, description="their --set values")
    configs: dict[str, AlgorithmConfig] = Field(
        default_factory=dict, description="the settings of each configuration measured"
    )
    results: list[TuneRow] = Field(min_length=1, description="one row per op and size")

    @model_validator(mode="after")
    def _rows_agree(self) -> TuneTable:
        first: dict[tuple[str, int], int] = {}
        for index, row in enumerate(self.results):
            if row.world_size != self.world_size:
                raise KeyedValueError(
                    f"results.{index}.world_size",
                    f"is {row.world_size}, but the table is for world size {self.world_size}",
                )
            key = (row.op, row.bytes)
            if key in first:
                raise KeyedValueError(
                    f"results.{index}",
                    f"measures {row.op} at {row.bytes} bytes again (results.{first[key]} "
                    "does too); keep one row per op and size",
                )
            first[key] = index
        return self


def load_tune_table(path: str | Path) -> TuneTable:
    """Read and validate the tune table at ``path``; errors name the file and key path."""
    source = str(path)
    document = load_yaml(path, what="tune table")
    if not isinstance(document, dict):
        kind = "empty" if document is None else f"a {type(document).__name__}"
        raise ConfigError(
            f"the top level must be a mapping of keys, not {kind}; expected a table "
            "written by `kernbench tune`",
            source=source,
        )
    try:
        return TuneTable.model_validate(document)
    except ValidationError as exc:
        raise format_validation_error(exc, source, TuneTable) from None


def check_tune_table(
    table: TuneTable,
    source: str,
    *,
    topology_name: str,
    digest: str,
    world_size: int | None,
    choices: Mapping[str, AlgorithmConfig],
    known: Any,
) -> None:
    """Refuse ``table`` unless it was measured on this machine and world size.

    ``digest`` is :func:`~kernbench.topology.topology_digest` of the run's
    machine; ``world_size`` its rank count (``None``: not checked); every
    winner must be one of ``choices`` (the catalogue's configurations) or a
    name in ``known`` (the algorithms), and a configuration the table recorded
    must have the settings it was measured with.
    """
    if table.topology_digest != digest:
        if table.topology != topology_name:
            problem = (
                f"was measured on topology {shown_value(table.topology)}, but this run is on "
                f"{shown_value(topology_name)}"
            )
        else:
            problem = (
                f"was measured on another machine named {shown_value(topology_name)} "
                f"(topology digest {table.topology_digest}; this run's is {digest}: some key "
                "differs, a --set for instance)"
            )
        raise ConfigError(f"the tune table {problem}; {_RERUN}", source=source)
    if world_size is not None and table.world_size != world_size:
        raise ConfigError(
            f"the tune table was measured with world size {table.world_size}, but this run "
            f"has {world_size} ranks; {_RERUN} (--world-size {world_size})",
            key_path="world_size",
            source=source,
        )
    for index, row in enumerate(table.results):
        if row.winner not in choices and row.winner not in known:
            raise ConfigError(
                f"{shown_value(row.winner)} is neither a configuration of the run's catalogue "
                "nor an algorithm; measure with the catalogue you run with",
                key_path=f"results.{index}.winner",
                source=source,
            )
    for name in dict.fromkeys(row.winner for row in table.results):
        measured, current = table.configs.get(name), choices.get(name)
        if measured is None or current is None:
            continue
        before, now = config_settings(measured), config_settings(current)
        changed = [key for key in before if before[key] != now[key]]
        if changed:
            differences = "; ".join(
                f"{key} {shown_value(before[key])} then, {shown_value(now[key])} now"
                for key in changed
            )
            raise ConfigError(
                f"the tune table measured configuration {shown_value(name)} with other "
                f"settings than this run's catalogue gives it ({shown(differences, 300)}); "
                f"{_RERUN} and catalogue",
                key_path=f"configs.{name}",
                source=source,
            )


def config_settings(config: AlgorithmConfig) -> dict[str, Any]:
    """What decides a configuration's time (its description does not): what a table
    records under ``configs`` and compares with the run's catalogue."""
    return config.model_dump(mode="json", exclude={"description"})
