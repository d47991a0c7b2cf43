"""Per-run collective settings: the catalogue, per-op choices, install plans.

``--set ccl.<op>=<config>`` (or ``ccl.all=<config>``) overrides the
catalogue's default for a run; ``--set ccl.tune_table=PATH`` makes ``auto``
use a table measured by ``kernbench tune``.  As every ``--set``, ``null`` (or
``~``) removes the setting: the catalogue's default holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kernbench.ccl.algorithms import OPS
from kernbench.ccl.catalogue import AlgorithmConfig, Catalogue, load_catalogue
from kernbench.errors import ConfigError
from kernbench.runtime import RuntimeContext
from kernbench.topology import parse_override

__all__ = ["CclSettings", "ccl_settings", "use_settings", "split_overrides", "named_tune_table"]

# The key of the collectives' settings among a run context's extensions.
EXTENSION = "ccl"


def named_tune_table(overrides: Iterable[str]) -> str | None:
    """The file the last ``ccl.tune_table=PATH`` of ``overrides`` names (as the run reads
    it), or None; an input of the run, like its topology."""
    path = None
    for text in overrides:
        key, sep, value = text.partition("=")
        if sep and key == "ccl.tune_table":
            path = None if _removes(text) else value or None
    return path


def _removes(text: str) -> bool:
    """Whether the override ``key=value`` removes its key: a YAML null (``null``, ``~``),
    as ``--set key.path=null`` does for topologies and the catalogue."""
    value = text.partition("=")[2]
    return bool(value.strip()) and parse_override(text)[1] is None


def split_overrides(overrides: Iterable[str]) -> tuple[list[str], list[str]]:
    """(topology overrides, ``ccl.*`` overrides without their prefix)."""
    topology, ccl = [], []
    for text in overrides:
        (ccl if text.startswith("ccl.") else topology).append(text.removeprefix("ccl."))
    return topology, ccl


@dataclass
class CclSettings:
    catalogue: Catalogue
    choices: dict[str, str] = field(default_factory=dict)
    tune_table: str | None = None
    plans: dict[tuple, Any] = field(default_factory=dict)

    def choice(self, op: str) -> str:
        return self.choices.get(op) or self.catalogue.defaults.algorithm.get(op, "auto")

    def resolve(self, choice: str) -> tuple[str, AlgorithmConfig]:
        return self.catalogue.resolve(choice)

    @classmethod
    def from_overrides(
        cls, overrides: Iterable[str] = (), catalogue_path: str | None = None
    ) -> CclSettings:
        choices: dict[str, str] = {}
        catalogue_overrides: list[str] = []
        tune_table = None
        for text in overrides:
            key, sep, value = text.partition("=")
            if not sep:
                raise ConfigError(f"override ccl.{text!r} must look like ccl.KEY=VALUE")
            if key in (*OPS, "all", "tune_table") and _removes(text):
                if key == "all":
                    choices.clear()
                elif key == "tune_table":
                    tune_table = None
                else:
                    choices.pop(key, None)
            elif key == "all":
                choices.update(dict.fromkeys(OPS, value))
            elif key in OPS:
                choices[key] = value
            elif key == "tune_table":
                # Fixed now: auto reads the file again when it changes, and a script that
                # changes directory (os.chdir) must not make a relative path name another.
                tune_table = os.path.abspath(value) if value and "\x00" not in value else value
            else:
                catalogue_overrides.append(text)
        catalogue = load_catalogue(catalogue_path, catalogue_overrides)
        settings = cls(catalogue, choices, tune_table or catalogue.defaults.tune_table)
        for op, value in choices.items():
            if value != "auto":
                try:
                    settings.resolve(value)
                except Exception as exc:
                    raise ConfigError(str(exc), key_path=f"ccl.{op}", source="--set") from None
        return settings


def ccl_settings(ctx: RuntimeContext) -> CclSettings:
    """The context's collective settings (the bundled catalogue unless a run set others)."""
    settings = ctx.extensions.get(EXTENSION)
    if settings is None:
        settings = ctx.extensions[EXTENSION] = CclSettings.from_overrides()
    return settings


def use_settings(ctx: RuntimeContext, settings: CclSettings) -> None:
    """Make ``settings`` the collective settings of the run ``ctx`` belongs to."""
    ctx.extensions[EXTENSION] = settings
