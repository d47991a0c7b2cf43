"""``torch.nn`` for KernBench: only ``torch.nn.functional`` (activations, norms, losses).

There are no modules, parameters or autograd; asking for anything else
(``nn.Module``, ``nn.Linear``, ...) raises a
:class:`~kernbench.errors.TensorAttributeError` that says so.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorAttributeError
from kernbench.torch.nn import functional

__all__ = ["functional"]


def __getattr__(name: str) -> Any:
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn' has no attribute {name!r}: there are no modules or "
        f"autograd; kernbench.torch.nn.functional has {', '.join(functional.__all__)}"
    )
