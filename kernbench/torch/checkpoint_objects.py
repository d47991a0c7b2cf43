"""Whole objects in a checkpoint: ``torch.save(model)``, under torch's ``weights_only`` rules.

A checkpoint keeps tensors, numbers, strings and containers of them as a JSON tree
(:mod:`kernbench.torch.serialization`).  Anything else (a whole ``nn.Module``, a NumPy
array, a dataclass of the program's own) is pickled, as torch pickles everything, with
each tensor, dtype, device and ``Size`` in it kept out of the pickle by reference into
the checkpoint (a *persistent id*), so tensors are stored as arrays either way.

Loading a pickle can run code.  So, as torch since 2.6, ``torch.load`` defaults to
``weights_only=True``: a pickle then loads only if every class and function it names
is allowlisted, by default the harmless ones torch allows (``OrderedDict``,
``Counter``, ``set``, ``frozenset``, ``complex``, ``bytearray``, bytes), else with
:func:`add_safe_globals` or inside ``with safe_globals([...]):``.  Anything else is a
:class:`~kernbench.errors.WeightsOnlyLoadError` (a ``pickle.UnpicklingError``) that
names the global and both ways out: the allowlist, or ``weights_only=False`` for a
trusted file.  ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` and ``TORCH_FORCE_WEIGHTS_ONLY_LOAD``
change the default as they do in torch.
"""

from __future__ import annotations

import _compat_pickle
import codecs
import io
import os
import pickle
import pickletools
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from kernbench.errors import CheckpointError, WeightsOnlyLoadError, exception_text

__all__ = [
    "ObjectPickler",
    "ObjectUnpickler",
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "safe_globals",
    "unsafe_globals",
    "weights_only_default",
]

# What torch's weights-only unpickler allows without being asked (its tensors, dtypes,
# devices and sizes are persistent ids here, so they need no global).
_DEFAULT_GLOBALS: dict[str, Any] = {
    "collections.OrderedDict": OrderedDict,
    "collections.Counter": Counter,
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.complex": complex,
    "builtins.bytearray": bytearray,
    "_codecs.encode": codecs.encode,  # bytes, at pickle protocol 2
}

# Allowlisted by the program (process-wide, as torch keeps them): objects, or
# (object, "module.name") pairs naming one saved under another name.
_user_globals: list[Any] = []

# Modules whose objects belong to the running simulation: a model that holds one (a
# DistributedDataParallel's process group, say) cannot be saved whole.
_RUNNING = ("kernbench.runtime", "kernbench.distributed", "kernbench.fabric", "kernbench.fast")
_RUNNING_OUTSIDE = ("simpy", "greenlet")


def _key(entry: Any) -> tuple[str, Any]:
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise CheckpointError(
                "torch.serialization.add_safe_globals: a tuple entry is (object, "
                f"'module.name'), got {entry!r}"
            )
        return entry[1], entry[0]
    module = getattr(entry, "__module__", None)
    name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        raise CheckpointError(
            f"torch.serialization.add_safe_globals: {entry!r} is not a class or function "
            "(give the class or function itself, or an (object, 'module.name') pair)"
        )
    return f"{module}.{name}", entry


def add_safe_globals(safe_globals: list[Any]) -> None:
    """Allow these classes and functions in ``torch.load(weights_only=True)``, as torch."""
    if not isinstance(safe_globals, list | tuple):
        raise CheckpointError(
            "torch.serialization.add_safe_globals takes a list of classes and functions, "
            f"got {type(safe_globals).__name__}"
        )
    for entry in safe_globals:
        _key(entry)  # checked before any is added
    _user_globals.extend(safe_globals)


def get_safe_globals() -> list[Any]:
    """What :func:`add_safe_globals` allowed (not torch's defaults)."""
    return list(_user_globals)


def clear_safe_globals() -> None:
    """Forget every global :func:`add_safe_globals` allowed."""
    _user_globals.clear()


class safe_globals:  # noqa: N801 - torch's name for it
    """``with torch.serialization.safe_globals([...]):`` allows them for the block only."""

    def __init__(self, safe_globals: list[Any]) -> None:
        self.safe_globals = safe_globals
        self._kept = 0

    def __enter__(self) -> None:
        self._kept = len(_user_globals)
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc: Any) -> None:
        del _user_globals[self._kept :]


def _allowed() -> dict[str, Any]:
    allowed = dict(_DEFAULT_GLOBALS)
    allowed.update(_key(entry) for entry in _user_globals)
    return allowed


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "y", "yes", "true")


