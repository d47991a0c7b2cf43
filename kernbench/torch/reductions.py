"""Tensor reductions: ``sum`` and ``mean`` over the whole tensor or one dim, on the device.

:class:`TensorReductions` is mixed into :class:`~kernbench.torch.Tensor`.  A
reduction runs the sum kernel with a float32 accumulator (int32 for integer
tensors) and leaves its result on the device, whole on the device's first PE.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.device_kernels import launch_fill, launch_sum
from kernbench.torch.dtypes import DTYPE_OBJECTS, TorchDType, as_torch_dtype
from kernbench.torch.shapes import dim_index

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorReductions"]


class TensorReductions:
    """``sum`` and ``mean`` of :class:`~kernbench.torch.Tensor`."""

    __slots__ = ()

    def sum(self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """Sum on the device (float32/int32 accumulator); the result stays a device tensor."""
        rtype = as_torch_dtype(dtype) if dtype is not None else None
        if rtype is None:
            rtype = self.dtype if self.dtype.is_floating_point else DTYPE_OBJECTS["int32"]
        return self._reduce(dim, keepdim, rtype, mean=False)

    def mean(self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """Mean on the device; integer tensors need ``dtype=`` (as in torch)."""
        rtype = as_torch_dtype(dtype) if dtype is not None else self.dtype
        if not rtype.is_floating_point:
            raise TensorError(
                f"mean() of {self.device_tensor.name!r}: {rtype!r} is not a floating dtype; "
                "pass dtype=torch.float32 or call .float() first"
            )
        return self._reduce(dim, keepdim, rtype, mean=True)

    def _reduce(self: Tensor, dim: Any, keepdim: bool, rtype: TorchDType, mean: bool) -> Tensor:
        shape = tuple(self.shape)
        if isinstance(dim, tuple | list) and len(dim) == 1:
            dim = dim[0]
        if dim is None:
            rows, length, cols = 1, self.numel(), 1
            out_shape: tuple[int, ...] = (1,) * len(shape) if keepdim else ()
        else:
            if isinstance(dim, tuple | list):
                raise TensorError("sum/mean over several dims is not supported; reduce one by one")
            d = dim_index(dim, self.ndim)
            if not shape:
                rows, length, cols = 1, 1, 1
            else:
                rows, length, cols = math.prod(shape[:d]), shape[d], math.prod(shape[d + 1 :])
            out_shape = shape[:d] + ((1,) if keepdim else ()) + shape[d + 1 :]
        out = self.new_empty(out_shape, dtype=rtype)
        n_out = rows * cols
        if mean and length == 0:
            launch_fill(out.device_tensor, float("nan"))
        elif n_out:
            launch_sum(
                self.device_tensor,
                out.device_tensor,
                n_out,
                length,
                cols,
                floating=rtype.is_floating_point,
                mean=mean,
            )
        return out
