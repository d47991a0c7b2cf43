"""Comparisons, logic and masks of :class:`~kernbench.torch.Tensor`, with bool results.

:class:`TensorLogic` is mixed into the tensor class.  ``== != < <= > >=``
(and ``eq``/``ne``/... with torch's aliases), ``logical_*``, ``& | ^ ~``,
``isnan``/``isinf``/``isfinite``, ``where``, ``masked_fill`` and
``any``/``all`` run device kernels (:mod:`~kernbench.torch.logic_kernels`)
and cost simulated time like the other elementwise operations and
reductions.  Operands broadcast and promote as in PyTorch: a comparison
takes both operands in their common dtype (a Python scalar in the tensor's
dtype unless it is of a higher category), ``& | ^ ~`` are logical on bool
tensors and bitwise on integer ones.  ``t == None`` is False and
``t != None`` True, as in torch; tensors hash by identity.  ``nonzero``,
the one-argument ``torch.where`` and ``masked_select`` read the mask to the
host, as torch waits for the count, and copy the indices back in (``int64``,
as torch).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError, TensorTypeError
from kernbench.torch.arithmetic import (
    check_pair,
    dense_as,
    free_temporaries,
    pair_dtype,
    read_in_place,
    written,
)
from kernbench.torch.broadcast_kernels import launch_broadcast
from kernbench.torch.dtypes import (
    BOOL,
    DTYPE_OBJECTS,
    category,
    check_scalar_fits,
    python_scalar,
    scalar_dtype,
    scalar_result_dtype,
)
from kernbench.torch.logic_kernels import (
    launch_any_all,
    launch_test,
    launch_test_scalar,
    launch_unary_test,
    launch_where,
)
from kernbench.torch.shapes import dim_index, flag_argument
from kernbench.torch.views import broadcast_shapes, check_no_partial_overlap, same_device

if TYPE_CHECKING:
    from kernbench.torch.dtypes import TorchDType
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorLogic", "isclose", "where"]

_BITWISE = {"band": "bitwise_and", "bor": "bitwise_or", "bxor": "bitwise_xor"}
_SYMBOL = {"band": "&", "bor": "|", "bxor": "^"}


def _is_tensor(value: Any) -> bool:
    return isinstance(value, TensorLogic)


def _comparable(value: Any) -> bool:
    return _is_tensor(value) or python_scalar(value) is not None


def _scalar_operand(what: str, other: Any) -> int | float:
    value = python_scalar(other)
    if value is None:
        raise TensorError(
            f"{what}: operand {type(other).__name__} is not supported; use a Tensor "
            "(broadcastable) or a Python scalar (torch.from_numpy converts arrays)"
        )
    return value


def _in_dtype(value: int | float, dt: TorchDType, what: str) -> int | float:
    """A scalar as a ``dt`` element holds it (bool: 0 or 1; an integer: truncated)."""
    if dt.is_floating_point:
        return float(value)
    if dt is BOOL:
        return int(bool(value))
    if not math.isfinite(value):
        raise TensorError(f"{what}: {value} cannot be converted to {dt!r}")
    check_scalar_fits(int(value), dt, what)
    return int(value)


class TensorLogic:
    """Comparisons, logical and bitwise operators, masks and ``any``/``all``."""

    __slots__ = ()

    # -- comparisons ----------------------------------------------------------------------
    # An operand that is neither a tensor nor a number: == and != answer by identity
    # (False for None), the orderings raise a TypeError, as torch's operators do.
    def __eq__(self: Tensor, other: object) -> Any:
        return self._compare("eq", other) if _comparable(other) else NotImplemented

    def __ne__(self: Tensor, other: object) -> Any:
        return self._compare("ne", other) if _comparable(other) else NotImplemented

    def __lt__(self: Tensor, other: Any) -> Tensor:
        return self._ordered("lt", "<", other)

    def __le__(self: Tensor, other: Any) -> Tensor:
        return self._ordered("le", "<=", other)

    def __gt__(self: Tensor, other: Any) -> Tensor:
        return self._ordered("gt", ">", other)

    def __ge__(self: Tensor, other: Any) -> Tensor:
        return self._ordered("ge", ">=", other)

    def _ordered(self: Tensor, op: str, symbol: str, other: Any) -> Tensor:
        if not _comparable(other):
            raise TensorTypeError(
                f"'{symbol}' not supported between instances of 'Tensor' and "
                f"'{type(other).__name__}' (as in torch); compare with a Tensor or a number"
            )
        return self._compare(op, other)

    __hash__ = object.__hash__  # by identity, as torch.Tensor is

    def eq(self: Tensor, other: Any) -> Tensor:
        """Elementwise ``self == other`` as a bool tensor (a device kernel)."""
        return self._compare("eq", other)

    def ne(self: Tensor, other: Any) -> Tensor:
        return self._compare("ne", other)

    def lt(self: Tensor, other: Any) -> Tensor:
        return self._compare("lt", other)

    def le(self: Tensor, other: Any) -> Tensor:
        return self._compare("le", other)

    def gt(self: Tensor, other: Any) -> Tensor:
        return self._compare("gt", other)

    def ge(self: Tensor, other: Any) -> Tensor:
        return self._compare("ge", other)

    not_equal, less, less_equal, greater, greater_equal = ne, lt, le, gt, ge

    # In place, as torch: the comparison in the operands' common dtype, its 1 or 0 written
    # into this tensor in its own dtype; ``other`` broadcasts to this shape, not beyond.
    def eq_(self: Tensor, other: Any) -> Tensor:
        """``self == other`` written into this tensor (1 or 0 in its dtype); returns it."""
        return self._compare("eq", other, out=self)

    def ne_(self: Tensor, other: Any) -> Tensor:
        return self._compare("ne", other, out=self)

    def lt_(self: Tensor, other: Any) -> Tensor:
        return self._compare("lt", other, out=self)

    def le_(self: Tensor, other: Any) -> Tensor:
        return self._compare("le", other, out=self)

    def gt_(self: Tensor, other: Any) -> Tensor:
        return self._compare("gt", other, out=self)

    def ge_(self: Tensor, other: Any) -> Tensor:
        return self._compare("ge", other, out=self)

    not_equal_, less_, less_equal_, greater_, greater_equal_ = ne_, lt_, le_, gt_, ge_

    def _compare(self: Tensor, op: str, other: Any, out: Tensor | None = None) -> Tensor:
        """``self op other`` in the operands' common dtype, as a bool tensor (or written
        into ``out``, this tensor, in its dtype: the kernel's store converts)."""
        what = f"{op}{'_' if out is not None else ''} of {self.storage_device_tensor.name!r}"
        if _is_tensor(other):
            shape = check_pair(self, other, what, in_place=out is not None)
            common = pair_dtype(self, other)
            if out is not None:
                check_no_partial_overlap(out, other, what)
        else:
            value = _scalar_operand(what, other)
            shape, common = tuple(self.shape), scalar_result_dtype(self.dtype, other)
            check_scalar_fits(value, common, what)
        if _is_tensor(other) and (
            read := read_in_place(shape, [(self, common), (other, common)], out)
        ):
            target = _target(self, out, shape, BOOL)
            launch_broadcast("test", op, target.device_tensor, shape, read[0])
            return written(out, target, read[1])
        x, temps = dense_as(self, shape, common)
        target = _target(self, out, shape, BOOL)
        if _is_tensor(other):
            y, more = dense_as(other, shape, common)
            temps += more
            launch_test(op, x.device_tensor, y.device_tensor, target.device_tensor)
        else:
            launch_test_scalar(op, x.device_tensor, value, target.device_tensor)
        return written(out, target, temps)

    # -- logical and bitwise ---------------------------------------------------------------
    def logical_and(self: Tensor, other: Tensor) -> Tensor:
        """Elementwise: both nonzero, as a bool tensor (operands of any dtypes)."""
        return self._logical("and", other)

    def logical_or(self: Tensor, other: Tensor) -> Tensor:
        return self._logical("or", other)

    def logical_xor(self: Tensor, other: Tensor) -> Tensor:
        return self._logical("xor", other)

    def logical_not(self: Tensor) -> Tensor:
        """Elementwise: zero, as a bool tensor."""
        return self._unary_test("not")

    def logical_and_(self: Tensor, other: Tensor) -> Tensor:
        """Both nonzero, written into this tensor (1 or 0 in its dtype); returns it."""
        return self._logical("and", other, out=self)

    def logical_or_(self: Tensor, other: Tensor) -> Tensor:
        return self._logical("or", other, out=self)

    def logical_xor_(self: Tensor, other: Tensor) -> Tensor:
        return self._logical("xor", other, out=self)

    def logical_not_(self: Tensor) -> Tensor:
        """Zero, written into this tensor (1 or 0 in its dtype); returns it."""
        return self._unary_test("not", out=self)

    def _logical(self: Tensor, op: str, other: Any, out: Tensor | None = None) -> Tensor:
        what = (
            f"logical_{op}{'_' if out is not None else ''} of {self.storage_device_tensor.name!r}"
        )
        if not _is_tensor(other):
            raise TensorError(f"{what}: other must be a Tensor, got {type(other).__name__}")
        shape = check_pair(self, other, what, in_place=out is not None)
        if out is not None:
            check_no_partial_overlap(out, other, what)
        if read := read_in_place(shape, [(self, None), (other, None)], out):
            target = _target(self, out, shape, BOOL)
            launch_broadcast("test", op, target.device_tensor, shape, read[0])
            return written(out, target, read[1])
        x, temps = dense_as(self, shape)
        y, more = dense_as(other, shape)
        target = _target(self, out, shape, BOOL)
        launch_test(op, x.device_tensor, y.device_tensor, target.device_tensor)
        return written(out, target, [*temps, *more])

    def bitwise_and(self: Tensor, other: Any) -> Tensor:
        """``self & other``: logical on bool tensors, bitwise on integer ones."""
        return self._bitwise("band", other)

    def bitwise_or(self: Tensor, other: Any) -> Tensor:
        return self._bitwise("bor", other)

    def bitwise_xor(self: Tensor, other: Any) -> Tensor:
        return self._bitwise("bxor", other)

    def bitwise_not(self: Tensor) -> Tensor:
        """``~self``: logical not of a bool tensor, the bits inverted of an integer one."""
        _check_bitwise("bitwise_not", self.dtype)
        return self._unary_test("not" if self.dtype is BOOL else "invert", self.dtype)

    def bitwise_and_(self: Tensor, other: Any) -> Tensor:
        """``self &= other``: the result written into this tensor; returns it."""
        return self._bitwise("band", other, out=self)

    def bitwise_or_(self: Tensor, other: Any) -> Tensor:
        return self._bitwise("bor", other, out=self)

    def bitwise_xor_(self: Tensor, other: Any) -> Tensor:
        return self._bitwise("bxor", other, out=self)

    def bitwise_not_(self: Tensor) -> Tensor:
        """``~self`` written into this tensor; returns it."""
        _check_bitwise("bitwise_not_", self.dtype)
        return self._unary_test("not" if self.dtype is BOOL else "invert", self.dtype, self)

    def __and__(self: Tensor, other: Any) -> Tensor:
        return self._bitwise("band", other)

    def __or__(self: Tensor, other: Any) -> Tensor:
        return self._bitwise("bor", other)

    def __xor__(self: Tensor, other: Any) -> Tensor:
        return self._bitwise("bxor", other)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    __iand__, __ior__, __ixor__ = bitwise_and_, bitwise_or_, bitwise_xor_

    def __invert__(self: Tensor) -> Tensor:
        return self.bitwise_not()

    def _bitwise(self: Tensor, op: str, other: Any, out: Tensor | None = None) -> Tensor:
        name = _BITWISE[op] + ("_" if out is not None else "")
        what = f"{name} of {self.storage_device_tensor.name!r}"
        if _is_tensor(other):
            shape = check_pair(self, other, what, in_place=out is not None)
            rtype = pair_dtype(self, other)
            _check_bitwise(name, other.dtype)
            if out is not None:
                check_no_partial_overlap(out, other, what)
        else:
            value = _scalar_operand(what, other)
            shape, rtype = tuple(self.shape), scalar_result_dtype(self.dtype, other)
            _check_bitwise(name, scalar_dtype(other))
            check_scalar_fits(value, rtype, what)
        _check_bitwise(name, self.dtype)
        if out is not None and category(rtype) > category(out.dtype):
            raise TensorError(
                f"{what}: result type {rtype!r} can't be cast to the desired output type "
                f"{out.dtype!r} (as in torch); use an out-of-place op "
                f"(a = a {_SYMBOL[op]} b)"
            )
        # In place into another dtype the result goes through one of its own (a copy after).
        into = None if out is None or out.dtype is not rtype else out
        if _is_tensor(other) and (
            read := read_in_place(shape, [(self, rtype), (other, rtype)], out)
        ):
            target = _target(self, into, shape, rtype)
            launch_broadcast("test", op, target.device_tensor, shape, read[0])
            return written(out, target, read[1])
        x, temps = dense_as(self, shape, rtype)
        target = _target(self, into, shape, rtype)
        if _is_tensor(other):
            y, more = dense_as(other, shape, rtype)
            temps += more
            launch_test(op, x.device_tensor, y.device_tensor, target.device_tensor)
        else:
            launch_test_scalar(op, x.device_tensor, value, target.device_tensor)
        return written(out, target, temps)

    # -- tests of each element -------------------------------------------------------------
    def isnan(self: Tensor) -> Tensor:
        """Elementwise: NaN, as a bool tensor (False everywhere for integers)."""
        return self._unary_test("isnan")

    def isinf(self: Tensor) -> Tensor:
        return self._unary_test("isinf")

    def isfinite(self: Tensor) -> Tensor:
        return self._unary_test("isfinite")

    def _unary_test(
        self: Tensor, op: str, rtype: TorchDType = BOOL, out: Tensor | None = None
    ) -> Tensor:
        x = self.dense()
        target = _target(self, out, tuple(self.shape), rtype)
        launch_unary_test(op, x.device_tensor, target.device_tensor)
        return written(out, target, [] if x is self else [x])

    def isclose(
        self: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
    ) -> Tensor:
        """Elementwise ``|self - other| <= atol + rtol * |other|`` (or equal), as a bool tensor,
        as ``torch.isclose``: both tensors of one dtype, broadcast; integers compared in
        float32; NaN close to NaN only with ``equal_nan``; infinities close only to
        themselves."""
        what = "isclose()"
        if not _is_tensor(other):
            raise TensorTypeError(
                f"{what}: argument 'other' must be Tensor, not {type(other).__name__} (as in "
                "torch); torch.tensor(value) makes one"
            )
        if self.dtype is not other.dtype:
            raise TensorError(
                f"{what}: expected both inputs to be of the same dtype, got {self.dtype!r} and "
                f"{other.dtype!r} (as in torch); convert one with .to(other.dtype)"
            )
        for name, value in (("rtol", rtol), ("atol", atol)):
            number = python_scalar(value)
            if number is None or number < 0:
                raise TensorError(
                    f"{what}: {name} must be greater than or equal to zero, but got {value!r}"
                )
        close = self.eq(other)
        if self.dtype is BOOL or (rtol == 0 and atol == 0):
            return close
        a, b = (self, other) if self.dtype.is_floating_point else (self.float(), other.float())
        temps = [a, b] if a is not self else []
        difference = a - b
        error = difference.abs()
        magnitude = b.abs()
        scaled = magnitude * rtol
        allowed = scaled + atol
        below, finite = error.le(allowed), error.isfinite()
        within = below & finite
        temps += [difference, error, magnitude, scaled, allowed, below, finite, within]
        close |= within
        if equal_nan and self.dtype.is_floating_point:
            mine, theirs = self.isnan(), other.isnan()
            nans = mine & theirs
            close |= nans
            temps += [mine, theirs, nans]
        free_temporaries(*temps)
        return close

    # -- where and masked_fill -------------------------------------------------------------
    def where(self: Tensor, condition: Tensor, other: Any) -> Tensor:
        """``torch.where(condition, self, other)``."""
        return where(condition, self, other)

    def masked_fill(self: Tensor, mask: Tensor, value: Any) -> Tensor:
        """A copy with ``value`` where the bool ``mask`` (broadcast) is True."""
        return self._masked_fill(mask, value, None)

    def masked_fill_(self: Tensor, mask: Tensor, value: Any) -> Tensor:
        """``value`` written where the bool ``mask`` (broadcast to this shape) is True."""
        return self._masked_fill(mask, value, self)

    def _masked_fill(self: Tensor, mask: Any, value: Any, out: Tensor | None) -> Tensor:
        what = "masked_fill_" if out is not None else "masked_fill"
        if not _is_tensor(mask):
            raise TensorError(f"{what}: mask must be a Tensor, got {type(mask).__name__}")
        if mask.dtype is not BOOL:
            raise TensorError(
                f"{what} only supports boolean masks, but got mask with dtype {mask.dtype!r} "
                "(as in torch); make one with a comparison or .bool()"
            )
        if _is_tensor(value):
            if value.ndim:
                raise TensorError(
                    f"{what} only supports a 0-dimensional value tensor, but got tensor with "
                    f"{value.ndim} dimension(s) (as in torch); use torch.where(mask, value, t)"
                )
            value = value.item()
        fill = _in_dtype(_scalar_operand(what, value), self.dtype, what)
        shape = check_pair(self, mask, what, in_place=out is not None)
        if read := read_in_place(shape, [(mask, None), (fill, None), (self, None)], out):
            target = _target(self, out, shape, self.dtype)
            launch_broadcast("where", "where", target.device_tensor, shape, read[0])
            return written(out, target, read[1])
        x, temps = dense_as(self, shape)
        m, more = dense_as(mask, shape)
        target = _target(self, out, shape, self.dtype)
        launch_where(m.device_tensor, fill, x.device_tensor, target.device_tensor)
        return written(out, target, [*temps, *more])

    def masked_select(self: Tensor, mask: Tensor) -> Tensor:
        """The elements where the bool ``mask`` is True (both broadcast), as a 1-D copy:
        ``self[mask]``."""
        if not _is_tensor(mask) or mask.dtype is not BOOL:
            given = mask.dtype if _is_tensor(mask) else type(mask).__name__
            raise TensorError(
                f"masked_select: expected BoolTensor for mask (as torch), got {given!r}; make "
                "one with a comparison or .bool()"
            )
        shape = check_pair(self, mask, "masked_select", in_place=False)
        return self.expand(shape)[mask.expand(shape)]

    # -- any and all -----------------------------------------------------------------------
    def any(self: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Whether any element (along ``dim``: int, tuple or None for all) is nonzero, as a
        bool tensor (uint8 for a uint8 input, as torch), by a reduction kernel."""
        return self._any_all(dim, keepdim, is_all=False)

    def all(self: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
        """Whether every element (along ``dim``) is nonzero; True for none, as torch."""
        return self._any_all(dim, keepdim, is_all=True)

    def _any_all(self: Tensor, dim: Any, keepdim: bool, *, is_all: bool) -> Tensor:
        keepdim = flag_argument(keepdim, "all" if is_all else "any", "keepdim")
        if isinstance(dim, tuple | list):
            if len(dim) != 1:
                return self._any_all_dims(dim, keepdim, is_all)
            dim = dim[0]
        rows, length, cols, d = self._split(dim)
        rtype = DTYPE_OBJECTS["uint8"] if self.dtype.name == "uint8" else BOOL
        out = self.new_empty(self._out_shape(d, keepdim), dtype=rtype)
        if rows * cols:
            x = self.dense()
            launch_any_all(
                x.device_tensor, out.device_tensor, rows * cols, length, cols, is_all=is_all
            )
            if x is not self:
                x.free()
        return out

    def _any_all_dims(self: Tensor, dims: Any, keepdim: bool, is_all: bool) -> Tensor:
        """Several dims (none: all), one after another from the last."""
        named = sorted({dim_index(d, self.ndim) for d in dims}, reverse=True)
        if len(named) < len(dims):
            raise TensorError(f"dim appears multiple times in the list of dims {tuple(dims)}")
        if not named:
            return self._any_all(None, keepdim, is_all=is_all)
        result = self
        for d in named:
            step = result._any_all(d, True, is_all=is_all)
            if result is not self:
                result.free()
            result = step
        return result if keepdim else result.squeeze(tuple(named))

    # -- indices of nonzero elements (read on the host) ----------------------------------------
    def nonzero(self: Tensor, *, as_tuple: bool = False) -> Any:
        """The indices of the nonzero elements, (count, ndim) ``int64``, or one 1-D tensor
        per dim with ``as_tuple``; the values are read to the host (the count decides the
        shape), the indices copied back in."""
        found = np.argwhere(self.numpy(force=True)).astype(np.int64)
        if not as_tuple:
            return self.new_empty(found.shape, dtype=DTYPE_OBJECTS["int64"]).copy_(found)
        if not self.ndim:
            found = np.zeros((len(found), 1), np.int64)
        return tuple(
            self.new_empty((len(found),), dtype=DTYPE_OBJECTS["int64"]).copy_(column)
            for column in found.T
        )


def _target(like: Tensor, out: Tensor | None, shape: tuple[int, ...], dtype: TorchDType) -> Tensor:
    """Where a kernel writes: ``out`` itself when it is one run of memory, else a new
    tensor (of ``dtype``, or of ``out``'s) that :func:`_written` copies into ``out``."""
    if out is not None and out.contiguous_device_tensor():
        return out
    return like.new_empty(shape, dtype=dtype if out is None else out.dtype)


def _check_bitwise(name: str, dt: TorchDType) -> None:
    if dt.is_floating_point:
        raise TensorError(
            f"{name}: not implemented for {dt!r} (as in torch); & | ^ ~ take bool and integer "
            "tensors (logical_and/or/xor/not take any)"
        )


def where(condition: Any, input: Any = None, other: Any = None) -> Any:  # noqa: A002
    """``torch.where``: ``input`` where the bool ``condition`` is True, else ``other``
    (tensors or scalars, all broadcast, promoted as torch's ``result_type``); with the
    condition alone, ``condition.nonzero(as_tuple=True)``."""
    if not _is_tensor(condition):
        raise TensorError(
            f"torch.where: condition must be a Tensor, got {type(condition).__name__}"
        )
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    if condition.dtype is not BOOL:
        raise TensorError(
            "torch.where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{condition.dtype!r} (as in torch); compare it (t != 0) or call .bool()"
        )
    what = "torch.where"
    tensors = [t for t in (input, other) if _is_tensor(t)]
    same_device(what, condition, *tensors)
    for value in (input, other):
        if not _is_tensor(value):
            _scalar_operand(what, value)
    if len(tensors) == 2:
        rtype = pair_dtype(input, other)
    elif tensors:
        scalar = other if tensors[0] is input else input
        rtype = scalar_result_dtype(tensors[0].dtype, scalar)
    else:
        kinds = (scalar_dtype(input), scalar_dtype(other))
        rtype = max(kinds, key=category)
    shape = tuple(condition.shape)
    for t in tensors:
        shape = broadcast_shapes(shape, tuple(t.shape), what)
    values = [
        v if _is_tensor(v) else _in_dtype(python_scalar(v), rtype, what) for v in (input, other)
    ]
    if read := read_in_place(shape, [(condition, None), *((v, rtype) for v in values)]):
        out = condition.new_empty(shape, dtype=rtype)
        launch_broadcast("where", "where", out.device_tensor, shape, read[0])
        free_temporaries(*read[1])
        return out
    cond, temps = dense_as(condition, shape)
    operands = []
    for value in (input, other):
        if _is_tensor(value):
            dense, more = dense_as(value, shape, rtype)
            temps += more
            operands.append(dense.device_tensor)
        else:
            operands.append(_in_dtype(python_scalar(value), rtype, what))
    out = condition.new_empty(shape, dtype=rtype)
    launch_where(cond.device_tensor, operands[0], operands[1], out.device_tensor)
    free_temporaries(*temps)
    return out


def isclose(
    input: Any,  # noqa: A002 - torch's name
    other: Any,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    equal_nan: bool = False,
) -> Tensor:
    """``torch.isclose``: :meth:`TensorLogic.isclose` of ``input``."""
    if not _is_tensor(input):
        raise TensorTypeError(
            f"isclose(): argument 'input' must be Tensor, not {type(input).__name__}"
        )
    return input.isclose(other, rtol, atol, equal_nan)
