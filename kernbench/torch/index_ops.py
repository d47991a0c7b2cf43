"""Index reads and writes of :class:`~kernbench.torch.Tensor`: ``gather``,
``index_select``, ``take``, ``scatter``/``scatter_`` (a src tensor or a value,
``reduce="add"`` or ``"multiply"``), ``scatter_add``/``scatter_add_``,
``index_add``/``index_add_``, ``index_copy``/``index_copy_`` (``scatter_reduce`` is in
:mod:`~kernbench.torch.scatter_reduce`).

:class:`TensorIndexOps` is mixed into the tensor class.  Each is one elementwise
kernel over the index (or the source) with :data:`BLOCK` elements a program: a read
of the index, then a load at, or a store to, the place it names, so it costs about
what a copy of the result (or the source) costs.  Adds go through ``tl.atomic_add``,
so repeated indices add up, as torch's.  Before the launch the index is checked
against the size it indexes, host-side at no simulated cost (torch asserts inside
its kernel), and an index out of range raises a
:class:`~kernbench.errors.TensorError` naming the tensor, the index and the valid
range.  ``index_copy_`` and ``scatter_`` with repeated indices keep one of the
written values (the last here; torch leaves it unspecified).  The written tensor is
written in place when it is one run of memory, otherwise through a contiguous
temporary copied back.  ``scatter_(reduce="multiply")`` multiplies by
:mod:`~kernbench.torch.scatter_reduce`'s read-modify-write kernel, in index order.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, check_elements, elementwise_grid
from kernbench.torch.dtypes import python_scalar
from kernbench.torch.scatter_reduce import launch_update
from kernbench.torch.shapes import dim_index
from kernbench.torch.views import same_device

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorIndexOps", "check_index_range", "launch_gather", "launch_scatter"]


@jit
def _gather_kernel(
    x_ptr,
    idx_ptr,
    out_ptr,
    n,
    K,
    C,
    LX,
    LINE: tl.constexpr,
    WRAP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # out[r, k, c] = x[r, index, c] with x viewed as (R, LX, C): index[r, k, c], or
    # index[k] for LINE (index_select); WRAP takes negative indices from the end (take).
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = p < n
    if LINE:
        idx = tl.load(idx_ptr + (p // C) % K, mask=mask, other=0)
    else:
        idx = tl.load(idx_ptr + p, mask=mask, other=0)
    if WRAP:
        idx = tl.where(idx < 0, idx + LX, idx)
    src = (p // (K * C)) * (LX * C) + idx * C + p % C
    tl.store(out_ptr + p, tl.load(x_ptr + src, mask=mask), mask=mask)


@jit(do_not_specialize=["value"])
def _scatter_kernel(
    src_ptr,
    idx_ptr,
    out_ptr,
    n,
    K,
    C,
    LO,
    value,
    LINE: tl.constexpr,
    SRC_TENSOR: tl.constexpr,
    ADD: tl.constexpr,
    WRAP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # out[r, index, c] = src[r, k, c] (or value; added with ADD), out viewed as (R, LO, C);
    # WRAP takes negative indices from the end (advanced indexing).
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = p < n
    if LINE:
        idx = tl.load(idx_ptr + (p // C) % K, mask=mask, other=0)
    else:
        idx = tl.load(idx_ptr + p, mask=mask, other=0)
    if WRAP:
        idx = tl.where(idx < 0, idx + LO, idx)
    dst = (p // (K * C)) * (LO * C) + idx * C + p % C
    if SRC_TENSOR:
        v = tl.load(src_ptr + p, mask=mask, other=0)
    else:
        v = value  # the store converts it to out's dtype
    if ADD:
        tl.atomic_add(out_ptr + dst, v, mask=mask)
    else:
        tl.store(out_ptr + dst, v, mask=mask)


def launch_gather(
    x: DeviceTensor,
    index: DeviceTensor,
    out: DeviceTensor,
    sizes: tuple[int, int, int],
    *,
    line: bool,
    wrap: bool = False,
) -> None:
    """``out`` (R, K, C) from ``x`` (R, LX, C) at ``index``; ``sizes`` = (K, C, LX)."""
    n = out.numel
    k, c, lx = sizes
    check_elements(x.numel, "gather")  # the source is indexed with 32-bit offsets too
    _gather_kernel[elementwise_grid(n, "gather")](
        x, index, out, n, k, c, lx, LINE=line, WRAP=wrap, BLOCK=BLOCK
    )


def launch_scatter(
    src: DeviceTensor | int | float,
    index: DeviceTensor,
    out: DeviceTensor,
    counts: tuple[int, int, int, int],
    *,
    line: bool,
    add: bool,
    wrap: bool = False,
) -> None:
    """``out`` (R, LO, C) at ``index`` gets ``src`` (R, K, C, or a number); ``counts`` =
    (n = R * K * C, K, C, LO)."""
    n, k, c, lo = counts
    check_elements(out.numel, "scatter")  # the target is indexed with 32-bit offsets too
    is_tensor = isinstance(src, DeviceTensor)
    _scatter_kernel[elementwise_grid(n, "scatter")](
        src if is_tensor else index,
        index,
        out,
        n,
        k,
        c,
        lo,
        0 if is_tensor else typed_scalar(src, out.dtype),
        LINE=line,
        SRC_TENSOR=is_tensor,
        ADD=add,
        WRAP=wrap,
        BLOCK=BLOCK,
    )


def check_index_range(
    what: str, owner: Tensor, index: Tensor, d: int, size: int, *, wrap: bool = False
) -> None:
    """Refuse an index outside [0, size) ([-size, size) with ``wrap``).  torch asserts on
    the device, inside its kernel, without a host read; the check here looks at memory
    without the machine (``peek``), so it costs no simulated time.  Timing-only runs
    carry no values and are not checked."""
    if not index.numel() or index.storage_device_tensor.context.timing_only:
        return
    values = index.peek()
    lo, hi = int(values.min()), int(values.max())
    first = -size if wrap else 0
    if lo >= first and hi < size:
        return
    bad = lo if lo < first else hi
    valid = f"[{first}, {size})" if size else "none: the dimension is empty"
    raise TensorError(
        f"{what}: index {bad} is out of range for dimension {d} of "
        f"{owner.storage_device_tensor.name!r} with size {size} (valid: {valid}); torch says "
        "'index out of range in self'"
    )


# scatter_'s reduce names, as the scatter kernels take them
_REDUCE = {"add": "add", "multiply": "prod"}


def _index(what: str, index: Any, *, long_only: bool) -> Tensor:
    if not hasattr(index, "storage_device_tensor"):
        raise TensorError(f"{what}: index must be a Tensor, got {type(index).__name__}")
    name = index.dtype.name
    if name != "int64" and (long_only or name != "int32"):
        wanted = "int64" if long_only else "int32 or int64"
        raise TensorError(f"{what}: Expected dtype {wanted} for index, got {index.dtype!r}")
    return index


def _narrowed(t: Tensor, shape: tuple[int, ...], d: int | None) -> Tensor:
    """``t``'s leading part of ``shape`` in every dim but ``d`` (a view)."""
    if all(shape[k] == t.shape[k] for k in range(t.ndim) if k != d):
        return t
    return t[tuple(slice(None) if k == d else slice(0, shape[k]) for k in range(t.ndim))]


