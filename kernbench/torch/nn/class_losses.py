"""``nll_loss`` and ``cross_entropy`` on the device, structured as torch's.

Both take PyTorch's shapes: ``input`` (C,), (N, C) or (N, C, d1, ...) with the
classes along dim 1 (dim 0 for one sample), ``target`` the class of each sample
((), (N,) or (N, d1, ...)) or, for ``cross_entropy``, probabilities of
``input``'s shape.  ``cross_entropy`` is ``log_softmax`` (one kernel, a read and
a write of the logits) then ``nll_loss``: one kernel that gathers each sample's
target log-probability and weight
(:mod:`~kernbench.torch.nn.loss_kernels`), then a sum for ``'sum'`` and
``'mean'`` (the losses and the weights side by side, one launch) and a
division for ``'mean'``.  Label smoothing and probability targets add a sum
over the classes inside the gather kernel (a read of the log-probabilities,
as torch's smoothing term).

Decisions a PyTorch user would otherwise have to guess:

* torch takes class indices in int64 ("Long"); any integer dtype is taken here
  (int64, int32, int16, int8, uint8, ...), so scripts written before int64
  existed here keep running.
* A class outside [0, C) that is not ``ignore_index`` raises a
  :class:`~kernbench.errors.TensorError` naming the call and the value (torch
  asserts on the device).  The check looks at the values in memory without the
  machine (no simulated time, as torch's assert is part of its kernel); in
  timing-only mode there are no values and nothing is checked.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.dtypes import BOOL
from kernbench.torch.nn.loss_kernels import launch_class_loss
from kernbench.torch.views import same_device

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["class_loss"]


def class_loss(
    what: str,
    input: Tensor,  # noqa: A002 - torch's name
    target: Tensor,
    weight: Tensor | None,
    ignore_index: Any,
    reduction: str,
    label_smoothing: Any = 0.0,
) -> Tensor:
    """``what`` ("nll_loss" or "cross_entropy") of log-probabilities (``nll_loss``) or
    scores (``cross_entropy``, through ``log_softmax``) against ``target``, reduced by
    ``reduction`` ("none", "sum" or "mean", already resolved from torch's legacy
    arguments)."""
    call = f"torch.nn.functional.{what}"
    x = input
    if not x.dtype.is_floating_point:
        raise TensorError(
            f"{call}: input must be a floating tensor, got {x.dtype!r} (as torch); call "
            ".float() first"
        )
    if x.ndim < 1:
        raise TensorError(f"{call}: Expected 1 or more dimensions (got 0) for input (as torch)")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
        raise TensorError(f"{call}: ignore_index must be an int, got {ignore_index!r}")
    if (
        isinstance(label_smoothing, bool)
        or not isinstance(label_smoothing, numbers.Real)
        or not 0.0 <= label_smoothing <= 1.0
    ):
        raise TensorError(
            f"{call}: label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"
        )
    class_dim = 0 if x.ndim == 1 else 1
    if weight is not None:
        _check_weight(call, x, weight, class_dim)
    same_device(call, x, target, *(() if weight is None else (weight,)))
    probabilities = what == "cross_entropy" and tuple(target.shape) == tuple(x.shape)
    if probabilities:
        _check_probability_target(call, target, int(ignore_index))
    else:
        _check_class_target(call, x, target, class_dim, int(ignore_index))
    logp = x.log_softmax(class_dim) if what == "cross_entropy" else x.dense()
    losses = _sample_losses(
        logp,
        target,
        weight,
        class_dim,
        ignore_index=int(ignore_index),
        label_smoothing=float(label_smoothing),
        probabilities=probabilities,
        taken=reduction == "mean" and not probabilities,
    )
    if logp is not x:
        logp.free()
    if reduction == "none":
        return losses
    if reduction == "sum" or probabilities:
        summed = losses.sum()
        losses.free()
        if reduction == "sum":
            return summed
        # 'mean' of probability targets: over the samples, as torch
        samples = x.numel() // x.shape[class_dim]
        out = summed / samples if samples else summed.fill_(float("nan"))
        if out is not summed:
            summed.free()
        return out
    # 'mean' of class targets: over the weights of the targets taken (their count without
    # weights), as torch; losses holds each sample's loss and, after them, its weight
    sums = losses.sum(1)
    losses.free()
    out = sums[0] / sums[1]
    sums.free()
    return out


def _sample_losses(
    logp: Tensor,
    target: Tensor,
    weight: Tensor | None,
    class_dim: int,
    *,
    ignore_index: int,
    label_smoothing: float,
    probabilities: bool,
    taken: bool,
) -> Tensor:
    """Each sample's loss (``logp``'s shape without the classes), by one gather kernel;
    with ``taken`` a (2, samples) tensor, the samples' weights after their losses."""
    shape = tuple(logp.shape)
    classes = shape[class_dim]
    samples = shape[:class_dim] + shape[class_dim + 1 :]
    n = math.prod(samples)
    out = logp.new_empty((2, n) if taken else samples)
    if not out.numel():
        return out
    temps = []
    tgt = target.dense()
    if tgt is not target:
        temps.append(tgt)
    w = None
    if weight is not None:
        w = weight.dense()
        if w is not weight:
            temps.append(w)
    launch_class_loss(
        logp.device_tensor,
        tgt.device_tensor,
        None if w is None else w.device_tensor,
        out.device_tensor,
        (math.prod(shape[:class_dim]), classes, math.prod(shape[class_dim + 1 :])),
        ignore_index=ignore_index,
        label_smoothing=label_smoothing,
        probabilities=probabilities,
        taken=taken,
    )
    for t in temps:
        t.free()
    return out


