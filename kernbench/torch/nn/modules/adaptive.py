"""``torch.nn.modules.adaptive``: the layers of torch's file of that name."""

from kernbench.torch.nn.modules import namespace

__all__, __getattr__ = namespace("adaptive")
