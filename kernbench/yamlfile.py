"""Reading the YAML a user hands in: topologies, catalogues, sweeps, tune tables, ``--set`` values.

One loader for every kind.  Files are read through :mod:`kernbench.files`
(regular files only, a size limit, UTF-8 only).  The loader is a safe one, and
stricter: a key written twice in one mapping, a key that is not a plain
value (``? [a, b]: 1``), or a ``!!set`` (whose order changes from one process
to the next) is an error.  It bounds the work a small document can
cause: collections nest at most :data:`MAX_DEPTH` levels, and aliases may add
at most :data:`MAX_ALIAS_NODES` nodes to the document ("billion laughs", 500
bytes that expand to 10^9 strings, is refused at the first alias past the
budget, before anything is built).

Every failure is a :class:`~kernbench.errors.ConfigError` (an
:class:`~kernbench.errors.InputFileError` when the file cannot be read) naming
the source, line and column.  No error echoes the document's text: a syntax
error gives its position and the parser's problem, a document of the wrong
kind only its type.

Plain scalars are read by YAML 1.2's core schema, not PyYAML's YAML 1.1: ``010``
is ten (1.1: eight, octal), ``0o10`` is eight, ``0x10`` sixteen; ``1:30``,
``1_000``, ``yes``, ``off`` and ``2026-11-27`` are strings (1.1: 90, 1000, true,
false, a date), so a count written in them is refused by the schema instead of
read as another number.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from kernbench.errors import ConfigError, shown
from kernbench.files import CONFIG_LIMIT, read_text
from kernbench.validation import shown_key

__all__ = [
    "MAX_DEPTH",
    "MAX_ALIAS_NODES",
    "YamlSyntaxError",
    "parse_yaml",
    "load_yaml",
    "load_yaml_mapping",
]

#: Collections nested deeper than this are refused.  The deepest key of a
#: topology is 6 levels down; the parser and everything after it (merging,
#: validation, copying) recurse per level.
MAX_DEPTH = 64
#: Nodes that aliases may add to a document, counting every node of every
#: aliased subtree as if written out.  Sharing a link spec or two takes tens.
MAX_ALIAS_NODES = 10_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlSyntaxError(ConfigError):
    """The text is not YAML at all (as opposed to YAML the loader refuses)."""


class _LimitError(yaml.MarkedYAMLError):
    """A document past one of the loader's bounds (not a syntax error)."""


class _Open:
    """A collection being composed: its node, its expanded size so far, a key awaiting its value."""

    __slots__ = ("node", "size", "key")

    def __init__(self, node: Node) -> None:
        self.node = node
        self.size = 1
        self.key: Node | None = None


