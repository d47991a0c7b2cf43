"""The algorithm catalogue (``ccl/ccl.yaml``): named algorithm configurations.

Each configuration names its algorithm module, the world size it is for (or
none: whatever the group has), where received data lands (``tcm``, ``sram``,
``hbm``), how many pieces each chunk is cut into for pipelining (``chunks``;
left out, the tuner picks the count per call from the cost model), the IPCQ
queue depth, and algorithm parameters.  ``defaults`` chooses a configuration
(or ``auto``: the tuner) per op.  The file is validated like a topology:
unknown keys and bad values are errors naming the key path, and every
configuration's ``params`` are checked against what its algorithm declares
(:class:`~kernbench.ccl.algorithms.Params`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from kernbench.ccl.ops import COLLECTIVE_OPS
from kernbench.errors import ConfigError, DistributedError, shown
from kernbench.topology import apply_overrides
from kernbench.topology.limits import MAX_PES
from kernbench.units import MAX_QUANTITY
from kernbench.validation import (
    KeyedValueError,
    StrictModel,
    describe_error,
    error_path,
    format_validation_error,
    shown_value,
)
from kernbench.yamlfile import load_yaml_mapping

__all__ = ["AlgorithmConfig", "Catalogue", "load_catalogue", "default_catalogue_path"]

Buffer = Literal["tcm", "sram", "hbm"]
OpName = Literal[COLLECTIVE_OPS]


class AlgorithmConfig(StrictModel):
    module: str = Field(description="algorithm name in the registry (kernbench.ccl.algorithms)")
    # Strict: YAML's true is not a count (pydantic would take it as 1).
    world_size: int | None = Field(
        None, strict=True, gt=0, le=MAX_PES, description="ranks it is for; none: any"
    )
    buffer: Buffer = Field("hbm", description="where received data lands")
    chunks: int | None = Field(
        None,
        strict=True,
        gt=0,
        le=MAX_QUANTITY,
        description="pieces per chunk for pipelining; none: the cost model's choice per call",
    )
    queue_depth: int | None = Field(
        None, strict=True, gt=0, le=MAX_QUANTITY, description="IPCQ slots; none: the topology's"
    )
    params: dict[str, Any] = Field(default_factory=dict, description="algorithm parameters")
    description: str = ""


class Defaults(StrictModel):
    algorithm: dict[OpName, str] = Field(
        default_factory=dict, description="configuration (or 'auto') per op"
    )
    tune_table: str | None = Field(None, description="a `kernbench tune` table for auto")


class Catalogue(StrictModel):
    defaults: Defaults = Defaults()
    configs: dict[str, AlgorithmConfig]

    @model_validator(mode="after")
    def _known(self) -> Catalogue:
        from kernbench.ccl.algorithms import algorithms

        known = algorithms()
        for name, config in self.configs.items():
            if config.module not in known:
                raise KeyedValueError(
                    f"configs.{name}.module",
                    f"unknown algorithm {shown_value(config.module)}; known: "
                    f"{', '.join(sorted(known))}",
                )
            algorithm = known[config.module]
            if config.world_size and any(
                algorithm.requires and algorithm.requires(op, config.world_size)
                for op in algorithm.ops
            ):
                raise KeyedValueError(
                    f"configs.{name}.world_size",
                    f"{config.module} cannot run on {config.world_size} ranks",
                )
            _check_params(name, config, algorithm.params)
        for op, choice in self.defaults.algorithm.items():
            if choice != "auto" and choice not in self.configs and choice not in known:
                raise KeyedValueError(
                    f"defaults.algorithm.{op}",
                    f"{shown_value(choice)} is neither a configuration nor an algorithm; use "
                    "one of the configs, an algorithm name or 'auto'",
                )
        return self

    def resolve(self, choice: str) -> tuple[str, AlgorithmConfig]:
        """A configuration by name, or an algorithm name with default settings."""
        if choice in self.configs:
            return choice, self.configs[choice]
        from kernbench.ccl.algorithms import algorithms

        known = algorithms()
        if choice not in known:
            names = sorted({*self.configs, *known})
            raise DistributedError(
                f"unknown collective algorithm {shown_value(choice)}; use a configuration or "
                f"an algorithm ({', '.join(names)}) or 'auto'"
            )
        return choice, AlgorithmConfig(module=choice)


def _check_params(name: str, config: AlgorithmConfig, declared: type[BaseModel]) -> None:
    """``config.params`` against what its algorithm declares; errors name the param."""
    try:
        declared.model_validate(config.params, context={"world_size": config.world_size})
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        at = error_path(error)
        raise KeyedValueError(
            f"configs.{name}.params" + (f".{at}" if at else ""),
            f"{config.module}: {describe_error(error, declared)}",
        ) from None


def default_catalogue_path() -> Path:
    """The bundled catalogue (package data beside this module)."""
    return Path(__file__).resolve().parent / "ccl.yaml"


def load_catalogue(path: str | Path | None = None, overrides: Iterable[str] = ()) -> Catalogue:
    """Load and validate a catalogue; ``overrides`` are ``key.path=value`` as for topologies."""
    path = Path(path) if path else default_catalogue_path()
    overrides = list(overrides)
    document = apply_overrides(load_yaml_mapping(path, what="catalogue"), overrides)
    try:
        return Catalogue.model_validate(document)
    except ValidationError as exc:
        error = format_validation_error(exc, str(path), Catalogue)
    # A value an override gave is the override's fault, not the file's: name --set.
    at = error.key_path
    given = [text.partition("=")[0] for text in overrides]
    if at and any(k == at or k.startswith(f"{at}.") or at.startswith(f"{k}.") for k in given):
        prefix = f"{shown(str(path))}: {at}: "
        text = str(error)
        message = text.removeprefix(prefix)
        raise ConfigError(message, key_path=f"ccl.{at}", source="--set") from None
    raise error from None
