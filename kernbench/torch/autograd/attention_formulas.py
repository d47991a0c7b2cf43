"""Backward formulas of attention and masking: ``F.scaled_dot_product_attention``,
``masked_fill``, ``torch.where``, ``tril``/``triu``, and the ops that cut a tensor into
pieces (``split``, ``chunk``, ``unbind``, ``narrow``).

As in :mod:`~kernbench.torch.autograd.formulas`, each rule runs the forward with recording
off and records a node whose backward is written with the facade's ops.  The attention's
backward is the "math" one: the forward keeps its softmax probabilities and its dropout
mask, and the backward is four batched matmuls (two for the value's and the weights'
gradients, two for the query's and the key's) and the softmax backward between them.
An op with several results (``split``, ``chunk``, ``unbind``) gives each result a node of
its own, whose backward writes the gradient into a zero tensor of the input's shape; the
engine adds the ones that a backward reaches, so results that are not used cost nothing.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.torch.autograd.formulas import Unsupported, recorded, sum_to, untracked
from kernbench.torch.logic import where
from kernbench.torch.nn.attention import attention_parts

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["ATTENTION_FUNCTION_RULES", "ATTENTION_NN_RULES", "ATTENTION_RULES"]


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "grad_fn") and hasattr(value, "storage_device_tensor")


def _needs(value: Any) -> bool:
    return _is_tensor(value) and value.requires_grad


def _as(g: Tensor, like: Tensor) -> Tensor:
    """``g`` in ``like``'s dtype (a promoted result's gradient goes back to the input's)."""
    return g if g.dtype is like.dtype else g.to(like.dtype)


