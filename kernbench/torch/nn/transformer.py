"""``torch.nn.Transformer`` and its encoder and decoder stacks and layers, as torch's slow path.

The layers are built from :class:`MultiheadAttention`, ``Linear``, ``Dropout`` and
``LayerNorm`` under torch's attribute names, so ``state_dict`` keys are torch's
(``self_attn.in_proj_weight``, ``linear1.weight``, ``norm1.bias``, ...), and their
forward runs the ops torch's non-fused path runs (post-norm by default, pre-norm with
``norm_first``); the gradients come from the ops' recorded nodes.  A stack holds deep
copies of its layer in a ``ModuleList`` named ``layers``.  Bool masks mark the
positions *not* attended, float masks are added to the scores, as
``MultiheadAttention`` takes them.  torch's fast path (fused kernels and nested
tensors in eval) is not modelled: eval runs the same ops as train, with dropout off.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.factories import full
from kernbench.torch.functions import triu
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.containers import ModuleList
from kernbench.torch.nn.functional_modules import GELU, ReLU
from kernbench.torch.nn.init import xavier_uniform_
from kernbench.torch.nn.layers import Dropout, LayerNorm, Linear
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.multihead import MultiheadAttention, checked_mask
from kernbench.torch.tensor import Tensor

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

Activation = str | Callable[[Tensor], Tensor]


def _activation(activation: Activation) -> Callable[[Tensor], Tensor]:
    if not isinstance(activation, str):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise TensorError(f"activation should be relu/gelu, not {activation}")


def _clones(module: Module, count: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(count)])


class _AttentionLayer(Module):
    """What the encoder and decoder layers share: the self-attention block."""

    def _sa_block(
        self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool
    ) -> Tensor:
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout1(x)


def _layer_parts(
    layer: Module,
    d_model: int,
    nhead: int,
    dim_feedforward: int,
    dropout: float,
    batch_first: bool,
    bias: bool,
    made: dict[str, Any],
    cross_attention: bool,
) -> None:
    """Register a layer's submodules in torch's order (which fixes ``state_dict``'s)."""
    layer.self_attn = MultiheadAttention(
        d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **made
    )
    if cross_attention:
        layer.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **made
        )
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias, **made)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias, **made)


class TransformerEncoderLayer(_AttentionLayer):
    """Self-attention and a feed-forward network, each with a residual and a LayerNorm."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        made = {"device": device, "dtype": dtype}
        _layer_parts(self, d_model, nhead, dim_feedforward, dropout, batch_first, bias, made, False)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        activation = _activation(activation)
        # torch's flag for its fused kernel: 1 relu, 2 gelu, 0 another callable.
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """``src`` through the layer: ``(S, N, E)`` (``(N, S, E)`` with ``batch_first``,
        ``(S, E)`` unbatched)."""
        padding = checked_mask(src_key_padding_mask, "src_key_padding_mask")
        mask = checked_mask(src_mask, "src_mask")
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), mask, padding, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, mask, padding, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerDecoderLayer(_AttentionLayer):
    """Self-attention, attention over the encoder's ``memory`` and a feed-forward network."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        made = {"device": device, "dtype": dtype}
        _layer_parts(self, d_model, nhead, dim_feedforward, dropout, batch_first, bias, made, True)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _mha_block(
        self,
        x: Tensor,
        memory: Tensor,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        is_causal: bool,
    ) -> Tensor:
        x = self.multihead_attn(
            x,
            memory,
            memory,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=False,
        )[0]
        return self.dropout2(x)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """``tgt`` through the layer, attending to ``memory``; ``tgt``'s shape."""
        self_masks = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        cross_masks = (memory_mask, memory_key_padding_mask, memory_is_causal)
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *self_masks)
            x = x + self._mha_block(self.norm2(x), memory, *cross_masks)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, *self_masks))
        x = self.norm2(x + self._mha_block(x, memory, *cross_masks))
        return self.norm3(x + self._ff_block(x))


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` in turn, then ``norm`` if given."""

    def __init__(
        self,
        encoder_layer: Module,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        # Kept for torch's attribute names; no nested tensors are made here.
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = False
        self.mask_check = mask_check

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """``src`` through every layer with the same masks."""
        padding = checked_mask(src_key_padding_mask, "src_key_padding_mask")
        mask = checked_mask(mask, "mask")
        # torch detects a causal mask only to choose a fused kernel; the mask itself
        # gives the same values, so an undecided hint is False here.
        output = src
        for layer in self.layers:
            output = layer(
                output, src_mask=mask, is_causal=bool(is_causal), src_key_padding_mask=padding
            )
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` in turn, then ``norm`` if given."""

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """``tgt`` through every layer, each attending to ``memory``."""
        output = tgt
        for layer in self.layers:
            output = layer(
                output,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=memory_is_causal,
            )
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """An encoder-decoder transformer ("Attention Is All You Need"), torch's defaults."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = F.relu,
        custom_encoder: Any = None,
        custom_decoder: Any = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        made = {"device": device, "dtype": dtype}
        shared = (dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, *shared, bias, **made)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, *shared, bias, **made)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """``src`` through the encoder, then ``tgt`` through the decoder over its output."""
        batch_dim = 0 if self.batch_first else 1
        if src.dim() == 3 and src.size(batch_dim) != tgt.size(batch_dim):
            raise TensorError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise TensorError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """A ``(sz, sz)`` causal mask: ``-inf`` above the diagonal, ``0.0`` elsewhere."""
        return triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                xavier_uniform_(p)
