"""Built-in device kernels over flat buffers: the arithmetic behind tensors and collectives.

Every kernel here works on flat buffers of ``n`` elements in blocks of
``BLOCK`` (a power of two), one program per block, with the last block masked
when ``n`` is not a multiple of ``BLOCK``:

* :data:`elementwise_kernel` -- ``out = x OP y`` for ``OP`` in ``add``, ``sub``,
  ``mul``, ``div``.
* :data:`scalar_kernel` -- ``out = x OP value`` for the same ops plus ``scale``
  (a multiply, the name collectives use for AVG's final ``1/p``).
* :data:`fill_kernel` and :data:`copy_kernel`.
* :data:`reduce_kernel` -- combines two buffers for a reduction collective:
  ``sum``, ``prod``, ``min``, ``max`` (a NaN in either buffer gives NaN) and,
  for integer dtypes, ``band``, ``bor``, ``bxor``. There is no ``avg``: an
  average over ``p`` ranks is a ``sum`` reduction followed by ``scalar_kernel``
  ``scale`` with ``1/p``, since averaging two buffers at a time does not
  compose across ranks.

Results are written in the output buffer's dtype. ``div`` is true division for
floating dtypes; for integer dtypes it truncates toward zero like C and
``torch.div(..., rounding_mode="trunc")`` (so ``-7 div 2 == -3``), and dividing
an integer by zero gives 0. In-place forms pass the same buffer as ``x`` and
``out`` (each program loads its block before storing it).

The ``launch_*`` helpers check their arguments, pick the grid
``(cdiv(n, BLOCK),)`` and launch through ``kernel[grid](...)``, so whichever
launcher is installed runs them; they return what the launcher returns (a
:class:`~kernbench.kernels.interpreter.LaunchRecord` on the host). With
``n == 0`` they still launch one fully masked program, so every call reaches
the launcher.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

import kernbench.kernels.language as tl
from kernbench.errors import KernelError
from kernbench.kernels.jit import jit

__all__ = [
    "BUILTIN_BLOCK",
    "arith",
    "combine",
    "ELEMENTWISE_OPS",
    "REDUCE_OPS",
    "SCALAR_OPS",
    "copy_kernel",
    "elementwise_kernel",
    "fill_kernel",
    "launch_copy",
    "launch_elementwise",
    "launch_fill",
    "launch_reduce",
    "launch_scalar",
    "reduce_kernel",
    "scalar_kernel",
    "typed_scalar",
]

BUILTIN_BLOCK = 1024  # elements per program unless a caller asks for another power of two

ELEMENTWISE_OPS = ("add", "sub", "mul", "div")
SCALAR_OPS = ("add", "sub", "mul", "div", "scale")
REDUCE_OPS = ("sum", "prod", "min", "max", "band", "bor", "bxor")


# ----------------------------------------------------------------------------- device functions


@jit
def _trunc_div(x, y):
    # The kernel language's integer // rounds toward zero, as C, Triton and
    # torch's "trunc" do (NumPy's floors); by zero it gives zero.
    return x // y


@jit
def arith(x, y, OP: tl.constexpr):
    """``x OP y`` for OP in SCALAR_OPS, as the elementwise and scalar kernels compute it."""
    tl.static_assert(OP in SCALAR_OPS, f"unknown OP {OP!r}; valid: {', '.join(SCALAR_OPS)}")
    if OP == "add":
        return x + y
    if OP == "sub":
        return x - y
    if OP == "mul" or OP == "scale":
        return x * y
    if x.dtype.is_floating() or y.dtype.is_floating():
        return x / y  # an integer buffer divided by a float: truncated when stored
    return _trunc_div(x, y.to(x.dtype))  # the value in the buffer's type (it fits)


@jit
def combine(acc, x, OP: tl.constexpr):
    """``acc OP x`` for OP in REDUCE_OPS, as the reduce kernel combines two buffers."""
    tl.static_assert(OP in REDUCE_OPS, f"unknown OP {OP!r}; valid: {', '.join(REDUCE_OPS)}")
    if OP == "sum":
        return acc + x
    if OP == "prod":
        return acc * x
    if OP == "min":
        return tl.minimum(acc, x, tl.PropagateNan.ALL)
    if OP == "max":
        return tl.maximum(acc, x, tl.PropagateNan.ALL)
    tl.static_assert(
        not acc.dtype.is_floating(),
        f"OP {OP!r} needs an integer dtype, got {acc.dtype!r}",
    )
    if OP == "band":
        return acc & x
    if OP == "bor":
        return acc | x
    return acc ^ x


# ----------------------------------------------------------------------------- kernels


@jit
def elementwise_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    """``out[i] = x[i] OP y[i]`` for ``i < n``; OP in add, sub, mul, div."""
    tl.static_assert(
        OP in ELEMENTWISE_OPS, f"unknown OP {OP!r}; valid: {', '.join(ELEMENTWISE_OPS)}"
    )
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask, other=1)  # 1 keeps masked-off div lanes quiet
    tl.store(out_ptr + offsets, arith(x, y, OP), mask=mask)


@jit(do_not_specialize=["value"])  # so that value is always a typed block in arith
def scalar_kernel(x_ptr, out_ptr, n, value, OP: tl.constexpr, BLOCK: tl.constexpr):
    """``out[i] = x[i] OP value`` for ``i < n``; OP in add, sub, mul, div, scale."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, arith(x, value, OP), mask=mask)


