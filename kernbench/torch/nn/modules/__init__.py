"""``torch.nn.modules``: the files torch keeps its layers in, by the names programs use.

Programs reach past ``torch.nn`` into them: pytorch/examples' ``word_language_model``
allowlists ``torch.nn.modules.rnn.LSTM`` and ``torch.nn.modules.dropout.Dropout`` for
``torch.load``, and library code subclasses ``torch.nn.modules.loss._Loss`` or calls
``torch.nn.modules.utils._pair``.  Each submodule here (``activation``, ``adaptive``,
``container``, ``conv``, ``dropout``, ``lazy``, ``linear``, ``loss``, ``normalization``,
``rnn``, ``sparse``, ``transformer``, ...) gives the layers of torch's file of that name;
they are the classes of :mod:`kernbench.torch.nn` themselves, so
``torch.nn.modules.rnn.LSTM is torch.nn.LSTM``.  A name torch's file has and KernBench
lacks raises what ``torch.nn.<name>`` raises.  Every ``torch.nn`` name is here too, as in torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from kernbench.torch.nn.module import Module, add_indent, persistent_buffers

__all__ = ["Module", "NAMESPACES", "add_indent", "namespace", "persistent_buffers"]

# torch's file -> the names it defines that programs use.
NAMESPACES: dict[str, tuple[str, ...]] = {
    "module": ("Module",),
    "activation": (
        "Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh",
        "SiLU", "Mish", "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink",
        "LeakyReLU", "LogSigmoid", "Softplus", "Softshrink", "MultiheadAttention", "PReLU",
        "Softsign", "Tanhshrink", "Softmin", "Softmax", "Softmax2d", "LogSoftmax",
    ),
    "container": (
        "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    ),
    "conv": (
        "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
        "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
        "LazyConvTranspose3d", "_ConvNd", "_ConvTransposeNd",
    ),
    "dropout": (
        "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
        "FeatureAlphaDropout", "_DropoutNd",
    ),
    "linear": ("Identity", "Linear", "Bilinear", "LazyLinear", "NonDynamicallyQuantizableLinear"),
    "normalization": (
        "LocalResponseNorm", "CrossMapLRN2d", "LayerNorm", "GroupNorm", "RMSNorm",
    ),
    "batchnorm": (
        "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d",
        "LazyBatchNorm2d", "LazyBatchNorm3d", "_BatchNorm", "_NormBase", "_LazyNormBase",
    ),
    "instancenorm": (
        "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d",
        "LazyInstanceNorm2d", "LazyInstanceNorm3d",
    ),
    "lazy": ("LazyModuleMixin",),
    "sparse": ("Embedding", "EmbeddingBag"),
    "rnn": ("RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"),
    "transformer": (
        "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
        "TransformerDecoderLayer",
    ),
    "loss": (
        "L1Loss", "NLLLoss", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss", "MSELoss",
        "BCELoss", "BCEWithLogitsLoss", "HingeEmbeddingLoss", "MultiLabelMarginLoss",
        "SmoothL1Loss", "HuberLoss", "SoftMarginLoss", "CrossEntropyLoss",
        "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
        "MultiMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss",
        "_Loss", "_WeightedLoss",
    ),
    "pooling": (
        "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
        "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "LPPool1d", "LPPool2d", "LPPool3d",
        "FractionalMaxPool2d", "FractionalMaxPool3d", "MaxUnpool1d", "MaxUnpool2d",
        "MaxUnpool3d", "_MaxPoolNd", "_AvgPoolNd",
    ),
    "padding": (
        "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
        "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
        "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
        "CircularPad2d", "CircularPad3d", "_ConstantPadNd",
    ),
    "flatten": ("Flatten", "Unflatten"),
    "fold": ("Fold", "Unfold"),
    "pixelshuffle": ("PixelShuffle", "PixelUnshuffle"),
    "upsampling": ("Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"),
    "distance": ("PairwiseDistance", "CosineSimilarity"),
    "channelshuffle": ("ChannelShuffle",),
    "adaptive": ("AdaptiveLogSoftmaxWithLoss", "_ASMoutput"),
    "utils": ("_single", "_pair", "_triple", "_quadruple", "_ntuple"),
}  # fmt: skip

# Names that are not torch.nn's own: where KernBench keeps them.
_INTERNAL = {
    "_ConvNd": ("kernbench.torch.nn.conv_layers", "ConvNd"),
    "_ConvTransposeNd": ("kernbench.torch.nn.conv_transpose_layers", "_ConvTransposeNd"),
    "_DropoutNd": ("kernbench.torch.nn.feature_dropout", "_DropoutNd"),
    "NonDynamicallyQuantizableLinear": (
        "kernbench.torch.nn.multihead",
        "NonDynamicallyQuantizableLinear",
    ),
    "_BatchNorm": ("kernbench.torch.nn.layers", "_BatchNorm"),
    "_NormBase": ("kernbench.torch.nn.layers", "_NormBase"),
    "_LazyNormBase": ("kernbench.torch.nn.lazy", "_LazyNormBase"),
    "LazyModuleMixin": ("kernbench.torch.nn.lazy", "LazyModuleMixin"),
    "RNNBase": ("kernbench.torch.nn.recurrent", "RNNBase"),
    "RNNCellBase": ("kernbench.torch.nn.rnn_cells", "RNNCellBase"),
    "_Loss": ("kernbench.torch.nn.functional_modules", "_Loss"),
    "_WeightedLoss": ("kernbench.torch.nn.functional_modules", "_WeightedLoss"),
    "_MaxPoolNd": ("kernbench.torch.nn.conv_layers", "_MaxPoolNd"),
    "_AvgPoolNd": ("kernbench.torch.nn.conv_layers", "_AvgPoolNd"),
    "_ConstantPadNd": ("kernbench.torch.nn.padding_layers", "_ConstantPadNd"),
    "_ASMoutput": ("kernbench.torch.nn.adaptive", "_ASMoutput"),
    "_single": ("kernbench.torch.nn.modules.utils", "_single"),
    "_pair": ("kernbench.torch.nn.modules.utils", "_pair"),
    "_triple": ("kernbench.torch.nn.modules.utils", "_triple"),
    "_quadruple": ("kernbench.torch.nn.modules.utils", "_quadruple"),
    "_ntuple": ("kernbench.torch.nn.modules.utils", "_ntuple"),
}


def resolve(name: str) -> Any:
    """The object torch.nn.modules.<file>.<name> is here (``torch.nn``'s error if none)."""
    where = _INTERNAL.get(name)
    if where is not None:
        return getattr(importlib.import_module(where[0]), where[1])
    return getattr(importlib.import_module("kernbench.torch.nn"), name)


def namespace(file: str) -> tuple[list[str], Callable[[str], Any]]:
    """``__all__`` and ``__getattr__`` of the submodule for torch's ``file``."""
    names = NAMESPACES[file]

    def lookup(name: str) -> Any:
        if name in names:
            return resolve(name)
        raise AttributeError(
            f"module 'kernbench.torch.nn.modules.{file}' has no attribute {name!r}: torch's "
            f"torch/nn/modules/{file}.py names here are {', '.join(names)}"
        )

    return [name for name in names if not name.startswith("_")], lookup


def __getattr__(name: str) -> Any:
    if name in NAMESPACES:
        return importlib.import_module(f"{__name__}.{name}")
    return resolve(name)  # torch.nn.modules.Linear, as torch's package exports them all
