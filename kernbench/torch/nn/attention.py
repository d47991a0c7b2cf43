"""``torch.nn.functional.scaled_dot_product_attention``, composed of device kernels.

``softmax(query · keyᵀ · scale + mask) · value`` as PyTorch's reference
implementation writes it (its "math" backend): a batched ``matmul``, a scale,
the mask (``is_causal``'s lower triangle, a bool ``attn_mask`` whose True
elements take part, or a float one that is added), ``softmax`` over the last
dimension, ``dropout`` when ``dropout_p`` > 0, and a second ``matmul``.  Each
is a kernel and costs simulated time; torch's fused kernels (flash, memory
efficient) are not modelled, so the ``(L, S)`` scores are written to memory.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.dtypes import BOOL
from kernbench.torch.factories import ones
from kernbench.torch.sampling import keep_mask
from kernbench.torch.tensor import Tensor

__all__ = ["attention_parts", "scaled_dot_product_attention"]

_WHAT = "torch.nn.functional.scaled_dot_product_attention"


def _tensor(value: Any, name: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise TensorError(f"{_WHAT}: {name} must be a Tensor, got {type(value).__name__}")
    if value.ndim < 2:
        raise TensorError(
            f"{_WHAT}: {name} must have at least 2 dimensions (..., length, features), got "
            f"shape {tuple(value.shape)}"
        )
    if not value.dtype.is_floating_point:
        raise TensorError(f"{_WHAT}: {name} must be a floating tensor, got {value.dtype!r}")
    return value


def _free(temps: list[Tensor]) -> None:
    """Free the temporaries made here, each once: a batched matmul's result is a view of
    its own fresh storage, so the storage is freed."""
    for t in temps:
        storage = t.storage_device_tensor
        if not storage.is_freed:
            storage.free()


def _grouped(t: Tensor, heads: int, name: str) -> tuple[Tensor, bool]:
    """``t`` with each of its heads (dim -3) repeated to make ``heads``, as ``enable_gqa``."""
    if t.ndim < 3 or heads % t.shape[-3]:
        raise TensorError(
            f"{_WHAT}: with enable_gqa=True the query's {heads} heads (dim -3) must be a "
            f"multiple of {name}'s, got {name} of shape {tuple(t.shape)}"
        )
    repeat = heads // t.shape[-3]
    if repeat == 1:
        return t, False
    return t.repeat_interleave(repeat, dim=-3), True


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """Attention of ``query`` ``(..., L, E)`` over ``key`` ``(..., S, E)`` and ``value``
    ``(..., S, Ev)``: ``(..., L, Ev)``, with torch's arguments and checks."""
    return attention_parts(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, keep=False
    )[0]


def attention_parts(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    *,
    keep: bool,
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """:func:`scaled_dot_product_attention`'s output; with ``keep``, also the softmax
    probabilities (before dropout) and the dropout's bool keep mask (None without
    dropout), left allocated for a backward.  Keeping the probabilities when dropout
    is on makes the dropout write a new tensor instead of scaling them in place (the
    same two kernels, one more ``(L, S)`` buffer)."""
    q, k, v = _tensor(query, "query"), _tensor(key, "key"), _tensor(value, "value")
    if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
        raise TensorError(
            f"{_WHAT}: query (..., L, E), key (..., S, E) and value (..., S, Ev) do not fit: "
            f"got {tuple(q.shape)}, {tuple(k.shape)} and {tuple(v.shape)}"
        )
    if is_causal and attn_mask is not None:
        raise TensorError(f"{_WHAT}: Explicit attn_mask should not be set when is_causal=True")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real):
        raise TensorError(f"{_WHAT}: dropout_p must be a number, got {dropout_p!r}")
    if not 0.0 <= dropout_p <= 1.0:
        raise TensorError(f"{_WHAT}: dropout_p must be between 0 and 1, got {dropout_p}")
    if attn_mask is not None and not isinstance(attn_mask, Tensor):
        raise TensorError(
            f"{_WHAT}: attn_mask must be a Tensor or None, got {type(attn_mask).__name__}"
        )
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)):
        raise TensorError(f"{_WHAT}: scale must be a number or None, got {scale!r}")
    temps: list[Tensor] = []
    if enable_gqa:
        heads = q.shape[-3] if q.ndim >= 3 else 1
        k, copied = _grouped(k, heads, "key")
        temps += [k] if copied else []
        v, copied = _grouped(v, heads, "value")
        temps += [v] if copied else []
    length, source = q.shape[-2], k.shape[-2]
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = q.matmul(k.mT)
    scores.mul_(factor)
    if is_causal:  # torch's causal mask: the lower triangle from the top-left corner
        above = ones(length, source, dtype=BOOL, device=q.get_device()).triu_(1)
        scores.masked_fill_(above, float("-inf"))
        temps.append(above)
    elif attn_mask is not None:
        if attn_mask.dtype is BOOL:
            left_out = attn_mask.logical_not()
            masked = scores.masked_fill(left_out, float("-inf"))
            temps += [left_out]
        else:
            masked = scores + attn_mask
        temps.append(scores)
        scores = masked
    probs = scores.softmax(-1)
    temps.append(scores)
    weights, kept = probs, None
    if dropout_p == 1:
        weights = probs.mul(0) if keep else probs.mul_(0)
    elif dropout_p > 0:  # as F.dropout: a mask from the rank's generator, scaled in float32
        kept = keep_mask(probs, 1.0 - dropout_p, "scaled_dot_product_attention")
        weights = probs.mul(kept) if keep else probs.mul_(kept)
        weights.mul_(float(np.float32(1.0) / np.float32(1.0 - dropout_p)))
        temps += [] if keep else [kept]
    out = weights.matmul(v)
    temps += [weights] if keep and weights is not probs else []
    temps += [] if keep else [probs]
    _free(temps)
    return out, (probs if keep else None), (kept if keep else None)
