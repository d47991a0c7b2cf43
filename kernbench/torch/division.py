"""Floor division and remainders of :class:`~kernbench.torch.Tensor`: ``floor_divide``
(``//``), ``remainder`` (``%``, the sign of the divisor, as Python's) and ``fmod`` (the
sign of the dividend, as C's), with their in-place forms.

:class:`TensorDivision` is mixed into the tensor class.  Operands broadcast and
promote as torch's (:func:`~kernbench.torch.arithmetic.pair_dtype`, a scalar by
:func:`~kernbench.torch.dtypes.scalar_result_dtype`); each op is one pass of an
elementwise kernel over the operands made dense (a broadcast or strided operand is
copied first, costed).  The float forms follow torch's kernels step by step
(``floor_divide``: ``(a - fmod(a, b)) / b`` corrected to the floor, so it is exact
where ``floor(a / b)`` is not).  Integer division by zero raises
:class:`~kernbench.errors.TensorZeroDivisionError`, as torch's "ZeroDivisionError": for
a tensor divisor its zeros are looked up host-side at no simulated cost (torch's
CUDA kernel spends no time on it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError, TensorZeroDivisionError
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.arithmetic import check_pair, dense_as, pair_dtype, written
from kernbench.torch.device_kernels import BLOCK, elementwise_grid, elementwise_operand
from kernbench.torch.dtypes import BOOL, check_scalar_fits, python_scalar, scalar_result_dtype

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["DIVISION_OPS", "TensorDivision", "launch_division"]

DIVISION_OPS = ("floor_divide", "trunc_divide", "remainder", "fmod")
_LABELS = {"trunc_divide": "div(rounding_mode='trunc')"}


@jit
def _division(x, y, OP: tl.constexpr, FLOAT: tl.constexpr, SIGNED: tl.constexpr):
    if FLOAT:
        if OP == "trunc_divide":
            q = x / y
            return tl.where(q < 0, tl.ceil(q), tl.floor(q))
        mod = x % y  # fmod
        if OP == "fmod":
            return mod
        if OP == "remainder":
            return tl.where((mod != 0) & ((y < 0) != (mod < 0)), mod + y, mod)
        div = (x - mod) / y
        div = tl.where((mod != 0) & ((y < 0) != (mod < 0)), div - 1.0, div)
        low = tl.floor(div)
        low = tl.where(div - low > 0.5, low + 1.0, low)
        quotient = x / y
        signed_zero = tl.where(quotient < 0, -0.0, 0.0)
        result = tl.where(div != 0, low, signed_zero)
        return tl.where(y == 0, quotient, result)
    safe = tl.where(y == 0, 1, y)  # zero divisors were refused before the launch
    q = x // safe  # truncated, as C's
    r = x % safe
    if OP == "trunc_divide":
        return q
    if OP == "fmod":
        return r
    if not SIGNED:
        return q if OP == "floor_divide" else r
    wrong = (r != 0) & ((r < 0) != (safe < 0))
    if OP == "floor_divide":
        return tl.where(wrong, q - 1, q)
    return tl.where(wrong, r + safe, r)


@jit(do_not_specialize=["x_value", "y_value"])
def _division_kernel(
    x_ptr,
    y_ptr,
    out_ptr,
    n,
    x_value,
    y_value,
    X_TENSOR: tl.constexpr,
    Y_TENSOR: tl.constexpr,
    OP: tl.constexpr,
    FLOAT: tl.constexpr,
    SIGNED: tl.constexpr,
    CT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Both operands in CT (float32 for float16/bfloat16, as torch's opmath; else the
    # result's dtype); a scalar operand is a kernel argument.
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = elementwise_operand(x_ptr, x_value, i, mask, X_TENSOR, CT)
    y = elementwise_operand(y_ptr, y_value, i, mask, Y_TENSOR, CT)
    tl.store(out_ptr + i, _division(x, y, OP, FLOAT, SIGNED), mask=mask)


def _compute_type(dtype: Any) -> Any:
    name = dtype.name
    if name in ("float16", "bfloat16"):
        return tl.float32
    return getattr(tl, name)


def launch_division(
    op: str, x: DeviceTensor | int | float, y: DeviceTensor | int | float, out: DeviceTensor
) -> None:
    """``out = op(x, y)`` elementwise (``op`` in :data:`DIVISION_OPS`); ``x`` and ``y`` are
    dense tensors of ``out``'s dtype and size, or numbers."""
    n = out.numel
    x_tensor, y_tensor = isinstance(x, DeviceTensor), isinstance(y, DeviceTensor)
    _division_kernel[elementwise_grid(n, op)](
        x if x_tensor else out,
        y if y_tensor else out,
        out,
        n,
        0 if x_tensor else typed_scalar(x, out.dtype),
        0 if y_tensor else typed_scalar(y, out.dtype),
        X_TENSOR=x_tensor,
        Y_TENSOR=y_tensor,
        OP=op,
        FLOAT=out.dtype.is_floating_point,
        SIGNED=out.dtype.is_floating_point or out.dtype.name.startswith("int"),
        CT=_compute_type(out.dtype),
        BLOCK=BLOCK,
    )


