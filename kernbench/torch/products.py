"""Products of :class:`~kernbench.torch.Tensor` that are methods in torch: ``trace``,
``kron`` and ``cross``.

Each is made of existing device ops, so it costs what they cost:

* ``trace`` sums the diagonal view (one reduction; integers and bools into int64).
* ``kron`` multiplies two views with size-1 dims interleaved (one broadcast multiply
  kernel); the product is dense, so the final reshape is a view.
* ``cross`` is ``a.roll(-1) * b.roll(-2) - a.roll(-2) * b.roll(-1)`` along ``dim``:
  four roll copies and three elementwise kernels, the batch dims broadcast.  With
  ``dim=None`` the first dim of size 3 is taken, with torch's deprecation warning.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.shapes import dim_index, tensor_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorProducts", "linalg_cross"]


def linalg_cross(input: Tensor, other: Any, dim: int, what: str) -> Tensor:  # noqa: A002
    """torch's ``linalg_cross``: same number of dims, size 3 at ``dim``, the rest
    broadcast; ``what`` names the call in errors."""
    other = tensor_argument(other, what)
    if input.ndim != other.ndim:
        raise TensorError(
            f"{what}: inputs must have the same number of dimensions, got {input.ndim} and "
            f"{other.ndim}"
        )
    d = dim_index(dim, input.ndim, what, scalar=False)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise TensorError(
            f"{what}: inputs dimension {dim} must have length 3. Got {input.shape[d]} and "
            f"{other.shape[d]}"
        )
    first = input.roll(-1, d) * other.roll(-2, d)
    second = input.roll(-2, d) * other.roll(-1, d)
    out = first - second
    first.free()
    second.free()
    return out


class TensorProducts:
    """``trace``, ``kron`` and ``cross``, made of device ops."""

    __slots__ = ()

    def trace(self: Tensor) -> Tensor:
        """The sum of the main diagonal of a matrix (int64 for integers and bools)."""
        if self.ndim != 2:
            raise TensorError(f"trace: expected a matrix, but got tensor with dim {self.ndim}")
        return self.diagonal().sum()

    def kron(self: Tensor, other: Any) -> Tensor:
        """The Kronecker product: block ``i`` is ``self[i] * other`` (dims matched from the
        right, the shorter padded with leading 1s)."""
        other = tensor_argument(other, "kron")
        ndim = max(self.ndim, other.ndim)
        a_shape = (1,) * (ndim - self.ndim) + tuple(self.shape)
        b_shape = (1,) * (ndim - other.ndim) + tuple(other.shape)
        a = self.reshape([s for n in a_shape for s in (n, 1)])
        b = other.reshape([s for n in b_shape for s in (1, n)])
        product = a * b
        return product.view([m * n for m, n in zip(a_shape, b_shape, strict=True)])

    def cross(self: Tensor, other: Any, dim: Any = None) -> Tensor:
        """The cross product of 3-vectors along ``dim`` (the first dim of size 3 when None,
        with torch's deprecation warning)."""
        if dim is None:
            warnings.warn(
                "Using torch.cross without specifying the dim arg is deprecated.\nPlease "
                "either pass the dim explicitly or simply use torch.linalg.cross.\nThe default "
                "value of dim will change to agree with that of linalg.cross in a future "
                "release.",
                UserWarning,
                stacklevel=2,
            )
            dim = next((d for d, n in enumerate(self.shape) if n == 3), None)
            if dim is None:
                raise TensorError(
                    f"cross: no dimension of size 3 in input of shape {tuple(self.shape)}"
                )
        return linalg_cross(self, other, dim, "linalg.cross")
