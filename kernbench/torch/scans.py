"""Products, running sums and running extremes of :class:`~kernbench.torch.Tensor`:
``prod``, ``cumsum``, ``cumprod`` (and ``cumsum_``/``cumprod_``), ``cummax``, ``cummin``,
``logcumsumexp``.

:class:`TensorScans` is mixed into the tensor class.  Each runs one kernel over the
tensor viewed as (rows, length, cols) around its dim, as the reductions do
(:mod:`~kernbench.torch.reductions`): a program takes a block of lines and walks
them in steps of :func:`~kernbench.torch.device_kernels.reduction_blocks`, a step
scanned by ``tl.cumsum``/``tl.cumprod`` and carried into the next, so a scan reads
and writes its data once and costs about an elementwise pass.  Types as torch's:
integers and bools sum and multiply into int64 (wrapping as torch's do), floats in
float32 (float64 for float64) rounded to the tensor's dtype; ``dtype=`` converts
the input first.  Float products and running sums are accumulated blockwise, so the
last bits may differ from torch's sequential CPU loop.

``cummax``/``cummin`` run the same walk with ``tl.associative_scan`` over (value, index)
pairs, the step's scan combined with the running extreme carried from the step before
(loaded again by its index, so its bits are kept): about two combines an element, each
a few compares and selects.  Values and int64 indices as torch's CPU loop gives them:
a later element takes over when it is NaN or when the running value is not NaN and it
is ``>=`` (``<=`` for ``cummin``) the running one, so ties give the last index and a
NaN sticks, each later NaN taking over its index.

``logcumsumexp`` runs the same walk with ``tl.associative_scan`` of torch's
``_log_add_exp_helper`` (``max + log1p(exp(min - max))``, the first operand when both
are the same infinity, NaN when either is NaN), a step's scan combined with the value
carried from the step before: about two combines an element, each an ``exp`` and a
``log``.  Float16 accumulates in float32, float32 in float32 (torch's CPU loop carries
a double, so the last bits may differ), float64 in float64.
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import accumulator, launch_fill, reduction_blocks
from kernbench.torch.dtypes import DTYPE_OBJECTS, as_torch_dtype
from kernbench.torch.shapes import flag_argument

if TYPE_CHECKING:
    from kernbench.torch.dtypes import TorchDType
    from kernbench.torch.tensor import Tensor

__all__ = [
    "CummaxResult",
    "CumminResult",
    "TensorScans",
    "launch_extreme_scan",
    "launch_log_cumsum_exp",
    "launch_prod",
    "launch_scan",
]

ScanLines = namedtuple("ScanLines", ["n_lines", "length", "cols"])
CummaxResult = namedtuple("cummax", ["values", "indices"])  # torch.return_types.cummax
CumminResult = namedtuple("cummin", ["values", "indices"])  # torch.return_types.cummin


@jit
def _scan_kernel(
    x_ptr,
    out_ptr,
    n_lines,
    R,
    C,
    PROD: tl.constexpr,
    ACC: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Line o = (a, c): out[a, r, c] = x[a, 0, c] + ... + x[a, r, c] (or the product), a
    # step of RBLOCK scanned at once and its last running value carried to the next.
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_lines
    base = (o // C) * (R * C) + o % C
    last = (tl.arange(0, RBLOCK) == RBLOCK - 1)[None, :]
    carry = tl.full((OBLOCK,), 1 if PROD else 0, ACC)
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        offsets = base[:, None] + r[None, :] * C
        x = tl.load(x_ptr + offsets, mask=mask, other=1 if PROD else 0).to(ACC)
        if PROD:
            s = tl.cumprod(x, axis=1) * carry[:, None]
        else:
            s = tl.cumsum(x, axis=1) + carry[:, None]
        tl.store(out_ptr + offsets, s, mask=mask)
        carry = tl.sum(tl.where(last, s, 0), axis=1)  # masked-off lanes hold the identity


@jit
def _later_if_larger(v1, i1, v2, i2):
    # torch's cummax step: the later element when it is NaN, or when the running value is
    # not NaN and it is >= (so ties give the last index)
    take = (v2 != v2) | ((v1 == v1) & (v2 >= v1))
    return tl.where(take, v2, v1), tl.where(take, i2, i1)


@jit
def _later_if_smaller(v1, i1, v2, i2):
    take = (v2 != v2) | ((v1 == v1) & (v2 <= v1))
    return tl.where(take, v2, v1), tl.where(take, i2, i1)


@jit
def _extreme_scan_kernel(
    x_ptr,
    val_ptr,
    idx_ptr,
    n_lines,
    R,
    C,
    LARGEST: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Line o = (a, c): the running max (min) of x[a, :r + 1, c] and its index, a step of
    # RBLOCK scanned at once and combined with the extreme carried from the step before.
    combine = _later_if_larger if LARGEST else _later_if_smaller
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_lines
    base = (o // C) * (R * C) + o % C
    lanes = tl.arange(0, RBLOCK)
    last = (lanes == RBLOCK - 1)[None, :]
    carry = tl.zeros((OBLOCK,), tl.int64)  # the first step sets both before they are used
    carry_value = carry
    for start in range(0, R, RBLOCK):
        r = start + lanes
        mask = o_mask[:, None] & (r < R)[None, :]
        offsets = base[:, None] + r[None, :] * C
        x = tl.load(x_ptr + offsets, mask=mask, other=0)
        index = tl.broadcast_to(r[None, :], (OBLOCK, RBLOCK)).to(tl.int64)
        values, indices = tl.associative_scan((x, index), 1, combine)
        if start > 0:
            values, indices = combine(carry_value[:, None], carry[:, None], values, indices)
        tl.store(val_ptr + offsets, values, mask=mask)
        tl.store(idx_ptr + offsets, indices, mask=mask)
        if start + RBLOCK < R:  # the running extreme, by its index: its bits kept
            carry = tl.sum(tl.where(last, indices, 0), axis=1)
            carry_value = tl.load(x_ptr + base + carry * C, mask=o_mask, other=0)


@jit
def _log_add_exp(a, b):
    # torch's _log_add_exp_helper: max + log1p(exp(min - max)), Goldberg's log1p
    low = tl.minimum(a, b)
    high = tl.maximum(a, b)
    e = tl.exp(low - high)
    u = e + 1.0
    log1p = tl.where(u == 1.0, e, tl.log(u) * (e / tl.where(u == 1.0, 2.0, u - 1.0)))
    same_infinity = (low == high) & (low - low != 0)
    either_nan = (a != a) | (b != b)
    return tl.where(either_nan, a + b, tl.where(same_infinity, a, high + log1p))


@jit
def _log_cumsum_exp_kernel(
    x_ptr,
    out_ptr,
    n_lines,
    R,
    C,
    ACC: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Line o = (a, c): out[a, r, c] = log(exp(x[a, 0, c]) + ... + exp(x[a, r, c])), a step
    # of RBLOCK scanned at once and combined with the value carried from the step before.
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_lines
    base = (o // C) * (R * C) + o % C
    last = (tl.arange(0, RBLOCK) == RBLOCK - 1)[None, :]
    carry = tl.full((OBLOCK,), float("-inf"), ACC)
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        offsets = base[:, None] + r[None, :] * C
        x = tl.load(x_ptr + offsets, mask=mask, other=float("-inf")).to(ACC)
        s = tl.associative_scan(x, 1, _log_add_exp)
        if start > 0:
            s = _log_add_exp(carry[:, None], s)
        tl.store(out_ptr + offsets, s, mask=mask)
        # masked-off lanes add exp(-inf) = 0, so the last lane holds the running value
        carry = tl.sum(tl.where(last, s, 0), axis=1)


@jit
def _prod_kernel(
    x_ptr,
    out_ptr,
    n_out,
    R,
    C,
    ACC: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Output o = (a, c): the product of x[a, r, c] over r < R, lane by lane over the steps,
    # then across the lanes by a running product whose last lane is stored.
    o = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    o_mask = o < n_out
    base = (o // C) * (R * C) + o % C
    acc = tl.full((OBLOCK, RBLOCK), 1, ACC)
    for start in range(0, R, RBLOCK):
        r = start + tl.arange(0, RBLOCK)
        mask = o_mask[:, None] & (r < R)[None, :]
        acc = acc * tl.load(x_ptr + base[:, None] + r[None, :] * C, mask=mask, other=1).to(ACC)
    lanes = tl.arange(0, RBLOCK)
    total = tl.cumprod(acc, axis=1)
    at = o[:, None] + lanes[None, :] * 0
    tl.store(out_ptr + at, total, mask=o_mask[:, None] & (lanes == RBLOCK - 1)[None, :])


def launch_scan(x: DeviceTensor, out: DeviceTensor, lines: ScanLines, *, prod: bool) -> None:
    """``out`` = the running sum (or product) of ``x`` viewed as (rows, length, cols) along
    its middle axis; ``lines`` gives rows x cols, the length and cols."""
    n_lines, length, cols = lines
    oblock, rblock = reduction_blocks(n_lines, length)
    _scan_kernel[(-(-n_lines // oblock),)](
        x,
        out,
        n_lines,
        length,
        cols,
        PROD=prod,
        ACC=accumulator(out.dtype),
        OBLOCK=oblock,
        RBLOCK=rblock,
    )


def launch_prod(x: DeviceTensor, out: DeviceTensor, lines: ScanLines) -> None:
    """``out`` = the product of ``x`` viewed as (rows, length, cols) over its middle axis."""
    n_out, length, cols = lines
    oblock, rblock = reduction_blocks(n_out, length)
    _prod_kernel[(-(-n_out // oblock),)](
        x, out, n_out, length, cols, ACC=accumulator(out.dtype), OBLOCK=oblock, RBLOCK=rblock
    )


def launch_extreme_scan(
    x: DeviceTensor, values: DeviceTensor, indices: DeviceTensor, lines: ScanLines, *, largest: bool
) -> None:
    """``values``/``indices`` = the running max (``largest``) or min of ``x`` viewed as
    (rows, length, cols) along its middle axis, and where each was found (int64)."""
    n_lines, length, cols = lines
    oblock, rblock = reduction_blocks(n_lines, length)
    _extreme_scan_kernel[(-(-n_lines // oblock),)](
        x, values, indices, n_lines, length, cols, LARGEST=largest, OBLOCK=oblock, RBLOCK=rblock
    )


def launch_log_cumsum_exp(x: DeviceTensor, out: DeviceTensor, lines: ScanLines) -> None:
    """``out`` = the running log-sum-exp of ``x`` viewed as (rows, length, cols) along its
    middle axis."""
    n_lines, length, cols = lines
    oblock, rblock = reduction_blocks(n_lines, length)
    _log_cumsum_exp_kernel[(-(-n_lines // oblock),)](
        x, out, n_lines, length, cols, ACC=accumulator(out.dtype), OBLOCK=oblock, RBLOCK=rblock
    )


def _result_dtype(self: Tensor, dtype: Any) -> TorchDType:
    if dtype is not None:
        return as_torch_dtype(dtype)
    return self.dtype if self.dtype.is_floating_point else DTYPE_OBJECTS["int64"]


class TensorScans:
    """``prod``, ``cumsum`` and ``cumprod`` along a dim, on the device."""

    __slots__ = ()

    def prod(self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """The product over ``dim`` (all elements when None; 1 for none), integers and bools
        into int64, as torch."""
        keepdim = flag_argument(keepdim, "prod", "keepdim")
        if isinstance(dim, tuple | list):
            raise TensorError(
                f"prod(dim={dim!r}): torch.prod takes one dim (an int) or none; for several, "
                "call it once a dim"
            )
        rtype = _result_dtype(self, dtype)
        x = self if self.dtype is rtype else self.to(rtype)
        rows, length, cols, d = self._split(dim)
        out = x.new_empty(self._out_shape(d, keepdim))
        if rows * cols:
            if length == 0:
                launch_fill(out.device_tensor, 1)
            else:
                dense = x.dense()
                launch_prod(
                    dense.device_tensor, out.device_tensor, ScanLines(rows * cols, length, cols)
                )
                if dense is not x:
                    dense.free()
        if x is not self:
            x.free()
        return out

    def cumsum(self: Tensor, dim: Any = None, *, dtype: Any = None) -> Tensor:
        """Running sums along ``dim`` (integers and bools into int64, as torch)."""
        return self._scan("cumsum", dim, dtype, None)

    def cumprod(self: Tensor, dim: Any = None, *, dtype: Any = None) -> Tensor:
        """Running products along ``dim`` (integers and bools into int64, as torch)."""
        return self._scan("cumprod", dim, dtype, None)

    def cumsum_(self: Tensor, dim: Any = None, *, dtype: Any = None) -> Tensor:
        return self._scan("cumsum", dim, dtype, self)

    def cumprod_(self: Tensor, dim: Any = None, *, dtype: Any = None) -> Tensor:
        return self._scan("cumprod", dim, dtype, self)

    def cummax(self: Tensor, dim: Any) -> CummaxResult:
        """The running maximum along ``dim`` and the index of each (int64; ties give the
        last index, a NaN sticks), as ``torch.return_types.cummax``."""
        return CummaxResult(*self._extreme_scan("cummax", dim, largest=True))

    def cummin(self: Tensor, dim: Any) -> CumminResult:
        """The running minimum along ``dim`` and the index of each, as :meth:`cummax`."""
        return CumminResult(*self._extreme_scan("cummin", dim, largest=False))

    def logcumsumexp(self: Tensor, dim: Any) -> Tensor:
        """``log(cumsum(exp(self)))`` along ``dim``, without overflow (floats only)."""
        name = f"logcumsumexp() of {self.storage_device_tensor.name!r}"
        if not self.dtype.is_floating_point:
            raise TensorError(
                f'{name}: "logcumsumexp_out_cpu" not implemented for {self.dtype!r} (as '
                "torch); convert with .float() or .double() first"
            )
        if dim is None:
            raise TensorError(f"{name}: dim must be an int (torch needs it), got None")
        rows, length, cols, _ = self._split(dim)
        result = self.new_empty(self.shape)
        if result.numel():
            dense = self.dense()
            launch_log_cumsum_exp(
                dense.device_tensor, result.device_tensor, ScanLines(rows * cols, length, cols)
            )
            if dense is not self:
                dense.free()
        return result

    def _extreme_scan(self: Tensor, what: str, dim: Any, *, largest: bool) -> tuple[Any, Any]:
        if dim is None:
            raise TensorError(
                f"{what}() of {self.storage_device_tensor.name!r}: missing the dim (as torch "
                f"needs it); give {what}(dim=...)"
            )
        rows, length, cols, _ = self._split(dim)
        values = self.new_empty(self.shape)
        indices = self.new_empty(self.shape, dtype=DTYPE_OBJECTS["int64"])
        if values.numel():
            dense = self.dense()
            launch_extreme_scan(
                dense.device_tensor,
                values.device_tensor,
                indices.device_tensor,
                ScanLines(rows * cols, length, cols),
                largest=largest,
            )
            if dense is not self:
                dense.free()
        return values, indices

    def _scan(self: Tensor, what: str, dim: Any, dtype: Any, out: Tensor | None) -> Tensor:
        name = what + ("_" if out is not None else "")
        if dim is None:
            raise TensorError(
                f"{name}() of {self.storage_device_tensor.name!r}: missing the dim (as torch "
                f"needs it); give {name}(dim=...), or flatten first for all elements"
            )
        if out is not None:
            rtype = as_torch_dtype(dtype) if dtype is not None else self.dtype
        else:
            rtype = _result_dtype(self, dtype)
        x = self if self.dtype is rtype else self.to(rtype)
        rows, length, cols, _ = self._split(dim)
        result = x.new_empty(x.shape)
        if result.numel():
            dense = x.dense()
            launch_scan(
                dense.device_tensor,
                result.device_tensor,
                ScanLines(rows * cols, length, cols),
                prod=what == "cumprod",
            )
            if dense is not x:
                dense.free()
        if x is not self:
            x.free()
        if out is None:
            return result
        out.copy_(result)
        result.free()
        return out
