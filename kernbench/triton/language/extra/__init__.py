"""``triton.language.extra``: the extern libraries; here only ``libdevice``.

``from kernbench.triton.language.extra import libdevice`` gives Triton's
libdevice math functions (:mod:`kernbench.kernels.libdevice`).
"""

from typing import Any

from kernbench.errors import unsupported_name
from kernbench.triton.language.extra import libdevice

__all__ = ["libdevice"]

_HINTS = dict.fromkeys(
    ("cuda", "hip"),
    "the machine is neither CUDA nor HIP; triton.language.extra.libdevice has the math "
    "functions both backends' libdevice has",
)


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.triton.language.extra", "tl.extra", name, __all__, _HINTS)
