"""``repeat``, ``repeat_interleave``, ``tile`` and ``unbind`` of :class:`~kernbench.torch.Tensor`.

:class:`TensorRepeats` is mixed into the tensor class.  The repeats are a
broadcast view (``unsqueeze`` then ``expand``) copied out by ``reshape``: one
copy kernel, the bytes torch's repeat writes.  Grouped-query attention's
``k.repeat_interleave(n_rep, dim=1)`` is one of these.  ``unbind`` gives
views, as torch's does.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.shapes import dim_index, int_sequence

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorRepeats"]


class TensorRepeats:
    """``repeat``, ``repeat_interleave``, ``tile`` and ``unbind``."""

    def repeat(self: Tensor, *sizes: Any) -> Tensor:
        """A copy with the tensor repeated ``sizes[i]`` times along dim ``i`` (``sizes``
        may name more dims than the tensor has: they are added in front)."""
        repeats = _sizes("repeat", sizes)
        if len(repeats) < self.ndim:
            raise TensorError(
                f"repeat: Number of dimensions of repeat dims ({len(repeats)}) can not be "
                f"smaller than number of dimensions of tensor ({self.ndim})"
            )
        shape = (1,) * (len(repeats) - self.ndim) + tuple(self.shape)
        spread = self.reshape(*shape) if shape else self.reshape(1)[0]
        for i in range(len(shape)):  # (1, s0, 1, s1, ...)
            spread = spread.unsqueeze(2 * i)
        pairs = [n for r, s in zip(repeats, shape, strict=True) for n in (r, s)]
        out_shape = [r * s for r, s in zip(repeats, shape, strict=True)]
        return _copied(self, spread.expand(*pairs).reshape(*out_shape))

    def tile(self: Tensor, *dims: Any) -> Tensor:
        """``repeat`` with ``dims`` padded with ones in front to the tensor's dims."""
        repeats = _sizes("tile", dims)
        return self.repeat(*((1,) * (self.ndim - len(repeats)) + repeats))

    def repeat_interleave(
        self: Tensor, repeats: Any, dim: int | None = None, *, output_size: int | None = None
    ) -> Tensor:
        """A copy with each element (each slice along ``dim``) repeated ``repeats`` times
        in place; the flattened tensor's elements without ``dim``.  A tensor of
        per-slice repeats is read to the host (the output's size depends on it, as torch
        synchronizes for it) and the slices gathered by one ``index_select``."""
        source = self.reshape(-1) if dim is None else self
        d = 0 if dim is None else dim_index(dim, self.ndim)
        shape = list(source.shape)
        if hasattr(repeats, "numel") and repeats.numel() != 1:
            return _per_slice(source, repeats, d, output_size)
        count = _count(repeats)
        if output_size is not None and output_size != shape[d] * count:
            raise TensorError(
                f"repeat_interleave: output_size {output_size} is not the {shape[d] * count} "
                "elements the repeats give"
            )
        spread = source.unsqueeze(d + 1).expand(*shape[: d + 1], count, *shape[d + 1 :])
        return _copied(self, spread.reshape(*shape[:d], shape[d] * count, *shape[d + 1 :]))

    def unbind(self: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
        """Views of the slices along ``dim``, that dim removed."""
        d = dim_index(dim, self.ndim, "unbind", scalar=False)
        before = (slice(None),) * d
        return tuple(self[(*before, i)] for i in range(self.shape[d]))


def _sizes(what: str, sizes: tuple[Any, ...]) -> tuple[int, ...]:
    if len(sizes) == 1 and not isinstance(sizes[0], numbers.Integral):
        sizes = int_sequence(sizes[0], what, "the repeats")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
            raise TensorError(f"{what}: the repeats must be non-negative ints, got {list(sizes)}")
    return tuple(int(s) for s in sizes)


def _per_slice(source: Tensor, repeats: Any, d: int, output_size: int | None) -> Tensor:
    """``repeat_interleave`` with a 1-D tensor of repeats, one per slice along ``d``."""
    size = source.shape[d]
    if repeats.ndim != 1 or repeats.numel() != size or repeats.dtype.is_floating_point:
        raise TensorError(
            f"repeat_interleave: repeats must be a 1-D integer tensor of {size} counts (one "
            f"per slice along dim {d}) or one int, got {repeats.dtype!r} of shape "
            f"{tuple(repeats.shape)}"
        )
    counts = np.asarray(repeats.tolist(), dtype=np.int64)  # the output's size: read, as torch
    if (counts < 0).any():
        raise TensorError("repeat_interleave: repeats can not be negative (as torch)")
    if output_size is not None and output_size != int(counts.sum()):
        raise TensorError(
            f"repeat_interleave: output_size {output_size} is not the {int(counts.sum())} "
            "slices the repeats give"
        )
    index = np.repeat(np.arange(size, dtype=np.int64), counts)
    rows = source.new_empty(index.shape, dtype=DTYPE_OBJECTS["int64"]).copy_(index)
    try:
        return source.index_select(d, rows)
    finally:
        rows.free()


def _count(repeats: Any) -> int:
    if hasattr(repeats, "numel") and not isinstance(repeats, numbers.Integral):
        repeats = repeats.item()
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) or repeats < 0:
        raise TensorError(f"repeat_interleave: repeats must be a non-negative int, got {repeats!r}")
    return int(repeats)


def _copied(original: Tensor, result: Tensor) -> Tensor:
    """``result``, or a copy of it when the reshape could keep it a view of ``original``."""
    if math.prod(result.shape) and result.storage_device_tensor is original.storage_device_tensor:
        return result.clone()
    return result
