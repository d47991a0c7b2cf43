"""``import torch`` and ``import triton`` inside ``kernbench run``: KernBench's own modules.

A program written for PyTorch imports ``torch`` (``import torch.nn as nn``, ``from
torch.utils.data import DataLoader``, ``import triton.language as tl``).  While
``kernbench run`` runs a script, those names are KernBench's mirrors of them
(``kernbench.torch``, ``kernbench.triton``), so the program runs on the simulated
machine as written, without its imports changed (ADR 0025).  Each ``torch.X`` *is* the
module ``kernbench.torch.X``, not a copy: ``torch.nn is kernbench.torch.nn``.  A name
the mirror lacks raises its usual error saying what to use instead.  When the run ends,
``sys.modules`` holds again what it held before (the real ``torch``, if it was
imported, or nothing), and the finder is gone.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

__all__ = ["ALIASES", "mirrored_imports"]

# The top-level names a program imports, and the KernBench package that mirrors each.
ALIASES = {"torch": "kernbench.torch", "triton": "kernbench.triton"}


def _mirror(fullname: str) -> str | None:
    top, dot, rest = fullname.partition(".")
    target = ALIASES.get(top)
    return None if target is None else target + dot + rest


class _MirrorFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on ``sys.meta_path`` while a run lasts: ``torch[.X]`` is found as
    ``kernbench.torch[.X]`` (imported if it is not yet) and loaded as that very module."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        real = _mirror(fullname)
        if real is None:
            return None
        module = importlib.import_module(real)  # its own error (a hint) if the mirror lacks it
        spec = importlib.machinery.ModuleSpec(
            fullname, self, is_package=hasattr(module, "__path__")
        )
        spec.loader_state = getattr(module, "__spec__", None)  # a namespace may have none
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return sys.modules[_mirror(spec.name) or spec.name]

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the alias's spec on the module: give it its own back.
        alias = getattr(module, "__spec__", None)
        if alias is not None and alias.loader is self and alias.loader_state is not None:
            module.__spec__ = alias.loader_state


@contextmanager
def mirrored_imports(enabled: bool = True) -> Iterator[None]:
    """Within the block, ``torch``/``triton`` (and their submodules) import KernBench's."""
    if not enabled:
        yield
        return
    saved = {
        name: module for name, module in sys.modules.items() if name.partition(".")[0] in ALIASES
    }
    for name in saved:
        del sys.modules[name]
    finder = _MirrorFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n.partition(".")[0] in ALIASES]:
            del sys.modules[name]
        sys.modules.update(saved)
