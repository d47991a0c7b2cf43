"""Math of :class:`~kernbench.torch.Tensor`: ``abs``/``exp``/``sigmoid``/..., ``clamp``,
``softmax``/``log_softmax``, ``@``.

:class:`TensorPointwise` is mixed into the tensor class.  The unary functions
and ``matmul`` run device kernels (:mod:`~kernbench.torch.math_kernels`);
``softmax`` and ``log_softmax`` are one kernel each (max, sum of
exponentials, write), as torch's.  ``allclose`` and ``equal`` are host-side: they read
both tensors' values through the fabric (the reads cost time, the comparison
none) and return Python bools.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.arithmetic import free_temporaries, written
from kernbench.torch.dtypes import (
    as_torch_dtype,
    check_scalar_fits,
    get_default_dtype,
    python_scalar,
)
from kernbench.torch.math_kernels import (
    SAME_DTYPE,
    launch_clamp,
    launch_matmul,
    launch_norm,
    launch_pow,
    launch_softmax,
    launch_unary,
)
from kernbench.torch.shapes import dim_index, flag_argument, int_sequence, tensor_argument
from kernbench.torch.special_math import TensorSpecial, special_binary
from kernbench.torch.views import broadcast_shapes, same_device

if TYPE_CHECKING:
    from kernbench.runtime.tensor import DeviceTensor
    from kernbench.torch.tensor import Tensor

__all__ = [
    "TensorPointwise",
    "gelu",
    "layer_norm",
    "rms_norm",
    "launched",
    "silu",
    "unary_method_pair",
]

# Ops torch computes on floating tensors only (by the name torch's error gives).
_FLOAT_ONLY = {"gelu": "gelu", "gelu_tanh": "gelu", "silu": "silu"}


def _elementwise(self: Tensor, op: str, out: Tensor | None = None) -> Tensor:
    """``op`` of ``self`` elementwise, into ``out`` when given (in place)."""
    floating = op not in SAME_DTYPE
    if op in _FLOAT_ONLY and not self.dtype.is_floating_point:
        raise TensorError(
            f"{_FLOAT_ONLY[op]} of {self.storage_device_tensor.name!r}: not implemented for "
            f"{self.dtype!r} (as in torch); convert with .float() first"
        )
    rtype = get_default_dtype() if floating and not self.dtype.is_floating_point else None
    if out is not None and rtype is not None:
        raise TensorError(
            f"{op}_ of {self.storage_device_tensor.name!r}: result type {rtype!r} can't be "
            f"cast to the in-place output type {self.dtype!r}; use {op}() (a new tensor)"
        )
    return launched(self, out, rtype, lambda x, y: launch_unary(op, x, y))


def launched(
    self: Tensor,
    out: Tensor | None,
    rtype: Any,
    launch: Callable[[DeviceTensor, DeviceTensor], None],
) -> Tensor:
    """``launch(x, y)`` from ``self`` (made dense) into ``out`` (in place, through a
    temporary when ``out`` is not one run of memory) or a new tensor of dtype ``rtype``."""
    x = self.dense()
    direct = out is not None and out.contiguous_device_tensor()
    target = out if direct else self.new_empty(self.shape, dtype=rtype)
    launch(x.device_tensor, target.device_tensor)
    if out is not None and target is not out:
        out.copy_(target)
        target.free()
        target = out
    if x is not self:
        x.free()
    return target


def _tensor_argument(value: Any, what: str) -> None:
    tensor_argument(value, what)


def unary_method_pair(
    op: str, apply: Callable[[Tensor, str, Tensor | None], Tensor]
) -> tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]:
    """``t.op()`` and its in-place form ``t.op_()``: ``apply(t, op, out)`` with ``out``
    None or the tensor itself."""

    def method(self: Tensor) -> Tensor:
        return apply(self, op, None)

    def in_place(self: Tensor) -> Tensor:
        return apply(self, op, self)

    method.__name__ = method.__qualname__ = op
    in_place.__name__ = in_place.__qualname__ = f"{op}_"
    method.__doc__ = f"Elementwise {op}, as torch's (a device kernel)."
    in_place.__doc__ = f"Elementwise {op} in place, as torch's (a device kernel)."
    return method, in_place


def _unary_methods(op: str) -> tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]:
    """``t.op()`` and its in-place form ``t.op_()``, as device kernels."""
    return unary_method_pair(op, _elementwise)


class TensorPointwise:
    """Elementwise math, ``softmax``, ``matmul`` and comparisons of tensors."""

    __slots__ = ()

    # -- unary -----------------------------------------------------------------------------
    def _unary(self: Tensor, op: str, out: Tensor | None = None) -> Tensor:
        return _elementwise(self, op, out)

    abs, abs_ = _unary_methods("abs")
    exp, exp_ = _unary_methods("exp")
    log, log_ = _unary_methods("log")
    sqrt, sqrt_ = _unary_methods("sqrt")
    rsqrt, rsqrt_ = _unary_methods("rsqrt")
    sin, sin_ = _unary_methods("sin")
    cos, cos_ = _unary_methods("cos")
    asin, asin_ = _unary_methods("asin")
    sigmoid, sigmoid_ = _unary_methods("sigmoid")
    tanh, tanh_ = _unary_methods("tanh")
    erf, erf_ = _unary_methods("erf")
    relu, relu_ = _unary_methods("relu")

    def pow(self: Tensor, exponent: Any) -> Tensor:
        """``self ** exponent`` for a number or a tensor ``exponent`` (as torch's pow; a
        tensor broadcasts with ``self``)."""
        return self._pow(exponent, None)

    def pow_(self: Tensor, exponent: Any) -> Tensor:
        return self._pow(exponent, self)

    def __pow__(self: Tensor, exponent: Any) -> Tensor:
        return self._pow(exponent, None)

    def __ipow__(self: Tensor, exponent: Any) -> Tensor:
        return self._pow(exponent, self)

    def __rpow__(self: Tensor, base: Any) -> Tensor:
        """``base ** self`` for a number ``base`` (as torch.pow(base, self)): a base > 0
        of a floating result by ``exp``/``log``, any other by C's ``pow`` rules."""
        value = python_scalar(base)
        if value is None:
            raise TensorError(
                f"{base!r} ** tensor: the base must be a number or a Tensor (as in torch), "
                f"got {type(base).__name__}"
            )
        if (
            isinstance(value, bool)
            or value <= 0
            or (isinstance(value, int) and not self.dtype.is_floating_point)
        ):
            return special_binary("pow", value, self)
        x = self.dense()
        rtype = None if self.dtype.is_floating_point else get_default_dtype()
        out = self.new_empty(self.shape, dtype=rtype)
        launch_pow(x.device_tensor, out.device_tensor, value, base=True)
        if x is not self:
            x.free()
        return out

    def _pow(self: Tensor, exponent: Any, out: Tensor | None) -> Tensor:
        what = "pow_" if out is not None else "pow"
        if isinstance(exponent, TensorSpecial):
            return special_binary("pow", self, exponent, out)
        value = python_scalar(exponent)
        if value is None:
            raise TensorError(
                f"{what}: the exponent must be a number or a Tensor (as in torch), got "
                f"{type(exponent).__name__}"
            )
        rtype = None
        if not self.dtype.is_floating_point:
            if isinstance(value, float):
                rtype = get_default_dtype()  # an integer tensor to a float power
            elif value < 0:
                raise TensorError(
                    f"{what} of {self.storage_device_tensor.name!r}: Integers to negative "
                    "integer powers are not allowed (as in torch); convert with .float() first"
                )
        if out is not None and rtype is not None:
            raise TensorError(
                f"{what} of {self.storage_device_tensor.name!r}: result type {rtype!r} can't "
                f"be cast to the in-place output type {self.dtype!r}"
            )
        return launched(self, out, rtype, lambda x, y: launch_pow(x, y, value))

    def clamp(self: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """``min``/``max`` numbers or tensors (a bound may be ``None``, not both); tensor
        bounds broadcast, as ``torch.maximum``/``torch.minimum``."""
        return self._clamp(min, max, None)

    def clamp_(self: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        return self._clamp(min, max, self)

    clip = clamp
    clip_ = clamp_

    def _clamp_by_tensors(self: Tensor, what: str, low: Any, high: Any, out: Any) -> Tensor:
        """Tensor (or mixed) bounds, as torch's ``clamp``: ``minimum(maximum(t, min), max)``
        with broadcasting (a NaN bound gives NaN, as there), a kernel per bound."""
        result, made = self, []
        for bound, combine, side in ((low, "maximum", "min"), (high, "minimum", "max")):
            if bound is not None:
                if hasattr(bound, "storage_device_tensor"):
                    result = getattr(result, combine)(bound)
                else:
                    result = result.clamp(**{side: bound})
                made.append(result)
        final = made.pop()  # the result; the others are temporaries
        if out is not None and tuple(final.shape) != tuple(self.shape):
            free_temporaries(final, *made)
            raise TensorError(
                f"{what}: the bounds broadcast the result to {tuple(final.shape)}, not the "
                f"tensor's {tuple(self.shape)}"
            )
        return written(out, final, made)

    def _clamp(self: Tensor, low: Any, high: Any, out: Tensor | None) -> Tensor:
        what = "clamp_" if out is not None else "clamp"
        if low is None and high is None:
            raise TensorError(f"{what}: at least one of 'min' or 'max' must not be None")
        if any(hasattr(b, "storage_device_tensor") for b in (low, high)):
            return self._clamp_by_tensors(what, low, high, out)
        bounds = [python_scalar(b) for b in (low, high)]
        for given, value in zip((low, high), bounds, strict=True):
            if given is not None and value is None:
                raise TensorError(
                    f"{what}: min and max must be numbers or tensors, got {type(given).__name__}"
                )
        floats = any(isinstance(b, float) for b in bounds)
        rtype = None
        if floats and not self.dtype.is_floating_point:
            rtype = get_default_dtype()  # an integer tensor with a float bound: as torch
            if out is not None:
                raise TensorError(
                    f"{what} of {self.storage_device_tensor.name!r}: result type {rtype!r} "
                    f"can't be cast to the in-place output type {self.dtype!r}"
                )
        if rtype is None:
            for bound in bounds:
                if bound is not None:  # a bound past the dtype wrapped (uint8 min=256 gave 0)
                    check_scalar_fits(
                        bound, self.dtype, f"{what} of {self.storage_device_tensor.name!r}"
                    )
        return launched(self, out, rtype, lambda x, y: launch_clamp(x, y, *bounds))

    __abs__ = abs

    # -- softmax -----------------------------------------------------------------------------
    def softmax(self: Tensor, dim: Any = None, dtype: Any = None, *, axis: Any = None) -> Tensor:
        """``exp(x - max) / sum(exp(x - max))`` along ``dim``, in one kernel as torch's (in
        float32 for float16/bfloat16, rounded once)."""
        return self._softmax("softmax", axis if dim is None else dim, dtype)

    def log_softmax(
        self: Tensor, dim: Any = None, dtype: Any = None, *, axis: Any = None
    ) -> Tensor:
        """``x - max - log(sum(exp(x - max)))`` along ``dim``: the logarithm of
        :meth:`softmax`, finite where it underflows, in one kernel as torch's."""
        return self._softmax("log_softmax", axis if dim is None else dim, dtype)

    def _softmax(self: Tensor, what: str, dim: Any, dtype: Any) -> Tensor:
        if dim is None:
            raise TensorError(f"{what}: give dim ({what}(x, dim=-1))")
        d = dim_index(dim, self.ndim)
        x = self if dtype is None else self.to(as_torch_dtype(dtype))
        if not x.dtype.is_floating_point:
            raise TensorError(
                f"{what} of {self.storage_device_tensor.name!r}: {x.dtype!r} is not a floating "
                "dtype; pass dtype=torch.float32 or call .float() first"
            )
        shape = tuple(x.shape)
        out = x.new_empty(shape)
        if out.numel():
            dense = x.dense()
            rows, n = math.prod(shape[:d]), shape[d] if shape else 1
            cols = out.numel() // (rows * n)
            launch_softmax(
                dense.device_tensor, out.device_tensor, rows, n, cols, log=what == "log_softmax"
            )
            if dense is not x:
                dense.free()
        if x is not self:
            x.free()
        return out

    # -- matmul ------------------------------------------------------------------------------
    def matmul(self: Tensor, other: Tensor) -> Tensor:
        """Matrix product (1-D, 2-D, batched and broadcast operands), on the matrix engine."""
        _tensor_argument(other, "matmul")
        a_shape, b_shape = tuple(self.shape), tuple(other.shape)
        what = f"matmul of shapes {a_shape} and {b_shape}"
        same_device(what, self, other)
        if self.dtype is not other.dtype:
            raise TensorError(
                f"{what}: expected both operands to have the same dtype, got {self.dtype!r} and "
                f"{other.dtype!r}; convert one with .to(...)"
            )
        if not (a_shape and b_shape):
            raise TensorError(f"{what}: both arguments to matmul need to be at least 1D")
        if len(a_shape) == 1 and len(b_shape) == 1:
            return self._inner_product(other, what)
        if max(len(a_shape), len(b_shape)) > 3:
            return self._broadcast_matmul(other, what)
        a = _as_batched_matrix(self, row_vector=True)
        b = _as_batched_matrix(other, row_vector=False)
        (ab, m, k), (bb, k2, n) = a[0], b[0]
        if k != k2 or (ab != bb and 1 not in (ab, bb)):
            raise TensorError(
                f"{what} cannot be multiplied ({m}x{k} and {k2}x{n}, batches {ab} and {bb})"
            )
        batch = bb if ab == 1 else ab  # a batch of 1 broadcasts, to 0 as well
        out_shape: tuple[int, ...] = (batch,) if max(len(a_shape), len(b_shape)) == 3 else ()
        out_shape += ((m,) if len(a_shape) > 1 else ()) + ((n,) if len(b_shape) > 1 else ())
        out = self.new_empty(out_shape)
        if out.numel() == 0:
            return out
        if k == 0:  # sums over nothing, as torch
            return out.zero_()
        a_strides = (a[2][0] if ab > 1 else 0, *a[2][1:])
        b_strides = (b[2][0] if bb > 1 else 0, *b[2][1:])
        launch_matmul(
            self.storage_device_tensor,
            (a[1], a_strides),
            other.storage_device_tensor,
            (b[1], b_strides),
            out.device_tensor,
            (batch, m, n, k),
        )
        return out

    def _inner_product(self: Tensor, other: Tensor, what: str) -> Tensor:
        """Two vectors' inner product as torch computes it (a dot: a parallel reduction of
        the products, not one matrix tile stepping through ``K``): the products, then a
        sum, accumulated in float32 for half-precision vectors."""
        if self.shape[0] != other.shape[0]:
            raise TensorError(
                f"{what}: inconsistent tensor size, expected tensor [{self.shape[0]}] and "
                f"src [{other.shape[0]}] to have the same number of elements, but got "
                f"{self.shape[0]} and {other.shape[0]} elements respectively"
            )
        if self.dtype.is_floating_point and self.dtype.itemsize < 4:
            wide_a, wide_b = self.float(), other.float()
            products = wide_a * wide_b
            out = products.sum().to(self.dtype)
            for t in (wide_a, wide_b):
                t.free()
        else:
            products = self * other
            out = products.sum(dtype=self.dtype)
        products.free()
        return out

    def mm(self: Tensor, mat2: Tensor) -> Tensor:
        """Product of two 2-D matrices (as torch.mm; torch.matmul takes other shapes)."""
        _tensor_argument(mat2, "mm")
        if self.ndim != 2 or mat2.ndim != 2:
            raise TensorError(
                f"mm of shapes {tuple(self.shape)} and {tuple(mat2.shape)}: both must be 2-D "
                "matrices (as in torch); torch.matmul takes 1-D and batched operands"
            )
        return self.matmul(mat2)

    def bmm(self: Tensor, mat2: Tensor) -> Tensor:
        """Batched matrix product of two 3-D tensors with the same batch (as torch.bmm)."""
        _tensor_argument(mat2, "bmm")
        if self.ndim != 3 or mat2.ndim != 3 or self.shape[0] != mat2.shape[0]:
            raise TensorError(
                f"bmm of shapes {tuple(self.shape)} and {tuple(mat2.shape)}: both must be 3-D "
                "with the same batch size (torch.matmul broadcasts other shapes)"
            )
        return self.matmul(mat2)

    def _broadcast_matmul(self: Tensor, other: Tensor, what: str) -> Tensor:
        """Operands past 3 dims (attention's (B, H, T, D) @ (B, H, D, T)), as torch takes
        them: the batch dims broadcast, each side made one batch of matrices (a copy only
        where broadcasting or strides need one), multiplied, the result viewed back."""
        a = self.unsqueeze(0) if self.ndim == 1 else self
        b = other.unsqueeze(-1) if other.ndim == 1 else other
        (m, k), (k2, n) = tuple(a.shape[-2:]), tuple(b.shape[-2:])
        if k != k2:
            raise TensorError(f"{what} cannot be multiplied ({m}x{k} and {k2}x{n})")
        batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), what)
        # a copy reshape makes is released when dropped, as every temporary is
        left = a.expand(*batch, m, k).reshape(-1, m, k)
        right = b.expand(*batch, k, n).reshape(-1, k, n)
        out = left.matmul(right).view(*batch, m, n)
        if self.ndim == 1:
            out = out.squeeze(-2)
        if other.ndim == 1:
            out = out.squeeze(-1)
        return out

    def __matmul__(self: Tensor, other: Tensor) -> Tensor:
        return self.matmul(other)

    def __rmatmul__(self: Tensor, other: Tensor) -> Tensor:
        _tensor_argument(other, "matmul")
        return other.matmul(self)

    def dot(self: Tensor, other: Tensor) -> Tensor:
        _tensor_argument(other, "dot")
        if self.ndim != 1 or other.ndim != 1:
            raise TensorError(
                f"dot: 1-D tensors expected, got {self.ndim}-D and {other.ndim}-D; use matmul"
            )
        return self.matmul(other)

    # -- comparisons on the host -------------------------------------------------------------
    def allclose(
        self: Tensor,
        other: Tensor,
        rtol: float = 1e-05,
        atol: float = 1e-08,
        equal_nan: bool = False,
    ) -> bool:
        """Host-side ``|self - other| <= atol + rtol * |other|`` everywhere (broadcast)."""
        _tensor_argument(other, "allclose")
        if self.dtype is not other.dtype:
            raise TensorError(
                f"allclose: dtypes {self.dtype!r} and {other.dtype!r} differ (as in PyTorch); "
                "convert one with .to(...)"
            )
        try:
            return bool(
                np.allclose(
                    self.numpy(force=True),
                    other.numpy(force=True),
                    rtol=rtol,
                    atol=atol,
                    equal_nan=equal_nan,
                )
            )
        except ValueError:
            raise TensorError(
                f"allclose: shapes {tuple(self.shape)} and {tuple(other.shape)} cannot be "
                "broadcast together"
            ) from None

    def equal(self: Tensor, other: Tensor) -> bool:
        """Host-side: same shape and the same values."""
        _tensor_argument(other, "equal")
        if self.shape != other.shape:
            return False
        return bool(np.array_equal(self.numpy(force=True), other.numpy(force=True)))


