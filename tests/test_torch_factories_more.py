"""kernbench.torch's ``eye``/``linspace``/``logspace``/``randperm``, the index factories,
the stacks, ``meshgrid``, ``flip``/``roll``/``diagonal``/``diag``/``diff``,
``nan_to_num``/``count_nonzero``, ``new_tensor`` and the host-read ``unique``/``bincount``/
``multinomial`` against NumPy, with their errors and costs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import KernBenchError, TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context
    torch.manual_seed(0)


def _kernels(ctx, since: int) -> list[str]:
    return [row.tag for row in ctx.trace[since:] if row.kind == "kernel"]


def _grid(shape=(2, 3, 4)) -> np.ndarray:
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 5


# ----------------------------------------------------------------------------- factories


def test_eye_matches_numpy(ctx):
    assert torch.eye(3).dtype is torch.float32
    np.testing.assert_array_equal(torch.eye(3).numpy(), np.eye(3))
    np.testing.assert_array_equal(torch.eye(2, 4, dtype=torch.int64).numpy(), np.eye(2, 4))
    assert torch.eye(2, dtype=torch.int64).dtype is torch.int64
    assert torch.eye(0).shape == (0, 0) and torch.eye(3, 0).shape == (3, 0)
    with pytest.raises(TensorError, match="eye: n and m must be greater or equal to 0"):
        torch.eye(-1)
    with pytest.raises(TensorError, match="eye: n must be an int"):
        torch.eye(2.5)


def test_linspace_and_logspace_match_numpy(ctx):
    for start, end, steps in ((0, 1, 5), (-3.5, 7.25, 11), (2, -2, 2), (1, 5, 1), (0, 1, 0)):
        got = torch.linspace(start, end, steps)
        assert got.dtype is torch.float32 and got.shape == (steps,)
        np.testing.assert_allclose(got.numpy(), np.linspace(start, end, steps), rtol=1e-6)
    wide = torch.linspace(0, 1, 7, dtype=torch.float64)
    assert wide.dtype is torch.float64
    np.testing.assert_allclose(wide.numpy(), np.linspace(0, 1, 7), rtol=1e-15)
    assert torch.linspace(0, 1, 5).numpy()[-1] == 1.0  # the end is exact, as torch's
    np.testing.assert_allclose(torch.logspace(-2, 2, 5).numpy(), np.logspace(-2, 2, 5), rtol=1e-6)
    np.testing.assert_allclose(
        torch.logspace(0, 3, 4, base=2).numpy(), np.logspace(0, 3, 4, base=2), rtol=1e-6
    )
    out = torch.empty(3)
    assert torch.linspace(0, 2, 3, out=out) is out and out.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TensorError, match="linspace: number of steps must be non-negative"):
        torch.linspace(0, 1, -1)
    with pytest.raises(TensorError, match="linspace: steps must be an int"):
        torch.linspace(0, 1, 2.0)


def test_linspace_is_one_kernel(ctx):
    before = len(ctx.trace)
    torch.linspace(0, 1, 100)
    assert _kernels(ctx, before) == ["_linspace_kernel"]


def test_randperm_draws_from_the_rank_generator(ctx):
    torch.manual_seed(3)
    first = torch.randperm(10)
    assert first.dtype is torch.int64 and sorted(first.tolist()) == list(range(10))
    torch.manual_seed(3)
    assert torch.randperm(10).tolist() == first.tolist()
    g = torch.Generator().manual_seed(3)
    assert sorted(torch.randperm(5, generator=g, dtype=torch.int32).tolist()) == list(range(5))
    assert torch.randperm(0).shape == (0,)
    with pytest.raises(TensorError, match="randperm: n must be a non-negative int"):
        torch.randperm(-1)


@pytest.mark.parametrize(("row", "col", "offset"), [(3, 3, 0), (4, 2, 1), (3, 5, -1), (0, 3, 0)])
def test_tril_and_triu_indices_match_numpy(ctx, row, col, offset):
    lower = torch.tril_indices(row, col, offset)
    assert lower.dtype is torch.int64 and lower.shape[0] == 2
    np.testing.assert_array_equal(lower.numpy(), np.stack(np.tril_indices(row, offset, col)))
    upper = torch.triu_indices(row, col, offset)
    np.testing.assert_array_equal(upper.numpy(), np.stack(np.triu_indices(row, offset, col)))
    with pytest.raises(TensorError, match="tril_indices: row and col must be non-negative"):
        torch.tril_indices(-1, 2)


def test_stacks_match_numpy(ctx):
    a, b = np.arange(3, dtype=np.float32), np.arange(3, 6, dtype=np.float32)
    m, n = _grid((2, 3)), _grid((2, 3)) * 2
    ta, tb, tm, tn = map(torch.from_numpy, (a, b, m, n))
    for name in ("hstack", "vstack", "dstack"):
        ours, theirs = getattr(torch, name), getattr(np, name)
        np.testing.assert_array_equal(ours([ta, tb]).numpy(), theirs([a, b]))
        np.testing.assert_array_equal(ours((tm, tn)).numpy(), theirs([m, n]))
    np.testing.assert_array_equal(torch.concat([tm, tn], 1).numpy(), np.concatenate([m, n], 1))
    assert torch.concatenate is torch.cat
    with pytest.raises(TensorError, match="torch.hstack needs a non-empty sequence of Tensors"):
        torch.hstack([])


def test_meshgrid_gives_views_with_either_indexing(ctx):
    x, y = torch.arange(3), torch.arange(2)
    gx, gy = torch.meshgrid(x, y, indexing="xy")
    nx, ny = np.meshgrid(np.arange(3), np.arange(2), indexing="xy")
    np.testing.assert_array_equal(gx.numpy(), nx)
    np.testing.assert_array_equal(gy.numpy(), ny)
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        ix, iy = torch.meshgrid([x, y])
    assert ix.shape == (3, 2) and ix.stride() == (1, 0)  # a broadcast view, as torch's
    np.testing.assert_array_equal(
        iy.numpy(), np.meshgrid(np.arange(3), np.arange(2), indexing="ij")[1]
    )
    with pytest.raises(TensorError, match='indexing must be one of "xy" or "ij"'):
        torch.meshgrid(x, y, indexing="yx")
    got = torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5]))
    assert got.tolist() == [[1, 3], [1, 4], [1, 5], [2, 3], [2, 4], [2, 5]]


# ----------------------------------------------------------------------------- rearranging


@pytest.mark.parametrize("dims", [(0,), (2,), (0, 2), (-1, 1), (0, 1, 2)])
def test_flip_matches_numpy_in_one_kernel(ctx, dims):
    a = _grid()
    x = torch.from_numpy(a)
    before = len(ctx.trace)
    got = x.flip(dims)
    assert _kernels(ctx, before) == ["_strided_copy_kernel"]
    np.testing.assert_array_equal(got.numpy(), np.flip(a, dims))
    np.testing.assert_array_equal(
        torch.flip(x.transpose(0, 2), dims).numpy(), np.flip(a.transpose(2, 1, 0), dims)
    )
    np.testing.assert_array_equal(torch.fliplr(x[0]).numpy(), np.fliplr(a[0]))
    np.testing.assert_array_equal(torch.flipud(x[0]).numpy(), np.flipud(a[0]))
    with pytest.raises(TensorError, match="flip: dims .* has a dim more than once"):
        x.flip(0, 0)


@pytest.mark.parametrize(("shifts", "dims"), [(1, 0), (-2, 2), ((1, 3), (0, 2)), (7, None), (0, 1)])
def test_roll_matches_numpy(ctx, shifts, dims):
    a = _grid()
    np.testing.assert_array_equal(
        torch.roll(torch.from_numpy(a), shifts, dims).numpy(), np.roll(a, shifts, dims)
    )


def test_roll_errors_name_the_call(ctx):
    with pytest.raises(TensorError, match="roll: shifts and dimensions must align"):
        torch.ones(2, 3).roll((1, 2), 0)
    with pytest.raises(TensorError, match="roll: dim 3 is out of range"):
        torch.ones(2, 3).roll(1, 3)


@pytest.mark.parametrize(("offset", "dim1", "dim2"), [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (5, 0, 1)])
def test_diagonal_is_a_view(ctx, offset, dim1, dim2):
    a = _grid()
    x = torch.from_numpy(a)
    before = len(ctx.trace)
    d = torch.diagonal(x, offset, dim1, dim2)
    assert _kernels(ctx, before) == []
    np.testing.assert_array_equal(d.numpy(), np.diagonal(a, offset, dim1, dim2))
    if d.numel():
        d.fill_(100)  # a view: the base sees it
        assert (np.diagonal(x.numpy(), offset, dim1, dim2) == 100).all()
    with pytest.raises(TensorError, match="diagonal dimensions cannot be identical"):
        x.diagonal(0, 1, 1)


def test_diag_both_ways(ctx):
    v = np.array([1.0, 2.0, 3.0], np.float32)
    for k in (0, 1, -2):
        np.testing.assert_array_equal(torch.diag(torch.from_numpy(v), k).numpy(), np.diag(v, k))
        m = _grid((3, 4))
        got = torch.from_numpy(m).diag(k)
        np.testing.assert_array_equal(got.numpy(), np.diag(m, k))
    with pytest.raises(TensorError, match="diag\\(\\): Supports 1D or 2D tensors. Got 3D"):
        torch.diag(torch.ones(2, 2, 2))


def test_diff_matches_numpy(ctx):
    a = _grid() ** 2
    x = torch.from_numpy(a)
    for n, dim in ((1, -1), (2, 1), (3, 0), (0, 1)):
        np.testing.assert_array_equal(torch.diff(x, n, dim).numpy(), np.diff(a, n, dim))
    pre, app = np.zeros((2, 3, 1), np.float32), np.ones((2, 3, 2), np.float32)
    got = x.diff(prepend=torch.from_numpy(pre), append=torch.from_numpy(app))
    np.testing.assert_array_equal(got.numpy(), np.diff(a, prepend=pre, append=app))
    flags = torch.tensor([True, True, False, True])
    assert flags.diff().tolist() == [False, True, True]
    assert torch.tensor([1, 4, 9]).diff().dtype is torch.int64
    with pytest.raises(TensorError, match="diff: order must be non-negative"):
        x.diff(-1)


def test_nan_to_num_and_count_nonzero(ctx):
    a = np.array([np.nan, np.inf, -np.inf, -1.5, 0.0], np.float32)
    before = len(ctx.trace)
    got = torch.nan_to_num(torch.from_numpy(a))
    assert _kernels(ctx, before) == ["_nan_to_num_kernel"]
    np.testing.assert_array_equal(got.numpy(), np.nan_to_num(a))
    np.testing.assert_array_equal(
        torch.from_numpy(a).nan_to_num(1.0, 2.0, -3.0).numpy(),
        np.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-3.0),
    )
    h = torch.from_numpy(a).half()
    assert h.nan_to_num_() is h
    assert h.tolist()[1:3] == [65504.0, -65504.0]
    assert torch.tensor([1, 2]).nan_to_num().tolist() == [1, 2]
    m = _grid()
    count = torch.count_nonzero(torch.from_numpy(m))
    assert count.dtype is torch.int64 and count.item() == np.count_nonzero(m)
    np.testing.assert_array_equal(
        torch.from_numpy(m).count_nonzero((0, 2)).numpy(), np.count_nonzero(m, axis=(0, 2))
    )
    with pytest.raises(TensorError, match="nan_to_num: nan must be a number"):
        torch.nan_to_num(torch.ones(2), nan="0")


def test_new_tensor_takes_the_tensors_dtype(ctx):
    x = torch.ones(2, dtype=torch.float16)
    got = x.new_tensor([[1, 2], [3, 4]])
    assert got.dtype is torch.float16 and got.tolist() == [[1, 2], [3, 4]]
    assert x.new_tensor(3.5, dtype=torch.float64).dtype is torch.float64
    assert x.new_tensor(torch.tensor([1, 2])).dtype is torch.float16
    with pytest.raises(TensorError, match="new_tensor: data must be a number or nested lists"):
        x.new_tensor([[1, 2], [3]])


# ----------------------------------------------------------------------------- host reads


def test_unique_matches_numpy(ctx):
    a = np.array([[3, 1, 3], [2, 1, 3]], np.int64)
    x = torch.from_numpy(a)
    values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
    want, where, many = np.unique(a, return_inverse=True, return_counts=True)
    assert values.dtype is torch.int64 and values.tolist() == want.tolist()
    assert inverse.shape == a.shape and inverse.numpy().ravel().tolist() == where.ravel().tolist()
    assert counts.dtype is torch.int64 and counts.tolist() == many.tolist()
    rows = x.unique(dim=1)
    np.testing.assert_array_equal(rows.numpy(), np.unique(a, axis=1))
    assert torch.tensor([2.5, 1.0, 2.5]).unique().tolist() == [1.0, 2.5]


def test_bincount_matches_numpy_with_torchs_dtypes(ctx):
    a = np.array([0, 3, 3, 1], np.int64)
    got = torch.bincount(torch.from_numpy(a))
    assert got.dtype is torch.int64 and got.tolist() == np.bincount(a).tolist()
    assert (
        torch.from_numpy(a).bincount(minlength=6).tolist() == np.bincount(a, minlength=6).tolist()
    )
    w32 = torch.tensor([0.5, 1.0, 2.0, 4.0])
    assert torch.bincount(torch.from_numpy(a), w32).dtype is torch.float32
    w16 = w32.half()
    got = torch.bincount(torch.from_numpy(a), w16)
    assert got.dtype is torch.float64 and got.tolist() == [0.5, 4.0, 0.0, 3.0]
    with pytest.raises(TensorError, match="bincount only supports 1-d non-negative integral"):
        torch.bincount(torch.tensor([-1, 2]))
    with pytest.raises(TensorError, match="bincount only supports 1-d non-negative integral"):
        torch.bincount(torch.tensor([1.0]))
    with pytest.raises(TensorError, match="weights should be 1-d and have the same length"):
        torch.bincount(torch.tensor([1, 2]), torch.ones(3))


def test_multinomial_draws_from_the_rank_generator(ctx):
    probs = torch.tensor([[0.0, 1.0, 0.0, 3.0], [1.0, 1.0, 1.0, 1.0]])
    torch.manual_seed(5)
    with_replacement = torch.multinomial(probs, 50, replacement=True)
    assert with_replacement.dtype is torch.int64 and with_replacement.shape == (2, 50)
    assert set(with_replacement[0].tolist()) <= {1, 3}
    torch.manual_seed(5)
    assert torch.multinomial(probs, 50, True).tolist() == with_replacement.tolist()
    without = probs[1].multinomial(4)
    assert sorted(without.tolist()) == [0, 1, 2, 3]
    with pytest.raises(TensorError, match="not enough non-negative category to sample"):
        torch.multinomial(probs, 3)
    with pytest.raises(TensorError, match="cannot sample n_sample > prob_dist.size"):
        torch.multinomial(probs, 5)
    with pytest.raises(TensorError, match="probability tensor contains either `inf`, `nan`"):
        torch.multinomial(torch.tensor([1.0, -1.0]), 1)


def test_host_reads_cost_a_read_and_a_copy(ctx):
    x = torch.from_numpy(np.arange(1000) % 7)
    before = ctx.now
    x.nonzero()
    nonzero = ctx.now - before
    before = ctx.now
    x.unique()
    unique = ctx.now - before
    assert 0 < unique <= 1.5 * nonzero  # a read and a copy back, as nonzero costs


def test_errors_are_kernbench_errors(ctx):
    for call in (
        lambda: torch.flip([1, 2], 0),
        lambda: torch.unique("ab"),
        lambda: torch.diagonal(torch.ones(3)),
    ):
        with pytest.raises(KernBenchError, match="torch.flip|torch.unique|diagonal: input must"):
            call()


def test_timing_only_costs_what_a_run_with_values_costs():
    def run(timing_only: bool) -> int:
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            x = torch.ones(64, 128)
            before = context.now
            torch.eye(128)
            torch.linspace(0, 1, 1000)
            x.flip(0)
            x.roll(3, 1)
            x[:, :64].diag()
            x.diff()
            x.nan_to_num()
            torch.hstack([x, x])
            torch.randperm(100)
            return context.now - before

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run(True) == run(False)
