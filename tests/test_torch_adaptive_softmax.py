"""``nn.AdaptiveLogSoftmaxWithLoss``: output, loss, ``log_prob`` and ``predict`` against
NumPy computed from the module's own weights (batched and unbatched, each branch of
``predict``), gradients, torch's ``state_dict`` names, timing-only runs, and errors by
type and message."""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context

nn = torch.nn


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _log_softmax(z):
    shifted = z - z.max(1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(1, keepdims=True))


def _weights(m):
    head = (m.head.weight.detach().numpy().astype(np.float64), None)
    if m.head.bias is not None:
        head = (head[0], m.head.bias.detach().numpy().astype(np.float64))
    tails = [
        (
            p[0].weight.detach().numpy().astype(np.float64),
            p[1].weight.detach().numpy().astype(np.float64),
        )
        for p in m.tail
    ]
    return head, tails


def full_log_prob(m, x):
    """Every class's log-probability in float64, from the module's weights."""
    (wh, bh), tails = _weights(m)
    head = x @ wh.T + (0 if bh is None else bh)
    head_lp = _log_softmax(head)
    short = m.cutoffs[0]
    parts = [head_lp[:, :short]]
    for i, (w1, w2) in enumerate(tails):
        parts.append(_log_softmax(x @ w1.T @ w2.T) + head_lp[:, short + i : short + i + 1])
    return np.concatenate(parts, 1)


def _module(head_bias=False, seed=0):
    torch.manual_seed(seed)
    return nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10, 15], div_value=2.0, head_bias=head_bias)


