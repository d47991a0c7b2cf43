"""``torch.nn.modules.module``: :class:`Module`, the base of every layer."""

from kernbench.torch.nn.module import Module

__all__ = ["Module"]
