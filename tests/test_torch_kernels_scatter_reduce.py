"""``scatter_reduce``/``scatter_reduce_`` and ``scatter_(reduce="multiply")`` against a
NumPy loop in index order (torch's CPU order), torch's NaN rules and identities, errors,
and their cost in both modes and on both backends."""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode, simulated_ps

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _reference(out, dim, index, src, reduce, include_self):
    """torch's scatter_reduce_two, one source element at a time in index order."""
    out = out.copy()
    places = [tuple(p[:dim]) + (index[p],) + tuple(p[dim + 1 :]) for p in np.ndindex(index.shape)]
    count = np.ones(out.shape, np.int64) if include_self else np.zeros(out.shape, np.int64)
    if not include_self:
        floats = out.dtype.kind == "f"
        info = None if floats else np.iinfo(out.dtype)
        lowest, highest = (-np.inf, np.inf) if floats else (info.min, info.max)
        start = {"sum": 0, "mean": 0, "prod": 1, "amax": lowest, "amin": highest}[reduce]
        for place in places:
            out[place] = start
    for p, place in zip(np.ndindex(index.shape), places, strict=True):
        v, current = src[p], out[place]
        if reduce in ("sum", "mean"):
            out[place] = current + v
        elif reduce == "prod":
            out[place] = current * v
        elif reduce == "amax":
            out[place] = v if v != v else (v if current < v else current)
        else:
            out[place] = v if v != v else (v if v < current else current)
        count[place] += 1
    if reduce == "mean":
        count[count == 0] = 1
        out = out / count if out.dtype.kind == "f" else out // count
    return out.astype(src.dtype)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_scatter_reduce_matches_torchs_loop_along_every_dim(ctx, reduce, dtype):
    rng = np.random.default_rng(0)
    self_values = rng.integers(-4, 5, (5, 6, 4)).astype(dtype)
    src = rng.integers(-3, 4, (6, 7, 4)).astype(dtype)
    for dim in range(3):
        shape = [3, 5, 2]
        index = rng.integers(0, self_values.shape[dim], shape)  # many repeats
        for include_self in (True, False):
            expected = _reference(self_values, dim, index, src, reduce, include_self)
            t = torch.from_numpy(self_values)
            got = t.scatter_reduce(
                dim,
                torch.from_numpy(index),
                torch.from_numpy(src),
                reduce,
                include_self=include_self,
            )
            assert got.dtype == t.dtype
            if dtype.startswith("float") and reduce == "mean":
                np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
            else:
                np.testing.assert_array_equal(got.numpy(), expected)
            np.testing.assert_array_equal(t.numpy(), self_values)  # out of place


def test_scatter_reduce_in_place_nans_views_and_the_function(ctx):
    src = torch.tensor([1.0, float("nan"), 3.0, 4.0, 5.0, 6.0])
    index = torch.tensor([0, 1, 0, 1, 2, 3])
    t = torch.tensor([2.0, 2.0, float("nan"), 7.0])
    assert t.scatter_reduce_(0, index, src, "amax") is t
    got = t.numpy()
    assert got[0] == 3.0 and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == 7.0
    low = torch.tensor([2.0, 2.0, 9.0, 9.0]).scatter_reduce(0, index, src, "amin")
    assert low.tolist()[0] == 1.0 and np.isnan(low.tolist()[1]) and low.tolist()[2:] == [5.0, 6.0]
    wide = torch.zeros(3, 8)
    column = wide[:, 2]  # a view that is not one run of memory, written back in place
    column.scatter_reduce_(0, torch.tensor([0, 0, 2]), torch.tensor([2.0, 3.0, 4.0]), "sum")
    assert wide[:, 2].tolist() == [5.0, 0.0, 4.0]
    out = torch.empty(4)
    result = torch.scatter_reduce(torch.ones(4), 0, index, src, "prod", out=out)
    assert result is out and out.tolist()[2:] == [5.0, 6.0]
    ints = torch.tensor([7, 7, 7], dtype=torch.int32)  # an integer mean floors, as torch
    mean = ints.scatter_reduce(
        0, torch.tensor([0, 0]), torch.tensor([0, 1], dtype=torch.int32), "mean"
    )
    assert mean.tolist() == [2, 7, 7]


