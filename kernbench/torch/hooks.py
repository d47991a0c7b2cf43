"""``torch.utils.hooks.RemovableHandle``: what registering a hook returns."""

from __future__ import annotations

import itertools
from collections.abc import Callable, MutableMapping
from typing import Any

__all__ = ["RemovableHandle"]

_IDS = itertools.count()


class RemovableHandle:
    """Puts ``hook`` in ``hooks`` (by a fresh id); ``remove()`` takes it out again.  Usable
    as a context manager that removes the hook on exit."""

    def __init__(self, hooks: MutableMapping[int, Callable[..., Any]], hook: Callable) -> None:
        self.hooks_dict_ref = hooks
        self.id = next(_IDS)
        hooks[self.id] = hook

    def remove(self) -> None:
        self.hooks_dict_ref.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
