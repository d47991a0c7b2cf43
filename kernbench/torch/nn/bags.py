"""``torch.nn.functional.bilinear`` and ``embedding_bag``, composed of tensor methods so
autograd records them.

``bilinear`` is ``x1 @ W.reshape(in1, out * in2)`` (one matmul), a product with ``x2``
and a sum over ``in2``: ``y[..., o] = x1 @ W[o] @ x2 + b[o]``.  ``embedding_bag`` picks
the rows of ``weight`` at ``input`` (an ``index_select``), then reduces each bag: for
``'sum'`` and ``'mean'`` the rows, scaled by ``per_sample_weights`` or ``1 / bag size``,
are added into their bag's output row (``index_add``, as torch's kernel does;
``scale_grad_by_freq`` divides each row's gradient by its index's count in ``input``, the
forward unchanged); for
``'max'`` the bags are gathered into a ``(bags, longest bag, dim)`` block, the positions
past a bag's end set to ``-inf``, and its max taken.  Empty bags give zeros, entries equal
to ``padding_idx`` count for nothing (not in a bag's size either), as torch's.

The bag layout (which entry goes to which bag) is built on the host from the values of
``offsets`` (and of ``input``, for ``padding_idx``), read at no simulated cost as torch's
CPU kernel reads them.  Timing-only runs, which have no values, cost the same kernels
with the entries split evenly among the bags.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import TensorError, TensorNotImplementedError, TensorValueError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.factories import tensor
from kernbench.torch.nn.argument_checks import call_name, floating_input, host_values
from kernbench.torch.shapes import flag_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["bilinear", "embedding_bag"]

_MODES = ("sum", "mean", "max")


def bilinear(
    input1: Tensor,
    input2: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
) -> Tensor:
    """``x1[..., i] * weight[o, i, j] * x2[..., j]`` summed over ``i`` and ``j``, plus
    ``bias[o]``."""
    what = "bilinear"
    x1 = floating_input(input1, what, "input1")
    x2 = floating_input(input2, what, "input2")
    w = floating_input(weight, what, "weight")
    if x1.ndim != x2.ndim:
        raise TensorError(
            f"{call_name(what)}: input dimensions do not match: got {x1.ndim} and {x2.ndim}"
        )
    for d in range(x1.ndim - 1):
        if x1.shape[d] != x2.shape[d]:
            raise TensorError(
                f"{call_name(what)}: input batch dimensions do not match: got {x1.shape[d]} "
                f"and {x2.shape[d]}"
            )
    if w.ndim != 3:
        raise TensorError(
            f"{call_name(what)}: weight must be 3-D (out, in1, in2), got shape {tuple(w.shape)}"
        )
    out_features, in1, in2 = w.shape
    for name, x, want in (("input1", x1, in1), ("input2", x2, in2)):
        got = x.shape[-1] if x.ndim else 1
        if got != want:
            raise TensorError(
                f"{call_name(what)}: {name} size does not match weight size: got {got} but "
                f"expected {want}"
            )
    batch = tuple(x1.shape[:-1])
    left = x1.reshape(-1, in1).matmul(w.permute(1, 0, 2).reshape(in1, out_features * in2))
    out = (left.reshape(-1, out_features, in2) * x2.reshape(-1, 1, in2)).sum(-1)
    if bias is not None:
        b = floating_input(bias, what, "bias")
        if b.ndim != 1 or b.shape[0] != out_features:
            raise TensorError(
                f"{call_name(what)}: bias size does not match weight size: got "
                f"{tuple(b.shape)} but expected ({out_features},)"
            )
        out = out + b
    return out.reshape(*batch, out_features)


def _bag_bounds(
    offsets: np.ndarray | None, entries: int, bags: int, include_last: bool
) -> np.ndarray:
    """Each bag's [start, end) in the entries (``bags + 1`` bounds)."""
    if offsets is None:  # timing-only: no values; the entries split evenly
        return np.linspace(0, entries, bags + 1).astype(np.int64)
    bounds = offsets.astype(np.int64)
    if not include_last:
        bounds = np.append(bounds, entries)
    return bounds


def _check_offsets(what: str, offsets: np.ndarray, entries: int) -> None:
    if offsets.size and offsets[0] != 0:
        raise TensorError(
            f"{call_name(what)}: offsets[0] has to be 0, i.e., the first sequence in the "
            f"mini-batch has to start from position 0. However, got {offsets[0]}"
        )
    if offsets.size and offsets[-1] > entries:
        raise TensorError(
            f"{call_name(what)}: offsets[-1] can not be greater than input's length "
            f"({entries}), but got offsets[-1] of {offsets[-1]}"
        )
    if (np.diff(offsets) < 0).any():
        raise TensorError(f"{call_name(what)}: offsets must not decrease, got {offsets.tolist()}")


def _on_device(values: np.ndarray, like: Tensor, dtype: Any = None) -> Tensor:
    return tensor(values, dtype=dtype, device=like.get_device())


