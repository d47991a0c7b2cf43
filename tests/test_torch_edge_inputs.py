"""Edge-case arguments of the newer torch ops, each answered as torch answers or with a
KernBenchError naming the call (they raised Python's own errors, hung or gave wrong
values)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError, TensorIndexError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def test_tensor_of_big_python_ints(ctx):
    assert torch.tensor([2**64 - 1, 1], dtype=torch.uint64).tolist() == [2**64 - 1, 1]
    assert torch.tensor([2**63 - 1, -(2**63)]).tolist() == [2**63 - 1, -(2**63)]
    for data in ([2**64 - 1, 1], [2**63], [[1], [2**70]]):
        with pytest.raises(
            TensorError, match="Python ints infer torch.int64 .* dtype=torch.uint64"
        ):
            torch.tensor(data)
    mixed = torch.tensor([1.5, 2**70])  # a float among them: the default float dtype
    assert mixed.dtype is torch.float32 and mixed.tolist() == [1.5, float(np.float32(2**70))]
    assert torch.tensor([1.5, 2.5], dtype=torch.int64).tolist() == [1, 2]  # truncated
    for bad in (["a", 1], [object()]):
        with pytest.raises(TensorError, match="tensor: data must be numbers"):
            torch.tensor(bad)


def test_round_with_decimals_past_float64(ctx):
    x = torch.tensor([1.234, -5.5])
    for decimals in (400, -400):  # 10**decimals is inf or 0 in float64: torch gives NaN
        assert all(math.isnan(v) for v in torch.round(x, decimals=decimals).tolist())
    with pytest.raises(TensorError, match="decimals must fit int64"):
        torch.round(x, decimals=10**20)
    np.testing.assert_allclose(torch.round(x, decimals=2).numpy(), [1.23, -5.5], rtol=1e-6)


def test_flip_of_a_scalar_and_nan_to_num_defaults(ctx):
    assert torch.tensor(5).flip(0).tolist() == 5 and torch.tensor(5).flip(-1).tolist() == 5
    got = torch.nan_to_num(torch.tensor([math.nan, math.inf]), nan=None).tolist()
    assert got == [0.0, float(np.finfo(np.float32).max)]
    with pytest.raises(TensorError, match="nan_to_num: posinf must be a number or None"):
        torch.nan_to_num(torch.ones(1), posinf=np.array([1]))


def test_triangle_indices_and_bincount_sizes(ctx):
    with pytest.raises(TensorError, match="tril_indices: a 100000000000000000000 x 3 matrix"):
        torch.tril_indices(10**20, 3)
    full = np.stack(np.tril_indices(3, 3, 3))
    np.testing.assert_array_equal(torch.tril_indices(3, 3, 10**30).numpy(), full)
    assert torch.triu_indices(3, 3, -(10**30)).shape == (2, 9)
    assert torch.triu_indices(3, 3, 10**30).shape == (2, 0)
    with pytest.raises(TensorError, match="bincount: 1099511627777 bins .* would not fit"):
        torch.bincount(torch.tensor([2**40]))
    with pytest.raises(TensorError, match="bincount: 100000000000000000000 bins"):
        torch.bincount(torch.tensor([1]), minlength=10**20)


def test_unique_keeps_each_nan_and_index_select_of_a_scalar(ctx):
    got = torch.unique(torch.tensor([1.0, math.nan, math.nan])).tolist()
    assert got[0] == 1.0 and len(got) == 3 and all(math.isnan(v) for v in got[1:])
    picked = torch.tensor(3.0).index_select(0, torch.tensor([0]))
    assert picked.shape == () and picked.item() == 3.0
    with pytest.raises(TensorError, match="Index to scalar can have only 1 value"):
        torch.tensor(3.0).index_select(0, torch.tensor([0, 0]))


def test_topk_k_and_messages(ctx):
    assert torch.ones(3).topk(torch.tensor(2)).values.tolist() == [1.0, 1.0]
    for k in (2.0, "2", None):
        with pytest.raises(TensorError, match="topk: k must be an int"):
            torch.ones(3).topk(k)
    with pytest.raises(TensorError, match=r"t.flip\(dim\) reverses a dim"):
        torch.ones(3)[::-1]
    with pytest.raises(TensorError, match="reduce argument must be either add or multiply"):
        torch.zeros(3).scatter_(0, torch.tensor([0]), 1.0, reduce="max")


def test_multinomial_runs_in_timing_only_mode():
    with use_context(RuntimeContext("tiny", timing_only=True)):
        probs = torch.ones(4, 10)
        drawn = torch.multinomial(probs, 3)
        assert drawn.shape == (4, 3) and drawn.dtype is torch.int64


def test_clamp_takes_tensor_bounds(ctx):
    a = np.array([[-2.0, 0.5, 3.0], [1.0, -1.0, 9.0]], np.float32)
    lo, hi = np.array([-1.0, 0.0, 1.0], np.float32), np.array([[0.0], [2.0]], np.float32)
    x = torch.from_numpy(a)
    got = x.clamp(min=torch.from_numpy(lo), max=torch.from_numpy(hi))
    np.testing.assert_array_equal(got.numpy(), np.minimum(np.maximum(a, lo), hi))
    np.testing.assert_array_equal(
        torch.clamp(x, torch.from_numpy(lo), 2.0).numpy(), np.minimum(np.maximum(a, lo), 2.0)
    )
    y = x.clone()
    assert y.clamp_(min=torch.from_numpy(lo)) is y
    np.testing.assert_array_equal(y.numpy(), np.maximum(a, lo))


def test_a_bool_mask_inside_a_key_must_match_the_dims_it_covers(ctx):
    t = torch.ones(2, 3)
    with pytest.raises(
        TensorIndexError, match=r"mask \[2\] at index 0 does not match .* at index 1"
    ):
        t[:, torch.tensor([True, False])]
    assert t[:, [True, False, True]].shape == (2, 2)
    with pytest.warns(UserWarning, match="torch.uint8 is now deprecated") as caught:
        assert t[:, torch.tensor([1, 0, 1], dtype=torch.uint8)].shape == (2, 2)
    assert caught[0].filename == __file__  # shown at the script's line
