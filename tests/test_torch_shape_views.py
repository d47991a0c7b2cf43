"""``broadcast_to``/``broadcast_tensors``, ``narrow``, ``tensor_split``, ``swapaxes``/
``swapdims``, ``unfold`` and ``atleast_1d/2d/3d``: NumPy's values, views that share memory
and cost no simulated time, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def _free_views(ctx, make):
    """``make()``'s views and the simulated time they took (none)."""
    before = ctx.now
    views = make()
    assert ctx.now == before
    return views


def test_broadcasts_are_stride_0_views(ctx):
    row = torch.from_numpy(np.arange(3, dtype=np.float32))
    col = torch.from_numpy(np.arange(2, dtype=np.float32).reshape(2, 1))
    b, (x, y) = _free_views(
        ctx, lambda: (torch.broadcast_to(row, (4, 3)), torch.broadcast_tensors(row, col))
    )
    np.testing.assert_array_equal(b.numpy(), np.broadcast_to(np.arange(3), (4, 3)))
    assert b.stride() == (0, 1) and row.broadcast_to((-1,)).shape == (3,)
    np.testing.assert_array_equal(x.numpy(), np.broadcast_to(np.arange(3), (2, 3)))
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(np.arange(2)[:, None], (2, 3)))
    row[0] = 9.0
    assert b[3, 0].item() == 9.0  # shares memory
    assert torch.broadcast_tensors() == ()
    with pytest.raises(TensorError, match=r"broadcast_to \(3,\) to \(4, 2\): expand"):
        torch.broadcast_to(row, (4, 2))
    with pytest.raises(TensorError, match="torch.broadcast_tensors: shapes"):
        torch.broadcast_tensors(row, torch.ones(2))


@pytest.mark.parametrize(
    ("split", "dim"), [(3, 1), (5, 2), (1, 0), ([1, 3], 2), ([-1], 1), ([2, 1, 7], 2), ([], 0)]
)
def test_tensor_split_is_numpys_array_split(ctx, split, dim):
    t = torch.from_numpy(A)
    pieces = _free_views(ctx, lambda: t.tensor_split(split, dim))
    expected = np.array_split(A, split, axis=dim)
    assert len(pieces) == len(expected)
    for got, want in zip(pieces, expected, strict=True):
        assert got.storage_device_tensor is t.storage_device_tensor
        np.testing.assert_array_equal(got.numpy(), want)
    again = torch.tensor_split(t, torch.tensor(split) if split else split, dim)
    assert [tuple(p.shape) for p in again] == [p.shape for p in expected]


def test_tensor_split_errors_are_torchs(ctx):
    t = torch.from_numpy(A)
    with pytest.raises(TensorError, match="number of sections must be larger than 0, got 0"):
        t.tensor_split(0)
    with pytest.raises(TensorError, match="expected at least a 1-dimensional tensor"):
        torch.tensor(1.0).tensor_split(2)
    with pytest.raises(TensorError, match="to have dtype of long, but got torch.int32"):
        t.tensor_split(torch.tensor([1], dtype=torch.int32))
    with pytest.raises(TensorError, match="zero-dimensional or one-dimensional"):
        t.tensor_split(torch.ones(1, 1, dtype=torch.int64))
    with pytest.raises(TensorError, match="tensor_split: dim 3 is out of range"):
        t.tensor_split(2, 3)


def test_narrow_and_swaps_are_views(ctx):
    t = torch.from_numpy(A)
    n, s, d, m = _free_views(
        ctx,
        lambda: (
            torch.narrow(t, -1, 1, 2),
            torch.swapaxes(t, 0, 2),
            torch.swapdims(t, -1, 1),
            t.swapdims(0, 1),
        ),
    )
    np.testing.assert_array_equal(n.numpy(), A[..., 1:3])
    np.testing.assert_array_equal(s.numpy(), A.swapaxes(0, 2))
    np.testing.assert_array_equal(d.numpy(), A.swapaxes(-1, 1))
    np.testing.assert_array_equal(m.numpy(), A.swapaxes(0, 1))
    with pytest.raises(TensorError, match="narrow: start"):
        torch.narrow(t, 0, 3, 1)


@pytest.mark.parametrize(("dim", "size", "step"), [(0, 1, 1), (1, 2, 1), (2, 3, 2), (-1, 4, 3)])
def test_unfold_is_a_sliding_window_view(ctx, dim, size, step):
    t = torch.from_numpy(A)
    u = _free_views(ctx, lambda: t.unfold(dim, size, step))
    windows = np.lib.stride_tricks.sliding_window_view(A, size, axis=dim)
    index = [slice(None)] * 3
    index[dim] = slice(None, None, step)
    np.testing.assert_array_equal(u.numpy(), windows[tuple(index)])
    assert u.storage_device_tensor is t.storage_device_tensor


def test_unfold_of_a_0d_tensor_and_its_errors(ctx):
    s = torch.tensor(5.0)
    assert s.unfold(0, 1, 1).tolist() == [5.0] and s.unfold(0, 0, 1).shape == (0,)
    t = torch.ones(3, 4)
    with pytest.raises(
        TensorError, match="maximum size for tensor at dimension 1 is 4 but size is 5"
    ):
        t.unfold(1, 5, 1)
    with pytest.raises(TensorError, match="step is 0 but must be > 0"):
        t.unfold(1, 2, 0)
    with pytest.raises(TensorError, match="size is -1 but must be >= 0"):
        t.unfold(0, -1, 1)
    with pytest.raises(TensorError, match="unfold: dim 2 is out of range"):
        t.unfold(2, 1, 1)


def test_atleast_nd_add_dims_as_numpy(ctx):
    arrays = [np.float32(3), np.arange(3, dtype=np.float32), np.ones((2, 3), np.float32), A]
    tensors = [torch.from_numpy(np.asarray(a)) for a in arrays]
    for fn, ref in (
        (torch.atleast_1d, np.atleast_1d),
        (torch.atleast_2d, np.atleast_2d),
        (torch.atleast_3d, np.atleast_3d),
    ):
        got = _free_views(ctx, lambda fn=fn: fn(*tensors))
        assert isinstance(got, tuple)
        for g, want in zip(got, ref(*arrays), strict=True):
            np.testing.assert_array_equal(g.numpy(), want)
        single = fn(tensors[1])
        assert not isinstance(single, tuple) and single.shape == ref(arrays[1]).shape
        assert isinstance(fn([tensors[0]]), tuple)
    with pytest.raises(
        TensorError, match="torch.atleast_2d: expected Tensors or a sequence of Tensors, got 3"
    ):
        torch.atleast_2d(3)
