"""Read a topology YAML into a validated :class:`Topology`.

Handles ``extends:`` (a file builds on another and overrides parts of it; a
chain may be at most :data:`MAX_EXTENDS_DEPTH` files long), ``key.path=value``
overrides from the command line, and turns every validation failure into a
:class:`~kernbench.errors.ConfigError` whose message names the key path and
says what would be valid.  Files are read by :mod:`kernbench.yamlfile`, so
they are bounded and strict the same way every configuration is.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernbench.errors import ConfigError, InputFileError, shown
from kernbench.topology.bundled import bundled_path, resolve_topology_path
from kernbench.topology.schema import Topology
from kernbench.validation import format_validation_error, shown_value
from kernbench.yamlfile import MAX_DEPTH, YamlSyntaxError, load_yaml_mapping, parse_yaml

__all__ = [
    "MAX_EXTENDS_DEPTH",
    "load_topology",
    "load_topology_document",
    "load_topology_sources",
    "parse_override",
    "apply_overrides",
    "override_texts",
    "validate_topology",
    "document_digest",
    "topology_digest",
    "format_validation_error",
]

#: Files in one ``extends:`` chain (the file itself included).  Real chains are
#: two or three long; the limit stops a runaway chain of thousands of files.
MAX_EXTENDS_DEPTH = 32


def _read_topology_file(path: str, *, extended_by: str | None = None) -> dict[str, Any]:
    if extended_by is None:
        return load_yaml_mapping(path, what="topology file")
    try:
        return load_yaml_mapping(path, what="topology file")
    except InputFileError as exc:
        # The parent cannot be read: say so where the child names it.
        raise ConfigError(str(exc), key_path="extends", source=extended_by) from None


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; ``null`` removes the key; any other value replaces.

    Removing is how a file that extends another drops a key its parent wrote that
    would mean nothing in the child (``interconnect.link`` when the child is
    ``kind: clos``): the schema refuses such keys.
    """
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_topology_document(path: str | Path) -> dict[str, Any]:
    """The file's mapping with every ``extends:`` resolved (not yet validated).

    ``path`` may also name a bundled machine (:mod:`kernbench.topology.bundled`).
    """
    return _extends_chain(path)[0]


def load_topology_sources(path: str | Path) -> tuple[dict[str, Any], list[str]]:
    """:func:`load_topology_document`, and the files it was read from: the file (or
    bundled machine) and every file its ``extends:`` chain names, as real paths
    (what an output must not replace)."""
    return _extends_chain(path)


def _extends_chain(path: str | Path) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(path, str | os.PathLike):
        # str() of any object is some path: say what a topology is named by instead
        raise ConfigError(
            f"a topology is named by a file's path or a bundled machine's name (got "
            f"{type(path).__name__} {shown_value(path)})",
            source="topology",
        )
    name = str(path)
    if "\x00" not in name:
        name = str(resolve_topology_path(name))
    chain: list[dict[str, Any]] = []
    seen: list[str] = []
    extended_by: str | None = None
    while True:
        if "\x00" in name:
            if extended_by is None:
                raise InputFileError("topology file path contains a NUL character", path=name)
            raise ConfigError(
                "the path contains a NUL character", key_path="extends", source=extended_by
            )
        resolved = os.path.realpath(name)
        if resolved in seen:
            cycle = " -> ".join(shown(p) for p in (*seen, resolved))
            raise ConfigError(f"cycle {cycle}", key_path="extends", source=name)
        if len(seen) == MAX_EXTENDS_DEPTH:
            raise ConfigError(
                f"the extends chain from {shown(seen[0])} is more than {MAX_EXTENDS_DEPTH} "
                "files long",
                key_path="extends",
                source=extended_by or name,
            )
        seen.append(resolved)
        document = _read_topology_file(name, extended_by=extended_by)
        parent = document.pop("extends", None)
        chain.append(document)
        if parent is None:
            break
        if not isinstance(parent, str):
            raise ConfigError(
                f"must be the path of another topology file (got {shown_value(parent)})",
                key_path="extends",
                source=name,
            )
        extended_by = name
        name = os.path.join(os.path.dirname(resolved), parent)
        if not os.path.lexists(name) and len(Path(parent).parts) == 1:
            bundled = bundled_path(parent)  # extends: default.yaml, from anywhere
            name = name if bundled is None else str(bundled)
    document = chain.pop()
    while chain:
        document = deep_merge(document, chain.pop())
    return document, seen


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"system.sips.count=4"`` -> (["system", "sips", "count"], 4).

    The value is read as YAML (bounded as files are); text that is not YAML at
    all stays a string.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(
            f"override {shown(repr(text), 100)} must look like key.path=value", source="--set"
        )
    parts = key.split(".")
    if any(not part for part in parts):
        raise ConfigError(
            f"override {shown(repr(text), 100)} has an empty key in {shown(repr(key), 100)}",
            source="--set",
        )
    if len(parts) > MAX_DEPTH:
        raise ConfigError(
            f"override key {shown(repr(key), 100)} is {len(parts)} keys deep; at most {MAX_DEPTH}",
            source="--set",
        )
    if not raw.strip():
        return parts, ""
    try:
        value = parse_yaml(raw, source=f"--set {shown(key, 100)}")
    except YamlSyntaxError:
        value = raw
    return parts, value


