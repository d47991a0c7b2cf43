"""Read a topology YAML into a validated :class:`Topology`.

Handles ``extends:`` (a file builds on another and overrides parts of it),
``key.path=value`` overrides from the command line, and turns every
validation failure into a :class:`~kernbench.errors.ConfigError` whose
message names the key path and says what would be valid.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from kernbench.errors import ConfigError
from kernbench.topology.schema import KeyedValueError, Topology

__all__ = [
    "load_topology",
    "load_topology_document",
    "parse_override",
    "apply_overrides",
    "validate_topology",
    "document_digest",
    "format_validation_error",
]


class _StrictLoader(yaml.SafeLoader):
    """A safe loader that refuses a key written twice in one mapping."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
            )
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError("file not found", source=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", source=str(path)) from None
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"invalid YAML{where}: {problem}", source=str(path)) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(
            f"the top level must be a mapping of keys, not a {type(document).__name__}",
            source=str(path),
        )
    return document


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; any other value in ``override`` replaces."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_topology_document(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's mapping with every ``extends:`` resolved (not yet validated)."""
    path = Path(path).resolve()
    if path in _seen:
        chain = " -> ".join(str(p) for p in (*_seen, path))
        raise ConfigError(f"extends: cycle {chain}", key_path="extends", source=str(path))
    document = _read_yaml(path)
    parent = document.pop("extends", None)
    if parent is None:
        return document
    if not isinstance(parent, str):
        raise ConfigError(
            f"must be the path of another topology file (got {parent!r})",
            key_path="extends",
            source=str(path),
        )
    parent_path = (path.parent / parent).resolve()
    if not parent_path.exists():
        raise ConfigError(f"file {parent!r} not found", key_path="extends", source=str(path))
    base = load_topology_document(parent_path, (*_seen, path))
    return deep_merge(base, document)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"system.sips.count=4"`` -> (["system", "sips", "count"], 4)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {text!r} must look like key.path=value")
    parts = key.split(".")
    if any(not part for part in parts):
        raise ConfigError(f"override {text!r} has an empty key in {key!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return parts, value


def apply_overrides(document: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides in order to a copy of ``document``."""
    result = copy.deepcopy(dict(document))
    for text in overrides:
        parts, value = parse_override(text)
        node: Any = result
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                at = ".".join(parts[: depth + 1])
                raise ConfigError(
                    f"override {text!r}: {at} is a value ({child!r}), not a section",
                    key_path=at,
                    source="--set",
                )
            node = child
        node[parts[-1]] = value
    return result


def _model_at(loc: tuple[Any, ...], root: type[BaseModel] = Topology) -> type[BaseModel] | None:
    model: type[BaseModel] = root
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _describe(error: dict[str, Any], root: type[BaseModel] = Topology) -> str:
    loc = tuple(error["loc"])
    kind = error["type"]
    given = error.get("input")
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1], root)
        valid = ", ".join(parent.model_fields) if parent else "see the schema"
        return f"unknown key {loc[-1]!r}; valid keys here: {valid}"
    if kind == "missing":
        return "required key is missing"
    if kind in ("greater_than", "greater_than_equal"):
        bound = error.get("ctx", {}).get("gt", error.get("ctx", {}).get("ge"))
        op = ">" if kind == "greater_than" else ">="
        return f"must be {op} {bound} (got {given!r})"
    if kind == "literal_error":
        return f"{given!r} is not valid; expected {error['ctx']['expected']}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number (got {given!r})"
    if kind == "model_type" or kind == "dict_type":
        return f"expected a section of keys (got {given!r})"
    if kind == "bool_type" or kind == "bool_parsing":
        return f"expected true or false (got {given!r})"
    message = error["msg"]
    return message.removeprefix("Value error, ")


def _path(error: dict[str, Any]) -> str:
    parts = [str(part) for part in error["loc"]]
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, KeyedValueError):
        parts.append(cause.subpath)
    return ".".join(parts)


def format_validation_error(
    exc: ValidationError, source: str, root: type[BaseModel] = Topology
) -> ConfigError:
    errors = exc.errors()
    lines = [f"{_path(error) or '<top>'}: {_describe(error, root)}" for error in errors]
    first_path = _path(errors[0])
    message = lines[0] if len(lines) == 1 else "\n  ".join(["invalid configuration:", *lines])
    err = ConfigError(message, source=source)
    err.key_path = first_path
    return err


def validate_topology(document: Mapping[str, Any], source: str = "<topology>") -> Topology:
    try:
        return Topology.model_validate(dict(document))
    except ValidationError as exc:
        raise format_validation_error(exc, source) from None


def document_digest(document: Mapping[str, Any]) -> str:
    """A stable content hash of a resolved document (for reports and caches)."""
    canonical = json.dumps(document, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def load_topology(path: str | Path, overrides: Iterable[str] = ()) -> Topology:
    """Load, resolve ``extends:``, apply overrides and validate a topology file."""
    document = apply_overrides(load_topology_document(path), overrides)
    return validate_topology(document, source=str(path))