def weights_only_default(weights_only: bool | None) -> bool:
    """What ``torch.load(weights_only=...)`` means: ``None`` is ``True`` (torch 2.6's
    default) unless ``$TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is set, and
    ``$TORCH_FORCE_WEIGHTS_ONLY_LOAD`` makes every load weights-only."""
    if _env_flag("TORCH_FORCE_WEIGHTS_ONLY_LOAD"):
        return True
    if weights_only is None:
        return not _env_flag("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    return bool(weights_only)


class ObjectPickler(pickle.Pickler):
    """Pickles one object of a checkpoint; ``keep(obj)`` gives the persistent id of each
    tensor, dtype, device or ``Size`` in it (``None`` for the rest)."""

    def __init__(
        self, file: io.BytesIO, protocol: int, keep: Callable[[Any], Any], where: str
    ) -> None:
        super().__init__(file, protocol=protocol, fix_imports=False)
        self.keep = keep
        self.where = where

    def persistent_id(self, obj: Any) -> Any:
        kept = self.keep(obj)
        if kept is not None:
            return kept
        module = type(obj).__module__ or ""
        if module.startswith(_RUNNING) or module.split(".")[0] in _RUNNING_OUTSIDE:
            raise CheckpointError(
                f"torch.save: the object at {self.where} holds a {type(obj).__name__}, part "
                "of the running simulation, which cannot be saved; save the model's "
                "state_dict() (or, for a DistributedDataParallel, its .module)"
            )
        return None


def pickled(obj: Any, protocol: int, keep: Callable[[Any], Any], where: str) -> bytes:
    """``obj`` pickled with :class:`ObjectPickler`; what cannot be is a CheckpointError."""
    buffer = io.BytesIO()
    try:
        ObjectPickler(buffer, protocol, keep, where).dump(obj)
    except CheckpointError:
        raise
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
        raise CheckpointError(
            f"torch.save: cannot pickle the {type(obj).__name__} at {where}: "
            f"{type(exc).__name__}: {exception_text(exc)}; save its state_dict() or its "
            "fields instead"
        ) from None
    return buffer.getvalue()


_MEMO_OPS = {"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}


def checked_pickle(data: bytes, where: str) -> bytes:
    """``data`` if it reads as a pickle whose memo indices fit in it.

    A well-formed pickle memoizes at most one object per opcode, so an index beyond its
    length can only be hostile: Python's unpickler would grow its memo table to that
    index (gigabytes for a 4-byte ``LONG_BINPUT``) before failing.  The pickles here hold
    no tensor data (tensors are persistent ids), so reading them through is cheap.
    """
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name in _MEMO_OPS and isinstance(arg, int) and arg > len(data):
                raise CheckpointError(
                    f"torch.load: {where} is damaged: a pickle memo index {arg} in "
                    f"{len(data)} bytes"
                )
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformation pickletools meets
        raise CheckpointError(
            f"torch.load: {where} is damaged: {type(exc).__name__}: {exception_text(exc)}"
        ) from None
    return data


class ObjectUnpickler(pickle.Unpickler):
    """Unpickles one object of a checkpoint: ``restore(pid)`` makes each tensor, dtype,
    device or ``Size``; with ``weights_only`` only allowlisted globals are looked up."""

    def __init__(
        self, data: bytes, restore: Callable[[Any], Any], weights_only: bool, name: str
    ) -> None:
        super().__init__(io.BytesIO(checked_pickle(data, name)))
        self.restore = restore
        self.weights_only = weights_only
        self.allowed = _allowed() if weights_only else {}
        self.name = name

    def find_class(self, module: str, name: str) -> Any:
        if not self.weights_only:
            return super().find_class(module, name)
        if (module, name) in _compat_pickle.NAME_MAPPING:  # a Python 2 name, as pickle maps it
            module, name = _compat_pickle.NAME_MAPPING[module, name]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        key = f"{module}.{name}"
        if key not in self.allowed:
            short = name.rpartition(".")[2]
            raise WeightsOnlyLoadError(
                f"torch.load: weights only load failed: {self.name} holds the global "
                f"{module}.{name}, which weights_only=True (the default) does not allow; "
                f"if you trust the file, allowlist it with torch.serialization."
                f"add_safe_globals([{short}]) or the torch.serialization.safe_globals"
                f"([{short}]) context manager, or load it with weights_only=False (which "
                "can run code)"
            )
        return self.allowed[key]

    def persistent_load(self, pid: Any) -> Any:
        return self.restore(pid)


class _Anything:
    """Stands for every global while a pickle is only being read for its globals."""

    def __new__(cls, *args: Any, **kwargs: Any) -> _Anything:
        return object.__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> _Anything:
        return _Anything()

    def append(self, item: Any) -> None:
        pass

    def extend(self, items: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


class _GlobalsReader(pickle.Unpickler):
    """Reads a pickle through, recording each global it names and running none."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.names: list[str] = []

    def find_class(self, module: str, name: str) -> Any:
        self.names.append(f"{module}.{name}")
        return _Anything

    def persistent_load(self, pid: Any) -> Any:
        return None


def unsafe_globals(pickles: Iterable[bytes]) -> list[str]:
    """The globals these pickles name that ``weights_only=True`` would refuse, in order."""
    allowed = _allowed()
    found: dict[str, None] = {}
    for data in pickles:
        reader = _GlobalsReader(checked_pickle(data, "the checkpoint"))
        try:
            reader.load()
        except Exception:  # noqa: BLE001 - a damaged pickle: what was named before it counts
            pass
        for name in reader.names:
            if name not in allowed:
                found[name] = None
    return list(found)