def test_scatter_multiply_with_a_tensor_or_a_number(ctx):
    rng = np.random.default_rng(1)
    base = rng.integers(1, 5, (4, 6)).astype(np.float32)
    index = rng.integers(0, 4, (3, 6))
    src = rng.integers(-3, 4, (3, 6)).astype(np.float32)
    t = torch.from_numpy(base)
    got = t.scatter(0, torch.from_numpy(index), torch.from_numpy(src), reduce="multiply")
    np.testing.assert_array_equal(got.numpy(), _reference(base, 0, index, src, "prod", True))
    twice = torch.full((2, 4), 2.0).scatter_(
        1, torch.tensor([[2, 2], [3, 0]]), 1.5, reduce="multiply"
    )
    assert twice.tolist() == [[2.0, 2.0, 4.5, 2.0], [3.0, 2.0, 2.0, 3.0]]
    ints = torch.full((3,), 3, dtype=torch.int64)  # the number in the tensor's dtype first
    assert ints.scatter_(0, torch.tensor([1]), 2.5, reduce="multiply").tolist() == [3, 6, 3]


def test_scatter_reduce_errors_say_what_torch_takes(ctx):
    t, index = torch.zeros(3), torch.tensor([0, 1])
    with pytest.raises(TensorError, match="reduce argument must be either sum, prod, mean, amax"):
        t.scatter_reduce(0, index, torch.ones(2), "max")
    with pytest.raises(TensorError, match="reduce argument must be either add or multiply"):
        t.scatter_(0, index, 1.0, reduce="max")
    with pytest.raises(TensorError, match="Expected self.dtype to be equal to src.dtype"):
        t.scatter_reduce(0, index, torch.ones(2, dtype=torch.float64), "sum")
    with pytest.raises(TensorError, match="src: expected a Tensor"):
        t.scatter_reduce(0, index, 1.0, "sum")
    with pytest.raises(TensorError, match="index 5 is out of range"):
        t.scatter_reduce(0, torch.tensor([5]), torch.ones(1), "prod")
    with pytest.raises(TensorError, match="include_self must be True or False"):
        t.scatter_reduce(0, index, torch.ones(2), "sum", include_self="no")


def _scatters(context):
    rng = np.random.default_rng(2)
    index = torch.from_numpy(rng.integers(0, 64, (200, 96)))
    src = torch.from_numpy(rng.standard_normal((200, 96)).astype(np.float32))
    targets = [torch.zeros(64, 96) for _ in range(4)]
    start = context.now
    results = [
        targets[0].scatter_reduce_(0, index, src, "prod"),
        targets[1].scatter_(0, index, src, reduce="multiply"),
        targets[2].scatter_reduce_(0, index, src, "amin", include_self=False),
    ]
    elapsed = context.now - start
    # "mean" adds with tl.atomic_add, whose memory traffic counts the distinct places the
    # lanes hit (all one place in timing-only mode, where the index reads as zeros), so its
    # time is compared on the fast backend only
    results.append(targets[3].scatter_reduce_(0, index, src, "mean", include_self=False))
    return elapsed, results


def test_scatter_reduce_takes_the_same_time_timing_only_and_values_on_the_fast_backend():
    times, (detailed, fast) = in_every_mode(_scatters)
    assert times[0] == times[1]
    assert_same_values(detailed, fast)


def test_a_reducing_scatter_costs_about_what_an_adding_one_does():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        index = torch.zeros(256, 1024, dtype=torch.int64)
        src, target = torch.ones(256, 1024), torch.ones(64, 1024)

        def cost(call):
            return simulated_ps(context, call)

        add = cost(lambda: target.scatter_add_(0, index, src))
        for reduce in ("prod", "amax"):
            update = cost(lambda r=reduce: target.scatter_reduce_(0, index, src, r))
            assert 0.5 * add < update < 2 * add
