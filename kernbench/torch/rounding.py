"""Rounding and the extra elementwise math of :class:`~kernbench.torch.Tensor`:
``floor``, ``ceil``, ``round`` (``decimals=``), ``trunc``/``fix``, ``frac``, ``sign``,
``exp2``, ``log2``, ``log10``, ``log1p``, ``expm1``.

:class:`TensorRounding` is mixed into the tensor class.  Each op is one pass of
:func:`launch_rounding`, an elementwise kernel with :data:`BLOCK` elements a
program, so it costs what ``abs`` of the same tensor costs (plus a few vector
ops a lane).  As torch: ``floor``/``ceil``/``round``/``trunc`` of an integer
tensor return a copy in its dtype; ``round`` rounds half to even (and with
``decimals`` scales by ``10**decimals`` in the tensor's float type first, as
torch's kernel does); ``sign`` keeps the dtype (bools too) and gives 0 for NaN
(torch's ``(0 < x) - (x < 0)``); ``frac`` takes floats only; the logarithms and
exponentials give the default dtype for integer tensors.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import kernbench.kernels.language as tl
from kernbench.errors import TensorError
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid, float_type
from kernbench.torch.dtypes import BOOL, get_default_dtype
from kernbench.torch.pointwise import launched, unary_method_pair

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["ROUNDING_OPS", "TensorRounding", "launch_rounding", "rint"]

#: Ops whose result keeps the tensor's dtype (a copy for an integer tensor, but sign).
ROUNDING_OPS = ("floor", "ceil", "round", "trunc", "frac", "sign")
#: Ops whose result is floating (the default dtype for an integer tensor).
FLOAT_OPS = ("exp2", "log2", "log10", "log1p", "expm1")
_LOG10_OF_2 = 0.30102999566398119521373889472449302676818988146210854131


@jit
def rint(w, FT: tl.constexpr):
    """``w`` (a block of ``FT``, float32 or float64) rounded half to even, as ``rint``."""
    # (w + 1.5 * 2**p) - 1.5 * 2**p rounds to nearest even in hardware (as rint);
    # a larger |w| is already an integer
    magic = 6755399441055744.0 if FT == tl.float64 else 12582912.0
    y = tl.where(tl.abs(w) < magic / 3, (w + magic) - magic, w)
    return tl.where(y == 0, w * 0.0, y)  # -0.4 rounds to -0.0, as nearbyint does


@jit
def _rounding_kernel(
    x_ptr,
    out_ptr,
    n,
    SCALE: tl.constexpr,
    OP: tl.constexpr,
    FT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Floats compute in FT (float32, float64 for float64); the store rounds to out's dtype.
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=1)
    if OP == "sign":
        y = (x > 0).to(tl.int8) - (x < 0).to(tl.int8)  # NaN gives 0, as torch's
    else:
        w = x.to(FT)
        if OP == "floor":
            y = tl.floor(w)
        elif OP == "ceil":
            y = tl.ceil(w)
        elif OP == "trunc" or OP == "frac":
            y = tl.where(w < 0, tl.ceil(w), tl.floor(w))
            if OP == "frac":
                y = w - y
        elif OP == "round":
            if SCALE > 0:
                w = w * SCALE
            elif SCALE < 0:
                w = w / -SCALE
            y = rint(w, FT)
            if SCALE > 0:
                y = y / SCALE
            elif SCALE < 0:
                y = y * -SCALE
        elif OP == "exp2":
            y = tl.exp2(w)
        elif OP == "log2":
            y = tl.log2(w)
        elif OP == "log10":
            y = tl.log2(w) * _LOG10_OF_2
        elif OP == "log1p":
            w = x.to(tl.float64)
            # Goldberg's log1p: exact where 1 + x rounds to 1, full precision elsewhere
            u = w + 1.0
            y = tl.where(u == 1.0, w, tl.log(u) * (w / tl.where(u == 1.0, 2.0, u - 1.0)))
            y = tl.where(u == float("inf"), u, y)
        else:  # expm1, Kahan's: (e - 1) * x / log(e)
            w = x.to(tl.float64)
            e = tl.exp(w)
            lg = tl.log(e)
            y = tl.where(e == 1.0, w, (e - 1.0) * (w / tl.where(e == 1.0, 1.0, lg)))
            y = tl.where(e - 1.0 == -1.0, -1.0, y)
            y = tl.where(e == float("inf"), e, y)
    tl.store(out_ptr + i, y, mask=mask)


def launch_rounding(op: str, x: DeviceTensor, out: DeviceTensor, scale: float = 0.0) -> None:
    """``out = op(x)`` elementwise over equal-sized contiguous buffers; for ``round``,
    ``scale`` > 0 multiplies by it first (``10**decimals``), < 0 divides by ``-scale``."""
    n = x.numel
    _rounding_kernel[elementwise_grid(n, op)](
        x, out, n, SCALE=float(scale), OP=op, FT=float_type(out.dtype), BLOCK=BLOCK
    )


def _round_scale(decimals: Any) -> float:
    if isinstance(decimals, bool) or not isinstance(decimals, int):
        raise TensorError(f"round(): decimals must be an int, got {decimals!r}")
    if not -(2**63) <= decimals < 2**63:
        raise TensorError(f"round(): decimals must fit int64 (as torch), got {decimals}")
    if decimals == 0:
        return 0.0
    if abs(decimals) > 308:  # 10**decimals is past float64: torch's pow gives inf, so NaN
        return math.inf if decimals > 0 else -math.inf
    return float(10**decimals) if decimals > 0 else -float(10**-decimals)


def _rounded(self: Tensor, op: str, out: Tensor | None, *, decimals: int = 0) -> Tensor:
    name = f"{op}_" if out is not None else op
    what = f"{name} of {self.storage_device_tensor.name!r}"
    scale = _round_scale(decimals) if op == "round" else 0.0
    rtype = None
    if op in FLOAT_OPS:
        if not self.dtype.is_floating_point:
            rtype = get_default_dtype()
            if out is not None:
                raise TensorError(
                    f"{what}: result type {rtype!r} can't be cast to the in-place output type "
                    f"{self.dtype!r} (as in torch); use {op}() (a new tensor)"
                )
    elif op != "sign" and not self.dtype.is_floating_point:
        if op == "frac" or self.dtype is BOOL or scale:
            raise TensorError(
                f"{what}: not implemented for {self.dtype!r} (as in torch"
                + (", round with decimals takes floats" if scale else "")
                + "); convert with .float() first"
            )
        # an integer is its own floor, ceil, round and trunc: a copy, as torch
        return self.clone() if out is None else out

    def launch(x: DeviceTensor, y: DeviceTensor) -> None:
        if y.numel:
            launch_rounding(op, x, y, scale)

    return launched(self, out, rtype, launch)


def _methods(op: str) -> tuple[Any, Any]:
    return unary_method_pair(op, _rounded)


class TensorRounding:
    """Rounding, ``sign``, ``frac`` and the base-2/base-10/near-zero exp and log."""

    __slots__ = ()

    floor, floor_ = _methods("floor")
    ceil, ceil_ = _methods("ceil")
    trunc, trunc_ = _methods("trunc")
    fix, fix_ = trunc, trunc_
    frac, frac_ = _methods("frac")
    sign, sign_ = _methods("sign")
    exp2, exp2_ = _methods("exp2")
    log2, log2_ = _methods("log2")
    log10, log10_ = _methods("log10")
    log1p, log1p_ = _methods("log1p")
    expm1, expm1_ = _methods("expm1")

    def round(self: Tensor, decimals: int = 0) -> Tensor:
        """Round half to even (``decimals`` places: ``round(x * 10**d) / 10**d``, as
        torch computes it), a device kernel; an integer tensor is returned as a copy."""
        return _rounded(self, "round", None, decimals=decimals)

    def round_(self: Tensor, decimals: int = 0) -> Tensor:
        return _rounded(self, "round", self, decimals=decimals)
