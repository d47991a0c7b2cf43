"""``torch.nn.functional.group_norm``, ``batch_norm`` and ``instance_norm``.

``group_norm`` normalizes each (sample, group) as one row by the layer-norm
kernel, then scales and shifts per channel (two broadcast passes; torch's
kernel does it on the way).  ``batch_norm`` and ``instance_norm`` take each
channel's mean and biased variance by two reductions (over the batch and the
spatial dims, or the spatial dims only), fold them with ``weight`` and
``bias`` into a per-channel scale and shift (a few tiny kernels), and apply
``x * scale + shift`` (two broadcast passes).  In training, the running
statistics given are updated in place as torch's:
``running = (1 - momentum) * running + momentum * batch``, with the unbiased
variance.
"""

from __future__ import annotations

import numbers
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.pointwise import layer_norm
from kernbench.torch.shapes import flag_argument, int_argument, tensor_argument
from kernbench.torch.tensor import Tensor
from kernbench.torch.views import same_device

__all__ = ["batch_norm", "group_norm", "instance_norm"]


def _call(what: str) -> str:
    return f"torch.nn.functional.{what}"


def _number(value: Any, what: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorError(f"{_call(what)}: {name} must be a number, got {value!r}")
    return float(value)


def _floating(value: Any, what: str, min_dims: int) -> Tensor:
    x = tensor_argument(value, _call(what))
    if not x.dtype.is_floating_point:
        raise TensorError(f"{_call(what)}: expected a floating tensor, got {x.dtype!r}")
    if x.ndim < min_dims:
        raise TensorError(
            f"{_call(what)}: expected an input of at least {min_dims} dims (N, C, ...), got "
            f"shape {tuple(x.shape)}"
        )
    return x


def _channel_vector(value: Any, what: str, name: str, x: Tensor) -> Tensor | None:
    if value is None:
        return None
    t = tensor_argument(value, f"{_call(what)} {name}")
    same_device(_call(what), x, t)
    if tuple(t.shape) != (x.shape[1],):
        raise TensorError(
            f"{_call(what)}: {name} should contain {x.shape[1]} elements (one a channel), got "
            f"shape {tuple(t.shape)}"
        )
    return t


def _per_channel(t: Tensor, ndim: int) -> Tensor:
    """A (C,) tensor as (C, 1, ...) to broadcast over an (N, C, ...) input."""
    return t.view(t.shape[0], *([1] * (ndim - 2)))


def group_norm(
    input: Tensor,  # noqa: A002
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Each sample's ``num_groups`` groups of channels normalized (biased variance), then
    ``* weight + bias`` per channel."""
    what = "group_norm"
    x = _floating(input, what, 2)
    groups = int_argument(num_groups, _call(what), "num_groups")
    channels = x.shape[1]
    if groups <= 0 or channels % groups:
        raise TensorError(
            f"{_call(what)}: Expected number of channels in input to be divisible by "
            f"num_groups, but got input of shape {tuple(x.shape)} and num_groups={groups}"
        )
    eps = _number(eps, what, "eps")
    w = _channel_vector(weight, what, "weight", x)
    b = _channel_vector(bias, what, "bias", x)
    n = x.shape[0]
    rows = x.reshape(n, groups, -1) if x.numel() else x
    if not x.numel():
        return x.clone()
    flat = layer_norm(rows, (rows.shape[-1],), eps=eps)
    if rows is not x and rows.storage_device_tensor is not x.storage_device_tensor:
        rows.free()
    out = flat.view(x.shape)
    if w is not None:
        out.mul_(_per_channel(w, x.ndim))
    if b is not None:
        out.add_(_per_channel(b, x.ndim))
    return out


def _normalize_channels(
    what: str,
    x: Tensor,
    dims: tuple[int, ...],
    running_mean: Any,
    running_var: Any,
    weight: Any,
    bias: Any,
    use_batch_stats: bool,
    momentum: Any,
    eps: Any,
) -> Tensor:
    eps = _number(eps, what, "eps")
    rm = _channel_vector(running_mean, what, "running_mean", x)
    rv = _channel_vector(running_var, what, "running_var", x)
    w = _channel_vector(weight, what, "weight", x)
    b = _channel_vector(bias, what, "bias", x)
    count = x.numel() // max(x.shape[1], 1) // (1 if dims[0] == 0 else x.shape[0])
    if use_batch_stats:
        if count <= 1:
            raise TensorError(
                f"{_call(what)}: Expected more than 1 value per channel when training, got "
                f"input size {tuple(x.shape)}"
            )
        mean = x.mean(dims, keepdim=True)
        var = x.var(dims, keepdim=True, correction=0)
        if rm is not None or rv is not None:
            m = _number(momentum if momentum is not None else 0.1, what, "momentum")
            batch_axes = (0,) if dims[0] != 0 else ()
            if rm is not None:
                channel_mean = mean.mean(batch_axes) if batch_axes else mean
                rm.mul_(1 - m).add_(channel_mean.reshape(-1), alpha=m)
            if rv is not None:
                channel_var = var.mean(batch_axes) if batch_axes else var
                unbiased = channel_var.reshape(-1).mul(count / (count - 1))
                rv.mul_(1 - m).add_(unbiased, alpha=m)
    else:
        if rm is None or rv is None:
            raise TensorError(
                f"{_call(what)}: running_mean and running_var must be given when not "
                "training (or pass training=True to use the batch's statistics)"
            )
        mean = _per_channel(rm, x.ndim).clone()
        var = _per_channel(rv, x.ndim).clone()
    scale = var.add_(eps).rsqrt_()  # 1 / sqrt(var + eps), one per channel (and sample)
    if w is not None:
        scale.mul_(_per_channel(w, x.ndim))
    shift = mean.mul_(scale).neg_()  # -mean * scale (+ bias)
    if b is not None:
        shift.add_(_per_channel(b, x.ndim))
    out = x * scale
    return out.add_(shift)  # the per-channel temporaries are freed when unreferenced


def batch_norm(
    input: Tensor,  # noqa: A002
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float | None = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Each channel (dim 1) normalized by the batch's statistics over every other dim when
    ``training`` (updating ``running_mean``/``running_var`` in place), else by the running
    ones; then ``* weight + bias``."""
    what = "batch_norm"
    x = _floating(input, what, 2)
    training = flag_argument(training, _call(what), "training")
    dims = (0, *range(2, x.ndim))
    return _normalize_channels(
        what, x, dims, running_mean, running_var, weight, bias, training, momentum, eps
    )


def instance_norm(
    input: Tensor,  # noqa: A002
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Each (sample, channel) normalized over its spatial dims; the running statistics,
    when given, are updated with the mean over the batch of the instances' statistics,
    as torch's."""
    what = "instance_norm"
    x = _floating(input, what, 3)
    use = flag_argument(use_input_stats, _call(what), "use_input_stats")
    dims = tuple(range(2, x.ndim))
    return _normalize_channels(
        what, x, dims, running_mean, running_var, weight, bias, use, momentum, eps
    )
