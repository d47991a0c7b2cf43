"""``torch.trace``, ``kron``, ``cross``, ``tensordot``, ``block_diag``, ``cdist`` and
``column_stack``: products and stacks made of existing device ops.

* ``tensordot`` permutes and reshapes each operand into a matrix (a copy when the
  permutation is not a view of one run) and runs one ``matmul``.  Contracted sizes must
  match; torch's summing of a size-1 contracted dim against a longer one is not done.
* ``block_diag`` zero-fills the result and copies each block into its place (one fill,
  one strided copy a block), in the dtype torch promotes the blocks to.
* ``cdist`` follows torch's choice of algorithm: for ``p == 2`` with
  ``compute_mode="use_mm_for_euclid_dist"``, or the default mode with more than 25 rows
  in either input, the matmul form ``sqrt(clamp(|x|^2 + |y|^2 - 2 x y^T, 1e-30))`` (one
  matmul, two squared-norm reductions, a few elementwise kernels); otherwise the
  differences of every pair (an elementwise kernel over ``P x R x M``) reduced along the
  last dim (``p`` 0, 1, 2, inf or any other ``p >= 0``).
* ``column_stack`` makes 0-d and 1-D tensors columns (views) and concatenates along
  dim 1 (one copy kernel each).

``torch.take_along_dim`` is here too, for the ``out=`` of this module's functions.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import get_default_dtype, promote_types
from kernbench.torch.element_writes import take_along_dim as _take_along_dim
from kernbench.torch.factories import cat
from kernbench.torch.functions import with_out
from kernbench.torch.products import linalg_cross
from kernbench.torch.shapes import dim_index, tensor_argument
from kernbench.torch.tensor import Tensor, new_tensor
from kernbench.torch.views import broadcast_shapes

__all__ = [
    "block_diag",
    "cdist",
    "column_stack",
    "cross",
    "kron",
    "linalg_cross_function",
    "take_along_dim",
    "tensordot",
    "trace",
]


def _tensor(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.{what}")


def trace(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    """``torch.trace``: the sum of a matrix's diagonal."""
    return _tensor(input, "trace").trace()


