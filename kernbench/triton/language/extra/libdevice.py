"""``from triton.language.extra import libdevice``: :mod:`kernbench.kernels.libdevice`
under Triton's module name (``libdevice.asin(x)`` and the rest)."""

from typing import Any

from kernbench.kernels.libdevice import *  # noqa: F403 - this module is that library, re-exported
from kernbench.kernels.libdevice import __all__ as __all__  # noqa: PLC0414 - re-exported as is
from kernbench.kernels.libdevice import unsupported


def __getattr__(name: str) -> Any:
    raise unsupported("kernbench.triton.language.extra.libdevice", name)
