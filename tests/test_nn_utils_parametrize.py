"""``torch.nn.utils``' parameter helpers, the split of ``clip_grad_norm_``, parametrizations
(``parametrize``, ``parametrizations.weight_norm``/``spectral_norm``) and the hook-based
``weight_norm``/``spectral_norm``: values and gradients against NumPy, state-dict keys,
removal, errors as torch raises them, and the same simulated time in timing-only runs."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn as nn
import kernbench.torch.nn.utils.parametrize as P
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.nn.utils import parametrizations as PZ


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context
    torch.manual_seed(0)


def _array(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _linear(out_features=3, in_features=4, seed=0):
    layer = nn.Linear(in_features, out_features)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(_array((out_features, in_features), seed)))
        layer.bias.copy_(torch.from_numpy(_array((out_features,), seed + 1)))
    return layer


# -- parameters_to_vector, vector_to_parameters ------------------------------------------


def test_parameters_to_vector_concatenates_in_order_and_records(ctx):
    layer = _linear()
    vec = nn.utils.parameters_to_vector(layer.parameters())
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    np.testing.assert_array_equal(vec.detach().numpy(), np.concatenate([w.ravel(), b]))
    scale = _array((15,), 7)
    (vec * torch.from_numpy(scale)).sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), scale[:12].reshape(3, 4), rtol=1e-6)
    np.testing.assert_allclose(layer.bias.grad.numpy(), scale[12:], rtol=1e-6)


def test_vector_to_parameters_shares_the_vectors_memory(ctx):
    layer = _linear()
    weight = layer.weight
    values = np.arange(15, dtype=np.float32)
    vec = torch.from_numpy(values)
    assert nn.utils.vector_to_parameters(vec, layer.parameters()) is None
    assert layer.weight is weight and layer.weight.requires_grad
    np.testing.assert_array_equal(layer.weight.detach().numpy(), values[:12].reshape(3, 4))
    np.testing.assert_array_equal(layer.bias.detach().numpy(), values[12:])
    vec[0] = 100.0  # a view, as torch's
    assert layer.weight.detach().numpy()[0, 0] == 100.0


def test_vector_to_parameters_errors(ctx):
    layer = _linear()
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        nn.utils.vector_to_parameters([1.0] * 15, layer.parameters())
    with pytest.raises(TensorError, match="shape .* is invalid for input of size"):
        nn.utils.vector_to_parameters(torch.zeros(5), layer.parameters())
    with pytest.raises(TensorError, match="non-empty"):
        nn.utils.parameters_to_vector([])


# -- get_total_norm, clip_grads_with_norm_ -----------------------------------------------


def _with_grads(*grads):
    out = []
    for g in grads:
        p = torch.ones(len(g))
        p.grad = torch.tensor(g)
        out.append(p)
    return out


def test_get_total_norm_then_clip_grads_with_norm_is_clip_grad_norm_(ctx):
    params = _with_grads([3.0, 4.0, 0.0], [0.0, 12.0])
    total = nn.utils.get_total_norm([p.grad for p in params])
    np.testing.assert_allclose(total.item(), 13.0, rtol=1e-6)
    assert nn.utils.get_total_norm(params[0].grad, norm_type="inf").item() == 4.0
    assert nn.utils.get_total_norm([params[0].grad], norm_type=1).item() == 7.0
    assert nn.utils.get_total_norm([]).item() == 0.0
    assert nn.utils.clip_grads_with_norm_(params, 1.0, total) is None
    scale = 1.0 / (13.0 + 1e-6)
    np.testing.assert_allclose(params[0].grad.numpy(), np.array([3, 4, 0]) * scale, rtol=1e-6)
    np.testing.assert_allclose(params[1].grad.numpy(), np.array([0, 12]) * scale, rtol=1e-6)
    small = _with_grads([0.3, 0.4])
    nn.utils.clip_grads_with_norm_(small, 1.0, nn.utils.get_total_norm([small[0].grad]))
    np.testing.assert_allclose(small[0].grad.numpy(), [0.3, 0.4], rtol=1e-6)  # not scaled up


def test_get_total_norm_errors(ctx):
    bad = _with_grads([float("nan"), 1.0])
    with pytest.raises(TensorError, match="The total norm of order 2.0 .* is non-finite"):
        nn.utils.get_total_norm([bad[0].grad], error_if_nonfinite=True)
    with pytest.raises(TensorError, match="get_total_norm: norm_type is 1, 2 or inf here"):
        nn.utils.get_total_norm([bad[0].grad], norm_type=3)
    with pytest.raises(TypeError, match="get_total_norm: tensors must be a Tensor or an"):
        nn.utils.get_total_norm(5)
    with pytest.raises(TypeError, match="clip_grads_with_norm_: total_norm must be a Tensor"):
        nn.utils.clip_grads_with_norm_(bad, 1.0, 2.0)


def test_split_clipping_costs_what_clip_grad_norm_costs():
    def run(split: bool) -> int:
        context = RuntimeContext("tiny", timing_only=True)
        with use_context(context):
            params = [torch.ones(128, 64) for _ in range(3)]
            for p in params:
                p.grad = torch.ones(128, 64)
            before = context.now
            if split:
                total = nn.utils.get_total_norm([p.grad for p in params])
                nn.utils.clip_grads_with_norm_(params, 1.0, total)
            else:
                nn.utils.clip_grad_norm_(params, 1.0)
            return context.now - before

    assert run(split=True) == run(split=False) > 0


# -- parametrize -------------------------------------------------------------------------


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).T

    def right_inverse(self, a):
        return a.triu()


class Scaled(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor

    def right_inverse(self, a):
        return a / self.factor


class NoInverse(nn.Module):
    def forward(self, x):
        return x.tanh()


class FirstRow(nn.Module):
    def forward(self, x):
        return x[:1]


def _symmetric(a):
    return np.triu(a) + np.triu(a, 1).T


def test_register_parametrization_swaps_the_class_and_keeps_the_parameter(ctx):
    layer = _linear(3, 3)
    weight = layer.weight
    before = weight.detach().numpy().copy()
    assert P.register_parametrization(layer, "weight", Symmetric()) is layer
    assert type(layer).__name__ == "ParametrizedLinear" and isinstance(layer, nn.Linear)
    assert P.type_before_parametrizations(layer) is nn.Linear
    assert P.is_parametrized(layer) and P.is_parametrized(layer, "weight")
    assert not P.is_parametrized(layer, "bias")
    assert repr(layer) == (
        "ParametrizedLinear(\n"
        "  in_features=3, out_features=3, bias=True\n"
        "  (parametrizations): ModuleDict(\n"
        "    (weight): ParametrizationList(\n"
        "      (0): Symmetric()\n"
        "    )\n"
        "  )\n"
        ")"
    )
    original = layer.parametrizations.weight.original
    assert original is weight and isinstance(original, nn.Parameter)
    np.testing.assert_array_equal(original.detach().numpy(), np.triu(before))  # right_inverse
    np.testing.assert_allclose(layer.weight.detach().numpy(), _symmetric(before), rtol=1e-6)
    assert list(layer.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert [name for name, _ in layer.named_parameters()] == [
        "bias",
        "parametrizations.weight.original",
    ]
    assert type(nn.Linear(2, 2)).__name__ == "Linear"  # the class itself is untouched


def test_parametrized_gradients_reach_the_original(ctx):
    layer = _linear(3, 3)
    P.register_parametrization(layer, "weight", Symmetric())
    x = _array((5, 3), 3)
    upstream = _array((5, 3), 4)
    (layer(torch.from_numpy(x)) * torch.from_numpy(upstream)).sum().backward()
    grad_w = upstream.T @ x  # d loss / d weight
    expected = np.triu(grad_w) + np.triu(grad_w.T, 1)  # through triu(a) + triu(a, 1).T
    np.testing.assert_allclose(
        layer.parametrizations.weight.original.grad.numpy(), expected, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(layer.bias.grad.numpy(), upstream.sum(0), rtol=1e-5)


def test_parametrizations_chain_and_assignment_runs_right_inverse(ctx):
    layer = _linear(3, 3)
    raw = layer.weight.detach().numpy().copy()
    P.register_parametrization(layer, "weight", Symmetric())
    P.register_parametrization(layer, "weight", Scaled(3.0))
    assert len(layer.parametrizations.weight) == 2
    np.testing.assert_allclose(layer.weight.detach().numpy(), 3 * _symmetric(raw), rtol=1e-6)
    target = _symmetric(_array((3, 3), 9))
    layer.weight = torch.from_numpy(target)
    np.testing.assert_allclose(
        layer.parametrizations.weight.original.detach().numpy(), np.triu(target) / 3, rtol=1e-6
    )
    np.testing.assert_allclose(layer.weight.detach().numpy(), target, rtol=1e-6)


def test_cached_computes_a_parametrized_tensor_once(ctx):
    layer = _linear(3, 3)
    P.register_parametrization(layer, "weight", Symmetric())
    assert layer.weight is not layer.weight
    with P.cached():
        first = layer.weight
        with P.cached():
            assert layer.weight is first
        assert layer.weight is first
    assert layer.weight is not first


def _cached_on_rank_zero(rank, world):
    dist.init_process_group()
    layer = P.register_parametrization(nn.Linear(2, 2), "weight", Symmetric())
    if rank == 0:
        with P.cached():
            first = layer.weight
            dist.barrier()  # rank 1 runs its reads while this rank waits in here
            reused = layer.weight is first
    else:
        reused = layer.weight is layer.weight
        dist.barrier()
    dist.destroy_process_group()
    return reused


def test_cached_is_per_rank():
    result = kernbench.simulate(
        _cached_on_rank_zero, topology="multi_sip", world_size=2, rank_args=True
    )
    assert result.returns == [True, False]


def test_remove_parametrizations_leaves_the_right_parameter(ctx):
    layer = _linear(3, 3)
    weight = layer.weight
    raw = weight.detach().numpy().copy()
    P.register_parametrization(layer, "weight", Symmetric())
    P.register_parametrization(layer, "bias", Scaled(2.0))
    P.remove_parametrizations(layer, "weight")
    assert type(layer).__name__ == "ParametrizedLinear"  # bias still parametrized
    assert layer.weight is weight and isinstance(layer.weight, nn.Parameter)
    np.testing.assert_allclose(layer.weight.detach().numpy(), _symmetric(raw), rtol=1e-6)
    bias = layer.parametrizations.bias.original
    P.remove_parametrizations(layer, "bias", leave_parametrized=False)
    assert type(layer) is nn.Linear and not hasattr(layer, "parametrizations")
    assert layer.bias is bias
    assert list(layer.state_dict()) == ["weight", "bias"]
    assert repr(layer) == "Linear(in_features=3, out_features=3, bias=True)"


def test_buffers_can_be_parametrized(ctx):
    norm = nn.BatchNorm1d(3)
    P.register_parametrization(norm, "running_var", Scaled(2.0))
    assert "parametrizations.running_var.original" in norm.state_dict()
    assert [name for name, _ in norm.named_buffers()][-1] == "parametrizations.running_var.original"
    np.testing.assert_allclose(norm.running_var.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(norm.parametrizations.running_var.original.numpy(), [0.5, 0.5, 0.5])


def test_parametrized_state_dict_round_trips_through_save(ctx, tmp_path):
    layer = _linear(3, 3)
    P.register_parametrization(layer, "weight", Symmetric())
    torch.save(layer.state_dict(), tmp_path / "layer.pt")
    other = _linear(3, 3, seed=5)
    P.register_parametrization(other, "weight", Symmetric())
    result = other.load_state_dict(torch.load(tmp_path / "layer.pt"))
    assert not result.missing_keys and not result.unexpected_keys
    np.testing.assert_array_equal(other.weight.detach().numpy(), layer.weight.detach().numpy())
    with pytest.raises(TensorError, match="Serialization of parametrized modules is only"):
        torch.save(layer, tmp_path / "whole.pt")


def test_parametrize_errors_as_torch(ctx):
    layer = _linear(3, 3)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametr"):
        P.register_parametrization(layer, "missing", Symmetric())
    with pytest.raises(ValueError, match="may not change the shape of the tensor, unless `unsafe`"):
        P.register_parametrization(layer, "weight", FirstRow())
    assert type(layer) is nn.Linear and "weight" in dict(layer.named_parameters())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(layer, "weight")
    P.register_parametrization(layer, "weight", NoInverse())
    with pytest.raises(TensorError, match="parametrization NoInverse does not implement right_"):
        layer.weight = torch.zeros(3, 3)
    with pytest.raises(
        ValueError, match="unless the `unsafe` flag is enabled.\nmodule.weight.shape"
    ):
        P.register_parametrization(layer, "weight", FirstRow())
    P.register_parametrization(layer, "weight", FirstRow(), unsafe=True)
    assert tuple(layer.weight.shape) == (1, 3)


def test_parametrized_forward_costs_the_same_in_timing_only_mode():
    def run(timing_only: bool) -> int:
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            layer = nn.Linear(64, 64)
            P.register_parametrization(layer, "weight", Symmetric())
            x = torch.ones(8, 64)
            before = context.now
            layer(x).sum().backward()
            return context.now - before

    assert run(timing_only=True) == run(timing_only=False) > 0


# -- weight norm -------------------------------------------------------------------------


def _weight_norm_grads(g, v, upstream):
    """d/dg and d/dv of sum(upstream * g * v / ||v||), the norm over each row."""
    norm = np.sqrt((v * v).sum(1, keepdims=True))
    inner = (upstream * v).sum(1, keepdims=True)
    return inner / norm, g / norm * (upstream - inner * v / norm**2)


def test_weight_norm_parametrization_values_gradients_and_keys(ctx):
    layer = _linear(3, 4)
    raw = layer.weight.detach().numpy().copy()
    assert PZ.weight_norm(layer) is layer
    assert list(layer.state_dict()) == [
        "bias",
        "parametrizations.weight.original0",
        "parametrizations.weight.original1",
    ]
    assert "(0): _WeightNorm()" in repr(layer) and repr(layer).startswith("ParametrizedLinear(")
    g = layer.parametrizations.weight.original0
    v = layer.parametrizations.weight.original1
    assert tuple(g.shape) == (3, 1) and isinstance(g, nn.Parameter) and g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), np.linalg.norm(raw, axis=1, keepdims=True))
    np.testing.assert_array_equal(v.detach().numpy(), raw)
    np.testing.assert_allclose(layer.weight.detach().numpy(), raw, rtol=1e-5)
    g_new, v_new = np.abs(_array((3, 1), 11)) + 0.5, _array((3, 4), 12)
    with torch.no_grad():
        g.copy_(torch.from_numpy(g_new))
        v.copy_(torch.from_numpy(v_new))
    expected = g_new * v_new / np.linalg.norm(v_new, axis=1, keepdims=True)
    np.testing.assert_allclose(layer.weight.detach().numpy(), expected, rtol=1e-5)
    upstream = _array((3, 4), 13)
    (layer.weight * torch.from_numpy(upstream)).sum().backward()
    grad_g, grad_v = _weight_norm_grads(g_new, v_new, upstream)
    np.testing.assert_allclose(g.grad.numpy(), grad_g, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(v.grad.numpy(), grad_v, rtol=1e-4, atol=1e-6)


def test_weight_norm_dims_and_removal(ctx):
    whole = PZ.weight_norm(_linear(3, 4), dim=None)
    raw = whole.parametrizations.weight.original1.detach().numpy()
    assert tuple(whole.parametrizations.weight.original0.shape) == ()
    np.testing.assert_allclose(
        whole.parametrizations.weight.original0.item(), np.linalg.norm(raw), rtol=1e-6
    )
    conv = PZ.weight_norm(nn.Conv2d(2, 5, 3))
    assert tuple(conv.parametrizations.weight.original0.shape) == (5, 1, 1, 1)
    columns = PZ.weight_norm(_linear(3, 4), dim=1)
    assert tuple(columns.parametrizations.weight.original0.shape) == (1, 4)
    with pytest.raises(ValueError, match=r"Cannot leave unparametrized \(`leave_parametrized"):
        P.remove_parametrizations(whole, "weight", leave_parametrized=False)
    value = whole.weight.detach().numpy()
    P.remove_parametrizations(whole, "weight")
    assert type(whole) is nn.Linear and list(whole.state_dict()) == ["bias", "weight"]
    assert isinstance(whole.weight, nn.Parameter) and whole.weight.requires_grad
    np.testing.assert_allclose(whole.weight.detach().numpy(), value, rtol=1e-6)


def test_hook_weight_norm_warns_and_recomputes_before_forward(ctx):
    layer = _linear(3, 4)
    raw = layer.weight.detach().numpy().copy()
    with pytest.warns(FutureWarning, match="`torch.nn.utils.weight_norm` is deprecated in fav"):
        assert nn.utils.weight_norm(layer) is layer
    assert type(layer) is nn.Linear
    assert list(layer.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert tuple(layer.weight_g.shape) == (3, 1) and "weight" not in layer.state_dict()
    np.testing.assert_allclose(layer.weight.detach().numpy(), raw, rtol=1e-5)
    g_new, v_new = np.abs(_array((3, 1), 21)) + 0.5, _array((3, 4), 22)
    with torch.no_grad():
        layer.weight_g.copy_(torch.from_numpy(g_new))
        layer.weight_v.copy_(torch.from_numpy(v_new))
    x, upstream = _array((6, 4), 23), _array((6, 3), 24)
    out = layer(torch.from_numpy(x))
    weight = g_new * v_new / np.linalg.norm(v_new, axis=1, keepdims=True)
    bias = layer.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), x @ weight.T + bias, rtol=1e-4, atol=1e-5)
    (out * torch.from_numpy(upstream)).sum().backward()
    grad_g, grad_v = _weight_norm_grads(g_new, v_new, upstream.T @ x)
    np.testing.assert_allclose(layer.weight_g.grad.numpy(), grad_g, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer.weight_v.grad.numpy(), grad_v, rtol=1e-4, atol=1e-5)
    with (
        pytest.warns(FutureWarning),
        pytest.raises(TensorError, match="Cannot register two weight_norm hooks on the same"),
    ):
        nn.utils.weight_norm(layer)
    assert nn.utils.remove_weight_norm(layer) is layer
    assert list(layer.state_dict()) == ["bias", "weight"]
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.grad_fn is None
    np.testing.assert_allclose(layer.weight.detach().numpy(), weight, rtol=1e-5)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in Linear"):
        nn.utils.remove_weight_norm(layer)


# -- spectral norm -----------------------------------------------------------------------


def _unit(x):
    return x / max(np.linalg.norm(x), 1e-12)


def test_spectral_norm_parametrization_runs_power_iteration_in_training_only(ctx):
    layer = _linear(3, 5)
    raw = layer.weight.detach().numpy().copy()
    PZ.spectral_norm(layer)
    assert list(layer.state_dict()) == [
        "bias",
        "parametrizations.weight.original",
        "parametrizations.weight.0._u",
        "parametrizations.weight.0._v",
    ]
    assert "(0): _SpectralNorm()" in repr(layer)
    norm = layer.parametrizations.weight[0]
    u0, v0 = norm._u.numpy().copy(), norm._v.numpy().copy()
    np.testing.assert_allclose(np.linalg.norm(u0), 1.0, rtol=1e-5)
    u1 = _unit(raw @ v0)
    v1 = _unit(raw.T @ u1)
    sigma = u1 @ raw @ v1
    np.testing.assert_allclose(layer.weight.detach().numpy(), raw / sigma, rtol=1e-5)
    np.testing.assert_allclose(norm._u.numpy(), u1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm._v.numpy(), v1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sigma, np.linalg.svd(raw, compute_uv=False)[0], rtol=1e-3)
    layer.eval()
    np.testing.assert_allclose(layer.weight.detach().numpy(), raw / sigma, rtol=1e-5)
    np.testing.assert_allclose(norm._u.numpy(), u1, rtol=1e-5, atol=1e-6)  # not refined
    upstream = _array((3, 5), 31)
    (layer.weight * torch.from_numpy(upstream)).sum().backward()
    expected = upstream / sigma - (upstream * raw).sum() / sigma**2 * np.outer(u1, v1)
    np.testing.assert_allclose(
        layer.parametrizations.weight.original.grad.numpy(), expected, rtol=1e-4, atol=1e-6
    )


def test_spectral_norm_dims_and_errors(ctx):
    deconv = PZ.spectral_norm(nn.ConvTranspose2d(2, 3, 3))
    assert tuple(deconv.parametrizations.weight[0]._u.shape) == (3,)  # dim 1: out channels
    conv = PZ.spectral_norm(nn.Conv2d(2, 4, 3))
    assert tuple(conv.parametrizations.weight[0]._v.shape) == (18,)
    vector = nn.Linear(3, 2)
    PZ.spectral_norm(vector, "bias")
    bias = vector.parametrizations.bias.original.detach().numpy()
    np.testing.assert_allclose(vector.bias.detach().numpy(), _unit(bias), rtol=1e-6)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'kernel'"):
        PZ.spectral_norm(nn.Linear(3, 2), "kernel")
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive, but got"):
        PZ.spectral_norm(nn.Linear(3, 2), n_power_iterations=0)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of"):
        PZ.spectral_norm(nn.Linear(3, 2), dim=2)


def test_hook_spectral_norm_updates_v_then_u_before_each_training_forward(ctx):
    layer = _linear(3, 5)
    raw = layer.weight.detach().numpy().copy()
    assert nn.utils.spectral_norm(layer) is layer
    assert list(layer.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    u0 = layer.weight_u.numpy().copy()
    x = _array((2, 5), 41)
    out = layer(torch.from_numpy(x))
    v1 = _unit(raw.T @ u0)
    u1 = _unit(raw @ v1)
    sigma = u1 @ raw @ v1
    np.testing.assert_allclose(layer.weight.detach().numpy(), raw / sigma, rtol=1e-5)
    np.testing.assert_allclose(layer.weight_u.numpy(), u1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.weight_v.numpy(), v1, rtol=1e-5, atol=1e-6)
    upstream = _array((2, 3), 42)
    (out * torch.from_numpy(upstream)).sum().backward()
    grad_w = upstream.T @ x
    expected = grad_w / sigma - (grad_w * raw).sum() / sigma**2 * np.outer(u1, v1)
    np.testing.assert_allclose(layer.weight_orig.grad.numpy(), expected, rtol=1e-4, atol=1e-6)
    layer.eval()
    layer(torch.from_numpy(x))
    np.testing.assert_allclose(layer.weight_u.numpy(), u1, rtol=1e-5, atol=1e-6)
    with pytest.raises(TensorError, match="Cannot register two spectral_norm hooks on the"):
        nn.utils.spectral_norm(layer)
    assert nn.utils.remove_spectral_norm(layer) is layer
    assert list(layer.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(layer.weight.detach().numpy(), raw / sigma, rtol=1e-5)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in Linear"):
        nn.utils.remove_spectral_norm(layer)
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        nn.utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


# -- all four: checkpoints and timing-only runs -------------------------------------------

KINDS = ["weight_norm", "spectral_norm", "hook_weight_norm", "hook_spectral_norm"]


def _normed(kind, layer):
    if kind == "hook_weight_norm":
        with pytest.warns(FutureWarning):
            return nn.utils.weight_norm(layer)
    apply = {
        "weight_norm": PZ.weight_norm,
        "spectral_norm": PZ.spectral_norm,
        "hook_spectral_norm": nn.utils.spectral_norm,
    }[kind]
    return apply(layer)


@pytest.mark.parametrize("kind", KINDS)
def test_normed_state_dict_round_trips_through_save(ctx, tmp_path, kind):
    source = _normed(kind, _linear(3, 4, seed=1))
    source(torch.ones(2, 4))
    torch.save(source.state_dict(), tmp_path / "model.pt")
    target = _normed(kind, _linear(3, 4, seed=2))
    result = target.load_state_dict(torch.load(tmp_path / "model.pt"))
    assert not result.missing_keys and not result.unexpected_keys
    source.eval()
    target.eval()
    x = torch.from_numpy(_array((2, 4), 50))
    np.testing.assert_array_equal(target(x).detach().numpy(), source(x).detach().numpy())


@pytest.mark.parametrize("kind", KINDS)
def test_normed_training_step_costs_the_same_in_timing_only_mode(kind):
    def run(timing_only: bool) -> int:
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            layer = _normed(kind, nn.Linear(16, 8))
            x = torch.ones(4, 16)
            before = context.now
            layer(x).sum().backward()
            return context.now - before

    assert run(timing_only=True) == run(timing_only=False) > 0


def test_weight_norm_parametrization_loads_a_hook_weight_norm_checkpoint(ctx, tmp_path):
    with pytest.warns(FutureWarning):
        old = nn.Sequential(nn.ReLU(), nn.utils.weight_norm(_linear(3, 4, seed=1)))
    torch.save(old.state_dict(), tmp_path / "old.pt")
    assert list(old.state_dict()) == ["1.bias", "1.weight_g", "1.weight_v"]
    new = nn.Sequential(nn.ReLU(), PZ.weight_norm(_linear(3, 4, seed=2)))
    result = new.load_state_dict(torch.load(tmp_path / "old.pt"))
    assert not result.missing_keys and not result.unexpected_keys
    x = torch.from_numpy(_array((2, 4), 60))
    np.testing.assert_allclose(new(x).detach().numpy(), old(x).detach().numpy(), rtol=1e-6)


def test_load_state_dict_pre_hooks_see_a_copy_with_the_modules_prefix(ctx):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    seen = []

    def rename(module, state_dict, prefix, *rest):
        seen.append((type(module).__name__, prefix))
        state_dict[prefix + "bias"] = state_dict.pop(prefix + "b")

    handle = model[1].register_load_state_dict_pre_hook(rename)
    given = dict(model.state_dict())
    given["1.b"] = given.pop("1.bias")
    model.load_state_dict(given)
    assert seen == [("Linear", "1.")] and "1.b" in given  # the caller's dict is untouched
    handle.remove()
    with pytest.raises(TensorError, match='Unexpected key\\(s\\) in state_dict: "1.b"'):
        model.load_state_dict(given)


def test_vector_round_trip_and_removal_cost_the_same_in_timing_only_mode():
    def run(timing_only: bool) -> int:
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            model = nn.Sequential(nn.Linear(16, 8), nn.Linear(8, 4))
            P.register_parametrization(model[0], "weight", Scaled(2.0))
            before = context.now
            vec = nn.utils.parameters_to_vector(model.parameters())
            (vec * 2).sum().backward()
            nn.utils.vector_to_parameters(vec.detach() * 0.5, model.parameters())
            P.remove_parametrizations(model[0], "weight")
            return context.now - before

    assert run(timing_only=True) == run(timing_only=False) > 0


def test_a_weight_normed_forward_costs_its_tensor_ops():
    def run(normed: bool) -> int:
        context = RuntimeContext("tiny", timing_only=True)
        with use_context(context):
            layer = nn.Linear(32, 16)
            x = torch.ones(8, 32)
            g, v = layer.weight.norm(2, (1,), keepdim=True), layer.weight
            if normed:
                PZ.weight_norm(layer)

            def forward():
                if normed:
                    return layer(x)
                weight = v * (g / v.norm(2, (1,), keepdim=True))
                return nn.functional.linear(x, weight, layer.bias)

            forward()  # the first launch of each kernel also loads it
            before = context.now
            forward()
            return context.now - before

    assert run(normed=True) == run(normed=False) > 0


def test_transfer_parametrizations_and_params_shares_the_originals(ctx):
    source = _linear(3, 3)
    P.register_parametrization(source, "weight", Symmetric())
    PZ.weight_norm(source, "bias")
    target = _linear(3, 3, seed=7)
    assert P.transfer_parametrizations_and_params(source, target) is target
    assert type(target).__name__ == "ParametrizedLinear"
    assert target.parametrizations.weight.original is source.parametrizations.weight.original
    assert target.parametrizations.bias.original1 is source.parametrizations.bias.original1
    np.testing.assert_array_equal(target.weight.detach().numpy(), source.weight.detach().numpy())
    np.testing.assert_array_equal(target.bias.detach().numpy(), source.bias.detach().numpy())
    fresh = nn.Module()
    P.transfer_parametrizations_and_params(source, fresh, "weight")
    assert list(fresh.state_dict()) == ["parametrizations.weight.original"]
    assert P.transfer_parametrizations_and_params(nn.Linear(2, 2), fresh) is fresh


def test_clip_grads_with_norm_looks_at_total_norm_only_with_gradients(ctx):
    assert nn.utils.clip_grads_with_norm_([torch.ones(2)], 1.0, 2.0) is None
