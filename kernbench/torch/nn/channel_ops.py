"""``torch.nn.functional.local_response_norm`` and ``channel_shuffle``: ops across the
channels (dim 1) of an ``(N, C, ...)`` input, composed of tensor methods so autograd
records them.

``local_response_norm`` divides each element by
``(k + alpha * mean of the squares over a window of size channels) ** beta``, the window
zero-padded at the ends as torch's.  Torch pads and average-pools; here the windowed
mean is one product with a constant ``(C, C)`` band matrix (a matmul kernel of
``C * C`` multiply-adds a position, where torch's pool makes ``size``), which autograd
differentiates as any matmul.  ``channel_shuffle`` is a view, a transpose and a copy,
as torch's.
"""

from __future__ import annotations

import numpy as np

from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.factories import tensor
from kernbench.torch.nn.argument_checks import call_name, floating_input, number_argument
from kernbench.torch.shapes import int_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["channel_shuffle", "local_response_norm", "native_channel_shuffle"]


def _window_band(channels: int, size: int) -> np.ndarray:
    """``band[j, c] = 1 / size`` where channel ``j`` is in channel ``c``'s window."""
    j = np.arange(channels)[:, None]
    c = np.arange(channels)[None, :]
    inside = (j >= c - size // 2) & (j <= c + (size - 1) // 2)
    return inside / size


def local_response_norm(
    input: Tensor,  # noqa: A002
    size: int,
    alpha: float = 1e-4,
    beta: float = 0.75,
    k: float = 1.0,
) -> Tensor:
    """``x / (k + alpha * mean(x**2 over size neighbouring channels)) ** beta``."""
    what = "local_response_norm"
    x = floating_input(input, what)
    size = int_argument(size, call_name(what), "size")
    if size <= 0:
        raise TensorValueError(f"{call_name(what)}: size must be positive, got {size}")
    alpha = number_argument(alpha, what, "alpha")
    beta = number_argument(beta, what, "beta")
    k = number_argument(k, what, "k")
    if x.ndim < 3:
        raise TensorValueError(
            f"{call_name(what)}: Expected 3D or higher dimensionality input (got {x.ndim} "
            "dimensions)"
        )
    if x.numel() == 0:
        return x
    band = tensor(_window_band(x.shape[1], size), dtype=x.dtype, device=x.get_device())
    mean_square = (x * x).movedim(1, -1).matmul(band).movedim(-1, 1)
    return x / (mean_square * alpha + k).pow(beta)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:  # noqa: A002
    """The channels (dim 1) of ``(N, C, ...)`` split into ``groups`` and interleaved:
    ``view(N, groups, C // groups, ...)``, its dims 1 and 2 swapped, made contiguous."""
    what = "channel_shuffle"
    x = tensor_argument(input, call_name(what))
    g = int_argument(groups, call_name(what), "groups")
    if x.ndim < 3:
        raise TensorError(
            f"{call_name(what)}: channel_shuffle expects input to have at least 3 dimensions, "
            f"but got input with sizes {list(x.shape)}"
        )
    if g <= 0:
        raise TensorError(
            f"{call_name(what)}: Number of groups to divide channels in must be positive. "
            f"Value of groups:{g}"
        )
    n, c, *rest = x.shape
    if c % g:
        raise TensorError(
            f"{call_name(what)}: Number of channels must be divisible by groups. Got {c} "
            f"channels and {g} groups."
        )
    return x.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(n, c, *rest)


def native_channel_shuffle(input: Tensor, groups: int) -> Tensor:  # noqa: A002
    """:func:`channel_shuffle` (torch's name for its kernel)."""
    return channel_shuffle(input, groups)
