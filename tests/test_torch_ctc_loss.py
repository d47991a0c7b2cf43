"""``F.ctc_loss`` and ``nn.CTCLoss``: losses against a NumPy CTC written from the alignment
definition (every alignment enumerated) and against its forward recursion, gradients
against finite differences, padded and concatenated targets, unequal lengths,
impossible targets, reductions, and errors by type and message."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _log_probs(frames, batch, classes, seed=0):
    x = np.random.default_rng(seed).normal(size=(frames, batch, classes))
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _collapse(path, blank):
    out, prev = [], None
    for c in path:
        if c != prev and c != blank:
            out.append(c)
        prev = c
    return out


def ctc_by_enumeration(lp, labels, blank=0):
    """-log of the summed probability of every path of ``lp`` (T, C) collapsing to
    ``labels``: the definition, for small T and C."""
    frames, classes = lp.shape
    total = 0.0
    for path in itertools.product(range(classes), repeat=frames):
        if _collapse(path, blank) == list(labels):
            total += np.exp(sum(lp[t, c] for t, c in enumerate(path)))
    return -np.log(total) if total > 0 else np.inf


def ctc_by_recursion(lp, labels, blank=0):
    """The forward recursion in float64 log space (for sizes enumeration cannot reach)."""
    ext = [blank]
    for c in labels:
        ext += [c, blank]
    alpha = np.full(len(ext), -np.inf)
    alpha[0] = lp[0, blank]
    if labels:
        alpha[1] = lp[0, ext[1]]
    for t in range(1, lp.shape[0]):
        new = np.full_like(alpha, -np.inf)
        for s in range(len(ext)):
            terms = [alpha[s]]
            if s >= 1:
                terms.append(alpha[s - 1])
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                terms.append(alpha[s - 2])
            new[s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
        alpha = new
    tail = alpha[-2:] if labels else alpha[-1:]
    return -np.logaddexp.reduce(tail)


def test_the_loss_is_minus_the_log_of_every_alignment_summed(ctx):
    lp = _log_probs(4, 1, 3, seed=1)
    for labels in ([1], [1, 2], [2, 2], [1, 1, 1], []):
        got = F.ctc_loss(
            torch.from_numpy(lp), torch.tensor([labels or [0]]), [4], [len(labels)],
            reduction="none",
        )  # fmt: skip
        expected = ctc_by_enumeration(lp[:, 0], labels)
        if np.isinf(expected):
            assert got.tolist() == [float("inf")]
        else:
            np.testing.assert_allclose(got.numpy(), [expected], rtol=1e-10)


def test_a_batch_of_unequal_lengths_padded_or_concatenated(ctx):
    lp = _log_probs(12, 3, 5, seed=2)
    labels = [[1, 2, 2, 3], [4], [3, 1, 4, 1, 2]]
    inputs, lengths = [12, 7, 10], [4, 1, 5]
    padded = np.zeros((3, 5), dtype=np.int64)
    for n, row in enumerate(labels):
        padded[n, : len(row)] = row
    expected = np.array([ctc_by_recursion(lp[: inputs[n], n], labels[n]) for n in range(3)])
    log_probs = torch.from_numpy(lp)
    none = F.ctc_loss(log_probs, torch.from_numpy(padded), inputs, lengths, reduction="none")
    np.testing.assert_allclose(none.numpy(), expected, rtol=1e-9)
    flat = torch.tensor(sum(labels, []))
    as_tensors = F.ctc_loss(
        log_probs, flat, torch.tensor(inputs), torch.tensor(lengths), reduction="sum"
    )
    np.testing.assert_allclose(as_tensors.item(), expected.sum(), rtol=1e-9)
    mean = torch.nn.CTCLoss()(log_probs, torch.from_numpy(padded), inputs, lengths)
    np.testing.assert_allclose(mean.item(), (expected / np.array(lengths)).mean(), rtol=1e-9)


def test_float32_and_a_blank_other_than_zero(ctx):
    lp = _log_probs(6, 2, 4, seed=3)
    labels = [[0, 1], [2, 0, 0]]
    padded = np.array([[0, 1, 0], [2, 0, 0]])
    loss = torch.nn.CTCLoss(blank=3, reduction="none")(
        torch.from_numpy(lp.astype(np.float32)), torch.from_numpy(padded), (6, 6), (2, 3)
    )
    expected = [ctc_by_recursion(lp[:, n], labels[n], blank=3) for n in range(2)]
    assert loss.dtype == torch.float32
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-5)


def test_the_gradient_matches_finite_differences(ctx):
    x = np.random.default_rng(4).normal(size=(5, 2, 3))
    labels, inputs, lengths = [[1, 2], [2, 2]], [5, 4], [2, 2]

    def numpy_loss(values):
        lp = values - np.log(np.exp(values).sum(-1, keepdims=True))
        return sum(ctc_by_recursion(lp[: inputs[n], n], labels[n]) for n in range(2))

    t = torch.from_numpy(x).requires_grad_()
    loss = F.ctc_loss(F.log_softmax(t, -1), torch.tensor(labels), inputs, lengths, reduction="sum")
    loss.backward()
    eps = 1e-6
    numeric = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (numpy_loss(up) - numpy_loss(down)) / (2 * eps)
    np.testing.assert_allclose(t.grad.numpy(), numeric, rtol=1e-5, atol=1e-7)
    assert np.all(t.grad.numpy()[4, 1] == 0)  # a frame past sample 1's input


def test_an_impossible_target_is_infinite_or_zeroed_with_its_gradient(ctx):
    lp = torch.from_numpy(_log_probs(2, 2, 3, seed=5)).requires_grad_()
    targets = torch.tensor([[1, 1], [1, 2]])  # "1 1" needs three frames (a blank between)
    loss = F.ctc_loss(lp, targets, [2, 2], [2, 2], reduction="none")
    assert loss.tolist()[0] == float("inf") and np.isfinite(loss.tolist()[1])
    zeroed = F.ctc_loss(lp, targets, [2, 2], [2, 2], reduction="sum", zero_infinity=True)
    np.testing.assert_allclose(zeroed.item(), loss.tolist()[1])
    zeroed.backward()
    assert np.all(lp.grad.numpy()[:, 0] == 0) and np.any(lp.grad.numpy()[:, 1] != 0)


def test_unbatched_input_gives_a_scalar(ctx):
    lp = _log_probs(5, 1, 4, seed=6)[:, 0]
    loss = F.ctc_loss(torch.from_numpy(lp), torch.tensor([1, 3]), [5], [2], reduction="none")
    assert tuple(loss.shape) == ()
    np.testing.assert_allclose(loss.item(), ctc_by_recursion(lp, [1, 3]), rtol=1e-10)


def test_ctc_errors(ctx):
    lp = torch.from_numpy(_log_probs(4, 2, 3))
    targets = torch.tensor([[1, 2], [2, 1]])
    with pytest.raises(
        TensorError, match="input_lengths must be of size batch_size \\(2\\), got 1"
    ):
        F.ctc_loss(lp, targets, [4], [2, 2])
    with pytest.raises(
        TensorError, match="Expected input_lengths to have value at most 4, but got value 5"
    ):
        F.ctc_loss(lp, targets, [5, 4], [2, 2])
    with pytest.raises(TensorError, match="Expected tensor to have size at least 3 at dimension 1"):
        F.ctc_loss(lp, targets, [4, 4], [3, 2])
    with pytest.raises(TensorError, match=r"blank must be in label range \[0, 3\), got 3"):
        F.ctc_loss(lp, targets, [4, 4], [2, 2], blank=3)
    with pytest.raises(TensorError, match=r"targets of sample 1 hold \[2, 7\]; labels must be in"):
        F.ctc_loss(lp, torch.tensor([[1, 2], [2, 7]]), [4, 4], [2, 2])
    with pytest.raises(TensorError, match="targets must hold integer labels"):
        F.ctc_loss(lp, targets.float(), [4, 4], [2, 2])
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        F.ctc_loss(lp, targets, [4, 4], [2, 2], reduction="avg")


def test_empty_batches_and_inputs_without_frames(ctx):
    lp = torch.from_numpy(_log_probs(3, 2, 4, seed=7))
    none = F.ctc_loss(lp, torch.tensor([[1], [1]]), [3, 0], [1, 0], reduction="none")
    assert none.tolist()[1] == 0.0 and str(none.tolist()[1]) == "0.0"
    np.testing.assert_allclose(none.tolist()[0], ctc_by_recursion(lp.numpy()[:, 0], [1]))
    no_frames = F.ctc_loss(
        torch.zeros(0, 2, 4), torch.tensor([[1], [1]]), [0, 0], [1, 0], reduction="none"
    )
    assert no_frames.tolist() == [float("inf"), 0.0]
    empty = F.ctc_loss(
        torch.zeros(3, 0, 4), torch.zeros(0, 2, dtype=torch.int64), [], [], reduction="sum"
    )
    assert empty.item() == 0.0


def test_timing_only_prices_tensor_lengths_as_the_longest_and_matches_a_functional_run():
    """A timing-only run keeps no values: lengths given as tensors count as the longest the
    shapes allow, so with full lengths it costs what the functional run costs."""
    costs = []
    for timing_only in (False, True):
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            lp = torch.randn(8, 2, 5).log_softmax(-1)
            targets = torch.randint(1, 5, (2, 3))
            start = context.now
            loss = F.ctc_loss(
                lp, targets, torch.full((2,), 8, dtype=torch.int64),
                torch.full((2,), 3, dtype=torch.int64),
            )  # fmt: skip
            costs.append(context.now - start)
            assert tuple(loss.shape) == ()
    assert costs[0] == costs[1] > 0
    with use_context(RuntimeContext("tiny", timing_only=True)):
        with pytest.raises(
            TensorError, match=r"input_lengths must be of size batch_size \(2\), got 3"
        ):
            F.ctc_loss(
                torch.zeros(4, 2, 3),
                torch.zeros(2, 1, dtype=torch.int64),
                torch.full((3,), 4),
                [1, 1],
            )
