"""torch's lazy modules: ``LazyModuleMixin`` and ``LazyLinear``, ``LazyConv1d/2d/3d``,
``LazyConvTranspose1d/2d/3d``, ``LazyBatchNorm1d/2d/3d`` and ``LazyInstanceNorm1d/2d/3d``.

A lazy layer is built without its input size: its weights are
:class:`~kernbench.torch.nn.parameter.UninitializedParameter` (its running statistics
``UninitializedBuffer``) until the first call, whose forward pre-hook reads the size from
the input (``input.shape[-1]`` for Linear, the channel dim for the others), materializes
them in place (the same objects, so an optimizer built before holds them), initialises
them as the eager layer's ``reset_parameters`` (the same draws from the rank's generator)
and turns the module into that layer (``type(m) is nn.Linear``).  ``load_state_dict``
into a layer not yet called materializes from the loaded shapes.  See ADR 0032.
"""

from __future__ import annotations

import warnings
from typing import Any

import kernbench.torch as torch  # no_grad, as the facade provides it, looked up at the call
from kernbench.errors import TensorError, user_stacklevel
from kernbench.torch.factories import tensor
from kernbench.torch.nn.channel_layers import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from kernbench.torch.nn.conv_layers import Conv1d, Conv2d, Conv3d
from kernbench.torch.nn.conv_transpose_layers import (
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from kernbench.torch.nn.layers import BatchNorm1d, BatchNorm2d, BatchNorm3d, Linear
from kernbench.torch.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from kernbench.torch.tensor import Tensor

__all__ = [
    "LazyModuleMixin",
    "LazyLinear",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]


def _infer_parameters(module: Any, args: tuple) -> None:
    """The forward pre-hook: initialize from the first call's input, then become the eager
    class (the hooks removed)."""
    with torch.no_grad():
        module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise TensorError(f"module {type(module).__name__} has not been fully initialized")
    module._initialize_hook.remove()  # noqa: SLF001 - the mixin's own handles
    module._load_hook.remove()  # noqa: SLF001
    del module._initialize_hook  # noqa: SLF001
    del module._load_hook  # noqa: SLF001
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


def _lazy_load_hook(
    module: Any,
    state_dict: Any,
    prefix: str,
    local_metadata: Any,
    strict: bool,
    missing_keys: list,
    unexpected_keys: list,
    error_msgs: list,
) -> None:
    """Materialize each uninitialized parameter and buffer the state dict has a tensor
    for, with that tensor's shape (its values are then copied in by the load)."""
    with torch.no_grad():
        for name, value in [*module._parameters.items(), *module._buffers.items()]:  # noqa: SLF001
            key = prefix + name
            if key in state_dict and is_lazy(value):
                loaded = state_dict[key]
                if isinstance(loaded, Tensor) and not is_lazy(loaded):
                    value.materialize(tuple(loaded.shape))
        module._sizes_from_parameters()  # noqa: SLF001


class LazyModuleMixin:
    """torch's ``LazyModuleMixin``: put it before the eager class among the bases, and
    define ``initialize_parameters(*inputs)`` (materialize and reset the uninitialized
    parameters) and ``cls_to_become`` (the class the module becomes after the first
    call, or None to stay)."""

    cls_to_become: type | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._load_hook = self.register_load_state_dict_pre_hook(_lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)
        warnings.warn(
            "Lazy modules are a new feature under heavy development so changes to the API "
            "or functionality can happen at any moment.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module (not its children) is still
        uninitialized."""
        params = self._parameters.values()
        buffers = self._buffers.values()
        return any(is_lazy(t) for t in (*params, *buffers))

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Materialize the uninitialized parameters from the input (the subclass's)."""
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {type(self).__name__}"
        )

    def _sizes_from_parameters(self) -> None:
        """Set the input-size attribute from materialized parameters (after a load)."""


class LazyLinear(LazyModuleMixin, Linear):
    """``nn.LazyLinear(out_features, bias=True, device=None, dtype=None)``: ``in_features``
    is the first input's last dim."""

    cls_to_become = Linear

    def __init__(
        self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__(0, 0, False)  # no bias: it would be replaced at once
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:  # noqa: A002
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()

    def _sizes_from_parameters(self) -> None:
        if not is_lazy(self.weight):
            self.in_features = self.weight.shape[1]


class _LazyConvXdMixin(LazyModuleMixin):
    """torch's ``_LazyConvXdMixin``: ``in_channels`` from the first input's channel dim
    (dim 1 of a batch, dim 0 of one unbatched sample)."""

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input: Tensor) -> int:  # noqa: A002
        unbatched = self._dims + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise TensorError(
                f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input to "
                f"{type(self).__name__}, but got input of size: {input.shape}"
            )
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:  # noqa: A002
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                channels = (self.in_channels, self.out_channels // self.groups)
            else:
                channels = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize((*channels, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _sizes_from_parameters(self) -> None:
        if not is_lazy(self.weight):
            shape = self.weight.shape
            self.in_channels = shape[0] if self.transposed else shape[1] * self.groups

    def _lazy_parameters(self, out_channels: int, bias: bool, device: Any, dtype: Any) -> None:
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)


class _LazyConvNd(_LazyConvXdMixin):
    def __init__(
        self,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode,
            device, dtype,
        )  # fmt: skip
        self._lazy_parameters(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConvNd, Conv1d):
    """``nn.LazyConv1d(out_channels, kernel_size, ...)``: ``in_channels`` from the input."""

    cls_to_become = Conv1d


class LazyConv2d(_LazyConvNd, Conv2d):
    """``nn.LazyConv2d(out_channels, kernel_size, ...)``: ``in_channels`` from the input."""

    cls_to_become = Conv2d


class LazyConv3d(_LazyConvNd, Conv3d):
    """``nn.LazyConv3d(out_channels, kernel_size, ...)``: ``in_channels`` from the input."""

    cls_to_become = Conv3d


class _LazyConvTransposeNd(_LazyConvXdMixin):
    def __init__(
        self,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
            padding_mode, device, dtype,
        )  # fmt: skip
        self._lazy_parameters(out_channels, bias, device, dtype)


class LazyConvTranspose1d(_LazyConvTransposeNd, ConvTranspose1d):
    """``nn.LazyConvTranspose1d(out_channels, kernel_size, ...)``."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeNd, ConvTranspose2d):
    """``nn.LazyConvTranspose2d(out_channels, kernel_size, ...)``."""

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeNd, ConvTranspose3d):
    """``nn.LazyConvTranspose3d(out_channels, kernel_size, ...)``."""

    cls_to_become = ConvTranspose3d


class _LazyNormBase(LazyModuleMixin):
    """torch's ``_LazyNormBase``: ``num_features`` from the first input's channel dim."""

    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, device=device)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _channel_dim(self, input: Tensor) -> int:  # noqa: A002
        return 1

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:  # noqa: A002
        if self.has_uninitialized_params():
            self.num_features = input.shape[self._channel_dim(input)]
            if self.affine:
                self.weight.materialize((self.num_features,))
                self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()

    def _sizes_from_parameters(self) -> None:
        for name in ("weight", "running_mean"):
            found = getattr(self, name, None)
            if found is not None and not is_lazy(found):
                self.num_features = found.shape[0]


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """``nn.LazyBatchNorm1d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)``."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """``nn.LazyBatchNorm2d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)``."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """``nn.LazyBatchNorm3d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)``."""

    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyNormBase):
    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)

    def _channel_dim(self, input: Tensor) -> int:  # noqa: A002
        return 0 if input.ndim == self._no_batch_dims else 1  # an unbatched sample: dim 0


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """``nn.LazyInstanceNorm1d(eps=1e-5, momentum=0.1, affine=False,
    track_running_stats=False)``."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """``nn.LazyInstanceNorm2d(eps=1e-5, momentum=0.1, affine=False,
    track_running_stats=False)``."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """``nn.LazyInstanceNorm3d(eps=1e-5, momentum=0.1, affine=False,
    track_running_stats=False)``."""

    cls_to_become = InstanceNorm3d
