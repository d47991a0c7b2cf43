"""The layers that work across channels: ``InstanceNorm1d``/``2d``/``3d``,
``LocalResponseNorm`` and ``ChannelShuffle``.

Each ``forward`` calls the ``torch.nn.functional`` op torch's does
(:func:`F.instance_norm`, :func:`F.local_response_norm`, :func:`F.channel_shuffle`),
so a layer costs what its op costs.  The instance norms have torch's parameters
(``weight`` ones, ``bias`` zeros, with ``affine``) and buffers (``running_mean``,
``running_var``, ``num_batches_tracked``, with ``track_running_stats``), so their
``state_dict()`` keys are torch's; an unbatched input (no N) is taken as a batch of one.
"""

from __future__ import annotations

import warnings
from typing import Any

from kernbench.errors import TensorValueError, user_stacklevel
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.layers import _NormBase
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = [
    "ChannelShuffle",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LocalResponseNorm",
]


class _InstanceNorm(_NormBase):
    """torch's ``_InstanceNorm``: each (sample, channel) normalized by its own statistics
    in training or without ``track_running_stats``, else by the running ones."""

    _no_batch_dims = 0

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        unbatched = self._no_batch_dims
        if input.ndim not in (unbatched, unbatched + 1):
            raise TensorValueError(
                f"expected {unbatched}D or {unbatched + 1}D input (got {input.ndim}D input)"
            )
        feature_dim = input.ndim - unbatched
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise TensorValueError(
                    f"expected input's size at dim={feature_dim} to match num_features "
                    f"({self.num_features}), but got: {input.shape[feature_dim]}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can "
                "silence this warning by not passing in num_features, which is not used "
                "because affine=False",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        batch = input.unsqueeze(0) if input.ndim == unbatched else input
        out = F.instance_norm(
            batch,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return out.squeeze(0) if input.ndim == unbatched else out

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Over ``(N, C, L)`` or ``(C, L)``."""

    _no_batch_dims = 2


class InstanceNorm2d(_InstanceNorm):
    """Over ``(N, C, H, W)`` or ``(C, H, W)``."""

    _no_batch_dims = 3


class InstanceNorm3d(_InstanceNorm):
    """Over ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""

    _no_batch_dims = 4


class LocalResponseNorm(Module):
    """:func:`F.local_response_norm` with its ``size``, ``alpha``, ``beta`` and ``k``."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class ChannelShuffle(Module):
    """:func:`F.channel_shuffle` into ``groups``."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
