"""What sizes a tensor may have, and how much host memory a functional run may fill.

Shapes are checked where a tensor is made: at most ``MAX_DIMS`` dimensions,
each dimension and the element count within 64 bits (as in PyTorch), so that
no size wraps around in NumPy.  Functional mode keeps every tensor's values on
the host; :func:`available_host_memory` is what a run may fill with them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from kernbench.errors import KernBenchError, TensorError
from kernbench.files import read_text

__all__ = ["MAX_DIMS", "MAX_SIZE", "available_host_memory", "checked_shape"]

#: Dimensions a tensor may have (NumPy's limit, since values go through NumPy).
MAX_DIMS = 64
#: Sizes are 64-bit, as in PyTorch: no dimension and no element count beyond this.
MAX_SIZE = 2**63 - 1


def available_host_memory() -> int:
    """Bytes of host memory a functional run may fill with tensor values.

    ``MemAvailable`` of ``/proc/meminfo`` where there is one, else the free
    physical memory; no more than the process's address-space limit, if set.
    """
    available = None
    try:
        for line in read_text("/proc/meminfo", what="/proc/meminfo").splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (KernBenchError, ValueError, IndexError):
        available = None
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            available = MAX_SIZE
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            available = min(available, soft)
    except (ImportError, ValueError, OSError):
        pass
    return available


def checked_shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, refused unless every size fits in 64 bits."""
    dims = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if len(dims) > MAX_DIMS:
        raise TensorError(
            f"a shape of {len(dims)} dimensions; tensors have at most {MAX_DIMS} dimensions"
        )
    for i, dim in enumerate(dims):
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 0:
            raise TensorError(
                f"shape {dims!r}: dimension {i} is {dim!r}; dimensions are non-negative ints"
            )
        if dim > MAX_SIZE:
            raise TensorError(
                f"shape {dims!r}: dimension {i} is {dim}; sizes are 64-bit (at most {MAX_SIZE})"
            )
    dims = tuple(int(d) for d in dims)
    numel = math.prod(dims)
    if numel > MAX_SIZE:
        raise TensorError(
            f"shape {dims!r} has {numel} elements; element counts are 64-bit (at most {MAX_SIZE})"
        )
    return dims
