"""``torch.distributed.elastic.multiprocessing.errors.record``: the decorator torchrun's
documentation puts on a training script's ``main``.

torch's wrapper returns ``None`` for ``sys.exit(0)`` and otherwise lets the exception go
on after recording it in ``$TORCHELASTIC_ERROR_FILE`` for the elastic agent; there is no
agent here, so nothing is recorded and the exception goes on as it is (the run reports it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from kernbench.errors import DistributedError

__all__ = ["record"]

T = TypeVar("T")


def record(fn: Callable[..., T], error_handler: Any = None) -> Callable[..., T | None]:
    """``fn`` wrapped as torch's ``@record`` wraps it: ``SystemExit`` with code 0 returns
    ``None``; any other exception propagates."""
    if not callable(fn):
        raise DistributedError(
            f"record: expected the function to decorate (@record), got {type(fn).__name__}"
        )

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T | None:
        try:
            return fn(*args, **kwargs)
        except SystemExit as exit_:
            if exit_.code == 0:
                return None
            raise

    return wrapper
