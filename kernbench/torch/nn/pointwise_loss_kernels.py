"""The device kernel behind the elementwise losses of :mod:`~kernbench.torch.nn.losses_more`.

One kernel computes each element's loss of ``binary_cross_entropy`` (its logs
clamped at -100, as torch's), ``binary_cross_entropy_with_logits`` (stable,
with ``pos_weight``), ``kl_div`` (``xlogy(t, t) - t * x``, or with
``log_target`` ``exp(t) * (t - x)``), ``smooth_l1_loss`` and ``huber_loss``,
times ``weight``: one pass over the operands, as torch's fused kernels.  Each
operand is read in place through its strides (zero for a broadcast dim), so a
broadcast weight costs no copy.  The math is in float64, rounded once by the
store; the reduction, when asked for, is a second kernel (a sum), as torch's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import kernbench.kernels.language as tl
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid
from kernbench.torch.nn.activation_kernels import log1p_small
from kernbench.torch.view_kernels import strided_offsets
from kernbench.torch.views import coalesce

__all__ = ["POINTWISE_LOSSES", "launch_pointwise_loss"]

POINTWISE_LOSSES = ("bce", "bce_logits", "kl_div", "kl_div_log", "smooth_l1", "huber")


@jit
def _pointwise_loss_kernel(
    x_ptr,
    y_ptr,
    w_ptr,
    p_ptr,
    out_ptr,
    n,
    x_offset,
    y_offset,
    w_offset,
    p_offset,
    a,
    OP: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_P: tl.constexpr,
    SHAPE: tl.constexpr,
    X_STRIDES: tl.constexpr,
    Y_STRIDES: tl.constexpr,
    W_STRIDES: tl.constexpr,
    P_STRIDES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + strided_offsets(i, x_offset, SHAPE, X_STRIDES), mask=mask, other=0.5)
    y = tl.load(y_ptr + strided_offsets(i, y_offset, SHAPE, Y_STRIDES), mask=mask, other=0.5)
    x = x.to(tl.float64)
    y = y.to(tl.float64)
    if OP == "bce":
        log_x = tl.maximum(tl.log(tl.where(x > 0, x, 1.0)), -100.0)
        log_x = tl.where(x > 0, log_x, -100.0)
        log_1mx = tl.maximum(tl.log(tl.where(x < 1, 1.0 - x, 1.0)), -100.0)
        log_1mx = tl.where(x < 1, log_1mx, -100.0)
        loss = (y - 1.0) * log_1mx - y * log_x
    elif OP == "bce_logits":
        softplus = log1p_small(tl.exp(-tl.abs(x))) + tl.maximum(-x, 0.0)
        if HAS_P:
            pw = tl.load(p_ptr + strided_offsets(i, p_offset, SHAPE, P_STRIDES), mask=mask, other=1)
            loss = (1.0 - y) * x + (1.0 + (pw.to(tl.float64) - 1.0) * y) * softplus
        else:
            loss = (1.0 - y) * x + softplus
    elif OP == "kl_div":
        # xlogy(y, y) - y * x: 0 where y is 0, NaN where y < 0 (as torch)
        xlogy = tl.where(y == 0, 0.0, y * tl.log(tl.where(y == 0, 1.0, y)))
        loss = xlogy - y * x
    elif OP == "kl_div_log":
        loss = tl.exp(y) * (y - x)
    elif OP == "smooth_l1":  # a: beta (0 is l1)
        d = tl.abs(x - y)
        loss = tl.where(d < a, 0.5 * d * d / tl.where(a > 0, a, 1.0), d - 0.5 * a)
    else:  # huber, a: delta
        d = tl.abs(x - y)
        loss = tl.where(d < a, 0.5 * d * d, a * (d - 0.5 * a))
    if HAS_W:
        w = tl.load(w_ptr + strided_offsets(i, w_offset, SHAPE, W_STRIDES), mask=mask, other=0)
        loss = loss * w.to(tl.float64)
    tl.store(out_ptr + i, loss, mask=mask)


Operand = tuple[DeviceTensor, int, Sequence[int]]  # storage, offset, strides (0: broadcast)


def launch_pointwise_loss(
    op: str,
    shape: Sequence[int],
    x: Operand,
    y: Operand,
    out: DeviceTensor,
    *,
    weight: Operand | None = None,
    pos_weight: Operand | None = None,
    a: float = 0.0,
) -> None:
    """``out`` (contiguous, of ``shape``) = each element's ``op`` loss of ``x`` and ``y``
    (times ``weight``), every operand read through its offset and strides."""
    n = 1
    for size in shape:
        n *= size
    none = (x[0], 0, (0,) * len(shape))
    w, p = weight or none, pos_weight or none
    dims, strides = coalesce(shape, x[2], y[2], w[2], p[2])
    _pointwise_loss_kernel[elementwise_grid(n, op)](
        x[0],
        y[0],
        w[0],
        p[0],
        out,
        n,
        x[1],
        y[1],
        w[1],
        p[1],
        np.float64(a),
        OP=op,
        HAS_W=weight is not None,
        HAS_P=pos_weight is not None,
        SHAPE=dims,
        X_STRIDES=strides[0],
        Y_STRIDES=strides[1],
        W_STRIDES=strides[2],
        P_STRIDES=strides[3],
        BLOCK=BLOCK,
    )
