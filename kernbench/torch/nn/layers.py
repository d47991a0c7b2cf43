"""The layers with weights (``Linear``, ``Embedding``, the norms), ``Dropout`` and the shape
layers, forward only.

Each ``forward`` calls the ``torch.nn.functional`` op torch's does, so a
layer costs what its op costs.  Weights are initialised as torch's
(``reset_parameters``), drawn on the host from the rank's generator
(:mod:`~kernbench.torch.nn.init`).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.factories import empty, ones, tensor, zeros
from kernbench.torch.nn import functional as F
from kernbench.torch.nn import init
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.shapes import int_sequence
from kernbench.torch.tensor import Tensor

__all__ = [
    "BatchNormBase",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "Dropout",
    "Embedding",
    "Flatten",
    "GroupNorm",
    "Identity",
    "LayerNorm",
    "Linear",
    "RMSNorm",
    "Unflatten",
]


def _size(value: Any, what: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise TensorError(f"{what}: {name} must be a non-negative int, got {value!r}")
    return int(value)


class Identity(Module):
    """Returns its input (any arguments to the constructor are ignored, as torch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` (:func:`F.linear`); weight ``(out, in)`` and bias
    ``U(-1/sqrt(in), 1/sqrt(in))``, as torch's ``kaiming_uniform_(a=sqrt(5))``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in_features = _size(in_features, "Linear", "in_features")
        self.out_features = _size(out_features, "Linear", "out_features")
        self.weight = Parameter(empty(out_features, in_features, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Embedding(Module):
    """Rows of ``weight`` (``N(0, 1)``; the ``padding_idx`` row zero) picked by index."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | None = None,
        _freeze: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_embeddings = _size(num_embeddings, "Embedding", "num_embeddings")
        self.embedding_dim = _size(embedding_dim, "Embedding", "embedding_dim")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = padding_idx + num_embeddings if padding_idx < 0 else padding_idx
        if max_norm is not None:
            raise TensorError(
                "Embedding: max_norm renormalizes rows in place and is not supported here; "
                "leave max_norm=None"
            )
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            shape = (num_embeddings, embedding_dim)
            self.weight = Parameter(empty(shape, device=device, dtype=dtype), not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError(
                    "Shape of weight does not match num_embeddings and embedding_dim"
                )
            self.weight = Parameter(_weight, not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.embedding(input, self.weight, self.padding_idx)  # it checks the indices

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        **kwargs: Any,
    ) -> Embedding:
        if embeddings.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, _weight=embeddings, _freeze=freeze, **kwargs)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.scale_grad_by_freq:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse:
            text += ", sparse=True"
        return text


class Dropout(Module):
    """Zeroes each element with probability ``p`` and scales by ``1/(1-p)`` in training;
    the identity after ``eval()``."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def _normalized_shape(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (int(value),)
    return tuple(int_sequence(value, what, "normalized_shape"))


class LayerNorm(Module):
    """:func:`F.layer_norm` over the last dims, with ``weight`` (ones) and ``bias`` (zeros)."""

    def __init__(
        self,
        normalized_shape: Any,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape, "LayerNorm")
        self.eps, self.elementwise_affine = eps, elementwise_affine
        shape = self.normalized_shape
        if elementwise_affine:
            self.weight = Parameter(ones(shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(zeros(shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class RMSNorm(Module):
    """:func:`F.rms_norm` over the last dims, with ``weight`` (ones); ``eps=None`` is the
    dtype's machine epsilon, as torch."""

    def __init__(
        self,
        normalized_shape: Any,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _normalized_shape(normalized_shape, "RMSNorm")
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class GroupNorm(Module):
    """:func:`F.group_norm` with per-channel ``weight`` (ones) and ``bias`` (zeros)."""

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        if affine:
            self.weight = Parameter(ones(num_channels, device=device, dtype=dtype))
            self.bias = Parameter(zeros(num_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _NormBase(Module):
    """torch's ``_NormBase``: ``num_features`` affine parameters and running statistics,
    shared by the batch and instance norms."""

    def __init__(
        self,
        num_features: int,
        eps: float,
        momentum: float | None,
        affine: bool,
        track_running_stats: bool,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, device=device, dtype=dtype))
            self.bias = Parameter(zeros(num_features, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            self.weight.fill_(1)
            self.bias.zero_()


class _BatchNorm(_NormBase):
    """torch's ``_BatchNorm``: batch statistics (and running ones updated) in training,
    the running statistics in eval."""

    _dims: tuple[int, ...] = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        if input.ndim not in self._dims:
            shown = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {shown} input (got {input.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average: torch reads the count too
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if keep else None,
            self.running_var if keep else None,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


BatchNormBase = _BatchNorm  # the base of every batch norm (SyncBatchNorm's too)


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    _dims = (5,)
