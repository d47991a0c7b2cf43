"""``torch.nn.modules.lazy``: ``LazyModuleMixin``, as torch's file of that name."""

from kernbench.torch.nn.modules import namespace

__all__, __getattr__ = namespace("lazy")
