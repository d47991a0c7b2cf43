"""Advanced indexing: ``t[idx]``, ``t[:, idx]``, ``t[rows, cols]``, ``t[idx] = v``, as torch.

An index that holds integer tensors, lists or arrays (and bool masks inside a
tuple) follows PyTorch's (NumPy's) rules: the integer indices broadcast to one
shape ``B``; the result has ``B`` in place of the indexed dims when those are
next to each other in the key, else ``B`` first, then the other dims.  The
basic parts of the key (ints, slices, ``None``, ``...``) make a view first, at
no cost; then ``index_ops``' gather kernel reads the selected rows through the
index values on the device (negative indices wrapped in the kernel), as
torch's index kernel does, so nothing is read to the host and timing-only runs
work.  Several index tensors are first combined into one row number per result
row by a few elementwise kernels over the indices.  Writing (``t[idx] = v``)
is ``index_ops``' scatter kernel (with duplicate indices one of the writes
wins, as in torch).  A bool mask inside a tuple is read to the host for its
nonzero positions, as torch waits for the count.  Indices are checked against
the sizes in functional mode (host-side, no simulated time), with torch's
IndexError message.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError, TensorIndexError, user_stacklevel
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS
from kernbench.torch.index_ops import launch_gather, launch_scatter

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "check_mask_shape",
    "has_advanced",
    "read_advanced",
    "warn_uint8_mask",
    "write_advanced",
]

_INT64 = DTYPE_OBJECTS["int64"]


def warn_uint8_mask(frames: int) -> None:
    """torch's warning for a uint8 index, which it takes as a mask (deprecated there),
    shown at the script's line (the first frame outside kernbench, whatever ``frames``
    says: autograd's wrappers add frames)."""
    warnings.warn(
        "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def check_mask_shape(name: str, shape: tuple[int, ...], covered: Any, at: int) -> None:
    """A bool mask covering ``shape``'s dims from ``at`` must match them, as torch checks."""
    covered = tuple(covered)
    for i, size in enumerate(covered):
        j = at + i
        if j >= len(shape) or size != shape[j]:
            there = shape[j] if j < len(shape) else "none"
            raise TensorIndexError(
                f"indexing {name!r}: the shape of the mask {list(covered)} at index {i} does "
                f"not match the shape of the indexed tensor {list(shape)} at index {j} (size "
                f"{there}, as torch checks)"
            )


def _is_tensor(k: Any) -> bool:
    """A facade tensor (a ``Parameter`` too), told by its device tensor."""
    return hasattr(k, "storage_device_tensor")


def _is_index_array(k: Any) -> bool:
    if _is_tensor(k):
        return k.ndim > 0 or k.dtype is BOOL
    return isinstance(k, list | np.ndarray)


def has_advanced(key: Any) -> bool:
    """Whether ``key`` holds an integer (or, inside a tuple, bool) index array."""
    keys = key if isinstance(key, tuple) else (key,)
    return any(_is_index_array(k) for k in keys)


@dataclass
class _Plan:
    view: Tensor  # the basic part of the key applied: advanced dims kept whole
    dims: list[int]  # the view's dims the index tensors select on, in key order
    indices: list[Tensor]  # int64 device tensors, one per dim in ``dims``
    shape: tuple[int, ...]  # the indices' broadcast shape
    adjacent: bool  # the indexed dims sit next to each other in the key
    owned: list[Tensor]  # index tensors made here (from lists, arrays, masks), to free


def _index_tensor(t: Tensor, k: Any, name: str, at: int) -> tuple[list[Tensor], bool]:
    """One key entry, at ``t``'s dim ``at``, as int64 device index tensors (a bool mask:
    one per dim it covers, checked against them), and whether they were made here."""
    if _is_tensor(k):
        if k.dtype is BOOL or k.dtype.name == "uint8":
            if k.dtype.name == "uint8":
                warn_uint8_mask(5)  # _index_tensor, _plan, read/write_advanced, []
            check_mask_shape(name, tuple(t.shape), k.shape, at)
            return list(k.nonzero(as_tuple=True)), True
        if k.dtype.is_floating_point:
            raise TensorIndexError(
                f"indexing {name!r}: tensors used as indices must be long, int, byte or bool "
                f"tensors (as torch), got {k.dtype!r}"
            )
        return [k], False
    try:
        values = np.asarray(k)
    except ValueError:  # ragged lists
        raise TensorError(
            f"indexing {name!r}: indices must be lists of ints of one length at each depth, "
            f"got {k!r}"
        ) from None
    if values.dtype == np.bool_:
        check_mask_shape(name, tuple(t.shape), values.shape, at)
        return [t.new_empty(v.shape, dtype=_INT64).copy_(v) for v in np.nonzero(values)], True
    if values.size and values.dtype.kind not in "iu":
        raise TensorIndexError(
            f"indexing {name!r}: tensors used as indices must be long, int, byte or bool "
            f"tensors (as torch), got {values.dtype} values {k!r}"
        )
    values = values.astype(np.int64)
    return [t.new_empty(values.shape, dtype=_INT64).copy_(values)], True


def _plan(t: Tensor, key: Any) -> _Plan:
    name = t.storage_device_tensor.name
    keys = list(key) if isinstance(key, tuple) else [key]
    if sum(k is Ellipsis for k in keys) > 1:
        raise TensorError(f"indexing {name!r}: an index can only have a single ellipsis ('...')")

    def consumed(k: Any) -> int:
        if k is None or k is Ellipsis:
            return 0
        if _is_tensor(k) and k.dtype is BOOL:
            return max(1, k.ndim)
        if isinstance(k, list | np.ndarray):
            try:
                values = np.asarray(k)
            except ValueError:  # ragged: _index_tensor says so
                return 1
            return max(1, values.ndim) if values.dtype == np.bool_ else 1
        return 1

    used = sum(consumed(k) for k in keys)
    if used > t.ndim:
        raise TensorIndexError(
            f"indexing {name!r}: too many indices for tensor of dimension {t.ndim}"
        )
    at = next((i for i, k in enumerate(keys) if k is Ellipsis), None)
    if at is not None:
        keys[at : at + 1] = [slice(None)] * (t.ndim - used)
    basic: list[Any] = []
    dims: list[int] = []
    places: list[int] = []  # key positions of the index arrays and ints, for adjacency
    indices: list[Tensor] = []
    owned: list[Tensor] = []
    out_dim = in_dim = 0
    for place, k in enumerate(keys):
        at, in_dim = in_dim, in_dim + consumed(k)
        if _is_index_array(k):
            found, made = _index_tensor(t, k, name, at)
            if made:
                owned.extend(found)
            places.append(place)
            for index in found:
                basic.append(slice(None))
                dims.append(out_dim)
                indices.append(index)
                out_dim += 1
        else:
            basic.append(k)
            if k is None or isinstance(k, slice):
                out_dim += 1
            elif k is not Ellipsis:  # an int: an index of the result's shape, as NumPy counts it
                places.append(place)
    view = t[tuple(basic)]
    try:
        shape = np.broadcast_shapes(*(tuple(i.shape) for i in indices))
    except ValueError:
        shapes = ", ".join(str(list(i.shape)) for i in indices)
        raise TensorIndexError(
            f"indexing {name!r}: shape mismatch: indexing tensors could not be broadcast "
            f"together with shapes {shapes}"
        ) from None
    adjacent = places == list(range(places[0], places[0] + len(places)))
    return _Plan(view, dims, indices, tuple(shape), adjacent, owned)


def _check_bounds(plan: _Plan, name: str) -> None:
    """torch's IndexError for an index outside its dim (on the values, host-side)."""
    if plan.view.storage_device_tensor.context.timing_only:
        return
    for dim, index in zip(plan.dims, plan.indices, strict=True):
        size = plan.view.shape[dim]
        values = index.peek()
        bad = values[(values >= size) | (values < -size)]
        if bad.size:
            raise TensorIndexError(
                f"indexing {name!r}: index {int(bad.flat[0])} is out of bounds for dimension "
                f"{dim} with size {size}"
            )


def _rows(plan: _Plan) -> tuple[Tensor, list[Tensor], int]:
    """One row number per result row (an int64 device tensor of ``plan.shape``), the
    temporaries to free, and the number of rows it counts in (the wrap size)."""
    if len(plan.indices) == 1:
        index = plan.indices[0]
        return index, [], plan.view.shape[plan.dims[0]]
    temporaries: list[Tensor] = []
    rows = None
    for dim, index in zip(plan.dims, plan.indices, strict=True):
        size = plan.view.shape[dim]
        wrapped = index + (index < 0) * size  # a negative index counts from the end
        temporaries.append(wrapped)
        rows = wrapped if rows is None else rows * size + wrapped
        if rows is not wrapped:
            temporaries.append(rows)
    total = math.prod(plan.view.shape[d] for d in plan.dims)
    return rows, temporaries, total


def _order(plan: _Plan) -> tuple[list[int], int]:
    """The permutation that puts the indexed dims first, and where ``B`` goes in the result."""
    rest = [d for d in range(plan.view.ndim) if d not in plan.dims]
    lead = sum(1 for d in rest if d < plan.dims[0]) if plan.adjacent else 0
    return [*plan.dims, *rest], lead


def read_advanced(t: Tensor, key: Any) -> Tensor:
    """``t[key]`` for a key with index arrays: a new tensor, by one gather kernel."""
    name = t.storage_device_tensor.name
    plan = _plan(t, key)
    _check_bounds(plan, name)
    perm, lead = _order(plan)
    source = plan.view.permute(perm)
    rest = tuple(source.shape[len(plan.dims) :])
    row = math.prod(rest)
    out = t.new_empty((*plan.shape, *rest))
    rows, temporaries, size = _rows(plan)
    rows_dense = rows.expand(plan.shape).contiguous() if rows.shape != plan.shape else rows.dense()
    if out.numel():
        x = source.dense()
        launch_gather(x.device_tensor, rows_dense.device_tensor, out.device_tensor,
                      (math.prod(plan.shape), row, size), line=True, wrap=True)  # fmt: skip
        if x is not source:
            x.free()
    _free(rows_dense, rows, temporaries, plan)
    if lead:  # B back in the indexed dims' place
        b = len(plan.shape)
        order = [*range(b, b + lead), *range(b), *range(b + lead, out.ndim)]
        return out.permute(order)
    return out


def write_advanced(t: Tensor, key: Any, value: Any, *, accumulate: bool = False) -> None:
    """``t[key] = value`` for a key with index arrays: one scatter kernel; ``accumulate``
    adds the values instead (``index_put_``), repeated indices adding up."""
    name = t.storage_device_tensor.name
    plan = _plan(t, key)
    _check_bounds(plan, name)
    perm, lead = _order(plan)
    target = plan.view.permute(perm)
    rest = tuple(target.shape[len(plan.dims) :])
    b = len(plan.shape)
    result_shape = (*rest[:lead], *plan.shape, *rest[lead:])
    try:
        np.broadcast_shapes(tuple(np.shape(value)), result_shape)
    except ValueError:
        raise TensorError(
            f"indexing {name!r}: shape mismatch: value of shape {tuple(np.shape(value))} "
            f"cannot be broadcast to indexing result of shape {result_shape}"
        ) from None
    values = t.new_empty(result_shape)
    if isinstance(value, int | float | bool | np.generic):
        values.fill_(value)
    else:
        values.copy_(value)
    if lead:  # lay the values out as (B, rest) to match the rows
        order = [*range(lead, lead + b), *range(lead), *range(lead + b, len(result_shape))]
        source = values.permute(order).dense()
    else:
        source = values
    rows, temporaries, size = _rows(plan)
    rows_dense = rows.expand(plan.shape).contiguous() if rows.shape != plan.shape else rows.dense()
    if source.numel():
        dense = target.dense()
        counts = (source.numel(), math.prod(plan.shape), math.prod(rest), size)
        launch_scatter(source.device_tensor, rows_dense.device_tensor, dense.device_tensor,
                       counts, line=True, add=accumulate, wrap=True)  # fmt: skip
        if dense is not target:
            target.copy_(dense)
            dense.free()
    if source.storage_device_tensor is not values.storage_device_tensor:
        source.free()
    values.free()
    _free(rows_dense, rows, temporaries, plan)


def _free(rows_dense: Tensor, rows: Tensor, temporaries: list[Tensor], plan: _Plan) -> None:
    given = {id(i) for i in plan.indices} - {id(i) for i in plan.owned}
    for temp in {id(x): x for x in (rows_dense, rows, *temporaries, *plan.owned)}.values():
        if id(temp) not in given and not temp.storage_device_tensor.is_freed:
            temp.free()
