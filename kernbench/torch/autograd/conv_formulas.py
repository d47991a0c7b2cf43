"""Backward formulas of ``torch.nn.functional``'s convolutions, pools and ``batch_norm``.

As in :mod:`~kernbench.torch.autograd.nn_formulas`, each rule runs the forward as it
always ran, with recording off, and records one node whose backward is written with the
facade's ops:

* ``conv1d``/``conv2d``/``conv3d``: the input's gradient is a convolution of the output's gradient
  (zeros inserted between its elements for a strided forward, padded by the dilated
  kernel less the forward's padding) with the weight flipped and its channel dims
  swapped per group; the weight's is a convolution of the input (channels as the batch,
  the batch as channels) with the output's gradient as the kernel, the forward's stride
  as the dilation and its dilation as the stride; the bias's a ``sum``.
* ``conv_transpose1d``/``2d``/``3d``, the adjoint of the convolution by the same
  weight (whose input gradient their forward is): the input's gradient is that
  convolution of the output's gradient, the weight's the convolution's weight gradient
  with input and output gradient swapped; the bias's a ``sum``.
* max pools (and the adaptive ones): the forward asks for the indices, as torch's does
  when the input requires grad, and the gradient goes back by a ``scatter_add_``.
* average pools: the gradient divided by each window's divisor, then one strided add per
  kernel position into a zeroed (padded) input, or one copy when the windows tile the
  input; adaptive windows of unequal sizes go back by one matmul per dim with the window
  matrix the adaptive pool of an identity matrix gives.
* ``batch_norm``: with the batch's statistics (recomputed from the saved input, as the
  layer-norm rule does), the usual three-term formula; with the running ones, a scale.

1-D pools record the 2-D nodes' names (torch records a 2-D pool and a squeeze there);
3-D ones torch's 3-D names.
"""

from __future__ import annotations

import inspect
import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.autograd.formulas import Unsupported, recorded, untracked
from kernbench.torch.factories_more import eye
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.conv_transpose import transposed_convolution
from kernbench.torch.nn.convolution import conv_padding, spatial_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["CONV_NN_RULES"]


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "grad_fn") and hasattr(value, "storage_device_tensor")


def _needs(value: Any) -> bool:
    return _is_tensor(value) and value.requires_grad


def _bind(fn: Callable, *args: Any, **kwargs: Any) -> inspect.BoundArguments:
    """The call's arguments by name, defaults filled in (Unsupported when they do not bind,
    so the forward raises its own error)."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        raise Unsupported from None
    bound.apply_defaults()
    return bound


def _spatial(value: Any, name: str, dims: int) -> tuple[int, ...]:
    try:
        return spatial_argument(value, "autograd", name, dims)
    except TensorError:
        raise Unsupported from None


def _pad_amounts(before: Sequence[int], after: Sequence[int]) -> list[int]:
    """``F.pad``'s amounts (last dim first) for per-dim ``before``/``after`` padding."""
    amounts: list[int] = []
    for b, a in zip(reversed(before), reversed(after), strict=True):
        amounts += [b, a]
    return amounts


# -- convolutions ---------------------------------------------------------------------------
def _conv_weight_grad(
    conv: Callable,
    g: Tensor,
    x: Tensor,
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    before: tuple[int, ...],
    after: tuple[int, ...],
    dilations: tuple[int, ...],
    groups: int,
) -> Tensor:
    """Per group, the input's channels (as the batch) convolved with the output gradient's
    (as the kernel), summing over the samples (as the channels): stride and dilation
    swap places."""
    n, c, spatial = x.shape[0], x.shape[1], tuple(x.shape[2:])
    cout, out_spatial = g.shape[1], tuple(g.shape[2:])
    dims = len(spatial)
    cg, cout_g = c // groups, cout // groups
    padding: Any = before
    if before != after:  # 'same' with an even dilated kernel pads one more after
        x = F.pad(x, _pad_amounts(before, after))
        spatial, padding = tuple(x.shape[2:]), 0
    rest = tuple(range(3, 3 + dims))
    xt = (
        x.reshape(n, groups, cg, *spatial).permute(2, 1, 0, *rest).reshape(cg, groups * n, *spatial)
    )
    gt = g.reshape(n, groups, cout_g, *out_spatial).permute(1, 2, 0, *rest)
    gt = gt.reshape(cout, n, *out_spatial)
    gw = conv(xt, gt, None, dilations, padding, strides, groups)  # (cg, cout, >= kernel)
    if tuple(gw.shape[2:]) != kernel:
        gw = gw[(slice(None), slice(None), *(slice(0, k) for k in kernel))]
    return gw.transpose(0, 1)


