"""``torch.nn.modules.<file>``: the layers by the paths of torch's files, as programs name them."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.errors import TensorAttributeError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.topology import load_topology


@pytest.fixture
def ctx():
    context = RuntimeContext(load_topology("tiny"))
    with use_context(context):
        yield context


def test_each_file_gives_torch_nn_s_own_classes() -> None:
    import kernbench.torch.nn.modules.rnn as rnn
    from kernbench.torch.nn.modules.dropout import Dropout
    from kernbench.torch.nn.modules.sparse import Embedding

    assert rnn.LSTM is nn.LSTM and rnn.GRU is nn.GRU and rnn.RNN is nn.RNN
    assert Dropout is nn.Dropout and Embedding is nn.Embedding
    assert torch.nn.modules.activation.MultiheadAttention is nn.MultiheadAttention
    assert torch.nn.modules.container.ModuleList is nn.ModuleList
    assert torch.nn.modules.normalization.LayerNorm is nn.LayerNorm
    assert torch.nn.modules.transformer.TransformerEncoderLayer is nn.TransformerEncoderLayer
    assert torch.nn.modules.module.Module is nn.Module is torch.nn.modules.Module
    assert torch.nn.modules.Linear is nn.Linear  # the package has every layer, as torch's
    assert "LSTM" in rnn.__all__ and "RNNBase" in rnn.__all__


def test_every_listed_name_that_torch_nn_has_resolves() -> None:
    for file, names in torch.nn.modules.NAMESPACES.items():
        module = importlib.import_module(f"kernbench.torch.nn.modules.{file}")
        for name in names:
            if not name.startswith("_") and hasattr(nn, name):
                assert getattr(module, name) is getattr(nn, name), (file, name)


def test_the_base_classes_library_code_subclasses(ctx) -> None:
    from kernbench.torch.nn.modules.batchnorm import _BatchNorm
    from kernbench.torch.nn.modules.conv import _ConvNd
    from kernbench.torch.nn.modules.linear import NonDynamicallyQuantizableLinear
    from kernbench.torch.nn.modules.loss import _Loss, _WeightedLoss

    assert issubclass(nn.BatchNorm2d, _BatchNorm) and issubclass(nn.Conv2d, _ConvNd)
    assert issubclass(nn.CrossEntropyLoss, _WeightedLoss) and issubclass(_WeightedLoss, _Loss)
    attention = nn.MultiheadAttention(8, 2)
    assert type(attention.out_proj) is NonDynamicallyQuantizableLinear
    assert issubclass(NonDynamicallyQuantizableLinear, nn.Linear)

    class Doubled(_Loss):  # a loss written against torch's base, reduction included
        def forward(self, x, y):
            d = (x - y) * 2
            return d.sum() if self.reduction == "sum" else d.mean()

    x = torch.tensor([1.0, 2.0, 4.0])
    y = torch.tensor([0.0, 1.0, 1.0])
    assert Doubled(reduction="sum")(x, y).item() == pytest.approx(10.0)
    assert Doubled()(x, y).item() == pytest.approx(10.0 / 3)


def test_utils_spreads_one_size_over_the_dimensions() -> None:
    from kernbench.torch.nn.modules.utils import _ntuple, _pair, _single, _triple

    assert _single(3) == (3,) and _pair(3) == (3, 3) and _triple(2) == (2, 2, 2)
    assert _pair((1, 2)) == (1, 2) and _pair([4, 5]) == (4, 5)
    assert _ntuple(4)(np.int64(1)) == (1, 1, 1, 1)


def test_a_name_torch_s_file_has_and_kernbench_lacks_raises_torch_nn_s_error() -> None:
    with pytest.raises(TensorAttributeError, match="no attribute 'CrossMapLRN2d'.*README"):
        torch.nn.modules.normalization.CrossMapLRN2d  # noqa: B018
    with pytest.raises(AttributeError, match=r"torch/nn/modules/rnn.py names here are RNNBase"):
        torch.nn.modules.rnn.LSTMM  # noqa: B018
    assert not hasattr(torch.nn.modules.normalization, "CrossMapLRN2d")
