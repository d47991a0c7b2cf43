"""Index reads and writes as device kernels (``gather``, ``index_select``, ``take``,
``scatter``, ``scatter_add``, ``index_add``, ``index_copy``, ``F.embedding``) against
NumPy, their bounds checks and errors, and what they cost."""

from __future__ import annotations

import re

import numpy as np
import pytest
from run_modes import simulated_ps as cost

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


RNG = np.random.default_rng(7)
A = RNG.standard_normal((4, 5, 6)).astype(np.float32)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather_matches_take_along_axis(ctx, dim):
    size = A.shape[dim]
    shape = list(A.shape)
    shape[dim] = 3
    index = RNG.integers(0, size, shape)
    t = torch.from_numpy(A)
    for result in (
        t.gather(dim, torch.from_numpy(index)),
        torch.gather(t, dim, torch.tensor(index)),
    ):
        assert result.dtype == torch.float32 and tuple(result.shape) == tuple(shape)
        np.testing.assert_array_equal(result.numpy(), np.take_along_axis(A, index, dim))


def test_gather_with_an_index_smaller_than_the_input(ctx):
    index = np.array([[0, 2], [1, 1]])
    t = torch.from_numpy(A[0])  # (5, 6): the index covers rows 0..1, cols 0..1
    np.testing.assert_array_equal(
        t.gather(1, torch.tensor(index)).numpy(), np.take_along_axis(A[0, :2, :], index, 1)
    )
    assert t.T.gather(0, torch.tensor([[4, 0]])).tolist() == [[A[0, 0, 4], A[0, 1, 0]]]


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_index_select_matches_numpy_take(ctx, dim, index_dtype):
    index = np.array([2, 0, 2, 1], dtype=index_dtype)
    t = torch.from_numpy(A)
    result = torch.index_select(t, dim, torch.from_numpy(index))
    np.testing.assert_array_equal(result.numpy(), np.take(A, index, axis=dim))
    ints = torch.from_numpy(np.arange(12, dtype=np.int16).reshape(3, 4))
    assert ints.index_select(0, torch.tensor([2])).tolist() == [[8, 9, 10, 11]]
    assert ints.index_select(0, torch.tensor([2])).dtype == torch.int16


def test_take_reads_the_flattened_tensor_from_either_end(ctx):
    t = torch.from_numpy(A[:2, :3, :2]).T  # a view that is not one run of memory
    flat = np.ascontiguousarray(A[:2, :3, :2].T).reshape(-1)
    index = np.array([[0, -1], [5, 11]])
    np.testing.assert_array_equal(torch.take(t, torch.tensor(index)).numpy(), flat[index])


def test_scatter_with_src_or_value_and_add(ctx):
    src = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    index = np.array([[0, 2, 1, 0], [2, 2, 0, 1]])
    expected = np.zeros((3, 4), dtype=np.float32)
    added = np.zeros((3, 4), dtype=np.float32)
    for i in range(2):
        for j in range(4):
            expected[index[i, j], j] = src[i, j]
            added[index[i, j], j] += src[i, j]
    z, s, ix = torch.zeros(3, 4), torch.from_numpy(src), torch.tensor(index)
    np.testing.assert_array_equal(z.scatter(0, ix, s).numpy(), expected)
    np.testing.assert_array_equal(torch.scatter(z, 0, ix, s).numpy(), expected)
    assert z.tolist() == [[0.0] * 4] * 3  # out of place leaves z alone
    np.testing.assert_array_equal(z.scatter_add(0, ix, s).numpy(), added)
    np.testing.assert_array_equal(torch.scatter_add(z, 0, ix, s).numpy(), added)
    np.testing.assert_array_equal(z.clone().scatter_(0, ix, s, reduce="add").numpy(), added)
    assert z.scatter_(1, torch.tensor([[3], [0], [1]]), 2.5) is z
    assert z.tolist() == [[0, 0, 0, 2.5], [2.5, 0, 0, 0], [0, 2.5, 0, 0]]
    w = torch.zeros(2, 3, dtype=torch.int32)
    w.scatter_(1, torch.tensor([[0, 0, 0]]), 4, reduce="add")  # repeated indices add up
    assert w.tolist() == [[12, 0, 0], [0, 0, 0]]


def test_scatter_into_a_view_that_is_not_one_run_writes_back(ctx):
    base = torch.zeros(4, 3)
    column = base[:, 1]
    column.scatter_(0, torch.tensor([3, 0]), torch.tensor([5.0, 6.0]))
    assert base[:, 1].tolist() == [6.0, 0.0, 0.0, 5.0] and base.sum().item() == 11.0
    t = torch.zeros(3, 3)
    t.scatter_(0, torch.tensor([[2]]), torch.ones(2, 2))  # src and self larger than index
    assert t.tolist() == [[0, 0, 0], [0, 0, 0], [1, 0, 0]]


def test_index_add_and_index_copy(ctx):
    base = np.ones((5, 2), dtype=np.float32)
    source = np.arange(6, dtype=np.float32).reshape(3, 2)
    index = np.array([0, 4, 0])
    expected = base.copy()
    np.add.at(expected, index, 2 * source)
    t = torch.from_numpy(base.copy())
    assert t.index_add_(0, torch.tensor(index), torch.from_numpy(source), alpha=2) is t
    np.testing.assert_array_equal(t.numpy(), expected)
    fresh = torch.index_add(torch.ones(5, 2), 0, torch.tensor(index), torch.from_numpy(source))
    once = base.copy()
    np.add.at(once, index, source)
    np.testing.assert_array_equal(fresh.numpy(), once)
    copied = torch.zeros(2, 5).index_copy(1, torch.tensor([4, 1]), torch.ones(2, 2))
    assert copied.tolist() == [[0, 1, 0, 0, 1], [0, 1, 0, 0, 1]]
    t2 = torch.zeros(2, 5)
    assert t2.index_copy_(1, torch.tensor([3]), torch.full((2, 1), 7.0)) is t2
    assert t2[:, 3].tolist() == [7.0, 7.0]


