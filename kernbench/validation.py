"""Turning a pydantic ``ValidationError`` into one :class:`~kernbench.errors.ConfigError`.

Every configuration KernBench reads (topologies, catalogues, sweep files,
tune tables) is validated by frozen pydantic models; this module words their
failures the same way: one line per error, ``key.path: what is wrong and what
would be valid``.  What a message echoes is bounded: a value is shown by a
short, escaped repr (a billion-element list prints as a few items), at most
:data:`MAX_ERRORS_SHOWN` errors are listed, and a key that is not a plain name
(``root:$6$...``, a line of some file that was never a configuration) is
described, not quoted.
"""

from __future__ import annotations

import re
import reprlib
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Strict, ValidationError

from kernbench.errors import ConfigError, shown

__all__ = [
    "StrictModel",
    "MAX_ERRORS_SHOWN",
    "KeyedValueError",
    "shown_value",
    "shown_key",
    "describe_error",
    "error_path",
    "format_validation_error",
]


class StrictModel(BaseModel):
    """The base of every model a user's file is validated against: unknown keys are errors,
    the result is frozen, and defaults are validated like given values.

    A ``bool`` key takes only ``true`` or ``false``: pydantic's lax mode would read
    ``1``, ``0.0``, ``"yes"`` and ``"true"`` as booleans, so every bool field must be
    declared strict (``pydantic.StrictBool``); a model that declares a lax one is
    refused when its class is made.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        for name, info in cls.model_fields.items():
            strict = any(isinstance(m, Strict) and m.strict for m in info.metadata)
            if _unwrap(info.annotation) is bool and not strict:
                raise TypeError(
                    f"{cls.__name__}.{name} is a lax bool; declare it StrictBool so that "
                    "only true and false are accepted"
                )


#: Errors listed in one message; the rest are counted.
MAX_ERRORS_SHOWN = 10
# Keys an error may quote: names, dotted paths, flags (-b, --algorithm).
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,79}")


class KeyedValueError(ValueError):
    """A cross-field check's failure, pointing at the key (relative path) at fault."""

    def __init__(self, subpath: str, message: str) -> None:
        super().__init__(message)
        self.subpath = subpath


_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 4
_REPR.maxdict = 3
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlong = 40


def shown_value(value: Any) -> str:
    """A short, escaped repr of ``value`` for an error message, whatever its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a value's own __repr__ must not hide the error
        text = f"a {type(value).__name__}"
    return shown(text, 100)


def shown_key(key: Any) -> str:
    """``'name'`` for a key an error may quote, else a description that quotes nothing."""
    if isinstance(key, str) and _PLAIN_KEY.fullmatch(key):
        return repr(key)
    if isinstance(key, int | float | bool) or key is None:
        return repr(key)
    size = f" of {len(key)} characters" if isinstance(key, str) else ""
    return f"(a key{size} that is not a plain name)"


def _path_part(part: Any) -> str:
    if isinstance(part, str) and not _PLAIN_KEY.fullmatch(part):
        return "<key>"
    return str(part)


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is Union or origin is types.UnionType:
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _model_at(loc: Sequence[Any], root: type[BaseModel]) -> type[BaseModel] | None:
    """The model that holds the key at ``loc`` (through lists and dicts of models)."""
    annotation: Any = root
    for part in loc:
        annotation = _unwrap(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            annotation = field.annotation
        elif origin in (list, tuple, set, Sequence) and get_args(annotation):
            annotation = get_args(annotation)[0]
        elif origin in (dict, Mapping) and len(get_args(annotation)) == 2:
            annotation = get_args(annotation)[1]
        else:
            return None
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def describe_error(error: Mapping[str, Any], root: type[BaseModel]) -> str:
    """What is wrong at one error's key, and what would be valid (no key path)."""
    loc = tuple(error["loc"])
    kind = error["type"]
    given = shown_value(error.get("input"))
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1], root)
        unknown = f"unknown key {shown_key(loc[-1])}"
        if parent is None:
            return f"{unknown}; see the documentation for the valid keys"
        if not parent.model_fields:
            return f"{unknown}; this section takes no parameters"
        return f"{unknown}; valid keys here: {', '.join(parent.model_fields)}"
    if kind == "missing":
        return "required key is missing"
    bounds = {
        "greater_than": (">", "gt"),
        "greater_than_equal": (">=", "ge"),
        "less_than": ("<", "lt"),
        "less_than_equal": ("<=", "le"),
    }
    if kind in bounds:
        op, name = bounds[kind]
        return f"must be {op} {ctx.get(name)} (got {given})"
    if kind == "literal_error":
        return f"{given} is not valid; expected {ctx.get('expected')}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number (got {given})"
    if kind in ("float_type", "float_parsing"):
        return f"expected a number (got {given})"
    if kind == "finite_number":
        return f"must be a finite number (got {given})"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a section of keys (got {given})"
    if kind in ("list_type", "tuple_type", "set_type", "string_type", "string_sub_type"):
        # pydantic's words ("Input should be a valid list") are kept: callers match them.
        return f"{error['msg']} (got {given})"
    if kind in ("bool_type", "bool_parsing"):
        if isinstance(error.get("input"), str):  # 'yes', 'on' (text in YAML 1.2), '"true"'
            return f"expected true or false (got the text {given}; write true or false unquoted)"
        return f"expected true or false (got {given})"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s) (got {ctx.get('actual_length')})"
    if kind == "too_long":
        return f"takes at most {ctx.get('max_length')} item(s) (got {ctx.get('actual_length')})"
    if kind == "recursion_loop":
        return "is nested too deeply"
    return str(error["msg"]).removeprefix("Value error, ")


def error_path(error: Mapping[str, Any]) -> str:
    """The dotted key path of one error (a cross-field check adds the key it names)."""
    parts = [_path_part(part) for part in error["loc"]]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, KeyedValueError) and cause.subpath:
        parts.append(cause.subpath)
    return ".".join(parts)


def format_validation_error(
    exc: ValidationError, source: str, root: type[BaseModel]
) -> ConfigError:
    """One :class:`ConfigError` for every error in ``exc``, keyed at the first one.

    ``root`` is the model that was validated (it says which keys are valid
    where); ``source`` names the file or override.
    """
    errors = exc.errors(include_url=False)
    lines = [
        shown(f"{error_path(error) or '<top>'}: {describe_error(error, root)}", 300)
        for error in errors[:MAX_ERRORS_SHOWN]
    ]
    if len(errors) > MAX_ERRORS_SHOWN:
        lines.append(f"... and {len(errors) - MAX_ERRORS_SHOWN} more errors")
    message = lines[0] if len(lines) == 1 else "\n  ".join(["invalid configuration:", *lines])
    err = ConfigError(message, source=source)
    err.key_path = error_path(errors[0])
    return err
