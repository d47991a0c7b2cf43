"""Device kernels for the activations of :mod:`~kernbench.torch.nn.activations`.

One elementwise kernel maps a contiguous buffer through ``softplus``,
``leaky_relu``, the ELU family (``elu``/``selu``/``celu``), ``hardsigmoid``,
``hardswish``, ``mish``, ``logsigmoid``, ``softsign`` or ``tanhshrink`` in
one pass (one read and one write an element, as torch's fused kernels), and
a second one computes ``glu``'s ``a * sigmoid(b)`` from the two halves of
its input.  The math is done in float64 and rounded once by the store;
``log1p``/``expm1``, which ``tl`` lacks, are written with the classic
correction (``log(u) * e / (u - 1)`` for ``u = 1 + e``), which keeps float32's
digits near zero.  The vector engine is charged a FLOP per element for every
operation, so the piecewise-linear activations (``leaky_relu``, ``hardswish``,
``softsign``, ...) cost one memory pass, while ``softplus``, ``logsigmoid``,
the ELUs, ``tanhshrink`` and ``mish`` pay for their exp/log work and these
corrections (about two to four passes' time on a machine whose vector engine is
slow next to its memory), still less than the tensor ops that compose them.
"""

from __future__ import annotations

import numpy as np

import kernbench.kernels.language as tl
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid

__all__ = ["ACTIVATIONS", "launch_activation", "launch_glu", "log1p_small"]

ACTIVATIONS = (
    "softplus", "leaky_relu", "elu", "hardsigmoid", "hardswish", "mish", "logsigmoid",
    "softsign", "tanhshrink",
)  # fmt: skip


@jit
def log1p_small(e):
    # log(1 + e) without losing e's digits when it is small: log(u) * e / (u - 1).
    u = 1.0 + e
    return tl.where(u == 1.0, e, tl.log(u) * e / tl.where(u == 1.0, 1.0, u - 1.0))


@jit
def _expm1(x):
    # exp(x) - 1 for x <= 0 without cancellation near 0: (u - 1) * x / log(u).
    u = tl.exp(x)
    edge = (u == 1.0) | (u == 0.0)
    r = (u - 1.0) * x / tl.log(tl.where(edge, 2.0, u))
    return tl.where(u == 1.0, x, tl.where(u == 0.0, -1.0, r))


@jit
def _tanh(x):
    # tanh(x) = sign(x) * -expm1(-2|x|) / (2 + expm1(-2|x|)), exact near 0 and saturating.
    m = _expm1(-2.0 * tl.abs(x))
    t = -m / (2.0 + m)
    return tl.where(x < 0, -t, t)


@jit
def _activation_kernel(
    x_ptr, out_ptr, n, a, b, c, OP: tl.constexpr, BLOCK: tl.constexpr
):  # fmt: skip
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=0).to(tl.float64)
    if OP == "softplus":  # a: beta, b: threshold
        z = x * a
        y = tl.where(z > b, x, log1p_small(tl.exp(tl.where(z > b, 0.0, z))) / a)
    elif OP == "leaky_relu":  # a: negative_slope
        y = tl.where(x > 0, x, x * a)
    elif OP == "elu":  # a: alpha, b: scale, c: input_scale (elu, selu and celu)
        y = tl.where(x > 0, x * b, _expm1(tl.where(x > 0, 0.0, x * c)) * (a * b))
    elif OP == "hardsigmoid":
        y = tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0
        y = tl.where(x != x, x, y)
    elif OP == "hardswish":
        y = x * tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0
    elif OP == "mish":
        s = tl.where(x > 20.0, x, log1p_small(tl.exp(tl.where(x > 20.0, 0.0, x))))
        y = x * _tanh(s)
    elif OP == "logsigmoid":
        y = tl.minimum(x, 0.0) - log1p_small(tl.exp(-tl.abs(x)))  # NaN through the exp
    elif OP == "softsign":
        y = x / (1.0 + tl.abs(x))
    else:  # tanhshrink
        y = x - _tanh(x)
    tl.store(out_ptr + i, y, mask=mask)


@jit
def _glu_kernel(x_ptr, out_ptr, n, HALF, BLOCK: tl.constexpr):
    # The input is (A, 2 * HALF) elements a row: out[r, k] = x[r, k] * sigmoid(x[r, HALF + k]).
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    first = (i // HALF) * (2 * HALF) + i % HALF
    a = tl.load(x_ptr + first, mask=mask, other=0).to(tl.float64)
    b = tl.load(x_ptr + first + HALF, mask=mask, other=0).to(tl.float64)
    tl.store(out_ptr + i, a * tl.sigmoid(b), mask=mask)


def launch_activation(
    op: str, x: DeviceTensor, out: DeviceTensor, a: float = 0.0, b: float = 0.0, c: float = 0.0
) -> None:
    """``out = op(x; a, b, c)`` elementwise over equal-sized contiguous buffers."""
    n = x.numel
    _activation_kernel[elementwise_grid(n, op)](
        x, out, n, np.float64(a), np.float64(b), np.float64(c), OP=op, BLOCK=BLOCK
    )


def launch_glu(x: DeviceTensor, out: DeviceTensor, half: int) -> None:
    """``out`` (rows of ``half``) = first half * sigmoid(second half) of ``x``'s rows of
    ``2 * half`` elements (``x`` viewed with the split dim and all after it flattened)."""
    n = out.numel
    _glu_kernel[elementwise_grid(n, "glu")](x, out, n, max(half, 1), BLOCK=BLOCK)
