"""``torch.linalg``: the vector norms gradient clipping reaches for.

``cross`` is ``torch.cross`` with ``dim=-1`` (:mod:`~kernbench.torch.products`).
``vector_norm`` and ``norm`` (of vectors, or the Frobenius norm of a matrix)
take torch's arguments and run as :meth:`kernbench.torch.Tensor.norm` does:
one reduction on the device, for orders 1 and 2.  There are no
decompositions or solvers; asking for one raises an error that says so.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError, unsupported_name
from kernbench.torch.product_functions import linalg_cross_function as cross
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["cross", "norm", "vector_norm"]


def _input(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.linalg.{what}")


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
