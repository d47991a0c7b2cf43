"""``F.bilinear``/``nn.Bilinear`` and ``F.embedding_bag``/``nn.EmbeddingBag``: values
against NumPy written out here (every mode, offsets, ``include_last_offset``,
``padding_idx``, ``per_sample_weights``, empty bags), gradients against NumPy (central
differences, or the analytic scatter of each bag's gradient), torch's parameters and
errors, and timing-only runs."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture(scope="module", autouse=True)
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _long(values):
    return torch.tensor(np.asarray(values, dtype=np.int64))


# -------------------------------------------------------------------------------- bilinear
def _np_bilinear(x1, x2, w, b=None):
    out = np.einsum("...i,oij,...j->...o", x1, w, x2)
    return out if b is None else out + b


@pytest.mark.parametrize(("batch", "in1", "in2", "out"), [((4,), 3, 2, 5), ((2, 3), 2, 4, 1)])
def test_bilinear_values_and_gradients(batch, in1, in2, out):
    check(F.bilinear, _np_bilinear, (*batch, in1), (*batch, in2), (out, in1, in2), (out,))
    check(
        lambda a, b, w: F.bilinear(a, b, w),
        _np_bilinear,
        (*batch, in1),
        (*batch, in2),
        (out, in1, in2),
    )


def test_bilinear_module_parameters_init_and_repr():
    torch.manual_seed(0)
    m = nn.Bilinear(4, 3, 2)
    assert list(m.state_dict()) == ["weight", "bias"]
    assert tuple(m.weight.shape) == (2, 4, 3) and tuple(m.bias.shape) == (2,)
    assert (
        np.abs(m.weight.detach().numpy()).max() <= 0.5
        and np.abs(m.bias.detach().numpy()).max() <= 0.5
    )
    assert repr(m) == "Bilinear(in1_features=4, in2_features=3, out_features=2, bias=True)"
    assert nn.Bilinear(1, 2, 3, bias=False).bias is None
    x1 = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    x2 = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    want = _np_bilinear(x1, x2, m.weight.detach().numpy(), m.bias.detach().numpy())
    got = m(torch.from_numpy(x1), torch.from_numpy(x2))
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-6)


def test_bilinear_refuses_what_torch_refuses():
    w = torch.ones(2, 3, 4)
    with pytest.raises(TensorError, match="input dimensions do not match: got 2 and 1"):
        F.bilinear(torch.ones(5, 3), torch.ones(4), w)
    with pytest.raises(TensorError, match="input batch dimensions do not match: got 5 and 6"):
        F.bilinear(torch.ones(5, 3), torch.ones(6, 4), w)
    with pytest.raises(TensorError, match="input1 size does not match weight size: got 2 but"):
        F.bilinear(torch.ones(5, 2), torch.ones(5, 4), w)
    with pytest.raises(TensorError, match="input2 size does not match weight size: got 3 but"):
        F.bilinear(torch.ones(5, 3), torch.ones(5, 3), w)
    with pytest.raises(TensorError, match="bias size does not match weight size"):
        F.bilinear(torch.ones(5, 3), torch.ones(5, 4), w, torch.ones(3))


# --------------------------------------------------------------------------- embedding bag
def _np_embedding_bag(table, idx, bounds, mode, weights=None, padding_idx=None):
    out = np.zeros((len(bounds) - 1, table.shape[1]))
    for b in range(len(bounds) - 1):
        members = [k for k in range(bounds[b], bounds[b + 1]) if idx[k] != padding_idx]
        if not members:
            continue
        rows = table[idx[members]]
        if weights is not None:
            rows = rows * weights[members][:, None]
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


INDICES = np.array([1, 2, 4, 5, 4, 3, 2, 0, 5])
OFFSETS = np.array([0, 2, 2, 5])
BOUNDS = np.array([0, 2, 2, 5, 9])  # with the last bag running to the end


@pytest.mark.parametrize("padding_idx", [None, 2, -4])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_values_and_gradients_with_offsets(mode, padding_idx):
    pad = None if padding_idx is None else padding_idx % 6
    check(
        lambda w: F.embedding_bag(
            _long(INDICES), w, _long(OFFSETS), mode=mode, padding_idx=padding_idx
        ),
        lambda w: _np_embedding_bag(w, INDICES, BOUNDS, mode, padding_idx=pad),
        (6, 3),
    )


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_of_a_2d_input_is_one_bag_a_row(mode):
    idx = np.array([[0, 3, 3], [2, 1, 4]])
    check(
        lambda w: F.embedding_bag(_long(idx), w, mode=mode),
        lambda w: _np_embedding_bag(w, idx.reshape(-1), [0, 3, 6], mode),
        (5, 2),
    )


def test_embedding_bag_include_last_offset_and_per_sample_weights():
    weights = np.random.default_rng(3).uniform(0.5, 2.0, INDICES.size)
    bounds = np.array([0, 2, 2, 5, 7])
    check(
        lambda w, psw: F.embedding_bag(
            _long(INDICES), w, _long(bounds), mode="sum", per_sample_weights=psw,
            include_last_offset=True,
        ),
        lambda w, psw: _np_embedding_bag(w, INDICES, bounds, "sum", psw),
        (6, 4),
        (INDICES.size,),
    )  # fmt: skip
    table = np.random.default_rng(4).standard_normal((6, 4))
    got = F.embedding_bag(
        _long(INDICES), torch.tensor(table), _long(OFFSETS), mode="sum",
        per_sample_weights=torch.tensor(weights), padding_idx=4,
    )  # fmt: skip
    want = _np_embedding_bag(table, INDICES, BOUNDS, "sum", weights, padding_idx=4)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq_divides_each_rows_gradient_by_its_count(mode):
    table = np.random.default_rng(6).standard_normal((6, 3))
    w = torch.tensor(table, requires_grad=True)
    out = F.embedding_bag(_long(INDICES), w, _long(OFFSETS), mode=mode, scale_grad_by_freq=True)
    np.testing.assert_allclose(
        out.detach().numpy(), _np_embedding_bag(table, INDICES, BOUNDS, mode), rtol=1e-12
    )
    out.sum().backward()
    sizes = np.diff(BOUNDS)
    share = np.repeat(1.0 / np.maximum(sizes, 1) if mode == "mean" else np.ones(4), sizes)
    counts = np.bincount(INDICES, minlength=6)
    want = np.zeros((6, 3))
    np.add.at(want, INDICES, (share / counts[INDICES])[:, None])
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-12)


def test_embedding_bag_module_parameters_repr_and_from_pretrained():
    torch.manual_seed(1)
    m = nn.EmbeddingBag(7, 3, mode="max", padding_idx=-2)
    assert list(m.state_dict()) == ["weight"] and tuple(m.weight.shape) == (7, 3)
    assert m.padding_idx == 5 and m.weight[5].tolist() == [0.0] * 3
    assert repr(m) == "EmbeddingBag(7, 3, mode=max, padding_idx=5)"
    assert repr(nn.EmbeddingBag(4, 2)) == "EmbeddingBag(4, 2, mode=mean)"
    table = np.random.default_rng(5).standard_normal((6, 2))
    bag = nn.EmbeddingBag.from_pretrained(torch.tensor(table), mode="sum")
    assert not bag.weight.requires_grad and bag.mode == "sum"
    got = bag(_long(INDICES), _long(OFFSETS))
    np.testing.assert_allclose(got.numpy(), _np_embedding_bag(table, INDICES, BOUNDS, "sum"))
    learn = nn.EmbeddingBag.from_pretrained(torch.tensor(table), freeze=False)
    learn(_long([[0, 1], [1, 5]])).sum().backward()
    want = np.zeros((6, 2))
    np.add.at(want, [0, 1, 1, 5], 0.5)  # each row's share of its bag's mean
    np.testing.assert_allclose(learn.weight.grad.numpy(), want)


def test_embedding_bag_refuses_what_torch_refuses():
    w, idx = torch.ones(6, 2), _long(INDICES)
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(idx, w)
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(_long([[0, 1]]), w, _long([0]))
    with pytest.raises(ValueError, match="input has to be 1D or 2D Tensor, but got Tensor of"):
        F.embedding_bag(_long([[[0]]]), w)
    with pytest.raises(ValueError, match="weight has to be a 2D Tensor"):
        F.embedding_bag(idx, torch.ones(6), _long(OFFSETS))
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(idx, w, _long(OFFSETS), mode="min")
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(idx, w, _long(OFFSETS), per_sample_weights=torch.ones(9))
    with pytest.raises(ValueError, match="must have the same shape as the input"):
        F.embedding_bag(idx, w, _long(OFFSETS), mode="sum", per_sample_weights=torch.ones(8))
    with pytest.raises(ValueError, match="max mode does not support scaling the gradient"):
        F.embedding_bag(idx, w, _long(OFFSETS), mode="max", scale_grad_by_freq=True)
    with pytest.raises(TensorError, match="offsets.0. has to be 0"):
        F.embedding_bag(idx, w, _long([1, 3]))
    with pytest.raises(TensorError, match="offsets.-1. can not be greater than input's length"):
        F.embedding_bag(idx, w, _long([0, 12]))
    with pytest.raises(TensorError, match="found idx to be 6"):
        F.embedding_bag(_long([0, 6]), w, _long([0]))
    with pytest.raises(TensorError, match="padding_idx must be within num_embeddings"):
        F.embedding_bag(idx, w, _long(OFFSETS), padding_idx=6)
    with pytest.raises(AssertionError, match="padding_idx must be within num_embeddings"):
        nn.EmbeddingBag(3, 2, padding_idx=3)


# ---------------------------------------------------------------------------- timing only
def test_bags_cost_time_in_timing_only_mode():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        bilinear = nn.Bilinear(8, 6, 4)
        x1, x2 = torch.ones(16, 8, requires_grad=True), torch.ones(16, 6)
        before = context.now
        y = bilinear(x1, x2)
        assert y.shape == (16, 4) and context.now > before
        y.sum().backward()
        assert x1.grad.shape == (16, 8) and bilinear.weight.grad.shape == (4, 8, 6)
        idx, offsets = torch.zeros(40, dtype=torch.int64), torch.zeros(8, dtype=torch.int64)
        for mode in ("sum", "mean", "max"):
            bag = nn.EmbeddingBag(100, 16, mode=mode, padding_idx=0)
            before = context.now
            out = bag(idx, offsets)
            assert out.shape == (8, 16) and context.now > before
            out.sum().backward()
            assert bag.weight.grad.shape == (100, 16)
