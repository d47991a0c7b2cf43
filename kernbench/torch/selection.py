"""Order statistics of :class:`~kernbench.torch.Tensor`: ``median``, ``nanmedian``,
``quantile`` and ``nanquantile``.

:class:`TensorSelection` is mixed into the tensor class.  Each sorts the lines along
its dim with :mod:`~kernbench.torch.sorting`'s kernels (the whole tensor flattened when
no dim is given), as torch's ``quantile`` does, then runs one pick kernel over the
results: a program takes :data:`BLOCK` of them, finds where its line's NaNs start by a
binary search (NaN sorts last, so ``log2(L) + 1`` loads a line), and loads the one or
two sorted values it needs.  So a median or a quantile costs a sort and a small gather.

The picks are torch's CPU ones.  ``median`` is the lower of the two middle values (the
element at ``(n - 1) // 2`` of the stable order, so its index is the first of equal
values there), or the first NaN of a line that has one; ``nanmedian`` takes the
median of the numbers (NaN for a line of NaNs).  ``quantile`` follows torch's
``quantile_impl`` in the input's dtype: ``rank = q * (n - 1)`` (the last place for a
line with a NaN, so the result is NaN; ``nanquantile`` counts only the numbers), moved
by ``interpolation`` (``lower`` floors, ``higher`` ceils, ``nearest`` rounds half to
even), then ``lerp`` of the values below and above with torch's two-sided formula
(``midpoint`` weighs 0.5).
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import TYPE_CHECKING, Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError, TensorIndexError
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid, float_type, launch_fill
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, python_scalar
from kernbench.torch.rounding import rint
from kernbench.torch.shapes import dim_index, flag_argument
from kernbench.torch.sorting import ranked
from kernbench.torch.views import same_device

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "INTERPOLATIONS",
    "MedianResult",
    "NanmedianResult",
    "TensorSelection",
    "launch_pick",
]

MedianResult = namedtuple("median", ["values", "indices"])  # torch.return_types.median
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])  # torch.return_types.nanmedian

INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")
# torch converts ranks to double and refuses longer lines
MAX_QUANTILE_LINE = 1 << 24


@jit(do_not_specialize=["q_value"])
def _pick_kernel(
    sorted_ptr,
    index_ptr,
    q_ptr,
    out_ptr,
    out_index_ptr,
    n,
    n_lines,
    L,
    C,
    q_value,
    QUANTILE: tl.constexpr,
    IGNORE_NAN: tl.constexpr,
    FLOAT: tl.constexpr,
    Q_TENSOR: tl.constexpr,
    INTERPOLATION: tl.constexpr,
    FT: tl.constexpr,
    STEPS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Output p = (q, line), line = (a, c) of the sorted x[a, :, c]: the median (value and
    # index) or the q-th quantile of that line.
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = p < n
    line = p % n_lines
    base = (line // C) * (L * C) + line % C
    if FLOAT:  # the numbers of a line: NaN sorts last, so where the first NaN is
        lo = tl.zeros((BLOCK,), tl.int32)
        hi = lo + L
        # every lane loads every step, so the cost does not depend on the values
        for _ in range(STEPS):
            active = lo < hi
            mid = lo + (hi - lo) // 2
            v = tl.load(sorted_ptr + base + tl.minimum(mid, L - 1) * C, mask=mask, other=0)
            nan = v != v
            hi = tl.where(active & nan, mid, hi)
            lo = tl.where(active & ~nan, mid + 1, lo)
        numbers = lo
    else:
        numbers = tl.zeros((BLOCK,), tl.int32) + L
    if QUANTILE:
        if Q_TENSOR:
            q = tl.load(q_ptr + p // n_lines, mask=mask, other=0)
        else:
            q = q_value
        if IGNORE_NAN:
            rank = q * (numbers - 1).to(FT)
            rank = tl.where(rank < 0, 0.0, rank)
        else:
            rank = tl.where(numbers < L, L - 1, q * (L - 1))
        if INTERPOLATION == "lower":
            rank = tl.floor(rank)
        elif INTERPOLATION == "higher":
            rank = tl.ceil(rank)
        elif INTERPOLATION == "nearest":
            rank = rint(rank, FT)
        below = tl.floor(rank)
        result = tl.load(sorted_ptr + base + below.to(tl.int32) * C, mask=mask, other=0).to(FT)
        if INTERPOLATION == "linear" or INTERPOLATION == "midpoint":
            above = tl.ceil(rank).to(tl.int32)
            end = tl.load(sorted_ptr + base + above * C, mask=mask, other=0).to(FT)
            # torch's lerp, exact at both ends: the weight 0.5 of midpoint takes the second form
            if INTERPOLATION == "midpoint":
                result = end - (end - result) * 0.5
            else:
                weight = rank - below
                result = tl.where(
                    weight < 0.5,
                    result + weight * (end - result),
                    end - (end - result) * (1 - weight),
                )
        tl.store(out_ptr + p, result, mask=mask)
    else:
        if IGNORE_NAN:
            at = tl.where(numbers > 0, (numbers - 1) // 2, 0)
        else:
            at = tl.where(numbers < L, numbers, (L - 1) // 2)
        tl.store(out_ptr + p, tl.load(sorted_ptr + base + at * C, mask=mask), mask=mask)
        tl.store(out_index_ptr + p, tl.load(index_ptr + base + at * C, mask=mask), mask=mask)


def launch_pick(
    sorted_values: DeviceTensor,
    sorted_indices: DeviceTensor,
    out: DeviceTensor,
    out_indices: DeviceTensor | None,
    lines: tuple[int, int, int],
    *,
    ignore_nan: bool,
    q: DeviceTensor | float | None = None,
    interpolation: str = "linear",
) -> None:
    """Pick from lines sorted ascending (``lines`` = (rows x cols, length, cols) of
    ``sorted_values`` viewed as (rows, length, cols)): the median and its index (``q``
    None) into ``out``/``out_indices``, else the ``q``-th quantiles (a number, or a
    tensor of them: ``out`` is then (q, lines)); ``ignore_nan`` for the nan- forms."""
    n_lines, length, cols = lines
    quantile = q is not None
    q_tensor = isinstance(q, DeviceTensor)
    n = out.numel
    _pick_kernel[elementwise_grid(n, "a median or quantile")](
        sorted_values,
        sorted_indices,
        q if q_tensor else sorted_values,
        out,
        out if out_indices is None else out_indices,
        n,
        n_lines,
        length,
        cols,
        typed_scalar(float(q), out.dtype) if quantile and not q_tensor else 0.0,
        QUANTILE=quantile,
        IGNORE_NAN=ignore_nan,
        FLOAT=sorted_values.dtype.is_floating_point,
        Q_TENSOR=q_tensor,
        INTERPOLATION=interpolation,
        FT=float_type(sorted_values.dtype),
        STEPS=max(1, length).bit_length() if sorted_values.dtype.is_floating_point else 0,
        BLOCK=BLOCK,
    )


def _quantile_method(name: str, doc: str) -> Any:
    """``Tensor.quantile`` or ``Tensor.nanquantile`` (``name``), documented by ``doc``."""

    def method(
        self: Tensor,
        q: Any,
        dim: Any = None,
        keepdim: bool = False,
        *,
        interpolation: str = "linear",
    ) -> Tensor:
        return self._quantile(
            name, q, dim, keepdim, interpolation, ignore_nan=name == "nanquantile"
        )

    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    return method


class TensorSelection:
    """``median``, ``nanmedian``, ``quantile`` and ``nanquantile``: a sort, then a pick."""

    __slots__ = ()

    def median(self: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
        """The lower median of all elements (a 0-d tensor, NaN if any is NaN), or along
        ``dim`` as ``(values, indices)`` (``torch.return_types.median``)."""
        return self._median("median", dim, keepdim, ignore_nan=False)

    def nanmedian(self: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
        """:meth:`median` of the elements that are not NaN (NaN when there are none)."""
        return self._median("nanmedian", dim, keepdim, ignore_nan=True)

    quantile = _quantile_method(
        "quantile",
        """The ``q``-th quantiles (a number, or a 1-D tensor of them: its size leads the
        result's shape) of all elements or along ``dim``; NaN where a line has a NaN.""",
    )
    nanquantile = _quantile_method(
        "nanquantile", """:meth:`quantile` of the elements that are not NaN."""
    )

    # -- the common part --------------------------------------------------------------
    def _median(self: Tensor, what: str, dim: Any, keepdim: Any, *, ignore_nan: bool) -> Any:
        keepdim = flag_argument(keepdim, what, "keepdim")
        name = f"{what}() of {self.storage_device_tensor.name!r}"
        if self.dtype is BOOL:
            raise TensorError(f"{name}: \"{what}\" not implemented for 'Bool' (as torch)")
        if dim is None:
            if keepdim:
                raise TensorError(f"{name}: keepdim needs a dim, as torch's {what}(dim, keepdim)")
            flat = self.reshape(-1)
            if not flat.numel():
                if not self.dtype.is_floating_point:
                    raise TensorError(
                        f"{name}: an empty {self.dtype!r} tensor has no median (torch gives NaN "
                        "converted to the dtype, an undefined value); give a non-empty tensor"
                    )
                out = self.new_empty(())
                launch_fill(out.device_tensor, float("nan"))
                return out
            values, indices = _selected(flat, what, 0, keepdim=False, ignore_nan=ignore_nan)
            indices.free()
            return values
        d = dim_index(dim, self.ndim, what)
        if self.ndim and self.shape[d] == 0:
            raise TensorIndexError(f"{name}: Expected reduction dim {d} to have non-zero size.")
        values, indices = _selected(self, what, d, keepdim=keepdim, ignore_nan=ignore_nan)
        kind = NanmedianResult if ignore_nan else MedianResult
        return kind(values, indices)

    def _quantile(
        self: Tensor,
        what: str,
        q: Any,
        dim: Any,
        keepdim: Any,
        interpolation: Any,
        *,
        ignore_nan: bool,
    ) -> Tensor:
        keepdim = flag_argument(keepdim, what, "keepdim")
        name = f"{what}() of {self.storage_device_tensor.name!r}"
        if interpolation not in INTERPOLATIONS:
            raise TensorError(
                f"{name}: quantile() interpolation must be one of linear, lower, higher, "
                f"midpoint or nearest, but got {interpolation!r}"
            )
        if self.dtype.name not in ("float32", "float64"):
            raise TensorError(
                f"{name}: quantile() input tensor must be either float or double dtype (got "
                f"{self.dtype!r}); convert with .float() or .double() first"
            )
        q_values = self._quantile_q(name, q)
        if not self.numel():
            raise TensorError(f"{name}: quantile() input tensor must be non-empty")
        if dim is None:
            x, d = self.reshape(-1), 0
            reduced = (1,) * self.ndim if keepdim else ()
        else:
            x, d = self, dim_index(dim, self.ndim, what)
            reduced = _reduced(tuple(self.shape), d, keepdim)
        lines = _lines(x, d)
        if lines[1] > MAX_QUANTILE_LINE:
            raise TensorError(
                f"{name}: quantile() input tensor is too large (a line of {lines[1]} elements; "
                f"torch takes at most {MAX_QUANTILE_LINE})"
            )
        q_shape = () if isinstance(q_values, float) else tuple(q_values.shape)
        out = self.new_empty(q_shape + reduced)
        if out.numel():
            ordered, order = ranked(x, what, d, lines[1], False)
            order.free()
            q_dense = q_values if isinstance(q_values, float) else q_values.dense()
            launch_pick(
                ordered.device_tensor,
                ordered.device_tensor,
                out.device_tensor,
                None,
                lines,
                ignore_nan=ignore_nan,
                q=q_dense if isinstance(q_dense, float) else q_dense.device_tensor,
                interpolation=interpolation,
            )
            ordered.free()
            if q_dense is not q_values:
                q_dense.free()
        return out

    def _quantile_q(self: Tensor, name: str, q: Any) -> Any:
        """``q`` as a float in [0, 1], or a 0-d or 1-D tensor of them in ``self``'s dtype."""
        if hasattr(q, "storage_device_tensor"):
            same_device(name, self, q)
            if q.ndim > 1:
                raise TensorError(
                    f"{name}: quantile() q must be a scalar or 1D tensor, got shape "
                    f"{tuple(q.shape)}"
                )
            if q.dtype is not self.dtype:
                raise TensorError(
                    f"{name}: quantile() q tensor must be same dtype as the input tensor (q is "
                    f"{q.dtype!r}, the input {self.dtype!r})"
                )
            if q.numel() and not q.storage_device_tensor.context.timing_only:
                values = q.peek()  # torch checks on the host for CPU tensors
                if not ((values >= 0) & (values <= 1)).all():
                    raise TensorError(
                        f"{name}: quantile() q values must be in the range [0, 1], got "
                        f"{values.tolist()}"
                    )
            return q
        number = python_scalar(q)
        if number is None or isinstance(number, bool):
            raise TensorError(
                f"{name}: q must be a float or a tensor of floats in [0, 1], got {q!r}"
            )
        if not 0 <= number <= 1:
            raise TensorError(f"{name}: quantile() q must be in the range [0, 1] but got {number}")
        return float(number)