@with_out
def kron(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002 - torch's name
    """``torch.kron``: the Kronecker product."""
    return _tensor(input, "kron").kron(other)


@with_out
def cross(input: Tensor, other: Tensor, dim: Any = None) -> Tensor:  # noqa: A002
    """``torch.cross``: the cross product along ``dim`` (the first dim of size 3 when
    None, with torch's deprecation warning)."""
    return _tensor(input, "cross").cross(other, dim)


def linalg_cross_function(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:  # noqa: A002
    """``torch.linalg.cross``: the cross product along ``dim`` (default the last)."""
    return linalg_cross(_tensor(input, "linalg.cross"), other, dim, "linalg.cross")


take_along_dim = with_out(_take_along_dim)  # torch's out= (the gather's result copied in)


def _dims_lists(dims: Any, a: Tensor, b: Tensor) -> tuple[list[int], list[int]]:
    what = "tensordot"
    if hasattr(dims, "storage_device_tensor"):
        dims = dims.tolist()  # torch reads a dims tensor too
    if isinstance(dims, numbers.Integral) and not isinstance(dims, bool):
        n = int(dims)
        if n < 0:
            raise TensorError(f"{what} expects dims >= 0, but got dims={n}")
        if n > min(a.ndim, b.ndim):
            raise TensorError(
                f"{what} expects dims <= the dims of each operand ({a.ndim} and {b.ndim}), but "
                f"got dims={n}"
            )
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    if not isinstance(dims, Sequence) or isinstance(dims, str) or len(dims) != 2:
        raise TensorError(
            f"{what}: dims must be an int or a pair of lists of dims ([dims of a], [dims of "
            f"b]), got {dims!r}"
        )
    lists = []
    for side, t in zip(dims, (a, b), strict=True):
        items = [side] if isinstance(side, numbers.Integral) else list(side)
        lists.append([dim_index(d, t.ndim, what, scalar=False) for d in items])
    if len(lists[0]) != len(lists[1]):
        raise TensorError(f"{what}: both dimension lists should have same length, got {dims!r}")
    for named in lists:
        for d in named:
            if named.count(d) > 1:
                raise TensorError(f"{what}: dim {d} appears multiple times in the list of dims")
    return lists[0], lists[1]


@with_out
def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """``torch.tensordot``: contract the last ``dims`` dims of ``a`` with the first of
    ``b``, or the dims in ``([dims of a], [dims of b])``, by one matmul."""
    a, b = _tensor(a, "tensordot"), _tensor(b, "tensordot")
    dims_a, dims_b = _dims_lists(dims, a, b)
    for da, db in zip(dims_a, dims_b, strict=True):
        if a.shape[da] != b.shape[db]:
            raise TensorError(
                f"tensordot: contracted dimensions need to match, but first has size "
                f"{a.shape[da]} in dim {da} and second has size {b.shape[db]} in dim {db}"
            )
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    rows = [a.shape[d] for d in free_a]
    cols = [b.shape[d] for d in free_b]
    left = a.permute([*free_a, *dims_a]).contiguous()  # a copy unless already one run
    right = b.permute([*dims_b, *free_b]).contiguous()
    product = left.view(math.prod(rows), k).matmul(right.view(k, math.prod(cols)))
    for made, given in ((left, a), (right, b)):
        if made.storage_device_tensor is not given.storage_device_tensor:
            made.free()
    return product.view(*rows, *cols)


def block_diag(*tensors: Tensor) -> Tensor:
    """``torch.block_diag``: the tensors (0-d as 1x1, 1-D as one row) on the diagonal of
    a zero matrix, in their promoted dtype."""
    what = "torch.block_diag"
    items = [tensor_argument(t, what) for t in tensors]
    for i, t in enumerate(items):
        if t.ndim > 2:
            raise TensorError(
                f"{what}: Input tensors must have 2 or fewer dimensions. Input {i} has "
                f"{t.ndim} dimensions"
            )
    if not items:
        return new_tensor((1, 0), get_default_dtype())  # as torch
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in items]
    dtype = blocks[0].dtype
    for t in blocks[1:]:
        dtype = promote_types(dtype, t.dtype)
    rows = sum(t.shape[0] for t in blocks)
    cols = sum(t.shape[1] for t in blocks)
    out = blocks[0].new_zeros((rows, cols), dtype=dtype)
    r = c = 0
    for t in blocks:
        h, w = t.shape
        if h and w:
            out[r : r + h, c : c + w] = t
        r, c = r + h, c + w
    return out


_CDIST_MODES = {
    "use_mm_for_euclid_dist_if_necessary": None,
    "use_mm_for_euclid_dist": True,
    "donot_use_mm_for_euclid_dist": False,
}


def cdist(
    x1: Tensor,
    x2: Tensor,
    p: float = 2.0,
    compute_mode: str = "use_mm_for_euclid_dist_if_necessary",
) -> Tensor:
    """``torch.cdist``: the ``p``-norm distance between each row of ``x1`` (``..., P, M``)
    and each row of ``x2`` (``..., R, M``), batch dims broadcast: ``(..., P, R)``."""
    what = "torch.cdist"
    x1, x2 = _tensor(x1, "cdist"), _tensor(x2, "cdist")
    if compute_mode not in _CDIST_MODES:
        raise TensorError(
            f"{what}: {compute_mode} is not a valid value for compute_mode (valid: "
            f"{', '.join(_CDIST_MODES)})"
        )
    for name, t in (("X1", x1), ("X2", x2)):
        if not t.dtype.is_floating_point:
            raise TensorError(
                f"{what}: cdist only supports floating-point dtypes, {name} got: {t.dtype!r}"
            )
        if t.ndim < 2:
            raise TensorError(
                f"{what}: cdist only supports at least 2D tensors, {name} got: {t.ndim}D"
            )
    if x1.shape[-1] != x2.shape[-1]:
        raise TensorError(
            f"{what}: X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} "
            f"X2: {x2.shape[-1]}"
        )
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not p >= 0:
        raise TensorError(f"{what}: cdist only supports non-negative p values, got {p!r}")
    batch = broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]), what)
    x1 = x1.expand(*batch, *x1.shape[-2:])
    x2 = x2.expand(*batch, *x2.shape[-2:])
    use_mm = _CDIST_MODES[compute_mode]
    if p == 2 and (use_mm or (use_mm is None and (x1.shape[-2] > 25 or x2.shape[-2] > 25))):
        return _euclidean_by_matmul(x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (..., P, R, M)
    if not diff.shape[-1]:
        diff.free()
        return x1.new_zeros((*batch, x1.shape[-2], x2.shape[-2]), dtype=diff.dtype)
    if p == 0:
        nonzero = diff.ne(0)
        out = nonzero.sum(-1).to(diff.dtype)
        nonzero.free()
    elif p == 1:
        out = diff.abs_().sum(-1)
    elif p == 2:
        out = diff.mul_(diff).sum(-1).sqrt_()
    elif math.isinf(p):
        out = diff.abs_().amax(-1)
    else:
        out = diff.abs_().pow_(p).sum(-1).pow_(1 / p)
    diff.free()
    return out


def _euclidean_by_matmul(x1: Tensor, x2: Tensor) -> Tensor:
    """torch's ``_euclidean_dist``: norms plus ``-2 x1 x2^T``, clamped, square-rooted."""
    dtype = promote_types(x1.dtype, x2.dtype)
    a, b = x1.to(dtype), x2.to(dtype)
    out = a.matmul(b.mT).mul_(-2)
    for t, dim in ((a, -1), (b, -2)):
        square = t * t
        norm = square.sum(-1, keepdim=True)
        out.add_(norm if dim == -1 else norm.mT)
        square.free()
        norm.free()
    return out.clamp_min_(1e-30).sqrt_()


@with_out
def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.column_stack``: 0-d and 1-D tensors as columns (views), then ``cat`` along
    dim 1."""
    what = "torch.column_stack"
    if isinstance(tensors, Tensor) or not isinstance(tensors, Sequence) or not tensors:
        raise TensorError(f"{what} needs a non-empty sequence of Tensors, got {tensors!r}")
    columns = [
        t.reshape(t.numel(), 1) if t.ndim <= 1 else t
        for t in (tensor_argument(t, what) for t in tensors)
    ]
    return cat(columns, 1)
