"""Histograms of :class:`~kernbench.torch.Tensor`: ``histc``.

:class:`TensorHistograms` is mixed into the tensor class.  ``histc`` is one elementwise
kernel over the elements: each finds its bin by torch's linear map
``int((x - min) * bins / (max - min))`` in the tensor's dtype (the last bin takes
``max`` too) and adds one to it with ``tl.atomic_add``, so it costs about a scatter-add
of the elements.  Elements outside ``[min, max]`` and NaNs are not counted.  With
``min == max`` (both 0 by default) the range is the data's: a min and a max reduction
read to the host, as torch reads its ``aminmax`` (``item()``), then widened by 1 on each
side when it is a single value.  The result has the input's dtype; integer inputs are
refused, as torch's CPU kernel refuses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

import kernbench.kernels.language as tl
from kernbench.errors import TensorError
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.dtypes import cast_values
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid, launch_fill
from kernbench.torch.dtypes import python_scalar
from kernbench.torch.host_values import checked_read
from kernbench.torch.shapes import int_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorHistograms", "launch_histc"]


@jit(do_not_specialize=["low", "high"])
def _histc_kernel(x_ptr, hist_ptr, n, low, high, BINS: tl.constexpr, BLOCK: tl.constexpr):
    # torch's linear-interpolation histogram, its arithmetic in x's dtype
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=0)
    keep = mask & (x >= low) & (x <= high)  # NaN is neither
    # each step rounded to x's dtype, as torch's Half and BFloat16 operators round
    # (high - low of two values of x's dtype is exact in a double, rounded once here)
    scaled = ((x - low).to(x.dtype) * BINS).to(x.dtype)
    position = (scaled / (high - low)).to(x.dtype).to(tl.int32)
    position = tl.minimum(tl.maximum(position, 0), BINS - 1)  # max falls in the last bin
    tl.atomic_add(hist_ptr + position, 1, mask=keep)


def launch_histc(x: DeviceTensor, hist: DeviceTensor, low: float, high: float) -> None:
    """Count the elements of ``x`` into the ``hist.numel`` equal bins of ``[low, high]``
    (``hist`` zeroed first; the bounds rounded to ``x``'s dtype, as torch's bin edges)."""
    n = x.numel
    kind = getattr(tl, x.dtype.name)  # a float type of the kernel language
    low, high = (float(cast_values(np.float64(v), kind)) for v in (low, high))
    _histc_kernel[elementwise_grid(n, "a histogram")](
        x,
        hist,
        n,
        typed_scalar(low, x.dtype),
        typed_scalar(high, x.dtype),
        BINS=hist.numel,
        BLOCK=BLOCK,
    )


def _bound(value: Any, name: str) -> float:
    number = python_scalar(value)
    if number is None or isinstance(number, bool):
        raise TensorError(f"torch.histc: {name} must be a number, got {value!r}")
    return float(number)


class TensorHistograms:
    """``histc``: equal-width bins counted by one atomic-add kernel."""

    __slots__ = ()

    def histc(self: Tensor, bins: Any = 100, min: Any = 0, max: Any = 0) -> Tensor:  # noqa: A002
        """The counts of the elements in ``bins`` equal bins of ``[min, max]`` (the data's
        range when ``min == max``), in the tensor's dtype, as ``torch.histc``."""
        bins = int_argument(bins, "torch.histc", "bins")
        low, high = _bound(min, "min"), _bound(max, "max")
        if not self.dtype.is_floating_point:
            raise TensorError(
                f'torch.histc of {self.storage_device_tensor.name!r}: "histogram_cpu" not '
                f"implemented for {self.dtype!r} (as torch); convert with .float() first"
            )
        if bins <= 0:
            raise TensorError(
                f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0"
            )
        timing_only = self.storage_device_tensor.context.timing_only
        if low == high and self.numel():
            extremes = []
            for reduced in (self.min(), self.max()):
                extremes.append(checked_read(reduced))
                reduced.free()
            if not timing_only:  # no values there; the reads cost the same time
                low, high = (float(e.reshape(())) for e in extremes)
        if low == high:
            low, high = low - 1, high + 1
        if not all(np.isfinite((low, high))):
            raise TensorError(f"torch.histc: range of [{low:g}, {high:g}] is not finite")
        if not low < high:
            raise TensorError("torch.histc: max must be larger than min")
        hist = self.new_empty((bins,))
        launch_fill(hist.device_tensor, 0)
        if self.numel():
            dense = self.dense()
            launch_histc(dense.device_tensor, hist.device_tensor, low, high)
            if dense is not self:
                dense.free()
        return hist
