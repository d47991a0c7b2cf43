"""The environment ranks see: the variables torchrun sets for each process, per rank.

While a world's ranks run, ``os.environ`` is a view of the real environment
whose ``RANK``, ``LOCAL_RANK`` and ``GROUP_RANK`` answer for the calling rank
(one launcher on one node: ``LOCAL_RANK`` is the rank), and ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` are set for the run
(those already set stay).  A rank that writes or deletes one of the per-rank
variables changes its own view only.  Everything is as it was after the run.

A view rather than values set at every switch between ranks: a run of 131,072
ranks switches millions of times and reads them a few.  What it cannot reach:
code that kept a reference to the real mapping (``from os import environ``) and
child processes see the real environment, without the per-rank values.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager

from kernbench.distributed.scheduler import current_rank

__all__ = ["RANK_VARIABLES", "TORCHRUN_VARIABLES", "torchrun_environment"]

RANK_VARIABLES = ("RANK", "LOCAL_RANK", "GROUP_RANK")
_RUN_DEFAULTS = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
#: Every variable a run sets, as torchrun sets them for each process.
TORCHRUN_VARIABLES = (*RANK_VARIABLES, "WORLD_SIZE", "LOCAL_WORLD_SIZE", *_RUN_DEFAULTS)
_DELETED = object()


class _RankEnvironment(MutableMapping):
    """``os.environ`` while ranks run (see the module's text)."""

    def __init__(self, base: MutableMapping[str, str]) -> None:
        self.base = base
        self._own: dict[tuple[int, str], object] = {}  # (rank, key) -> its write or _DELETED

    def _rank_value(self, key: str) -> object | None:
        """This rank's value of a per-rank key (``_DELETED`` when it removed it), or None."""
        if key not in RANK_VARIABLES:
            return None
        state = current_rank()
        if state is None:
            return None
        own = self._own.get((state.rank, key))
        if own is not None:
            return own
        return "0" if key == "GROUP_RANK" else str(state.rank)

    def __getitem__(self, key: str) -> str:
        value = self._rank_value(key)
        if value is None:
            return self.base[key]
        if value is _DELETED:
            raise KeyError(key)
        return value  # type: ignore[return-value]

    def __setitem__(self, key: str, value: str) -> None:
        state = current_rank() if key in RANK_VARIABLES else None
        if state is None:
            self.base[key] = value
        else:
            self._own[(state.rank, key)] = str(value)

    def __delitem__(self, key: str) -> None:
        value = self._rank_value(key)
        if value is None:
            del self.base[key]
        elif value is _DELETED:
            raise KeyError(key)
        else:
            self._own[(current_rank().rank, key)] = _DELETED

    def __iter__(self) -> Iterator[str]:
        yield from (k for k in self.base if k not in RANK_VARIABLES or k in self)
        yield from (k for k in RANK_VARIABLES if k not in self.base and k in self)

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def copy(self) -> dict[str, str]:
        return dict(self)

    def __repr__(self) -> str:
        return f"environ({dict(self)!r})"


@contextmanager
def torchrun_environment(world_size: int) -> Iterator[None]:
    """The run's variables set and ``os.environ`` the per-rank view, for the ``with`` block."""
    base = os.environ
    size = str(world_size)
    values = {"WORLD_SIZE": size, "LOCAL_WORLD_SIZE": size, **_RUN_DEFAULTS}
    saved = {key: base.get(key) for key in (*values, *RANK_VARIABLES)}
    for key, value in values.items():
        if key not in _RUN_DEFAULTS or key not in base:
            base[key] = value
    wrapped = not isinstance(base, _RankEnvironment)
    if wrapped:
        os.environ = _RankEnvironment(base)  # noqa: B003 - a view, not a new environment
    try:
        yield
    finally:
        if wrapped:
            os.environ = base  # noqa: B003 - the real one back
        for key, value in saved.items():
            if value is None:
                base.pop(key, None)
            elif base.get(key) != value:
                base[key] = value