def _as_batched_matrix(
    t: Tensor, *, row_vector: bool
) -> tuple[tuple[int, int, int], int, tuple[int, int, int]]:
    """((batch, rows, cols), storage offset, (batch, row, col) strides) of ``t`` as matrices.

    A 1-D left operand is one row, a 1-D right operand one column (PyTorch's rule).
    """
    geo = t.geometry
    shape, strides = geo.shape, geo.strides
    if len(shape) == 1:
        if row_vector:
            return (1, 1, shape[0]), geo.offset, (0, 0, strides[0])
        return (1, shape[0], 1), geo.offset, (0, strides[0], 0)
    if len(shape) == 2:
        return (1, *shape), geo.offset, (0, *strides)
    return tuple(shape), geo.offset, tuple(strides)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002 - torch's name
    """``torch.nn.functional.gelu``: ``x * Phi(x)`` with erf, or its tanh form."""
    _tensor_argument(input, "gelu")
    if not isinstance(approximate, str) or approximate not in ("none", "tanh"):
        raise TensorError(
            f"gelu: approximate must be 'none' or 'tanh' (as in torch), got {approximate!r}"
        )
    return _elementwise(input, "gelu" if approximate == "none" else "gelu_tanh")


def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 - torch's name
    """``torch.nn.functional.silu``: ``x * sigmoid(x)``."""
    _tensor_argument(input, "silu")
    inplace = flag_argument(inplace, "silu", "inplace")
    return _elementwise(input, "silu", out=input if inplace else None)


