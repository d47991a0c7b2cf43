"""The reductions that skip NaN, ``nansum`` and ``nanmean``, and ``aminmax``.

:class:`TensorNanReductions` is mixed into the tensor class.  Each is written with the
device ops it stands for, so it costs what those cost: ``nansum`` is ``isnan``, a
``masked_fill`` of the NaNs with 0 and a ``sum`` (one kernel in torch; integer and bool
tensors, which hold no NaN, are summed directly); ``nanmean`` is that sum over the count
of the other elements (``0 / 0``: NaN where a slice is all NaN, as torch);
``aminmax`` is ``amin`` and ``amax`` (two passes where torch's kernel makes one).
Dtypes are torch's: ``nansum`` sums integers into int64 and takes ``dtype=``;
``nanmean`` takes floating tensors only.
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import as_torch_dtype
from kernbench.torch.shapes import dim_index, flag_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["AminmaxResult", "TensorNanReductions"]

AminmaxResult = namedtuple("aminmax", ["min", "max"])  # torch.return_types.aminmax


def _without_nans(t: Tensor) -> Tensor:
    """``t`` with its NaNs replaced by 0 (a new tensor)."""
    nan = t.isnan()
    clean = t.masked_fill(nan, 0)
    nan.free()
    return clean


class TensorNanReductions:
    """``nansum``, ``nanmean`` and ``aminmax``."""

    __slots__ = ()

    def nansum(
        self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
    ) -> Tensor:
        """The sum over ``dim`` (an int, a tuple, or None: every dim), NaN counted as 0."""
        keepdim = flag_argument(keepdim, "nansum", "keepdim")
        if not self.dtype.is_floating_point:
            return self.sum(dim, keepdim, dtype=dtype)
        clean = _without_nans(self)
        out = clean.sum(dim, keepdim, dtype=dtype)
        clean.free()
        return out

    def nanmean(
        self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
    ) -> Tensor:
        """The mean of the elements that are not NaN over ``dim`` (NaN where there are none)."""
        keepdim = flag_argument(keepdim, "nanmean", "keepdim")
        if not self.dtype.is_floating_point:
            raise TensorError(
                f"nanmean(): expected input to have floating point dtype but got {self.dtype!r} "
                "(as in torch); call .float() first"
            )
        rtype = as_torch_dtype(dtype) if dtype is not None else self.dtype
        if not rtype.is_floating_point:
            raise TensorError(
                f"nanmean(): the dtype must be a floating dtype (as in torch), got {rtype!r}"
            )
        clean = _without_nans(self)
        total = clean.sum(dim, keepdim, dtype=rtype)
        clean.free()
        present = self.isnan().logical_not_()
        count = present.sum(dim, keepdim)
        present.free()
        return total.div_(count)

    def aminmax(self: Tensor, *, dim: Any = None, keepdim: bool = False) -> AminmaxResult:
        """``(min, max)`` over ``dim`` (an int, or None: every element), as torch's named
        tuple ``aminmax``; with ``keepdim`` and no ``dim``, each has every dim, of size 1."""
        keepdim = flag_argument(keepdim, "aminmax", "keepdim")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
            raise TensorError(f"aminmax(): dim must be an int or None (as in torch), got {dim!r}")
        d = None if dim is None else dim_index(dim, self.ndim, "aminmax")
        if self.numel() == 0 or (d is not None and self.ndim and self.shape[d] == 0):
            raise TensorError(
                "aminmax(): cannot compute aminmax over an empty dimension as the operation "
                "has no identity (as in torch)"
            )
        dims = () if d is None else d
        return AminmaxResult(self.amin(dims, keepdim), self.amax(dims, keepdim))
