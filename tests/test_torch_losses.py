"""kernbench.torch's ``log_softmax`` and ``torch.nn.functional``'s losses, ``dropout`` and
``one_hot``, against NumPy computed in float64.

Each runs on the tiny machine's device (its kernels cost simulated time); values are
compared with a tolerance right for float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context

TINY = "tiny"


@pytest.fixture
def ctx():
    context = RuntimeContext(TINY)
    with use_context(context):
        yield context
    torch.manual_seed(0)


def _normal(shape, seed: int = 0, scale: float = 2.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _log_softmax(a: np.ndarray, axis: int) -> np.ndarray:
    wide = a.astype(np.float64)
    z = wide - wide.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _kernels(ctx, since: int) -> list[str]:
    return [row.tag for row in ctx.trace[since:] if row.kind == "kernel"]


# ----------------------------------------------------------------------------- log_softmax


@pytest.mark.parametrize(
    ("shape", "dim"), [((4, 7), 1), ((4, 7), 0), ((2, 3, 5), 1), ((3, 1500), -1)]
)
def test_log_softmax_matches_numpy_in_one_kernel(ctx, shape, dim):
    a = _normal(shape)
    x = torch.from_numpy(a)
    want = _log_softmax(a, dim)
    before = len(ctx.trace)
    got = torch.log_softmax(x, dim)
    assert _kernels(ctx, before) == ["_softmax_kernel"]
    assert got.shape == x.shape and got.dtype is torch.float32
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x.log_softmax(dim).numpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(F.log_softmax(x, dim=dim).numpy(), want, rtol=1e-6, atol=1e-6)


def test_log_softmax_stays_finite_where_softmax_underflows(ctx):
    a = np.array([[0.0, -200.0, 1000.0], [-1e4, 0.0, -1e4]], np.float32)
    got = torch.tensor(a).log_softmax(-1).numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, _log_softmax(a, -1), rtol=1e-6)
    assert (torch.tensor(a).softmax(-1).numpy() == 0).any()  # where log(softmax) is -inf


def test_log_softmax_takes_dtype_and_out(ctx):
    a = _normal((3, 4), seed=2)
    x16 = torch.from_numpy(a).half()
    got = F.log_softmax(x16, 1, dtype=torch.float32)
    assert got.dtype is torch.float32
    np.testing.assert_allclose(
        got.numpy(), _log_softmax(a.astype(np.float16), 1), rtol=1e-6, atol=1e-6
    )
    assert x16.log_softmax(1).dtype is torch.float16  # in float32, rounded once
    np.testing.assert_allclose(
        x16.log_softmax(1).float().numpy(), _log_softmax(a.astype(np.float16), 1), rtol=1e-3
    )
    out = torch.empty(3, 4)
    assert torch.log_softmax(torch.from_numpy(a), 1, out=out) is out
    np.testing.assert_allclose(out.numpy(), _log_softmax(a, 1), rtol=1e-6, atol=1e-6)
    assert torch.log_softmax(torch.from_numpy(a), axis=0).shape == (3, 4)


def test_log_softmax_refuses_what_torch_refuses(ctx):
    with pytest.raises(TensorError, match="log_softmax of .*: torch.int64 is not a floating"):
        torch.tensor([1, 2]).log_softmax(0)
    with pytest.raises(TensorError, match=r"log_softmax: give dim \(log_softmax\(x, dim=-1\)\)"):
        torch.ones(3).log_softmax()  # torch's method needs dim; F picks one (see below)
    with pytest.raises(TensorError, match="dim 2 is out of range for a 2-d tensor"):
        torch.log_softmax(torch.ones(2, 3), 2)
    with pytest.raises(TensorError, match="torch.nn.functional.log_softmax: expected a Tensor"):
        F.log_softmax([1.0, 2.0], 0)


def test_log_softmax_costs_time_in_timing_only_mode():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        x = torch.ones(64, 100)
        before = context.now
        assert x.log_softmax(-1).shape == (64, 100)
        assert context.now > before


# ----------------------------------------------------------------------- nll_loss, cross_entropy


def _class_reference(logp, target, weight=None, ignore_index=-100, reduction="mean", smooth=0.0):
    """torch's nll_loss/cross_entropy of float64 log-probabilities ``logp`` against class
    indices (as torch's ATen code computes them)."""
    class_dim = 0 if logp.ndim == 1 else 1
    lp = np.moveaxis(logp.astype(np.float64), class_dim, -1)
    classes = lp.shape[-1]
    w = np.ones(classes) if weight is None else weight.astype(np.float64)
    tgt = np.asarray(target).astype(np.int64)
    valid = tgt != ignore_index
    safe = np.where(valid, tgt, 0)
    taken = np.take_along_axis(lp, safe[..., None], -1)[..., 0]
    weights = w[safe] * valid
    loss = (1 - smooth) * -taken * weights + smooth / classes * -(lp * w).sum(-1) * valid
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / weights.sum()


def _probability_reference(logp, target, weight=None, reduction="mean", smooth=0.0):
    class_dim = 0 if logp.ndim == 1 else 1
    lp = np.moveaxis(logp.astype(np.float64), class_dim, -1)
    p = np.moveaxis(target.astype(np.float64), class_dim, -1)
    classes = lp.shape[-1]
    p = p * (1 - smooth) + smooth / classes
    w = np.ones(classes) if weight is None else weight.astype(np.float64)
    loss = -(lp * p * w).sum(-1)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / loss.size


def _targets(shape, classes, seed=0, ignored=0):
    t = np.random.default_rng(seed).integers(0, classes, shape).astype(np.int32)
    t.reshape(-1)[:ignored] = -100
    return t


def _close(got, want):
    np.testing.assert_allclose(got.numpy(), want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize(
    ("shape", "target_shape"), [((5,), ()), ((6, 5), (6,)), ((3, 4, 2, 3), (3, 2, 3))]
)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torchs_formula(ctx, shape, target_shape, reduction):
    a = _normal(shape, seed=3)
    classes = shape[0 if len(shape) == 1 else 1]
    t = _targets(target_shape, classes, seed=4, ignored=1 if target_shape else 0)
    logp = _log_softmax(a, 0 if len(shape) == 1 else 1)
    got = F.cross_entropy(torch.from_numpy(a), torch.from_numpy(t), reduction=reduction)
    want = _class_reference(logp, t, reduction=reduction)
    assert got.shape == np.shape(want) and got.dtype is torch.float32
    _close(got, want)
    got = F.nll_loss(torch.from_numpy(logp.astype(np.float32)), torch.from_numpy(t), None, None)
    _close(got, _class_reference(logp, t))


def test_class_losses_take_weights_ignore_index_and_label_smoothing(ctx):
    a = _normal((8, 5), seed=5)
    logp = _log_softmax(a, 1)
    t = _targets((8,), 5, seed=6, ignored=2)
    w = np.array([0.5, 2.0, 1.0, 0.25, 3.0], np.float32)
    x, target, weight = torch.from_numpy(a), torch.from_numpy(t), torch.from_numpy(w)
    for reduction in ("mean", "sum", "none"):
        for smooth in (0.0, 0.2, 1.0):
            got = F.cross_entropy(x, target, weight, reduction=reduction, label_smoothing=smooth)
            _close(got, _class_reference(logp, t, w, reduction=reduction, smooth=smooth))
        got = F.nll_loss(torch.from_numpy(logp.astype(np.float32)), target, weight=weight)
        _close(got, _class_reference(logp, t, w))
    # an ignore_index that is a class: its targets count for nothing, in the mean too
    t2 = np.array([1, 0, 2, 1, 1, 4, 3, 1], np.int32)
    for smooth in (0.0, 0.3):
        got = F.cross_entropy(
            x, torch.from_numpy(t2), weight, ignore_index=1, label_smoothing=smooth
        )
        _close(got, _class_reference(logp, t2, w, ignore_index=1, smooth=smooth))
    none = F.cross_entropy(x, torch.from_numpy(t2), ignore_index=1, reduction="none").numpy()
    assert (none[t2 == 1] == 0).all() and not np.signbit(none[t2 == 1]).any()  # 0.0, as torch


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8", "uint8"])
def test_class_targets_of_any_integer_dtype(ctx, dtype):
    a = _normal((6, 4), seed=7)
    t = np.array([3, 0, 1, 2, 2, 0])
    got = F.cross_entropy(torch.from_numpy(a), torch.from_numpy(t.astype(dtype)))
    _close(got, _class_reference(_log_softmax(a, 1), t))


def test_legacy_size_average_and_reduce_as_torch(ctx):
    a = _normal((4, 3), seed=8)
    t = np.array([2, 0, 1, 1], np.int32)
    x, target = torch.from_numpy(a), torch.from_numpy(t)
    logp = _log_softmax(a, 1)
    _close(
        F.cross_entropy(x, target, size_average=False), _class_reference(logp, t, None, -100, "sum")
    )
    _close(F.nll_loss(x, target, reduce=False), _class_reference(a, t, reduction="none"))
    with pytest.raises(TensorError, match="cross_entropy: reduction 'avg' is not one of"):
        F.cross_entropy(x, target, reduction="avg")


def test_cross_entropy_against_class_probabilities(ctx):
    a = _normal((5, 4, 3), seed=9)
    p = np.random.default_rng(10).random((5, 4, 3)).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    w = np.array([1.0, 0.5, 2.0, 1.5], np.float32)
    x, target = torch.from_numpy(a), torch.from_numpy(p)
    logp = _log_softmax(a, 1)
    for reduction in ("mean", "sum", "none"):
        for weight in (None, w):
            for smooth in (0.0, 0.1):
                got = F.cross_entropy(
                    x,
                    target,
                    None if weight is None else torch.from_numpy(weight),
                    reduction=reduction,
                    label_smoothing=smooth,
                )
                want = _probability_reference(logp, p, weight, reduction, smooth)
                assert got.shape == np.shape(want)
                _close(got, want)
    one = F.cross_entropy(torch.from_numpy(a[0, :, 0]), torch.from_numpy(p[0, :, 0]))
    _close(one, _probability_reference(logp[0, :, 0], p[0, :, 0]))


def test_mean_of_only_ignored_targets_is_nan_as_torch(ctx):
    x = torch.from_numpy(_normal((3, 4)))
    target = torch.tensor([-100, -100, -100])
    assert np.isnan(F.cross_entropy(x, target).item())
    assert F.cross_entropy(x, target, reduction="sum").item() == 0.0


def test_class_loss_targets_out_of_range_are_refused(ctx):
    x = torch.from_numpy(_normal((3, 4)))
    with pytest.raises(TensorError, match=r"cross_entropy: Target 4 is out of bounds \(the class"):
        F.cross_entropy(x, torch.tensor([0, 4, 1]))
    with pytest.raises(
        TensorError, match="nll_loss: Target -1 is out of bounds .*ignore_index is -100"
    ):
        F.nll_loss(x, torch.tensor([0, -1, 1]))
    with pytest.raises(TensorError, match="Target -100 is out of bounds .*ignore_index is 2"):
        F.nll_loss(x, torch.tensor([0, -100, 1]), ignore_index=2)
    with pytest.raises(TensorError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, torch.arange(3) * 2)  # made on the device: [0, 2, 4]


def test_class_losses_refuse_what_torch_refuses(ctx):
    x = torch.from_numpy(_normal((3, 4)))
    with pytest.raises(
        TensorError,
        match="cross_entropy: expected a target of class indices in an integer dtype, but found "
        "torch.float32 .*int64, or another integer dtype here",
    ):
        F.cross_entropy(x, torch.zeros(3))
    with pytest.raises(
        TensorError, match="nll_loss: expected a target of class indices .* found torch.bool"
    ):
        F.nll_loss(x, torch.zeros(3, dtype=torch.bool))
    with pytest.raises(TensorError, match="nll_loss: .*found torch.float32"):
        F.nll_loss(x, torch.zeros(3, 4))  # probabilities are cross_entropy's only
    with pytest.raises(
        TensorError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"
    ):
        F.cross_entropy(x, torch.tensor([0, 1]))
    with pytest.raises(TensorError, match=r"Expected target size \[2, 5\], got \[2, 4\]"):
        F.cross_entropy(torch.ones(2, 3, 5), torch.zeros(2, 4, dtype=torch.int32))
    with pytest.raises(
        TensorError, match=r"for all 4 classes or no classes but got weight tensor of shape: \[3\]"
    ):
        F.cross_entropy(x, torch.tensor([0, 1, 2]), weight=torch.ones(3))
    with pytest.raises(TensorError, match="weight is torch.float16 and input torch.float32"):
        F.nll_loss(x, torch.tensor([0, 1, 2]), weight=torch.ones(4, dtype=torch.float16))
    with pytest.raises(TensorError, match="label_smoothing must be between 0.0 and 1.0. Got: 1.5"):
        F.cross_entropy(x, torch.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(
        TensorError,
        match="Expected floating point type for target with class probabilities, got torch.int32",
    ):
        F.cross_entropy(x, torch.zeros(3, 4, dtype=torch.int32))
    with pytest.raises(
        TensorError, match="ignore_index is not supported for floating point target"
    ):
        F.cross_entropy(x, torch.zeros(3, 4), ignore_index=0)
    with pytest.raises(
        TensorError, match="cross_entropy: input must be a floating tensor, got torch.int64"
    ):
        F.cross_entropy(torch.tensor([[1, 2]]), torch.tensor([0]))
    with pytest.raises(TensorError, match=r"Expected 1 or more dimensions \(got 0\)"):
        F.nll_loss(torch.tensor(1.0), torch.tensor(0))
    with pytest.raises(
        TensorError, match="torch.nn.functional.nll_loss: expected a Tensor, got list"
    ):
        F.nll_loss(x, [0, 1, 2])


def test_class_losses_are_a_gather_kernel_and_a_reduction(ctx):
    x = torch.from_numpy(_normal((16, 10)))
    target = torch.from_numpy(_targets((16,), 10))
    logp = x.log_softmax(1)
    gather = ["_class_loss_kernel"]
    for call, kernels in (
        (lambda: F.cross_entropy(x, target), ["_softmax_kernel", *gather, *MEAN]),
        (lambda: F.cross_entropy(x, target, reduction="sum"), ["_softmax_kernel", *gather, SUM]),
        (lambda: F.cross_entropy(x, target, reduction="none"), ["_softmax_kernel", *gather]),
        (lambda: F.nll_loss(logp, target, torch.ones(10)), [*gather, *MEAN]),
        (
            lambda: F.cross_entropy(x, target, label_smoothing=0.1),
            ["_softmax_kernel", *gather, *MEAN],
        ),
        (lambda: F.cross_entropy(x, x.softmax(1), reduction="none"), ["_softmax_kernel", *gather]),
    ):
        before = len(ctx.trace)
        call()
        ran = _kernels(ctx, before)
        assert ran[-len(kernels) :] == kernels  # (after any kernels making the arguments)


SUM = "_sum_kernel"
MEAN = [SUM, "elementwise_kernel"]  # the losses and weights summed in one launch, divided


def test_cross_entropy_costs_a_log_softmax_and_a_gather():
    # torch's structure: log_softmax reads and writes the logits once, nll_loss gathers one
    # log-probability a sample and reduces; nothing of (N, C) is made for the mask or the
    # weights.  Smoothing and probability targets add one read of the log-probabilities.
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        x = torch.ones(2048, 1000)
        target = torch.zeros(2048, dtype=torch.int32)
        weight, probabilities = torch.ones(1000), torch.ones(2048, 1000)

        def cost(call) -> int:
            before = context.now
            call()
            return context.now - before

        before = context.now
        logp = x.log_softmax(1)
        log_softmax = context.now - before
        # one elementwise pass over (N, C), a read and a write: what log_softmax costs too
        one_pass = cost(lambda: x * 2)
        assert log_softmax <= 1.1 * one_pass
        assert cost(lambda: F.cross_entropy(x, target)) <= log_softmax + 0.4 * one_pass
        assert cost(lambda: F.cross_entropy(x, target, weight, reduction="none")) <= (
            log_softmax + 0.4 * one_pass
        )
        assert cost(lambda: F.nll_loss(logp, target, reduction="sum")) <= 0.2 * one_pass
        assert cost(lambda: F.cross_entropy(x, target, label_smoothing=0.1)) <= (
            log_softmax + 1.5 * one_pass
        )
        assert cost(lambda: F.cross_entropy(x, probabilities, weight)) <= (
            log_softmax + 1.5 * one_pass
        )


def test_class_losses_of_spatial_inputs_views_and_narrow_targets(ctx):
    a = _normal((3, 4, 5), seed=11)
    logp = _log_softmax(a, 1)
    t = _targets((3, 5), 4, seed=12, ignored=2)
    w = np.array([0.5, 2.0, 1.0, 3.0], np.float32)
    x, target, weight = torch.from_numpy(a), torch.from_numpy(t), torch.from_numpy(w)
    for reduction in ("mean", "sum", "none"):
        for smooth in (0.0, 0.25):
            got = F.cross_entropy(x, target, weight, reduction=reduction, label_smoothing=smooth)
            _close(got, _class_reference(logp, t, w, reduction=reduction, smooth=smooth))
    # views: a transposed input and a strided target are read through copies
    lp = np.ascontiguousarray(_log_softmax(a[:, :, 0], 1).astype(np.float32).T)
    wide = np.array([2, 9, 0, 9, 3, 9], np.int32)
    got = F.nll_loss(torch.from_numpy(lp).T, torch.from_numpy(wide)[::2], reduction="none")
    _close(got, _class_reference(lp.T, wide[::2], reduction="none"))
    # narrow targets: an ignore_index each dtype holds
    for dtype, ignore in (("int8", -100), ("uint8", 255), ("int16", 3)):
        narrow = np.array([1, ignore, 0], dtype)
        got = F.cross_entropy(x[:, :, 0], torch.from_numpy(narrow), ignore_index=ignore)
        want = _class_reference(logp[:, :, 0], narrow.astype(np.int64), ignore_index=ignore)
        _close(got, want)


def test_class_losses_of_half_inputs_round_once(ctx):
    a = _normal((6, 5), seed=13).astype(np.float16)
    t = _targets((6,), 5, seed=14, ignored=1)
    got = F.cross_entropy(torch.from_numpy(a), torch.from_numpy(t), reduction="none")
    assert got.dtype is torch.float16
    logp = _log_softmax(a, 1).astype(np.float16)  # log_softmax rounds to float16
    np.testing.assert_allclose(
        got.float().numpy(), _class_reference(logp, t, reduction="none"), rtol=1e-3
    )


def test_class_losses_cost_time_in_timing_only_mode():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        x = torch.ones(32, 10)
        target = torch.zeros(32, dtype=torch.int32)
        for loss in (
            lambda: F.cross_entropy(x, target, weight=torch.ones(10), label_smoothing=0.1),
            lambda: F.nll_loss(x, target, reduction="none"),
            lambda: F.cross_entropy(x, torch.ones(32, 10)),
        ):
            before = context.now
            loss()
            assert context.now > before


# ----------------------------------------------------------------------------- dropout


def test_dropout_keeps_about_one_minus_p_scaled_as_torch(ctx):
    a = _normal((200, 500), seed=11)
    x = torch.from_numpy(a)
    p = 0.3
    got = F.dropout(x, p).numpy()
    kept = got != 0
    assert abs(kept.mean() - (1 - p)) < 0.01  # 100,000 draws: 5 standard deviations
    scale = np.float32(1.0) / np.float32(1.0 - p)  # torch's float32 scale
    np.testing.assert_array_equal(got[kept], a[kept] * scale)
    np.testing.assert_allclose(got[kept], a[kept].astype(np.float64) / (1 - p), rtol=1e-6)
    assert got.shape == a.shape and F.dropout(x, p).dtype is torch.float32


def test_dropout_repeats_under_manual_seed(ctx):
    x = torch.ones(64, 64)
    torch.manual_seed(5)
    first, second = F.dropout(x).numpy(), F.dropout(x).numpy()
    torch.manual_seed(5)
    again = F.dropout(x).numpy()
    torch.manual_seed(6)
    other = F.dropout(x).numpy()
    np.testing.assert_array_equal(first, again)
    assert (first != second).any() and (first != other).any()
    assert set(np.unique(first).tolist()) == {0.0, 2.0}
    torch.manual_seed(5)
    fresh = torch.rand(4).tolist()
    torch.manual_seed(5)
    F.dropout(x)
    assert torch.rand(4).tolist() != fresh  # one stream: the mask drew from torch.rand's


def test_dropout_mask_has_the_inputs_shape_and_views_work(ctx):
    a = _normal((6, 40), seed=12)
    view = torch.from_numpy(a).T  # not one run of memory
    got = F.dropout(view, 0.5).numpy()
    assert got.shape == (40, 6)
    assert np.all((got == 0) | (got == a.T * np.float32(2.0)))
    t = torch.from_numpy(a)
    assert F.dropout(t, 0.25, inplace=True) is t
    written = t.numpy()
    assert np.all((written == 0) | (written == a * (np.float32(1.0) / np.float32(0.75))))
    assert (written == 0).any() and (written != 0).any()


def test_dropout_not_training_or_p_zero_is_the_input_and_p_one_zeros(ctx):
    x = torch.from_numpy(_normal((3, 4)))
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert F.dropout(x, 1.0, training=False, inplace=True) is x
    assert F.dropout(x, 1.0).tolist() == [[0.0] * 4] * 3
    assert np.isnan(F.dropout(torch.tensor([float("nan"), 1.0]), 1.0).numpy()[0])  # as torch
    y = torch.ones(5)
    assert F.dropout(y, 1.0, inplace=True) is y and y.tolist() == [0.0] * 5
    assert F.dropout(torch.tensor([1, 2]), 1.0).tolist() == [0, 0]


def test_dropout_refuses_what_torch_refuses(ctx):
    x = torch.ones(3)
    for p in (1.5, -0.1):
        with pytest.raises(
            TensorError,
            match=f"dropout: dropout probability has to be between 0 and 1, but got {p}",
        ):
            F.dropout(x, p)
    with pytest.raises(
        TensorError, match="dropout: input must be a floating tensor, got torch.int64"
    ):
        F.dropout(torch.tensor([1, 2]), 0.5)
    with pytest.raises(TensorError, match="torch.nn.functional.dropout: expected a Tensor"):
        F.dropout([1.0], 0.5)


def test_dropout_costs_time_in_timing_only_mode():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        x = torch.ones(1000)
        before = context.now
        assert F.dropout(x, 0.5).shape == (1000,)
        assert context.now > before


# ----------------------------------------------------------------------------- one_hot


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_one_hot_marks_each_index_in_int64(ctx, dtype):
    a = np.array([[0, 3], [2, 1], [3, 3]]).astype(dtype)
    got = F.one_hot(torch.from_numpy(a))
    assert got.dtype is torch.int64 and got.shape == (3, 2, 4)
    np.testing.assert_array_equal(got.numpy(), np.eye(4, dtype=np.int64)[a])
    wide = F.one_hot(torch.from_numpy(a), num_classes=6)
    np.testing.assert_array_equal(wide.numpy(), np.eye(6, dtype=np.int64)[a])
    np.testing.assert_array_equal(F.one_hot(torch.tensor(2), 3).numpy(), [0, 0, 1])


def test_one_hot_reads_the_largest_index_only_when_it_must(ctx):
    t = torch.arange(5)
    before = ctx.now
    F.one_hot(t, 5)
    given = ctx.now - before
    before = ctx.now
    F.one_hot(t)
    assert ctx.now - before > given  # the max and its read to the host cost time
    assert F.one_hot(torch.tensor([], dtype=torch.int32), 3).shape == (0, 3)


def test_one_hot_refuses_what_torch_refuses(ctx):
    with pytest.raises(TensorError, match="one_hot: Class values must be non-negative"):
        F.one_hot(torch.tensor([0, -1]))
    with pytest.raises(TensorError, match=r"smaller than num_classes \(got 3 for num_classes=3"):
        F.one_hot(torch.tensor([0, 3]), 3)
    with pytest.raises(TensorError, match="Can not infer total number of classes from empty"):
        F.one_hot(torch.tensor([], dtype=torch.int32))
    with pytest.raises(TensorError, match="only applicable to index tensor of an integer dtype"):
        F.one_hot(torch.tensor([0.0, 1.0]))
    with pytest.raises(TensorError, match="one_hot: num_classes must be an int, got 2.0"):
        F.one_hot(torch.tensor([0, 1]), 2.0)


def test_one_hot_in_timing_only_mode_needs_num_classes():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        t = torch.zeros(100, dtype=torch.int32)
        before = context.now
        assert F.one_hot(t, 10).shape == (100, 10)
        assert context.now > before
        with pytest.raises(TensorError, match="num_classes=-1 reads the largest index"):
            F.one_hot(t)
