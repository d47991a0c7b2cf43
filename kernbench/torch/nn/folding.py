"""``torch.nn.functional.unfold`` (im2col) and ``fold`` (col2im), torch's sliding blocks.

``unfold`` of (N, C, H, W) (or (C, H, W)) is (N, C·kh·kw, L): the input padded (a fill and
a copy, when there is padding), then every block gathered by one copy of a strided view
(the sliding windows of ``Tensor.unfold``).  ``fold`` is its adjoint: a zeroed padded
output and one strided add per kernel position (overlapping blocks add up), or one copy
when the blocks tile it (ViT patches), cut to ``output_size``.  Arguments and checks are torch's
(``im2col_shape_check``/``col2im_shape_check``).
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.nn.convolution import spatial_argument
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["blocks_geometry", "fold", "unfold"]


def _pairs(
    call: str, kernel_size: Any, dilation: Any, padding: Any, stride: Any
) -> tuple[tuple[int, int], ...]:
    kernel = spatial_argument(kernel_size, call, "kernel_size", 2)
    dilations = spatial_argument(dilation, call, "dilation", 2)
    pads = spatial_argument(padding, call, "padding", 2)
    strides = spatial_argument(stride, call, "stride", 2)
    if any(k <= 0 for k in kernel):
        raise TensorError(
            f"{call}: kernel size should be greater than zero, but got kernel_height: "
            f"{kernel[0]} kernel_width: {kernel[1]}"
        )
    if any(s <= 0 for s in strides):
        raise TensorError(
            f"{call}: stride should be greater than zero, but got stride_height: {strides[0]} "
            f"stride_width: {strides[1]}"
        )
    if any(d <= 0 for d in dilations):
        raise TensorError(
            f"{call}: dilation should be greater than zero, but got dilation_height: "
            f"{dilations[0]} dilation_width: {dilations[1]}"
        )
    if any(p < 0 for p in pads):
        raise TensorError(
            f"{call}: padding should be non-negative, but got pad_height: {pads[0]} "
            f"pad_width: {pads[1]}"
        )
    return kernel, dilations, pads, strides  # type: ignore[return-value]


def blocks_geometry(
    call: str, spatial: tuple[int, int], kernel_size: Any, dilation: Any, padding: Any, stride: Any
) -> tuple[tuple[int, int], ...]:
    """(kernel, dilation, padding, stride, blocks): each a pair, ``blocks`` the number of
    sliding blocks along H and W, checked as torch checks them."""
    kernel, dilations, pads, strides = _pairs(call, kernel_size, dilation, padding, stride)
    blocks = tuple(
        (s + 2 * p - (d * (k - 1) + 1)) // st + 1
        for s, k, d, p, st in zip(spatial, kernel, dilations, pads, strides, strict=True)
    )
    if any(b < 1 for b in blocks):
        raise TensorError(
            f"{call}: Given input with spatial size ({spatial[0]}, {spatial[1]}), kernel_size="
            f"({kernel[0]}, {kernel[1]}), dilation=({dilations[0]}, {dilations[1]}), padding="
            f"({pads[0]}, {pads[1]}), calculated shape of the array of sliding blocks as "
            f"({blocks[0]}, {blocks[1]}), but its components must be at least one."
        )
    return kernel, dilations, pads, strides, blocks  # type: ignore[return-value]


def _taps(kernel: Any, dilations: Any, strides: Any, blocks: Any) -> list[tuple[int, int, tuple]]:
    """(i, j, the (rows, cols) slices of the padded plane block position (i, j) reads)."""

    def line(t: int, d: int) -> slice:
        start = t * dilations[d]
        return slice(start, start + (blocks[d] - 1) * strides[d] + 1, strides[d])

    return [(i, j, (line(i, 0), line(j, 1))) for i in range(kernel[0]) for j in range(kernel[1])]


def unfold(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    dilation: Any = 1,
    padding: Any = 0,
    stride: Any = 1,
) -> Tensor:
    """The sliding blocks of (N, C, H, W) or (C, H, W) ``input`` as columns:
    (N, C·kh·kw, L), L the number of blocks, as torch's ``unfold``."""
    call = "torch.nn.functional.unfold"
    x = tensor_argument(input, call)
    if x.ndim not in (3, 4) or any(s == 0 for s in tuple(x.shape)[-3:]):
        raise TensorError(
            f"{call}: Expected non-empty 3D or 4D input tensor, but got input of size "
            f"{list(x.shape)}"
        )
    batched = x.ndim == 4
    if not batched:
        x = x.unsqueeze(0)
    n, c, h, w = tuple(x.shape)
    kernel, dilations, pads, strides, blocks = blocks_geometry(
        call, (h, w), kernel_size, dilation, padding, stride
    )
    padded = x
    if any(pads):
        padded = x.new_zeros(n, c, h + 2 * pads[0], w + 2 * pads[1])
        padded[:, :, pads[0] : pads[0] + h, pads[1] : pads[1] + w] = x
    # every block as a strided view (N, C, kh, kw, oh, ow), copied out once
    spans = tuple(d * (k - 1) + 1 for d, k in zip(dilations, kernel, strict=True))
    windows = padded.unfold(2, spans[0], strides[0]).unfold(3, spans[1], strides[1])
    windows = windows[:, :, :, :, :: dilations[0], :: dilations[1]].permute(0, 1, 4, 5, 2, 3)
    out = windows.reshape(n, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
    if padded is not x:
        padded.free()
    return out if batched else out.squeeze(0)


def fold(
    input: Tensor,  # noqa: A002 - torch's name
    output_size: Any,
    kernel_size: Any,
    dilation: Any = 1,
    padding: Any = 0,
    stride: Any = 1,
) -> Tensor:
    """Columns (N, C·kh·kw, L) or (C·kh·kw, L) summed back into (N, C, *output_size)
    (overlapping blocks add up), as torch's ``fold``: ``unfold``'s adjoint."""
    call = "torch.nn.functional.fold"
    cols = tensor_argument(input, call)
    if cols.ndim not in (2, 3) or any(s == 0 for s in tuple(cols.shape)[-2:]):
        raise TensorError(
            f"{call}: Expected non-empty 2D or 3D (batch mode) tensor for input with possible "
            f"0 batch size and non-zero dimensions for input, but got: {list(cols.shape)}"
        )
    size = spatial_argument(output_size, call, "output_size", 2)
    kernel, dilations, pads, strides = _pairs(call, kernel_size, dilation, padding, stride)
    batched = cols.ndim == 3
    if not batched:
        cols = cols.unsqueeze(0)
    n, ckk, length = tuple(cols.shape)
    if ckk % (kernel[0] * kernel[1]):
        raise TensorError(
            f"{call}: Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={ckk} and kernel_size=({kernel[0]}, "
            f"{kernel[1]})."
        )
    blocks = tuple(
        (s + 2 * p - (d * (k - 1) + 1)) // st + 1
        for s, k, d, p, st in zip(size, kernel, dilations, pads, strides, strict=True)
    )
    if any(b < 1 for b in blocks) or blocks[0] * blocks[1] != length:
        raise TensorError(
            f"{call}: Given output_size=({size[0]}, {size[1]}), kernel_size=({kernel[0]}, "
            f"{kernel[1]}), dilation=({dilations[0]}, {dilations[1]}), padding=({pads[0]}, "
            f"{pads[1]}), stride=({strides[0]}, {strides[1]}), expected size of input's "
            f"dimension 2 to match the calculated number of sliding blocks {blocks[0]} * "
            f"{blocks[1]} = {blocks[0] * blocks[1]}, but got input.size(2)={length}."
        )
    c = ckk // (kernel[0] * kernel[1])
    parts = cols.reshape(n, c, kernel[0], kernel[1], blocks[0], blocks[1])
    buf = cols.new_zeros(n, c, size[0] + 2 * pads[0], size[1] + 2 * pads[1])
    if dilations == (1, 1) and strides == kernel:  # blocks that tile: one copy
        tiled = parts.permute(0, 1, 4, 2, 5, 3).reshape(
            n, c, blocks[0] * kernel[0], blocks[1] * kernel[1]
        )
        buf[:, :, : blocks[0] * kernel[0], : blocks[1] * kernel[1]] = tiled
    else:
        for i, j, (rows, cols_) in _taps(kernel, dilations, strides, blocks):
            buf[:, :, rows, cols_].add_(parts[:, :, i, j])
    out = buf[:, :, pads[0] : pads[0] + size[0], pads[1] : pads[1] + size[1]]
    if not out.is_contiguous():
        cut = out.contiguous()
        buf.free()
        out = cut
    return out if batched else out.squeeze(0)