class _BoundedComposer:
    """Builds the node graph from parser events without recursion, within the bounds.

    Replaces PyYAML's recursive composer (which overflows the stack past ~1000
    levels and knows nothing of alias expansion).  Each finished node's size,
    counting aliased subtrees as written out, is kept so an alias costs what it
    expands to.
    """

    def get_single_node(self) -> Node | None:
        self.get_event()  # stream start
        document = None
        if not self.check_event(StreamEndEvent):
            document = self._compose_document()
        if not self.check_event(StreamEndEvent):
            event = self.get_event()
            raise yaml.composer.ComposerError(
                None, None, "expected one document, but found another", event.start_mark
            )
        self.get_event()
        return document

    def _compose_document(self) -> Node:
        self.get_event()  # document start
        anchors: dict[str, Node] = {}
        sizes: dict[int, int] = {}  # id(node) -> expanded size, once the node is complete
        stack: list[_Open] = []
        aliased = 0
        root: Node | None = None

        def attach(node: Node, size: int) -> None:
            nonlocal root
            if not stack:
                root = node
                return
            parent = stack[-1]
            parent.size += size
            if isinstance(parent.node, SequenceNode):
                parent.node.value.append(node)
            elif parent.key is None:
                parent.key = node
            else:
                parent.node.value.append((parent.key, node))
                parent.key = None

        def remember(anchor: str | None, node: Node, mark: Any) -> None:
            if anchor is None:
                return
            if anchor in anchors:
                raise yaml.composer.ComposerError(None, None, "an anchor is defined twice", mark)
            anchors[anchor] = node

        while root is None:
            event = self.get_event()
            if isinstance(event, AliasEvent):
                node = anchors.get(event.anchor)
                if node is None:
                    raise yaml.composer.ComposerError(
                        None,
                        None,
                        "an alias refers to no anchor defined before it",
                        event.start_mark,
                    )
                size = sizes.get(id(node))
                if size is None:
                    raise _LimitError(
                        None,
                        None,
                        "an alias refers to a collection that contains it",
                        event.start_mark,
                    )
                aliased += size
                if aliased > MAX_ALIAS_NODES:
                    raise _LimitError(
                        None,
                        None,
                        f"aliases expand to more than {MAX_ALIAS_NODES} nodes (a document may "
                        f"add at most {MAX_ALIAS_NODES} nodes through aliases)",
                        event.start_mark,
                    )
                attach(node, size)
            elif isinstance(event, ScalarEvent):
                tag = event.tag
                if tag is None or tag == "!":
                    tag = self.resolve(ScalarNode, event.value, event.implicit)
                node = ScalarNode(
                    tag, event.value, event.start_mark, event.end_mark, style=event.style
                )
                remember(event.anchor, node, event.start_mark)
                sizes[id(node)] = 1
                attach(node, 1)
            elif isinstance(event, SequenceStartEvent | MappingStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise _LimitError(
                        None,
                        None,
                        f"collections are nested more than {MAX_DEPTH} levels deep",
                        event.start_mark,
                    )
                kind = SequenceNode if isinstance(event, SequenceStartEvent) else MappingNode
                tag = event.tag
                if tag is None or tag == "!":
                    tag = self.resolve(kind, None, event.implicit)
                node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
                remember(event.anchor, node, event.start_mark)
                stack.append(_Open(node))
            elif isinstance(event, CollectionEndEvent):
                done = stack.pop()
                done.node.end_mark = event.end_mark
                sizes[id(done.node)] = done.size
                attach(done.node, done.size)
        self.get_event()  # document end
        return root


class _StrictConstructor(SafeConstructor):
    """A SafeConstructor that refuses repeated and unhashable keys; bad values are YAML errors."""

    def construct_mapping(self, node: Node, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, Hashable):
                    raise ConstructorError(
                        None,
                        None,
                        "a mapping key must be a plain value (a string or a number), "
                        f"not a {type(key).__name__}",
                        key_node.start_mark,
                    )
                if key in seen:
                    raise ConstructorError(
                        None,
                        None,
                        f"key {shown_key(key)} appears twice in one mapping",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, ArithmeticError, LookupError, AttributeError) as exc:
            # e.g. a timestamp with month 13, an int past Python's digit limit; PyYAML's
            # own constructors fail on explicit tags with KeyError (`!!bool 2`),
            # IndexError (an empty `!!float`) or AttributeError (`!!timestamp 8`).  The
            # exception's text may quote the value, so only the tag is named.
            kind = str(node.tag).rsplit(":", 1)[-1]
            raise ConstructorError(
                None,
                None,
                f"this value is not a valid {shown(kind, 40)} ({type(exc).__name__})",
                node.start_mark,
            ) from None


_TAG = "tag:yaml.org,2002:"
_CORE_RESOLVERS = (  # YAML 1.2 core schema: tag, pattern, first characters
    (_TAG + "bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (_TAG + "int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        _TAG + "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
)


class _CoreResolver(Resolver):
    """PyYAML's resolver with YAML 1.2's core schema for booleans and numbers, and no
    timestamps (see the module's docstring)."""


_CoreResolver.yaml_implicit_resolvers = {
    first: [
        (tag, pattern)
        for tag, pattern in resolvers
        if tag not in {_TAG + "bool", _TAG + "int", _TAG + "float", _TAG + "timestamp"}
    ]
    for first, resolvers in Resolver.yaml_implicit_resolvers.items()
}
for _tag, _pattern, _first in _CORE_RESOLVERS:
    _CoreResolver.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _construct_core_int(constructor: SafeConstructor, node: Node) -> int:
    text = constructor.construct_scalar(node)
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


_StrictConstructor.add_constructor(_TAG + "int", _construct_core_int)


def _refuse_set(_constructor: SafeConstructor, node: Node) -> None:
    # A set iterates in an order that changes from one process to the next (string
    # hashing is randomised), so a list key given one would make another machine
    # each run; no key takes a set.
    raise ConstructorError(
        None,
        None,
        "a set (!!set) has no order, and no key takes one; write a list such as [a, b]",
        node.start_mark,
    )


_StrictConstructor.add_constructor(_TAG + "set", _refuse_set)


def _loader_class() -> type:
    if getattr(yaml, "__with_libyaml__", False):
        from yaml.cyaml import CParser

        class CLoader(_BoundedComposer, CParser, _StrictConstructor, _CoreResolver):
            def __init__(self, stream: str) -> None:
                CParser.__init__(self, stream)
                _StrictConstructor.__init__(self)
                _CoreResolver.__init__(self)

        return CLoader

    class PyLoader(
        _BoundedComposer,
        yaml.reader.Reader,
        yaml.scanner.Scanner,
        yaml.parser.Parser,
        _StrictConstructor,
        _CoreResolver,
    ):
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            _StrictConstructor.__init__(self)
            _CoreResolver.__init__(self)

    return PyLoader


_Loader = _loader_class()
_C_PARSER = getattr(yaml, "__with_libyaml__", False)


def _position(exc: yaml.YAMLError, text: str) -> str:
    """``line L, column C`` of a YAML error (1-based), or ``""``."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}"
    position = getattr(exc, "position", None)
    if isinstance(position, int):
        # libyaml counts bytes of the UTF-8 text; the pure-Python reader, characters.
        data: str | bytes = text.encode("utf-8") if _C_PARSER else text
        newline = b"\n" if isinstance(data, bytes) else "\n"
        line = data.count(newline, 0, position) + 1
        column = position - (data.rfind(newline, 0, position) + 1) + 1
        return f"line {line}, column {column}"
    return ""


def _problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.reader.ReaderError):
        character = exc.character
        code = ord(character) if isinstance(character, str) else character
        if isinstance(code, int):
            return f"character U+{code:04X} is not allowed in YAML"
        return "a character is not allowed in YAML"
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    return shown(str(problem), 200) if problem else "not valid YAML"


def _check_encodable(text: str, *, source: str) -> None:
    """Refuse text holding bytes that are not UTF-8 (a command-line argument in another
    encoding arrives with them as lone surrogates, which the YAML reader cannot take)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end][:8]
        try:
            what = " ".join(f"0x{byte:02x}" for byte in bad.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError:
            what = shown(bad, 40)
        raise ConfigError(
            f"holds bytes that are not UTF-8 ({what} at character {exc.start + 1}); "
            "write it as UTF-8 text",
            source=source,
        ) from None


def parse_yaml(text: str, *, source: str) -> Any:
    """The document in ``text`` (``None`` when empty); ``source`` names it in errors."""
    loader = None
    _check_encodable(text, source=source)
    try:
        loader = _Loader(text)  # the pure-Python reader checks characters here
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        where = _position(exc, text)
        at = f" at {where}" if where else ""
        if isinstance(exc, _LimitError | ConstructorError):
            raise ConfigError(f"{where or 'document'}: {_problem(exc)}", source=source) from None
        if "nesting depth" in _problem(exc):  # libyaml's own depth limit, met while scanning
            raise ConfigError(
                f"{where or 'document'}: collections are nested more than {MAX_DEPTH} levels deep",
                source=source,
            ) from None
        raise YamlSyntaxError(f"invalid YAML{at}: {_problem(exc)}", source=source) from None
    except RecursionError:  # pragma: no cover - the composer and constructor do not recurse
        raise ConfigError(
            f"collections are nested more than {MAX_DEPTH} levels deep", source=source
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(path: str | Path, *, what: str = "file", limit: int = CONFIG_LIMIT) -> Any:
    """The document in the file ``path`` (``None`` when empty); ``what`` names it in errors."""
    return parse_yaml(read_text(path, what=what, limit=limit), source=str(path))


def load_yaml_mapping(
    path: str | Path, *, what: str = "file", limit: int = CONFIG_LIMIT
) -> dict[str, Any]:
    """The mapping in the file ``path`` (``{}`` when empty); any other document is an error."""
    document = load_yaml(path, what=what, limit=limit)
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(
            f"the top level must be a mapping of keys, not a {type(document).__name__}",
            source=str(path),
        )
    return document
