"""Runtime layer: the context that puts tensors on the simulated machine."""

from kernbench.runtime.context import RuntimeContext
from kernbench.runtime.current import current_context, default_topology_path, use_context
from kernbench.runtime.dtypes import DTYPES, DType, as_dtype
from kernbench.runtime.tensor import DeviceTensor, HostTensor, ShardPlacement

__all__ = [
    "DTYPES",
    "DType",
    "DeviceTensor",
    "HostTensor",
    "RuntimeContext",
    "ShardPlacement",
    "as_dtype",
    "current_context",
    "default_topology_path",
    "use_context",
]
