"""``torch.nn.MultiheadAttention`` as torch's ``multi_head_attention_forward``.

The input projection is one packed ``in_proj_weight`` of shape ``(3E, E)``
(separate ``q/k/v_proj_weight`` when ``kdim``/``vdim`` differ), the output
projection ``out_proj``, initialised as torch's (``xavier_uniform_``, zero
biases).  With ``need_weights=True`` the scores are written, masked,
softmaxed and returned (averaged over the heads unless
``average_attn_weights=False``), as torch's explicit path; with
``need_weights=False`` the heads go through
:func:`F.scaled_dot_product_attention`, as torch's fast path does.  Boolean
masks mark the positions *not* attended (torch's convention here, the opposite
of ``scaled_dot_product_attention``'s); float masks are added to the scores.
``add_bias_kv`` and ``add_zero_attn`` are not supported.  The forward is made of
recorded ops (``F.linear``, views, matmuls, ``softmax``, ``F.dropout``, sdpa), so
``backward()`` reaches the query, key and value, the input projection and ``out_proj``
through their nodes (ADR 0020).
"""

from __future__ import annotations

import math
from typing import Any

from kernbench.errors import TensorError, TensorTypeError
from kernbench.torch.dtypes import BOOL
from kernbench.torch.factories import empty, zeros
from kernbench.torch.nn import functional as F
from kernbench.torch.nn import init
from kernbench.torch.nn.layers import Linear
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.tensor import Tensor

__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear", "checked_mask"]


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for ``MultiheadAttention.out_proj`` (a Linear; it shows in the repr)."""


def checked_mask(mask: Tensor | None, name: str) -> Tensor | None:
    """``mask`` if it is bool or floating (torch's ``_canonical_mask`` check), else an error."""
    if mask is not None and mask.dtype is not BOOL and not mask.dtype.is_floating_point:
        raise TensorTypeError(f"only bool and floating types of {name} are supported")
    return mask


def _additive(mask: Tensor, like: Tensor) -> Tensor:
    """A bool mask (True: not attended) as 0/-inf in ``like``'s dtype; a float mask as is."""
    if mask.dtype is BOOL:
        return zeros(mask.shape, dtype=like.dtype).masked_fill(mask, float("-inf"))
    return mask if mask.dtype is like.dtype else mask.to(like.dtype)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` each."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                f"and num_heads={num_heads} instead"
            )
        if add_bias_kv or add_zero_attn:
            raise TensorError(
                "MultiheadAttention: add_bias_kv and add_zero_attn are not supported here; "
                "leave them False"
            )
        super().__init__()
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        made = {"device": device, "dtype": dtype}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **made))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **made))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **made))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **made))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **made))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias, **made)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self) -> tuple[list[Tensor], list[Tensor | None]]:
        E = self.embed_dim
        if self._qkv_same_embed_dim:
            weights = [self.in_proj_weight[i * E : (i + 1) * E] for i in range(3)]
        else:
            weights = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        b = self.in_proj_bias
        biases = [None] * 3 if b is None else [b[i * E : (i + 1) * E] for i in range(3)]
        return weights, biases

    def _mask(
        self,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        sizes: tuple[int, int, int],
        like: Tensor,
    ) -> Tensor | None:
        """The merged additive mask in ``like``'s dtype, broadcastable to ``(N, H, L, S)``,
        or None."""
        (N, L, S), H = sizes, self.num_heads
        merged = None
        if attn_mask is not None:
            if attn_mask.ndim == 2:
                if tuple(attn_mask.shape) != (L, S):
                    raise TensorError(
                        f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                        f"{(L, S)}."
                    )
                merged = _additive(attn_mask, like).view(1, 1, L, S)
            elif attn_mask.ndim == 3:
                if tuple(attn_mask.shape) != (N * H, L, S):
                    raise TensorError(
                        f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                        f"{(N * H, L, S)}."
                    )
                merged = _additive(attn_mask, like).reshape(N, H, L, S)
            else:
                raise TensorError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (N, S):
                raise TensorError(
                    f"expecting key_padding_mask shape of {(N, S)}, but got "
                    f"{tuple(key_padding_mask.shape)}"
                )
            padding = _additive(key_padding_mask, like).view(N, 1, 1, S)
            merged = padding if merged is None else merged + padding
        return merged

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """``(attn_output, attn_weights)``; the output is ``(L, N, E)`` (``(N, L, E)`` with
        ``batch_first``, ``(L, E)`` unbatched)."""
        if is_causal and attn_mask is None:
            raise TensorError(
                "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                "module method `generate_square_subsequent_mask` to create this mask."
            )
        key_padding_mask = checked_mask(key_padding_mask, "key_padding_mask")
        attn_mask = checked_mask(attn_mask, "attn_mask")
        batched = query.ndim == 3
        if self.batch_first and batched:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if not batched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        L, N, E = query.shape
        S, H, D = key.shape[0], self.num_heads, self.head_dim
        if E != self.embed_dim:
            raise TensorError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")
        (w_q, w_k, w_v), (b_q, b_k, b_v) = self._projections()

        def heads(x: Tensor, weight: Tensor, bias: Tensor | None, length: int) -> Tensor:
            projected = F.linear(x, weight, bias)  # (length, N, E)
            return projected.view(length, N, H, D).permute(1, 2, 0, 3)  # (N, H, length, D)

        q, k, v = heads(query, w_q, b_q, L), heads(key, w_k, b_k, S), heads(value, w_v, b_v, S)
        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = (q * (1.0 / math.sqrt(D))) @ k.transpose(-2, -1)  # (N, H, L, S)
            mask = self._mask(attn_mask, key_padding_mask, (N, L, S), scores)
            if mask is not None:
                scores = scores + mask
            attn = F.softmax(scores, dim=-1)
            if dropout_p > 0:
                attn = F.dropout(attn, p=dropout_p)
            out = attn @ v
            weights = attn.mean(dim=1) if average_attn_weights else attn
            if not batched:
                weights = weights.squeeze(0)
        else:
            mask = self._mask(attn_mask, key_padding_mask, (N, L, S), q)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        out = out.permute(2, 0, 1, 3).reshape(L * N, E)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).view(L, N, E)
        if not batched:
            return out.squeeze(1), weights
        if self.batch_first:
            return out.transpose(1, 0), weights
        return out, weights
