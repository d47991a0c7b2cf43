"""``F.pad`` in the ``reflect``, ``replicate`` and ``circular`` modes: per padded dim, the
positions of the output read from the input (mirrored without repeating the edge,
clamped to it, or wrapped around), made on the host and copied in, then one
``index_select`` (a gather kernel over the output) along that dim.  torch's kernel does
all dims in one pass; this costs a pass per padded dim.  The backward
(``ReflectionPad{1,2,3}DBackward0``, ``ReplicationPad{1,2,3}DBackward0``; ``CopySlices``
for circular, whose torch forward copies slices into the output) is the same positions'
``index_add`` in reverse order of the dims."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["check_edge_pad", "edge_pad", "edge_positions", "node_name"]

INT64 = DTYPE_OBJECTS["int64"]
_NAMES = {"reflect": "Reflection", "replicate": "Replication"}


def edge_positions(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each output position along a dim, the input position it reads."""
    src = np.arange(-before, size + after)
    if mode == "replicate":
        return np.clip(src, 0, size - 1)
    if mode == "circular":
        return src % size
    src = np.abs(src)
    return np.where(src >= size, 2 * (size - 1) - src, src)


def check_edge_pad(x: Tensor, amounts: list[int], mode: str) -> None:
    """torch's checks: 1, 2 or 3 padded dims on an input with (batch and) channel dims,
    amounts not negative, and (reflect) each smaller than its dim."""
    what = "torch.nn.functional.pad"
    dims = len(amounts) // 2
    if dims not in (1, 2, 3) or x.ndim not in (dims + 1, dims + 2):
        raise TensorError(
            f"{what}: {mode} padding of {dims} dim(s) takes a {dims + 1}-D or {dims + 2}-D "
            f"input (its last {dims} padded), got {x.ndim}-D with pad of length {len(amounts)}"
        )
    for i in range(dims):
        d = x.ndim - 1 - i
        before, after = amounts[2 * i], amounts[2 * i + 1]
        if before < 0 or after < 0:
            raise TensorError(f"{what}: {mode} padding amounts must be >= 0, got {amounts}")
        if mode == "reflect" and (before >= x.shape[d] or after >= x.shape[d]):
            raise TensorError(
                f"{what}: Argument #4: Padding size should be less than the corresponding "
                f"input dimension, but got: padding ({before}, {after}) at dimension {d} of "
                f"input {tuple(x.shape)}"
            )
        if mode == "circular" and (before > x.shape[d] or after > x.shape[d]):
            raise TensorError(
                f"{what}: Padding value causes wrapping around more than once: padding "
                f"({before}, {after}) at dimension {d} of input {tuple(x.shape)}"
            )
        if mode != "reflect" and x.shape[d] == 0:
            raise TensorError(f"{what}: cannot {mode}-pad the empty dimension {d}")


def edge_pad(x: Tensor, amounts: list[int], mode: str) -> Tensor:
    check_edge_pad(x, amounts, mode)
    out = x
    for i in range(len(amounts) // 2):
        d = x.ndim - 1 - i
        before, after = amounts[2 * i], amounts[2 * i + 1]
        if not before and not after:
            continue
        index = x.new_tensor(edge_positions(x.shape[d], before, after, mode), dtype=INT64)
        out = out.index_select(d, index)
    return out if out is not x else x.clone()


def node_name(mode: str, dims: int) -> str:
    if mode == "circular":
        return "CopySlices"
    return f"{_NAMES[mode]}Pad{dims}DBackward0"