# -- scaled_dot_product_attention --------------------------------------------------------------
def _ungrouped(g: Tensor, heads: int) -> Tensor:
    """The gradient of ``t.repeat_interleave(r, dim=-3)`` (``heads`` of them before) for
    the gradient ``g`` of the repeated tensor: each group of ``r`` heads summed."""
    total = g.shape[-3]
    if total == heads:
        return g
    return g.reshape(*g.shape[:-3], heads, total // heads, *g.shape[-2:]).sum(-3)


def _sdpa(
    fn: Callable,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Any = None,
    enable_gqa: bool = False,
) -> Any:
    out, probs, kept = untracked(
        attention_parts,
        query,
        key,
        value,
        attn_mask,
        dropout_p,
        is_causal,
        scale,
        enable_gqa,
        keep=True,
    )
    q_shape, k_shape, v_shape = tuple(query.shape), tuple(key.shape), tuple(value.shape)
    k_heads = k_shape[-3] if len(k_shape) >= 3 else 1
    v_heads = v_shape[-3] if len(v_shape) >= 3 else 1
    heads = q_shape[-3] if len(q_shape) >= 3 else 1
    factor = 1.0 / math.sqrt(q_shape[-1]) if scale is None else float(scale)
    dropped = 0 < dropout_p < 1
    rescale = float(np.float32(1.0) / np.float32(1.0 - dropout_p)) if dropped else 1.0
    need_q, need_k, need_v = query.requires_grad, key.requires_grad, value.requires_grad
    need_mask = _needs(attn_mask)
    mask_shape = tuple(attn_mask.shape) if need_mask else ()

    def grouped(t: Tensor, n: int) -> Tensor:
        return t.repeat_interleave(heads // n, dim=-3) if enable_gqa and heads != n else t

    def backward(
        g: Tensor, q: Tensor, k: Tensor, v: Tensor, p: Tensor, keep: Any, mask: Any
    ) -> Sequence[Any]:
        if dropout_p == 1:  # the weights were all zero
            zero = [t.new_zeros(t.shape) if _needs(t) else None for t in (query, key, value)]
            return (*zero, attn_mask.new_zeros(mask_shape) if need_mask else None)
        gq = gk = gv = gm = None
        if need_v:  # dV = Wᵀ · dY, W the weights after the dropout
            weights = p.mul(keep).mul_(rescale) if dropped else p
            gv = _as(sum_to(_ungrouped(weights.mT.matmul(g), v_heads), v_shape), value)
        if not (need_q or need_k or need_mask):
            return gq, gk, gv, gm
        gp = g.matmul(grouped(v, v_heads).mT)  # dW = dY · Vᵀ
        if dropped:
            gp.mul_(keep).mul_(rescale)  # through the dropout
        # softmax backward: dS = P * (dP - sum(dP * P, -1))
        gs = p * (gp - (gp * p).sum(-1, keepdim=True))
        if need_mask:  # the float mask was added to the scores (gm may be gs itself)
            gm = _as(sum_to(gs, mask_shape), attn_mask)
        gs = gs * factor if need_mask else gs.mul_(factor)
        if need_q:  # dQ = dS · K · scale
            gq = _as(sum_to(gs.matmul(grouped(k, k_heads)), q_shape), query)
        if need_k:  # dK = dSᵀ · Q · scale
            gk = _as(sum_to(_ungrouped(gs.mT.matmul(q), k_heads), k_shape), key)
        return gq, gk, gv, gm

    return recorded(
        out,
        "ScaledDotProductEfficientAttentionBackward0",
        (query, key, value, attn_mask),
        backward,
        (query, key, value, probs, kept, attn_mask),
    )


# -- masked_fill, where, tril, triu -------------------------------------------------------------
def _masked_fill(fn: Callable, self: Tensor, mask: Any, value: Any) -> Any:
    if not _is_tensor(mask):
        raise Unsupported  # the forward raises torch's error
    out = untracked(fn, self, mask, value)
    x_shape = tuple(self.shape)
    need_x, need_value = self.requires_grad, _needs(value)
    value_shape = tuple(value.shape) if need_value else ()

    def backward(g: Tensor, m: Tensor) -> Sequence[Any]:
        gx = _as(sum_to(g.masked_fill(m, 0), x_shape), self) if need_x else None
        gv = None
        if need_value:  # every filled element is the value
            gv = _as(where(m, g, 0).sum().reshape(value_shape), value)
        return gx, None, gv

    name = "MaskedFillBackward1" if _is_tensor(value) else "MaskedFillBackward0"
    return recorded(out, name, (self, mask, value), backward, (mask,))


def _where_of(fn: Callable, condition: Any, a: Any, b: Any, *args: Any) -> Any:
    if not _is_tensor(condition) or (a is None and b is None):
        raise Unsupported
    out = untracked(fn, *args)
    need_a, need_b = _needs(a), _needs(b)
    a_shape = tuple(a.shape) if need_a else ()
    b_shape = tuple(b.shape) if need_b else ()

    def backward(g: Tensor, c: Tensor) -> Sequence[Any]:
        ga = _as(sum_to(where(c, g, 0), a_shape), a) if need_a else None
        gb = _as(sum_to(where(c, 0, g), b_shape), b) if need_b else None
        return None, ga, gb

    return recorded(out, "WhereBackward0", (condition, a, b), backward, (condition,))


def _where(
    fn: Callable,
    condition: Any,
    input: Any = None,  # noqa: A002
    other: Any = None,
    **kwargs: Any,
) -> Any:
    if kwargs:  # out=: no formula (torch refuses it with grad)
        raise Unsupported
    return _where_of(fn, condition, input, other, condition, input, other)


def _where_method(fn: Callable, self: Tensor, condition: Any, other: Any) -> Any:
    return _where_of(fn, condition, self, other, self, condition, other)


def _triangle(name: str) -> Callable[..., Any]:
    def rule(fn: Callable, self: Tensor, diagonal: Any = 0) -> Any:
        out = untracked(fn, self, diagonal)
        cut = "tril" if name.startswith("Tril") else "triu"
        return recorded(out, name, (self,), lambda g: (getattr(g, cut)(diagonal),))

    return rule


# -- pieces: narrow, split, chunk, unbind -------------------------------------------------------
def _placed(shape: tuple[int, ...], key: tuple[Any, ...]) -> Callable[..., Sequence[Any]]:
    """The backward of a piece ``x[key]`` of an input of ``shape``: the gradient written
    into zeros of the input's shape."""

    def backward(g: Tensor) -> Sequence[Any]:
        full = g.new_zeros(shape)
        full[key] = g
        return (full,)

    return backward


def _narrow(fn: Callable, self: Tensor, dim: Any, start: Any, length: Any) -> Any:
    out = untracked(fn, self, dim, start, length)
    shape = tuple(self.shape)
    d = int(dim) % self.ndim
    begin = int(start) + (shape[d] if int(start) < 0 else 0)
    key = (slice(None),) * d + (slice(begin, begin + int(length)),)
    return recorded(out, "SliceBackward0", (self,), _placed(shape, key))


def _select(fn: Callable, self: Tensor, dim: Any, index: Any) -> Any:
    out = untracked(fn, self, dim, index)
    shape = tuple(self.shape)
    d = int(dim) % self.ndim
    at = int(index) + (shape[d] if int(index) < 0 else 0)
    return recorded(out, "SelectBackward0", (self,), _placed(shape, (slice(None),) * d + (at,)))


def _pieces(self: Tensor, outs: Any, dim: Any, name: str, drop: bool) -> Any:
    """Each of ``outs`` (consecutive pieces of ``self`` along ``dim``, that dim removed
    when ``drop``) made the result of a node of its own."""
    shape = tuple(self.shape)
    d = int(dim) % self.ndim
    start = 0
    for piece in outs:
        size = 1 if drop else piece.shape[d]
        index: Any = start if drop else slice(start, start + size)
        recorded(piece, name, (self,), _placed(shape, (slice(None),) * d + (index,)))
        start += size
    return outs


def _split(fn: Callable, self: Tensor, split_size: Any, dim: Any = 0) -> Any:
    outs = untracked(fn, self, split_size, dim)
    sized = not isinstance(split_size, numbers.Integral)
    return _pieces(self, outs, dim, "SplitWithSizesBackward0" if sized else "SplitBackward0", False)


def _chunk(fn: Callable, self: Tensor, chunks: Any, dim: Any = 0) -> Any:
    return _pieces(self, untracked(fn, self, chunks, dim), dim, "SplitBackward0", False)


def _unbind(fn: Callable, self: Tensor, dim: Any = 0) -> Any:
    return _pieces(self, untracked(fn, self, dim), dim, "UnbindBackward0", True)


def _through(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """A ``torch.<name>`` that calls the tensor method of the same name, run with recording
    on, so that the method records."""
    return fn(*args, **kwargs)


ATTENTION_RULES: dict[str, Callable[..., Any]] = {
    "masked_fill": _masked_fill,
    "where": _where_method,
    "tril": _triangle("TrilBackward0"),
    "triu": _triangle("TriuBackward0"),
    "narrow": _narrow,
    "select": _select,
    "split": _split,
    "chunk": _chunk,
    "unbind": _unbind,
}

ATTENTION_FUNCTION_RULES: dict[str, Callable[..., Any]] = {
    "where": _where,
    "split": _through,
    "chunk": _through,
    "unbind": _through,
    "narrow": _through,
    "select": _through,
}

ATTENTION_NN_RULES: dict[str, Callable[..., Any]] = {
    "scaled_dot_product_attention": _sdpa,
}
