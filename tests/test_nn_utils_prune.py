"""``torch.nn.utils.prune``: masks and pruned weights against NumPy for every method,
iterative pruning through a ``PruningContainer``, ``global_unstructured``, ``remove``,
``is_pruned``, forward outputs, gradients reaching ``weight_orig`` masked, state-dict
keys and argument errors as torch raises them."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.utils.prune as prune
from kernbench.runtime import RuntimeContext, use_context


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


def _l1_mask(values, count, mask=None):
    """NumPy's mask: ``count`` more of the entries still 1 in ``mask`` set to 0, the
    smallest magnitudes first (a stable order)."""
    mask = np.ones_like(values) if mask is None else mask.copy()
    left = np.flatnonzero(mask.ravel() == 1)
    order = left[np.argsort(np.abs(values.ravel()[left]), kind="stable")]
    mask.ravel()[order[:count]] = 0
    return mask


def test_l1_unstructured_masks_the_smallest_and_reparametrizes(ctx):
    layer = _linear(3, 4)
    raw = layer.weight.detach().numpy().copy()
    weight = layer.weight
    assert nn.utils.prune is prune
    assert prune.l1_unstructured(layer, "weight", amount=0.3) is layer
    # round(0.3 * 12) = 4 entries go
    expected = _l1_mask(raw, 4)
    assert list(layer.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert [n for n, _ in layer.named_parameters()] == ["bias", "weight_orig"]
    assert [n for n, _ in layer.named_buffers()] == ["weight_mask"]
    assert layer.weight_orig is weight and isinstance(layer.weight_orig, nn.Parameter)
    assert not isinstance(layer.weight, nn.Parameter) and layer.weight.grad_fn is not None
    np.testing.assert_array_equal(layer.weight_mask.numpy(), expected)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), raw * expected)
    np.testing.assert_array_equal(layer.weight_orig.detach().numpy(), raw)
    assert prune.is_pruned(layer) and not prune.is_pruned(_linear())
    hooks = [h for h in layer._forward_pre_hooks.values()]
    assert len(hooks) == 1 and isinstance(hooks[0], prune.L1Unstructured)
    assert hooks[0]._tensor_name == "weight" and hooks[0].amount == 0.3


def test_forward_uses_the_pruned_weight_and_gradients_are_masked(ctx):
    layer = _linear(3, 4)
    prune.l1_unstructured(layer, "weight", amount=5)
    mask = layer.weight_mask.numpy().copy()
    new = _array((3, 4), 5)
    with torch.no_grad():
        layer.weight_orig.copy_(torch.from_numpy(new))  # the pre-hook recomputes weight
    x, upstream = _array((2, 4), 6), _array((2, 3), 7)
    out = layer(torch.from_numpy(x))
    bias = layer.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), x @ (new * mask).T + bias, rtol=1e-5)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), new * mask)
    (out * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(layer.weight_orig.grad.numpy(), (upstream.T @ x) * mask, rtol=1e-5)
    assert layer.weight_mask.grad is None


def test_iterative_pruning_applies_to_the_entries_left(ctx):
    layer = _linear(4, 5)
    raw = layer.weight.detach().numpy().copy()
    prune.l1_unstructured(layer, "weight", amount=0.5)  # 10 of 20 go
    first = _l1_mask(raw, 10)
    prune.l1_unstructured(layer, "weight", amount=0.5)  # 5 of the 10 left go
    second = _l1_mask(raw, 5, first)
    np.testing.assert_array_equal(layer.weight_mask.numpy(), second)
    assert int(second.sum()) == 5
    (hook,) = layer._forward_pre_hooks.values()
    assert isinstance(hook, prune.PruningContainer) and len(hook) == 2
    assert all(isinstance(m, prune.L1Unstructured) for m in hook)
    prune.random_unstructured(layer, "weight", amount=2)  # the container grows
    assert len(hook) == 3 and int(layer.weight_mask.numpy().sum()) == 3
    assert list(layer.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    # structured after unstructured: only the rows not all zero are candidates
    left_rows = np.flatnonzero(layer.weight_mask.numpy().sum(1) != 0)
    prune.ln_structured(layer, "weight", amount=1, n=2, dim=0)
    rows = layer.weight_mask.numpy().sum(1) != 0
    assert rows.sum() == len(left_rows) - 1 and set(np.flatnonzero(rows)) < set(left_rows)


def test_ln_structured_keeps_the_largest_norms(ctx):
    conv = nn.Conv2d(2, 5, 3)
    raw = _array((5, 2, 3, 3), 8)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(raw))
    prune.ln_structured(conv, "weight", amount=0.4, n=1, dim=0)  # round(2.0) = 2 channels
    norms = np.abs(raw).sum((1, 2, 3))
    kept = np.sort(np.argsort(-norms, kind="stable")[:3])
    expected = np.zeros_like(raw)
    expected[kept] = 1
    np.testing.assert_array_equal(conv.weight_mask.numpy(), expected)
    np.testing.assert_array_equal(conv.weight.detach().numpy(), raw * expected)
    layer = _linear(3, 4)
    raw2 = layer.weight.detach().numpy().copy()
    prune.ln_structured(layer, "weight", amount=1, n=float("inf"), dim=-1)
    cols = np.abs(raw2).max(0)
    expected2 = np.ones_like(raw2)
    expected2[:, np.argmin(cols)] = 0
    np.testing.assert_array_equal(layer.weight_mask.numpy(), expected2)
    cubic = _linear(4, 3, seed=3)
    raw3 = cubic.weight.detach().numpy().copy()
    prune.ln_structured(cubic, "weight", amount=0.5, n=3, dim=0)  # round(2.0) = 2 rows
    expected3 = np.zeros_like(raw3)
    expected3[np.sort(np.argsort(-(np.abs(raw3) ** 3).sum(1), kind="stable")[:2])] = 1
    np.testing.assert_array_equal(cubic.weight_mask.numpy(), expected3)


def test_importance_scores_choose_instead_of_the_values(ctx):
    layer = _linear(3, 4)
    scores = np.arange(12, dtype=np.float32)[::-1].reshape(3, 4).copy()
    prune.l1_unstructured(layer, "weight", 3, importance_scores=torch.from_numpy(scores))
    expected = np.ones((3, 4), np.float32)
    expected[2, 1:] = 0  # the scores 2, 1, 0
    np.testing.assert_array_equal(layer.weight_mask.numpy(), expected)
    other = _linear(3, 4)
    rows = np.array([[1.0], [0.0], [2.0]], np.float32) * np.ones((1, 4), np.float32)
    prune.ln_structured(other, "weight", 1, 2, 0, importance_scores=torch.from_numpy(rows))
    assert other.weight_mask.numpy().sum(1).tolist() == [4.0, 0.0, 4.0]


def test_ties_go_to_the_lower_index(ctx):
    layer = nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.array([[1, -1, 2], [1, 3, 1]], np.float32)))
    prune.l1_unstructured(layer, "weight", amount=2)
    np.testing.assert_array_equal(layer.weight_mask.numpy(), [[0, 0, 1], [1, 1, 1]])


def test_random_methods_count_and_repeat_with_the_seed(ctx):
    def masks():
        torch.manual_seed(123)
        layer = _linear(4, 5)
        prune.random_unstructured(layer, "weight", amount=0.35)  # round(7.0) = 7
        conv = nn.Conv2d(3, 6, 2)
        prune.random_structured(conv, "weight", amount=2, dim=1)
        return layer.weight_mask.numpy().copy(), conv.weight_mask.numpy().copy()

    first, structured = masks()
    assert int((first == 0).sum()) == 7 and set(np.unique(first)) <= {0.0, 1.0}
    channels = structured.sum((0, 2, 3))
    assert sorted(channels.tolist()) == [0.0, 0.0, 24.0]
    again, structured_again = masks()
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(structured, structured_again)


def test_identity_custom_from_mask_and_the_methods_prune(ctx):
    layer = _linear(3, 4)
    raw = layer.weight.detach().numpy().copy()
    prune.identity(layer, "weight")
    np.testing.assert_array_equal(layer.weight_mask.numpy(), np.ones((3, 4)))
    given = (_array((3, 4), 9) > 0).astype(np.float32)
    prune.custom_from_mask(layer, "weight", mask=torch.from_numpy(given))
    np.testing.assert_array_equal(layer.weight_mask.numpy(), given)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), raw * given)
    t = torch.from_numpy(raw)
    pruned = prune.L1Unstructured(amount=2).prune(t)
    np.testing.assert_array_equal(pruned.numpy(), raw * _l1_mask(raw, 2))


def test_global_unstructured_chooses_over_all_the_tensors(ctx):
    a, b = _linear(3, 3, seed=10), _linear(2, 3, seed=12)
    wa, wb = a.weight.detach().numpy().copy(), b.weight.detach().numpy().copy()
    prune.l1_unstructured(a, "weight", amount=1)  # already pruned: its zero stays out
    both = np.concatenate([wa.ravel(), wb.ravel()])
    before = np.concatenate([_l1_mask(wa, 1).ravel(), np.ones(6, np.float32)])
    prune.global_unstructured(
        [(a, "weight"), (b, "weight")], pruning_method=prune.L1Unstructured, amount=0.5
    )
    # round(0.5 * 14) = 7 of the 14 entries left
    expected = _l1_mask(both, 7, before)
    np.testing.assert_array_equal(a.weight_mask.numpy().ravel(), expected[:9])
    np.testing.assert_array_equal(b.weight_mask.numpy().ravel(), expected[9:])
    assert len(a._forward_pre_hooks[next(iter(a._forward_pre_hooks))]) == 2
    assert isinstance(next(iter(b._forward_pre_hooks.values())), prune.CustomFromMask)
    assert not a.weight_mask.requires_grad and not b.weight_mask.requires_grad


def test_remove_makes_the_pruning_permanent(ctx):
    layer = _linear(3, 4)
    prune.l1_unstructured(layer, "weight", amount=6)
    prune.random_unstructured(layer, "bias", amount=1)
    pruned = layer.weight.detach().numpy().copy()
    assert prune.remove(layer, "weight") is layer
    assert list(layer.state_dict()) == ["bias_orig", "weight", "bias_mask"]
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.grad_fn is None
    np.testing.assert_array_equal(layer.weight.detach().numpy(), pruned)
    assert prune.is_pruned(layer)
    prune.remove(layer, "bias")
    assert list(layer.state_dict()) == ["weight", "bias"] and not prune.is_pruned(layer)
    assert not layer._forward_pre_hooks
    with pytest.raises(ValueError, match="Parameter 'weight' of module .* has to be pruned"):
        prune.remove(layer, "weight")
    outer = nn.Sequential(_linear(), nn.ReLU())
    prune.identity(outer[0], "bias")
    assert prune.is_pruned(outer)


def test_argument_errors_as_torch(ctx):
    layer = _linear(3, 4)
    with pytest.raises(TypeError, match="Invalid type for amount: 0.5j. Must be int or float"):
        prune.l1_unstructured(layer, "weight", amount=0.5j)
    with pytest.raises(ValueError, match=r"amount=1.5 should either be a float in the range"):
        prune.l1_unstructured(layer, "weight", amount=1.5)
    with pytest.raises(ValueError, match=r"amount=-1 should either be a float in the range"):
        prune.RandomUnstructured(amount=-1)
    with pytest.raises(ValueError, match="amount=13 should be smaller than the number of par"):
        prune.l1_unstructured(layer, "weight", amount=13)
    # a failed apply puts the parameter back (last, as torch's)
    assert list(layer.state_dict()) == ["bias", "weight"] and not prune.is_pruned(layer)
    assert isinstance(layer.weight, nn.Parameter)
    with pytest.raises(ValueError, match="Structured pruning can only be applied to multidim"):
        prune.ln_structured(layer, "bias", amount=1, n=2, dim=0)
    with pytest.raises(IndexError, match="Invalid index 2 for tensor of size"):
        prune.random_structured(layer, "weight", amount=1, dim=2)
    with pytest.raises(AssertionError, match="importance_scores should have the same shape"):
        prune.l1_unstructured(layer, "weight", 1, importance_scores=torch.ones(2, 2))
    with pytest.raises(TypeError, match='Only "unstructured" PRUNING_TYPE supported'):
        prune.global_unstructured([(layer, "weight")], prune.LnStructured, amount=1, n=1)
    with pytest.raises(TypeError, match="parameters is not an Iterable"):
        prune.global_unstructured(3, prune.L1Unstructured, amount=1)
    with pytest.raises(TypeError, match="importance_scores must be of type dict"):
        prune.global_unstructured([(layer, "weight")], prune.L1Unstructured, [], amount=1)
    with pytest.raises(TypeError, match="Can't instantiate abstract class"):
        prune.BasePruningMethod()
    prune.l1_unstructured(layer, "weight", amount=2)
    (hook,) = layer._forward_pre_hooks.values()
    with pytest.raises(ValueError, match="amount=11 should be smaller"):
        prune.l1_unstructured(layer, "weight", amount=11)  # 10 left
    assert layer._forward_pre_hooks[next(iter(layer._forward_pre_hooks))] is hook
    with pytest.raises(AssertionError, match="importance_scores should have the same shape"):
        prune.l1_unstructured(layer, "weight", 1, importance_scores=torch.ones(4, 3))
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        prune.l1_unstructured(layer, "missing", 1)
    assert len(list(layer._forward_pre_hooks.values())) == 1
    prune.random_unstructured(layer, "weight", amount=1)
    (container,) = layer._forward_pre_hooks.values()
    assert len(container) == 2 and container[0] is hook
    assert int(layer.weight_mask.numpy().sum()) == 9
    with pytest.raises(ValueError, match="amount=10 should be smaller"):
        prune.l1_unstructured(layer, "weight", amount=10)  # 9 left
    assert len(container) == 2 and int(layer.weight_mask.numpy().sum()) == 9
    other = prune.L1Unstructured(amount=1)
    other._tensor_name = "bias"
    with pytest.raises(ValueError, match="Can only add pruning methods acting on the parameter"):
        container.add_pruning_method(other)
    with pytest.raises(TypeError, match="is not a BasePruningMethod subclass"):
        container.add_pruning_method(3)


def test_timing_only_runs_prune_and_the_forward_costs_the_same():
    def run(timing_only: bool, pruned: bool = True) -> int:
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            layer, conv = nn.Linear(32, 32), nn.Conv2d(2, 4, 3)
            if pruned:
                prune.l1_unstructured(layer, "weight", amount=0.5)
                prune.random_unstructured(layer, "weight", amount=0.5)
                prune.ln_structured(layer, "weight", amount=2, n=2, dim=0)
                prune.random_structured(conv, "weight", amount=1, dim=0)
                prune.global_unstructured(
                    [(layer, "bias"), (conv, "bias")], prune.L1Unstructured, amount=3
                )
            x = torch.ones(8, 32)
            before = context.now
            layer(x).sum().backward()
            return context.now - before

    # the pre-hook's multiply is a kernel of its own
    assert run(timing_only=True) == run(timing_only=False) > run(False, pruned=False) > 0
