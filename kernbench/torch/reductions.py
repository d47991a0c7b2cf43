"""Tensor reductions on the device: ``sum``, ``mean``, ``max``, ``min``, ``argmax``, ``argmin``.

:class:`TensorReductions` is mixed into :class:`~kernbench.torch.Tensor`.  A
sum runs the sum kernel with a float32 accumulator (float64 for float64;
int64 for integer and bool tensors, whose sums torch gives in int64);
``max``/``min`` run the extreme kernel, which also gives the first index of
each extreme (``int64``, as torch).  Results stay on the device, whole on the device's first
PE.  A view that is not one run of memory is first copied into a contiguous
temporary (costed).  ``max(dim)`` returns ``(values, indices)`` as a named
tuple, as PyTorch's ``torch.return_types.max``.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.runtime.dtypes import DTYPES
from kernbench.torch.arithmetic import dense_as, free_temporaries, pair_dtype, read_in_place
from kernbench.torch.broadcast_kernels import launch_broadcast
from kernbench.torch.device_kernels import (
    launch_combine,
    launch_extreme,
    launch_fill,
    launch_sum,
    launch_var,
)
from kernbench.torch.dtypes import (
    BOOL,
    DTYPE_OBJECTS,
    TorchDType,
    as_torch_dtype,
    python_scalar,
)
from kernbench.torch.shapes import dim_index, flag_argument
from kernbench.torch.views import broadcast_shapes, same_device

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["MaxResult", "MinResult", "TensorReductions"]

MaxResult = namedtuple("max", ["values", "indices"])  # torch.return_types.max
MinResult = namedtuple("min", ["values", "indices"])  # torch.return_types.min


def _lowest(dt: TorchDType, is_max: bool) -> int | float:
    """The value masked-off lanes hold: never chosen over a real element."""
    if dt.is_floating_point:
        return float("-inf") if is_max else float("inf")
    if dt is BOOL:
        return 0 if is_max else 1
    info = np.iinfo(DTYPES[dt.name].storage)
    return int(info.min) if is_max else int(info.max)


class TensorReductions:
    """Reductions of :class:`~kernbench.torch.Tensor`."""

    __slots__ = ()

    def sum(
        self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None
    ) -> Tensor:
        """Sum on the device (a float32, float64 or int64 accumulator); the result stays a
        device tensor."""
        rtype = as_torch_dtype(dtype) if dtype is not None else None
        dim = _dim_or_axis(dim, axis)
        keepdim = flag_argument(keepdim, "sum", "keepdim")
        if rtype is None:  # torch sums integers and bools into int64
            rtype = self.dtype if self.dtype.is_floating_point else DTYPE_OBJECTS["int64"]
        elif _casts_values(self.dtype, rtype):
            # torch casts the input to dtype first: 1.5 + 2.5 summed as int32 is 1 + 2
            x = self.to(rtype)
            try:
                return x.sum(dim, keepdim, dtype=rtype)
            finally:
                x.free()
        return self._reduce(dim, keepdim, rtype, mean=False)

    def norm(
        self: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None
    ) -> Tensor:
        """The vector 1- or 2-norm (``p`` 1, 2 or "fro") over ``dim`` (all by default), on
        the device in one pass, as ``torch.norm``."""
        order = {"fro": 2, None: 2}.get(p) if p is None or isinstance(p, str) else None
        if isinstance(p, int | float) and p in (1, 2):  # 1, 2, 1.0, 2.0 (not inf, not NaN)
            order = int(p)
        if order is None:
            raise TensorError(
                f"norm(p={p!r}): p is 1, 2 or 'fro' here; for another p: "
                "(t.abs() ** p).sum() ** (1 / p)"
            )
        rtype = as_torch_dtype(dtype) if dtype is not None else self.dtype
        if not self.dtype.is_floating_point:
            raise TensorError(
                f"norm(): input dtype should be floating point (got {self.dtype!r}, as in "
                "torch); call .float() first"
            )
        if not rtype.is_floating_point:
            raise TensorError(
                f"norm(): the desired output dtype should be floating point (got dtype="
                f"{rtype!r}, as in torch)"
            )
        keepdim = flag_argument(keepdim, "norm", "keepdim")
        return self._reduce(_dim_or_axis(dim, None), keepdim, rtype, mean=False, norm=order)

    def var(
        self: Tensor,
        dim: Any = None,
        unbiased: Any = None,
        keepdim: bool = False,
        *,
        correction: Any = None,
    ) -> Tensor:
        """Variance over ``dim`` (int, tuple or None: all), divided by N - ``correction``
        (1, Bessel's; ``unbiased=False`` is 0), on the device in two passes."""
        return self._spread("var", dim, unbiased, keepdim, correction)

    def std(
        self: Tensor,
        dim: Any = None,
        unbiased: Any = None,
        keepdim: bool = False,
        *,
        correction: Any = None,
    ) -> Tensor:
        """The square root of :meth:`var`."""
        return self._spread("std", dim, unbiased, keepdim, correction)

    def _spread(
        self: Tensor, what: str, dim: Any, unbiased: Any, keepdim: bool, correction: Any
    ) -> Tensor:
        if isinstance(dim, bool):  # torch's older var(unbiased) form
            dim, unbiased = None, dim
        keepdim = flag_argument(keepdim, what, "keepdim")
        if unbiased is not None and correction is not None:
            raise TensorError(f"{what}(): give unbiased= or correction=, not both")
        if correction is None:
            correction = 0 if unbiased is False else 1
        if python_scalar(correction) is None:
            raise TensorError(f"{what}(): correction must be a number, got {correction!r}")
        if not self.dtype.is_floating_point:
            raise TensorError(
                f"{what}(): std and var only support floating point dtypes (got {self.dtype!r}, "
                "as in torch); call .float() first"
            )
        if isinstance(dim, tuple | list) and len(dim) == 1:
            dim = dim[0]
        if isinstance(dim, tuple | list) and dim:
            named = sorted({dim_index(d, self.ndim) for d in dim})
            if len(named) < len(dim):
                raise TensorError(f"{what}(): a dim appears multiple times in {tuple(dim)}")
            kept = [d for d in range(self.ndim) if d not in named]
            permuted = self.permute(*kept, *named)
            moved = permuted.contiguous()  # the reduced dims last, in one run
            flat = moved.reshape(*[self.shape[d] for d in kept], -1)
            result = getattr(flat, what)(-1, correction=correction)
            if moved is not permuted:
                moved.free()
            if keepdim:
                return result.reshape(
                    *[1 if d in named else self.shape[d] for d in range(self.ndim)]
                )
            return result
        if isinstance(dim, tuple | list):
            dim = None
        rows, length, cols, d = self._split(dim)
        out = self.new_empty(self._out_shape(d, keepdim))
        if rows * cols:
            x = self.dense()
            launch_var(
                x.device_tensor,
                out.device_tensor,
                rows * cols,
                length,
                cols,
                correction=float(correction),
                std=what == "std",
            )
            if x is not self:
                x.free()
        return out

    def mean(
        self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None
    ) -> Tensor:
        """Mean on the device; integer tensors need ``dtype=`` (as in torch)."""
        rtype = as_torch_dtype(dtype) if dtype is not None else self.dtype
        if not rtype.is_floating_point:
            raise TensorError(
                f"mean() of {self.storage_device_tensor.name!r}: {rtype!r} is not a floating "
                "dtype; pass dtype=torch.float32 or call .float() first"
            )
        keepdim = flag_argument(keepdim, "mean", "keepdim")
        return self._reduce(_dim_or_axis(dim, axis), keepdim, rtype, mean=True)

    def max(self: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """``max()`` a 0-d tensor, ``max(dim)`` (values, indices), ``max(other)`` elementwise."""
        keepdim = flag_argument(keepdim, "max", "keepdim")
        return self._extreme(_dim_or_axis(dim, axis), keepdim, is_max=True)

    def min(self: Tensor, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Any:
        """``min()`` a 0-d tensor, ``min(dim)`` (values, indices), ``min(other)`` elementwise."""
        keepdim = flag_argument(keepdim, "min", "keepdim")
        return self._extreme(_dim_or_axis(dim, axis), keepdim, is_max=False)

    def argmax(self: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
        """The first index of the largest value (of the flattened tensor without ``dim``;
        ``keepdim`` then gives it every dim, of size 1, as torch)."""
        keepdim = flag_argument(keepdim, "argmax", "keepdim")
        if dim is None:
            return _flat_index(self.reshape(-1).max(0).indices, self.ndim, keepdim)
        return self._extreme(dim, keepdim, is_max=True).indices

    def argmin(self: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
        keepdim = flag_argument(keepdim, "argmin", "keepdim")
        if dim is None:
            return _flat_index(self.reshape(-1).min(0).indices, self.ndim, keepdim)
        return self._extreme(dim, keepdim, is_max=False).indices

    def maximum(self: Tensor, other: Tensor) -> Tensor:
        return self._combine("max", other)

    def minimum(self: Tensor, other: Tensor) -> Tensor:
        return self._combine("min", other)

    # -- the shared machinery ------------------------------------------------------------
    def _split(self: Tensor, dim: Any) -> tuple[int, int, int, int | None]:
        """(rows, length, cols, d): the tensor as (rows, length, cols) around dim ``d``."""
        shape = tuple(self.shape)
        if dim is None:
            return 1, self.numel(), 1, None
        d = dim_index(dim, self.ndim)
        if not shape:
            return 1, 1, 1, d
        return math.prod(shape[:d]), shape[d], math.prod(shape[d + 1 :]), d

    def _out_shape(self: Tensor, d: int | None, keepdim: bool) -> tuple[int, ...]:
        shape = tuple(self.shape)
        if d is None:
            return (1,) * len(shape) if keepdim else ()
        return shape[:d] + ((1,) if keepdim else ()) + shape[d + 1 :]

    def _reduce(
        self: Tensor, dim: Any, keepdim: bool, rtype: TorchDType, mean: bool, norm: int = 0
    ) -> Tensor:
        if isinstance(dim, tuple | list):
            if not dim:
                dim = None  # torch reduces every dim for an empty list (not NumPy's none)
            elif len(dim) == 1:
                dim = dim[0]
            else:
                return self._reduce_dims(dim, keepdim, rtype, mean, norm)
        rows, length, cols, d = self._split(dim)
        out = self.new_empty(self._out_shape(d, keepdim), dtype=rtype)
        n_out = rows * cols
        if mean and length == 0:
            launch_fill(out.device_tensor, float("nan"))
        elif n_out:
            x = self.dense()
            launch_sum(
                x.device_tensor,
                out.device_tensor,
                n_out,
                length,
                cols,
                mean=mean,
                norm=norm,
            )
            if x is not self:
                x.free()
        return out

    def _reduce_dims(
        self: Tensor, dims: Any, keepdim: bool, rtype: TorchDType, mean: bool, norm: int = 0
    ) -> Tensor:
        """Several dims, one after another from the last (each keeps its dim until the end)."""
        named = [dim_index(d, self.ndim) for d in dims]
        for d in named:
            if named.count(d) > 1:
                raise TensorError(
                    f"dim {d} appears multiple times in the list of dims {tuple(dims)}"
                )
        order = sorted(named, reverse=True)
        result = self
        for d in order:
            # a norm of norms is the norm over both dims (the 1-norm of |x| sums, too)
            step = result._reduce(d, True, rtype, mean, norm)
            if result is not self:
                result.free()
            result = step
        return result if keepdim else result.squeeze(tuple(order))

    def _extreme(self: Tensor, dim: Any, keepdim: bool, *, is_max: bool) -> Any:
        name = "max" if is_max else "min"
        if hasattr(dim, "storage_device_tensor"):  # max(other): elementwise
            return self._combine(name, dim)
        rows, length, cols, d = self._split(dim)
        if length == 0 or self.numel() == 0:
            raise TensorError(
                f"{name}() of {self.storage_device_tensor.name!r}: cannot reduce over a "
                "zero-size dimension; give a non-empty tensor or another dim"
            )
        values = self.new_empty(self._out_shape(d, keepdim))
        indices = self.new_empty(values.shape, dtype=DTYPE_OBJECTS["int64"])
        x = self.dense()
        launch_extreme(
            x.device_tensor,
            values.device_tensor,
            indices.device_tensor,
            rows * cols,
            length,
            cols,
            lowest=_lowest(self.dtype, is_max),
            is_max=is_max,
        )
        if x is not self:
            x.free()
        if d is None:
            indices.free()
            return values
        result = MaxResult if is_max else MinResult
        return result(values, indices)

    def _combine(self: Tensor, op: str, other: Any) -> Tensor:
        if not hasattr(other, "storage_device_tensor"):
            raise TensorError(
                f"{'maximum' if op == 'max' else 'minimum'}: other must be a Tensor, got "
                f"{type(other).__name__}"
            )
        same_device("maximum" if op == "max" else "minimum", self, other)
        dtype = pair_dtype(self, other)  # as torch promotes: int32 and float32 give float32
        shape = broadcast_shapes(self.shape, other.shape, f"{op}(other)")
        if read := read_in_place(shape, [(self, dtype), (other, dtype)]):
            out = self.new_empty(shape, dtype=dtype)
            launch_broadcast("combine", op, out.device_tensor, shape, read[0])
            free_temporaries(*read[1])
            return out
        x, temps = dense_as(self, shape, None if self.dtype is dtype else dtype)
        y, more = dense_as(other, shape, None if other.dtype is dtype else dtype)
        out = self.new_empty(shape, dtype=dtype)
        launch_combine(op, x.device_tensor, y.device_tensor, out.device_tensor)
        for temp in temps + more:
            temp.free()
        return out


def _casts_values(source: TorchDType, target: TorchDType) -> bool:
    """Whether converting ``source`` to ``target`` first changes what a sum adds up:
    floats to ints (truncated), or floats to a narrower float (rounded)."""
    if not source.is_floating_point:
        return False
    return not target.is_floating_point or target.itemsize < source.itemsize


def _flat_index(index: Tensor, ndim: int, keepdim: bool) -> Tensor:
    """The 0-d index into the flattened tensor, in ``ndim`` dims of size 1 when ``keepdim``."""
    return index.view((1,) * ndim) if keepdim else index


def _dim_or_axis(dim: Any, axis: Any) -> Any:
    """PyTorch takes ``axis=`` as another name for ``dim=`` (NumPy's spelling)."""
    if axis is not None:
        if dim is not None:
            raise TensorError("give dim or axis, not both")
        return axis
    return dim
