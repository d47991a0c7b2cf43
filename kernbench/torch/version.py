"""``torch.__version__`` and ``torch.version``: the PyTorch version this facade follows.

kernbench.torch follows torch 2.6's API and defaults (``torch.load``'s
``weights_only=True``, ADR 0024), so ``torch.__version__`` is ``"2.6.0+kernbench"`` (the
local label where a CUDA build has ``+cu124``).  As torch's ``TorchVersion``, it is a
``str`` that also orders against version strings and tuples by number
(``torch.__version__ >= (2, 0)``, ``>= "1.13"``); it equals only its own string.
``torch.version.cuda`` and ``hip`` are None: the accelerator is simulated, there is no
CUDA toolkit.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["TorchVersion", "__version__", "cuda", "debug", "git_version", "hip"]


def _numbers(value: Any) -> tuple[int, ...]:
    if isinstance(value, tuple | list):
        return tuple(int(v) for v in value)
    release = str(value).split("+")[0]
    return tuple(int(m) for m in re.findall(r"\d+", release)[:3])


def _padded(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


class TorchVersion(str):
    """A version string that compares by its numbers with strings and tuples."""

    __slots__ = ()

    def _pair(self, other: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return _padded(_numbers(self), _numbers(other))

    def __lt__(self, other: Any) -> bool:
        a, b = self._pair(other)
        return a < b

    def __le__(self, other: Any) -> bool:
        a, b = self._pair(other)
        return a <= b

    def __gt__(self, other: Any) -> bool:
        a, b = self._pair(other)
        return a > b

    def __ge__(self, other: Any) -> bool:
        a, b = self._pair(other)
        return a >= b

    def __eq__(self, other: Any) -> bool:
        # torch compares packaging Versions: the local label makes "2.6.0+kernbench"
        # equal to itself only
        return isinstance(other, str) and str.__eq__(self, other)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__


__version__ = TorchVersion("2.6.0+kernbench")
git_version = "kernbench"
cuda: str | None = None
hip: str | None = None
debug = False
