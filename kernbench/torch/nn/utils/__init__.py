"""``torch.nn.utils``: gradient clipping over the tensors' ``grad`` slots, the
parameter helpers of :mod:`~kernbench.torch.nn.utils.convert_parameters`, and the
hook-based ``weight_norm`` and ``spectral_norm`` (:mod:`~kernbench.torch.nn.utils.
weight_norm`, :mod:`~kernbench.torch.nn.utils.spectral_norm`).

``clip_grad_norm_`` is torch 2.6's two halves: ``get_total_norm`` takes each
gradient's norm (one reduction each) and the norm of those norms;
``clip_grads_with_norm_`` scales every gradient in place by
``min(1, max_norm / (total + 1e-6))`` as torch's (a few tiny kernels and one
multiply a gradient); the scale stays on the device, so nothing is read to
the host unless ``error_if_nonfinite`` asks (torch reads it too).
``rnn`` is :mod:`kernbench.torch.nn.utils.rnn` (packed sequences); ``parametrize``
and ``parametrizations`` are :mod:`kernbench.torch.nn.utils.parametrize` and
:mod:`kernbench.torch.nn.utils.parametrizations`; ``prune`` is
:mod:`kernbench.torch.nn.utils.prune` (pruning by masks and forward pre-hooks).
``clip_grad_value_`` clamps each gradient in place.  The gradients are
the ``grad`` slots (filled by ``backward()`` or assigned); the functions named in
``UNTRACKED`` run with recording off, as torch runs them under ``no_grad``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from kernbench.errors import TensorAttributeError, TensorError, TensorTypeError
from kernbench.torch.factories import stack, tensor
from kernbench.torch.nn.utils import parametrizations as parametrizations  # submodule
from kernbench.torch.nn.utils import parametrize as parametrize  # submodule, not wrapped
from kernbench.torch.nn.utils import prune as prune  # torch.nn.utils.prune, not wrapped
from kernbench.torch.nn.utils import rnn as rnn  # torch.nn.utils.rnn, not wrapped
from kernbench.torch.nn.utils.convert_parameters import (
    parameters_to_vector,
    vector_to_parameters,
)
from kernbench.torch.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from kernbench.torch.nn.utils.weight_norm import remove_weight_norm, weight_norm
from kernbench.torch.shapes import flag_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "parameters_to_vector",
    "remove_spectral_norm",
    "remove_weight_norm",
    "spectral_norm",
    "vector_to_parameters",
    "weight_norm",
]

# Run with recording off (torch's @no_grad, or a change of .data that torch leaves out).
UNTRACKED = (
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "remove_spectral_norm",
    "remove_weight_norm",
    "vector_to_parameters",
)


def _gradients(parameters: Any, what: str) -> list[Tensor]:
    items = [parameters] if isinstance(parameters, Tensor) else parameters
    try:
        items = list(items)
    except TypeError:
        raise TensorError(
            f"torch.nn.utils.{what}: parameters must be a Tensor or an iterable of Tensors, "
            f"got {type(parameters).__name__}"
        ) from None
    for p in items:
        if not isinstance(p, Tensor):
            raise TensorError(
                f"torch.nn.utils.{what}: parameters must be Tensors, got {type(p).__name__}"
            )
    return [p.grad for p in items if p.grad is not None]


def _number(value: Any, what: str, name: str) -> float:
    if isinstance(value, str) and value in ("inf", "-inf"):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorError(f"torch.nn.utils.{what}: {name} must be a number, got {value!r}")
    return float(value)


def _norm(t: Tensor, order: float) -> Tensor:
    if math.isinf(order):
        return t.abs().amax() if order > 0 else t.abs().amin()
    return t.norm(order)


def _order(norm_type: Any, what: str) -> float:
    order = _number(norm_type, what, "norm_type")
    if order not in (1.0, 2.0, math.inf):
        raise TensorError(
            f"torch.nn.utils.{what}: norm_type is 1, 2 or inf here, got {norm_type!r}"
        )
    return order


def _total_norm(grads: list[Tensor], order: float, check: bool, what: str) -> Tensor:
    if not grads:
        return tensor(0.0)
    norms = [_norm(g, order) for g in grads]
    total = _norm(stack(norms), order) if len(norms) > 1 else norms[0]
    if check and not total.storage_device_tensor.context.timing_only:
        value = total.item()
        if not math.isfinite(value):
            raise TensorError(
                f"torch.nn.utils.{what}: The total norm of order {order} for gradients from "
                "`parameters` is non-finite, so it cannot be clipped. To disable this error "
                "and scale the gradients by the non-finite norm anyway, set "
                "`error_if_nonfinite=False`"
            )
    return total


def _scale(grads: list[Tensor], max_norm: float, total: Tensor) -> None:
    coefficient = (total + 1e-6).reciprocal_().mul_(max_norm).clamp_max_(1.0)
    for g in grads:
        g.mul_(coefficient if coefficient.dtype is g.dtype else coefficient.to(g.dtype))


def get_total_norm(
    tensors: Any,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The ``norm_type``-norm (1, 2 or inf) of ``tensors`` (a Tensor or an iterable of them,
    typically the gradients) taken together, as if concatenated; 0 for none, as torch's."""
    what = "get_total_norm"
    items = [tensors] if isinstance(tensors, Tensor) else tensors
    try:
        items = list(items)
    except TypeError:
        raise TensorTypeError(
            f"torch.nn.utils.{what}: tensors must be a Tensor or an iterable of Tensors, "
            f"got {type(tensors).__name__}"
        ) from None
    for t in items:
        if not isinstance(t, Tensor):
            raise TensorTypeError(
                f"torch.nn.utils.{what}: tensors must be Tensors, got {type(t).__name__}"
            )
    order = _order(norm_type, what)
    check = flag_argument(error_if_nonfinite, f"torch.nn.utils.{what}", "error_if_nonfinite")
    return _total_norm(items, order, check, what)


