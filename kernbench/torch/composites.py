"""Tensor methods that are short compositions of others: ``square``, ``neg``, ``reciprocal``,
``clamp_min``/``clamp_max``, ``amax``/``amin``, ``logsumexp``, ``addmm``/``baddbmm``, ``outer``,
``mv``, ``type``, ``unflatten``, ``movedim``.

:class:`TensorComposites` is mixed into the tensor class.  Each is written
with the operations it stands for, so what it costs is what those cost:
``square`` is ``t * t``, ``neg`` is ``-t``, ``reciprocal`` ``1 / t``,
``clamp_min(m)`` ``clamp(min=m)``, ``outer`` a broadcast product, ``amax``
reduces one dim after another with ``max(dim)`` (and frees the indices torch
would not have made), ``logsumexp`` is ``m + log(sum(exp(t - m)))`` with ``m``
the ``amax`` (0 where it is infinite, as torch),
``addmm`` is ``beta * input + alpha * (mat1 @ mat2)`` (a matmul, then a scale
and an add where torch's GEMM folds them in); ``unflatten`` and ``movedim``
are views.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.shapes import dim_index, flag_argument, int_sequence

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorComposites"]

# torch's legacy tensor type names (``t.type()``)
_LEGACY_TYPES = {
    "float32": "FloatTensor",
    "float64": "DoubleTensor",
    "float16": "HalfTensor",
    "bfloat16": "BFloat16Tensor",
    "int32": "IntTensor",
    "int64": "LongTensor",
    "int16": "ShortTensor",
    "int8": "CharTensor",
    "uint8": "ByteTensor",
    "bool": "BoolTensor",
}


class TensorComposites:
    """The compositions the module's docstring lists (and their in-place forms)."""

    def square(self: Tensor) -> Tensor:
        """``self * self``."""
        return self * self

    def square_(self: Tensor) -> Tensor:
        return self.mul_(self)

    def neg(self: Tensor) -> Tensor:
        """``-self`` (refused on bool tensors, as torch)."""
        return -self

    negative = neg

    def neg_(self: Tensor) -> Tensor:
        if self.dtype.is_floating_point or self.dtype.is_signed:
            return self.mul_(-1)
        negated = -self  # bool: the operator's error; unsigned: wraps around, as torch
        self.copy_(negated)
        negated.free()
        return self

    negative_ = neg_

    def reciprocal(self: Tensor) -> Tensor:
        """``1 / self`` (an integer tensor gives floats, as torch)."""
        return 1 / self

    def reciprocal_(self: Tensor) -> Tensor:
        if not self.dtype.is_floating_point:
            raise TensorError(
                f"reciprocal_: result type Float can't be cast to the desired output type "
                f"{self.dtype!r} (as torch); use t.reciprocal()"
            )
        return self.pow_(-1)

    def clamp_min(self: Tensor, min: Any) -> Tensor:  # noqa: A002 - torch's name
        return self.clamp(min=min)

    def clamp_min_(self: Tensor, min: Any) -> Tensor:  # noqa: A002 - torch's name
        return self.clamp_(min=min)

    def clamp_max(self: Tensor, max: Any) -> Tensor:  # noqa: A002 - torch's name
        return self.clamp(max=max)

    def clamp_max_(self: Tensor, max: Any) -> Tensor:  # noqa: A002 - torch's name
        return self.clamp_(max=max)

    def outer(self: Tensor, vec2: Tensor) -> Tensor:
        """``self[i] * vec2[j]`` of two 1-D tensors."""
        if self.ndim != 1 or _ndim(vec2) != 1:
            shape = _shape_or_type(vec2)
            raise TensorError(
                f"outer: both arguments must be 1-D tensors, got {tuple(self.shape)} and {shape}"
            )
        return self.unsqueeze(1) * vec2.unsqueeze(0)

    ger = outer

    def mv(self: Tensor, vec: Tensor) -> Tensor:
        """The product of a 2-D ``self`` and a 1-D ``vec``."""
        if self.ndim != 2 or _ndim(vec) != 1:
            shape = _shape_or_type(vec)
            raise TensorError(
                f"mv: expected a 2-D matrix and a 1-D vector, got {tuple(self.shape)} and {shape}"
            )
        return self.matmul(vec)

    def type(self: Tensor, dtype: Any = None, non_blocking: bool = False) -> Any:  # noqa: A003
        """Without ``dtype`` the type's name (``torch.ahbm.FloatTensor``, as torch names a
        CUDA tensor's); with one (a dtype or such a name), ``to(dtype)``."""
        if dtype is None:
            legacy = _LEGACY_TYPES.get(self.dtype.name)
            return f"torch.ahbm.{legacy}" if legacy else f"torch.ahbm.{self.dtype.name}"
        dtype = getattr(dtype, "legacy_dtype", dtype)  # torch.LongTensor and its kin
        if isinstance(dtype, str):
            kind = dtype.rpartition(".")[2]  # a type name, not a component name
            names = {v: k for k, v in _LEGACY_TYPES.items()}
            if kind not in names:
                raise TensorError(
                    f"type({dtype!r}): not a tensor type here; give a dtype (torch.float16) or "
                    f"one of {', '.join(sorted(names))}"
                )
            dtype = DTYPE_OBJECTS[names[kind]]
        return self.to(dtype)

    def ndimension(self: Tensor) -> int:
        return self.ndim

    def share_memory_(self: Tensor) -> Tensor:
        """A no-op returning ``self``, as torch's for a CUDA tensor (the ranks of a run
        share one process, so a model handed to ``mp.Process`` workers is the same
        object; each rank still computes on its own device)."""
        return self

    def logsumexp(self: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
        """``log(sum(exp(self)))`` over ``dim``, stably."""
        keepdim = flag_argument(keepdim, "logsumexp", "keepdim")
        if not self.dtype.is_floating_point:
            raise TensorError(
                f"logsumexp: needs a floating tensor here, got {self.dtype!r}; call .float()"
            )
        top = self.amax(dim, keepdim=True)
        finite = top.isfinite()
        shift = top.masked_fill_(finite.logical_not(), 0)  # all -inf (or inf): no shift
        shifted = self - shift
        total = shifted.exp_().sum(dim, keepdim=True)
        out = total.log_().add_(shift)
        for t in (finite, shifted, shift):
            t.free()
        if keepdim:
            return out
        dims = int_sequence(dim, "logsumexp", "dim")
        return out.squeeze(tuple(sorted(dim_index(d, self.ndim) for d in dims)))

    def amax(self: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
        """The largest values over ``dim`` (an int or a tuple; ``()`` every dim), no indices."""
        return _extreme_over(self, dim, keepdim, "amax")

    def amin(self: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
        """The smallest values over ``dim`` (an int or a tuple; ``()`` every dim), no indices."""
        return _extreme_over(self, dim, keepdim, "amin")

    def addmm(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """``beta * self + alpha * (mat1 @ mat2)`` for 2-D ``mat1`` and ``mat2``."""
        return _scaled_product(self, mat1, mat2, beta, alpha, "addmm", 2)

    def baddbmm(
        self: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1
    ) -> Tensor:
        """``beta * self + alpha * (batch1 @ batch2)`` for 3-D ``batch1`` and ``batch2``."""
        return _scaled_product(self, batch1, batch2, beta, alpha, "baddbmm", 3)

    def unflatten(self: Tensor, dim: int, sizes: Any) -> Tensor:
        """A view with dim ``dim`` split into ``sizes`` (one of them may be -1)."""
        d = dim_index(dim, self.ndim, "unflatten", scalar=False)
        sizes = int_sequence(sizes, "unflatten", "sizes")
        if not sizes:
            raise TensorError("unflatten: sizes must be non-empty")
        length = self.shape[d]
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) > 1:
            raise TensorError("unflatten: only one dimension can be inferred (-1)")
        if -1 in sizes and known and length % known == 0:
            sizes = tuple(length // known if s == -1 else s for s in sizes)
        if math.prod(sizes) != length or any(s < 0 for s in sizes):
            raise TensorError(
                f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim "
                f"{dim} ({length}) in the input tensor"
            )
        shape = tuple(self.shape)
        return self.view(*shape[:d], *sizes, *shape[d + 1 :])

    def movedim(self: Tensor, source: Any, destination: Any) -> Tensor:
        """A view with dims ``source`` moved to ``destination`` (ints or sequences); the
        other dims keep their order."""
        sources = _dims(source, self.ndim, "source")
        targets = _dims(destination, self.ndim, "destination")
        if len(sources) != len(targets):
            raise TensorError(
                f"movedim: Invalid source or destination dims: source ({list(sources)} dims) "
                f"should contain the same number of dims as destination ({list(targets)} dims)"
            )
        if not self.ndim:  # dims 0 and -1 of a 0-d tensor: nothing to move, as torch
            return self.view(())
        order: list[int | None] = [None] * self.ndim
        for s, t in zip(sources, targets, strict=True):
            order[t] = s
        rest = iter(d for d in range(self.ndim) if d not in sources)
        return self.permute(*[next(rest) if d is None else d for d in order])

    moveaxis = movedim


def _ndim(value: Any) -> int | None:
    """A tensor's number of dims; ``None`` for anything that is not a tensor."""
    return value.ndim if hasattr(value, "storage_device_tensor") else None


def _shape_or_type(value: Any) -> Any:
    """A tensor's shape, or the type name of what was passed instead, for a message."""
    return tuple(value.shape) if _ndim(value) is not None else type(value).__name__


def _dims(value: Any, ndim: int, what: str) -> tuple[int, ...]:
    named = int_sequence(value, "movedim", what)
    dims = tuple(dim_index(d, ndim, "movedim") for d in named)
    if len(set(dims)) != len(dims):
        raise TensorError(f"movedim: repeated dim in `{what}` ({list(named)})")
    return dims


def _extreme_over(t: Tensor, dim: Any, keepdim: bool, what: str) -> Tensor:
    is_max = what == "amax"
    dims = int_sequence(dim, what, "dim")
    keepdim = flag_argument(keepdim, what, "keepdim")
    if t.numel() == 0:
        raise TensorError(
            f"{what}(): Expected reduction dim to be specified for input.numel() == 0, or a "
            "non-empty tensor (as torch)"
        )
    if not dims:  # every dim
        whole = t.max() if is_max else t.min()
        return whole.reshape((1,) * t.ndim) if keepdim else whole
    named = [dim_index(d, t.ndim) for d in dims]
    if len(set(named)) != len(named):
        raise TensorError(f"{what}(): dim {tuple(dims)} appears multiple times in the list of dims")
    result = t
    for d in sorted(named, reverse=True):
        values, indices = result.max(d, True) if is_max else result.min(d, True)
        indices.free()
        if result is not t:
            result.free()
        result = values
    return result if keepdim else result.squeeze(tuple(sorted(named)))


def _scaled_product(
    input: Tensor,  # noqa: A002 - torch's name
    a: Tensor,
    b: Tensor,
    beta: Any,
    alpha: Any,
    what: str,
    ndim: int,
) -> Tensor:
    for name, m in (("mat1" if ndim == 2 else "batch1", a), ("mat2" if ndim == 2 else "batch2", b)):
        if _ndim(m) != ndim:
            shape = _shape_or_type(m)
            raise TensorError(f"{what}: {name} must be a {ndim}-D tensor, got {shape}")
    out = a.matmul(b)
    if alpha != 1:
        out.mul_(alpha)
    if beta != 0:  # beta 0: input is ignored, its NaN and inf too (as torch)
        try:
            out.add_(input, alpha=beta)
        except TensorError as exc:
            out.free()
            raise TensorError(
                f"{what}: input of shape {tuple(input.shape)} does not broadcast to the "
                f"product's {tuple(out.shape)} ({exc})"
            ) from None
    return out
