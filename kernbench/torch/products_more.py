"""Further products and matrix reshapings of :class:`~kernbench.torch.Tensor`: ``addmv``,
``addr``, ``addbmm`` (with their in-place forms), ``inner``, ``vdot``, ``diag_embed``,
``rot90``, ``dist``, ``renorm``; and :func:`multi_dot`, which ``torch.chain_matmul`` and
``torch.linalg.multi_dot`` run.

:class:`TensorProductsMore` is mixed into the tensor class.  Each is written with the
device ops it stands for, so it costs what those cost: ``addmv`` is a matmul of the
matrix and the vector, then a scale and an add (torch's GEMV folds them in), as
``addmm``; ``addr`` the broadcast product of the vectors, then the same; ``addbmm`` one
matmul contracting over batch and inner dim together (``batch1`` is copied into
``(n, b·m)`` first), then the same; ``inner`` one matmul of the operands as
``(rows, k)`` matrices; ``vdot`` is ``dot``; ``diag_embed`` a zero fill and one strided
copy into the diagonal view; ``rot90`` a ``flip`` and a transposed view; ``dist`` the
difference and its norm; ``renorm`` the norms of the slices, a ``where`` and a product.
``multi_dot`` multiplies in the order with the fewest multiplications (the textbook
dynamic program, as torch's).  Arguments are checked as torch checks them, with its
messages.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.logic import where
from kernbench.torch.shapes import dim_index, int_argument, int_sequence, tensor_argument
from kernbench.torch.views import broadcast_shapes

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorProductsMore", "multi_dot"]


def _number(value: Any, what: str, name: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorError(f"{what}: {name} must be a number (as in torch), got {value!r}")
    return value


def _dims_text(t: Tensor) -> str:
    return "x".join(str(n) for n in t.shape)


def _scaled_sum(product: Tensor, input: Tensor, beta: Any, alpha: Any, what: str) -> Tensor:  # noqa: A002
    """``beta * input + alpha * product`` into ``product`` (``input`` ignored when
    ``beta`` is 0, its NaN and inf too, as torch)."""
    beta, alpha = _number(beta, what, "beta"), _number(alpha, what, "alpha")
    shape = tuple(product.shape)
    try:
        fits = broadcast_shapes(tuple(input.shape), shape, what) == shape
    except TensorError:
        fits = False
    if not fits:
        product.free()
        raise TensorError(
            f"{what}: The expanded size of the tensor must match the existing size: input "
            f"of shape {list(input.shape)} does not broadcast to the product's {list(shape)} "
            "(as in torch)"
        )
    if alpha != 1:
        product.mul_(alpha)
    if beta != 0:
        product.add_(input, alpha=beta)
    return product


def _into(self: Tensor, result: Tensor, what: str) -> Tensor:
    """``self`` given ``result``'s values (an in-place form); ``result`` is freed."""
    if tuple(result.shape) != tuple(self.shape):
        result.free()
        raise TensorError(
            f"{what}: output with shape {list(self.shape)} doesn't match the broadcast shape "
            f"{list(result.shape)} (as in torch)"
        )
    self.copy_(result)
    result.free()
    return self


def _p_norm(x: Tensor, p: Any, dims: Any, keepdim: bool) -> Tensor:
    """The ``p``-norm of ``x`` over ``dims`` (None: every dim) for any real ``p``."""
    every = tuple(range(x.ndim)) if dims is None else dims
    if p in (1, 2):
        return x.norm(p, dims, keepdim)
    if p == math.inf:
        return x.abs().amax(every, keepdim)
    if p == -math.inf:
        return x.abs().amin(every, keepdim)
    if p == 0:
        return (x != 0).sum(dims, keepdim).to(x.dtype)
    return x.abs().pow(p).sum(dims, keepdim).pow(1.0 / p)


def _floating(t: Tensor, what: str) -> None:
    if not t.dtype.is_floating_point:
        raise TensorError(
            f"{what}: expected a floating point tensor (as in torch), got {t.dtype!r}; call "
            ".float() first"
        )


