"""``default_collate`` and ``default_convert``: a list of samples into a batch, as torch's.

Tensors are stacked on the device (``torch.stack``: a copy kernel); NumPy arrays and
numbers are copied in (``torch.tensor``: a host-to-device transfer); strings stay a
list; dicts, named tuples and sequences are collated field by field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kernbench.errors import DataError
from kernbench.torch.factories import stack, tensor
from kernbench.torch.tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_TYPES = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def default_collate(batch: Sequence[Any]) -> Any:
    """One batch from a list of samples (see the module docstring)."""
    if not len(batch):
        raise DataError("default_collate: the batch is empty")
    elem = batch[0]
    if isinstance(elem, Tensor):
        shapes = {tuple(t.shape) for t in batch if isinstance(t, Tensor)}
        if len(shapes) > 1 or not all(isinstance(t, Tensor) for t in batch):
            raise DataError(
                f"stack expects each tensor to be equal size, but got shapes {sorted(shapes)} "
                "in one batch (pad the samples, or pass a collate_fn)"
            )
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray | np.generic) and not isinstance(elem, np.str_ | np.bytes_):
        if elem.dtype.kind in "OUSV":
            raise DataError(_TYPES.format(elem.dtype))
        return tensor(np.stack([np.asarray(b) for b in batch]))
    if isinstance(elem, bool | int):
        return tensor(list(batch))
    if isinstance(elem, float):
        return tensor(list(batch), dtype="float64")
    if isinstance(elem, str | bytes):
        return list(batch)
    if isinstance(elem, Mapping):
        fields = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch, strict=True)))
    if isinstance(elem, Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise DataError("each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch, strict=True)]
        if isinstance(elem, tuple):
            return columns  # a list, as torch's (for backwards compatibility)
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise DataError(_TYPES.format(type(elem)))


def default_convert(data: Any) -> Any:
    """A sample as a loader without batching gives it: NumPy arrays made tensors, the
    rest as it is (containers converted item by item)."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OUSV":
        return tensor(data)
    if isinstance(data, Mapping):
        fields = {key: default_convert(value) for key, value in data.items()}
        try:
            return type(data)(fields)
        except TypeError:
            return fields
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