def clip_grads_with_norm_(
    parameters: Any, max_norm: float, total_norm: Tensor, foreach: bool | None = None
) -> None:
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``, with
    ``total_norm`` given (from :func:`get_total_norm`), as torch's."""
    what = "clip_grads_with_norm_"
    grads = _gradients(parameters, what)
    max_norm = _number(max_norm, what, "max_norm")
    if not grads:  # as torch's, which looks at total_norm only when there is a gradient
        return
    if not isinstance(total_norm, Tensor):
        raise TensorTypeError(
            f"torch.nn.utils.{what}: total_norm must be a Tensor (get_total_norm's result), "
            f"got {type(total_norm).__name__}"
        )
    _scale(grads, max_norm, total_norm)


def clip_grad_norm_(
    parameters: Any,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients in place so that their total ``norm_type``-norm (1, 2 or inf)
    is at most ``max_norm``; returns the total norm (before clipping), as torch's
    (``get_total_norm`` of the gradients, then ``clip_grads_with_norm_``)."""
    what = "clip_grad_norm_"
    grads = _gradients(parameters, what)
    max_norm = _number(max_norm, what, "max_norm")
    order = _order(norm_type, what)
    check = flag_argument(error_if_nonfinite, f"torch.nn.utils.{what}", "error_if_nonfinite")
    total = _total_norm(grads, order, check, what)
    if grads:
        _scale(grads, max_norm, total)
    return total


def clip_grad_value_(parameters: Any, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient to ``[-clip_value, clip_value]`` in place, as torch's."""
    what = "clip_grad_value_"
    value = _number(clip_value, what, "clip_value")
    for g in _gradients(parameters, what):
        g.clamp_(-value, value)


def __getattr__(name: str) -> Any:
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn.utils' has no attribute {name!r}: there are "
        f"{', '.join(__all__)} and the modules parametrize, parametrizations, prune and rnn"
    )
