"""What attention, pipeline and optimizer code reaches for, against NumPy.

``triu``/``tril`` (causal masks), ``scaled_dot_product_attention``,
``finfo``/``iinfo``, and the errors that name what to use where KernBench has
no equivalent (autograd, ``torch.optim``).
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError, TensorTypeError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


# ----------------------------------------------------------------------------- triu / tril


@pytest.mark.parametrize("shape", [(5, 7), (7, 5), (2, 3, 4, 4)])
@pytest.mark.parametrize("diagonal", [0, 1, -2, 9, -9])
def test_triu_tril_match_numpy(ctx, shape, diagonal):
    a = _values(shape)
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(t.triu(diagonal).numpy(), np.triu(a, diagonal))
    np.testing.assert_array_equal(t.tril(diagonal).numpy(), np.tril(a, diagonal))
    np.testing.assert_array_equal(torch.triu(t, diagonal=diagonal).numpy(), np.triu(a, diagonal))
    np.testing.assert_array_equal(torch.tril(t, diagonal).numpy(), np.tril(a, diagonal))
    np.testing.assert_array_equal(t.numpy(), a)  # the out-of-place forms leave t alone


def test_triu_tril_in_place_and_out(ctx):
    a = _values((4, 6))
    t = torch.from_numpy(a)
    assert t.triu_(1) is t
    np.testing.assert_array_equal(t.numpy(), np.triu(a, 1))
    u = torch.from_numpy(a)
    u.tril_()
    np.testing.assert_array_equal(u.numpy(), np.tril(a))
    out = torch.empty(4, 6)
    assert torch.tril(torch.from_numpy(a), -1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), np.tril(a, -1))
    # on a view: only the view's triangle is written
    w = torch.from_numpy(a)
    w[:, 2:].triu_()
    expected = a.copy()
    expected[:, 2:] = np.triu(a[:, 2:])
    np.testing.assert_array_equal(w.numpy(), expected)


def test_causal_masks_of_bool_and_int_tensors(ctx):
    mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    assert mask.dtype is torch.bool
    np.testing.assert_array_equal(mask.numpy(), np.triu(np.ones((4, 4), bool), 1))
    lower = torch.ones(3, 5, dtype=torch.int32).tril()
    assert lower.dtype is torch.int32
    np.testing.assert_array_equal(lower.numpy(), np.tril(np.ones((3, 5), np.int32)))
    scores = torch.from_numpy(_values((4, 4)))
    filled = scores.masked_fill(mask, float("-inf")).numpy()
    assert np.isneginf(filled[np.triu_indices(4, 1)]).all()


def test_triu_errors_name_the_call(ctx):
    with pytest.raises(TensorError, match="triu: input tensor must have at least 2 dimensions"):
        torch.ones(3).triu()
    with pytest.raises(TensorError, match="tril_: input tensor must have at least 2 dimensions"):
        torch.ones(3).tril_()
    with pytest.raises(TensorTypeError, match="argument 'diagonal' must be int, not float"):
        torch.triu(torch.ones(2, 2), 0.5)