class TensorProductsMore:
    """The products and reshapings the module's docstring lists."""

    __slots__ = ()

    def addmv(self: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """``beta * self + alpha * (mat @ vec)`` for a 2-D ``mat`` and a 1-D ``vec``."""
        mat, vec = tensor_argument(mat, "addmv"), tensor_argument(vec, "addmv")
        if mat.ndim != 2 or vec.ndim != 1 or mat.shape[1] != vec.shape[0]:
            raise TensorError(
                f"addmv: size mismatch, got input ({_dims_text(self)}), mat ({_dims_text(mat)}), "
                f"vec ({_dims_text(vec)}) (as in torch): mat must be 2-D, vec 1-D of mat's "
                "second size"
            )
        return _scaled_sum(mat.matmul(vec), self, beta, alpha, "addmv")

    def addmv_(self: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return _into(self, self.addmv(mat, vec, beta=beta, alpha=alpha), "addmv_")

    def addr(self: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """``beta * self + alpha * outer(vec1, vec2)`` for 1-D ``vec1`` and ``vec2``."""
        for name, vec in (("vec1", vec1), ("vec2", vec2)):
            vec = tensor_argument(vec, "addr")
            if vec.ndim != 1:
                raise TensorError(
                    f"addr: Expected 1-D argument {name}, but got {vec.ndim}-D (as in torch)"
                )
        return _scaled_sum(vec1.unsqueeze(1) * vec2.unsqueeze(0), self, beta, alpha, "addr")

    def addr_(self: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        return _into(self, self.addr(vec1, vec2, beta=beta, alpha=alpha), "addr_")

    def addbmm(
        self: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1
    ) -> Tensor:
        """``beta * self + alpha * sum_b(batch1[b] @ batch2[b])`` for 3-D batches."""
        batch1 = tensor_argument(batch1, "addbmm")
        batch2 = tensor_argument(batch2, "addbmm")
        for name, batch in (("batch1", batch1), ("batch2", batch2)):
            if batch.ndim != 3:
                raise TensorError(
                    f"addbmm: {name} must be a 3D tensor (as in torch), got {batch.ndim}-D"
                )
        b, n, m = batch1.shape
        if batch2.shape[0] != b:
            raise TensorError(
                f"addbmm: batch1 and batch2 must have same number of batches, got {b} and "
                f"{batch2.shape[0]} (as in torch)"
            )
        if batch2.shape[1] != m:
            raise TensorError(
                f"addbmm: Incompatible matrix sizes for bmm ({n}x{m} and "
                f"{batch2.shape[1]}x{batch2.shape[2]}) (as in torch)"
            )
        left = batch1.permute(1, 0, 2).contiguous()  # a copy: b and m are not one run
        product = left.view(n, b * m).matmul(batch2.reshape(b * m, batch2.shape[2]))
        if left.storage_device_tensor is not batch1.storage_device_tensor:
            left.free()
        return _scaled_sum(product, self, beta, alpha, "addbmm")

    def addbmm_(
        self: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1
    ) -> Tensor:
        return _into(self, self.addbmm(batch1, batch2, beta=beta, alpha=alpha), "addbmm_")

    def inner(self: Tensor, other: Tensor) -> Tensor:
        """The sums of products over the last dims: shape ``self.shape[:-1] +
        other.shape[:-1]``; a 0-d operand multiplies."""
        other = tensor_argument(other, "inner")
        if self.ndim == 0 or other.ndim == 0:
            return self * other
        k = self.shape[-1]
        if other.shape[-1] != k:
            raise TensorError(
                f"inner() the last dimension must match on both input tensors but got shapes "
                f"{list(self.shape)} and {list(other.shape)} (as in torch)"
            )
        rows, cols = tuple(self.shape[:-1]), tuple(other.shape[:-1])
        product = self.reshape(-1, k).matmul(other.reshape(-1, k).t())
        return product.reshape(rows + cols)

    def vdot(self: Tensor, other: Tensor) -> Tensor:
        """The dot product of two 1-D tensors of one dtype (real: no conjugate)."""
        other = tensor_argument(other, "vdot")
        if self.ndim != 1 or other.ndim != 1:
            raise TensorError(
                f"vdot: 1D tensors expected, but got {self.ndim}D and {other.ndim}D tensors "
                "(as in torch)"
            )
        if self.dtype is not other.dtype:
            raise TensorError(
                f"vdot: expected both vectors to have same dtype, but found {self.dtype!r} and "
                f"{other.dtype!r} (as in torch)"
            )
        if self.shape[0] != other.shape[0]:
            raise TensorError(
                f"vdot: inconsistent tensor size, expected tensor [{self.shape[0]}] and src "
                f"[{other.shape[0]}] to have the same number of elements (as in torch)"
            )
        return self.dot(other)

    def diag_embed(self: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
        """A tensor whose (``dim1``, ``dim2``) planes hold the last dim of ``self`` on their
        ``offset``-th diagonal, zeros elsewhere."""
        k = int_argument(offset, "diag_embed", "offset")
        ndim = self.ndim + 1
        a = dim_index(dim1, ndim, "diag_embed")
        b = dim_index(dim2, ndim, "diag_embed")
        if a == b:
            raise TensorError(
                f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2} (as in torch)"
            )
        n = (self.shape[-1] if self.ndim else 1) + abs(k)
        shape = list(self.shape[:-1])
        for d in sorted((a, b)):
            shape.insert(d, n)
        out = self.new_zeros(*shape)
        if self.numel():
            out.diagonal(k, a, b).copy_(self)
        return out

    def rot90(self: Tensor, k: int = 1, dims: Any = (0, 1)) -> Tensor:
        """``self`` turned by 90° ``k`` times in the plane of ``dims``, from the first
        dim towards the second."""
        turns = int_argument(k, "rot90", "k") % 4
        named = int_sequence(dims, "rot90", "dims")
        if len(named) != 2:
            raise TensorError(
                f"rot90: expected total rotation dims == 2, but got dims = {len(named)} "
                "(as in torch)"
            )
        if self.ndim < 2:
            raise TensorError(
                f"rot90: expected total dims >= 2, but got total dims = {self.ndim} (as in torch)"
            )
        d0 = dim_index(named[0], self.ndim, "rot90")
        d1 = dim_index(named[1], self.ndim, "rot90")
        if d0 == d1:
            raise TensorError(
                f"rot90: expected rotation dims to be different, but got dim0 = {named[0]} and "
                f"dim1 = {named[1]} (as in torch)"
            )
        if turns == 1:
            return self.flip(d1).transpose(d0, d1)
        if turns == 2:
            return self.flip(d0, d1)
        if turns == 3:
            return self.flip(d0).transpose(d0, d1)
        return self.clone()

    def dist(self: Tensor, other: Tensor, p: Any = 2) -> Tensor:
        """The ``p``-norm of ``self - other`` (broadcast), for any real ``p`` (0 counts
        the differing elements, inf takes the largest)."""
        other = tensor_argument(other, "dist")
        p = _number(p, "dist", "p")
        _floating(self, "dist")
        _floating(other, "dist")
        return _p_norm(self - other, p, None, False)

    def renorm(self: Tensor, p: Any, dim: int, maxnorm: Any) -> Tensor:
        """Each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled to norm
        ``maxnorm`` (by ``maxnorm / (norm + 1e-7)``, as torch); the others as they are."""
        p = _number(p, "renorm", "p")
        maxnorm = _number(maxnorm, "renorm", "maxnorm")
        _floating(self, "renorm")
        if p <= 0:
            raise TensorError("renorm: non-positive-norm not supported (as in torch)")
        if maxnorm < 0:
            raise TensorError(
                f"renorm: expected maxnorm to be >= 0 but got {maxnorm} (as in torch)"
            )
        if self.ndim < 2:
            raise TensorError(
                f"renorm: input needs at least 2 dimensions, got {self.ndim} dimensions "
                "(as in torch)"
            )
        d = dim_index(dim, self.ndim, "renorm")
        others = tuple(i for i in range(self.ndim) if i != d)
        norms = _p_norm(self, p, others, True)
        factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
        return self * factor

    def renorm_(self: Tensor, p: Any, dim: int, maxnorm: Any) -> Tensor:
        return _into(self, self.renorm(p, dim, maxnorm), "renorm_")


def _chain_order(sizes: Sequence[int]) -> list[list[int]]:
    """Where to split each run ``i..j`` of the chain of matrices ``sizes[i] x sizes[i+1]``
    for the fewest multiplications (the textbook dynamic program)."""
    n = len(sizes) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + sizes[i] * sizes[s + 1] * sizes[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s
    return split


def _multiply(mats: Sequence[Tensor], split: list[list[int]], i: int, j: int) -> Tensor:
    if i == j:
        return mats[i]
    s = split[i][j]
    return _multiply(mats, split, i, s).matmul(_multiply(mats, split, s + 1, j))


def multi_dot(tensors: Sequence[Any], what: str) -> Tensor:
    """The product of ``tensors`` (2-D; with ``what`` ``multi_dot`` the first and the last
    may be 1-D, a row and a column vector), in the cheapest order."""
    items = [tensor_argument(t, what) for t in tensors]
    linalg = what.endswith("multi_dot")
    if not items or (linalg and len(items) < 2):
        raise TensorError(
            f"{what}(): expected at least 2 tensors but got {len(items)} (as in torch)"
            if linalg
            else f"{what}(): Expected one or more matrices (as in torch)"
        )
    for i, t in enumerate(items):
        end = linalg and i in (0, len(items) - 1)
        if t.ndim != 2 and not (end and t.ndim == 1):
            place = {0: "the first tensor", len(items) - 1: "the last tensor"}.get(i, f"tensor {i}")
            wanted = "1D or 2D" if end else "2D"
            raise TensorError(
                f"{what}(): {place if linalg else f'tensor {i}'} must be {wanted} but got "
                f"{t.ndim}D (as in torch)"
            )
    if len(items) == 1:
        return items[0].clone()
    first_vector, last_vector = items[0].ndim == 1, items[-1].ndim == 1
    mats = list(items)
    if first_vector:
        mats[0] = mats[0].unsqueeze(0)
    if last_vector:
        mats[-1] = mats[-1].unsqueeze(1)
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise TensorError(
                f"{what}(): tensors {i} and {i + 1} with shapes {list(items[i].shape)} and "
                f"{list(items[i + 1].shape)} cannot be multiplied (as in torch)"
            )
    sizes = [mats[0].shape[0]] + [m.shape[1] for m in mats]
    out = _multiply(mats, _chain_order(sizes), 0, len(mats) - 1)
    if first_vector and last_vector:
        return out.reshape(())
    if first_vector:
        return out.squeeze(0)
    if last_vector:
        return out.squeeze(1)
    return out
