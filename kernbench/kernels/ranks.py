"""The process group as ``compile_and_load`` sees it: which rank compiles, and a barrier.

``DeviceKernel.compile_and_load`` needs the calling rank, the world size and a
barrier for its SPMD and MPMD modes.  They belong to the distributed layers,
which sit above the kernel layer and so cannot be imported from it.  Instead
the layer that runs ranks registers a *rank provider* here when it is imported
(``kernbench.torch.distributed`` does): a function that returns the calling
rank's :class:`DistributedState`.

With no provider registered, or one that reports no initialised process group,
``compile_and_load`` sees no process group: it compiles locally (``"no_cc"``)
unless it is given ``rank_id``/``world_size``, and SPMD mode, which needs the
group's barrier, is an error that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from kernbench.errors import KernelError

__all__ = ["DistributedState", "RankProvider", "distributed_state", "set_rank_provider"]


class DistributedState(NamedTuple):
    """What compile_and_load needs from the process group (``rank``/``barrier`` when set up)."""

    initialized: bool
    rank: int | None = None
    world_size: int | None = None
    barrier: Callable[[], Any] | None = None


#: Returns the calling rank's view of the process group.
RankProvider = Callable[[], DistributedState]

_NO_PROCESS_GROUP = DistributedState(False)

_provider: RankProvider | None = None


def set_rank_provider(provider: RankProvider | None) -> RankProvider | None:
    """Make ``provider`` the one compile_and_load asks (``None``: none); returns the one before.

    Handing the returned provider back to this function restores it.
    """
    global _provider
    if provider is not None and not callable(provider):
        raise KernelError(
            f"a rank provider must be a callable returning a DistributedState, got {provider!r}"
        )
    previous, _provider = _provider, provider
    return previous


def distributed_state() -> DistributedState:
    """The calling rank's process group, from the registered provider; none without one."""
    if _provider is None:
        return _NO_PROCESS_GROUP
    return _provider()
