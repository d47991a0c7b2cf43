"""``torch.nn.utils.rnn``: ``PackedSequence``, ``pack_padded_sequence``,
``pad_packed_sequence``, ``pad_sequence``, ``pack_sequence``, ``unpad_sequence`` and
``unpack_sequence``, as torch's.

A ``PackedSequence`` holds the time steps of a batch of sequences sorted by length
(longest first) one after another: step ``t`` is ``batch_sizes[t]`` rows of ``data``.
Packing and unpacking are recorded ops (basic indexing, ``cat``, ``stack``), so
gradients flow through them; the lengths are read on the host, as torch wants them on
the CPU.  Sorting with ``enforce_sorted=False`` is a ``stack`` of the sequences in
length order (torch's ``index_select``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import kernbench.torch as torch  # cat and stack as wrapped for autograd
from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.factories import full, tensor
from kernbench.torch.tensor import Tensor

_INT64, _FLOAT32, _FLOAT64 = (DTYPE_OBJECTS[n] for n in ("int64", "float32", "float64"))

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None


class PackedSequence(_PackedFields):
    """``(data, batch_sizes, sorted_indices, unsorted_indices)``, as torch's (a named
    tuple).  One made here also keeps its batch sizes and orders as host ints (torch keeps
    ``batch_sizes`` on the CPU), so a timing-only run, whose tensors carry no values,
    can still run it."""

    _layout: tuple[list[int], list[int] | None, list[int] | None] | None = None

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: Tensor,
        sorted_indices: Tensor | None = None,
        unsorted_indices: Tensor | None = None,
        *,
        layout: tuple[list[int], list[int] | None, list[int] | None] | None = None,
    ) -> PackedSequence:
        self = super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        self._layout = layout
        return self

    def host_layout(self) -> tuple[list[int], list[int] | None, list[int] | None]:
        """``(batch_sizes, sorted_indices, unsorted_indices)`` as host ints (read from
        the tensors when the sequence was built from tensors alone)."""
        if self._layout is not None:
            return self._layout

        def ints(values: Tensor | None) -> list[int] | None:
            return None if values is None else _host_ints(values, "PackedSequence")

        return ints(self.batch_sizes), ints(self.sorted_indices), ints(self.unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data.to(...)`` in a new sequence (the indices follow a device move; the
        batch sizes stay where they are, as torch keeps them on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        order, back = self.sorted_indices, self.unsorted_indices
        if data.device != self.data.device:
            order = None if order is None else order.to(data.device)
            back = None if back is None else back.to(data.device)
        return PackedSequence(data, self.batch_sizes, order, back, layout=self._layout)

    def double(self) -> PackedSequence:
        return self.to(dtype=_FLOAT64)

    def float(self) -> PackedSequence:
        return self.to(dtype=_FLOAT32)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def packed(
    data: Tensor,
    batch_sizes: list[int],
    sorted_indices: list[int] | None,
    unsorted_indices: list[int] | None,
) -> PackedSequence:
    """A ``PackedSequence`` of ``data`` from its host layout (the index tensors made)."""

    def made(values: list[int] | None) -> Tensor | None:
        return None if values is None else tensor(values, dtype=_INT64, device=data.device)

    return PackedSequence(
        data,
        tensor(batch_sizes, dtype=_INT64),
        made(sorted_indices),
        made(unsorted_indices),
        layout=(batch_sizes, sorted_indices, unsorted_indices),
    )


def _host_ints(values: Any, what: str) -> list[int]:
    items = values.tolist() if isinstance(values, Tensor) else list(values)
    if any(isinstance(v, float) for v in items):
        raise TensorError(f"{what}: lengths must be integers, got {items}")
    return [int(v) for v in items]


def _select(t: Tensor, dim: int, order: list[int]) -> Tensor:
    """``t.index_select(dim, order)`` as a stack of basic-indexed slices (recorded)."""
    if order == list(range(t.shape[dim])):
        return t
    lead = (slice(None),) * dim
    return torch.stack([t[(*lead, i)] for i in order], dim)


def pack_padded_sequence(
    input: Tensor,  # noqa: A002 - torch's name
    lengths: Any,
    batch_first: bool = False,
    enforce_sorted: bool = True,
) -> PackedSequence:
    """Packs a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of
    sequences of ``lengths``."""
    sizes = _host_ints(lengths, "pack_padded_sequence")
    if enforce_sorted:
        if any(a < b for a, b in zip(sizes, sizes[1:], strict=False)):
            raise TensorError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability."
            )
        order = None
    else:
        order = [int(i) for i in np.argsort(-np.asarray(sizes), kind="stable")]
        input = _select(input, 0 if batch_first else 1, order)
        sizes = [sizes[i] for i in order]
    if batch_first:
        input = input.transpose(0, 1)
    if len(sizes) != input.shape[1]:
        raise TensorError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(sizes)} (batch_size="
            f"{input.shape[1]})"
        )
    if sizes and sizes[-1] <= 0:
        raise TensorError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' "
            "that is <= 0"
        )
    if sizes and sizes[0] > input.shape[0]:
        raise TensorError(
            f"pack_padded_sequence: a length {sizes[0]} is longer than the padded input's "
            f"{input.shape[0]} steps"
        )
    batch_sizes = [sum(1 for n in sizes if n > t) for t in range(sizes[0] if sizes else 0)]
    data = torch.cat([input[t, :size] for t, size in enumerate(batch_sizes)], 0)
    back = None if order is None else [int(i) for i in np.argsort(order)]
    return packed(data, batch_sizes, order, back)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """``(padded, lengths)``: the inverse of :func:`pack_padded_sequence`, in the original
    batch order."""
    data = sequence.data
    batch_sizes, _, back = sequence.host_layout()
    steps, batch = len(batch_sizes), batch_sizes[0]
    if total_length is not None:
        if total_length < steps:
            raise TensorValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{steps}"
            )
    else:
        total_length = steps
    tail = tuple(data.shape[1:])
    rows, start = [], 0
    for size in batch_sizes:
        step = data[start : start + size]
        if size < batch:
            pad = full((batch - size, *tail), padding_value, dtype=data.dtype, device=data.device)
            step = torch.cat([step, pad], 0)
        rows.append(step)
        start += size
    padded = torch.stack(rows, 0)
    if total_length > steps:
        pad = full((total_length - steps, batch, *tail), padding_value, dtype=data.dtype,
                   device=data.device)  # fmt: skip
        padded = torch.cat([padded, pad], 0)
    lengths = [sum(1 for size in batch_sizes if size > b) for b in range(batch)]
    if back is not None:
        padded = _select(padded, 1, back)
        lengths = [lengths[i] for i in back]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, tensor(lengths, dtype=_INT64)


def pad_sequence(
    sequences: Any,
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Sequences ``(L_i, *)`` padded to the longest and stacked: ``(T, B, *)``, or
    ``(B, T, *)`` with ``batch_first``."""
    if padding_side not in ("left", "right"):
        raise TensorValueError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    items = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    if not items:
        raise TensorError("pad_sequence: received an empty list of sequences")
    longest = max(s.shape[0] for s in items)
    padded = []
    for s in items:
        missing = longest - s.shape[0]
        if missing:
            pad = full((missing, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = torch.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return torch.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences: Any, enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of sequences ``(L_i, *)``: ``pack_padded_sequence(pad_sequence(...))``."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(
    padded_sequences: Tensor, lengths: Any, batch_first: bool = False
) -> list[Tensor]:
    """The sequences ``(L_i, *)`` of a padded batch, as views: the inverse of
    :func:`pad_sequence`."""
    sizes = _host_ints(lengths, "unpad_sequence")
    if batch_first:
        return [padded_sequences[i, :n] for i, n in enumerate(sizes)]
    return [padded_sequences[:n, i] for i, n in enumerate(sizes)]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The sequences of a ``PackedSequence``, in their original order: the inverse of
    :func:`pack_sequence`."""
    batch_sizes, _, back = packed_sequences.host_layout()
    padded, _ = pad_packed_sequence(packed_sequences, batch_first=True)
    lengths = [sum(1 for size in batch_sizes if size > b) for b in range(batch_sizes[0])]
    if back is not None:
        lengths = [lengths[i] for i in back]
    return unpad_sequence(padded, lengths, batch_first=True)
