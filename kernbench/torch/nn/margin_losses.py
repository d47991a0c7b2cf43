"""``torch.nn.functional``'s margin and embedding losses: ``margin_ranking_loss``,
``hinge_embedding_loss``, ``soft_margin_loss``, ``cosine_embedding_loss``,
``multi_margin_loss``, ``multilabel_margin_loss``, ``multilabel_soft_margin_loss``,
``triplet_margin_loss`` and ``triplet_margin_with_distance_loss``.

Each is written as torch's ATen (or Python) reference writes it, with tensor methods
(``clamp_min``, ``where``, ``gather``, sums and norms), so autograd records it method by
method and a call costs the elementwise kernels and reductions it makes.  The class
targets of the multi-class losses are compared with an ``arange`` of the classes on the
device (no host read), so timing-only runs cost the same kernels; with values, their
range is checked on the host first, as torch's CPU kernels check it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.factories import arange
from kernbench.torch.nn.argument_checks import (
    call_name,
    floating_input,
    host_values,
    index_input,
    number_argument,
    reduced,
    reduction_argument,
)
from kernbench.torch.shapes import flag_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "cosine_embedding_loss",
    "hinge_embedding_loss",
    "margin_ranking_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]

# torch's EPSILON in cosine_embedding_loss: added to each squared magnitude.
_COSINE_EPSILON = 1e-12


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``, broadcast."""
    what = "margin_ranking_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    x1, x2 = floating_input(input1, what, "input1"), floating_input(input2, what, "input2")
    y = tensor_argument(target, call_name(what))
    margin = number_argument(margin, what, "margin")
    if not x1.ndim == x2.ndim == y.ndim:
        raise TensorError(
            f"{call_name(what)}: All input tensors should have same dimension but got sizes: "
            f"input1: {tuple(x1.shape)}, input2: {tuple(x2.shape)}, target: {tuple(y.shape)} "
        )
    return reduced((-y * (x1 - x2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    margin: float = 1.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``x`` where ``target`` is 1, ``max(0, margin - x)`` where it is -1 (as torch: the
    sum of both terms, each zero unless its target)."""
    what = "hinge_embedding_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    x = floating_input(input, what)
    y = tensor_argument(target, call_name(what))
    margin = number_argument(margin, what, "margin")
    on_margin = (margin - x).clamp_min(0).where(y != 1, 0.0)
    on_self = x.where(y != -1, 0.0)
    return reduced(on_margin + on_self, reduction)


def soft_margin_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``log(1 + exp(-target * x))``, as torch's ``log1p(exp(...))``."""
    what = "soft_margin_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    x = floating_input(input, what)
    y = tensor_argument(target, call_name(what))
    return reduced((-x * y).exp().log1p(), reduction)


def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``1 - cos(x1, x2)`` where ``target`` is 1, ``max(0, cos(x1, x2) - margin)`` where
    it is -1; ``cos`` over dim 1 (2-D inputs, 1-D target) or dim 0 (1-D inputs, a 0-d
    target), each squared magnitude plus 1e-12 as torch's."""
    what = "cosine_embedding_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    x1, x2 = floating_input(input1, what, "input1"), floating_input(input2, what, "input2")
    y = tensor_argument(target, call_name(what))
    margin = number_argument(margin, what, "margin")
    if y.ndim not in (0, 1):
        raise TensorError(
            f"{call_name(what)}: 0D or 1D target tensor expected, multi-target not supported"
        )
    wanted = y.ndim + 1
    if x1.ndim != wanted or x2.ndim != wanted:
        raise TensorError(
            f"{call_name(what)}: {y.ndim}D target tensor expects {wanted}D input tensors, but "
            f"found inputs with sizes {list(x1.shape)} and {list(x2.shape)}."
        )
    d = y.ndim
    dot = (x1 * x2).sum(d)
    magnitudes = ((x1 * x1).sum(d) + _COSINE_EPSILON) * ((x2 * x2).sum(d) + _COSINE_EPSILON)
    cos = dot / magnitudes.sqrt()
    positive = (1 - cos).where(y == 1, 0.0)
    negative = (cos - margin).clamp_min(0).where(y == -1, 0.0)
    return reduced(positive + negative, reduction)


def _class_frame(what: str, x: Tensor) -> tuple[int, int]:
    """(frames, classes) of a multi-class loss's input: ``(C,)``, ``(N, C)`` or a 0-d."""
    if not ((x.ndim == 2 and x.shape[1]) or (x.ndim == 1 and x.shape[0]) or x.ndim == 0):
        raise TensorError(
            f"{call_name(what)}: Expected non-empty vector or matrix with optional 0-dim batch "
            f"size, but got: {list(x.shape)}"
        )
    frames = x.shape[0] if x.ndim == 2 else 1
    classes = x.shape[-1] if x.ndim else 1
    return frames, classes


def multi_margin_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Each sample's ``sum over i != y of max(0, margin - x[y] + x[i]) ** p * weight[y]``,
    divided by the number of classes (``p`` 1 or 2)."""
    what = "multi_margin_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    if p not in (1, 2) or isinstance(p, bool):
        raise TensorValueError(f"{call_name(what)}: only p == 1 and p == 2 supported")
    x = floating_input(input, what)
    y = index_input(target, what)
    margin = number_argument(margin, what, "margin")
    frames, classes = _class_frame(what, x)
    if y.ndim > 1 or y.numel() != frames:
        raise TensorError(
            f"{call_name(what)}: inconsistent target size, expected {frames} but got "
            f"{list(y.shape)}"
        )
    w = None
    if weight is not None:
        w = floating_input(weight, what, "weight")
        if w.ndim != 1:
            raise TensorValueError(f"{call_name(what)}: weight must be one-dimensional")
        if w.numel() != classes:
            raise TensorError(
                f"{call_name(what)}: inconsistent weight size, expected {classes} but got "
                f"{list(w.shape)}"
            )
    values = host_values(y)
    if values is not None and values.size and (values.min() < 0 or values.max() >= classes):
        raise TensorError(f"{call_name(what)}: target out of range")
    rows = x.reshape(frames, classes)
    picked = y.reshape(frames, 1).long()
    hinge = (rows - rows.gather(1, picked) + margin).clamp_min(0)
    if p == 2:
        hinge = hinge * hinge
    if w is not None:
        hinge = hinge * w.index_select(0, picked.reshape(-1)).unsqueeze(1)
    others = arange(classes, device=x.get_device()) != picked
    loss = hinge.where(others, 0.0).sum(1) / classes
    return reduced(loss.reshape(()) if y.ndim == 0 else loss, reduction)


def multilabel_margin_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Each sample's ``sum over its targets j and non-targets i of max(0, 1 - (x[j] -
    x[i]))``, divided by the number of classes; a sample's targets are the indices of its
    ``target`` row up to the first -1 (repeats count again, as torch's loop)."""
    what = "multilabel_margin_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    x = floating_input(input, what)
    y = index_input(target, what)
    frames, classes = _class_frame(what, x)
    fits = y.ndim <= 1 and y.numel() == classes if x.ndim <= 1 else tuple(y.shape) == tuple(x.shape)
    if not fits:
        raise TensorError(
            f"{call_name(what)}: inconsistent target size: {list(y.shape)} for input of size: "
            f"{list(x.shape)}"
        )
    labels = y.reshape(frames, classes).long()
    listed = (labels != -1).cumprod(1)  # 1 up to each row's first -1
    values = host_values(labels)
    if values is not None and values.size:
        prefix = values[host_values(listed).astype(bool)]
        if prefix.size and (prefix.min() < 0 or prefix.max() >= classes):
            raise TensorError(f"{call_name(what)}: target index is out of range")
    classes_row = arange(classes, device=x.get_device())
    hits = (labels.unsqueeze(2) == classes_row).long() * listed.unsqueeze(2)
    counts = hits.sum(1).to(x.dtype)  # how often each class is listed, (frames, classes)
    others = (counts == 0).to(x.dtype)
    rows = x.reshape(frames, classes)
    pairs = (1.0 - rows.unsqueeze(2) + rows.unsqueeze(1)).clamp_min(0)  # [n, j, i]
    loss = (pairs * counts.unsqueeze(2) * others.unsqueeze(1)).sum((1, 2)) / classes
    return reduced(loss.reshape(()) if x.ndim <= 1 else loss, reduction)


def _log_sigmoid(x: Tensor) -> Tensor:
    """``log(sigmoid(x))`` = ``min(x, 0) - log1p(exp(-|x|))``, stable, as tensor methods."""
    return x.clamp_max(0) - (-x.abs()).exp().log1p()


def multilabel_soft_margin_loss(
    input: Tensor,  # noqa: A002
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``-(t * logsigmoid(x) + (1 - t) * logsigmoid(-x)) * weight``, averaged over the
    classes (the last dim), as torch's Python."""
    what = "multilabel_soft_margin_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    x = floating_input(input, what)
    y = tensor_argument(target, call_name(what))
    loss = -(y * _log_sigmoid(x) + (1 - y) * _log_sigmoid(-x))
    if weight is not None:
        loss = loss * tensor_argument(weight, call_name(what))
    class_dim = x.ndim - 1
    classes = x.shape[class_dim] if x.ndim else 1
    return reduced(loss.sum(class_dim) / classes if x.ndim else loss, reduction)


def _check_triplet_dims(what: str, anchor: Any, positive: Any, negative: Any) -> None:
    dims = [tensor_argument(t, call_name(what)).ndim for t in (anchor, positive, negative)]
    if not dims[0] == dims[1] == dims[2]:
        raise TensorError(
            f"{call_name(what)}: The anchor, positive, and negative tensors are expected to "
            f"have the same number of dimensions, but got: anchor {dims[0]}D, positive "
            f"{dims[1]}D, and negative {dims[2]}D inputs"
        )


def _p_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim (any ``p`` > 0 or ``inf``), as torch's
    ``pairwise_distance``, from tensor methods."""
    diff = x1 - x2 + eps
    if p == 2:
        return diff.norm(2, -1)
    if p == 1:
        return diff.abs().sum(-1)
    if math.isinf(p):
        return diff.abs().amax(-1)
    return diff.abs().pow(p).sum(-1).pow(1.0 / p)


def _triplet(
    distance: Callable[[Tensor, Tensor], Tensor],
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float,
    swap: bool,
) -> Tensor:
    to_positive = distance(anchor, positive)
    to_negative = distance(anchor, negative)
    if swap:
        to_negative = to_negative.minimum(distance(positive, negative))
    return (margin + to_positive - to_negative).clamp_min(0)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, margin + d(a, pos) - d(a, neg))`` with ``d`` the ``p``-norm distance over
    the last dim (``+ eps``); ``swap`` takes ``min(d(a, neg), d(pos, neg))``."""
    what = "triplet_margin_loss"
    reduction = reduction_argument(what, reduction, size_average, reduce)
    _check_triplet_dims(what, anchor, positive, negative)
    a = floating_input(anchor, what, "anchor")
    pos = floating_input(positive, what, "positive")
    neg = floating_input(negative, what, "negative")
    margin = number_argument(margin, what, "margin")
    p = number_argument(p, what, "p")
    eps = number_argument(eps, what, "eps")
    if p <= 0:
        raise TensorError(f"{call_name(what)}: p must be positive, got {p}")
    swap = flag_argument(swap, call_name(what), "swap")
    loss = _triplet(lambda u, v: _p_distance(u, v, p, eps), a, pos, neg, margin, swap)
    return reduced(loss, reduction)


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """:func:`triplet_margin_loss` with ``distance_function`` (default: the 2-norm
    ``pairwise_distance``) in place of the ``p``-norm; ``margin`` must be positive."""
    what = "triplet_margin_with_distance_loss"
    reduction = reduction_argument(what, reduction)
    margin = number_argument(margin, what, "margin")
    if margin <= 0:
        raise TensorValueError(
            f"{call_name(what)}: expected margin to be greater than 0, got {margin} instead"
        )
    _check_triplet_dims(what, anchor, positive, negative)
    swap = flag_argument(swap, call_name(what), "swap")
    distance = distance_function if distance_function is not None else _p_distance
    return reduced(_triplet(distance, anchor, positive, negative, margin, swap), reduction)
