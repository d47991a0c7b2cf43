"""Backward formulas of ``F.interpolate`` (and ``upsample``), ``F.unfold`` and ``F.fold``.

* ``interpolate``: 'area' is the adaptive average pool, which records its own node (as
  torch's ``interpolate`` calls it); the kernel modes record torch's node
  (``UpsampleNearest2DBackward0``, ``UpsampleBilinear2DBackward0``, ...; a 'nearest' call
  given a ``scale_factor`` still records the ``...Backward0`` name) whose backward is the
  interpolation kernel run as a scatter: each output's gradient times each tap's weight
  added to the tap's input position.
* ``pixel_shuffle`` and ``pixel_unshuffle`` are each other's inverse and backward
  (``PixelShuffleBackward0``, ``PixelUnshuffleBackward0``).
* ``unfold`` and ``fold`` are each other's adjoint: ``Im2ColBackward0`` is a ``fold`` of
  the gradient, ``Col2ImBackward0`` an ``unfold``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd.formulas import Unsupported, recorded, untracked
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.interpolation import resample_backward, resample_plan, warn_deprecated

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["RESAMPLE_NN_RULES"]

_NODES = {
    "nearest": "UpsampleNearest{}DBackward0",
    "nearest-exact": "UpsampleNearestExact{}DBackward0",
    "linear": "UpsampleLinear1DBackward0",
    "bilinear": "UpsampleBilinear2DBackward0",
    "bicubic": "UpsampleBicubic2DBackward0",
    "trilinear": "UpsampleTrilinear3DBackward0",
}


def _interpolate(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    try:
        x, plan = resample_plan(*args, **kwargs)
    except TypeError:
        raise Unsupported from None  # (the forward raises its own error)
    if plan.mode == "area":  # the pool records its node, as torch's interpolate calls it
        pool = getattr(F, f"adaptive_avg_pool{len(plan.sizes)}d")
        return pool(x, plan.out_sizes if len(plan.sizes) > 1 else plan.out_sizes[0])
    out = untracked(fn, *args, **kwargs)
    shape = tuple(x.shape)

    def backward(g: Tensor) -> Sequence[Any]:
        return (resample_backward(g, plan, shape),)

    return recorded(out, _NODES[plan.mode].format(len(plan.sizes)), (x,), backward)


def _deprecated(**fixed: Any) -> Callable[..., Any]:
    """``upsample`` and its fixed-mode forms: their warning, then ``F.interpolate``, which
    records."""

    def rule(fn: Callable, *args: Any, **kwargs: Any) -> Any:
        bound = _bound(fn, *args, **kwargs)
        warn_deprecated(fn.__name__)
        return F.interpolate(**bound, **fixed)

    return rule


def _bound(fn: Callable, *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        raise Unsupported from None
    bound.apply_defaults()
    return dict(bound.arguments)


def _unfold(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    a = _bound(fn, *args, **kwargs)
    x = a["input"]
    out = untracked(fn, *args, **kwargs)
    geometry = {k: a[k] for k in ("kernel_size", "dilation", "padding", "stride")}
    size = tuple(x.shape[-2:])

    def backward(g: Tensor) -> Sequence[Any]:
        return (F.fold(g, size, **geometry),)

    return recorded(out, "Im2ColBackward0", (x,), backward)


def _fold(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    a = _bound(fn, *args, **kwargs)
    x = a["input"]
    out = untracked(fn, *args, **kwargs)
    geometry = {k: a[k] for k in ("kernel_size", "dilation", "padding", "stride")}

    def backward(g: Tensor) -> Sequence[Any]:
        return (F.unfold(g, **geometry),)

    return recorded(out, "Col2ImBackward0", (x,), backward)


def _shuffle(name: str, inverse: str) -> Callable[..., Any]:
    """``pixel_shuffle``/``pixel_unshuffle``: the gradient goes back by the other (one
    copy), as torch's."""

    def rule(fn: Callable, *args: Any, **kwargs: Any) -> Any:
        a = _bound(fn, *args, **kwargs)
        x, factor = a["input"], list(a.values())[1]
        out = untracked(fn, *args, **kwargs)

        def backward(g: Tensor) -> Sequence[Any]:
            return (getattr(F, inverse)(g, factor),)

        return recorded(out, name, (x,), backward)

    return rule


RESAMPLE_NN_RULES: dict[str, Callable[..., Any]] = {
    "interpolate": _interpolate,
    "upsample": _deprecated(),
    "upsample_nearest": _deprecated(mode="nearest"),
    "upsample_bilinear": _deprecated(mode="bilinear", align_corners=True),
    "unfold": _unfold,
    "fold": _fold,
    "pixel_shuffle": _shuffle("PixelShuffleBackward0", "pixel_unshuffle"),
    "pixel_unshuffle": _shuffle("PixelUnshuffleBackward0", "pixel_shuffle"),
}
