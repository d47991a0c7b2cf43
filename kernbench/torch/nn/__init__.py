"""``torch.nn`` for KernBench: modules and parameters, ``torch.nn.functional``
(activations, norms, losses, convolutions, pools), ``torch.nn.init`` and ``torch.nn.utils``
(gradient clipping; ``rnn``: packed sequences).  The recurrent layers (``RNN``,
``LSTM``, ``GRU`` and their cells) are :mod:`~kernbench.torch.nn.recurrent` and
:mod:`~kernbench.torch.nn.rnn_cells`.

Modules run their ``forward`` as the ``functional`` ops they call and cost
what those ops cost.  Parameters have ``requires_grad=True``; ``loss.backward()``
fills their ``grad`` (:mod:`kernbench.torch.autograd`), which ``torch.optim`` reads.
``nn.DataParallel`` runs its module on one device
(:mod:`~kernbench.torch.nn.data_parallel`); ``nn.parallel`` (DistributedDataParallel,
DataParallel, data_parallel) is registered by
:mod:`kernbench.torch.distributed.data_parallel`.  Names torch has and this package
does not (``nn.CrossMapLRN2d``, ...) raise a
:class:`~kernbench.errors.TensorAttributeError` that says what to write
instead.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorAttributeError
from kernbench.torch.nn import functional, init, utils
from kernbench.torch.nn.activation_layers import (
    CELU,
    SELU,
    AlphaDropout,
    FeatureAlphaDropout,
    Hardshrink,
    Hardsigmoid,
    Hardtanh,
    LogSigmoid,
    PReLU,
    ReLU6,
    RReLU,
    Softmax2d,
    Softmin,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from kernbench.torch.nn.adaptive import AdaptiveLogSoftmaxWithLoss
from kernbench.torch.nn.bag_layers import Bilinear, EmbeddingBag
from kernbench.torch.nn.channel_layers import (
    ChannelShuffle,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LocalResponseNorm,
)
from kernbench.torch.nn.containers import (
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from kernbench.torch.nn.conv_layers import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    Conv1d,
    Conv2d,
    Conv3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
)
from kernbench.torch.nn.conv_transpose_layers import (
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from kernbench.torch.nn.data_parallel import DataParallel
from kernbench.torch.nn.feature_dropout import Dropout1d, Dropout2d, Dropout3d
from kernbench.torch.nn.fractional_pool_layers import FractionalMaxPool2d, FractionalMaxPool3d
from kernbench.torch.nn.functional_modules import (
    ELU,
    GELU,
    GLU,
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Hardswish,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    LeakyReLU,
    LogSoftmax,
    Mish,
    MSELoss,
    NLLLoss,
    ReLU,
    Sigmoid,
    SiLU,
    SmoothL1Loss,
    Softmax,
    Softplus,
    Tanh,
)
from kernbench.torch.nn.layers import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    Dropout,
    Embedding,
    Flatten,
    GroupNorm,
    Identity,
    LayerNorm,
    Linear,
    RMSNorm,
    Unflatten,
)
from kernbench.torch.nn.lazy import (
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
    LazyLinear,
)
from kernbench.torch.nn.loss_layers import (
    CosineEmbeddingLoss,
    CosineSimilarity,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PairwiseDistance,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.multihead import MultiheadAttention
from kernbench.torch.nn.padding_layers import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from kernbench.torch.nn.parameter import (
    Buffer,
    Parameter,
    UninitializedBuffer,
    UninitializedParameter,
)
from kernbench.torch.nn.recurrent import GRU, LSTM, RNN, RNNBase
from kernbench.torch.nn.resample_layers import (
    Fold,
    PixelShuffle,
    PixelUnshuffle,
    Unfold,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from kernbench.torch.nn.rnn_cells import GRUCell, LSTMCell, RNNCell, RNNCellBase
from kernbench.torch.nn.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from kernbench.torch.nn.unpool_layers import (
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)

__all__ = [
    "functional",
    "init",
    "utils",
    "Module",
    "Parameter",
    "Buffer",
    "UninitializedParameter",
    "UninitializedBuffer",
    "Sequential",
    "DataParallel",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "Identity",
    "Linear",
    "LazyLinear",
    "Bilinear",
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
    "RNNBase",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCellBase",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "Embedding",
    "EmbeddingBag",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LocalResponseNorm",
    "ChannelShuffle",
    "Dropout",
    "AlphaDropout",
    "FeatureAlphaDropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "Flatten",
    "Unflatten",
    "ReLU",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Softmax",
    "LogSoftmax",
    "LeakyReLU",
    "ELU",
    "Softplus",
    "Mish",
    "Hardswish",
    "GLU",
    "PReLU",
    "Hardtanh",
    "ReLU6",
    "LogSigmoid",
    "Hardsigmoid",
    "Softsign",
    "CELU",
    "SELU",
    "Softmin",
    "Softmax2d",
    "Hardshrink",
    "Softshrink",
    "Tanhshrink",
    "Threshold",
    "RReLU",
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "SmoothL1Loss",
    "HuberLoss",
    "KLDivLoss",
    "MarginRankingLoss",
    "HingeEmbeddingLoss",
    "SoftMarginLoss",
    "CosineEmbeddingLoss",
    "MultiMarginLoss",
    "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss",
    "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
    "PoissonNLLLoss",
    "GaussianNLLLoss",
    "CTCLoss",
    "AdaptiveLogSoftmaxWithLoss",
    "CosineSimilarity",
    "PairwiseDistance",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "Upsample",
    "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
    "PixelShuffle",
    "PixelUnshuffle",
    "Unfold",
    "Fold",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
]


# torch's files of layers, as programs name them (torch.nn.modules.rnn.LSTM).
from kernbench.torch.nn import modules  # noqa: E402,F401

# What to write for the nn names model code reaches for.
HINTS = {
    "parallel": "import kernbench.torch (its distributed package registers nn.parallel, "
    "DistributedDataParallel)",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    hint = HINTS.get(name, "the README's 'What kernbench.torch supports' lists what there is")
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn' has no attribute {name!r}: {hint}; "
        f"kernbench.torch.nn has {', '.join(__all__)}"
    )
