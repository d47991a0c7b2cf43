"""``torch.get_num_threads`` and its kin: the host's op threads, which a simulation has none of.

Programs print them or set them before training (``torch.set_num_threads(1)`` in data
loaders and distributed launchers).  The simulated machine runs a rank's ops in call
order whatever the host does, so the numbers are kept and reported back, starting at
1, and change nothing: runs stay deterministic whatever the thread count.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "get_num_interop_threads",
    "get_num_threads",
    "set_num_interop_threads",
    "set_num_threads",
]

_threads = {"intra": 1, "interop": 1}


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"torch.{name}: Expected a positive number of threads, got {value!r}")
    return value


def get_num_threads() -> int:
    return _threads["intra"]


def set_num_threads(int: int) -> None:  # noqa: A002 - torch's parameter name
    _threads["intra"] = _count("set_num_threads", int)


def get_num_interop_threads() -> int:
    return _threads["interop"]


def set_num_interop_threads(int: int) -> None:  # noqa: A002 - torch's parameter name
    _threads["interop"] = _count("set_num_interop_threads", int)