@jit
def fill_kernel(out_ptr, n, value, BLOCK: tl.constexpr):
    """``out[i] = value`` for ``i < n``."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, value, mask=offsets < n)


@jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    """``dst[i] = src[i]`` for ``i < n``, converted to ``dst``'s dtype."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


@jit
def reduce_kernel(acc_ptr, x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    """``out[i] = acc[i] OP x[i]`` for ``i < n``; OP in sum, prod, min, max, band, bor, bxor."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    acc = tl.load(acc_ptr + offsets, mask=mask)
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, combine(acc, x, OP), mask=mask)


# ----------------------------------------------------------------------------- launch helpers


def _numel(buffer: Any, what: str) -> int:
    """Element count of an array, a kernel buffer or a tensor-like (``numel`` / ``shape``)."""
    if isinstance(buffer, np.ndarray):
        return int(buffer.size)
    numel = getattr(buffer, "numel", None)
    if callable(numel):
        numel = numel()
    if numel is None and hasattr(buffer, "shape"):
        numel = int(np.prod(tuple(buffer.shape), dtype=np.int64))
    if numel is None:
        raise KernelError(f"{what}: expected an array or tensor, got {type(buffer).__name__}")
    return int(numel)


def _check_block(block: Any) -> int:
    if isinstance(block, bool):
        raise KernelError(f"block must be a positive power of two, got {block!r}")
    try:
        b = operator.index(block)
    except TypeError:
        raise KernelError(f"block must be a positive power of two, got {block!r}") from None
    if b <= 0 or b & (b - 1):
        raise KernelError(f"block must be a positive power of two, got {b}")
    return b


def _check_op(op: Any, valid: tuple[str, ...], kernel: str) -> str:
    if op not in valid:
        raise KernelError(f"{kernel}: unknown op {op!r}; valid: {', '.join(valid)}")
    return op


def _same_layout(kernel: str, same_dtype: bool, **buffers: Any) -> int:
    """The common element count of ``buffers``; with ``same_dtype`` their dtypes must agree."""
    (first, first_buf), *rest = buffers.items()
    n = _numel(first_buf, f"{kernel} {first}")
    for name, buf in rest:
        m = _numel(buf, f"{kernel} {name}")
        if m != n:
            raise KernelError(f"{kernel}: {name} has {m} elements but {first} has {n}")
        if same_dtype and buf.dtype != first_buf.dtype:
            raise KernelError(
                f"{kernel}: {name} has dtype {buf.dtype} but {first} has {first_buf.dtype}; "
                "convert with launch_copy first"
            )
    return n


def typed_scalar(value: Any, dtype: Any) -> Any:
    """``value`` as a kernel argument for values of ``dtype`` (a runtime dtype or a NumPy
    one): a Python float for a float64 tensor is passed as a NumPy float64, which the
    kernel keeps in double precision (Triton's launcher would make it a float32, so
    ``x + 0.1`` of a float64 ``x`` would add float32's 0.1); anything else unchanged."""
    held = np.dtype(getattr(dtype, "storage", dtype))
    if isinstance(value, float) and held == np.float64:
        return np.float64(value)
    return value


def _scalar(value: Any, kernel: str) -> Any:
    # NumPy scalars carry a dtype that would take part in promotion (a float64
    # value would make float16 arithmetic run in float64); plain Python
    # numbers are weak, as in torch.
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KernelError(f"{kernel}: value must be an int or a float, got {value!r}")
    return value


# The built-in kernels index elements with 32-bit offsets (program_id * BLOCK + arange).
_MAX_ELEMENTS = 2**31 - 1


def _grid(n: int, block: int) -> tuple[int]:
    if n > _MAX_ELEMENTS:
        raise KernelError(
            f"a built-in kernel over {n} elements: the built-in kernels use 32-bit element "
            f"offsets, so they cover at most {_MAX_ELEMENTS} elements; split the buffer"
        )
    return (max(1, tl.cdiv(n, block)),)


def launch_elementwise(op: str, x: Any, y: Any, out: Any, block: int = BUILTIN_BLOCK) -> Any:
    """``out = x op y`` over equal-sized buffers of one dtype (``out`` may be ``x``)."""
    _check_op(op, ELEMENTWISE_OPS, "elementwise_kernel")
    b = _check_block(block)
    n = _same_layout("elementwise_kernel", True, x=x, y=y, out=out)
    return elementwise_kernel[_grid(n, b)](x, y, out, n, OP=op, BLOCK=b)


def launch_scalar(op: str, x: Any, value: Any, out: Any, block: int = BUILTIN_BLOCK) -> Any:
    """``out = x op value`` for a Python scalar ``value`` (``out`` may be ``x``)."""
    _check_op(op, SCALAR_OPS, "scalar_kernel")
    b = _check_block(block)
    n = _same_layout("scalar_kernel", True, x=x, out=out)
    v = typed_scalar(_scalar(value, "scalar_kernel"), x.dtype)
    return scalar_kernel[_grid(n, b)](x, out, n, v, OP=op, BLOCK=b)


def launch_fill(out: Any, value: Any, block: int = BUILTIN_BLOCK) -> Any:
    """Set every element of ``out`` to ``value``."""
    b = _check_block(block)
    n = _numel(out, "fill_kernel out")
    v = _scalar(value, "fill_kernel")
    held = np.dtype(getattr(out.dtype, "storage", out.dtype))  # a device tensor's, or an array's
    if isinstance(v, float) and np.isfinite(v) and held.kind in "iu":
        v = int(v)  # exactly, as torch fills an integer tensor (a float32 argument rounds)
    return fill_kernel[_grid(n, b)](out, n, typed_scalar(v, held), BLOCK=b)


def launch_copy(src: Any, dst: Any, block: int = BUILTIN_BLOCK) -> Any:
    """Copy ``src`` into ``dst`` (same element count; converted to ``dst``'s dtype)."""
    b = _check_block(block)
    n = _same_layout("copy_kernel", False, src=src, dst=dst)
    return copy_kernel[_grid(n, b)](src, dst, n, BLOCK=b)


def launch_reduce(op: str, acc: Any, x: Any, out: Any, block: int = BUILTIN_BLOCK) -> Any:
    """``out = acc op x`` for a reduction op (``out`` may be ``acc``)."""
    _check_op(op, REDUCE_OPS, "reduce_kernel")
    b = _check_block(block)
    n = _same_layout("reduce_kernel", True, acc=acc, x=x, out=out)
    return reduce_kernel[_grid(n, b)](acc, x, out, n, OP=op, BLOCK=b)