@pytest.mark.parametrize("head_bias", [False, True])
def test_output_loss_and_log_prob_match_numpy(ctx, head_bias):
    m = _module(head_bias)
    x = np.random.default_rng(1).standard_normal((7, 8)).astype(np.float32)
    target = np.array([0, 3, 5, 19, 12, 9, 15])  # every cluster, both ends of each
    out, loss = m(torch.from_numpy(x), torch.from_numpy(target))
    expected = full_log_prob(m, x.astype(np.float64))
    picked = expected[np.arange(7), target]
    np.testing.assert_allclose(out.detach().numpy(), picked, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss.item(), -picked.mean(), rtol=1e-5)
    result = m(torch.from_numpy(x), torch.from_numpy(target))
    assert type(result).__name__ == "_ASMoutput" and result._fields == ("output", "loss")
    log_prob = m.log_prob(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(log_prob, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.exp(log_prob).sum(1), 1.0, rtol=1e-5)
    one = m(torch.from_numpy(x[4]), torch.tensor(12))  # unbatched: 1-D input, 0-D target
    assert tuple(one.output.shape) == () and tuple(one.loss.shape) == ()
    np.testing.assert_allclose(one.output.item(), picked[4], rtol=1e-5)


def test_predict_takes_each_of_torch_s_branches(ctx):
    m = _module(seed=2)
    with torch.no_grad():  # the head's output is the input's first 7 features
        m.head.weight.copy_(torch.from_numpy(np.eye(7, 8, dtype=np.float32)))
    x = np.random.default_rng(3).standard_normal((6, 8)).astype(np.float32)
    shortlist_row, cluster_row = np.zeros(8, np.float32), np.zeros(8, np.float32)
    shortlist_row[2], cluster_row[5] = 9.0, 9.0  # the head's argmax: class 2, cluster 1
    for rows in ([0, 1, 2, 3, 4, 5], [], [1, 4]):  # no row, every row, some rows in a cluster
        batch = x.copy()
        batch[:] = shortlist_row + 0.01 * x
        batch[rows] = cluster_row + 0.01 * x[rows]
        got = m.predict(torch.from_numpy(batch)).numpy()
        full = full_log_prob(m, batch.astype(np.float64))
        head_arg = full[:, : m.cutoffs[0]].argmax(1)
        expected = np.where(np.isin(np.arange(6), rows), full.argmax(1), head_arg)
        np.testing.assert_array_equal(got, expected)
        assert (got[np.setdiff1d(np.arange(6), rows)] == 2).all()  # the head's own argmax


def test_gradients_match_finite_differences(ctx):
    m = _module(head_bias=True, seed=4)
    x = np.random.default_rng(5).standard_normal((5, 8))
    target = np.array([1, 6, 11, 17, 3])
    xt = torch.from_numpy(x.astype(np.float32)).requires_grad_()
    m(xt, torch.from_numpy(target)).loss.backward()

    def loss_of(values):
        return -full_log_prob(m, values)[np.arange(5), target].mean()

    numeric = np.zeros_like(x)
    for index in np.ndindex(*x.shape):
        step = np.zeros_like(x)
        step[index] = 1e-6
        numeric[index] = (loss_of(x + step) - loss_of(x - step)) / 2e-6
    np.testing.assert_allclose(xt.grad.numpy(), numeric, rtol=1e-3, atol=1e-5)
    for name, parameter in m.named_parameters():
        assert parameter.grad is not None and tuple(parameter.grad.shape) == tuple(
            parameter.shape
        ), name


def test_parameters_are_named_as_torch_s(ctx):
    m = nn.AdaptiveLogSoftmaxWithLoss(64, 1000, [10, 100], head_bias=True)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes == {
        "head.weight": (12, 64),
        "head.bias": (12,),
        "tail.0.0.weight": (16, 64),
        "tail.0.1.weight": (90, 16),
        "tail.1.0.weight": (4, 64),
        "tail.1.1.weight": (900, 4),
    }
    assert m.cutoffs == [10, 100, 1000] and m.shortlist_size == 10 and m.head_size == 12
    assert torch.nn.modules.adaptive.AdaptiveLogSoftmaxWithLoss is nn.AdaptiveLogSoftmaxWithLoss


def _adaptive(context):
    m = _module()
    x = torch.from_numpy(np.random.default_rng(6).standard_normal((8, 8)).astype(np.float32))
    target = torch.tensor([0, 1, 4, 5, 10, 11, 15, 19])  # two rows a part, in order
    start = context.now
    out, loss = m(x, target)
    results = [out, loss, m.log_prob(x)]
    elapsed = context.now - start
    results.append(m.predict(x))
    return elapsed, results


def test_a_timing_only_run_splits_the_rows_evenly_and_costs_what_that_split_costs():
    """Targets that fall in the even split cost in a functional run what a timing-only
    run (no values: the even split) costs; the fast backend gives the same values."""
    times, (detailed, fast) = in_every_mode(_adaptive)
    assert times[0] > 0 and times[0] == times[1] and times[2] > 0
    assert_same_values(detailed, fast)


def test_errors_as_torch(ctx):
    with pytest.raises(ValueError, match="cutoffs should be a sequence of length larger than 0"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [])
    for cutoffs in ([5, 3], [0, 4], [4, 10], [3, 3], [2.5]):
        with pytest.raises(ValueError, match="cutoffs should be a sequence of unique, positive "
                           "integers sorted in an increasing order, where each value is "
                           "between 1 and n_classes-1"):  # fmt: skip
            nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4])
    x = torch.zeros(3, 8)
    with pytest.raises(TensorError, match=r"Target values should be in \[0, 9\], but values in "
                       r"range \[-1, 12\] were found. "):  # fmt: skip
        m(x, torch.tensor([-1, 2, 12]))
    with pytest.raises(TensorError, match="same size in the batch dimension"):
        m(x, torch.tensor([1, 2]))
    with pytest.raises(TensorError, match="1D target tensor expects 2D input tensors"):
        m(torch.zeros(3, 2, 8), torch.tensor([1, 2, 3]))
    with pytest.raises(TensorError, match="0D target tensor expects 1D input tensors"):
        m(x, torch.tensor(1))
    with pytest.raises(TensorError, match="0D or 1D target tensor expected, multi-target not"):
        m(x, torch.zeros(3, 1, dtype=torch.int64))
    with pytest.raises(TensorError, match=r"log_prob: expects a 2D input \(N, in_features\)"):
        m.log_prob(torch.zeros(8))
