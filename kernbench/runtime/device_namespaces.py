"""``ctx.ahbm`` and ``ctx.accelerator``: device binding on a context, as the runtime API has it.

The runtime API binds the calling rank (its greenlet) to a device with
``ctx.ahbm.set_device(i)`` -- KernBench's backend is ``ahbm``, so this is
what ``torch.cuda.set_device(i)`` is to CUDA -- or the portable
``ctx.accelerator.set_device_index(i)`` (PyTorch 2.x's ``torch.accelerator``).
Both bind through :meth:`RuntimeContext.set_device`, so they agree with each
other and with ``kernbench.torch.cuda`` / ``torch.ahbm`` / ``torch.accelerator``.
Unlike ``torch.cuda.current_device()`` (0 when nothing was set), the
runtime's ``current_device()`` is ``None`` for a rank bound to no device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernbench.runtime.context import RuntimeContext

__all__ = ["AcceleratorNamespace", "AhbmNamespace"]


class AhbmNamespace:
    """``ctx.ahbm``: bind the calling rank to a device and ask which it is bound to."""

    def __init__(self, ctx: RuntimeContext) -> None:
        self._ctx = ctx

    def set_device(self, device: int) -> None:
        """Bind the calling rank to ``device`` (0..devices-1); new tensors live there."""
        self._ctx.set_device(device)

    def current_device(self) -> int | None:
        """The calling rank's device, or ``None`` when it is bound to none."""
        return self._ctx.current_device()

    def device_count(self) -> int:
        return self._ctx.num_devices

    def __repr__(self) -> str:
        return f"<ahbm namespace of a context on {self._ctx.topology.name}>"


class AcceleratorNamespace:
    """``ctx.accelerator``: the device-agnostic names for the same binding as ``ctx.ahbm``."""

    def __init__(self, ahbm: AhbmNamespace) -> None:
        self._ahbm = ahbm

    def set_device_index(self, device: int) -> None:
        self._ahbm.set_device(device)

    def current_device_index(self) -> int | None:
        return self._ahbm.current_device()

    def device_count(self) -> int:
        return self._ahbm.device_count()

    def __repr__(self) -> str:
        return "<accelerator namespace (ahbm)>"