def _zero_division(what: str) -> TensorZeroDivisionError:
    return TensorZeroDivisionError(
        f"ZeroDivisionError: {what}: integer division by zero (as torch raises); divide by "
        "a nonzero divisor, or convert to float first (x.float() gives inf and nan)"
    )


class TensorDivision:
    """``floor_divide``/``//``, ``remainder``/``%`` and ``fmod``, with in-place forms."""

    __slots__ = ()

    def floor_divide(self: Tensor, other: Any) -> Tensor:
        """``floor(self / other)`` elementwise, as torch (and Python's ``//``)."""
        return self._divide("floor_divide", other)

    def floor_divide_(self: Tensor, other: Any) -> Tensor:
        return self._divide("floor_divide", other, out=self)

    def remainder(self: Tensor, other: Any) -> Tensor:
        """``self - floor_divide(self, other) * other``: the sign of ``other`` (Python's ``%``)."""
        return self._divide("remainder", other)

    def remainder_(self: Tensor, other: Any) -> Tensor:
        return self._divide("remainder", other, out=self)

    def fmod(self: Tensor, other: Any) -> Tensor:
        """C's remainder: the sign of ``self`` (truncated division)."""
        return self._divide("fmod", other)

    def fmod_(self: Tensor, other: Any) -> Tensor:
        return self._divide("fmod", other, out=self)

    def __floordiv__(self: Tensor, other: Any) -> Tensor:
        return self._divide("floor_divide", other)

    def __rfloordiv__(self: Tensor, other: Any) -> Tensor:
        return self._divide("floor_divide", other, reflected=True)

    def __ifloordiv__(self: Tensor, other: Any) -> Tensor:
        return self._divide("floor_divide", other, out=self)

    def __mod__(self: Tensor, other: Any) -> Tensor:
        return self._divide("remainder", other)

    def __rmod__(self: Tensor, other: Any) -> Tensor:
        return self._divide("remainder", other, reflected=True)

    def __imod__(self: Tensor, other: Any) -> Tensor:
        return self._divide("remainder", other, out=self)

    def rounded_division(
        self: Tensor, other: Any, rounding_mode: Any, out: Tensor | None = None
    ) -> Tensor:
        """``div(other, rounding_mode=...)``: "floor" is :meth:`floor_divide`, "trunc" the
        quotient rounded toward zero (C's integer division)."""
        if rounding_mode == "floor":
            return self._divide("floor_divide", other, out=out)
        if rounding_mode == "trunc":
            return self._divide("trunc_divide", other, out=out)
        raise TensorError(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
            f"{rounding_mode!r} (as torch)"
        )

    def _divide(
        self: Tensor, op: str, other: Any, out: Tensor | None = None, reflected: bool = False
    ) -> Tensor:
        label = _LABELS.get(op, op)
        in_place = "_" if out is not None and op not in _LABELS else ""
        what = f"{label}{in_place} of {self.storage_device_tensor.name!r}"
        is_tensor = isinstance(other, TensorDivision)
        if is_tensor:
            shape = check_pair(self, other, what, in_place=out is not None)
            rtype = pair_dtype(self, other)
            value = None
        else:
            value = python_scalar(other)
            if value is None:
                raise TensorError(
                    f"{what}: operand {type(other).__name__} is not supported; use a Tensor "
                    "(broadcastable) or a Python scalar"
                )
            shape = tuple(self.shape)
            rtype = scalar_result_dtype(self.dtype, other)
            check_scalar_fits(value, rtype, what)
        if rtype is BOOL:
            raise TensorError(
                f"{what}: not implemented for 'Bool' (as in torch); convert with .int() first"
            )
        if out is not None and rtype.is_floating_point and not out.dtype.is_floating_point:
            raise TensorError(
                f"{what}: result type {rtype!r} can't be cast to the in-place output type "
                f"{out.dtype!r} (as in torch); use the out-of-place form"
            )
        if not rtype.is_floating_point:
            divisor = self if reflected else other
            if not isinstance(divisor, TensorDivision):
                if value == 0:
                    raise _zero_division(what)
            elif divisor.numel() and _has_zero(divisor):
                raise _zero_division(what)
        temps: list[Tensor] = []
        x, made = dense_as(self, shape, rtype)
        temps += made
        y: Any = value
        if is_tensor:
            y_tensor, made = dense_as(other, shape, rtype)
            temps += made
            y = y_tensor.device_tensor
        direct = out is not None and out.dtype is rtype and out.contiguous_device_tensor()
        target = out if direct else self.new_empty(shape, dtype=rtype)
        if target.numel():
            left, right = (y, x.device_tensor) if reflected else (x.device_tensor, y)
            launch_division(op, left, right, target.device_tensor)
        return written(out, target, temps)


def _has_zero(divisor: Tensor) -> bool:
    """Whether an integer tensor holds a zero, looked up in memory without the machine
    (``peek``: no simulated time, as torch's CUDA kernel spends none on it); timing-only
    runs carry no values and are not checked."""
    if divisor.storage_device_tensor.context.timing_only:
        return False
    return bool((divisor.peek() == 0).any())