def test_embedding_is_an_index_select_of_rows(ctx):
    weight = RNG.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[1, 9, 0], [3, 3, 2]])
    result = F.embedding(torch.tensor(ids), torch.from_numpy(weight), padding_idx=0)
    assert tuple(result.shape) == (2, 3, 4)
    np.testing.assert_array_equal(result.numpy(), weight[ids])
    with pytest.raises(TensorError, match="index 10 is out of range .* with size 10"):
        F.embedding(torch.tensor([10]), torch.from_numpy(weight))
    with pytest.raises(TensorError, match="'indices' to have one of the following scalar types"):
        F.embedding(torch.tensor([1.0]), torch.from_numpy(weight))
    with pytest.raises(TensorError, match="padding_idx 10 must be within num_embeddings"):
        F.embedding(torch.tensor([1]), torch.from_numpy(weight), padding_idx=10)


@pytest.mark.parametrize(
    ("call", "says"),
    [
        ("t.gather(1, torch.tensor([[6]]))", "index 6 is out of range for dimension 1 of 't"),
        ("t.gather(0, torch.tensor([[-1]]))", r"index -1 is out of range .*valid: \[0, 4\)"),
        ("t.index_select(0, torch.tensor([0, 4]))", r"with size 4 \(valid: \[0, 4\)\)"),
        ("t.take(torch.tensor([-25]))", r"index -25 .* \(valid: \[-24, 24\)\)"),
        ("t.scatter(1, torch.tensor([[6]]), 1.0)", "index 6 is out of range"),
        ("t.index_add(1, torch.tensor([9]), torch.ones(4, 1))", "index 9 is out of range"),
        ("t.gather(0, torch.tensor([[0]], dtype=torch.int32))", "Expected dtype int64 for index"),
        ("t.index_select(0, torch.tensor([0.0]))", "Expected dtype int32 or int64 for index"),
        ("t.gather(0, torch.tensor([0]))", "index of shape .1,. must have the input's 2 dims"),
        ("t.index_select(0, torch.tensor([[0]]))", "Index is supposed to be a vector"),
        ("t.scatter_(0, torch.tensor([[0]]), torch.ones(1))", "index of shape .1, 1. must have"),
        ("t.scatter_(1, torch.tensor([[0, 1]]), torch.ones(1, 1))", "no larger than src"),
        (
            "t.scatter_(0, torch.tensor([[0]]), torch.ones(1, 1, dtype=torch.int32))",
            "Expected self.dtype to be equal to src.dtype",
        ),
        (
            "t.scatter_(0, torch.tensor([[0]]), torch.ones(1, 1), reduce='max')",
            "reduce argument must be either add or multiply",
        ),
        ("t.index_copy_(0, torch.tensor([0]), torch.ones(2, 6))", r"source of shape \(1, 6\)"),
        (
            "torch.zeros(2, dtype=torch.int32).index_add_(0, torch.tensor([0]), "
            "torch.ones(1, dtype=torch.int32), alpha=0.5)",
            "For integral input tensors, argument alpha must not be a floating point",
        ),
        (
            "t.index_add_(0, torch.tensor([0]), torch.ones(1, 6, dtype=torch.int64))",
            "must have the same scalar type",
        ),
    ],
)
def test_bad_indices_and_arguments_are_refused_by_name(ctx, call, says):
    t = torch.zeros(4, 6)  # noqa: F841 - read by eval
    with pytest.raises(TensorError, match=says):
        eval(call)


def test_index_ops_on_empty_and_zero_dim_tensors(ctx):
    assert tuple(torch.ones(3, 2).index_select(0, torch.tensor([], dtype=torch.int64)).shape) == (
        0,
        2,
    )
    assert torch.tensor(5.0).gather(0, torch.tensor(0)).item() == 5.0
    assert torch.tensor(5.0).take(torch.tensor([0, 0])).tolist() == [5.0, 5.0]
    z = torch.tensor(1.0)
    assert z.scatter_(0, torch.tensor(0), 3.0).item() == 3.0
    assert re.search("take", torch.take.__doc__)


def test_index_ops_cost_about_a_copy_of_what_they_move():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        table = torch.ones(50000, 256)
        rows = torch.zeros(8192, dtype=torch.int64)
        picked = torch.ones(8192, 256)
        copy = cost(context, lambda: picked.clone())
        select = cost(context, lambda: table.index_select(0, rows))
        assert copy < select <= 3 * copy  # the index read on top
        more = torch.zeros(32768, dtype=torch.int64)
        assert cost(context, lambda: table.index_select(0, more)) > 3 * select
        grads = torch.ones(8192, 256)
        assert copy < cost(context, lambda: table.index_add_(0, rows, grads)) <= 4 * copy
        index = torch.zeros(4096, 256, dtype=torch.int64)
        gathered = torch.ones(4096, 256)
        half = cost(context, lambda: gathered.clone())  # the values gathered
        assert half < cost(context, lambda: table.gather(0, index)) <= 4 * half


def test_index_ops_take_the_same_time_timing_only():
    times = []
    for timing_only in (False, True):
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            t = torch.ones(300, 20)
            index = torch.zeros(50, 20, dtype=torch.int64)
            start = context.now
            t.gather(0, index)
            t.scatter_add_(0, index, torch.ones(50, 20))
            t.index_select(1, torch.zeros(7, dtype=torch.int64))
            F.embedding(torch.zeros(3, 4, dtype=torch.int64), t)
            times.append(context.now - start)
    assert times[0] == times[1]