def embedding_bag(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """The sum, mean or max of each bag of ``weight``'s rows picked by ``input``: a 2-D
    ``input`` is one bag a row; a 1-D one is split into bags at ``offsets``."""
    what = "embedding_bag"
    indices = tensor_argument(input, call_name(what))
    table = floating_input(weight, what, "weight")
    if indices.dtype.name not in ("int32", "int64"):
        raise TensorError(
            f"{call_name(what)}: input must hold indices of dtype int64 or int32, got "
            f"{indices.dtype!r}"
        )
    if per_sample_weights is not None:
        per_sample_weights = floating_input(per_sample_weights, what, "per_sample_weights")
        if tuple(per_sample_weights.shape) != tuple(indices.shape):
            raise TensorValueError(
                f"{call_name(what)}: If per_sample_weights ({tuple(per_sample_weights.shape)}) "
                f"is not None, then it must have the same shape as the input "
                f"({tuple(indices.shape)})"
            )
    if table.ndim != 2:
        raise TensorValueError(
            f"{call_name(what)}: weight has to be a 2D Tensor, but got Tensor of dimension "
            f"{table.ndim}"
        )
    include_last = flag_argument(include_last_offset, call_name(what), "include_last_offset")
    if indices.ndim == 2:
        if offsets is not None:
            raise TensorValueError(
                f"{call_name(what)}: if input is 2D, then offsets has to be None, as input is "
                "treated is a mini-batch of fixed length sequences."
            )
        bags, size = indices.shape
        bounds = np.arange(bags + 1, dtype=np.int64) * size
        indices = indices.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif indices.ndim == 1:
        if offsets is None:
            raise TensorValueError(f"{call_name(what)}: offsets has to be a 1D Tensor but got None")
        offsets = tensor_argument(offsets, call_name(what))
        if offsets.ndim != 1:
            raise TensorValueError(f"{call_name(what)}: offsets has to be a 1D Tensor")
        bags = offsets.shape[0] - (1 if include_last else 0)
        given = host_values(offsets)
        if given is not None:
            _check_offsets(what, given, indices.shape[0])
        bounds = _bag_bounds(given, indices.shape[0], max(bags, 0), include_last)
    else:
        raise TensorValueError(
            f"{call_name(what)}: input has to be 1D or 2D Tensor, but got Tensor of dimension "
            f"{indices.ndim}"
        )
    if mode not in _MODES:
        raise TensorValueError(f"{call_name(what)}: mode has to be one of sum, mean or max")
    by_frequency = flag_argument(scale_grad_by_freq, call_name(what), "scale_grad_by_freq")
    if mode == "max" and by_frequency:
        raise TensorValueError(
            f"{call_name(what)}: max mode does not support scaling the gradient by the frequency"
        )
    if mode == "max" and flag_argument(sparse, call_name(what), "sparse"):
        raise TensorValueError(f"{call_name(what)}: max mode does not support sparse weights")
    if max_norm is not None:
        raise TensorError(
            f"{call_name(what)}(max_norm=...): renormalizing the weight in place is not "
            "supported; scale the rows of weight before the lookup"
        )
    if per_sample_weights is not None and mode != "sum":
        raise TensorNotImplementedError(
            f"{call_name(what)}: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}')."
        )
    rows_count = table.shape[0]
    if padding_idx is not None:
        if not -rows_count <= padding_idx < rows_count:
            raise TensorError(f"{call_name(what)}: padding_idx must be within num_embeddings")
        padding_idx = padding_idx % rows_count
    values = host_values(indices)
    if values is not None and values.size and (values.min() < 0 or values.max() >= rows_count):
        bad = values[(values < 0) | (values >= rows_count)][0]
        raise TensorError(
            f"{call_name(what)}: Expected idx >= 0 && idx < num_embeddings ({rows_count}) but "
            f"found idx to be {bad}"
        )
    keep = np.ones(indices.shape[0], dtype=bool)
    if values is not None and padding_idx is not None:
        keep = values != padding_idx
    frequency = None
    if by_frequency and values is not None:
        counts = np.bincount(values.reshape(-1), minlength=rows_count)
        frequency = counts[values.reshape(-1)]
    return _reduce_bags(table, indices, bounds, keep, mode, per_sample_weights, frequency)


def _reduce_bags(
    table: Tensor,
    indices: Tensor,
    bounds: np.ndarray,
    keep: np.ndarray,
    mode: str,
    per_sample_weights: Tensor | None,
    frequency: np.ndarray | None,
) -> Tensor:
    bags = len(bounds) - 1
    entries = indices.shape[0]
    bag_of = np.repeat(np.arange(bags), np.diff(bounds))[:entries]
    kept = np.flatnonzero(keep[: len(bag_of)])
    sizes = np.bincount(bag_of[kept], minlength=bags)
    dim = table.shape[1]
    out = table.new_zeros((bags, dim))
    if not kept.size or not bags:
        return out
    long = DTYPE_OBJECTS["int64"]
    rows = table.index_select(0, indices)
    if kept.size < entries:
        rows = rows.index_select(0, _on_device(kept, table, long))
    if frequency is not None:  # the gradient of each row divided by its index's count
        share = _on_device(1.0 / frequency[kept][:, None], table, table.dtype)
        rows = rows * share + (rows * (1 - share)).detach()
    if mode == "max":
        longest = int(sizes.max())
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        slot = np.arange(longest)[None, :]
        valid = slot < sizes[:, None]
        where = np.where(valid, starts[:, None] + slot, 0)
        block = rows.index_select(0, _on_device(where.reshape(-1), table, long))
        block = block.reshape(bags, longest, dim)
        mask = _on_device(valid[:, :, None], table)
        peak = block.where(mask, float("-inf")).max(1)[0]
        return peak.where(_on_device(sizes[:, None] > 0, table), 0.0)
    if per_sample_weights is not None:
        scale = per_sample_weights
        if kept.size < entries:
            scale = scale.index_select(0, _on_device(kept, table, long))
        rows = rows * scale.unsqueeze(1)
    elif mode == "mean":
        share = 1.0 / np.maximum(sizes[bag_of[kept]], 1)
        rows = rows * _on_device(share[:, None], table, table.dtype)
    return out.index_add(0, _on_device(bag_of[kept], table, long), rows)
