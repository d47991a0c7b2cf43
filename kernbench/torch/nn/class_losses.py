"""``nll_loss`` and ``cross_entropy`` on the device, from the tensor operations.

Both take PyTorch's shapes: ``input`` (C,), (N, C) or (N, C, d1, ...) with the
classes along dim 1 (dim 0 for one sample), ``target`` the class of each sample
((), (N,) or (N, d1, ...)) or, for ``cross_entropy``, probabilities of
``input``'s shape.  The picked log-probabilities come from a one-hot mask (an
``arange`` of the classes compared with the target), ``where`` and a sum over
the classes, so each step is a device kernel and costs simulated time; torch
gathers by index in one kernel.  ``cross_entropy`` is ``log_softmax`` (one
kernel) then the same steps.

Decisions a PyTorch user would otherwise have to guess:

* torch takes class indices in int64 only ("Long"); there is no int64 here, so
  any integer dtype is taken (int32, int16, int8, uint8, ...).
* A class outside [0, C) that is not ``ignore_index`` raises a
  :class:`~kernbench.errors.TensorError` naming the call and the value (torch
  asserts on the device).  The check looks at the values in memory without the
  machine (no simulated time, as torch's assert is part of its kernel); in
  timing-only mode there are no values and nothing is checked.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.runtime.dtypes import DTYPES
from kernbench.torch.dtypes import BOOL
from kernbench.torch.factories import arange
from kernbench.torch.logic import where
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
    classes = x.shape[class_dim]
    same_device(call, x, target, *(() if weight is None else (weight,)))
    w_view = None if weight is None else _weight_view(call, x, weight, class_dim)
    probabilities = what == "cross_entropy" and tuple(target.shape) == tuple(x.shape)
    if probabilities:
        return _probability_loss(
            call, x, target, w_view, int(ignore_index), reduction, float(label_smoothing)
        )
    _check_class_target(call, x, target, class_dim, int(ignore_index))
    logp = x.log_softmax(class_dim) if what == "cross_entropy" else x
    view_shape = [1] * x.ndim
    view_shape[class_dim] = classes
    t = target.unsqueeze(class_dim)
    labels = arange(classes, device=x.get_device())
    mask = labels.view(view_shape) == t  # one-hot over the classes: (N, C, d1, ...)
    labels.free()
    # Targets of a class out of range match no label, so an ignore_index outside [0, C)
    # needs a mask of its own only for the smoothing term, which takes every class.
    ignored = None
    a_class = 0 <= ignore_index < classes
    if (a_class or label_smoothing) and _holds(target, int(ignore_index)):
        ignored = t == int(ignore_index)  # (N, 1, d1, ...)
        if a_class:
            mask.masked_fill_(ignored, False)
    picked = where(mask, logp, 0.0)
    if w_view is not None:
        picked.mul_(w_view)
    total = picked.sum(class_dim)  # the weighted log-probability of each target
    picked.free()
    if label_smoothing:
        # torch: (1 - e) * nll + e / C * -(sum of the weighted log-probabilities)
        spread = logp * w_view if w_view is not None else logp
        smooth = spread.sum(class_dim)
        if spread is not logp:
            spread.free()
        smooth.mul_(float(label_smoothing) / classes).add_(total, alpha=1.0 - label_smoothing)
        total.free()
        total = smooth
        if ignored is not None:
            total.masked_fill_(ignored.squeeze(class_dim), 0.0)
    if ignored is not None:
        ignored.free()
    if logp is not x:
        logp.free()
    if reduction == "none":
        mask.free()
        return _negated(total)
    summed = _negated(total.sum())
    total.free()
    if reduction == "sum":
        mask.free()
        return summed
    # 'mean': over the weights of the targets taken (their count without weights), as torch
    if w_view is not None:
        taken = where(mask, w_view, 0.0)
        count = taken.sum()
        taken.free()
    else:
        count = mask.sum()
    mask.free()
    out = summed / count
    summed.free()
    count.free()
    return out


def _negated(t: Tensor) -> Tensor:
    """``0 - t``: ``-t`` would give -0.0 where nothing was taken (torch gives 0.0)."""
    out = 0.0 - t
    t.free()
    return out


def _weight_view(call: str, x: Tensor, weight: Any, class_dim: int) -> Tensor:
    """``weight`` as a view that broadcasts along the classes of ``x``."""
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
    shape = [1] * x.ndim
    shape[class_dim] = classes
    return weight.reshape(shape)


def _holds(target: Tensor, value: int) -> bool:
    """Whether ``target``'s dtype can hold ``value`` (uint8 cannot hold -100)."""
    info = np.iinfo(DTYPES[target.dtype.name].storage)
    return int(info.min) <= value <= int(info.max)


def _check_class_target(
    call: str, x: Tensor, target: Tensor, class_dim: int, ignore_index: int
) -> None:
    """A target of class indices: an integer dtype, ``input``'s shape without the classes,
    each value a class or ``ignore_index``."""
    if target.dtype.is_floating_point or target.dtype is BOOL:
        raise TensorError(
            f"{call}: expected a target of class indices in an integer dtype, but found "
            f"{target.dtype!r} (torch: expected scalar type Long; kernbench has no int64 and "
            "takes int32, int16, int8 or uint8); probabilities take input's shape "
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


def _probability_loss(
    call: str,
    x: Tensor,
    target: Tensor,
    w_view: Tensor | None,
    ignore_index: int,
    reduction: str,
    label_smoothing: float,
) -> Tensor:
    """``cross_entropy`` against class probabilities of ``x``'s shape."""
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
    class_dim = 0 if x.ndim == 1 else 1
    classes = x.shape[class_dim]
    logp = x.log_softmax(class_dim)
    products = logp * target
    if label_smoothing:
        # torch smooths the target: target * (1 - e) + e / C
        products.mul_(1.0 - label_smoothing).add_(logp, alpha=label_smoothing / classes)
    logp.free()
    if w_view is not None:
        products.mul_(w_view)
    if reduction == "none":
        total = products.sum(class_dim)
        products.free()
        return _negated(total)
    summed = _negated(products.sum())
    products.free()
    if reduction == "sum":
        return summed
    # 'mean': over the samples (each element of input without the classes), as torch
    out = summed / (x.numel() // classes) if x.numel() else summed.fill_(float("nan"))
    if out is not summed:
        summed.free()
    return out
