"""``torch.distributed._tensor.device_mesh``: the older path of ``init_device_mesh``."""

from kernbench.torch.distributed.device_mesh import DeviceMesh, init_device_mesh

__all__ = ["DeviceMesh", "init_device_mesh"]
