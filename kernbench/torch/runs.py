"""``unique_consecutive`` of :class:`~kernbench.torch.Tensor`: the first element of each
run of equal neighbours, with where each element went and how long each run is.

Made of device ops, as torch's CUDA version is of scans: one comparison kernel marks
where a run starts (``x[i] != x[i-1]``; a NaN differs from itself, so each NaN is a run
of its own, as torch's CPU loop counts them), the marks are read to the host (the count
decides the output's size; torch syncs for it too), the starts are gathered; the inverse
is a running sum of the marks and the counts differences of the start positions (copied
back in, as ``nonzero`` does).  In timing-only mode, which carries no values, every
element is taken as a run of its own (the largest output, so the time is an upper
bound).  Only ``dim=None`` (the flattened tensor) is done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS
from kernbench.torch.host_values import checked_read
from kernbench.torch.shapes import flag_argument, tensor_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorRuns", "unique_consecutive"]

INT64 = DTYPE_OBJECTS["int64"]


class TensorRuns:
    """``unique_consecutive`` (``dim=None`` only)."""

    __slots__ = ()

    def unique_consecutive(
        self: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
    ) -> Any:
        """The tensor flattened with each run of equal neighbours kept once; with
        ``return_inverse`` the run of each element (``self``'s shape), with
        ``return_counts`` each run's length (both int64)."""
        what = "unique_consecutive"
        return_inverse = flag_argument(return_inverse, what, "return_inverse")
        return_counts = flag_argument(return_counts, what, "return_counts")
        if dim is not None:
            raise TensorError(
                f"{what}(dim={dim!r}) is not supported here: only dim=None (the flattened "
                "tensor); for runs of whole slices compare them (x[1:] != x[:-1]).any(...)"
            )
        dense = self.dense()
        flat = dense.view(-1)
        n = flat.numel()
        starts = flat.new_empty((n,), dtype=BOOL)
        if n:
            starts[:1] = True
            if n > 1:
                changed = flat[1:].ne(flat[:-1])
                starts[1:] = changed
                changed.free()
        marks = checked_read(starts)  # the count decides the output's size
        if marks is None:  # timing-only: no values; every element taken as a run of its own
            marks = np.ones(n, bool)
        marks = np.asarray(marks, bool).reshape(n)
        results = [flat[marks]]
        if dense is not self:
            dense.free()
        if return_inverse:
            inverse = starts.cumsum(0).sub_(1) if n else starts.new_empty((0,), dtype=INT64)
            results.append(inverse.view(self.shape))
        if return_counts:
            positions = np.flatnonzero(marks).astype(np.int64)
            k = len(positions)
            at = starts.new_empty((k + 1,), dtype=INT64).copy_(np.append(positions, n))
            counts = at[1:] - at[:-1]
            at.free()
            results.append(counts)
        starts.free()
        return results[0] if len(results) == 1 else tuple(results)


def unique_consecutive(
    input: Tensor,  # noqa: A002 - torch's name
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: Any = None,
) -> Any:
    """``torch.unique_consecutive``: ``input.unique_consecutive(...)``."""
    return tensor_argument(input, "torch.unique_consecutive").unique_consecutive(
        return_inverse, return_counts, dim
    )
