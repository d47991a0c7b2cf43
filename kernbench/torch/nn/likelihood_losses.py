"""``torch.nn.functional.poisson_nll_loss`` and ``gaussian_nll_loss``: negative
log-likelihoods written as torch's references write them, with tensor methods (``exp``,
``log``, ``masked_fill``, ...), so autograd records them method by method.

``gaussian_nll_loss`` clamps the variance at ``eps`` for the forward only: torch clamps a
clone under ``no_grad``, so the gradient reaches ``var`` as if unclamped, and so it does
here (the clamp's change is added detached).  Its check for negative variances reads
``var`` on the host, as torch's ``torch.any(var < 0)`` does; timing-only runs, which have
no values, skip it.
"""

from __future__ import annotations

import math
from typing import Any

from kernbench.errors import TensorValueError
from kernbench.torch.nn.argument_checks import (
    call_name,
    floating_input,
    host_values,
    number_argument,
    reduced,
    reduction_argument,
)
from kernbench.torch.shapes import flag_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["gaussian_nll_loss", "poisson_nll_loss"]


def poisson_nll_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: Any = None,
    eps: float = 1e-8,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``exp(x) - t * x`` (``log_input``) or ``x - t * log(x + eps)``; ``full`` adds
    Stirling's ``t * log(t) - t + 0.5 * log(2 * pi * t)`` where ``t > 1``."""
    what = "poisson_nll_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    x = floating_input(input, what)
    t = tensor_argument(target, call_name(what))
    eps = number_argument(eps, what, "eps")
    if flag_argument(log_input, call_name(what), "log_input"):
        loss = x.exp() - t * x
    else:
        loss = x - t * (x + eps).log()
    if flag_argument(full, call_name(what), "full"):
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + stirling.masked_fill(t <= 1, 0.0)
    return reduced(loss, reduction)


def gaussian_nll_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    var: Tensor | float,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """``0.5 * (log(var) + (x - t) ** 2 / var)`` (``+ 0.5 * log(2 * pi)`` when ``full``),
    ``var`` clamped at ``eps``; ``var`` has ``input``'s shape, or it without the last dim,
    or with a last dim of 1 (one variance per sample), or is one number for all."""
    what = "gaussian_nll_loss"
    x = floating_input(input, what)
    t = tensor_argument(target, call_name(what))
    if isinstance(var, int | float) and not isinstance(var, bool):
        v = x.new_full(tuple(x.shape), float(var))  # torch takes one variance for all
    else:
        v = floating_input(var, what, "var")
    in_shape, var_shape = tuple(x.shape), tuple(v.shape)
    if var_shape != in_shape:
        if in_shape[:-1] == var_shape:
            v = v.unsqueeze(-1)
        elif not (in_shape[:-1] == var_shape[:-1] and var_shape[-1:] == (1,)):
            raise TensorValueError(f"{call_name(what)}: var is of incorrect size")
    reduction = reduction_argument(what, reduction)
    eps = number_argument(eps, what, "eps")
    values = host_values(v)
    if values is not None and (values < 0).any():
        raise TensorValueError(f"{call_name(what)}: var has negative entry/entries")
    clamped = v + (v.clamp_min(eps) - v).detach()
    loss = (clamped.log() + (x - t).pow(2) / clamped) * 0.5
    if flag_argument(full, call_name(what), "full"):
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduced(loss, reduction)
