"""``triton.tools.tensor_descriptor``: host-side TMA descriptors, which are not modelled.

A :class:`TensorDescriptor` describes a tensor to the Hopper/Blackwell Tensor
Memory Accelerator, a bulk-copy engine with its own latency and no per-lane
addresses; the simulated PEs have no such engine.  Making one raises a
:class:`~kernbench.errors.KernelError` saying what to write instead: pass the
tensor itself and address its tiles with ``tl.make_block_ptr`` or pointer
arithmetic and masks (the persistent-matmul tutorial's non-TMA kernels do).
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import KernelError

__all__ = ["TensorDescriptor"]


class TensorDescriptor:
    """Refused: TMA descriptors are not modelled (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise KernelError(_REFUSAL.format(call="TensorDescriptor(...)"))

    @staticmethod
    def from_tensor(*args: Any, **kwargs: Any) -> TensorDescriptor:
        raise KernelError(_REFUSAL.format(call="TensorDescriptor.from_tensor(...)"))


_REFUSAL = (
    "triton.tools.tensor_descriptor.{call}: TMA tensor descriptors are not modelled (the "
    "simulated PEs have no tensor memory accelerator); pass the tensor to the kernel and "
    "address its tiles with tl.make_block_ptr, or with pointer arithmetic and masks"
)