def _reduced(shape: tuple[int, ...], d: int, keepdim: bool) -> tuple[int, ...]:
    """``shape`` without dim ``d`` (1 there with ``keepdim``); a 0-d shape stays one."""
    if not shape:
        return ()
    return shape[:d] + ((1,) if keepdim else ()) + shape[d + 1 :]


def _lines(t: Tensor, d: int) -> tuple[int, int, int]:
    """(rows x cols, length, cols) of ``t`` around dim ``d``."""
    shape = tuple(t.shape) or (1,)
    rows, length, cols = math.prod(shape[:d]), shape[d], math.prod(shape[d + 1 :])
    return rows * cols, length, cols


def _selected(t: Tensor, what: str, d: int, *, keepdim: bool, ignore_nan: bool):
    """The medians of ``t`` along ``d`` and their indices (int64)."""
    out_shape = _reduced(tuple(t.shape), d, keepdim)
    values = t.new_empty(out_shape)
    indices = t.new_empty(out_shape, dtype=DTYPE_OBJECTS["int64"])
    if values.numel():
        lines = _lines(t, d)
        ordered, order = ranked(t, what, d, lines[1], False)
        launch_pick(
            ordered.device_tensor,
            order.device_tensor,
            values.device_tensor,
            indices.device_tensor,
            lines,
            ignore_nan=ignore_nan,
        )
        ordered.free()
        order.free()
    return values, indices
