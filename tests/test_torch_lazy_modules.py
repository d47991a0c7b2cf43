"""torch's lazy modules: ``UninitializedParameter``/``UninitializedBuffer`` (refused uses
with torch's messages, in-place ``materialize``), ``LazyLinear``, the lazy convolutions and
norms against NumPy and against the eager layers seeded the same, the class they become,
an optimizer built before the first call, ``state_dict``/``load_state_dict`` before it, and
the names in ``torch.nn``, ``torch.nn.modules`` and ``torch.nn.parameter``."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError, TensorValueError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.modules.lazy import LazyModuleMixin
from kernbench.torch.nn.parameter import (
    Parameter,
    UninitializedBuffer,
    UninitializedParameter,
    is_lazy,
)
from kernbench.torch.tensor import Tensor

pytestmark = pytest.mark.filterwarnings("ignore:Lazy modules are a new feature")


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _np(t):
    return t.detach().numpy()


# -- the uninitialized tensors -----------------------------------------------------------
def test_an_uninitialized_parameter_answers_dtype_and_device_and_refuses_its_shape(ctx):
    p = UninitializedParameter()
    assert repr(p) == "<UninitializedParameter>" and is_lazy(p)
    assert isinstance(p, Parameter) and p.requires_grad and p.is_leaf
    assert p.dtype == torch.float32 and p.grad is None
    with pytest.raises(TensorError, match=r"Tensor.shape: Can't access the shape of an unin"):
        p.shape  # noqa: B018
    with pytest.raises(TensorError, match=r"Call `forward` to initialize the parameters"):
        p.size()
    with pytest.raises(TensorValueError, match=r"uninitialized parameter in Tensor.numel\(\)"):
        p.numel()
    with pytest.raises(TensorValueError, match=r"uninitialized parameter in Tensor.__add__\(\)"):
        p + 1  # noqa: B018
    with pytest.raises(TensorValueError, match=r"in Tensor.sum\(\).*dummy batch"):
        p.sum()
    with pytest.raises(TensorError, match=r"uninitialized parameter in add\(\)"):
        torch.add(p, 1)
    with pytest.raises(TensorError, match=r"linear\(\).*Can't access the shape"):
        F.linear(torch.ones(2, 4), p)


def test_materialize_gives_the_same_object_a_shape_and_makes_it_a_parameter(ctx):
    p = UninitializedParameter(dtype=torch.float16)
    held = [p]
    p.materialize((3, 4))
    assert held[0] is p and type(p) is Parameter and not is_lazy(p)
    assert tuple(p.shape) == (3, 4) and p.dtype == torch.float16 and p.requires_grad
    with torch.no_grad():
        p.fill_(2.0)
    np.testing.assert_array_equal(_np(p), np.full((3, 4), 2.0, np.float16))

    b = UninitializedBuffer()
    assert repr(b) == "<UninitializedBuffer>" and not b.requires_grad
    b.materialize(5)
    assert type(b) is Tensor and tuple(b.shape) == (5,)


def test_a_deep_copy_stays_uninitialized(ctx):
    p = UninitializedParameter(requires_grad=False)
    q = copy.deepcopy(p)
    assert q is not p and type(q) is UninitializedParameter and not q.requires_grad


# -- LazyLinear --------------------------------------------------------------------------
def test_lazy_linear_warns_as_torch_and_prints_in_features_0(ctx):
    with pytest.warns(UserWarning, match="Lazy modules are a new feature"):
        m = nn.LazyLinear(3)
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert isinstance(m, LazyModuleMixin) and m.has_uninitialized_params()
    assert type(m.weight) is UninitializedParameter and type(m.bias) is UninitializedParameter
    state = m.state_dict()
    assert list(state) == ["weight", "bias"] and state["weight"] is m.weight


def test_lazy_linear_takes_in_features_and_the_eager_draws_at_the_first_call(ctx):
    x = torch.randn(2, 4)
    torch.manual_seed(0)
    m = nn.LazyLinear(3)
    out = m(x)
    assert type(m) is nn.Linear and m.in_features == 4 and m.out_features == 3
    assert type(m.weight) is Parameter and tuple(m.weight.shape) == (3, 4)
    assert not hasattr(m, "_initialize_hook")
    torch.manual_seed(0)
    eager = nn.Linear(4, 3)
    np.testing.assert_array_equal(_np(m.weight), _np(eager.weight))
    np.testing.assert_array_equal(_np(m.bias), _np(eager.bias))
    expected = _np(x) @ _np(m.weight).T + _np(m.bias)
    np.testing.assert_allclose(_np(out), expected, rtol=1e-5, atol=1e-6)
    assert repr(m) == "Linear(in_features=4, out_features=3, bias=True)"


def test_lazy_linear_uses_the_last_dim_and_no_bias(ctx):
    m = nn.LazyLinear(2, bias=False)
    x = torch.randn(2, 3, 5)
    out = m(x)
    assert m.bias is None and tuple(m.weight.shape) == (2, 5) and tuple(out.shape) == (2, 3, 2)
    np.testing.assert_allclose(_np(out), _np(x) @ _np(m.weight).T, rtol=1e-5, atol=1e-6)


def test_an_optimizer_built_before_the_first_call_steps_the_materialized_parameters(ctx):
    m = nn.LazyLinear(3)
    opt = optim.SGD(m.parameters(), lr=0.5)
    x = torch.randn(2, 4)
    m(x).sum().backward()  # the first call initializes; the graph sees the real weights
    assert opt.param_groups[0]["params"][0] is m.weight
    before = _np(m.weight).copy()
    grad = np.tile(_np(x).sum(0), (3, 1))
    np.testing.assert_allclose(_np(m.weight.grad), grad, rtol=1e-5, atol=1e-6)
    opt.step()
    np.testing.assert_allclose(_np(m.weight), before - 0.5 * grad, rtol=1e-5, atol=1e-6)


def test_the_conversions_before_the_first_call_set_the_dtype(ctx):
    m = nn.LazyLinear(3).half()
    assert m.weight.dtype == torch.float16 and is_lazy(m.weight)
    m(torch.randn(2, 4).half())
    assert m.weight.dtype == torch.float16 and tuple(m.weight.shape) == (3, 4)


def test_forward_without_the_hook_meets_the_uninitialized_weight(ctx):
    m = nn.LazyLinear(3)
    with pytest.raises(TensorError, match="Can't access the shape of an uninitialized"):
        m.forward(torch.randn(2, 4))


# -- state dicts -------------------------------------------------------------------------
def test_load_state_dict_materializes_from_the_loaded_shapes(ctx):
    eager = nn.Linear(4, 3)
    m = nn.LazyLinear(3)
    weight = m.weight
    m.load_state_dict(eager.state_dict())
    assert weight is m.weight and type(weight) is Parameter and not m.has_uninitialized_params()
    assert type(m) is nn.LazyLinear and m.in_features == 4  # until its first call
    np.testing.assert_array_equal(_np(m.weight), _np(eager.weight))
    x = torch.randn(2, 4)
    out = m(x)
    assert type(m) is nn.Linear
    np.testing.assert_array_equal(_np(out), _np(eager(x)))


def test_an_uninitialized_state_loads_into_a_lazy_module_but_not_an_initialized_one(ctx):
    nn.LazyLinear(3).load_state_dict(nn.LazyLinear(3).state_dict())
    with pytest.raises(TensorError, match="load_state_dict.*Can't access the shape"):
        nn.Linear(4, 3).load_state_dict(nn.LazyLinear(3).state_dict())


def test_a_deep_copy_of_a_lazy_module_initializes_on_its_own(ctx):
    m = nn.LazyLinear(3)
    twin = copy.deepcopy(m)
    twin(torch.randn(2, 5))
    assert type(twin) is nn.Linear and twin.in_features == 5
    assert type(m) is nn.LazyLinear and is_lazy(m.weight)


# -- convolutions ------------------------------------------------------------------------
def _conv1d(x, w, b):
    n, _, length = x.shape
    out_c, _, k = w.shape
    out = np.zeros((n, out_c, length - k + 1), np.float64)
    for i in range(length - k + 1):
        out[:, :, i] = np.einsum("ncl,ocl->no", x[:, :, i : i + k], w)
    return out + b[None, :, None]


def test_lazy_conv1d_takes_in_channels_and_convolves_as_numpy(ctx):
    x = torch.randn(2, 3, 7)
    torch.manual_seed(1)
    m = nn.LazyConv1d(4, 3)
    out = m(x)
    assert type(m) is nn.Conv1d and m.in_channels == 3 and tuple(m.weight.shape) == (4, 3, 3)
    torch.manual_seed(1)
    eager = nn.Conv1d(3, 4, 3)
    np.testing.assert_array_equal(_np(m.weight), _np(eager.weight))
    np.testing.assert_array_equal(_np(m.bias), _np(eager.bias))
    expected = _conv1d(_np(x), _np(m.weight), _np(m.bias))
    np.testing.assert_allclose(_np(out), expected, rtol=1e-4, atol=1e-5)


def test_lazy_conv2d_becomes_conv2d_with_groups_and_padding(ctx):
    x = torch.randn(1, 4, 5, 5)
    torch.manual_seed(2)
    m = nn.LazyConv2d(6, 3, padding=1, groups=2)
    out = m(x)
    assert type(m) is nn.Conv2d and m.in_channels == 4 and tuple(m.weight.shape) == (6, 2, 3, 3)
    torch.manual_seed(2)
    eager = nn.Conv2d(4, 6, 3, padding=1, groups=2)
    np.testing.assert_array_equal(_np(m.weight), _np(eager.weight))
    np.testing.assert_allclose(_np(out), _np(eager(x)), rtol=1e-5, atol=1e-6)


def test_lazy_conv_reads_an_unbatched_input_and_checks_the_dims(ctx):
    m = nn.LazyConv1d(2, 2)
    assert tuple(m(torch.randn(3, 5)).shape) == (2, 4) and m.in_channels == 3
    with pytest.raises(TensorError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input"):
        nn.LazyConv2d(2, 2)(torch.randn(3, 5))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv1d(2, 2, groups=2)(torch.randn(1, 3, 5))


def test_lazy_conv_transpose_keeps_its_weight_in_channels_first(ctx):
    m = nn.LazyConvTranspose1d(4, 3, stride=2)
    out = m(torch.randn(2, 3, 5))
    assert type(m) is nn.ConvTranspose1d and m.in_channels == 3
    assert tuple(m.weight.shape) == (3, 4, 3) and tuple(out.shape) == (2, 4, 11)


# -- norms -------------------------------------------------------------------------------
def test_lazy_batch_norm_2d_normalizes_and_updates_its_running_statistics(ctx):
    m = nn.LazyBatchNorm2d()
    assert type(m.running_mean) is UninitializedBuffer
    assert list(m.state_dict()) == [
        "weight", "bias", "running_mean", "running_var", "num_batches_tracked",
    ]  # fmt: skip
    x = torch.randn(2, 3, 4, 4)
    out = m(x)
    assert type(m) is nn.BatchNorm2d and m.num_features == 3
    assert type(m.running_mean) is Tensor and type(m.weight) is Parameter
    a = _np(x).astype(np.float64)
    mean, var = a.mean((0, 2, 3)), a.var((0, 2, 3))
    expected = (a - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(_np(out), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(m.running_mean), 0.1 * mean, rtol=1e-4, atol=1e-6)
    unbiased = a.var((0, 2, 3), ddof=1)
    np.testing.assert_allclose(_np(m.running_var), 0.9 + 0.1 * unbiased, rtol=1e-4)
    assert int(m.num_batches_tracked.item()) == 1
    np.testing.assert_array_equal(_np(m.weight), np.ones(3, np.float32))


def test_lazy_batch_norm_1d_without_affine_or_statistics(ctx):
    m = nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    assert not m.has_uninitialized_params()  # nothing to infer: it becomes BatchNorm1d at once
    m(torch.randn(4, 5))
    assert type(m) is nn.BatchNorm1d and m.weight is None and m.running_mean is None
    m = nn.LazyBatchNorm3d()
    m(torch.randn(2, 2, 2, 2, 2))
    assert type(m) is nn.BatchNorm3d and m.num_features == 2


def test_lazy_instance_norm_takes_the_channels_of_an_unbatched_sample(ctx):
    m = nn.LazyInstanceNorm1d(affine=True)
    out = m(torch.randn(3, 6))
    assert type(m) is nn.InstanceNorm1d and m.num_features == 3 and tuple(out.shape) == (3, 6)
    assert tuple(m.weight.shape) == (3,)


# -- the mixin and the names -------------------------------------------------------------
def test_a_module_written_on_the_mixin_stays_its_class_without_cls_to_become(ctx):
    class Scale(LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = UninitializedParameter()

        def initialize_parameters(self, x):
            self.scale.materialize((x.shape[-1],))
            self.scale.fill_(2.0)

        def forward(self, x):
            return x * self.scale

    m = Scale()
    out = m(torch.ones(2, 3))
    assert type(m) is Scale and not m.has_uninitialized_params()
    np.testing.assert_array_equal(_np(out), np.full((2, 3), 2.0, np.float32))


def test_the_names_are_where_torch_has_them(ctx):
    import kernbench.torch.nn.modules as modules

    assert modules.linear.LazyLinear is nn.LazyLinear
    assert modules.conv.LazyConv2d is nn.LazyConv2d
    assert modules.conv.LazyConvTranspose3d is nn.LazyConvTranspose3d
    assert modules.batchnorm.LazyBatchNorm1d is nn.LazyBatchNorm1d
    assert modules.instancenorm.LazyInstanceNorm2d is nn.LazyInstanceNorm2d
    assert modules.lazy.LazyModuleMixin is LazyModuleMixin
    assert nn.UninitializedParameter is UninitializedParameter
    assert nn.UninitializedBuffer is UninitializedBuffer
    assert issubclass(nn.LazyLinear, nn.Linear) and issubclass(nn.LazyConv3d, nn.Conv3d)


def test_cuda_and_module_device_moves_keep_the_parameters_lazy(ctx):
    m = nn.LazyConv1d(2, 1).cuda()
    assert is_lazy(m.weight) and m.weight.get_device() == 0
    m.to(torch.float16)
    m(torch.randn(1, 3, 4).half())
    assert m.weight.dtype == torch.float16 and m.in_channels == 3


def test_torch_save_keeps_a_lazy_state_dict_and_module_uninitialized(ctx, tmp_path):
    m = nn.LazyLinear(3)
    assert f"{m.weight}" == str(m.weight) == "<UninitializedParameter>"
    torch.save(m.state_dict(), tmp_path / "lazy.pt")
    state = torch.load(tmp_path / "lazy.pt")
    assert type(state["weight"]) is UninitializedParameter and state["weight"].requires_grad
    fresh = nn.LazyLinear(3)
    fresh.load_state_dict(state)
    assert fresh.has_uninitialized_params()

    b = nn.LazyBatchNorm1d()
    torch.save(b, tmp_path / "bn.pt")
    loaded = torch.load(tmp_path / "bn.pt", weights_only=False)
    assert type(loaded) is nn.LazyBatchNorm1d and type(loaded.running_mean) is UninitializedBuffer
    loaded(torch.randn(4, 3))
    assert type(loaded) is nn.BatchNorm1d and loaded.num_features == 3