def _normalized_shape(what: str, normalized_shape: Any) -> tuple[int, ...]:
    """``normalized_shape`` (an int or a sequence of ints, as torch takes it) as a tuple."""
    try:
        return int_sequence(normalized_shape, what, "normalized_shape")
    except TensorError:
        raise TensorError(
            f"{what}: normalized_shape must be an int or a sequence of ints, the input's last "
            f"dims (as in torch), got {normalized_shape!r}"
        ) from None


def _normalized(
    what: str, input: Tensor, normalized_shape: Any, weight: Any, bias: Any, eps: float, rms: bool
) -> Tensor:  # noqa: A002
    _tensor_argument(input, what)
    shape = _normalized_shape(what, normalized_shape)
    if not isinstance(eps, numbers.Real):
        raise TensorError(f"{what}: eps must be a number (as in torch), got {eps!r}")
    k = len(shape)
    if not k or tuple(input.shape[-k:]) != shape or input.ndim < k:
        raise TensorError(
            f"{what}: normalized_shape {shape} must be the input's last dims (input shape "
            f"{tuple(input.shape)})"
        )
    if not input.dtype.is_floating_point:
        raise TensorError(f"{what}: expected a floating tensor, got {input.dtype!r}")
    params = []
    for name, value in (("weight", weight), ("bias", bias)):
        if value is None:
            params.append(None)
            continue
        _tensor_argument(value, f"{what} {name}")
        same_device(what, input, value)
        if tuple(value.shape) != shape:
            raise TensorError(
                f"{what}: {name} of shape {tuple(value.shape)} must have the normalized shape "
                f"{shape}"
            )
        params.append(value.dense())
    n = math.prod(shape)
    x = input.dense()
    out = input.new_empty(input.shape)
    launch_norm(
        x.device_tensor,
        None if params[0] is None else params[0].device_tensor,
        None if params[1] is None else params[1].device_tensor,
        out.device_tensor,
        input.numel() // max(n, 1),
        n,
        eps,
        rms=rms,
    )
    for made, given in ((x, input), *zip(params, (weight, bias), strict=True)):
        if made is not None and made is not given:
            made.free()
    return out


def layer_norm(
    input: Tensor,  # noqa: A002 - torch's name
    normalized_shape: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """``torch.nn.functional.layer_norm``: over the last dims, in one kernel (three passes
    over each row: mean, variance, normalize)."""
    return _normalized("layer_norm", input, normalized_shape, weight, bias, eps, rms=False)


def rms_norm(
    input: Tensor,  # noqa: A002 - torch's name
    normalized_shape: Any,
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """``torch.nn.functional.rms_norm``: ``x / sqrt(mean(x**2) + eps) * weight``; ``eps``
    None is the dtype's machine epsilon, as torch's."""
    _tensor_argument(input, "rms_norm")
    if eps is None:
        eps = float(np.finfo(np.float16 if input.dtype.name == "float16" else np.float32).eps)
        if input.dtype.name == "bfloat16":
            eps = 2.0**-7
    return _normalized("rms_norm", input, normalized_shape, weight, None, eps, rms=True)
