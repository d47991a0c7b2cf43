"""Sparse tensors held dense: ``torch.sparse_coo_tensor``, ``t.to_sparse()``, layouts.

Graph programs (pytorch/examples' gcn and gat) build their adjacency with
``torch.sparse_coo_tensor(indices, values, size)`` and turn diagonal matrices sparse with
``torch.diag(d).to_sparse()`` before ``torch.sparse.mm``/``@``.  Here such a tensor is an
ordinary dense one (ADR 0029): ``sparse_coo_tensor`` writes the values at their indices
into zeros (repeated indices add up, as ``coalesce`` does), ``to_sparse()`` (and
``to_sparse_coo``/``_csr``/``_csc``) is a copy, and ``to_dense()`` is the tensor itself.
Every result is torch's value; the simulated time is the dense ops' (the zeros are
multiplied too), and the first such call warns so.  The tensor says what it is:
``t.layout`` is ``torch.strided`` and ``t.is_sparse`` False.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

import kernbench.torch as torch  # its ops as autograd wraps them, looked up at the call
from kernbench.errors import TensorValueError, user_stacklevel
from kernbench.torch.dtypes import as_torch_dtype

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "Layout",
    "TensorSparseLayouts",
    "sparse_coo",
    "sparse_coo_tensor",
    "sparse_csc",
    "sparse_csr",
    "strided",
]

_HELD_DENSE = (
    "{what}: sparse tensors are held dense in kernbench (values as torch's; the simulated "
    "time is that of dense ops over every element)"
)


class Layout:
    """``torch.strided``, ``torch.sparse_coo``, ...: how a tensor's memory is laid out."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self) -> str:
        return self.name


strided = Layout("strided")
sparse_coo = Layout("sparse_coo")
sparse_csr = Layout("sparse_csr")
sparse_csc = Layout("sparse_csc")


def _warn_held_dense(what: str) -> None:
    warnings.warn(_HELD_DENSE.format(what=what), stacklevel=user_stacklevel())


def _host_indices(indices: Any) -> np.ndarray:
    array = indices.numpy() if isinstance(indices, torch.Tensor) else np.asarray(indices)
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
        raise TensorValueError(
            "sparse_coo_tensor: indices must be a 2-D integer tensor of shape "
            f"(sparse dims, nnz), got shape {array.shape} of {array.dtype}"
        )
    return array.astype(np.int64)


def sparse_coo_tensor(
    indices: Any,
    values: Any,
    size: Any = None,
    *,
    dtype: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
    check_invariants: Any = None,
    is_coalesced: Any = None,
) -> Tensor:
    """``torch.sparse_coo_tensor``: a dense tensor of ``size`` with ``values`` at
    ``indices`` (summed where indices repeat) and zeros elsewhere."""
    where = _host_indices(indices)
    if not isinstance(values, torch.Tensor):
        values = torch.tensor(values, device=device)
    if dtype is not None:
        values = values.to(as_torch_dtype(dtype))
    sparse_dims, nnz = where.shape
    if values.ndim < 1 or values.shape[0] != nnz:
        raise TensorValueError(
            f"sparse_coo_tensor: number of dimensions of indices' nnz ({nnz}) must match "
            f"values' first dimension, got values of shape {tuple(values.shape)}"
        )
    dense_shape = tuple(values.shape[1:])
    if size is None:
        size = (*(int(where[d].max()) + 1 if nnz else 0 for d in range(sparse_dims)),
                *dense_shape)  # fmt: skip
    size = tuple(int(n) for n in size)
    if len(size) != sparse_dims + len(dense_shape) or size[sparse_dims:] != dense_shape:
        raise TensorValueError(
            f"sparse_coo_tensor: size {size} does not hold {sparse_dims} sparse dims of "
            f"indices and values' dense shape {dense_shape}"
        )
    for d in range(sparse_dims):
        if nnz and (where[d].min() < 0 or where[d].max() >= size[d]):
            bad = where[d].max() if where[d].max() >= size[d] else where[d].min()
            raise TensorValueError(
                f"sparse_coo_tensor: size is inconsistent with indices: for dim {d}, size "
                f"is {size[d]} but found index {bad}"
            )
    _warn_held_dense("torch.sparse_coo_tensor")
    out = torch.zeros(size, dtype=values.dtype, device=device)
    if nnz:
        keys = tuple(torch.tensor(where[d], device=device) for d in range(sparse_dims))
        out = torch.index_put(out, keys, values, accumulate=True)
    return out.requires_grad_() if requires_grad else out


class TensorSparseLayouts:
    """The layout of a tensor (always ``torch.strided``) and the sparse conversions."""

    @property
    def layout(self: Tensor) -> Layout:
        return strided

    @property
    def is_sparse(self: Tensor) -> bool:
        return False

    @property
    def is_sparse_csr(self: Tensor) -> bool:
        return False

    def to_sparse(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        """A copy: sparse tensors are held dense (see the module docstring)."""
        _warn_held_dense("Tensor.to_sparse")
        return self.clone()

    def to_sparse_coo(self: Tensor) -> Tensor:
        _warn_held_dense("Tensor.to_sparse_coo")
        return self.clone()

    def to_sparse_csr(self: Tensor, dense_dim: Any = None) -> Tensor:
        _warn_held_dense("Tensor.to_sparse_csr")
        return self.clone()

    def to_sparse_csc(self: Tensor, dense_dim: Any = None) -> Tensor:
        _warn_held_dense("Tensor.to_sparse_csc")
        return self.clone()

    def to_dense(self: Tensor, dtype: Any = None, *, masked_grad: Any = None) -> Tensor:
        """The tensor itself (in ``dtype`` if given), as torch's for a strided tensor."""
        return self if dtype is None else self.to(as_torch_dtype(dtype))
