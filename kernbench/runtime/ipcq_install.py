"""Who installs IPCQ neighbour tables for :meth:`RuntimeContext.install_ipcq`.

Neighbour tables come from a collective algorithm's plan, which the
collective layer knows and the runtime does not: the layer that can build a
plan registers an *installer* here when it is imported
(``kernbench.torch.distributed`` does), as the kernel layer takes a launcher.
An installer is called as ``installer(ctx, algorithm=..., ccl_yaml=...,
world_size_override=..., rank_to_pe=...)`` and returns the install plan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import ConfigError

__all__ = ["IpcqInstaller", "ipcq_installer", "set_ipcq_installer"]

IpcqInstaller = Callable[..., dict[str, Any]]

_INSTALLER: IpcqInstaller | None = None


def set_ipcq_installer(installer: IpcqInstaller | None) -> IpcqInstaller | None:
    """Make ``installer`` the one ``install_ipcq`` uses (``None`` removes it).

    Returns the one it replaces; handing that back restores it.
    """
    global _INSTALLER
    if installer is not None and not callable(installer):
        raise ConfigError(f"an IPCQ installer must be callable, got {installer!r}")
    previous, _INSTALLER = _INSTALLER, installer
    return previous


def ipcq_installer() -> IpcqInstaller:
    """The registered installer; an error saying what to import when there is none."""
    if _INSTALLER is None:
        raise ConfigError(
            "install_ipcq: nothing builds neighbour-table plans; import "
            "kernbench.torch.distributed (it registers the collective layer's installer)"
        )
    return _INSTALLER