def _plain_operands(input: Any, weight: Any, groups: Any, dims: int) -> None:  # noqa: A002
    """The (transposed) convolutions the formulas take; others get the refusing node."""
    if not (_is_tensor(input) and _is_tensor(weight)) or weight.ndim != dims + 2:
        raise Unsupported
    if input.ndim not in (dims + 1, dims + 2) or not input.numel() or not weight.numel():
        raise Unsupported
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups <= 0:
        raise Unsupported


def _conv(dims: int) -> Callable[..., Any]:
    def rule(
        fn: Callable,
        input: Tensor,  # noqa: A002 - torch's name
        weight: Tensor,
        bias: Any = None,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: Any = 1,
    ) -> Any:
        _plain_operands(input, weight, groups, dims)
        strides = _spatial(stride, "stride", dims)
        dilations = _spatial(dilation, "dilation", dims)
        try:
            pads = conv_padding(padding, "autograd", dims)
        except TensorError:
            raise Unsupported from None
        kernel = tuple(weight.shape[2:])
        dilated = tuple(d * (k - 1) + 1 for d, k in zip(dilations, kernel, strict=True))
        if pads == "valid":
            before = after = (0,) * dims
        elif pads == "same":
            before = tuple((k - 1) // 2 for k in dilated)
            after = tuple(k - 1 - b for k, b in zip(dilated, before, strict=True))
        else:
            before = after = tuple(pads)
        out = untracked(fn, input, weight, bias, stride, padding, dilation, groups)
        batched = input.ndim == dims + 2
        spatial = tuple(input.shape[-dims:])
        need_x, need_w, need_b = input.requires_grad, weight.requires_grad, _needs(bias)
        conv = getattr(F, f"conv{dims}d")
        groups = int(groups)

        def backward(g: Tensor, x: Tensor, w: Tensor) -> Sequence[Any]:
            if not batched:
                g, x = g.unsqueeze(0), x.unsqueeze(0)
            gx = gw = gb = None
            if need_x:
                gx = transposed_convolution(
                    conv, g, w, None, spatial, strides, before, dilations, groups
                )
                gx = gx if batched else gx.squeeze(0)
            if need_w:
                gw = _conv_weight_grad(
                    conv, g, x, kernel, strides, before, after, dilations, groups
                )
            if need_b:
                gb = g.sum((0, *range(2, 2 + dims)))
            return gx, gw, gb

        return recorded(
            out, "ConvolutionBackward0", (input, weight, bias), backward, (input, weight)
        )

    return rule


def _conv_transpose(dims: int) -> Callable[..., Any]:
    """``conv_transpose{1,2}d``, the adjoint of the convolution by the same weight: the
    input's gradient is that convolution of the output's gradient (cut to the input's size
    when ``output_padding`` reaches past the stride), the weight's the convolution's weight
    gradient with the roles of input and output gradient swapped."""

    def rule(
        fn: Callable,
        input: Tensor,  # noqa: A002 - torch's name
        weight: Tensor,
        bias: Any = None,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: Any = 1,
        dilation: Any = 1,
    ) -> Any:
        _plain_operands(input, weight, groups, dims)
        strides = _spatial(stride, "stride", dims)
        pads = _spatial(padding, "padding", dims)
        dilations = _spatial(dilation, "dilation", dims)
        out = untracked(fn, input, weight, bias, stride, padding, output_padding, groups, dilation)
        batched = input.ndim == dims + 2
        spatial = tuple(input.shape[-dims:])
        kernel = tuple(weight.shape[2:])
        need_x, need_w, need_b = input.requires_grad, weight.requires_grad, _needs(bias)
        conv = getattr(F, f"conv{dims}d")
        groups = int(groups)

        def backward(g: Tensor, x: Tensor, w: Tensor) -> Sequence[Any]:
            if not batched:
                g, x = g.unsqueeze(0), x.unsqueeze(0)
            gx = gw = gb = None
            if need_x:
                gx = conv(g, w, None, strides, pads, dilations, groups)
                if tuple(gx.shape[2:]) != spatial:
                    gx = gx[(slice(None), slice(None), *(slice(0, s) for s in spatial))]
                gx = gx if batched else gx.squeeze(0)
            if need_w:
                gw = _conv_weight_grad(conv, x, g, kernel, strides, pads, pads, dilations, groups)
            if need_b:
                gb = g.sum((0, *range(2, 2 + dims)))
            return gx, gw, gb

        return recorded(
            out, "ConvolutionBackward0", (input, weight, bias), backward, (input, weight)
        )

    return rule


# -- max pools ------------------------------------------------------------------------------
def _max_pool(dims: int, name: str, pair: bool = False) -> Callable[..., Any]:
    """``max_pool{1,2,3}d``, ``adaptive_max_pool{1,2,3}d`` and ``fractional_max_pool{2,3}d``:
    the forward with indices, the gradient scattered back to them (``pair``: the op gives
    the indices whatever ``return_indices`` says, as the ``*_with_indices`` forms do)."""

    def rule(fn: Callable, *args: Any, **kwargs: Any) -> Any:
        bound = _bind(fn, *args, **kwargs)
        x = bound.arguments.get("input")
        want = bound.arguments.get("return_indices")
        if not _is_tensor(x) or want not in (True, False) or x.ndim < dims + 1:
            raise Unsupported
        bound.arguments["return_indices"] = True
        values, indices = untracked(fn, *bound.args, **bound.kwargs)
        shape = tuple(x.shape)
        planes, size = math.prod(shape[:-dims]), math.prod(shape[-dims:])

        def backward(g: Tensor, idx: Tensor) -> Sequence[Any]:
            gx = g.new_zeros(planes, size)
            if planes and idx.numel():
                gx.scatter_add_(1, idx.reshape(planes, -1), g.reshape(planes, -1))
            return (gx.reshape(shape),)

        values = recorded(values, name, (x,), backward, (indices,))
        return (values, indices) if want or pair else values

    return rule


# -- average pools --------------------------------------------------------------------------
def _ones_pool(like: Tensor, spatial: Sequence[int], **pool_args: Any) -> Tensor:
    """``avg_pool2d(..., divisor_override=1)`` (a window sum; ``avg_pool3d``'s for a volume)
    of ones of ``spatial`` size: the number of elements each window covers."""
    dims = len(spatial)
    ones = like.new_ones(1, 1, *((1,) * (2 - dims)), *spatial)
    pool = F.avg_pool3d if dims == 3 else F.avg_pool2d
    return pool(ones, divisor_override=1, **pool_args)


def _spread(
    gs: Tensor,
    spatial: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    pads: tuple[int, ...],
) -> Tensor:
    """Each output's (already divided) gradient added to every input position of its
    window: one copy when the windows tile the input, else one strided add per kernel
    position into a zeroed padded input."""
    dims = len(spatial)
    lead, out_spatial = tuple(gs.shape[:-dims]), tuple(gs.shape[-dims:])
    if strides == kernel and not any(pads):
        split = tuple(itertools.chain.from_iterable((o, 1) for o in out_spatial))
        wide = tuple(itertools.chain.from_iterable(zip(out_spatial, kernel, strict=True)))
        whole = tuple(o * k for o, k in zip(out_spatial, kernel, strict=True))
        gx = gs.reshape(*lead, *split).expand(*lead, *wide).reshape(*lead, *whole)
        rest = tuple(s - w for s, w in zip(spatial, whole, strict=True))
        if any(rest):
            gx = F.pad(gx, _pad_amounts((0,) * dims, rest))
        return gx
    padded = tuple(
        max(s + 2 * p, (o - 1) * st + k)
        for s, p, o, st, k in zip(spatial, pads, out_spatial, strides, kernel, strict=True)
    )
    buf = gs.new_zeros(*lead, *padded)
    every = (slice(None),) * len(lead)
    for taps in itertools.product(*(range(k) for k in kernel)):
        key = tuple(
            slice(t, t + (o - 1) * st + 1, st)
            for t, o, st in zip(taps, out_spatial, strides, strict=True)
        )
        buf[(*every, *key)].add_(gs)
    return buf[(*every, *(slice(p, p + s) for p, s in zip(pads, spatial, strict=True)))]


def _window_counts(size: int, k: int, s: int, p: int, out: int, include: bool) -> list[int]:
    """The average pool's divisor along one dim for each output position: the window cut
    at the padded input's end (``include``), else the input elements in it."""
    starts = [o * s - p for o in range(out)]
    if include:
        return [min(h + k, size + p) - h for h in starts]
    return [min(h + k, size) - max(h, 0) for h in starts]


def _avg_pool(dims: int) -> Callable[..., Any]:
    def rule(fn: Callable, *args: Any, **kwargs: Any) -> Any:
        bound = _bind(fn, *args, **kwargs)
        a = bound.arguments
        x = a.get("input")
        if not _is_tensor(x) or x.ndim < dims + 1:
            raise Unsupported
        kernel = _spatial(a["kernel_size"], "kernel_size", dims)
        stride = a["stride"]
        no_stride = stride is None or (isinstance(stride, list | tuple) and len(stride) == 0)
        strides = kernel if no_stride else _spatial(stride, "stride", dims)
        pads = _spatial(a["padding"], "padding", dims)
        ceil, include = a["ceil_mode"], a["count_include_pad"]
        divisor = a.get("divisor_override")
        if ceil not in (True, False) or include not in (True, False):
            raise Unsupported
        if divisor is not None and (
            isinstance(divisor, bool) or not isinstance(divisor, numbers.Integral) or not divisor
        ):
            raise Unsupported
        out = untracked(fn, *bound.args, **bound.kwargs)
        spatial = tuple(x.shape[-dims:])
        out_spatial = tuple(out.shape[-dims:])
        # each dim's divisors (the window's size as the forward counts it), from the shapes
        per_dim = [
            _window_counts(*args, include)
            for args in zip(spatial, kernel, strides, pads, out_spatial, strict=True)
        ]
        single = math.prod(c[0] for c in per_dim) if all(len(set(c)) == 1 for c in per_dim) else 0
        ones = (1,) * (2 - dims)
        zeros = (0,) * (2 - dims)

        def backward(g: Tensor) -> Sequence[Any]:
            if divisor is not None:
                gs = g / divisor
            elif single:  # one divisor for every window
                gs = g / single
            else:
                pool = {"kernel_size": (*ones, *kernel), "stride": (*ones, *strides)}
                if include:  # the window cut at the padded input's end
                    wide = tuple(s + 2 * p for s, p in zip(spatial, pads, strict=True))
                    count = _ones_pool(g, wide, ceil_mode=ceil, **pool)
                    count = count[(..., *(slice(0, o) for o in out_spatial))]
                else:  # the input elements in the window
                    count = _ones_pool(g, spatial, padding=(*zeros, *pads), ceil_mode=ceil, **pool)
                gs = g / count.reshape(out_spatial)
            return (_spread(gs, spatial, kernel, strides, pads),)

        return recorded(out, f"AvgPool{max(dims, 2)}DBackward0", (x,), backward)

    return rule


def _window_matrix(like: Tensor, size: int, out: int) -> Tensor:
    """(size, out): column o is 1/len over torch's adaptive window o of ``size``, else 0 --
    the adaptive average pool of the rows of an identity matrix (two kernels)."""
    return F.adaptive_avg_pool1d(eye(size, dtype=like.dtype, device=like.device), out)


def _adaptive_avg_pool(dims: int) -> Callable[..., Any]:
    def rule(fn: Callable, input: Tensor, output_size: Any) -> Any:  # noqa: A002
        if not _is_tensor(input) or input.ndim < dims + 1:
            raise Unsupported
        out = untracked(fn, input, output_size)
        spatial = tuple(input.shape[-dims:])
        out_spatial = tuple(out.shape[-dims:])
        shape = tuple(input.shape)
        regular = all(o and not s % o for s, o in zip(spatial, out_spatial, strict=True))

        def backward(g: Tensor) -> Sequence[Any]:
            if not g.numel():
                return (g.new_zeros(shape),)
            if regular:  # windows of one size that tile the input
                kernel = tuple(s // o for s, o in zip(spatial, out_spatial, strict=True))
                gs = g / math.prod(kernel)
                return (_spread(gs, spatial, kernel, kernel, (0,) * dims),)
            # one 2-D matmul per dim (a batched one of many tiny planes costs several times more)
            gx = g.reshape(-1, out_spatial[-1]).matmul(
                _window_matrix(g, spatial[-1], out_spatial[-1]).mT
            )  # (planes * OH, W)
            if dims >= 2:
                (h, w), oh = spatial[-2:], out_spatial[-2]
                gx = gx.reshape(-1, oh, w).transpose(1, 2).reshape(-1, oh)
                gx = gx.matmul(_window_matrix(g, h, oh).mT).reshape(-1, w, h).transpose(1, 2)
            if dims == 3:
                d, od, area = spatial[0], out_spatial[0], spatial[1] * spatial[2]
                gx = gx.reshape(-1, od, area).transpose(1, 2).reshape(-1, od)
                gx = gx.matmul(_window_matrix(g, d, od).mT).reshape(-1, area, d).transpose(1, 2)
            return (gx.reshape(shape),)

        name = f"AdaptiveAvgPool{max(dims, 2)}DBackward0"
        return recorded(out, name, (input,), backward)

    return rule


# -- batch norm -----------------------------------------------------------------------------
def _batch_norm(
    fn: Callable,
    input: Tensor,  # noqa: A002 - torch's name
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: Any = False,
    momentum: Any = 0.1,
    eps: Any = 1e-5,
) -> Any:
    if not _is_tensor(input) or input.ndim < 2 or training not in (True, False):
        raise Unsupported
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise Unsupported
    if not training and (_needs(running_mean) or _needs(running_var)):
        raise Unsupported  # no formula for the running statistics' gradients
    out = untracked(fn, input, running_mean, running_var, weight, bias, training, momentum, eps)
    ndim, channels = input.ndim, input.shape[1]
    dims = (0, *range(2, ndim))
    need_x, need_w, need_b = input.requires_grad, _needs(weight), _needs(bias)
    eps = float(eps)

    def per_channel(t: Tensor) -> Tensor:
        return t.view(channels, *([1] * (ndim - 2)))

    def backward(g: Tensor, x: Tensor, w: Any, *running: Any) -> Sequence[Any]:
        if training:
            mu = x.mean(dims, keepdim=True)
            xc = x - mu
            rstd = ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
        else:
            rm, rv = running
            rstd = per_channel((rv + eps).rsqrt())
            xc = x - per_channel(rm)
        xhat = xc * rstd
        gx = gw = gb = None
        if need_x:
            gh = g * per_channel(w) if w is not None else g
            if training:
                gx = gh - gh.mean(dims, keepdim=True) - xhat * (gh * xhat).mean(dims, keepdim=True)
                gx = gx * rstd
            else:
                gx = gh * rstd
        if need_w:
            gw = (g * xhat).sum(dims)
        if need_b:
            gb = g.sum(dims)
        return gx, gw, gb

    keep = (input, weight) if training else (input, weight, running_mean, running_var)
    return recorded(out, "NativeBatchNormBackward0", (input, weight, bias), backward, keep)


CONV_NN_RULES: dict[str, Callable[..., Any]] = {
    "conv1d": _conv(1),
    "conv2d": _conv(2),
    "conv_transpose1d": _conv_transpose(1),
    "conv_transpose2d": _conv_transpose(2),
    "conv3d": _conv(3),
    "conv_transpose3d": _conv_transpose(3),
    "max_pool1d": _max_pool(1, "MaxPool2DWithIndicesBackward0"),
    "max_pool2d": _max_pool(2, "MaxPool2DWithIndicesBackward0"),
    "adaptive_max_pool1d": _max_pool(1, "AdaptiveMaxPool2DBackward0"),
    "adaptive_max_pool2d": _max_pool(2, "AdaptiveMaxPool2DBackward0"),
    "avg_pool1d": _avg_pool(1),
    "avg_pool2d": _avg_pool(2),
    "adaptive_avg_pool1d": _adaptive_avg_pool(1),
    "adaptive_avg_pool2d": _adaptive_avg_pool(2),
    "max_pool3d": _max_pool(3, "MaxPool3DWithIndicesBackward0"),
    "adaptive_max_pool3d": _max_pool(3, "AdaptiveMaxPool3DBackward0"),
    "avg_pool3d": _avg_pool(3),
    "adaptive_avg_pool3d": _adaptive_avg_pool(3),
    "fractional_max_pool2d": _max_pool(2, "FractionalMaxPool2DBackward0"),
    "fractional_max_pool2d_with_indices": _max_pool(2, "FractionalMaxPool2DBackward0", True),
    "fractional_max_pool3d": _max_pool(3, "FractionalMaxPool3DBackward0"),
    "fractional_max_pool3d_with_indices": _max_pool(3, "FractionalMaxPool3DBackward0", True),
    "batch_norm": _batch_norm,
}
