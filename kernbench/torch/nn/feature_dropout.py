"""Channel-wise dropout: ``torch.nn.functional.dropout1d``/``dropout2d``/``dropout3d`` and
the modules ``nn.Dropout1d``/``nn.Dropout2d``/``nn.Dropout3d``.

As torch's ``feature_dropout``: in training, each (sample, channel) of an input shaped
``(N, C, *spatial)`` is kept with probability ``1 - p`` and scaled by ``1 / (1 - p)``, or
zeroed whole.  The keep mask, ``(N, C, 1, ...)``, is drawn on the host from the rank's
generator (one draw per channel, as ``dropout``'s mask is drawn per element) and the
input multiplied by it broadcast, so autograd records an ordinary multiplication.
``dropout1d`` and ``dropout3d`` take an input without a batch dimension too (2-D and 4-D);
``dropout2d`` reads a 3-D input as ``(N, C, L)`` with torch's warning.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np

from kernbench.errors import TensorError, user_stacklevel
from kernbench.torch.nn.module import Module
from kernbench.torch.sampling import keep_mask
from kernbench.torch.shapes import flag_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["Dropout1d", "Dropout2d", "Dropout3d", "dropout1d", "dropout2d", "dropout3d"]


def _probability(p: Any, what: str) -> float:
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise TensorError(
            f"torch.nn.functional.{what}: dropout probability has to be between 0 and 1, "
            f"but got {p}"
        )
    return float(p)


def _feature_dropout(x: Tensor, p: float, training: bool, inplace: bool, what: str) -> Tensor:
    """torch's ``feature_dropout`` over an input with a batch and a channel dimension."""
    if not training or p == 0 or x.numel() == 0:
        return x
    if p == 1:
        return x.mul_(0) if inplace else x * 0  # as torch: times zero, NaN stays NaN
    if not x.dtype.is_floating_point:
        raise TensorError(
            f"torch.nn.functional.{what}: input must be a floating tensor, got {x.dtype!r} "
            "(torch cannot scale it either); call .float() first"
        )
    shape = (x.shape[0], x.shape[1], *([1] * (x.ndim - 2)))
    mask = keep_mask(x, 1.0 - p, what, shape=shape)
    # torch's noise: the mask divided by (1 - p) in the input's dtype
    noise = mask.to(x.dtype).mul_(float(np.float32(1.0) / np.float32(1.0 - p)))
    mask.free()
    return x.mul_(noise) if inplace else x * noise  # noise kept: the backward multiplies by it


def _arguments(input: Any, p: Any, training: Any, inplace: Any, what: str) -> tuple:  # noqa: A002
    x = tensor_argument(input, f"torch.nn.functional.{what}")
    return (
        x,
        _probability(p, what),
        flag_argument(training, what, "training"),
        flag_argument(inplace, what, "inplace"),
    )


def _unbatched(x: Tensor, p: float, training: bool, inplace: bool, what: str) -> Tensor:
    """An input without a batch dimension: one sample of it."""
    out = _feature_dropout(x.unsqueeze(0), p, training, inplace, what)
    return x if inplace else out.squeeze(0)


def dropout1d(
    input: Tensor,  # noqa: A002 - torch's name
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
) -> Tensor:
    """Whole channels of an ``(N, C, L)`` (or ``(C, L)``) input zeroed with probability
    ``p``, the others scaled by ``1 / (1 - p)``, as torch's."""
    x, p, training, inplace = _arguments(input, p, training, inplace, "dropout1d")
    if x.ndim not in (2, 3):
        raise TensorError(
            f"dropout1d: Expected 2D or 3D input, but received a {x.ndim}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs)."
        )
    if x.ndim == 2:
        return _unbatched(x, p, training, inplace, "dropout1d")
    return _feature_dropout(x, p, training, inplace, "dropout1d")


def dropout2d(
    input: Tensor,  # noqa: A002 - torch's name
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
) -> Tensor:
    """Whole channels of an ``(N, C, H, W)`` input zeroed with probability ``p``, the others
    scaled by ``1 / (1 - p)``, as torch's (a 3-D input is read as ``(N, C, L)``, with
    torch's warning)."""
    x, p, training, inplace = _arguments(input, p, training, inplace, "dropout2d")
    if x.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {x.ndim}-D input to dropout2d, which is deprecated and "
            "will result in an error in a future release. To retain the behavior and silence "
            "this warning, please use dropout instead. Note that dropout2d exists to provide "
            "channel-wise dropout on inputs with 2 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 3D or 4D inputs).",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    if x.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret "
            "the input as one without a batch dimension, i.e. shape (C, H, W). To maintain "
            "the 1D channel-wise dropout behavior, please switch to using dropout1d instead.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    if x.ndim < 2:
        raise TensorError(
            f"torch.nn.functional.dropout2d: Feature dropout requires at least 2 dimensions "
            f"in the input, got a {x.ndim}-D input"
        )
    return _feature_dropout(x, p, training, inplace, "dropout2d")


def dropout3d(
    input: Tensor,  # noqa: A002 - torch's name
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
) -> Tensor:
    """Whole channels of an ``(N, C, D, H, W)`` (or ``(C, D, H, W)``) input zeroed with
    probability ``p``, the others scaled by ``1 / (1 - p)``, as torch's."""
    x, p, training, inplace = _arguments(input, p, training, inplace, "dropout3d")
    if x.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {x.ndim}-D input to dropout3d, which is deprecated and "
            "will result in an error in a future release. To retain the behavior and silence "
            "this warning, please use dropout instead. Note that dropout3d exists to provide "
            "channel-wise dropout on inputs with 3 spatial dimensions, a channel dimension, "
            "and an optional batch dimension (i.e. 4D or 5D inputs).",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    if x.ndim == 4:
        return _unbatched(x, p, training, inplace, "dropout3d")
    if x.ndim < 2:
        raise TensorError(
            f"torch.nn.functional.dropout3d: Feature dropout requires at least 2 dimensions "
            f"in the input, got a {x.ndim}-D input"
        )
    return _feature_dropout(x, p, training, inplace, "dropout3d")


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, L)`` or ``(C, L)`` inputs in training."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, H, W)`` inputs in training."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs in training."""

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return dropout3d(input, self.p, self.training, self.inplace)
