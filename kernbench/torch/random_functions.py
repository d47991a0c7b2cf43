"""``torch.normal``, ``torch.bernoulli`` and ``torch.poisson``.

``normal`` with a number mean and std draws ``randn``'s stream on the host as
``mean + std * z`` and copies it in; with a tensor mean or std it does what
torch's does, ``normal_(0, 1)`` of the broadcast shape then ``mul_(std)`` and
``add_(mean)`` on the device.  ``bernoulli`` is :meth:`Tensor.bernoulli`.
``poisson`` reads the rates to the host (a costed read, as ``histc`` reads its
range), draws NumPy's Poisson values from the generator there and copies them in:
Poisson sampling takes a number of draws that depends on the rate, which the
fixed-shape device kernels do not model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch import random as torch_random
from kernbench.torch.devices import device_index
from kernbench.torch.dtypes import as_torch_dtype, get_default_dtype
from kernbench.torch.functions import into_out
from kernbench.torch.host_values import checked_read
from kernbench.torch.random_fills import draw_into
from kernbench.torch.shapes import shape_argument, tensor_argument
from kernbench.torch.tensor import Tensor, new_tensor
from kernbench.torch.views import broadcast_shapes, same_device

__all__ = ["bernoulli", "normal", "poisson"]


def _std_ok(std: Tensor) -> bool:
    """Whether every std is >= 0, looked up in memory without the machine (no simulated
    time); timing-only runs carry no values and are not checked."""
    if not std.numel() or std.storage_device_tensor.context.timing_only:
        return True
    return bool((std.peek() >= 0).all())


def normal(
    mean: Any = 0.0,
    std: Any = 1.0,
    size: Any = None,
    *,
    generator: Any = None,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
) -> Tensor:
    """``torch.normal(mean, std, *, generator)`` with a tensor mean and/or std (broadcast;
    the dtype of the tensor mean, else of std), or ``torch.normal(mean, std, size, *,
    generator, dtype, device)`` with numbers."""
    mean_tensor, std_tensor = isinstance(mean, Tensor), isinstance(std, Tensor)
    for name, value, tensor in (("mean", mean, mean_tensor), ("std", std, std_tensor)):
        if not tensor and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TensorError(
                f"torch.normal: {name} must be a Tensor or a number (as in torch), got {value!r}"
            )
    if not (mean_tensor or std_tensor):
        if size is None:
            raise TensorError(
                "torch.normal: with a number mean and std give size: torch.normal(mean, std, "
                "size) (as in torch)"
            )
        if not std >= 0:
            raise TensorError(f"torch.normal: normal expects std >= 0.0, but found std {std}")
        dt = as_torch_dtype(dtype, get_default_dtype())
        if not dt.is_floating_point:
            raise TensorError(f"torch.normal: needs a floating dtype, got {dt!r}")
        shape = shape_argument((size,), "torch.normal")
        result = new_tensor(shape, dt, index=device_index(device))
        result.normal_(float(mean), float(std), generator=generator)
        result.requires_grad_(requires_grad)
        return result if out is None else into_out("torch.normal", out, result)
    if size is not None or dtype is not None or device is not None:
        raise TensorError(
            "torch.normal: with a tensor mean or std the result takes their shape, dtype and "
            "device; size=, dtype= and device= go with number mean and std (as in torch)"
        )
    anchor = mean if mean_tensor else std
    if mean_tensor and std_tensor:
        same_device("torch.normal", mean, std)
        shape = broadcast_shapes(tuple(mean.shape), tuple(std.shape), "torch.normal")
    else:
        shape = tuple(anchor.shape)
    if not anchor.dtype.is_floating_point:
        raise TensorError(
            f"torch.normal: the result takes {'mean' if mean_tensor else 'std'}'s dtype, "
            f"{anchor.dtype!r}, which is not floating (as in torch: 'normal_kernel_cpu' not "
            "implemented for it); convert with .float()"
        )
    if std_tensor and not _std_ok(std):
        raise TensorError("torch.normal: normal expects all elements of std >= 0.0")
    if not std_tensor and not std >= 0:
        raise TensorError(f"torch.normal: normal expects std >= 0.0, but found std {std}")
    result = anchor.new_empty(shape)
    result.normal_(0.0, 1.0, generator=generator)
    result.mul_(std)
    result.add_(mean)
    return result if out is None else into_out("torch.normal", out, result)


def bernoulli(
    input: Tensor,  # noqa: A002 - torch's name
    p: Any = None,
    *,
    generator: Any = None,
    out: Any = None,
) -> Tensor:
    """``torch.bernoulli(input)``: 1 with probability ``input`` (elementwise), else 0, in
    ``input``'s dtype; ``torch.bernoulli(input, p)``: with probability ``p`` everywhere."""
    result = tensor_argument(input, "torch.bernoulli").bernoulli(p, generator=generator)
    return result if out is None else into_out("torch.bernoulli", out, result)


def poisson(input: Tensor, generator: Any = None) -> Tensor:  # noqa: A002 - torch's name
    """``torch.poisson(rates)``: Poisson values of each rate, in the rates' dtype."""
    rates = tensor_argument(input, "torch.poisson")
    if not rates.dtype.is_floating_point:
        raise TensorError(
            f"torch.poisson: the rates must be a floating tensor (as in torch), got "
            f"{rates.dtype!r}; convert with .float()"
        )
    rng = torch_random.resolve(generator)
    values = checked_read(rates) if rates.numel() else None
    if values is not None:
        values = values.astype(np.float64).reshape(tuple(rates.shape))
        if not (values >= 0).all():  # NaN too
            raise TensorError(
                "torch.poisson: invalid Poisson rate, expected rate to be non-negative"
            )
    result = rates.new_empty(rates.shape)

    def draw(_: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.poisson(values).astype(np.float64)

    return draw_into(result, "torch.poisson", draw, generator)
