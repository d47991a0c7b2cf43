"""``torch.linalg``: the vector norms gradient clipping reaches for.

``cross`` is ``torch.cross`` with ``dim=-1`` (:mod:`~kernbench.torch.products`);
``multi_dot`` multiplies a chain of matrices in the cheapest order
(:mod:`~kernbench.torch.products_more`).
``vector_norm`` and ``norm`` (of vectors, or the Frobenius norm of a matrix)
take torch's arguments and run as :meth:`kernbench.torch.Tensor.norm` does:
one reduction on the device, for orders 1 and 2.  There are no
decompositions or solvers; asking for one raises an error that says so.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError, unsupported_name
from kernbench.torch.functions import into_out
from kernbench.torch.product_functions import linalg_cross_function as cross
from kernbench.torch.products_more import multi_dot as _multi_dot
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["cross", "multi_dot", "norm", "vector_norm"]


def _input(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.linalg.{what}")


def multi_dot(tensors: Any, *, out: Any = None) -> Tensor:
    """The product of ``tensors`` (2-D; the first and the last may be 1-D), in the order
    with the fewest multiplications."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, list | tuple):
        raise TensorError(
            "torch.linalg.multi_dot: tensors must be a list or tuple of Tensors (as in torch), "
            f"got {type(tensors).__name__}"
        )
    result = _multi_dot(tensors, "linalg.multi_dot")
    return result if out is None else into_out("torch.linalg.multi_dot", out, result)


def vector_norm(
    x: Tensor,
    ord: Any = 2,  # noqa: A002 - torch's name
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """The ``ord``-norm (1 or 2) of ``x`` over ``dim`` (every dim by default), flattened."""
    t = _input(x, "vector_norm")
    if ord not in (1, 2):
        raise TensorError(
            f"torch.linalg.vector_norm: ord is 1 or 2 here, got {ord!r}; for another order: "
            "(x.abs() ** ord).sum() ** (1 / ord), or x.abs().amax() for inf"
        )
    return t.norm(ord, dim, keepdim, dtype)


def norm(
    A: Tensor,  # noqa: N803 - torch's name
    ord: Any = None,  # noqa: A002 - torch's name
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
) -> Tensor:
    """The 2-norm of a vector, the Frobenius norm of a matrix (``ord`` None, 2 of a vector,
    1 of a vector, or "fro")."""
    t = _input(A, "norm")
    dims = t.ndim if dim is None else (1 if isinstance(dim, int) else len(dim))
    vector = dims == 1
    if ord is None or ord == "fro" and not vector:
        order = 2
    elif vector and ord in (1, 2):
        order = ord
    else:
        raise TensorError(
            f"torch.linalg.norm: ord={ord!r} of a {'vector' if vector else 'matrix'} is not "
            "here (vector: 1 or 2; matrix: 'fro' or None); torch.linalg.vector_norm takes the "
            "elements of any shape"
        )
    return t.norm(order, dim, keepdim, dtype)


def __getattr__(name: str) -> Any:
    raise unsupported_name(
        "kernbench.torch.linalg",
        "torch.linalg",
        name,
        __all__,
        {
            name: "there are no decompositions or solvers here; compute on the host with "
            "numpy.linalg from t.numpy() and bring the result back with torch.from_numpy"
        },
    )
