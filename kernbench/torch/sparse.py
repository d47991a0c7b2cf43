"""``torch.sparse`` and ``torch.spmm`` over dense tensors.

Sparse tensors are held dense here (:mod:`~kernbench.torch.sparse_layouts`, ADR 0029),
so what torch does with sparse or dense operands, this module does with dense ones:
``torch.spmm(a, b)`` and ``torch.sparse.mm(a, b)`` are ``torch.mm``,
``torch.sparse.addmm`` is ``torch.addmm``, ``torch.sparse.sum`` is ``torch.sum``,
``torch.sparse.softmax`` and ``log_softmax`` the dense ones (every element present);
they cost what those ops cost and are differentiable.  The legacy constructors
``torch.sparse.FloatTensor(indices, values, size)`` (pygcn's) and its kin are
``torch.sparse_coo_tensor`` in their dtype.  Other ``torch.sparse`` names raise an error
that says how sparse tensors are held.
"""

from __future__ import annotations

from typing import Any

import kernbench.torch as torch  # its ops as autograd wraps them, looked up at the call
from kernbench.errors import unsupported_name
from kernbench.torch.missing import NO_SPARSE

__all__ = [
    "DoubleTensor",
    "FloatTensor",
    "IntTensor",
    "LongTensor",
    "addmm",
    "log_softmax",
    "mm",
    "softmax",
    "spmm",
    "sum",
]


def mm(mat1: Any, mat2: Any) -> Any:
    """``torch.sparse.mm``: the matrix product of two dense matrices (``torch.mm``)."""
    return torch.mm(mat1, mat2)


def spmm(input: Any, mat2: Any) -> Any:  # noqa: A002 - torch's name
    """``torch.spmm``: the matrix product of two dense matrices (``torch.mm``)."""
    return torch.mm(input, mat2)


def addmm(mat: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
    """``torch.sparse.addmm``: ``beta * mat + alpha * (mat1 @ mat2)`` (``torch.addmm``)."""
    return torch.addmm(mat, mat1, mat2, beta=beta, alpha=alpha)


def sum(input: Any, dim: Any = None, dtype: Any = None) -> Any:  # noqa: A001,A002
    """``torch.sparse.sum``: ``torch.sum`` of the whole tensor or over ``dim``."""
    if dim is None:
        return torch.sum(input, dtype=dtype)
    return torch.sum(input, dim, dtype=dtype)


def softmax(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    """``torch.sparse.softmax``: ``torch.softmax`` (every element is present)."""
    return torch.softmax(input, dim, dtype=dtype)


def log_softmax(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    """``torch.sparse.log_softmax``: ``torch.log_softmax`` (every element is present)."""
    return torch.log_softmax(input, dim, dtype=dtype)


def _legacy(dtype_name: str) -> Any:
    def construct(indices: Any, values: Any, size: Any = None) -> Any:
        return torch.sparse_coo_tensor(indices, values, size, dtype=getattr(torch, dtype_name))

    construct.__name__ = construct.__qualname__ = {
        "float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor",
        "int32": "IntTensor",
    }[dtype_name]  # fmt: skip
    construct.__doc__ = f"``torch.sparse.{construct.__name__}(indices, values, size)``."
    return construct


FloatTensor = _legacy("float32")
DoubleTensor = _legacy("float64")
LongTensor = _legacy("int64")
IntTensor = _legacy("int32")


def __getattr__(name: str) -> Any:
    raise unsupported_name(
        "kernbench.torch.sparse", "torch.sparse", name, globals(), {name: NO_SPARSE}
    )