def _three(shape: tuple[int, ...], d: int) -> tuple[int, int, int]:
    return math.prod(shape[:d]), shape[d], math.prod(shape[d + 1 :])


class TensorIndexOps:
    """Reads and writes at tensor indices along a dim, as device kernels."""

    __slots__ = ()

    def gather(self: Tensor, dim: Any, index: Any, *, sparse_grad: bool = False) -> Tensor:
        """``out[i][j][k] = self[index[i][j][k]][j][k]`` (for ``dim`` 0; int64 index of
        ``self``'s ndim, no larger than it but along ``dim``)."""
        what = f"gather of {self.storage_device_tensor.name!r}"
        index = _index("gather()", index, long_only=True)
        same_device(what, self, index)
        x, idx = (self.reshape(1), index.reshape(1)) if self.ndim == 0 else (self, index)
        d = dim_index(dim, x.ndim)
        if idx.ndim != x.ndim or any(idx.shape[k] > x.shape[k] for k in range(x.ndim) if k != d):
            raise TensorError(
                f"{what}: index of shape {tuple(index.shape)} must have the input's "
                f"{self.ndim} dims, each no larger than the input's {tuple(self.shape)} but "
                f"along dim {d} (as torch)"
            )
        out = self.new_empty(index.shape)
        if out.numel():
            check_index_range(what, self, index, d, x.shape[d])
            narrowed = _narrowed(x, tuple(idx.shape), d)
            source, dense_index = narrowed.dense(), idx.dense()
            _, k, c = _three(tuple(idx.shape), d)
            launch_gather(
                source.device_tensor,
                dense_index.device_tensor,
                out.device_tensor,
                (k, c, x.shape[d]),
                line=False,
            )
            _free_made(source, narrowed, dense_index, idx)
        return out

    def index_select(self: Tensor, dim: Any, index: Any) -> Tensor:
        """The slices of ``self`` along ``dim`` at the (1-D, int32 or int64) ``index``."""
        what = f"index_select of {self.storage_device_tensor.name!r}"
        index = _index("index_select()", index, long_only=False)
        same_device(what, self, index)
        if index.ndim > 1:
            raise TensorError(f"{what}: index_select(): Index is supposed to be a vector")
        x = self.reshape(1) if self.ndim == 0 else self
        d = dim_index(dim, x.ndim)
        count = index.numel()
        if self.ndim == 0 and count != 1:
            raise TensorError(f"{what}: index_select(): Index to scalar can have only 1 value")
        shape = tuple(x.shape[:d]) + (count,) + tuple(x.shape[d + 1 :])
        out = self.new_empty(shape if self.ndim else ())  # a scalar stays one, as torch
        if out.numel():
            check_index_range(what, self, index, d, x.shape[d])
            source, dense_index = x.dense(), index.dense()
            _, _, c = _three(shape, d)
            launch_gather(
                source.device_tensor,
                dense_index.device_tensor,
                out.device_tensor,
                (count, c, x.shape[d]),
                line=True,
            )
            _free_made(source, x, dense_index, index)
        return out

    def take(self: Tensor, index: Any) -> Tensor:
        """``self`` flattened, at ``index`` (int64, any shape; negative from the end)."""
        what = f"take of {self.storage_device_tensor.name!r}"
        index = _index("take()", index, long_only=True)
        same_device(what, self, index)
        out = self.new_empty(index.shape)
        if out.numel():
            check_index_range(what, self, index, 0, self.numel(), wrap=True)
            flat = self.reshape(-1)  # a copy reshape makes is released when dropped
            dense, dense_index = flat.dense(), index.dense()
            launch_gather(
                dense.device_tensor,
                dense_index.device_tensor,
                out.device_tensor,
                (out.numel(), 1, self.numel()),
                line=False,
                wrap=True,
            )
            _free_made(dense, flat, dense_index, index)
        return out

    # -- writes ---------------------------------------------------------------------------
    def scatter_(
        self: Tensor,
        dim: Any,
        index: Any,
        src: Any = None,
        *,
        value: Any = None,
        reduce: Any = None,
    ) -> Tensor:
        """``self[index[i][j]][j] = src[i][j]`` (dim 0), or ``value``; ``reduce="add"``
        adds (repeated indices add up), ``"multiply"`` multiplies (in index order)."""
        if src is not None and not hasattr(src, "storage_device_tensor"):
            src, value = None, src
        if reduce not in (None, "add", "multiply"):
            raise TensorError(
                f"scatter_(reduce={reduce!r}): reduce argument must be either add or multiply "
                "(as torch); scatter_reduce_ also takes 'sum', 'prod', 'mean', 'amax', 'amin'"
            )
        what = f"scatter_ of {self.storage_device_tensor.name!r}"
        return self._scatter(what, dim, index, src, value, reduce=_REDUCE.get(reduce))

    def scatter(
        self: Tensor,
        dim: Any,
        index: Any,
        src: Any = None,
        *,
        value: Any = None,
        reduce: Any = None,
    ) -> Tensor:
        """:meth:`scatter_` into a copy of ``self``."""
        return self.clone().scatter_(dim, index, src, value=value, reduce=reduce)

    def scatter_add_(self: Tensor, dim: Any, index: Any, src: Any) -> Tensor:
        """``self[index[i][j]][j] += src[i][j]`` (dim 0); repeated indices add up."""
        if not hasattr(src, "storage_device_tensor"):
            raise TensorError(f"scatter_add_: src must be a Tensor, got {type(src).__name__}")
        what = f"scatter_add_ of {self.storage_device_tensor.name!r}"
        return self._scatter(what, dim, index, src, None, reduce="add")

    def scatter_add(self: Tensor, dim: Any, index: Any, src: Any) -> Tensor:
        return self.clone().scatter_add_(dim, index, src)

    def _scatter(
        self: Tensor, what: str, dim: Any, index: Any, src: Any, value: Any, *, reduce: Any
    ) -> Tensor:
        """``self`` written (``reduce`` None), added to ("add") or combined with ("prod",
        "amax", "amin") at ``index`` along ``dim`` from ``src`` or ``value``; ``what``
        names the call in errors."""
        index = _index(what, index, long_only=True)
        same_device(what, self, index)
        if src is None and python_scalar(value) is None:
            raise TensorError(f"{what}: give src (a Tensor) or value (a number), got {value!r}")
        d = dim_index(dim, max(self.ndim, 1))
        shape = tuple(index.shape) if self.ndim else ()
        same_dims = index.ndim == self.ndim and (src is None or src.ndim == self.ndim)
        fits = same_dims and all(
            (k == d or index.shape[k] <= self.shape[k])
            and (src is None or index.shape[k] <= src.shape[k])
            for k in range(index.ndim)
        )
        if not fits:
            raise TensorError(
                f"{what}: index of shape {tuple(index.shape)} must have self's {self.ndim} dims "
                f"(and src's), no larger than src in any dim and than self "
                f"{tuple(self.shape)} but along dim {d} (as torch)"
            )
        if src is not None:
            same_device(what, self, src)
            if src.dtype is not self.dtype:
                raise TensorError(
                    f"{what}: Expected self.dtype to be equal to src.dtype (as torch), got "
                    f"{self.dtype!r} and {src.dtype!r}"
                )
        if not index.numel():
            return self
        size = self.shape[d] if self.ndim else 1
        check_index_range(what, self, index, d, size)
        if not self.ndim:
            shape = (1,)
        source = None
        if src is not None:
            narrowed = _narrowed(src.reshape(shape) if not self.ndim else src, shape, None)
            source = narrowed.dense()
        _, k, c = _three(shape, d)
        given = value if source is None else source.device_tensor
        if reduce in (None, "add"):

            def launch(target: DeviceTensor, idx: DeviceTensor) -> None:
                counts = (index.numel(), k, c, size)
                launch_scatter(given, idx, target, counts, line=False, add=reduce == "add")
        else:

            def launch(target: DeviceTensor, idx: DeviceTensor) -> None:
                launch_update(given, idx, target, (k, c, size), reduce)

        self._write_indexed(shape, d, launch, index)
        if source is not None:
            _free_made(source, narrowed)
        return self

    def index_add_(self: Tensor, dim: Any, index: Any, source: Any, *, alpha: Any = 1) -> Tensor:
        """``self``'s slices along ``dim`` at ``index`` plus ``alpha * source``'s slices
        (repeated indices add up), as torch."""
        return self._index_write("index_add_", dim, index, source, alpha)

    def index_add(self: Tensor, dim: Any, index: Any, source: Any, *, alpha: Any = 1) -> Tensor:
        return self.clone().index_add_(dim, index, source, alpha=alpha)

    def index_copy_(self: Tensor, dim: Any, index: Any, source: Any) -> Tensor:
        """``self``'s slices along ``dim`` at ``index`` become ``source``'s slices."""
        return self._index_write("index_copy_", dim, index, source, None)

    def index_copy(self: Tensor, dim: Any, index: Any, source: Any) -> Tensor:
        return self.clone().index_copy_(dim, index, source)

    def _index_write(self: Tensor, op: str, dim: Any, index: Any, source: Any, alpha: Any):
        what = f"{op} of {self.storage_device_tensor.name!r}"
        index = _index(what, index, long_only=op == "index_copy_")
        if not hasattr(source, "storage_device_tensor"):
            raise TensorError(f"{what}: source must be a Tensor, got {type(source).__name__}")
        same_device(what, self, index)
        same_device(what, self, source)
        if isinstance(python_scalar(alpha), float) and not self.dtype.is_floating_point:
            raise TensorError(
                f"{what}: For integral input tensors, argument alpha must not be a floating "
                f"point number (as torch), got alpha={alpha!r}"
            )
        d = dim_index(dim, max(self.ndim, 1))
        count = index.numel()
        wanted = tuple(self.shape[:d]) + (count,) + tuple(self.shape[d + 1 :])
        if index.ndim > 1 or (self.ndim and tuple(source.shape) != wanted):
            raise TensorError(
                f"{what}: index must be a vector and source of shape {wanted} (self's shape "
                f"with {count} along dim {d}), got index {tuple(index.shape)} and source "
                f"{tuple(source.shape)}"
            )
        if source.dtype is not self.dtype:
            raise TensorError(
                f"{what}: self ({self.dtype!r}) and source ({source.dtype!r}) must have the same "
                "scalar type (as torch)"
            )
        if not count:
            return self
        shape = wanted if self.ndim else (1,)
        size = self.shape[d] if self.ndim else 1
        check_index_range(what, self, index, d, size)
        scaled = source if alpha is None or alpha == 1 else source * alpha
        reshaped = scaled.reshape(shape)  # a copy reshape makes is released when dropped
        dense = reshaped.dense()
        _, k, c = _three(shape, d)
        self._write_indexed(
            tuple(self.shape) if self.ndim else (1,),
            None,
            lambda target, idx: launch_scatter(
                dense.device_tensor,
                idx,
                target,
                (dense.numel(), k, c, size),
                line=True,
                add=op == "index_add_",
            ),
            index,
        )
        _free_made(dense, reshaped)
        if scaled is not source:
            scaled.free()
        return self

    def _write_indexed(self: Tensor, shape: tuple[int, ...], d: int | None, launch, index: Tensor):
        """``launch(target, index)`` on ``self`` (its part of ``shape`` but along ``d``), in
        place when that is one run of memory, else through a contiguous copy."""
        view = self.reshape(1) if not self.ndim else _narrowed(self, shape, d)
        dense_index = index.dense()
        direct = view.contiguous_device_tensor()
        if direct is not None:
            launch(direct, dense_index.device_tensor)
        else:
            temp = view.contiguous()
            launch(temp.device_tensor, dense_index.device_tensor)
            view.copy_(temp)
            temp.free()
        _free_made(dense_index, index)


def _free_made(*pairs: Tensor) -> None:
    """Free each made tensor of (made, given) pairs: a dense copy ``dense()`` made of a
    given tensor (``dense()`` returns the tensor itself when it is one run already)."""
    for made, given in zip(pairs[::2], pairs[1::2], strict=True):
        if made is not given:
            made.free()