def _check_weight(call: str, x: Tensor, weight: Any, class_dim: int) -> None:
    """``weight``: one value of ``x``'s dtype for each class."""
    classes = x.shape[class_dim]
    if not hasattr(weight, "storage_device_tensor"):
        raise TensorError(f"{call}: weight must be a Tensor or None, got {type(weight).__name__}")
    if weight.ndim != 1 or weight.numel() != classes:
        raise TensorError(
            f"{call}: weight tensor should be defined either for all {classes} classes or no "
            f"classes but got weight tensor of shape: {list(weight.shape)} (as torch)"
        )
    if weight.dtype is not x.dtype:
        raise TensorError(
            f"{call}: weight is {weight.dtype!r} and input {x.dtype!r}; give them one dtype "
            "(as torch)"
        )


def _check_class_target(
    call: str, x: Tensor, target: Tensor, class_dim: int, ignore_index: int
) -> None:
    """A target of class indices: an integer dtype, ``input``'s shape without the classes,
    each value a class or ``ignore_index``."""
    if target.dtype.is_floating_point or target.dtype is BOOL:
        raise TensorError(
            f"{call}: expected a target of class indices in an integer dtype, but found "
            f"{target.dtype!r} (torch: expected scalar type Long; "
            "int64, or another integer dtype here); probabilities take input's shape "
            f"{tuple(x.shape)} (cross_entropy)"
        )
    expected = tuple(x.shape[:class_dim]) + tuple(x.shape[class_dim + 1 :])
    if tuple(target.shape) != expected:
        if x.ndim > 1 and target.ndim and target.shape[0] != x.shape[0]:
            problem = (
                f"Expected input batch_size ({x.shape[0]}) to match target batch_size "
                f"({target.shape[0]})"
            )
        else:
            problem = f"Expected target size {list(expected)}, got {list(target.shape)}"
        raise TensorError(f"{call}: {problem} (input of shape {tuple(x.shape)}, as torch)")
    if target.storage_device_tensor.context.timing_only or not target.numel():
        return
    values = target.peek().astype(np.int64)
    classes = x.shape[class_dim]
    bad = values[((values < 0) | (values >= classes)) & (values != ignore_index)]
    if bad.size:
        raise TensorError(
            f"{call}: Target {int(bad.flat[0])} is out of bounds (the classes are 0 to "
            f"{classes - 1}, ignore_index is {ignore_index}; torch asserts on the device)"
        )


def _check_probability_target(call: str, target: Tensor, ignore_index: int) -> None:
    """Class probabilities: floating, and no ``ignore_index`` (as torch)."""
    if not target.dtype.is_floating_point:
        raise TensorError(
            f"{call}: Expected floating point type for target with class probabilities, got "
            f"{target.dtype!r} (as torch); class indices take input's shape without the "
            "classes"
        )
    if ignore_index >= 0:
        raise TensorError(
            f"{call}: ignore_index is not supported for floating point target (as torch; got "
            f"{ignore_index})"
        )
