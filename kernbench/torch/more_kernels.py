"""Device kernels behind ``linspace``/``logspace`` and ``nan_to_num``.

``linspace`` writes ``start + i * step`` for the first half of the points and
``end - (steps - 1 - i) * step`` for the second, as torch's kernel does (so
both ends are exact), in float64, and ``logspace`` raises ``base`` to it; one
write an element.  ``nan_to_num`` replaces NaN, +inf and -inf in one pass.
"""

from __future__ import annotations

import math

import numpy as np

import kernbench.kernels.language as tl
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, elementwise_grid

__all__ = ["launch_linspace", "launch_nan_to_num"]


@jit
def _linspace_kernel(
    out_ptr, n, start, end, step, log_base, LOG: tl.constexpr, BLOCK: tl.constexpr
):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k = i.to(tl.float64)
    half = n // 2
    v = tl.where(i < half, start + k * step, end - (n - 1 - i).to(tl.float64) * step)
    if LOG:
        v = tl.exp(v * log_base)
    tl.store(out_ptr + i, v, mask=i < n)


@jit
def _nan_to_num_kernel(x_ptr, out_ptr, n, nan, posinf, neginf, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask, other=0)
    y = tl.where(x != x, nan, x)
    y = tl.where(x == float("inf"), posinf, y)
    y = tl.where(x == float("-inf"), neginf, y)
    tl.store(out_ptr + i, y, mask=mask)


def launch_linspace(
    out: DeviceTensor, n: int, start: float, end: float, *, log_base: float | None = None
) -> None:
    """``out`` = ``n`` points from ``start`` to ``end`` (``log_base ** point`` with
    ``log_base``)."""
    step = (end - start) / (n - 1) if n > 1 else 0.0
    if n == 1:
        end = start  # one point: start, as torch
    # NumPy float64 scalars reach the kernel as float64 (a Python float would be float32)
    _linspace_kernel[elementwise_grid(n, "linspace")](
        out,
        n,
        np.float64(start),
        np.float64(end),
        np.float64(step),
        np.float64(math.log(log_base) if log_base else 0.0),
        LOG=log_base is not None,
        BLOCK=BLOCK,
    )


def launch_nan_to_num(
    x: DeviceTensor, out: DeviceTensor, nan: float, posinf: float, neginf: float
) -> None:
    """``out`` = ``x`` with NaN, +inf and -inf replaced, elementwise."""
    n = x.numel
    _nan_to_num_kernel[elementwise_grid(n, "nan_to_num")](
        x, out, n, np.float64(nan), np.float64(posinf), np.float64(neginf), BLOCK=BLOCK
    )
