"""``unique``, ``bincount``, ``multinomial`` and ``new_tensor`` of :class:`~kernbench.torch.Tensor`.

:class:`TensorHostOps` is mixed into the tensor class.  The result's size of
``unique`` and ``bincount`` depends on the values, so torch reads them to the
host (it synchronizes); here the values are read through the fabric (the read
costs time), the result computed with NumPy and copied back in, as
``nonzero`` is.  ``multinomial`` reads the probabilities and draws on the host
from the rank's generator (``torch.manual_seed`` repeats it), as the other
random factories draw.  ``new_tensor`` copies host data in.  None has values
to read in timing-only mode, where they raise as ``nonzero`` does.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch import random as torch_random
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, as_torch_dtype, check_data_fits
from kernbench.torch.shapes import dim_index, flag_argument, int_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorHostOps"]

_INT64 = DTYPE_OBJECTS["int64"]
_FLOAT32 = DTYPE_OBJECTS["float32"]
_FLOAT64 = DTYPE_OBJECTS["float64"]


def _copied_in(like: Tensor, values: np.ndarray, dtype: Any) -> Tensor:
    out = like.new_empty(values.shape, dtype=dtype)
    if values.size:
        out.copy_(values)
    return out


class TensorHostOps:
    """Value-dependent results computed on the host: ``unique``, ``bincount``, ...."""

    __slots__ = ()

    def unique(
        self: Tensor,
        sorted: bool = True,  # noqa: A002 - torch's name
        return_inverse: bool = False,
        return_counts: bool = False,
        dim: int | None = None,
    ) -> Any:
        """The distinct values (sorted, as torch's CUDA kernel always sorts), with each
        element's index into them (``return_inverse``) and their counts (``int64``);
        with ``dim``, the distinct slices along it."""
        flag_argument(sorted, "unique", "sorted")
        inverse = flag_argument(return_inverse, "unique", "return_inverse")
        counts = flag_argument(return_counts, "unique", "return_counts")
        values = self.numpy(force=True)
        if dim is None:
            found, where, many = np.unique(
                values, return_inverse=True, return_counts=True, equal_nan=False
            )  # each NaN its own value, as torch's
            where = where.reshape(self.shape)
        else:
            d = dim_index(dim, self.ndim, "unique", scalar=False)
            found, where, many = np.unique(values, return_inverse=True, return_counts=True, axis=d)
            where = where.reshape(-1)
        result = [_copied_in(self, found, self.dtype)]
        if inverse:
            result.append(_copied_in(self, where.astype(np.int64), _INT64))
        if counts:
            result.append(_copied_in(self, many.astype(np.int64), _INT64))
        return result[0] if len(result) == 1 else tuple(result)

    def bincount(self: Tensor, weights: Any = None, minlength: int = 0) -> Tensor:
        """How often each value ``0..max`` occurs in a 1-D tensor of non-negative integers
        (``int64``), or the sum of their ``weights`` (float32 for float32 weights, else
        float64, as torch); at least ``minlength`` bins."""
        minlength = int_argument(minlength, "bincount", "minlength")
        if minlength < 0:
            raise TensorError(f"bincount: minlength should be >= 0, got {minlength}")
        if self.ndim != 1 or self.dtype.is_floating_point or self.dtype is BOOL:
            raise TensorError(
                f"bincount only supports 1-d non-negative integral inputs (got {self.dtype!r} "
                f"of shape {tuple(self.shape)})"
            )
        values = self.numpy(force=True).astype(np.int64)
        if values.size and values.min() < 0:
            raise TensorError(
                f"bincount only supports 1-d non-negative integral inputs (got {values.min()})"
            )
        bins = max(minlength, int(values.max()) + 1 if values.size else 0)
        if bins > 2**31 - 1:
            raise TensorError(
                f"bincount: {bins} bins (the largest value plus one, or minlength) would not "
                "fit a device tensor (at most 2**31 - 1 elements)"
            )
        if weights is None:
            found = np.bincount(values, minlength=minlength).astype(np.int64)
            return _copied_in(self, found, _INT64)
        if not hasattr(weights, "storage_device_tensor"):
            raise TensorError(f"bincount: weights must be a Tensor, got {type(weights).__name__}")
        if weights.ndim != 1 or weights.shape[0] != self.shape[0]:
            raise TensorError(
                f"bincount: weights should be 1-d and have the same length as input (got "
                f"{tuple(weights.shape)} for {tuple(self.shape)})"
            )
        dtype = _FLOAT32 if weights.dtype is _FLOAT32 else _FLOAT64
        w = weights.numpy(force=True).astype(np.float64)
        found = np.bincount(values, weights=w, minlength=minlength)
        return _copied_in(self, found.astype(np.dtype(dtype.name)), dtype)

    def multinomial(
        self: Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None
    ) -> Tensor:
        """``num_samples`` category indices per row of (unnormalized) probabilities,
        ``int64``; drawn on the host from the rank's generator (or ``generator``) after the
        probabilities are read, and copied in.  Not the values torch would draw.  In
        timing-only mode (no values) the indices are copied in without the read."""
        n = int_argument(num_samples, "multinomial", "num_samples")
        replace = flag_argument(replacement, "multinomial", "replacement")
        if self.ndim not in (1, 2):
            raise TensorError(f"multinomial: prob_dist must be 1 or 2 dim, got {self.ndim}")
        if not self.dtype.is_floating_point:
            raise TensorError(
                f"multinomial only supports floating-point dtypes for input, got {self.dtype!r}"
            )
        if n <= 0:
            raise TensorError(f"multinomial: cannot sample n_sample <= 0 samples (got {n})")
        categories = self.shape[-1]
        if not replace and n > categories:
            raise TensorError(
                f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
                f"replacement ({n} > {categories})"
            )
        rng = torch_random.resolve(generator)
        if self.storage_device_tensor.context.timing_only:  # the shape is known: no values
            drawn = np.zeros((*self.shape[:-1], n), np.int64)
            return _copied_in(self, drawn, _INT64)
        rows = self.numpy(force=True).astype(np.float64).reshape(-1, categories)
        drawn = np.empty((rows.shape[0], n), np.int64)
        for r, p in enumerate(rows):
            if not np.isfinite(p).all() or (p < 0).any():
                raise TensorError(
                    "multinomial: probability tensor contains either `inf`, `nan` or element < 0"
                )
            total = p.sum()
            if total <= 0:
                raise TensorError(
                    "multinomial: invalid multinomial distribution (sum of probabilities <= 0)"
                )
            if not replace and np.count_nonzero(p) < n:
                raise TensorError(
                    "multinomial: invalid multinomial distribution (with replacement=False, not "
                    "enough non-negative category to sample)"
                )
            drawn[r] = rng.choice(categories, size=n, replace=replace, p=p / total)
        return _copied_in(self, drawn.reshape(*self.shape[:-1], n), _INT64)

    def new_tensor(
        self: Tensor,
        data: Any,
        *,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """A tensor of ``data`` (copied in) with this tensor's dtype and device unless
        ``dtype``/``device`` say otherwise, as torch's."""
        dt = as_torch_dtype(dtype, self.dtype)
        if hasattr(data, "storage_device_tensor"):
            out = data.to(dtype=dt, device=device, copy=True)
        else:
            try:
                array = np.asarray(data)
            except ValueError:
                raise TensorError(
                    "new_tensor: data must be a number or nested lists of numbers, all lists "
                    "at one depth the same length (as torch)"
                ) from None
            if array.dtype == object or not (
                array.dtype.kind in "biuf" or isinstance(data, numbers.Number)
            ):
                raise TensorError(f"new_tensor: data of NumPy dtype {array.dtype} is not supported")
            if not isinstance(data, np.ndarray):
                check_data_fits(data, dt, "new_tensor")
            out = self.new_empty(array.shape, dtype=dt, device=device)
            if array.size:
                out.copy_(array)
        return (
            out.requires_grad_()
            if flag_argument(requires_grad, "new_tensor", "requires_grad")
            else out
        )