def override_texts(overrides: Iterable[str] | None) -> tuple[str, ...]:
    """``overrides`` (``None``, or a list of ``key.path=value`` texts) as a tuple.

    One text instead of a list (which would be read character by character), or an
    item that is not a text, is a :class:`~kernbench.errors.ConfigError`.
    """
    if overrides is None:
        return ()
    if isinstance(overrides, str | bytes):
        raise ConfigError(
            f"overrides are a list of 'key.path=value' texts, not one text "
            f"({shown_value(overrides)}); give [{shown_value(overrides)}]",
            source="--set",
        )
    try:
        texts = tuple(overrides)
    except TypeError:
        raise ConfigError(
            f"overrides are a list of 'key.path=value' texts (got {type(overrides).__name__} "
            f"{shown_value(overrides)})",
            source="--set",
        ) from None
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ConfigError(
                f"override {index} must be a 'key.path=value' text (got {type(text).__name__} "
                f"{shown_value(text)})",
                source="--set",
            )
    return texts


def apply_overrides(document: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides in order to a copy of ``document``.

    A ``null`` value (``key.path=null``, or ``~``) removes the key, as in a file
    that ``extends:`` another.
    """
    result = copy.deepcopy(dict(document))
    for text in override_texts(overrides):
        parts, value = parse_override(text)
        node: Any = result
        for depth, part in enumerate(parts):
            at = ".".join(parts[:depth])
            if depth and (part.isdigit() or isinstance(node, list)):
                # No section of a topology is named by a number: an index into a list.
                raise ConfigError(
                    f"override {shown(repr(text), 100)}: {shown(at, 100)} is a list, and --set "
                    f"does not index lists; give the whole list: --set {shown(at, 100)}=[...] "
                    "(in YAML flow style, e.g. [NW, NE] or [{link: ..., slowdown: 2}])",
                    key_path=at,
                    source="--set",
                )
            if depth == len(parts) - 1:
                break
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict | list):
                at = ".".join(parts[: depth + 1])
                raise ConfigError(
                    f"override {shown(repr(text), 100)}: {shown(at, 100)} is a value "
                    f"({shown_value(child)}), not a section",
                    key_path=at,
                    source="--set",
                )
            node = child
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return result


def validate_topology(document: Mapping[str, Any], source: str = "<topology>") -> Topology:
    try:
        return Topology.model_validate(dict(document))
    except ValidationError as exc:
        raise format_validation_error(exc, source, Topology) from None


def document_digest(document: Mapping[str, Any]) -> str:
    """A stable content hash of a resolved document (for reports and caches)."""
    canonical = json.dumps(document, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def topology_digest(topology: Topology) -> str:
    """A stable content hash of a validated machine: equal for equal machines.

    Units are parsed and defaults filled, so ``"1us"`` and ``"1000ns"``, or a
    default written out and left out, give the same digest.  Tune tables
    record it to check that they are used on the machine they measured.  How
    the machine is simulated (``simulation``) is not part of the machine.
    """
    return document_digest(topology.model_dump(mode="json", exclude={"simulation"}))


def load_topology(path: str | Path, overrides: Iterable[str] = ()) -> Topology:
    """Load, resolve ``extends:``, apply overrides and validate a topology file."""
    document = apply_overrides(load_topology_document(path), overrides)
    return validate_topology(document, source=str(path))
