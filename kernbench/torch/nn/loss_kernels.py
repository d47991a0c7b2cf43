"""The device kernel behind ``nll_loss`` and ``cross_entropy``: each sample's loss.

torch computes ``cross_entropy`` as ``log_softmax`` (one kernel) and then
``nll_loss``, which gathers each sample's target log-probability by index and
reduces.  This kernel is that gather: per sample it reads the target, the one
log-probability the target names and the class weight, and writes the
sample's loss (and for ``'mean'`` its weight, the divisor) — memory in the
number of samples, not samples x classes.  Label smoothing adds a sum of the
sample's (weighted) log-probabilities over the classes, and class-probability
targets are such a sum of log-probability x probability: one more read of
(samples, classes), torch's smoothing term, in the same kernel.
"""

from __future__ import annotations

import kernbench.kernels.language as tl
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, check_elements, float_type, reduction_blocks

__all__ = ["launch_class_loss"]


@jit(do_not_specialize=["ignore", "keep", "spread"])
def _class_loss_kernel(
    logp_ptr,
    target_ptr,
    w_ptr,
    out_ptr,
    n,
    C,
    D,
    ignore,
    keep,
    spread,
    HAS_W: tl.constexpr,
    FT: tl.constexpr,
    PROBS: tl.constexpr,
    SMOOTH: tl.constexpr,
    TAKEN: tl.constexpr,
    OBLOCK: tl.constexpr,
    RBLOCK: tl.constexpr,
):
    # Sample s = (a, d) of logp viewed as (A, C, D), classes in the middle.  A class target
    # t: loss -(keep * w[t] * logp[a, t, d] + spread * sum_c w[c] * logp[a, c, d]), 0 where
    # t is ignore (keep 1, spread 0 without smoothing); with TAKEN its weight (0 where
    # ignored) goes to out[n + s].  Probabilities p: -sum_c w[c] * logp * (keep * p + spread).
    # Values in FT, float32 (torch's accumulate type) or float64 for float64 values,
    # rounded once by the store.
    s = tl.program_id(0) * OBLOCK + tl.arange(0, OBLOCK)
    s_mask = s < n
    base = (s // D) * (C * D) + s % D
    if PROBS:
        acc = tl.zeros((OBLOCK, RBLOCK), FT)
        for start in range(0, C, RBLOCK):
            r = start + tl.arange(0, RBLOCK)
            mask = s_mask[:, None] & (r < C)[None, :]
            offsets = base[:, None] + r[None, :] * D
            lp = tl.load(logp_ptr + offsets, mask=mask, other=0).to(FT)
            p = tl.load(target_ptr + offsets, mask=mask, other=0).to(FT)
            if SMOOTH:
                p = p * keep + spread
            term = lp * p
            if HAS_W:
                term = term * tl.load(w_ptr + r, mask=r < C, other=0).to(FT)[None, :]
            acc += term
        tl.store(out_ptr + s, 0.0 - tl.sum(acc, axis=1), mask=s_mask)
    else:
        t = tl.load(target_ptr + s, mask=s_mask, other=0).to(tl.int32)
        valid = s_mask & (t != ignore)
        t = tl.where(valid, t, 0)
        lp = tl.load(logp_ptr + base + t * D, mask=valid, other=0).to(FT)
        if HAS_W:
            w = tl.load(w_ptr + t, mask=valid, other=0).to(FT)
        else:
            w = valid.to(FT)
        loss = lp * w
        if SMOOTH:
            acc = tl.zeros((OBLOCK, RBLOCK), FT)
            for start in range(0, C, RBLOCK):
                r = start + tl.arange(0, RBLOCK)
                mask = s_mask[:, None] & (r < C)[None, :]
                x = tl.load(logp_ptr + base[:, None] + r[None, :] * D, mask=mask, other=0)
                x = x.to(FT)
                if HAS_W:
                    x = x * tl.load(w_ptr + r, mask=r < C, other=0).to(FT)[None, :]
                acc += x
            loss = tl.where(valid, tl.sum(acc, axis=1) * spread + loss * keep, 0.0)
        tl.store(out_ptr + s, 0.0 - loss, mask=s_mask)  # 0.0 where ignored, not -0.0
        if TAKEN:
            tl.store(out_ptr + n + s, w, mask=s_mask)


def launch_class_loss(
    logp: DeviceTensor,
    target: DeviceTensor,
    weight: DeviceTensor | None,
    out: DeviceTensor,
    shape: tuple[int, int, int],
    *,
    ignore_index: int,
    label_smoothing: float,
    probabilities: bool,
    taken: bool,
) -> None:
    """Each sample's loss of log-probabilities ``logp`` viewed as ``shape`` (samples before
    the classes, classes, samples after) into ``out[:n]``; with ``taken`` (class targets)
    each sample's weight into ``out[n:2n]``.  ``target`` holds a class index per sample
    (any integer dtype) or, with ``probabilities``, ``logp``'s shape of probabilities."""
    before, classes, after = shape
    n = before * after
    check_elements(before * classes * after, "a class loss")
    smooth = bool(label_smoothing)
    if probabilities or smooth:
        # The sum over the classes streams (samples, classes) once: tiles of about BLOCK
        # elements, as the elementwise kernels take, so it costs that pass.
        rblock = reduction_blocks(1, classes)[1]
        oblock = tl.next_power_of_2(max(1, min(n, BLOCK // rblock)))
    else:
        oblock, rblock = BLOCK, 1
    _class_loss_kernel[(max(1, -(-n // oblock)),)](
        logp,
        target,
        logp if weight is None else weight,
        out,
        n,
        classes,
        after,
        ignore_index,
        typed_scalar(1.0 - label_smoothing, logp.dtype),
        typed_scalar(label_smoothing / classes, logp.dtype),
        HAS_W=weight is not None,
        FT=float_type(logp.dtype),
        PROBS=probabilities,
        SMOOTH=smooth,
        TAKEN=taken,
        OBLOCK=oblock,
        RBLOCK=rblock,
    )
